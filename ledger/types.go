package ledger

import (
	"time"

	"gatehouse/destination"
)

// State is where a business action stands (see DESIGN.md, "Action states").
type State string

// Action states.
const (
	StateDrafting         State = "drafting"
	StateAwaitingApproval State = "awaiting_approval"
	StateApproved         State = "approved"
	StateExecuting        State = "executing"
	StateSent             State = "sent"
	StateUnknown          State = "unknown"
	StateFailed           State = "failed"
	StateDenied           State = "denied"
	StateHeld             State = "held"
	StateCancelled        State = "cancelled"
)

// AllStates lists every state in lifecycle order.
var AllStates = []State{StateDrafting, StateAwaitingApproval, StateApproved,
	StateExecuting, StateSent, StateUnknown, StateFailed, StateDenied,
	StateHeld, StateCancelled}

// Settled reports whether the state is an end state: the action has a
// recorded result and nothing more will happen to it without a person.
func (s State) Settled() bool {
	switch s {
	case StateSent, StateFailed, StateDenied, StateCancelled:
		return true
	}
	return false
}

// HoldCause says why an action is held.
type HoldCause string

// Hold causes.
const (
	HoldOperator          HoldCause = "operator"           // a person put it on hold
	HoldOwnerMissing      HoldCause = "owner_missing"      // the task had no owner at execution
	HoldSourceUnavailable HoldCause = "source_unavailable" // a material source could not be re-read
	HoldStopped           HoldCause = "stopped"            // the stop switch was on at execution
	HoldUnknownOutcome    HoldCause = "unknown_outcome"    // outcome unknown and not reconciled
	HoldSafeToRetry       HoldCause = "safe_to_retry"      // reconciliation proved nothing arrived
	HoldContradiction     HoldCause = "contradiction"      // the destination's records contradict the attempt
	HoldNotFoundYet       HoldCause = "not_found_yet"      // nothing found, but the message may still land
	HoldArrivedLate       HoldCause = "arrived_late"       // nothing more to retry: an earlier attempt arrived after all
	// HoldProbeDue: an HTTP request's outcome is unknown at a provider that
	// keeps its key, within the key's window: the next send repeats the
	// same bytes with the same key (a probe), through every check of a send.
	HoldProbeDue HoldCause = "probe_due"
)

// outcomeOpen reports whether the hold sits on an attempt whose outcome is
// not established: the message may have arrived, so nothing may start again
// until reconciliation or a person settles it.
func (c HoldCause) outcomeOpen() bool {
	return c == HoldUnknownOutcome || c == HoldContradiction || c == HoldNotFoundYet || c == HoldProbeDue
}

// OutcomeOpen reports whether a hold of this cause sits on an attempt
// whose outcome is not established (see the review's in-flight bucket).
func (c HoldCause) OutcomeOpen() bool { return c.outcomeOpen() }

// Task is the helpdesk conversation actions belong to, with its
// authoritative owner.
type Task struct {
	ID        string
	Customer  string
	Subject   string
	Status    string // open | completed
	Owner     string // "" when nobody owns it
	Version   int64
	UpdatedAt time.Time
}

// Presence is an advisory marker of who or what is on a task right now.
type Presence struct {
	TaskID    string
	Actor     string
	Kind      string // viewer | automation
	Since     time.Time
	ExpiresAt time.Time
}

// Action is one business action and its current content.
type Action struct {
	Key        string
	TaskID     string
	Customer   string
	Event      string
	ActionType string
	Target     string
	Revision   int
	Recipient  string
	// RecipientName is the display name shown with the recipient ("" for none).
	RecipientName string
	// Destination is where the message is handed over, without credentials
	// (see Destination.Identity); "" only on actions recorded before
	// destinations were bound.
	Destination string
	// Lookup is where the destination's records are consulted (a test
	// mailbox API, an HTTP destination's duplicate control); bound by the
	// approval digest, since other records could prove a sent message
	// absent. A send that names no destination reaches it with it.
	Lookup string
	// DestinationSettings are the connection settings the destination is
	// reached with (destination.Endpoint.Settings), kept from the proposal;
	// never approved and never a secret.
	DestinationSettings string
	// Settle is the settle time of the endpoint it was proposed for, which
	// its approval binds (SettleUnbound on actions recorded before
	// approvals bound one).
	Settle  time.Duration
	Sender  string // the From address the approval binds
	Subject string
	Body    string
	// Request is the canonical JSON of the HTTP request the action is
	// (destination.Request.Canonical), "" for a message: what the approval
	// digest binds in place of subject and body.
	Request      string
	Digest       string
	State        State
	Reason       string    // why it is in its state, in plain words
	HoldCause    HoldCause // set while held
	ProposedBy   string
	Corrects     string // key of the action this one corrects
	LateArrivals int    // attempts settled as not arrived whose message arrived after all
	Version      int64
	CreatedAt    time.Time
	UpdatedAt    time.Time
}

// MaterialRead is one material field value as read from its source.
type MaterialRead struct {
	Source      string // e.g. "crm", "helpdesk"
	Field       string // e.g. "consent"
	Value       string
	Unavailable bool // the source could not be read
}

// Name is "source.field".
func (m MaterialRead) Name() string { return m.Source + "." + m.Field }

// Approval is a decision bound to recipient, target, content digest, owner and
// the material snapshot. It is valid only while all of them still hold.
type Approval struct {
	ID          int64
	ActionKey   string
	Approver    string
	Digest      string
	Recipient   string
	Target      string
	Destination string // "" on approvals recorded before destinations were bound
	Sender      string
	Owner       string
	Material    []MaterialRead
	At          time.Time
	Valid       bool
	Invalidated string // why it stopped being valid
	// PolicyVersion is the version of the approval policies the approval
	// was given under on a registered ledger (0: an open ledger's).
	PolicyVersion int64
	// Settle is the settle time the approval bound: a send whose
	// destination declares another is refused, and every attempt under it
	// settles on it. SettleUnbound on approvals recorded before approvals
	// bound one (see settleOf).
	Settle time.Duration
}

// Attempt is one try at the destination.
type Attempt struct {
	ID          int64
	ActionKey   string
	Number      int
	TransportID string
	Executor    string
	Holder      string // host/boot/pid-namespace:pid of the executing process (see processHolder)
	// What the durable intent recorded about where the message went and what
	// it was: the only evidence reconciliation may use.
	Destination string // destination identity, without credentials
	Lookup      string // where the destination's records are consulted ("" for none)
	Epoch       string // the epoch those records reported when the attempt began ("" for none)
	MessageID   string // the Message-ID the message carries, without angle brackets
	Recipient   string
	Sender      string
	// ContentDigest is destination.ContentDigest of what was handed over
	// ("" on attempts recorded before intents kept it); for a request,
	// destination.RequestDigest of the approved request.
	ContentDigest string
	// An attempt of an HTTP request records the exact bytes it hands over
	// (Wire), the provider-facing key they carry and that key's
	// generation, the HTTP status answered (0 for none) and the provider's
	// id of what the write created. MessageID is the provider-facing key.
	Wire          string
	ProviderKey   string
	KeyGeneration int
	HTTPStatus    int
	DestinationID string
	// SettlesAt is when the attempt's message can no longer land: its
	// lease's end plus the destination's settle time. Before it, records
	// that hold nothing prove nothing.
	SettlesAt  time.Time
	StartedAt  time.Time
	LeaseUntil time.Time
	Outcome    destination.Outcome // "" while in flight
	OutcomeAt  time.Time
	Response   string
	Reconciled bool // the outcome was established by reconciliation
	// ArrivedLate is when the gate learned that the attempt's message
	// arrived although the attempt was settled as not arrived (a late 250,
	// or its message found in the records); zero while it has not. The
	// outcome stays as it was settled: this is evidence beside it.
	ArrivedLate time.Time
	// write is what an HTTP attempt hands over (nil for a message); probe
	// says it repeats the attempt before it under the same key.
	write *destination.HTTPWrite
	probe bool
	// begun is when BeginAttempt(s) returned the attempt to this process, on
	// the ledger's clock in this process (not the server's, which can
	// disagree): Deliver bounds the send from here.
	begun time.Time
}

// MaterialCheck records one re-read of a material field before execution.
type MaterialCheck struct {
	ActionKey   string
	Attempt     int // 0 when execution was refused before an attempt
	At          time.Time
	Source      string
	Field       string
	Approved    string
	Read        string
	Matched     bool
	Unavailable bool
}

// Event is one line of history: who did what, and why.
type Event struct {
	ID        int64
	At        time.Time
	Actor     string
	TaskID    string
	ActionKey string
	Kind      EventKind
	Message   string // a plain sentence
	Reason    string
	// ToState is the state the line moved its action to ("" for none),
	// "held:<cause>" for a hold; "" on lines written before schema 6.
	ToState string
	// Detail is JSON with the facts the sentence names (material values of
	// an approval, destination and Message-ID of an attempt), or "".
	Detail string
}

// EventKind classifies history events; metrics count some of them.
type EventKind string

// Event kinds.
const (
	EvTaskCreated        EventKind = "task_created"
	EvClaimed            EventKind = "claimed"
	EvTakeover           EventKind = "takeover"
	EvReleased           EventKind = "released"
	EvCompleted          EventKind = "completed"
	EvCompleteRefused    EventKind = "complete_refused"
	EvViewing            EventKind = "viewing"
	EvLeft               EventKind = "left"
	EvProposed           EventKind = "proposed"
	EvProposalRepeated   EventKind = "proposal_repeated"
	EvRevised            EventKind = "revised"
	EvSubmitted          EventKind = "submitted"
	EvApproved           EventKind = "approved"
	EvAttemptStarted     EventKind = "attempt_started"
	EvSent               EventKind = "sent"
	EvNotDelivered       EventKind = "not_delivered"
	EvFailed             EventKind = "failed"
	EvUnknown            EventKind = "unknown"
	EvDuplicateBlock     EventKind = "duplicate_block"
	EvDenied             EventKind = "denied"
	EvOwnershipConflict  EventKind = "ownership_conflict"
	EvHeld               EventKind = "held"
	EvHoldReleased       EventKind = "hold_released"
	EvCancelled          EventKind = "cancelled"
	EvReconciled         EventKind = "reconciled"
	EvCorrection         EventKind = "correction"
	EvStopped            EventKind = "stopped"
	EvResumed            EventKind = "resumed"
	EvRefusedStopped     EventKind = "refused_stopped"
	EvRecoveredUnknown   EventKind = "recovered_unknown"
	EvApprovalStale      EventKind = "approval_stale"
	EvNotificationQueued EventKind = "notified"
	EvLateOutcome        EventKind = "late_outcome"
	EvLateArrival        EventKind = "late_arrival" // an attempt settled as not arrived was found in the records
	EvAudienceImported   EventKind = "audience_imported"
	EvAudienceRemoved    EventKind = "audience_removed"
	EvDestinationBound   EventKind = "destination_bound"
	EvWrongDestination   EventKind = "wrong_destination"
	EvDestinationMoved   EventKind = "destination_moved"
	EvContradiction      EventKind = "contradiction"
	EvRefused            EventKind = "refused"
	EvCustomersImported  EventKind = "customers_imported"
	EvResubscribed       EventKind = "resubscribed"
	// EvOperating: a reviewer switched a read-only review into operating
	// mode, where operator operations are possible.
	EvOperating EventKind = "operating_mode"
	// EvAudienceMissing: a customer of a release is missing from the
	// latest CRM export, or a person said the export was partial.
	EvAudienceMissing EventKind = "audience_missing"
	// EvAudienceCarrier: another customer with the same address carries a
	// release's notice to it now.
	EvAudienceCarrier EventKind = "audience_carrier"
)

// Notification is a message to a person, e.g. the previous owner after a
// takeover.
type Notification struct {
	ID        int64
	Recipient string
	TaskID    string
	At        time.Time
	Message   string
}

// Switch is the state of the stop switch.
type Switch struct {
	Stopped bool
	Actor   string
	Reason  string
	At      time.Time
}

// Metrics keeps the counts apart that the design says must never be merged.
type Metrics struct {
	Intended           int           // business actions recorded (any state)
	Attempts           int           // tries at a destination
	Confirmed          int           // attempts with a confirmed acceptance
	DuplicateBlocks    int           // second executions or proposals blocked
	Denials            int           // changed-state denials
	OwnershipConflicts int           // refusals because of ownership
	Holds              int           // actions held right now
	Unknown            int           // actions whose outcome is unknown right now
	UnknownOutcomes    int           // attempts ever recorded with an unknown outcome
	ByState            map[State]int // actions per state
	Stopped            bool
	// StaleProposals are actions only proposed (a draft, or awaiting
	// approval) that nothing has changed for StaleAfter.
	StaleProposals int
	// ManualOverrides are a person's decisions over the gate's: hold
	// releases, destinations said to have moved, outcomes established by
	// hand.
	ManualOverrides int
	// UnmatchedByRelease counts, per audience release, the source rows
	// whose identity matched no customer.
	UnmatchedByRelease map[string]int
	// LateEvidence counts what turned up about an attempt after it was
	// settled: reports that differ from the settled outcome (a late 250, a
	// late "unknown") and messages of attempts settled as not arrived found
	// in their destination's records. Each is a line in the history, never
	// dropped.
	LateEvidence int
	// ArrivedTwice counts the actions known to have arrived more than once
	// (see Action.ArrivedTwice).
	ArrivedTwice int
	// NotPermitted counts the acts a registered ledger refused because the
	// actor may not do them (see Permits).
	NotPermitted int
}

// StaleAfter is how long a proposal may wait for approval before it counts
// as stale: a day, the review rhythm of the first week.
const StaleAfter = 24 * time.Hour

// Arrivals is how many of the action's attempts are known to have
// arrived: the accepted one (a sent action has exactly one) and those that
// arrived after they were settled as not arrived.
func (a Action) Arrivals() int {
	n := a.LateArrivals
	if a.State == StateSent {
		n++
	}
	return n
}

// ArrivedTwice reports whether the customer is known to have the action's
// message more than once. It is a fact about the world, not a state: the
// action stays in the state it is in.
func (a Action) ArrivedTwice() bool { return a.Arrivals() > 1 }

// Arrived reports whether the attempt's message is known to have arrived:
// accepted, or arrived after it was settled as not arrived.
func (at Attempt) Arrived() bool {
	return at.Outcome == destination.OutcomeAccepted || !at.ArrivedLate.IsZero()
}

// Endpoint is where the action is to be handed over, as it was proposed:
// the destination's identity, its records and its connection settings.
func (a Action) Endpoint() destination.Endpoint {
	return destination.Endpoint{Destination: a.Destination, Lookup: a.Lookup, Settings: a.DestinationSettings}
}

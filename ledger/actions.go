package ledger

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"gatehouse/destination"
	"gatehouse/internal/mailaddr"
)

// Proposal is a draft of one business action. Proposing is preparation: it
// may repeat freely and never reaches a customer.
type Proposal struct {
	Task       TaskRef
	Customer   string
	Event      string // the business event, e.g. the enquiry or webhook id
	ActionType string // e.g. reply_ack
	Target     string // what the action acts on, e.g. the task or order
	Revision   int    // 0 for the first message (corrections use Correct)
	Recipient  string // one bare address
	// RecipientName is an optional display name for the recipient.
	RecipientName string
	// Destination is the identity of where the message will be handed over
	// (Destination.Identity); the approval binds it.
	Destination string
	// Lookup is where the destination's records are consulted, if anywhere
	// (Records.LookupEndpoint); approved with the destination.
	Lookup string
	// DestinationSettings are the connection settings the destination is
	// reached with (destination.Endpoint.Settings): kept with the action so
	// a send that names no destination connects the way it was proposed,
	// but not approved, since they change nothing about where the message
	// goes. A settle time among them is bound through Settle.
	DestinationSettings string
	// Settle is the settle time of the endpoint the action goes to
	// (destination.Endpoint.Settle): how long after an attempt's lease its
	// message may still land there. The approval binds it; changing it is
	// a revision. Nil when the proposer states none, which leaves it
	// unbound (see settleOf): give it wherever the endpoint is known.
	Settle *time.Duration
	// Sender is the From address; DefaultSender when empty.
	Sender  string
	Subject string
	Body    string
	// Request is the HTTP request the action is, in canonical form
	// (destination.Request.Canonical); "" for a message. A request has no
	// subject or body, and its recipient is optional.
	Request string
	Actor   string // who proposes: a workflow or a person
}

// content is what the proposal asks an approval to bind.
func (p Proposal) content() Content {
	return Content{Recipient: p.Recipient, RecipientName: p.RecipientName, Sender: p.Sender,
		Destination: p.Destination, Lookup: p.Lookup, Subject: p.Subject, Body: p.Body, Target: p.Target, Request: p.Request}
}

// Key is the proposal's action key.
func (p Proposal) Key() string {
	return Key(p.Customer, p.Event, p.ActionType, p.Target, p.Revision)
}

// Validate refuses, before anything is recorded, a proposal the gate could
// not carry out faithfully: missing facts, key facts with white space or
// control characters, header fields with line breaks, a recipient that is
// not one bare address, a body over MaxBodyBytes. The error is a
// *FieldError naming the field.
func (p Proposal) Validate() error {
	var missing []string
	required := map[string]string{"task": p.Task.ID, "customer": p.Customer,
		"event": p.Event, "action type": p.ActionType, "target": p.Target,
		"recipient": p.Recipient, "destination": p.Destination, "actor": p.Actor}
	if p.Request != "" {
		delete(required, "recipient")
	}
	for name, v := range required {
		if strings.TrimSpace(v) == "" {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return invalidf("proposal lacks %s", strings.Join(sortStrings(missing), ", "))
	}
	if p.Revision < 0 {
		return invalidf("proposal revision %d is negative", p.Revision)
	}
	for _, f := range []struct{ name, v string }{{"task", p.Task.ID}, {"customer", p.Customer},
		{"event", p.Event}, {"action type", p.ActionType}, {"target", p.Target}} {
		if err := ValidateKeyFact(f.name, f.v); err != nil {
			return err
		}
	}
	if err := ValidateHeaderText("destination", p.Destination); err != nil {
		return err
	}
	if p.Settle != nil && *p.Settle < 0 {
		return &FieldError{Field: "settle time", Reason: fmt.Sprintf("%s is negative; a destination's settle time is 0 or more", *p.Settle)}
	}
	if p.Request != "" || isHTTPDestination(p.Destination) {
		return p.validateRequest()
	}
	return validateContent(p.content())
}

func isHTTPDestination(d string) bool {
	return strings.HasPrefix(d, "http://") || strings.HasPrefix(d, "https://")
}

// validateRequest refuses a request the gate could not hand over as
// approved: one not in canonical form, one for a destination that takes
// messages (or a message for one that takes requests), one whose body
// already fills the fields where the destination's duplicate control
// records the gate's key.
func (p Proposal) validateRequest() error {
	switch {
	case p.Request == "":
		return &FieldError{Field: "request", Reason: fmt.Sprintf("%s takes HTTP requests, not messages (--request-file, or --body-file with --method)", p.Destination)}
	case !isHTTPDestination(p.Destination):
		return &FieldError{Field: "request", Reason: fmt.Sprintf("an HTTP request needs an http(s):// destination, not %s", p.Destination)}
	case p.Subject != "" || p.Body != "":
		return &FieldError{Field: "request", Reason: "an HTTP request has no subject or message body; its body is the request's"}
	}
	r, err := destination.ParseCanonical(p.Request)
	if err != nil {
		return &FieldError{Field: "request", Reason: err.Error()}
	}
	canon, err := r.Canonical()
	if err != nil || canon != p.Request {
		return &FieldError{Field: "request", Reason: fmt.Sprintf("not in canonical form (%v)", err)}
	}
	prof, err := destination.ParseProfileString(p.Lookup)
	if err != nil {
		return &FieldError{Field: "destination", Reason: err.Error()}
	}
	if _, err := r.Write(prof, p.Key(), "probe"); err != nil {
		return &FieldError{Field: "request", Reason: err.Error()}
	}
	if p.Recipient != "" {
		return ValidateAddress("recipient", p.Recipient)
	}
	return nil
}

// withDefaults fills the sender.
func (p Proposal) withDefaults() Proposal {
	if p.Sender == "" && p.Request == "" {
		p.Sender = destination.DefaultSender
	}
	// Space around an address is formatting; inside it, it is an error
	// Validate reports.
	p.Recipient, p.Sender = strings.TrimSpace(p.Recipient), strings.TrimSpace(p.Sender)
	return p
}

// Propose records a draft, idempotently. The same key with the same content
// digest returns the existing action unchanged (a formatting-only edit is
// kept but keeps the approval). Changed content revises the draft and
// invalidates any approval. A key that was already sent, or is in flight,
// returns the existing action with ErrDuplicate or ErrInFlight, recorded as a
// duplicate block.
func (l *Ledger) Propose(ctx context.Context, p Proposal) (Action, error) {
	p = p.withDefaults()
	if err := p.Validate(); err != nil {
		return Action{}, err
	}
	var out Action
	err := l.writeRelaxed(ctx, func(t *wtx) (err error) {
		t.readAhead(actionByKey, []any{p.Key()}, "")
		t.readAhead(taskByID, []any{p.Task.ID}, "")
		s, err := t.permit(p.Actor, VerbPropose, p.Task.ID, p.Key())
		if err != nil {
			return err
		}
		if err := t.refuseTwoPersonWithoutToken(s, VerbPropose, p.ActionType, p.Task.ID, p.Key()); err != nil {
			return err
		}
		// On a ledger that was ever restored a key it has never seen may
		// be one the lost history sent; a ledger never restored spends no
		// read on it.
		first := false
		if l.everRestored.Load() {
			_, err := getAction(t, p.Key())
			first = errors.Is(err, ErrNotFound)
		}
		if out, err = t.propose(p); err != nil || !first {
			return err
		}
		return t.unverifiedAtBirth(out.Key)
	})
	return out, err
}

// propose is Propose inside t, for a proposal already validated.
func (t *wtx) propose(p Proposal) (Action, error) {
	key := p.Key()
	digest := p.content().Digest()
	t.readAhead(actionByKey, []any{key}, "")
	tk, err := t.ensureTask(p.Task.ID, firstNonEmpty(p.Task.Customer, p.Customer), p.Task.Subject, p.Actor)
	if err != nil {
		return Action{}, err
	}
	if tk.Status == "completed" {
		return Action{}, fmt.Errorf("propose %s: %w: task %s is completed", key, ErrWrongState, tk.ID)
	}
	a, err := getAction(t, key)
	if errors.Is(err, ErrNotFound) && p.Revision > 0 {
		return Action{}, invalidf("propose %s: a revision above r0 is a second message; it goes through Correct, with a reason and a reviewer", key)
	}
	if errors.Is(err, ErrNotFound) {
		out, err := t.insertAction(p, key, digest, tk.ID, "", StateDrafting)
		if err != nil {
			return out, err
		}
		if p.Request != "" {
			return out, t.event(p.Actor, tk.ID, key, EvProposed, "",
				"%s proposed %s, the request %s, via %s on task %s (draft).", p.Actor, p.ActionType, describeRequest(p.Request), p.Destination, tk.ID)
		}
		return out, t.event(p.Actor, tk.ID, key, EvProposed, "",
			"%s proposed %s to %s from %s via %s on task %s (draft).", p.Actor, p.ActionType, p.Recipient, p.Sender, p.Destination, tk.ID)
	}
	if err != nil {
		return Action{}, err
	}
	out := a
	if a.TaskID != tk.ID {
		return out, invalidf("action %s belongs to task %s, not %s", key, a.TaskID, tk.ID)
	}
	return out, t.repropose(&out, p, digest)
}

// repropose handles a proposal for a key the ledger already holds.
func (t *wtx) repropose(a *Action, p Proposal, digest string) error {
	switch a.State {
	case StateSent, StateExecuting, StateUnknown:
		return t.blockDuplicate(a, p.Actor, "proposal")
	case StateHeld:
		if a.HoldCause.outcomeOpen() {
			return t.blockDuplicate(a, p.Actor, "proposal")
		}
	}
	if digest == a.Digest && p.settle() == a.Settle {
		formatting := a.Body != p.Body || a.Subject != p.Subject || a.Recipient != p.Recipient || a.RecipientName != p.RecipientName
		if formatting || a.DestinationSettings != p.DestinationSettings {
			if _, err := t.Exec(`UPDATE actions SET recipient = ?, recipient_name = ?, subject = ?, body = ?, destination_settings = ?, version = version + 1, updated_at = ? WHERE key = ?`,
				p.Recipient, p.RecipientName, p.Subject, p.Body, p.DestinationSettings, ns(t.now()), a.Key); err != nil {
				return err
			}
			a.Recipient, a.RecipientName, a.Subject, a.Body = p.Recipient, p.RecipientName, p.Subject, p.Body
			a.DestinationSettings = p.DestinationSettings
			a.Version++
			if !formatting {
				return t.event(p.Actor, a.TaskID, a.Key, EvRevised, "",
					"%s changed how %s reaches %s (its connection settings); the destination is the same, so any approval still holds.", p.Actor, a.Key, a.Destination)
			}
			return t.event(p.Actor, a.TaskID, a.Key, EvRevised, "",
				"%s edited the formatting of %s; the content digest is unchanged, so any approval still holds.", p.Actor, a.Key)
		}
		return t.event(p.Actor, a.TaskID, a.Key, EvProposalRepeated, "",
			"%s proposed %s again with the same content; the existing %s action was kept.", p.Actor, a.Key, a.State)
	}
	// Revising invalidates an approval: that must survive a power loss.
	if err := t.requireDurable(); err != nil {
		return err
	}
	switch a.State {
	case StateHeld:
		return &StateError{Key: a.Key, State: a.State, Err: ErrHeld,
			Hint: "release the hold before changing the content (" + a.Reason + ")"}
	case StateCancelled:
		return &StateError{Key: a.Key, State: a.State, Err: ErrCancelled,
			Hint: "the proposal was withdrawn (" + a.Reason + "); different content needs a new business event, or a correction once sent"}
	}
	changed := describeChange(*a, p)
	if _, err := t.Exec(`UPDATE actions SET recipient = ?, recipient_name = ?, destination = ?, lookup = ?, destination_settings = ?, sender = ?, subject = ?, body = ?, digest = ?,
		request = ?, settle = ?, version = version + 1, updated_at = ? WHERE key = ?`,
		p.Recipient, p.RecipientName, p.Destination, p.Lookup, p.DestinationSettings, p.Sender, p.Subject, p.Body, digest, p.Request, int64(p.settle()), ns(t.now()), a.Key); err != nil {
		return err
	}
	a.Settle = p.settle()
	a.Request = p.Request
	a.Recipient, a.RecipientName, a.Subject, a.Body, a.Digest = p.Recipient, p.RecipientName, p.Subject, p.Body, digest
	a.Destination, a.Lookup, a.DestinationSettings, a.Sender = p.Destination, p.Lookup, p.DestinationSettings, p.Sender
	a.Version++
	n, err := t.invalidateApprovals(a.Key, "content changed: "+changed)
	if err != nil {
		return err
	}
	if err := t.transition(a, StateDrafting, "revised: "+changed, ""); err != nil {
		return err
	}
	msg := "%s revised %s (%s); it is a draft again."
	if n > 0 {
		msg = "%s revised %s (%s); the approval no longer applies and it is a draft again."
	}
	return t.event(p.Actor, a.TaskID, a.Key, EvRevised, "", msg, p.Actor, a.Key, changed)
}

func describeChange(a Action, p Proposal) string {
	var parts []string
	if !mailaddr.Same(a.Recipient, p.Recipient) {
		parts = append(parts, fmt.Sprintf("recipient %s → %s", a.Recipient, p.Recipient))
	}
	if destination.NormalizeText(a.RecipientName) != destination.NormalizeText(p.RecipientName) {
		parts = append(parts, "recipient name changed")
	}
	if !mailaddr.Same(a.Sender, p.Sender) {
		parts = append(parts, fmt.Sprintf("sender %s → %s", orDash(a.Sender), p.Sender))
	}
	if a.Destination != p.Destination {
		parts = append(parts, fmt.Sprintf("destination %s → %s", orDash(a.Destination), p.Destination))
	}
	if a.Lookup != p.Lookup {
		parts = append(parts, fmt.Sprintf("records %s → %s", orDash(a.Lookup), orDash(p.Lookup)))
	}
	if destination.NormalizeText(a.Subject) != destination.NormalizeText(p.Subject) {
		parts = append(parts, "subject changed")
	}
	if destination.NormalizeText(a.Body) != destination.NormalizeText(p.Body) {
		parts = append(parts, "body changed")
	}
	if a.Request != p.Request {
		parts = append(parts, requestChange(a.Request, p.Request))
	}
	if a.Settle != p.settle() {
		parts = append(parts, fmt.Sprintf("settle time %s → %s", settleDescription(a.Settle), settleDescription(p.settle())))
	}
	if len(parts) == 0 {
		parts = append(parts, "content changed")
	}
	return strings.Join(parts, ", ")
}

// blockDuplicate records a duplicate block and returns the matching refusal.
func (t *wtx) blockDuplicate(a *Action, actor, what string) error {
	var sentinel error
	var hint string
	switch {
	case a.State == StateSent:
		sentinel, hint = ErrDuplicate, "it was already sent; a second message needs a correction"
	case a.State == StateExecuting:
		sentinel, hint = ErrInFlight, "another executor is sending it right now"
	case a.LateArrivals > 0 && !needsReconcile(*a):
		sentinel, hint = ErrDuplicate, "its message arrived after all (an attempt settled as not arrived was found later); a second message needs a correction"
	default:
		sentinel, hint = ErrUnknownOutcome, "an earlier attempt's outcome is unknown; reconcile before anything else"
	}
	if err := t.event(actor, a.TaskID, a.Key, EvDuplicateBlock, "",
		"The gate blocked a second %s of %s by %s: %s.", what, a.Key, actor, hint); err != nil {
		return err
	}
	return refuse(&StateError{Key: a.Key, State: a.State, Err: sentinel, Hint: hint})
}

func (t *wtx) insertAction(p Proposal, key, digest, taskID, corrects string, st State) (Action, error) {
	var corr any
	if corrects != "" {
		corr = corrects
	}
	// The new row is what the statement says (and the columns it leaves
	// to their defaults: no reason or hold, version 1); nothing reads it
	// back, so on PostgreSQL it travels with the next statement.
	at := fromNS(ns(t.now()))
	a := Action{Key: key, TaskID: taskID, Customer: p.Customer, Event: p.Event, ActionType: p.ActionType, Target: p.Target,
		Revision: p.Revision, Recipient: p.Recipient, RecipientName: p.RecipientName, Destination: p.Destination,
		Lookup: p.Lookup, DestinationSettings: p.DestinationSettings, Settle: p.settle(), Sender: p.Sender, Subject: p.Subject, Body: p.Body, Request: p.Request, Digest: digest, State: st,
		ProposedBy: p.Actor, Corrects: corrects, Version: 1, CreatedAt: at, UpdatedAt: at}
	if t.holdInsert(a) {
		// In a batch on SQLite the row waits for the request's next
		// statement (see batchState.pending).
		t.movedKey, t.movedTo = key, string(st)
		t.batch.fresh = key
		return a, nil
	}
	if err := t.later("record action "+key, `INSERT INTO actions (key, task_id, customer, event, action_type, target, revision,
		recipient, recipient_name, destination, lookup, destination_settings, sender, subject, body, digest, state, proposed_by, corrects, created_at, updated_at, request, settle)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		key, taskID, p.Customer, p.Event, p.ActionType, p.Target, p.Revision,
		p.Recipient, p.RecipientName, p.Destination, p.Lookup, p.DestinationSettings, p.Sender, p.Subject, p.Body, digest, string(st), p.Actor, corr, ns(a.CreatedAt), ns(a.UpdatedAt), p.Request, int64(a.Settle)); err != nil {
		return Action{}, err
	}
	t.movedKey, t.movedTo = key, string(st)
	if t.batch != nil {
		t.batch.fresh = key
	}
	return a, nil
}

const insertApprovalSQL = `INSERT INTO approvals (action_key, approver, digest, recipient, target, destination, sender, owner, material, at, policy_version, settle)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`

const invalidateApprovalsSQL = `UPDATE approvals SET valid = 0, invalidated = ? WHERE action_key = ? AND valid = 1`

func (t *wtx) invalidateApprovals(key, why string) (int64, error) {
	res, err := t.Exec(invalidateApprovalsSQL, why, key)
	if err != nil {
		return 0, fmt.Errorf("invalidate approvals of %s: %w", key, err)
	}
	return res.RowsAffected()
}

// Submit moves a draft to awaiting_approval.
func (l *Ledger) Submit(ctx context.Context, key, actor string) (Action, error) {
	return l.onActionBy(ctx, key, false, actor, VerbSubmit, func(t *wtx, a *Action) error {
		if a.State == StateAwaitingApproval {
			return nil
		}
		if a.State != StateDrafting {
			return &StateError{Key: key, State: a.State, Err: ErrWrongState, Hint: "only a draft can be submitted for approval"}
		}
		if err := t.transition(a, StateAwaitingApproval, "submitted for approval", ""); err != nil {
			return err
		}
		return t.event(actor, a.TaskID, key, EvSubmitted, "", "%s submitted %s for approval.", actor, key)
	})
}

// Approve binds an approval to the action's current recipient, target,
// content digest, the task's owner and the material snapshot the approver
// saw. A draft is submitted implicitly; a denied action may be approved again
// on a fresh snapshot. A correction must be approved by someone other than
// its author.
func (l *Ledger) Approve(ctx context.Context, key, approver string, material []MaterialRead) (Action, error) {
	if err := validateApproval(approver, material); err != nil {
		return Action{}, err
	}
	return l.onActionBy(ctx, key, false, approver, VerbApprove, func(t *wtx, a *Action) error { return t.approve(a, approver, material) },
		func(t *wtx) { t.readAhead(taskOfActionKey, []any{key}, taskByID) })
}

func validateApproval(approver string, material []MaterialRead) error {
	if approver == "" {
		return invalidf("approve: approver is empty")
	}
	for _, m := range material {
		if m.Source == "" || m.Field == "" {
			return invalidf("approve: material field %q needs source.field", m.Name())
		}
		if m.Unavailable {
			return invalidf("approve: material field %s is unavailable; approve on values you could read", m.Name())
		}
	}
	return nil
}

// approve is Approve inside t, for an approval already validated.
func (t *wtx) approve(a *Action, approver string, material []MaterialRead) error {
	key := a.Key
	snapshot, _ := json.Marshal(sortMaterial(material))
	switch a.State {
	case StateDrafting, StateAwaitingApproval, StateDenied, StateApproved:
	default:
		return &StateError{Key: key, State: a.State, Err: ErrWrongState,
			Hint: "only a draft, an action awaiting approval or a denied action can be approved"}
	}
	if a.Corrects != "" && a.ProposedBy == approver {
		if err := t.event(approver, a.TaskID, key, EvApprovalStale, "",
			"%s tried to approve their own correction %s; a second person must review it.", approver, key); err != nil {
			return err
		}
		return refuse(&StateError{Key: key, State: a.State, Err: ErrNotReviewed, Hint: "ask someone other than " + approver + " to approve it"})
	}
	policyVersion, err := t.approvalPolicy(a, approver, material)
	if err != nil {
		return err
	}
	tk, err := t.task(a.TaskID)
	if err != nil {
		return err
	}
	if tk.Owner == "" {
		// Nothing is recorded: an approval binds the owner it was given
		// under, and one given under nobody could never be sent.
		return invalidf("approve %s: task %s has no owner; claim the task first", key, tk.ID)
	}
	// An action whose row waits to be inserted (see batchState.pending)
	// moves first, into the row written, and its approval, which
	// references the row, follows.
	pending := t.pendingFor(key) != nil
	if pending {
		if err := t.transition(a, StateApproved, "approved by "+approver, ""); err != nil {
			return err
		}
	}
	fresh := t.batch != nil && t.batch.fresh == key
	if !fresh { // an action inserted by this transaction has no approvals
		if err := t.later("invalidate approvals of "+key, invalidateApprovalsSQL, "superseded by a new approval", key); err != nil {
			return err
		}
	}
	at := ns(t.now())
	args := []any{key, approver, a.Digest, a.Recipient, a.Target, a.Destination, a.Sender, tk.Owner, string(snapshot), at, policyVersion, int64(a.Settle)}
	if pending {
		t.batch.pendingApproval = args // inserted with the action's row (see batchState.pendingApproval)
	} else if err := t.later("record approval of "+key, insertApprovalSQL, args...); err != nil {
		return err
	}
	if !pending {
		if err := t.transition(a, StateApproved, "approved by "+approver, ""); err != nil {
			return err
		}
	}
	if fresh {
		act := *a
		act.CreatedAt, act.UpdatedAt = fromNS(ns(act.CreatedAt)), fromNS(ns(act.UpdatedAt)) // as the rows hold them
		t.batch.approved = &freshApproval{action: act, approval: Approval{ActionKey: key, Approver: approver, Digest: a.Digest,
			Recipient: a.Recipient, Target: a.Target, Destination: a.Destination, Sender: a.Sender, Owner: tk.Owner,
			Material: sortMaterial(material), At: fromNS(at), Valid: true, PolicyVersion: policyVersion, Settle: a.Settle}}
	}
	t.note(map[string]any{"material": materialMap(material), "recipient": a.Recipient, "sender": a.Sender,
		"destination": a.Destination, "digest": a.Digest, "owner": tk.Owner}, "")
	if a.Request != "" {
		return t.event(approver, a.TaskID, key, EvApproved, "",
			"%s approved %s, the request %s, via %s (owner %s, %s).", approver, key, describeRequest(a.Request),
			orDash(a.Destination), ownerName(tk.Owner), describeMaterial(material))
	}
	return t.event(approver, a.TaskID, key, EvApproved, "",
		"%s approved %s to %s from %s via %s (owner %s, %s).", approver, key, a.Recipient, orDash(a.Sender),
		orDash(a.Destination), ownerName(tk.Owner), describeMaterial(material))
}

// materialMap is a material snapshot as "source.field" → value, the way a
// history line's detail records it.
func materialMap(m []MaterialRead) map[string]string {
	out := make(map[string]string, len(m))
	for _, r := range m {
		out[r.Name()] = r.Value
	}
	return out
}

func describeMaterial(m []MaterialRead) string {
	if len(m) == 0 {
		return "no material fields"
	}
	var parts []string
	for _, r := range sortMaterial(m) {
		parts = append(parts, fmt.Sprintf("%s=%s", r.Name(), r.Value))
	}
	return strings.Join(parts, ", ")
}

const currentApprovalRead = `SELECT id, action_key, approver, digest, recipient, target, destination, sender, owner, material, at, policy_version, settle
	FROM approvals WHERE action_key = ? AND valid = 1 ORDER BY id DESC LIMIT 1`

// currentApproval returns the valid approval of an action, if any.
func currentApproval(q queryer, key string) (Approval, bool, error) {
	var ap Approval
	var mat string
	var at int64
	err := q.QueryRow(currentApprovalRead, key).Scan(&ap.ID, &ap.ActionKey, &ap.Approver, &ap.Digest, &ap.Recipient, &ap.Target, &ap.Destination, &ap.Sender,
		&ap.Owner, &mat, &at, &ap.PolicyVersion, &ap.Settle)
	if errors.Is(err, sql.ErrNoRows) {
		return ap, false, nil
	}
	if err != nil {
		return ap, false, fmt.Errorf("read approval of %s: %w", key, err)
	}
	ap.At, ap.Valid = fromNS(at), true
	if err := json.Unmarshal([]byte(mat), &ap.Material); err != nil {
		return ap, false, fmt.Errorf("read approval of %s: material snapshot: %w", key, err)
	}
	return ap, true, nil
}

// Cancel withdraws a proposal that has not been executed.
func (l *Ledger) Cancel(ctx context.Context, key, actor, reason string) (Action, error) {
	if strings.TrimSpace(reason) == "" {
		return Action{}, invalidf("cancel: a reason is required")
	}
	return l.onActionBy(ctx, key, true, actor, VerbCancel, func(t *wtx, a *Action) error {
		switch a.State {
		case StateDrafting, StateAwaitingApproval, StateApproved, StateDenied:
		case StateHeld:
			if a.HoldCause.outcomeOpen() {
				return &StateError{Key: key, State: a.State, Err: ErrUnknownOutcome, Hint: "reconcile first: the message may have arrived"}
			}
		case StateCancelled:
			return nil
		default:
			return &StateError{Key: key, State: a.State, Err: ErrWrongState, Hint: "only an action that was not executed can be cancelled"}
		}
		if _, err := t.invalidateApprovals(key, "cancelled"); err != nil {
			return err
		}
		if err := t.transition(a, StateCancelled, "cancelled by "+actor+": "+reason, ""); err != nil {
			return err
		}
		return t.event(actor, a.TaskID, key, EvCancelled, reason, "%s withdrew %s because: %s.", actor, key, reason)
	})
}

// Correction is a deliberate second message for an action already sent.
type Correction struct {
	Original  string // key of the action being corrected
	Actor     string
	Reason    string // mandatory
	Recipient string // empty: the original recipient
	// RecipientName goes with Recipient; the original's when Recipient is empty.
	RecipientName string
	Subject       string
	Body          string
}

// Correct records a correction: a new action with the next revision of the
// original's key, linked to it, awaiting a reviewed approval (by someone
// other than its author).
func (l *Ledger) Correct(ctx context.Context, c Correction) (Action, error) {
	if strings.TrimSpace(c.Reason) == "" {
		return Action{}, invalidf("correct: a reason is required")
	}
	if c.Actor == "" {
		return Action{}, invalidf("correct: actor is empty")
	}
	var out Action
	err := l.write(ctx, func(t *wtx) error {
		t.readAhead(actionByKey, []any{c.Original}, "")
		s, err := t.standingOf(c.Actor)
		if err != nil {
			return err
		}
		orig, err := getAction(t, c.Original)
		if err != nil {
			return err
		}
		if err := t.judge(s, c.Actor, VerbCorrect, orig.TaskID, orig.Key); err != nil {
			return err
		}
		if err := t.refuseTwoPersonWithoutToken(s, VerbCorrect, orig.ActionType, orig.TaskID, orig.Key); err != nil {
			return err
		}
		if orig.State != StateSent {
			return &StateError{Key: orig.Key, State: orig.State, Err: ErrWrongState,
				Hint: "only a sent action can be corrected; revise the draft instead"}
		}
		// Every revision has the original's task and business facts; the
		// task index finds them.
		var maxRev int
		if err := t.QueryRow(`SELECT COALESCE(max(revision), 0) FROM actions
			WHERE task_id = ? AND customer = ? AND event = ? AND action_type = ? AND target = ?`,
			orig.TaskID, orig.Customer, orig.Event, orig.ActionType, orig.Target).Scan(&maxRev); err != nil {
			return err
		}
		p := Proposal{Task: TaskRef{ID: orig.TaskID}, Customer: orig.Customer, Event: orig.Event,
			ActionType: orig.ActionType, Target: orig.Target, Revision: maxRev + 1,
			Recipient: firstNonEmpty(c.Recipient, orig.Recipient), Subject: c.Subject, Body: c.Body, Actor: c.Actor,
			Destination: orig.Destination, Lookup: orig.Lookup, Sender: orig.Sender}
		if orig.Settle >= 0 {
			p.Settle = &orig.Settle // the route the original was approved for
		}
		if c.Recipient != "" {
			p.RecipientName = c.RecipientName
		} else {
			p.RecipientName = orig.RecipientName
		}
		if err := validateContent(p.content()); err != nil {
			return err
		}
		key := p.Key()
		out, err = t.insertAction(p, key, p.content().Digest(), orig.TaskID, orig.Key, StateAwaitingApproval)
		if err != nil {
			return err
		}
		return t.event(c.Actor, orig.TaskID, key, EvCorrection, c.Reason,
			"%s drafted correction %s of %s because: %s; it needs a reviewed approval.", c.Actor, key, orig.Key, c.Reason)
	})
	return out, err
}

func firstNonEmpty(a ...string) string {
	for _, s := range a {
		if s != "" {
			return s
		}
	}
	return ""
}

// requestChange says what changed between two canonical requests, in the
// words a person approving the new one needs: which of method, path,
// headers and which body fields.
func requestChange(was, now string) string {
	if was == "" || now == "" {
		return "request changed"
	}
	a, err1 := destination.ParseCanonical(was)
	b, err2 := destination.ParseCanonical(now)
	if err1 != nil || err2 != nil {
		return "request changed"
	}
	var parts []string
	if a.Method != b.Method || a.Path != b.Path {
		parts = append(parts, fmt.Sprintf("request %s %s → %s %s", a.Method, a.Path, b.Method, b.Path))
	}
	if fmt.Sprint(a.Headers) != fmt.Sprint(b.Headers) {
		parts = append(parts, "request headers changed")
	}
	var ab, bb map[string]json.RawMessage
	if json.Unmarshal(a.Body, &ab) == nil && json.Unmarshal(b.Body, &bb) == nil {
		var fields []string
		for k, v := range bb {
			if string(ab[k]) != string(v) {
				fields = append(fields, fmt.Sprintf("%s %s → %s", k, orDash(string(ab[k])), string(v)))
			}
		}
		for k := range ab {
			if _, ok := bb[k]; !ok {
				fields = append(fields, k+" removed")
			}
		}
		if len(fields) > 0 {
			parts = append(parts, "request body "+strings.Join(sortStrings(fields), ", "))
		}
	} else if string(a.Body) != string(b.Body) {
		parts = append(parts, "request body changed")
	}
	if len(parts) == 0 {
		return "request changed"
	}
	return strings.Join(parts, ", ")
}

// describeRequest is a canonical request in one line for the history:
// method, path and body, as the provider will receive them (less the
// gate's own fields).
func describeRequest(canonical string) string {
	r, err := destination.ParseCanonical(canonical)
	if err != nil {
		return truncate(canonical, 300)
	}
	return truncate(fmt.Sprintf("%s %s %s", r.Method, r.Path, r.Body), 500)
}

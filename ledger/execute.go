package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"gatehouse/destination"
	"gatehouse/internal/clock"
	"gatehouse/internal/mailaddr"
	"gatehouse/internal/oswait"
)

// ExecuteRequest asks the gate to execute one approved action.
type ExecuteRequest struct {
	Key      string
	Executor string // must be the task's owner
	// Reread holds the material fields the caller re-read from their sources
	// immediately before this call. Each approved field must be present.
	Reread []MaterialRead
	// From, when set, must equal the approved sender: it is an assertion by
	// the caller, never a way to change who a message is from.
	From string
	// Endpoint is where the attempt will be handed over. Execute fills it
	// from the destination itself; callers of BeginAttempt use EndpointOf.
	Endpoint destination.Endpoint
}

// Result is what one execution produced.
type Result struct {
	Action  Action
	Attempt Attempt
	Outcome destination.Outcome
	Receipt destination.Receipt
}

// Execute runs the whole gate for one action through its three shipped
// steps: BeginAttempt decides and records the attempt durably, Deliver hands
// the message to dest once within the attempt's lease, and RecordDelivery
// records what dest did. A nil error means the destination confirmed
// acceptance. Every refusal is a typed error (see errors.go); an unknown
// outcome returns ErrUnknownOutcome and is never retried here.
//
// The Result carries the action as it now stands whatever the answer, a
// refusal included, so a caller never reads it back; it is empty only when
// the ledger could not record the decision (ErrNotRecorded, a lock or a
// context that ran out), and then the ledger's state is the one to read.
func (l *Ledger) Execute(ctx context.Context, req ExecuteRequest, dest destination.Destination) (Result, error) {
	req.Endpoint = destination.EndpointAt(ctx, dest)
	if a, err := l.verifyRestored(ctx, req, dest); err != nil {
		return Result{Action: a}, err
	}
	att, msg, a, err := l.begin(ctx, req)
	if err != nil {
		return Result{Action: a, Attempt: att}, err
	}
	return l.RecordDelivery(ctx, att, l.Deliver(ctx, att, msg, dest))
}

// outcomeState is the state an outcome moves an action to.
func outcomeState(o destination.Outcome) State {
	switch o {
	case destination.OutcomeAccepted:
		return StateSent
	case destination.OutcomeUnknown:
		return StateUnknown
	case destination.OutcomeRejectedPermanent:
		return StateFailed
	case destination.OutcomeContradiction:
		return StateHeld
	default:
		return StateApproved
	}
}

// nowError answers a late report with the action's state as it stands.
func nowError(a Action, o destination.Outcome) error {
	hint := fmt.Sprintf("this attempt reported %s after its outcome had been settled; it changed nothing; the action is %s now: %s", o, a.State, a.Reason)
	err := ErrWrongState
	switch {
	case a.State == StateSent:
		err = ErrDuplicate
	case a.State == StateUnknown, a.State == StateHeld && a.HoldCause.outcomeOpen():
		err = ErrUnknownOutcome
	case a.State == StateHeld:
		err = ErrHeld
	case a.State == StateFailed:
		err = ErrFailed
	case a.State == StateApproved:
		err = ErrNotDelivered
	}
	return &StateError{Key: a.Key, State: a.State, Err: err, Hint: hint}
}

// Delivery is what one hand-over to a destination produced.
type Delivery struct {
	Outcome destination.Outcome
	Receipt destination.Receipt
	Err     error // the destination's error; nil when it accepted
}

// Deliver hands msg, the message BeginAttempt returned for att, to dest once
// and classifies the result. It is the only caller of Destination.Send in
// the gate. The send must end within three quarters of the attempt's lease
// counted from when the attempt began (not from when Deliver is called: a
// batch's attempts all begin at once and are handed over one after
// another), measured on the ledger's clock like the lease itself: once the
// lease runs out, recovery may declare the attempt unknown and a
// reconciliation that finds nothing yet would allow a retry while this send
// still lands. An attempt whose budget is spent before it is handed over is
// not sent at all (not delivered), nor is one for a destination other than
// the one the attempt recorded.
func (l *Ledger) Deliver(ctx context.Context, att Attempt, msg destination.Message, dest destination.Destination) Delivery {
	if id := dest.Identity(); id != att.Destination {
		err := &destination.DeliveryError{Outcome: destination.OutcomeNotDelivered,
			Err: fmt.Errorf("attempt %d of %s was recorded for %s, not %s; nothing was sent", att.Number, att.ActionKey, att.Destination, id)}
		return Delivery{Outcome: destination.OutcomeNotDelivered, Err: err}
	}
	budget := l.lease * 3 / 4
	if !att.begun.IsZero() {
		budget -= l.clock.Now().Sub(att.begun)
	}
	if budget <= 0 {
		err := &destination.DeliveryError{Outcome: destination.OutcomeNotDelivered,
			Err: fmt.Errorf("attempt %d of %s waited past three quarters of its lease before it could be handed over; nothing was sent", att.Number, att.ActionKey)}
		return Delivery{Outcome: destination.OutcomeNotDelivered, Err: err}
	}
	// The budget ends on the ledger's clock (a rehearsal advancing its
	// clock ends it) and, as a deadline, in real time: the destination holds
	// its commit point to that deadline (see destination.Destination).
	sendCtx, cancel := clock.WithTimeout(ctx, l.clock, budget)
	defer cancel()
	sendCtx, cancelFence := oswait.WithTimeout(sendCtx, budget)
	defer cancelFence()
	rcpt, err := dest.Send(sendCtx, msg)
	return Delivery{Outcome: destination.ClassifyDelivery(err), Receipt: rcpt, Err: err}
}

// response is the destination's words for the history.
func (d Delivery) response() string {
	if d.Err != nil {
		return d.Err.Error()
	}
	return d.Receipt.Response
}

// RecordDelivery records what Deliver reported for att and returns the
// error that names the result. When the ledger cannot record it (a full
// disk, say) the attempt stays in flight in the ledger and recovery will
// mark it unknown: the error then wraps ErrNotRecorded and
// ErrUnknownOutcome, whatever the destination said, because the ledger's
// own state is what a retry would be judged on.
func (l *Ledger) RecordDelivery(ctx context.Context, att Attempt, d Delivery) (Result, error) {
	// The outcome must be recorded even if the caller's context is done.
	var a Action
	recErr := l.writeGrouped(context.WithoutCancel(ctx), false, func(t *wtx) (err error) {
		a, err = t.recordOutcomeOf(att.TransportID, d.Outcome, d.response(), d.Receipt)
		return err
	})
	return deliveryResult(att, d, a, recErr)
}

// deliveryResult is RecordDelivery's answer once the outcome was recorded
// (or could not be: recErr).
func deliveryResult(att Attempt, d Delivery, a Action, recErr error) (Result, error) {
	res := Result{Action: a, Attempt: att, Outcome: d.Outcome, Receipt: d.Receipt}
	if recErr != nil {
		return res, fmt.Errorf("%w: %w", ErrNotRecorded, &StateError{Key: att.ActionKey, State: StateExecuting, Err: ErrUnknownOutcome,
			Hint: fmt.Sprintf("the destination answered %s but the ledger could not record it (%v); the attempt stays in flight until recovery marks it unknown; reconcile, do not resend",
				d.Outcome, recErr)})
	}
	return res, outcomeError(a, d.Outcome, d.Err)
}

func outcomeError(a Action, o destination.Outcome, sendErr error) error {
	if want := outcomeState(o); a.State != want {
		// The report came after the attempt was settled (recovered as
		// unknown, reconciled, resolved by a person): it changed nothing,
		// and the answer is what the ledger holds now, never what this
		// report alone would have meant.
		return nowError(a, o)
	}
	switch o {
	case destination.OutcomeAccepted:
		return nil
	case destination.OutcomeUnknown:
		return &StateError{Key: a.Key, State: a.State, Err: ErrUnknownOutcome,
			Hint: fmt.Sprintf("the destination may have accepted it (%v); reconcile, do not resend", sendErr)}
	case destination.OutcomeRejectedPermanent:
		return &StateError{Key: a.Key, State: a.State, Err: ErrFailed, Hint: sendErr.Error()}
	case destination.OutcomeContradiction:
		return &StateError{Key: a.Key, State: a.State, Err: ErrHeld, Hint: a.Reason}
	default:
		return &StateError{Key: a.Key, State: a.State, Err: ErrNotDelivered,
			Hint: fmt.Sprintf("nothing was delivered (%v); the action is approved again and may be retried", sendErr)}
	}
}

// BeginAttempt is the deciding step of Execute. In one durable BEGIN
// IMMEDIATE transaction it checks the action's state, the stop switch, the
// approval, that the caller re-read every approved material field, the
// destination and sender against the approved ones, the owner and the
// re-read values, and when all hold, records the attempt (number, transport
// id, lease, destination, Message-ID, recipient, sender) and moves the
// action to executing. The returned Message is what the destination must
// receive.
//
// A caller's slip (a forgotten material field, an empty executor) is a
// usage error that records nothing; a wrong destination or sender is
// refused with a history line and no change of state.
func (l *Ledger) BeginAttempt(ctx context.Context, req ExecuteRequest) (Attempt, destination.Message, error) {
	att, msg, _, err := l.begin(ctx, req)
	return att, msg, err
}

// begin is BeginAttempt that also returns the action as the decision left
// it: executing, or as a refusal recorded it (or found it, for a refusal
// that records nothing). It is empty when the decision itself could not be
// recorded, since the action in memory may then hold changes that were
// rolled back.
func (l *Ledger) begin(ctx context.Context, req ExecuteRequest) (Attempt, destination.Message, Action, error) {
	if err := req.validate(); err != nil {
		return Attempt{}, destination.Message{}, Action{}, err
	}
	var att Attempt
	var msg destination.Message
	var a Action
	var id int64
	// The budget counts from before the transaction that starts the
	// lease, so it ends no later than the lease does, however long the
	// commit took or the process stood still meanwhile.
	begun := l.clock.Now()
	err := l.writeGrouped(ctx, true, func(t *wtx) (err error) {
		id = 0
		t.attemptID = &id
		att, msg, a, err = t.beginAttempt(req)
		return err
	})
	if err == nil && id != 0 {
		att.ID = id // known once the intent committed (see startAttempt)
	}
	if err != nil && !isDecision(err) {
		a = Action{}
	}
	att.begun = begun
	return att, msg, a, err
}

// isDecision reports whether err is the gate's answer to a request (a
// refusal, a usage error) rather than a failure to record one: a storage
// failure, a lock held past the retry budget, a context that ended.
func isDecision(err error) bool {
	return !errors.Is(err, ErrNotRecorded) && !isBusy(err) && !errors.Is(err, context.Canceled) &&
		!errors.Is(err, context.DeadlineExceeded) && !isStorageFailure(err)
}

// validate catches a caller's slip before any transaction: such a request
// records nothing.
func (req ExecuteRequest) validate() error {
	if req.Executor == "" {
		return invalidf("execute %s: executor is empty", req.Key)
	}
	if req.Endpoint.Destination == "" {
		return invalidf("execute %s: no destination given", req.Key)
	}
	return nil
}

// beginAttempt is the decision BeginAttempt and BeginAttempts share: every
// check of one action and, when all hold, its recorded attempt. It runs
// inside the caller's durable transaction; a refusal it returns through
// refuse must be committed with its history line.
func (t *wtx) beginAttempt(req ExecuteRequest) (Attempt, destination.Message, Action, error) {
	var a Action
	att, msg, err := t.decide(req, &a)
	return att, msg, a, err
}

// decide is beginAttempt's body; a holds the action as it stands after
// each step, refusals included. A probe that is refused (stopped, denied,
// cancelled, not approved) leaves the earlier attempt's outcome open: the
// action stays held for its probe, never approved or denied over it.
func (t *wtx) decide(req ExecuteRequest, a *Action) (Attempt, destination.Message, error) {
	var probe bool
	att, msg, err := t.decideChecks(req, a, &probe)
	if err != nil && probe && isDecision(err) {
		if kerr := t.keepProbeOpen(a, req.Executor, err); kerr != nil {
			return att, msg, kerr
		}
	}
	return att, msg, err
}

// decideChecks is decide's every check; probe is set once the action is
// read, when it is held for a probe.
func (t *wtx) decideChecks(req ExecuteRequest, a *Action, probe *bool) (Attempt, destination.Message, error) {
	// Every read of the decision, sent with the action's (on PostgreSQL);
	// a batch that read the stop switch once has no use for it again.
	if t.batch == nil || t.batch.sw == nil {
		t.readAhead(stopSwitchRead, nil, "")
	}
	fresh := t.takeApproved(req.Key)
	if fresh != nil {
		*a = fresh.action
	} else {
		t.readAhead(taskOfActionKey, []any{req.Key}, taskByID)
		t.readAhead(currentApprovalRead, []any{req.Key}, "")
		t.readAhead(lastAttemptRead, []any{req.Key}, "")
		var s standing
		var err error
		if t.batch == nil {
			// A batch checked its executor once, before anything else;
			// the action's read travels with the check's.
			t.readAhead(actionByKey, []any{req.Key}, "")
			if s, err = t.standingOf(req.Executor); err != nil {
				return Attempt{}, destination.Message{}, err
			}
		}
		if *a, err = getAction(t, req.Key); err != nil {
			return Attempt{}, destination.Message{}, err
		}
		if err := t.judge(s, req.Executor, VerbExecute, a.TaskID, a.Key); err != nil {
			return Attempt{}, destination.Message{}, err
		}
	}
	*probe = a.State == StateHeld && a.HoldCause == HoldProbeDue
	if err := t.refuseUnlessExecutable(a, req.Executor); err != nil {
		return Attempt{}, destination.Message{}, err
	}
	if err := t.refuseUnverified(a); err != nil {
		return Attempt{}, destination.Message{}, err
	}
	tk, err := t.task(a.TaskID)
	if err != nil {
		return Attempt{}, destination.Message{}, err
	}
	if tk.Status == "completed" {
		return Attempt{}, destination.Message{}, t.refuseWith(a, "", "", req.Executor, EvRefused,
			&StateError{Key: a.Key, State: a.State, Err: ErrWrongState, Hint: "task " + tk.ID + " is completed"},
			"%s tried to send %s, but task %s is completed.", req.Executor, a.Key, tk.ID)
	}
	ap, err := t.validApprovalOrRefuse(a, req.Executor, fresh)
	if err != nil {
		return Attempt{}, destination.Message{}, err
	}
	if err := t.executePolicy(a, ap, req.Executor); err != nil {
		return Attempt{}, destination.Message{}, err
	}
	if missing := missingMaterial(ap, req.Reread); len(missing) > 0 {
		return Attempt{}, destination.Message{}, invalidf("send %s: the approval rests on %s; re-read and pass every one (--material), nothing was recorded",
			a.Key, strings.Join(missing, ", "))
	}
	if err := t.bindDestination(a, &ap, req); err != nil {
		return Attempt{}, destination.Message{}, err
	}
	if err := t.refuseUnlessOwner(a, tk, ap, req.Executor); err != nil {
		return Attempt{}, destination.Message{}, err
	}
	checks, err := t.compareMaterialOrRefuse(a, ap, req)
	if err != nil {
		return Attempt{}, destination.Message{}, err
	}
	att, err := t.startAttempt(a, ap, req, checks, fresh != nil)
	if err != nil {
		return Attempt{}, destination.Message{}, err
	}
	msg := destination.Message{ActionKey: a.Key, Attempt: att.Number, TransportID: att.TransportID,
		From: att.Sender, To: att.Recipient, ToName: a.RecipientName, Subject: a.Subject, Body: a.Body, Target: a.Target, HTTP: att.write}
	return att, msg, nil
}

// refuseWith records a refusal: an optional transition (to "" keeps the
// state), the history line saying who tried what, and returns err to the
// caller after committing both.
func (t *wtx) refuseWith(a *Action, to State, cause HoldCause, actor string, kind EventKind, err error, format string, args ...any) error {
	if to != "" {
		if terr := t.transition(a, to, refusalReason(err), cause); terr != nil {
			return terr
		}
		if se, ok := err.(*StateError); ok {
			se.State = a.State
		}
	}
	if eerr := t.event(actor, a.TaskID, a.Key, kind, "", format, args...); eerr != nil {
		return eerr
	}
	return refuse(err)
}

// refusalReason is the reason a refusal leaves on the action.
func refusalReason(err error) string {
	var se *StateError
	if errors.As(err, &se) && se.Hint != "" {
		return se.Hint
	}
	return err.Error()
}

// refuseUnlessExecutable refuses by state and by the stop switch, recording
// duplicate blocks and a stop's hold.
func (t *wtx) refuseUnlessExecutable(a *Action, executor string) error {
	switch a.State {
	case StateApproved:
		if a.LateArrivals > 0 {
			// Approved again (after a denial, say) although its message
			// arrived: it is held as arrived, so that what the ledger
			// says of it agrees with the refusal.
			arrived, err := arrivedAttempts(t, a.Key)
			if err != nil {
				return err
			}
			if err := t.heldAsArrived(a, executor, arrived); err != nil {
				return err
			}
			return t.blockDuplicate(a, executor, "execution")
		}
	case StateSent, StateExecuting, StateUnknown:
		return t.blockDuplicate(a, executor, "execution")
	case StateHeld:
		if a.HoldCause == HoldProbeDue {
			// The probe goes through every check of a send: should the
			// first request never have arrived, it is the first execution.
			if err := t.refuseStaleProbe(a, executor); err != nil {
				return err
			}
			break
		}
		if a.HoldCause.outcomeOpen() {
			return t.blockDuplicate(a, executor, "execution")
		}
		return &StateError{Key: a.Key, State: a.State, Err: ErrHeld, Hint: a.Reason}
	case StateDenied:
		return &StateError{Key: a.Key, State: a.State, Err: ErrDenied, Hint: a.Reason + "; approve again on current values"}
	case StateCancelled:
		return &StateError{Key: a.Key, State: a.State, Err: ErrCancelled, Hint: a.Reason}
	case StateFailed:
		return &StateError{Key: a.Key, State: a.State, Err: ErrFailed, Hint: a.Reason}
	default:
		return t.refuseWith(a, "", "", executor, EvApprovalStale,
			&StateError{Key: a.Key, State: a.State, Err: ErrApprovalStale, Hint: "approve the current content first"},
			"%s tried to send %s, but it is not approved (%s).", executor, a.Key, a.State)
	}
	sw, err := t.stopSwitch()
	if err != nil {
		return err
	}
	if sw.Stopped {
		reason := fmt.Sprintf("execution is stopped (by %s: %s)", sw.Actor, sw.Reason)
		return t.refuseWith(a, StateHeld, HoldStopped, executor, EvRefusedStopped,
			&StateError{Key: a.Key, Err: ErrStopped, Hint: reason},
			"%s tried to send %s while %s; it waits, queued, until execution resumes.", executor, a.Key, reason)
	}
	return nil
}

// validApprovalOrRefuse returns the valid approval bound to the current
// content, or sends the action back to awaiting approval and refuses.
func (t *wtx) validApprovalOrRefuse(a *Action, executor string, fresh *freshApproval) (Approval, error) {
	var ap Approval
	ok := fresh != nil
	if ok {
		ap = fresh.approval
	} else {
		var err error
		if ap, ok, err = currentApproval(t, a.Key); err != nil {
			return ap, err
		}
	}
	var why string
	switch {
	case !ok:
		why = "there is no valid approval"
	case ap.Digest != a.Digest:
		why = "the content changed after approval"
	case !mailaddr.Same(ap.Recipient, a.Recipient):
		why = fmt.Sprintf("the recipient changed after approval (%s → %s)", ap.Recipient, a.Recipient)
	case ap.Target != a.Target:
		why = "the target changed after approval"
	default:
		return ap, nil
	}
	return ap, t.refuseWith(a, StateAwaitingApproval, "", executor, EvApprovalStale,
		&StateError{Key: a.Key, Err: ErrApprovalStale, Hint: why},
		"%s tried to send %s, but %s; it needs approval again.", executor, a.Key, why)
}

// missingMaterial lists the approved material fields the caller did not
// re-read: a slip of the caller, not a change of the data.
func missingMaterial(ap Approval, reread []MaterialRead) []string {
	got := map[string]bool{}
	for _, m := range reread {
		got[m.Name()] = true
	}
	var missing []string
	for _, want := range sortMaterial(ap.Material) {
		if !got[want.Name()] {
			missing = append(missing, want.Name())
		}
	}
	return missing
}

// bindDestination checks the destination, its records endpoint, its settle
// time and the sender the caller is about to use against the approved ones.
// An approval recorded before destinations were bound is bound now, to
// this first send's destination, and the history says so; one recorded
// before settle times were bound keeps none (see settleOf).
func (t *wtx) bindDestination(a *Action, ap *Approval, req ExecuteRequest) error {
	dest := req.Endpoint.Destination
	if ap.Destination == "" {
		sender := firstNonEmpty(ap.Sender, a.Sender, req.From, destination.DefaultSender)
		if _, err := t.Exec(`UPDATE approvals SET destination = ?, sender = ? WHERE id = ?`, dest, sender, ap.ID); err != nil {
			return fmt.Errorf("bind approval of %s: %w", a.Key, err)
		}
		if _, err := t.Exec(`UPDATE actions SET destination = ?, lookup = ?, destination_settings = ?, sender = ? WHERE key = ?`,
			dest, req.Endpoint.Lookup, req.Endpoint.Settings, sender, a.Key); err != nil {
			return fmt.Errorf("bind %s: %w", a.Key, err)
		}
		ap.Destination, ap.Sender, a.Destination, a.Lookup, a.Sender = dest, sender, dest, req.Endpoint.Lookup, sender
		a.DestinationSettings = req.Endpoint.Settings
		return t.event(req.Executor, a.TaskID, a.Key, EvDestinationBound, "",
			"The approval of %s was recorded before approvals named a destination; it is bound now to the destination of its first send, %s, from %s.",
			a.Key, destination.Endpoint{Destination: dest, Lookup: req.Endpoint.Lookup}, sender)
	}
	var de *DestinationError
	switch {
	case dest != ap.Destination:
		de = &DestinationError{Key: a.Key, Field: "destination", Recorded: ap.Destination, Named: dest}
	case req.Endpoint.Lookup != "" && req.Endpoint.Lookup != a.Lookup:
		// Another records endpoint would have reconciliation ask records
		// that never saw this message: "absent", and a duplicate.
		de = &DestinationError{Key: a.Key, Field: "records endpoint", Recorded: orDash(a.Lookup), Named: req.Endpoint.Lookup}
	case req.From != "" && !mailaddr.Same(req.From, ap.Sender):
		de = &DestinationError{Key: a.Key, Field: "sender", Recorded: ap.Sender, Named: req.From}
	default:
		// Another settle time would have reconciliation conclude absence
		// on other terms than the approved ones.
		if de = otherSettle(a.Key, ap.Settle, req.Endpoint); de == nil {
			return nil
		}
	}
	return t.refuseWith(a, "", "", req.Executor, EvWrongDestination, de,
		"The gate refused %s's send of %s %s %s: the approved %s is %s; nothing was sent.",
		req.Executor, a.Key, namedAs[de.Field], de.Named, de.Field, de.Recorded)
}

// refuseUnlessOwner enforces that only the task's owner executes, and that
// the owner is the one the approval was given under. A refusal holds,
// cancels or denies the action as the case demands.
func (t *wtx) refuseUnlessOwner(a *Action, tk Task, ap Approval, executor string) error {
	switch {
	case tk.Owner == "":
		reason := fmt.Sprintf("task %s has no owner; a person must claim it", tk.ID)
		return t.refuseWith(a, StateHeld, HoldOwnerMissing, executor, EvHeld,
			&StateError{Key: a.Key, Err: ErrHeld, Hint: reason},
			"%s tried to send %s, but %s; the action is held.", executor, a.Key, reason)
	case tk.Owner != executor && ap.Owner != tk.Owner:
		reason := fmt.Sprintf("owner changed from %s to %s after approval; %s's proposal was withdrawn", ownerName(ap.Owner), tk.Owner, executor)
		if err := t.transition(a, StateCancelled, reason, ""); err != nil {
			return err
		}
		return t.refuseWith(a, "", "", executor, EvOwnershipConflict,
			&OwnershipError{Task: tk.ID, Owner: tk.Owner, Actor: executor, Cancelled: true},
			"The gate stopped %s's send of %s: %s now owns task %s, so the proposal was cancelled.", executor, a.Key, tk.Owner, tk.ID)
	case tk.Owner != executor:
		return t.refuseWith(a, "", "", executor, EvOwnershipConflict,
			&OwnershipError{Task: tk.ID, Owner: tk.Owner, Actor: executor},
			"The gate refused %s's send of %s: %s owns task %s.", executor, a.Key, tk.Owner, tk.ID)
	case ap.Owner != tk.Owner:
		d := &DeniedError{Key: a.Key, Source: "helpdesk", Field: "owner", Approved: ap.Owner, Current: tk.Owner}
		return t.deny(a, executor, d, nil)
	}
	return nil
}

// compareMaterialOrRefuse compares the caller's re-read with the approved
// snapshot. It returns the checks to record with the attempt; on a
// difference it records them, denies (or holds, when a source could not be
// read) and refuses.
func (t *wtx) compareMaterialOrRefuse(a *Action, ap Approval, req ExecuteRequest) ([]MaterialCheck, error) {
	reread := map[string]MaterialRead{}
	for _, m := range req.Reread {
		reread[m.Name()] = m
	}
	var checks []MaterialCheck
	var denial *DeniedError
	var unavailable []string
	for _, want := range sortMaterial(ap.Material) {
		got := reread[want.Name()] // present: missingMaterial ran first
		c := MaterialCheck{ActionKey: a.Key, At: t.now(), Source: want.Source, Field: want.Field,
			Approved: want.Value, Read: got.Value, Unavailable: got.Unavailable}
		c.Matched = !got.Unavailable && got.Value == want.Value
		checks = append(checks, c)
		switch {
		case got.Unavailable:
			if !containsString(unavailable, want.Source) {
				unavailable = append(unavailable, want.Source)
			}
		case got.Value != want.Value && denial == nil:
			denial = &DeniedError{Key: a.Key, Source: want.Source, Field: want.Field, Approved: want.Value, Current: got.Value}
		}
	}
	if len(unavailable) > 0 {
		if err := t.recordChecks(checks, 0); err != nil {
			return nil, err
		}
		reason := fmt.Sprintf("source %s unavailable at send time; material state could not be re-read", strings.Join(unavailable, ", "))
		return nil, t.refuseWith(a, StateHeld, HoldSourceUnavailable, req.Executor, EvHeld,
			&StateError{Key: a.Key, Err: ErrHeld, Hint: reason},
			"%s tried to send %s, but %s; the action is held.", req.Executor, a.Key, reason)
	}
	if denial != nil {
		return nil, t.deny(a, req.Executor, denial, checks)
	}
	return checks, nil
}

func (t *wtx) deny(a *Action, executor string, d *DeniedError, checks []MaterialCheck) error {
	if err := t.recordChecks(checks, 0); err != nil {
		return err
	}
	if err := t.transition(a, StateDenied, d.Error(), ""); err != nil {
		return err
	}
	t.note(map[string]any{"source": d.Source, "field": d.Field, "approved": d.Approved, "current": d.Current}, "")
	return t.refuseWith(a, "", "", executor, EvDenied, d,
		"The gate denied %s's send of %s: %s.%s changed since approval, from %q to %q.", executor, a.Key, d.Source, d.Field, d.Approved, d.Current)
}

func (t *wtx) recordChecks(checks []MaterialCheck, attempt int) error {
	for _, c := range checks {
		if err := t.later("record material check", `INSERT INTO material_checks (action_key, attempt, at, source, field, approved, read_value, matched, unavailable)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`, c.ActionKey, attempt, ns(c.At), c.Source, c.Field, c.Approved, c.Read,
			boolInt(c.Matched), boolInt(c.Unavailable)); err != nil {
			return err
		}
	}
	return nil
}

const lastAttemptRead = `SELECT COALESCE(max(number), 0) FROM attempts WHERE action_key = ?`

// startAttempt records the attempt's intent: what goes where, under which
// Message-ID. It is committed durably (the transaction is write's) before
// anything is sent.
func (t *wtx) startAttempt(a *Action, ap Approval, req ExecuteRequest, checks []MaterialCheck, fresh bool) (Attempt, error) {
	var n int // an action this transaction inserted has no attempts
	if !fresh {
		if err := t.QueryRow(lastAttemptRead, a.Key).Scan(&n); err != nil {
			return Attempt{}, err
		}
	}
	ledgerID, err := t.ledgerID()
	if err != nil {
		return Attempt{}, err
	}
	settle := settleOf(ap.Settle, a.DestinationSettings, req.Endpoint)
	att := Attempt{ActionKey: a.Key, Number: n + 1, TransportID: NewTransportID(ledgerID, n+1), Executor: req.Executor,
		Holder: t.l.holder, StartedAt: t.now(), LeaseUntil: t.now().Add(t.l.lease),
		Destination: ap.Destination, Lookup: a.Lookup, Epoch: req.Endpoint.Epoch, Recipient: a.Recipient,
		Sender: firstNonEmpty(ap.Sender, destination.DefaultSender), ContentDigest: destination.ContentDigest(a.Subject, a.Body)}
	att.SettlesAt = att.LeaseUntil.Add(settle)
	att.MessageID = att.TransportID
	if a.Request != "" {
		if err := t.writeOf(a, &att, n); err != nil {
			return Attempt{}, err
		}
	}
	const insert = `INSERT INTO attempts (action_key, number, transport_id, executor, holder, started_at, lease_until,
		destination, lookup, message_id, recipient, sender, epoch, content_digest, settles_at, wire, provider_key, key_generation)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`
	args := []any{att.ActionKey, att.Number, att.TransportID, att.Executor, att.Holder,
		ns(att.StartedAt), ns(att.LeaseUntil), att.Destination, att.Lookup, att.MessageID, att.Recipient, att.Sender, att.Epoch,
		att.ContentDigest, ns(att.SettlesAt), att.Wire, att.ProviderKey, att.KeyGeneration}
	what := fmt.Sprintf("record attempt %d of %s", att.Number, a.Key)
	moving := fmt.Sprintf("attempt %d in flight", att.Number)
	moved := fresh && t.pg == nil
	if moved {
		// An action this transaction inserted moves first: on SQLite its
		// row still waits to be inserted (see batchState.pending), and
		// the move folds into it instead of updating it after.
		if err := t.transition(a, StateExecuting, moving, ""); err != nil {
			return Attempt{}, err
		}
	}
	if t.pg != nil && t.attemptID != nil {
		// Nothing in the transaction reads the new row's id: the INSERT
		// travels with COMMIT, and the caller (BeginAttempt) reads the id
		// once COMMIT's round trip returned. A failure (a second attempt
		// in flight, say) fails the COMMIT, as it failed the INSERT.
		t.pg.laterReturning(what, t.l.dialect.rebind(insert), args, t.attemptID)
	} else if err := t.QueryRow(insert, args...).Scan(&att.ID); err != nil {
		return Attempt{}, fmt.Errorf("%s: %w", what, err)
	}
	if err := t.recordChecks(checks, att.Number); err != nil {
		return Attempt{}, err
	}
	if !moved {
		if err := t.transition(a, StateExecuting, moving, ""); err != nil {
			return Attempt{}, err
		}
	}
	// The epoch stays out of this line: it is in the attempt's record, and a
	// hold it causes names it; here it would only be noise in every history.
	if a.Request != "" {
		t.note(map[string]any{"attempt": att.Number, "destination": att.Destination, "lookup": att.Lookup,
			"message_id": att.MessageID, "key_generation": att.KeyGeneration, "wire": att.Wire}, "")
		what := "request"
		if att.probe {
			what = "probe (the same bytes under the same key as attempt " + fmt.Sprint(att.Number-1) + ")"
		}
		return att, t.event(req.Executor, a.TaskID, a.Key, EvAttemptStarted, "",
			"%s started attempt %d of %s, a %s %s, to %s with key generation %d; the intent and the bytes are recorded before anything is sent.",
			req.Executor, att.Number, a.Key, what, requestLine(att.Wire), att.Endpoint(), att.KeyGeneration)
	}
	t.note(map[string]any{"attempt": att.Number, "destination": att.Destination, "lookup": att.Lookup,
		"message_id": att.MessageID, "recipient": att.Recipient, "sender": att.Sender}, "")
	return att, t.event(req.Executor, a.TaskID, a.Key, EvAttemptStarted, "",
		"%s started attempt %d of %s to %s from %s via %s (Message-ID %s); the intent is recorded before anything is sent.",
		req.Executor, att.Number, a.Key, att.Recipient, att.Sender, att.Endpoint(), att.MessageID)
}

// Endpoint is where the attempt recorded it went.
func (at Attempt) Endpoint() destination.Endpoint {
	return destination.Endpoint{Destination: at.Destination, Lookup: at.Lookup, Epoch: at.Epoch}
}

// RecordOutcome is the recording half of Execute: it stores what the
// destination did with the attempt identified by transportID and moves the
// action on: accepted → sent; not delivered or temporarily rejected →
// approved again; permanently rejected → failed; unknown → unknown.
//
// If recovery already declared the attempt unknown (the lease ran out), only
// a confirmed acceptance still changes it.
func (l *Ledger) RecordOutcome(ctx context.Context, transportID string, o destination.Outcome, response string) (Action, error) {
	var out Action
	err := l.writeRelaxed(ctx, func(t *wtx) (err error) {
		out, err = t.recordOutcome(transportID, o, response)
		return err
	})
	return out, err
}

// recordOutcome is RecordOutcome inside t.
func (t *wtx) recordOutcome(transportID string, o destination.Outcome, response string) (Action, error) {
	return t.recordOutcomeOf(transportID, o, response, destination.Receipt{})
}

// recordOutcomeOf is recordOutcome with what the destination's receipt
// says besides (an HTTP status, the provider's id of what it created).
func (t *wtx) recordOutcomeOf(transportID string, o destination.Outcome, response string, rcpt destination.Receipt) (Action, error) {
	t.readAhead(actionOfTransportID, []any{transportID}, actionByKey)
	att, err := getAttemptByTransport(t, transportID)
	if err != nil {
		return Action{}, err
	}
	out, err := getAction(t, att.ActionKey)
	if err != nil {
		return out, err
	}
	switch {
	case att.Outcome == "":
	case att.Outcome == destination.OutcomeUnknown && o == destination.OutcomeAccepted && !att.Reconciled:
	case o == destination.OutcomeAccepted && !att.ArrivedLate.IsZero():
		return out, nil // known to have arrived already: the same fact again
	case o == destination.OutcomeAccepted && att.Outcome != destination.OutcomeAccepted:
		// Settled otherwise (reconciled as absent, say) and then confirmed
		// after all: the message arrived, and a retry may have sent it
		// again. The outcome stays as settled; the arrival is kept beside
		// it, and the action is never attempted again.
		if err := t.requireDurable(); err != nil {
			return out, err
		}
		if err := t.markArrived(&out, att); err != nil {
			return out, err
		}
		arrived, err := arrivedAttempts(t, out.Key)
		if err != nil {
			return out, err
		}
		t.note(map[string]any{"attempt": att.Number, "reported": string(o), "settled_as": string(att.Outcome),
			"message_id": att.MessageID, "destination": att.Destination, "arrivals": out.Arrivals()}, "")
		consequence := " If it was retried, the customer may receive it twice; check the destination." + arrivalConsequence(out, arrived)
		if out.ArrivedTwice() {
			consequence = arrivalConsequence(out, arrived)
		}
		if err := t.event(att.Executor, out.TaskID, out.Key, EvLateOutcome, "",
			"Attempt %d of %s was confirmed accepted after it had been settled as %s.%s", att.Number, out.Key, att.Outcome, consequence); err != nil {
			return out, err
		}
		return out, t.holdArrivedLate(&out, att.Executor, arrived)
	case o == att.Outcome:
		return out, nil // the same report again (a retried RecordDelivery): nothing new
	default:
		// Settled already: the report changes nothing, but it is evidence
		// the gate did not have when it settled, and it is kept.
		return out, t.event(att.Executor, out.TaskID, out.Key, EvLateOutcome, "",
			"Attempt %d of %s reported %s (%s) after it had been settled as %s; recorded, it changes nothing.",
			att.Number, out.Key, o, truncate(response, 300), att.Outcome)
	}
	if err := t.later("record outcome of "+transportID, `UPDATE attempts SET outcome = ?, outcome_at = ?, response = ?, http_status = ?, destination_action_id = ? WHERE id = ?`,
		string(o), ns(t.now()), truncate(response, 2000), rcpt.Status, truncate(rcpt.DestinationID, 200), att.ID); err != nil {
		return out, err
	}
	att.HTTPStatus, att.DestinationID = rcpt.Status, rcpt.DestinationID
	if att.ProviderKey != "" && att.Number > 1 { // a first attempt probes nothing
		if probed, err := t.probedAttempt(att); err != nil {
			return out, err
		} else if probed != nil {
			return out, t.applyProbe(&out, att, *probed, o, response, rcpt)
		}
	}
	return out, t.applyOutcome(&out, att, o, response, false)
}

// applyOutcome moves the action according to an attempt's outcome.
func (t *wtx) applyOutcome(a *Action, att Attempt, o destination.Outcome, response string, reconciled bool) error {
	actor := att.Executor
	t.note(map[string]any{"attempt": att.Number, "outcome": string(o), "destination": att.Destination,
		"message_id": att.MessageID, "reconciled": reconciled}, "")
	switch o {
	case destination.OutcomeAccepted:
		if reconciled {
			// response says who established it: reconciliation or a person.
			if err := t.transition(a, StateSent, fmt.Sprintf("sent by attempt %d: %s", att.Number, truncate(response, 200)), ""); err != nil {
				return err
			}
			return t.event(actor, a.TaskID, a.Key, EvSent, "", "Attempt %d of %s was accepted: %s.", att.Number, a.Key, truncate(response, 200))
		}
		how := "the destination confirmed acceptance"
		if err := t.transition(a, StateSent, fmt.Sprintf("sent by attempt %d: %s", att.Number, how), ""); err != nil {
			return err
		}
		return t.event(actor, a.TaskID, a.Key, EvSent, "", "Attempt %d of %s was accepted by %s: %s (%s).", att.Number, a.Key,
			orDash(att.Destination), how, truncate(response, 200))
	case destination.OutcomeUnknown:
		if err := t.transition(a, StateUnknown, fmt.Sprintf("attempt %d outcome unknown: %s", att.Number, truncate(response, 200)), ""); err != nil {
			return err
		}
		return t.event(actor, a.TaskID, a.Key, EvUnknown, "",
			"Attempt %d of %s to %s has an unknown outcome (%s): the message may have arrived, so it will not be re-sent; reconcile it.",
			att.Number, a.Key, orDash(att.Destination), truncate(response, 200))
	case destination.OutcomeContradiction:
		reason := truncate(fmt.Sprintf("contradiction at %s for attempt %d: the provider holds another request under its key (%s). Something may have been done under it; a person must check the destination (gate resolve)",
			orDash(att.Destination), att.Number, truncate(response, 300)), 1000)
		if err := t.transition(a, StateHeld, reason, HoldContradiction); err != nil {
			return err
		}
		return t.event(actor, a.TaskID, a.Key, EvContradiction, "",
			"Attempt %d of %s was answered by %s with a key reused for another request (%s): it is held for a person and will not be re-sent.",
			att.Number, a.Key, orDash(att.Destination), truncate(response, 200))
	case destination.OutcomeRejectedPermanent:
		if err := t.transition(a, StateFailed, "rejected permanently: "+truncate(response, 200), ""); err != nil {
			return err
		}
		return t.event(actor, a.TaskID, a.Key, EvFailed, "", "Attempt %d of %s was rejected permanently (%s); nothing was delivered.", att.Number, a.Key, truncate(response, 200))
	default:
		if err := t.transition(a, StateApproved, fmt.Sprintf("attempt %d not delivered; may be retried", att.Number), ""); err != nil {
			return err
		}
		return t.event(actor, a.TaskID, a.Key, EvNotDelivered, "",
			"Attempt %d of %s was not delivered (%s); nothing arrived, so it is approved again and may be retried.", att.Number, a.Key, truncate(response, 200))
	}
}

const attemptCols = `id, action_key, number, transport_id, executor, holder, started_at, lease_until, outcome, outcome_at, response, reconciled,
	destination, lookup, message_id, recipient, sender, epoch, content_digest, settles_at, arrived_late,
	wire, provider_key, key_generation, http_status, destination_action_id`

func scanAttempt(s interface{ Scan(...any) error }) (Attempt, error) {
	var at Attempt
	var st, lu, oa, sa, al int64
	var o string
	var rec int
	err := s.Scan(&at.ID, &at.ActionKey, &at.Number, &at.TransportID, &at.Executor, &at.Holder, &st, &lu, &o, &oa, &at.Response, &rec,
		&at.Destination, &at.Lookup, &at.MessageID, &at.Recipient, &at.Sender, &at.Epoch, &at.ContentDigest, &sa, &al,
		&at.Wire, &at.ProviderKey, &at.KeyGeneration, &at.HTTPStatus, &at.DestinationID)
	at.StartedAt, at.LeaseUntil, at.OutcomeAt, at.ArrivedLate = fromNS(st), fromNS(lu), fromNS(oa), fromNS(al)
	if at.SettlesAt = fromNS(sa); sa == 0 {
		// Recorded before attempts kept their settle time.
		at.SettlesAt = at.LeaseUntil.Add(destination.DefaultSettleTime)
	}
	at.Outcome, at.Reconciled = destination.Outcome(o), rec == 1
	if at.MessageID == "" {
		// Attempts recorded before Message-IDs were stored carried their
		// transport id as Message-ID.
		at.MessageID = at.TransportID
	}
	return at, err
}

func getAttemptByTransport(q queryer, transportID string) (Attempt, error) {
	at, err := scanAttempt(q.QueryRow(`SELECT `+attemptCols+` FROM attempts WHERE transport_id = ?`, transportID))
	if err != nil {
		return at, fmt.Errorf("attempt %s: %w", transportID, notFound(err))
	}
	return at, nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// truncate cuts s to at most n bytes on a rune boundary, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// loadIdentity reads the ledger's name once, when it is opened, so that no
// deciding transaction spends a round trip on it; a ledger whose schema
// predates it is read later, by the first attempt (ledgerID).
func (l *Ledger) loadIdentity(ctx context.Context, db *sql.DB) {
	var id string
	if err := db.QueryRowContext(ctx, `SELECT id FROM ledger_identity`).Scan(&id); err == nil {
		l.identity.Store(&id)
	}
}

// ledgerID is the ledger's name, which every Message-ID it draws carries.
func (t *wtx) ledgerID() (string, error) {
	if id := t.l.identity.Load(); id != nil {
		return *id, nil
	}
	var id string
	if err := t.QueryRow(`SELECT id FROM ledger_identity`).Scan(&id); err != nil {
		return "", fmt.Errorf("read the ledger's identity: %w", err)
	}
	t.l.identity.Store(&id)
	return id, nil
}

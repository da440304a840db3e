package ledger

import (
	"context"
	"fmt"
	"strings"
)

// ExecuteRequest asks the gate to execute one approved action.
type ExecuteRequest struct {
	Key      string
	Executor string // must be the task's owner
	// Reread holds the material fields the caller re-read from their sources
	// immediately before this call. Each approved field must be present.
	Reread []MaterialRead
	From   string // optional sender; the destination's default when empty
}

// Result is what one execution produced.
type Result struct {
	Action  Action
	Attempt Attempt
	Outcome Outcome
	Receipt Receipt
}

// Execute runs the whole gate for one action: it decides and records the
// attempt in one transaction (committed before the destination is called),
// sends once through dest, and records the outcome in a second transaction.
// A nil error means the destination confirmed acceptance. Every refusal is a
// typed error (see errors.go); an unknown outcome returns ErrUnknownOutcome
// and is never retried here.
func (l *Ledger) Execute(ctx context.Context, req ExecuteRequest, dest Destination) (Result, error) {
	att, msg, err := l.BeginAttempt(ctx, req)
	if err != nil {
		return Result{Attempt: att}, err
	}
	// The send must end well inside the attempt's lease: once the lease runs
	// out, recovery may declare the attempt unknown and a reconciliation that
	// finds nothing yet would allow a retry while this send still lands.
	sendCtx, cancel := context.WithTimeout(ctx, l.lease*3/4)
	rcpt, sendErr := dest.Send(sendCtx, msg)
	cancel()
	outcome := ClassifyDelivery(sendErr)
	response := rcpt.Response
	if sendErr != nil {
		response = sendErr.Error()
	}
	// The outcome must be recorded even if the caller's context is done.
	a, recErr := l.RecordOutcome(context.WithoutCancel(ctx), msg.TransportID, outcome, response)
	res := Result{Action: a, Attempt: att, Outcome: outcome, Receipt: rcpt}
	if recErr != nil {
		return res, recErr
	}
	return res, outcomeError(a, outcome, sendErr)
}

func outcomeError(a Action, o Outcome, sendErr error) error {
	switch o {
	case OutcomeAccepted:
		return nil
	case OutcomeUnknown:
		return &StateError{Key: a.Key, State: a.State, Err: ErrUnknownOutcome,
			Hint: fmt.Sprintf("the destination may have accepted it (%v); reconcile, do not resend", sendErr)}
	case OutcomeRejectedPermanent:
		return &StateError{Key: a.Key, State: a.State, Err: ErrFailed, Hint: sendErr.Error()}
	default:
		return &StateError{Key: a.Key, State: a.State, Err: ErrNotDelivered,
			Hint: fmt.Sprintf("nothing was delivered (%v); the action is approved again and may be retried", sendErr)}
	}
}

// BeginAttempt is the deciding half of Execute. In one BEGIN IMMEDIATE
// transaction it checks the action's state, the stop switch, the approval,
// the owner and the re-read material fields, and when all hold, records the
// attempt (number, transport id, lease) and moves the action to executing.
// The returned Message is what the destination must receive.
func (l *Ledger) BeginAttempt(ctx context.Context, req ExecuteRequest) (Attempt, Message, error) {
	if req.Executor == "" {
		return Attempt{}, Message{}, invalidf("execute %s: executor is empty", req.Key)
	}
	var att Attempt
	var msg Message
	err := l.write(ctx, func(t *wtx) error {
		a, err := getAction(t, req.Key)
		if err != nil {
			return err
		}
		if err := t.checkExecutable(&a, req.Executor); err != nil {
			return err
		}
		tk, err := getTask(t, a.TaskID)
		if err != nil {
			return err
		}
		if tk.Status == "completed" {
			if err := t.event(req.Executor, a.TaskID, a.Key, EvApprovalStale, "",
				"%s tried to send %s, but task %s is completed.", req.Executor, a.Key, tk.ID); err != nil {
				return err
			}
			return refuse(&StateError{Key: a.Key, State: a.State, Err: ErrWrongState, Hint: "task " + tk.ID + " is completed"})
		}
		ap, err := t.checkApproval(&a, req.Executor)
		if err != nil {
			return err
		}
		if err := t.checkOwner(&a, tk, ap, req.Executor); err != nil {
			return err
		}
		if err := t.checkMaterial(&a, ap, req); err != nil {
			return err
		}
		att, err = t.startAttempt(&a, req.Executor)
		if err != nil {
			return err
		}
		msg = Message{ActionKey: a.Key, Attempt: att.Number, TransportID: att.TransportID,
			From: req.From, To: a.Recipient, Subject: a.Subject, Body: a.Body, Target: a.Target}
		return nil
	})
	return att, msg, err
}

// checkExecutable refuses by state and by the stop switch.
func (t *wtx) checkExecutable(a *Action, executor string) error {
	switch a.State {
	case StateApproved:
	case StateSent, StateExecuting, StateUnknown:
		return t.blockDuplicate(a, executor, "execution")
	case StateHeld:
		if a.HoldCause == HoldUnknownOutcome {
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
		if err := t.event(executor, a.TaskID, a.Key, EvApprovalStale, "",
			"%s tried to send %s, but it is not approved (%s).", executor, a.Key, a.State); err != nil {
			return err
		}
		return refuse(&StateError{Key: a.Key, State: a.State, Err: ErrApprovalStale, Hint: "approve the current content first"})
	}
	sw, err := t.stopSwitch()
	if err != nil {
		return err
	}
	if sw.Stopped {
		reason := fmt.Sprintf("execution is stopped (by %s: %s)", sw.Actor, sw.Reason)
		if err := t.transition(a, StateHeld, reason, HoldStopped); err != nil {
			return err
		}
		if err := t.event(executor, a.TaskID, a.Key, EvRefusedStopped, "",
			"%s tried to send %s while %s; it waits, queued, until execution resumes.", executor, a.Key, reason); err != nil {
			return err
		}
		return refuse(&StateError{Key: a.Key, State: a.State, Err: ErrStopped, Hint: reason})
	}
	return nil
}

// checkApproval returns the valid approval bound to the current content.
func (t *wtx) checkApproval(a *Action, executor string) (Approval, error) {
	ap, ok, err := currentApproval(t, a.Key)
	if err != nil {
		return ap, err
	}
	var why string
	switch {
	case !ok:
		why = "there is no valid approval"
	case ap.Digest != a.Digest:
		why = "the content changed after approval"
	case !strings.EqualFold(strings.TrimSpace(ap.Recipient), strings.TrimSpace(a.Recipient)):
		why = fmt.Sprintf("the recipient changed after approval (%s → %s)", ap.Recipient, a.Recipient)
	case ap.Target != a.Target:
		why = "the target changed after approval"
	default:
		return ap, nil
	}
	if err := t.transition(a, StateAwaitingApproval, why, ""); err != nil {
		return ap, err
	}
	if err := t.event(executor, a.TaskID, a.Key, EvApprovalStale, "",
		"%s tried to send %s, but %s; it needs approval again.", executor, a.Key, why); err != nil {
		return ap, err
	}
	return ap, refuse(&StateError{Key: a.Key, State: a.State, Err: ErrApprovalStale, Hint: why})
}

// checkOwner enforces that only the task's owner executes, and that the owner
// is the one the approval was given under.
func (t *wtx) checkOwner(a *Action, tk Task, ap Approval, executor string) error {
	switch {
	case tk.Owner == "":
		reason := fmt.Sprintf("task %s has no owner; a person must claim it", tk.ID)
		if err := t.transition(a, StateHeld, reason, HoldOwnerMissing); err != nil {
			return err
		}
		if err := t.event(executor, a.TaskID, a.Key, EvHeld, "",
			"%s tried to send %s, but %s; the action is held.", executor, a.Key, reason); err != nil {
			return err
		}
		return refuse(&StateError{Key: a.Key, State: a.State, Err: ErrHeld, Hint: reason})
	case tk.Owner != executor && ap.Owner != tk.Owner:
		reason := fmt.Sprintf("owner changed from %s to %s after approval; %s's proposal was withdrawn", ownerName(ap.Owner), tk.Owner, executor)
		if err := t.transition(a, StateCancelled, reason, ""); err != nil {
			return err
		}
		if err := t.event(executor, a.TaskID, a.Key, EvOwnershipConflict, "",
			"The gate stopped %s's send of %s: %s now owns task %s, so the proposal was cancelled.", executor, a.Key, tk.Owner, tk.ID); err != nil {
			return err
		}
		return refuse(&OwnershipError{Task: tk.ID, Owner: tk.Owner, Actor: executor, Cancelled: true})
	case tk.Owner != executor:
		if err := t.event(executor, a.TaskID, a.Key, EvOwnershipConflict, "",
			"The gate refused %s's send of %s: %s owns task %s.", executor, a.Key, tk.Owner, tk.ID); err != nil {
			return err
		}
		return refuse(&OwnershipError{Task: tk.ID, Owner: tk.Owner, Actor: executor})
	case ap.Owner != tk.Owner:
		d := &DeniedError{Key: a.Key, Source: "helpdesk", Field: "owner", Approved: ap.Owner, Current: tk.Owner}
		return t.deny(a, executor, d, nil)
	}
	return nil
}

// checkMaterial compares the caller's re-read with the approved snapshot and
// records every check.
func (t *wtx) checkMaterial(a *Action, ap Approval, req ExecuteRequest) error {
	reread := map[string]MaterialRead{}
	for _, m := range req.Reread {
		reread[m.Name()] = m
	}
	var checks []MaterialCheck
	var denial *DeniedError
	var unavailable []string
	for _, want := range sortMaterial(ap.Material) {
		got, ok := reread[want.Name()]
		c := MaterialCheck{ActionKey: a.Key, At: t.now, Source: want.Source, Field: want.Field,
			Approved: want.Value, Read: got.Value, Unavailable: got.Unavailable}
		c.Matched = ok && !got.Unavailable && got.Value == want.Value
		checks = append(checks, c)
		switch {
		case ok && got.Unavailable:
			if !containsString(unavailable, want.Source) {
				unavailable = append(unavailable, want.Source)
			}
		case !ok && denial == nil:
			denial = &DeniedError{Key: a.Key, Source: want.Source, Field: want.Field, Approved: want.Value, Missing: true}
		case ok && got.Value != want.Value && denial == nil:
			denial = &DeniedError{Key: a.Key, Source: want.Source, Field: want.Field, Approved: want.Value, Current: got.Value}
		}
	}
	if len(unavailable) > 0 {
		if err := t.recordChecks(checks, 0); err != nil {
			return err
		}
		reason := fmt.Sprintf("source %s unavailable at send time; material state could not be re-read", strings.Join(unavailable, ", "))
		if err := t.transition(a, StateHeld, reason, HoldSourceUnavailable); err != nil {
			return err
		}
		if err := t.event(req.Executor, a.TaskID, a.Key, EvHeld, "",
			"%s tried to send %s, but %s; the action is held.", req.Executor, a.Key, reason); err != nil {
			return err
		}
		return refuse(&StateError{Key: a.Key, State: a.State, Err: ErrHeld, Hint: reason})
	}
	if denial != nil {
		return t.deny(a, req.Executor, denial, checks)
	}
	t.pendingChecks = checks
	return nil
}

func (t *wtx) deny(a *Action, executor string, d *DeniedError, checks []MaterialCheck) error {
	if err := t.recordChecks(checks, 0); err != nil {
		return err
	}
	if err := t.transition(a, StateDenied, d.Error(), ""); err != nil {
		return err
	}
	var msg string
	if d.Missing {
		msg = fmt.Sprintf("The gate denied %s's send of %s: %s.%s was not re-read before execution.", executor, a.Key, d.Source, d.Field)
	} else {
		msg = fmt.Sprintf("The gate denied %s's send of %s: %s.%s changed since approval, from %q to %q.", executor, a.Key, d.Source, d.Field, d.Approved, d.Current)
	}
	if err := t.event(executor, a.TaskID, a.Key, EvDenied, "", "%s", msg); err != nil {
		return err
	}
	return refuse(d)
}

func (t *wtx) recordChecks(checks []MaterialCheck, attempt int) error {
	for _, c := range checks {
		if _, err := t.Exec(`INSERT INTO material_checks (action_key, attempt, at, source, field, approved, read_value, matched, unavailable)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`, c.ActionKey, attempt, ns(c.At), c.Source, c.Field, c.Approved, c.Read,
			boolInt(c.Matched), boolInt(c.Unavailable)); err != nil {
			return fmt.Errorf("record material check: %w", err)
		}
	}
	return nil
}

func (t *wtx) startAttempt(a *Action, executor string) (Attempt, error) {
	var n int
	if err := t.QueryRow(`SELECT COALESCE(max(number), 0) FROM attempts WHERE action_key = ?`, a.Key).Scan(&n); err != nil {
		return Attempt{}, err
	}
	att := Attempt{ActionKey: a.Key, Number: n + 1, TransportID: TransportID(a.Key, n+1), Executor: executor,
		Holder: t.l.holder, StartedAt: t.now, LeaseUntil: t.now.Add(t.l.lease)}
	err := t.QueryRow(`INSERT INTO attempts (action_key, number, transport_id, executor, holder, started_at, lease_until)
		VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id`, att.ActionKey, att.Number, att.TransportID, att.Executor, att.Holder,
		ns(att.StartedAt), ns(att.LeaseUntil)).Scan(&att.ID)
	if err != nil {
		return Attempt{}, fmt.Errorf("record attempt %d of %s: %w", att.Number, a.Key, err)
	}
	if err := t.recordChecks(t.pendingChecks, att.Number); err != nil {
		return Attempt{}, err
	}
	if err := t.transition(a, StateExecuting, fmt.Sprintf("attempt %d in flight", att.Number), ""); err != nil {
		return Attempt{}, err
	}
	return att, t.event(executor, a.TaskID, a.Key, EvAttemptStarted, "",
		"%s started attempt %d of %s to %s (transport id %s); the intent is recorded before anything is sent.",
		executor, att.Number, a.Key, a.Recipient, att.TransportID)
}

// RecordOutcome is the recording half of Execute: it stores what the
// destination did with the attempt identified by transportID and moves the
// action on: accepted → sent; not delivered or temporarily rejected →
// approved again; permanently rejected → failed; unknown → unknown.
//
// If recovery already declared the attempt unknown (the lease ran out), only
// a confirmed acceptance still changes it.
func (l *Ledger) RecordOutcome(ctx context.Context, transportID string, o Outcome, response string) (Action, error) {
	var out Action
	err := l.writeRelaxed(ctx, func(t *wtx) error {
		att, err := getAttemptByTransport(t, transportID)
		if err != nil {
			return err
		}
		a, err := getAction(t, att.ActionKey)
		if err != nil {
			return err
		}
		out = a
		switch {
		case att.Outcome == "":
		case att.Outcome == OutcomeUnknown && o == OutcomeAccepted && !att.Reconciled:
		case o == OutcomeAccepted && att.Outcome != OutcomeAccepted:
			// Settled otherwise (reconciled as absent, say) and then confirmed
			// after all: a second message may be on its way. Say so loudly.
			return t.event(att.Executor, a.TaskID, a.Key, EvLateOutcome, "",
				"Attempt %d of %s was confirmed accepted after it had been settled as %s; if it was retried, the customer may receive it twice. Check the destination.",
				att.Number, a.Key, att.Outcome)
		default:
			return nil // already settled: a late report changes nothing
		}
		if _, err := t.Exec(`UPDATE attempts SET outcome = ?, outcome_at = ?, response = ? WHERE id = ?`,
			string(o), ns(t.now), truncate(response, 2000), att.ID); err != nil {
			return fmt.Errorf("record outcome of %s: %w", transportID, err)
		}
		return t.applyOutcome(&out, att, o, response, false)
	})
	return out, err
}

// applyOutcome moves the action according to an attempt's outcome.
func (t *wtx) applyOutcome(a *Action, att Attempt, o Outcome, response string, reconciled bool) error {
	actor := att.Executor
	switch o {
	case OutcomeAccepted:
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
		return t.event(actor, a.TaskID, a.Key, EvSent, "", "Attempt %d of %s was accepted: %s (%s).", att.Number, a.Key, how, truncate(response, 200))
	case OutcomeUnknown:
		if err := t.transition(a, StateUnknown, fmt.Sprintf("attempt %d outcome unknown: %s", att.Number, truncate(response, 200)), ""); err != nil {
			return err
		}
		return t.event(actor, a.TaskID, a.Key, EvUnknown, "",
			"Attempt %d of %s has an unknown outcome (%s): the message may have arrived, so it will not be re-sent; reconcile it.",
			att.Number, a.Key, truncate(response, 200))
	case OutcomeRejectedPermanent:
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

const attemptCols = `id, action_key, number, transport_id, executor, holder, started_at, lease_until, outcome, outcome_at, response, reconciled`

func scanAttempt(s interface{ Scan(...any) error }) (Attempt, error) {
	var at Attempt
	var st, lu, oa int64
	var o string
	var rec int
	err := s.Scan(&at.ID, &at.ActionKey, &at.Number, &at.TransportID, &at.Executor, &at.Holder, &st, &lu, &o, &oa, &at.Response, &rec)
	at.StartedAt, at.LeaseUntil, at.OutcomeAt = fromNS(st), fromNS(lu), fromNS(oa)
	at.Outcome, at.Reconciled = Outcome(o), rec == 1
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

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

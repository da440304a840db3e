package ledger

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// Reconcile establishes the outcome of an action whose outcome is unknown
// from the destination's own records, never by re-sending:
//   - found at the destination → sent (confirmed by reconciliation);
//   - provably absent → held, safe to retry after review;
//   - no Looker (looker nil) or the lookup failed → held for a person.
//
// Reconciling an action that is not unknown changes nothing and returns it.
func (l *Ledger) Reconcile(ctx context.Context, key, actor string, looker Looker) (Action, error) {
	a, err := l.Action(ctx, key)
	if err != nil {
		return a, err
	}
	if !needsReconcile(a) {
		return a, nil
	}
	var asked Attempt // the attempt the destination is asked about
	if err := l.read(ctx, func(tx queryTx) (err error) {
		asked, err = lastAttempt(tx, key)
		return err
	}); err != nil {
		return a, err
	}
	var res LookupResult
	var lookErr error
	if looker == nil {
		lookErr = errors.New("the destination offers no lookup")
	} else {
		res, lookErr = looker.Lookup(ctx, key)
	}
	var out Action
	err = l.writeRelaxed(ctx, func(t *wtx) error {
		cur, err := getAction(t, key)
		if err != nil {
			return err
		}
		out = cur
		if !needsReconcile(cur) {
			return nil // someone else reconciled meanwhile
		}
		att, err := lastAttempt(t, key)
		if err != nil {
			return err
		}
		if asked.ID != att.ID || cur.Version != a.Version {
			return nil // the action moved on while the destination was asked; its answer is stale
		}
		switch {
		case lookErr != nil:
			reason := fmt.Sprintf("outcome of attempt %d unknown and could not be checked (%v); a person must look at the destination", att.Number, lookErr)
			if cur.State != StateHeld {
				if err := t.transition(&out, StateHeld, reason, HoldUnknownOutcome); err != nil {
					return err
				}
			}
			if err := t.event(actor, cur.TaskID, key, EvHeld, "",
				"%s tried to reconcile %s, but %v; it stays held and will not be re-sent.", actor, key, lookErr); err != nil {
				return err
			}
			return refuse(&StateError{Key: key, State: out.State, Err: ErrHeld, Hint: reason})
		case res.Found:
			return t.settleReconciled(&out, att, actor, OutcomeAccepted,
				fmt.Sprintf("reconciliation found %d message(s) at the destination (%s)", res.Count, strings.Join(res.MessageIDs, ", ")))
		default:
			return t.settleReconciled(&out, att, actor, OutcomeNotDelivered, "reconciliation found no message at the destination")
		}
	})
	return out, err
}

// ResolveUnknown records an outcome a person established by checking the
// destination themselves (delivered or not), with a mandatory reason.
func (l *Ledger) ResolveUnknown(ctx context.Context, key, actor string, delivered bool, reason string) (Action, error) {
	if strings.TrimSpace(reason) == "" {
		return Action{}, invalidf("resolve %s: a reason is required", key)
	}
	return l.onAction(ctx, key, true, func(t *wtx, a *Action) error {
		if !needsReconcile(*a) {
			return &StateError{Key: key, State: a.State, Err: ErrWrongState, Hint: "its outcome is not unknown"}
		}
		att, err := lastAttempt(t, key)
		if err != nil {
			return err
		}
		o := OutcomeNotDelivered
		if delivered {
			o = OutcomeAccepted
		}
		return t.settleReconciled(a, att, actor, o, actor+" checked the destination by hand: "+reason)
	})
}

func needsReconcile(a Action) bool {
	return a.State == StateUnknown || (a.State == StateHeld && a.HoldCause == HoldUnknownOutcome)
}

func (t *wtx) settleReconciled(a *Action, att Attempt, actor string, o Outcome, note string) error {
	if _, err := t.Exec(`UPDATE attempts SET outcome = ?, outcome_at = ?, response = ?, reconciled = 1 WHERE id = ?`,
		string(o), ns(t.now), note, att.ID); err != nil {
		return fmt.Errorf("record reconciliation of %s: %w", a.Key, err)
	}
	if err := t.event(actor, a.TaskID, a.Key, EvReconciled, "", "%s reconciled %s: %s.", actor, a.Key, note); err != nil {
		return err
	}
	if o == OutcomeAccepted {
		att.Executor = actor
		return t.applyOutcome(a, att, o, note, true)
	}
	reason := fmt.Sprintf("attempt %d did not arrive (%s); safe to retry after review", att.Number, note)
	if err := t.transition(a, StateHeld, reason, HoldSafeToRetry); err != nil {
		return err
	}
	return t.event(actor, a.TaskID, a.Key, EvHeld, "", "%s is held: nothing arrived, so a reviewed retry is safe; release the hold to allow it.", a.Key)
}

func lastAttempt(q queryer, key string) (Attempt, error) {
	at, err := scanAttempt(q.QueryRow(`SELECT `+attemptCols+` FROM attempts WHERE action_key = ? ORDER BY number DESC LIMIT 1`, key))
	if err != nil {
		return at, fmt.Errorf("last attempt of %s: %w", key, notFound(err))
	}
	return at, nil
}

// Hold puts an action on hold for a person, with a mandatory reason. An
// action in flight cannot be held (its attempt must finish first); an action
// with an unknown outcome is parked as such.
func (l *Ledger) Hold(ctx context.Context, key, actor, reason string) (Action, error) {
	if strings.TrimSpace(reason) == "" {
		return Action{}, invalidf("hold %s: a reason is required", key)
	}
	return l.onAction(ctx, key, true, func(t *wtx, a *Action) error {
		cause := HoldOperator
		switch a.State {
		case StateDrafting, StateAwaitingApproval, StateApproved, StateDenied:
		case StateUnknown:
			cause = HoldUnknownOutcome
		case StateHeld:
			return nil
		case StateExecuting:
			return &StateError{Key: key, State: a.State, Err: ErrInFlight, Hint: "wait for the attempt's outcome"}
		default:
			return &StateError{Key: key, State: a.State, Err: ErrWrongState, Hint: "it already has an outcome"}
		}
		if err := t.transition(a, StateHeld, "held by "+actor+": "+reason, cause); err != nil {
			return err
		}
		return t.event(actor, a.TaskID, key, EvHeld, reason, "%s put %s on hold because: %s.", actor, key, reason)
	})
}

// ReleaseHold lets a held action continue, with a mandatory reason. A hold
// over an unknown outcome cannot be released before the outcome is
// established (Reconcile or ResolveUnknown). The action returns to approved
// only while its approval still matches; otherwise it awaits approval again.
func (l *Ledger) ReleaseHold(ctx context.Context, key, actor, reason string) (Action, error) {
	if strings.TrimSpace(reason) == "" {
		return Action{}, invalidf("release hold %s: a reason is required", key)
	}
	return l.onAction(ctx, key, true, func(t *wtx, a *Action) error {
		if a.State != StateHeld {
			return &StateError{Key: key, State: a.State, Err: ErrWrongState, Hint: "it is not held"}
		}
		if a.HoldCause == HoldUnknownOutcome {
			return &StateError{Key: key, State: a.State, Err: ErrUnknownOutcome,
				Hint: "the message may have arrived; reconcile or resolve the outcome before releasing"}
		}
		return t.releaseHold(a, actor, reason)
	})
}

func (t *wtx) releaseHold(a *Action, actor, reason string) error {
	from, err := t.heldFrom(a.Key)
	if err != nil {
		return err
	}
	to := from
	switch from {
	case StateDrafting, StateAwaitingApproval, StateDenied:
	default:
		to = StateApproved
		ap, ok, err := currentApproval(t, a.Key)
		if err != nil {
			return err
		}
		if !ok || ap.Digest != a.Digest {
			to = StateAwaitingApproval
		}
	}
	if err := t.transition(a, to, "hold released by "+actor+": "+reason, ""); err != nil {
		return err
	}
	return t.event(actor, a.TaskID, a.Key, EvHoldReleased, reason, "%s released the hold on %s because: %s; it is %s again.", actor, a.Key, reason, to)
}

// Stop turns the stop switch on: from now on no attempt starts anywhere;
// actions that try are held as queued. Attempts already in flight finish and
// record their outcome.
func (l *Ledger) Stop(ctx context.Context, actor, reason string) error {
	if strings.TrimSpace(reason) == "" {
		return invalidf("stop: a reason is required")
	}
	return l.write(ctx, func(t *wtx) error {
		if _, err := t.Exec(`UPDATE stop_switch SET stopped = 1, actor = ?, reason = ?, at = ?, version = version + 1 WHERE id = 1`,
			actor, reason, ns(t.now)); err != nil {
			return err
		}
		return t.event(actor, "", "", EvStopped, reason, "%s stopped all execution because: %s.", actor, reason)
	})
}

// Resume turns the stop switch off and releases the holds the stop caused.
func (l *Ledger) Resume(ctx context.Context, actor, reason string) error {
	if strings.TrimSpace(reason) == "" {
		return invalidf("resume: a reason is required")
	}
	return l.write(ctx, func(t *wtx) error {
		if _, err := t.Exec(`UPDATE stop_switch SET stopped = 0, actor = ?, reason = ?, at = ?, version = version + 1 WHERE id = 1`,
			actor, reason, ns(t.now)); err != nil {
			return err
		}
		if err := t.event(actor, "", "", EvResumed, reason, "%s resumed execution because: %s.", actor, reason); err != nil {
			return err
		}
		rows, err := t.Query(`SELECT `+actionCols+` FROM actions WHERE state = 'held' AND hold_cause = ?`, string(HoldStopped))
		if err != nil {
			return err
		}
		var held []Action
		for rows.Next() {
			a, err := scanAction(rows)
			if err != nil {
				rows.Close()
				return err
			}
			held = append(held, a)
		}
		rows.Close()
		for i := range held {
			if err := t.releaseHold(&held[i], actor, "execution resumed"); err != nil {
				return err
			}
		}
		return nil
	})
}

// StopState reads the stop switch.
func (l *Ledger) StopState(ctx context.Context) (Switch, error) {
	var sw Switch
	err := l.read(ctx, func(tx queryTx) error {
		var err error
		sw, err = readSwitch(tx)
		return err
	})
	return sw, err
}

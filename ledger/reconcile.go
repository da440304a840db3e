package ledger

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/mail"
	"strings"
	"time"

	"gatehouse/destination"
	"gatehouse/internal/mailaddr"
)

// ReconcileRequest asks the gate to establish an unknown outcome.
type ReconcileRequest struct {
	Key   string
	Actor string
	// Open reaches the records of the attempt's recorded destination; nil
	// means no records can be consulted (the action is then held).
	Open destination.RecordsOpener
	// Named is the destination the caller named, if any. It must be the
	// attempt's own (a named lookup endpoint must match too) unless Moved.
	Named *destination.Endpoint
	// Moved says the attempt's destination now answers at Named (a test
	// mailbox restarted on another port, say): a person's recorded
	// override, which needs a Reason.
	Moved  bool
	Reason string
}

// Reconcile establishes the outcome of an action whose outcome is unknown
// from the records of the destination its last attempt recorded, never by
// re-sending, and counting only that attempt's own message:
//   - the attempt's Message-ID stored for its recipient, and nothing else
//     carrying the key → sent (confirmed by reconciliation);
//   - a lookup that answered and holds nothing for the key or the
//     Message-ID → held, safe to retry after review;
//   - anything else the records hold for the key (another Message-ID, the
//     right Message-ID for another recipient) → held as a contradiction for
//     a person, named in the reason; never proof of delivery or absence;
//   - no records to consult, or a lookup that failed or answered
//     unreadably → held for a person;
//   - nothing found in records of another epoch than the attempt recorded
//     (cleared or restarted since the hand-over) → held: absence cannot be
//     established from records that forgot.
//
// Naming a destination other than the recorded one is refused unless the
// request says it moved, with a reason. Reconciling an action whose outcome
// is not open changes nothing and returns it.
func (l *Ledger) Reconcile(ctx context.Context, req ReconcileRequest) (Action, error) {
	key, actor := req.Key, req.Actor
	if req.Moved && strings.TrimSpace(req.Reason) == "" {
		return Action{}, invalidf("reconcile %s: a moved destination needs a reason", key)
	}
	if req.Moved && req.Named == nil {
		return Action{}, invalidf("reconcile %s: say where the destination moved to", key)
	}
	a, err := l.Action(ctx, key)
	if err != nil {
		return a, err
	}
	var atts []Attempt
	if err := l.read(ctx, func(tx queryTx) (err error) {
		atts, err = listAttempts(tx, key)
		return err
	}); err != nil {
		return a, err
	}
	if !needsReconcile(a) {
		// Rechecking may find nothing to write: the refusal is said here.
		if err := l.Authorize(ctx, actor, VerbReconcile); err != nil {
			return a, err
		}
		return l.recheckSettled(ctx, a, actor, req.Open, atts)
	}
	if len(atts) == 0 {
		return a, fmt.Errorf("last attempt of %s: %w", key, ErrNotFound)
	}
	asked, earlier := atts[len(atts)-1], atts[:len(atts)-1] // asked: the attempt the destination is asked about
	if asked.Recipient == "" && asked.Wire == "" {
		asked.Recipient = a.Recipient // recorded before attempts stored it
	}
	earlier = sameKeyAs(earlier, asked)
	// Why a keyed attempt is not probed (its window ended, say): said with
	// the records' answer, which then decides.
	var whyNoProbe string
	if asked.ProviderKey != "" && !req.Moved {
		// Within the provider's key window, the probe is the evidence:
		// the same bytes under the same key answer what the provider
		// stored, and are the first execution if nothing arrived.
		var probed bool
		out, err := l.onAction(ctx, key, false, func(t *wtx, cur *Action) (err error) {
			if !needsReconcile(*cur) || cur.Version != a.Version {
				return nil
			}
			att, err := lastAttempt(t, key)
			if err != nil || att.ID != asked.ID {
				return err
			}
			var ok bool
			var end time.Time
			if ok, end, whyNoProbe, err = t.probeDue(att); err != nil || !ok {
				return err
			}
			probed = true
			return t.holdProbeDue(cur, att, actor, end)
		})
		if probed || err != nil {
			return out, err
		}
	}
	ep, note, refusal := reconcileEndpoint(asked, req)
	if refusal != nil {
		return l.refuseReconcile(ctx, a, actor, refusal)
	}
	res, lookErr := lookUp(ctx, req.Open, ep, destination.LookupQuery{ActionKey: key, MessageID: asked.MessageID})
	if lookErr != nil && whyNoProbe != "" {
		lookErr = fmt.Errorf("%s, and %w", whyNoProbe, lookErr)
	}
	// The earlier attempts settled as not arrived are read again with it:
	// the one lookup answers for those recorded at the same records.
	var made *answered
	if lookErr == nil {
		made = &answered{recorded: asked.Endpoint(), at: ep, res: res}
	}
	late, _, _ := lookLate(ctx, req.Open, key, recheckable(earlier), made)
	var out Action
	err = l.writeRelaxed(ctx, func(t *wtx) error {
		t.readAhead(actionByKey, []any{key}, "")
		s, err := t.standingOf(actor)
		if err != nil {
			return err
		}
		cur, err := getAction(t, key)
		if err != nil {
			return err
		}
		out = cur
		if err := t.judge(s, actor, VerbReconcile, cur.TaskID, key); err != nil {
			return err
		}
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
		if note != "" {
			kind := EvDestinationMoved
			if err := t.event(actor, cur.TaskID, key, kind, req.Reason, "%s", note); err != nil {
				return err
			}
		}
		// An earlier attempt's message found is recorded before this
		// attempt is judged, so that an absence knows there is nothing to
		// retry, and after it when this attempt arrived too, so that the
		// line says the customer has it twice.
		recordLate := func() error {
			_, err := t.recordLateFinds(&out, late, actor, actor+"'s reconciliation of attempt "+fmt.Sprint(att.Number))
			return err
		}
		var v verdict
		if lookErr == nil {
			v = judge(asked, withoutOwnOf(res, earlier))
		}
		if lookErr != nil || len(v.contradictions) > 0 || v.own == 0 {
			if err := recordLate(); err != nil {
				return err
			}
		}
		if lookErr != nil {
			reason := fmt.Sprintf("outcome of attempt %d unknown and could not be checked (%v); a person must look at the destination", att.Number, lookErr)
			// A provider's contradiction stays one: records that cannot be
			// read add nothing to it.
			keep := cur.HoldCause == HoldUnknownOutcome || att.Wire != "" && cur.HoldCause == HoldContradiction
			if cur.State != StateHeld || !keep {
				if err := t.transition(&out, StateHeld, reason, HoldUnknownOutcome); err != nil {
					return err
				}
			}
			return t.refuseWith(&out, "", "", actor, EvHeld,
				&StateError{Key: key, State: out.State, Err: ErrHeld, Hint: reason},
				"%s tried to reconcile %s at %s, but %v; it stays held and will not be re-sent.", actor, key, orDash(ep.String()), lookErr)
		}
		switch {
		case len(v.contradictions) > 0:
			return t.holdContradiction(&out, att, actor, ep, v)
		case v.own > 0:
			// Its own Message-ID is proof of delivery whatever the epoch.
			found := fmt.Sprintf("reconciliation found its message %s for %s at %s", att.MessageID, asked.Recipient, ep.Destination)
			if att.Wire != "" {
				found = fmt.Sprintf("reconciliation found its record %s under key %s at %s", strings.Join(v.ids, ", "), att.MessageID, ep.Destination)
				if _, err := t.Exec(`UPDATE attempts SET destination_action_id = ? WHERE id = ?`, truncate(strings.Join(v.ids, ", "), 200), att.ID); err != nil {
					return err
				}
			}
			if err := t.settleReconciled(&out, att, actor, destination.OutcomeAccepted, "", found); err != nil {
				return err
			}
			return recordLate()
		case res.Epoch != att.Epoch:
			return t.holdForgotten(&out, att, actor, ep, res.Epoch)
		case t.now().Before(att.SettlesAt):
			return t.holdNotFoundYet(&out, att, actor, ep)
		default:
			return t.settleReconciled(&out, att, actor, destination.OutcomeNotDelivered, "",
				fmt.Sprintf("reconciliation found no message %s and nothing else for the key at %s", att.MessageID, ep.Destination))
		}
	})
	return out, err
}

// reconcileEndpoint decides which records to ask: the attempt's own, or
// the ones a person said it moved to. It returns a history note for an
// override, or the refusal of a wrong destination.
func reconcileEndpoint(asked Attempt, req ReconcileRequest) (destination.Endpoint, string, *DestinationError) {
	rec := asked.Endpoint()
	named := req.Named
	switch {
	case rec.Destination == "" && named != nil:
		return *named, fmt.Sprintf("%s reconciles attempt %d of %s at %s, which %s named: the attempt was recorded before attempts stored their destination.",
			req.Actor, asked.Number, asked.ActionKey, named, req.Actor), nil
	case named == nil || sameEndpoint(rec, *named):
		return rec, "", nil
	case req.Moved:
		return *named, fmt.Sprintf("%s said the destination of attempt %d of %s moved from %s to %s because: %s.",
			req.Actor, asked.Number, asked.ActionKey, rec, named, req.Reason), nil
	}
	return rec, "", &DestinationError{Key: asked.ActionKey, Field: "destination", Recorded: rec.String(), Named: named.String(), Attempt: asked.Number}
}

// sameEndpoint: a named endpoint matches the recorded one when it names the
// same destination and, if it names a lookup endpoint, the same one.
func sameEndpoint(rec, named destination.Endpoint) bool {
	return rec.Destination == named.Destination && (named.Lookup == "" || named.Lookup == rec.Lookup)
}

// refuseReconcile records that a reconcile named the wrong destination and
// refuses it; the action does not change.
func (l *Ledger) refuseReconcile(ctx context.Context, a Action, actor string, de *DestinationError) (Action, error) {
	return l.onActionBy(ctx, a.Key, false, actor, VerbReconcile, func(t *wtx, cur *Action) error {
		return t.refuseWith(cur, "", "", actor, EvWrongDestination, de,
			"The gate refused %s's reconcile of %s against %s: attempt %d went to %s; only its own destination may be asked.",
			actor, a.Key, de.Named, de.Attempt, de.Recorded)
	})
}

// errNoRecords: the destination keeps no records the gate can consult (a
// fake:// destination, an SMTP relay without a query API).
var errNoRecords = errors.New("keeps no records the gate can consult")

// lookUp asks the endpoint's records, checking that the opener reached the
// destination it was asked for.
func lookUp(ctx context.Context, open destination.RecordsOpener, ep destination.Endpoint, q destination.LookupQuery) (destination.LookupResult, error) {
	if ep.Destination == "" {
		return destination.LookupResult{}, errors.New("the attempt was recorded before attempts stored their destination; name the destination it was sent to")
	}
	if open == nil {
		return destination.LookupResult{}, fmt.Errorf("no way to reach the records of %s was given", ep)
	}
	lk, err := open.OpenRecords(ep)
	if err != nil {
		return destination.LookupResult{}, fmt.Errorf("open the records of %s: %w", ep, err)
	}
	if lk == nil {
		return destination.LookupResult{}, fmt.Errorf("%s %w", ep, errNoRecords)
	}
	if lk.Identity() != ep.Destination {
		return destination.LookupResult{}, fmt.Errorf("asked for the records of %s but reached %s", ep.Destination, lk.Identity())
	}
	return lk.Lookup(ctx, q)
}

// verdict is what a destination's records say about one attempt.
type verdict struct {
	own            int      // stored copies of the attempt's message for its recipient
	contradictions []string // everything else found, in plain words
	ids            []string // the provider's ids of an HTTP attempt's own records
}

// judge counts the attempt's own message and names everything else as a
// contradiction. A stored message is the attempt's only when its
// Message-ID, recipient, sender and content digest all match what the
// intent recorded: a Message-ID alone can be copied by anyone who saw one,
// so a copy that says something else, or comes from someone else, is
// evidence for a person, never proof of delivery.
func judge(att Attempt, res destination.LookupResult) verdict {
	if att.Wire != "" {
		return judgeRecords(att, res)
	}
	var v verdict
	for _, m := range res.Messages {
		switch {
		case m.MessageID != att.MessageID:
			v.contradictions = append(v.contradictions, fmt.Sprintf("message %s carries the key but is not attempt %d's (to %s)",
				orDash(m.MessageID), att.Number, strings.Join(m.Recipients, ", ")))
		case !containsFold(m.Recipients, att.Recipient):
			v.contradictions = append(v.contradictions, fmt.Sprintf("message %s arrived for %s, not for %s",
				m.MessageID, strings.Join(m.Recipients, ", "), att.Recipient))
		case !sameSender(m.Sender, att.Sender):
			v.contradictions = append(v.contradictions, fmt.Sprintf("message %s carries attempt %d's Message-ID but comes from %s, not %s",
				m.MessageID, att.Number, orDash(m.Sender), att.Sender))
		case att.ContentDigest != "" && m.ContentDigest != att.ContentDigest:
			what := "says something else than what the attempt handed over"
			if m.ContentDigest == "" {
				what = "could not be read to tell what it says"
			}
			v.contradictions = append(v.contradictions, fmt.Sprintf("message %s carries attempt %d's Message-ID but %s",
				m.MessageID, att.Number, what))
		default:
			v.own++
		}
	}
	return v
}

// sameSender compares the sender records report with the attempt's, as
// bare addresses (the attempt may name a display name too).
func sameSender(found, recorded string) bool {
	bare := func(s string) string {
		if a, err := mail.ParseAddress(s); err == nil {
			return a.Address
		}
		return s
	}
	return found != "" && mailaddr.Same(bare(found), bare(recorded))
}

func containsFold(list []string, s string) bool {
	for _, x := range list {
		if mailaddr.Same(x, s) {
			return true
		}
	}
	return false
}

// holdForgotten parks the action for a person: the records answered, but
// they are not the records the attempt was handed to (cleared, or a store
// that lives in memory restarted), so finding nothing proves nothing.
func (t *wtx) holdForgotten(a *Action, att Attempt, actor string, ep destination.Endpoint, now string) error {
	then := att.Epoch
	if then == "" {
		then = "none recorded"
	}
	reason := fmt.Sprintf("outcome of attempt %d cannot be established: the records at %s answered from epoch %s, but the attempt was handed over under epoch %s; they were cleared or restarted since, so finding nothing proves nothing. A person must look at the destination",
		att.Number, ep, orDash(now), then)
	if a.State != StateHeld || a.HoldCause != HoldUnknownOutcome {
		if err := t.transition(a, StateHeld, reason, HoldUnknownOutcome); err != nil {
			return err
		}
	}
	return t.refuseWith(a, "", "", actor, EvHeld,
		&StateError{Key: a.Key, State: a.State, Err: ErrHeld, Hint: reason},
		"%s tried to reconcile %s at %s, but the outcome cannot be established: its records are of epoch %s, not %s (cleared or restarted since the hand-over); it stays held and will not be re-sent.",
		actor, a.Key, ep, orDash(now), then)
}

// holdNotFoundYet keeps the action's outcome open: the records hold
// nothing for the attempt, but its message may still land (its executor
// may be alive past its lease, a relay may hold it), so finding nothing is
// not absence yet. Only a later reconciliation, after SettlesAt, may
// conclude it; nothing else releases the hold.
func (t *wtx) holdNotFoundYet(a *Action, att Attempt, actor string, ep destination.Endpoint) error {
	reason := fmt.Sprintf("attempt %d not found yet at %s; looked at %s, it may still land until %s: reconcile again after that",
		att.Number, ep.Destination, clockTime(t.now()), clockTime(att.SettlesAt))
	if a.State != StateHeld || a.HoldCause != HoldNotFoundYet || a.Reason != reason {
		if err := t.transition(a, StateHeld, reason, HoldNotFoundYet); err != nil {
			return err
		}
	}
	return t.refuseWith(a, "", "", actor, EvHeld,
		&StateError{Key: a.Key, State: a.State, Err: ErrHeld, Hint: reason},
		"%s reconciled %s: the records of %s hold nothing for attempt %d yet, but it may still land until %s (its lease and the destination's settle time); it stays held and will not be re-sent before then.",
		actor, a.Key, ep.Destination, att.Number, clockTime(att.SettlesAt))
}

// clockTime shows an instant of the ledger's clock in its history: UTC,
// to the second.
func clockTime(at time.Time) string { return at.UTC().Format("2006-01-02 15:04:05 UTC") }

// holdContradiction parks the action for a person: the records hold
// something that is neither this attempt's message nor its absence.
func (t *wtx) holdContradiction(a *Action, att Attempt, actor string, ep destination.Endpoint, v verdict) error {
	found := "its own message was not found"
	if v.own > 0 {
		found = "its own message was found too"
	}
	reason := truncate(fmt.Sprintf("contradiction at %s for attempt %d: %s; %s. A person must check the destination (gate resolve)",
		ep.Destination, att.Number, strings.Join(v.contradictions, "; "), found), 1000)
	if err := t.transition(a, StateHeld, reason, HoldContradiction); err != nil {
		return err
	}
	return t.event(actor, a.TaskID, a.Key, EvContradiction, "",
		"%s reconciled %s, but the records of %s contradict attempt %d: %s; %s. It is held for a person and will not be re-sent.",
		actor, a.Key, ep.Destination, att.Number, strings.Join(v.contradictions, "; "), found)
}

// ResolveUnknown records an outcome a person established by checking the
// destination themselves (delivered or not), with a mandatory reason. It
// consults no records; Resolve does.
func (l *Ledger) ResolveUnknown(ctx context.Context, key, actor string, delivered bool, reason string) (Action, error) {
	return l.Resolve(ctx, ResolveRequest{Key: key, Actor: actor, Delivered: delivered, Reason: reason})
}

// ResolveRequest is a person's word on an open outcome.
type ResolveRequest struct {
	Key, Actor string
	Delivered  bool
	Reason     string
	// Open reaches the attempt's destination's records, read before the
	// word is taken (nil: none are consulted, and the history says so).
	Open destination.RecordsOpener
	// OverrideRecords takes "not delivered" although the records hold the
	// attempt's message: a person who knows better (a mailbox that stored
	// and then lost it, say), recorded and counted as a manual override.
	OverrideRecords bool
}

// Resolve records an outcome a person established, after reading the
// attempt's own destination's records where it has them: records holding
// the attempt's message refuse "not delivered" (a contradiction, both
// facts in the history, exit 13) unless OverrideRecords; records that
// cannot be read are said so in the history beside the person's word.
// "Not delivered" is refused too while the attempt may still land (before
// its settle time), as reconciliation's "nothing found" would be.
func (l *Ledger) Resolve(ctx context.Context, req ResolveRequest) (Action, error) {
	key, actor, reason := req.Key, req.Actor, req.Reason
	if strings.TrimSpace(reason) == "" {
		return Action{}, invalidf("resolve %s: a reason is required", key)
	}
	a, err := l.Action(ctx, key)
	if err != nil {
		return a, err
	}
	if !needsReconcile(a) {
		return a, &StateError{Key: key, State: a.State, Err: ErrNothingToReconcile, Hint: "its outcome is not unknown"}
	}
	var asked Attempt
	if err := l.read(ctx, func(tx queryTx) (err error) {
		asked, err = lastAttempt(tx, key)
		return err
	}); err != nil {
		return a, err
	}
	if asked.Recipient == "" {
		asked.Recipient = a.Recipient
	}
	var v verdict
	var lookErr error
	if req.Open == nil {
		lookErr = errors.New("no records were consulted")
	} else {
		var res destination.LookupResult
		res, lookErr = lookUp(ctx, req.Open, asked.Endpoint(), destination.LookupQuery{ActionKey: key, MessageID: asked.MessageID})
		v = judge(asked, res)
	}
	return l.onActionBy(ctx, key, true, actor, VerbResolve, func(t *wtx, a *Action) error {
		reason := reason // a retried transaction starts from the caller's
		if !needsReconcile(*a) {
			return &StateError{Key: key, State: a.State, Err: ErrNothingToReconcile, Hint: "its outcome is not unknown"}
		}
		att, err := lastAttempt(t, key)
		if err != nil {
			return err
		}
		if t.who != nil && t.who.registered && att.Executor == actor {
			// Allowed (a one-person team), and said: nobody else looked.
			reason += fmt.Sprintf(" (%s executed attempt %d themselves)", actor, att.Number)
		}
		if att.ID != asked.ID {
			return &StateError{Key: key, State: a.State, Err: ErrWrongState, Hint: "a new attempt began while its records were read; look again"}
		}
		records := ""
		switch {
		case lookErr != nil:
			records = fmt.Sprintf("; the records of %s could not be read (%v), so this rests on the person's word alone", orDash(att.Destination), lookErr)
		case v.own > 0:
			records = fmt.Sprintf("; the records of %s hold its message %s", att.Destination, att.MessageID)
		default:
			records = fmt.Sprintf("; the records of %s hold no message %s", att.Destination, att.MessageID)
		}
		if !req.Delivered && lookErr == nil && v.own > 0 {
			if !req.OverrideRecords {
				return t.refuseWith(a, "", "", actor, EvContradiction,
					&StateError{Key: key, State: a.State, Err: ErrHeld,
						Hint: fmt.Sprintf("%s says attempt %d did not arrive, but the records of %s hold its message %s; nothing changed (--override-records --reason … if you know better)",
							actor, att.Number, att.Destination, att.MessageID)},
					"%s said attempt %d of %s was not delivered (%s), but the records of %s hold its message %s for %s: a contradiction. The word was not taken; the outcome stays open.",
					actor, att.Number, key, reason, att.Destination, att.MessageID, att.Recipient)
			}
			records += ", overridden by the person"
		}
		if !req.Delivered && !req.OverrideRecords && t.now().Before(att.SettlesAt) {
			// Nobody can see yet what a relay still holds: a person's
			// "nothing came" is no more proof of absence than a lookup's.
			return t.refuseWith(a, "", "", actor, EvRefused,
				&StateError{Key: key, State: a.State, Err: ErrUnknownOutcome,
					Hint: fmt.Sprintf("attempt %d may still land until %s; a person's \"not delivered\" is taken after that (or with --override-records --reason …)",
						att.Number, clockTime(att.SettlesAt))},
				"%s said attempt %d of %s was not delivered (%s) at %s, but it may still land until %s; the word was not taken and the outcome stays open.",
				actor, att.Number, key, reason, clockTime(t.now()), clockTime(att.SettlesAt))
		}
		o := destination.OutcomeNotDelivered
		if req.Delivered {
			o = destination.OutcomeAccepted
		}
		return t.settleReconciled(a, att, actor, o, reason, actor+" checked the destination by hand: "+reason+records)
	})
}

// OutcomeOpen reports whether the action has an attempt whose outcome is
// not established: what Reconcile and Resolve act on.
func (a Action) OutcomeOpen() bool { return needsReconcile(a) }

func needsReconcile(a Action) bool {
	return a.State == StateUnknown || (a.State == StateHeld && a.HoldCause.outcomeOpen())
}

// settleReconciled records an established outcome; a reason says a person
// established it by hand (a manual override, counted as such, the reason
// recorded with its history line), none that reconciliation did.
func (t *wtx) settleReconciled(a *Action, att Attempt, actor string, o destination.Outcome, byPersonBecause, note string) error {
	if _, err := t.Exec(`UPDATE attempts SET outcome = ?, outcome_at = ?, response = ?, reconciled = 1 WHERE id = ?`,
		string(o), ns(t.now()), note, att.ID); err != nil {
		return fmt.Errorf("record reconciliation of %s: %w", a.Key, err)
	}
	by, counter := "reconciliation", ""
	if byPersonBecause != "" {
		by, counter = "person", CounterResolvedByPerson
	}
	t.note(map[string]any{"attempt": att.Number, "outcome": string(o), "by": by, "destination": att.Destination,
		"message_id": att.MessageID}, counter)
	if err := t.event(actor, a.TaskID, a.Key, EvReconciled, byPersonBecause, "%s reconciled %s: %s.", actor, a.Key, note); err != nil {
		return err
	}
	if o == destination.OutcomeAccepted {
		att.Executor = actor
		return t.applyOutcome(a, att, o, note, true)
	}
	if a.LateArrivals > 0 {
		// This attempt did not arrive, but an earlier one did after all:
		// there is nothing to retry.
		arrived, err := arrivedAttempts(t, a.Key)
		if err != nil {
			return err
		}
		return t.heldAsArrived(a, actor, arrived)
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
	return l.onActionBy(ctx, key, true, actor, VerbHold, func(t *wtx, a *Action) error {
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
		if err := t.permitRelease(a, actor); err != nil {
			return err
		}
		if a.State == StateUnknown {
			return &StateError{Key: key, State: a.State, Err: ErrUnknownOutcome,
				Hint: "the message may have arrived; reconcile or resolve the outcome first"}
		}
		if a.State != StateHeld {
			return &StateError{Key: key, State: a.State, Err: ErrWrongState, Hint: "it is not held"}
		}
		if a.HoldCause == HoldNotFoundYet {
			return &StateError{Key: key, State: a.State, Err: ErrUnknownOutcome,
				Hint: "its message was not found yet but may still land (" + a.Reason + "); only a later reconcile can release it"}
		}
		if a.HoldCause.outcomeOpen() {
			return &StateError{Key: key, State: a.State, Err: ErrUnknownOutcome,
				Hint: "the message may have arrived; reconcile or resolve the outcome before releasing"}
		}
		if a.HoldCause == HoldArrivedLate {
			return &StateError{Key: key, State: a.State, Err: ErrDuplicate, Hint: a.Reason}
		}
		return t.releaseHold(a, actor, reason)
	})
}

// permitRelease checks who may lift a hold on a registered ledger: the
// release role, or, for a hold over an absence that reconciliation
// established after the settle time (safe to retry), the execute role too;
// over an absence a person said (gate resolve), only a person.
func (t *wtx) permitRelease(a *Action, actor string) error {
	s, err := t.standingOf(actor)
	if err != nil || !s.registered {
		return err
	}
	role := RoleRelease
	if a.State == StateHeld && a.HoldCause == HoldSafeToRetry {
		byPerson, err := t.absenceByPerson(a.Key)
		if err != nil {
			return err
		}
		switch {
		case byPerson && s.known && s.actor.Enabled && s.actor.Kind != KindPerson:
			return t.notPermitted(actor, VerbReleaseHold,
				"nothing arrived on a person's word (gate resolve), so releasing its retry is a person's act", a.TaskID, a.Key)
		case !byPerson && s.actor.Has(RoleExecute):
			role = RoleExecute
		}
	}
	if why := s.refusal(VerbReleaseHold, role, ""); why != "" {
		return t.notPermitted(actor, VerbReleaseHold, why, a.TaskID, a.Key)
	}
	return nil
}

// absenceByPerson reports whether the action's latest established absence
// rests on a person's word rather than on reconciliation.
func (t *wtx) absenceByPerson(key string) (bool, error) {
	var detail string
	err := t.QueryRow(`SELECT detail FROM events WHERE action_key = ? AND kind = ? ORDER BY id DESC LIMIT 1`, key, string(EvReconciled)).Scan(&detail)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read how %s was reconciled: %w", key, err)
	}
	var d struct {
		By string `json:"by"`
	}
	_ = json.Unmarshal([]byte(detail), &d)
	return d.By != "reconciliation", nil
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
	if a.HoldCause == HoldFoundAfterRestore || a.HoldCause == HoldUnverified {
		// A person's word on what the records showed (or could not show)
		// after a restore: the action is verified by it.
		if err := t.verified(a.Key); err != nil {
			return err
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
		if _, err := t.permit(actor, VerbStop, "", ""); err != nil {
			return err
		}
		if _, err := t.Exec(`UPDATE stop_switch SET stopped = 1, actor = ?, reason = ?, at = ?, version = version + 1 WHERE id = 1`,
			actor, reason, ns(t.now())); err != nil {
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
		if _, err := t.permit(actor, VerbResume, "", ""); err != nil {
			return err
		}
		if _, err := t.Exec(`UPDATE stop_switch SET stopped = 0, actor = ?, reason = ?, at = ?, version = version + 1 WHERE id = 1`,
			actor, reason, ns(t.now())); err != nil {
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

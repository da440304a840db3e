package proof_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gatehouse/destination"
	"gatehouse/destination/registry"
	"gatehouse/ledger"
)

// playSend executes keys one by one through the gate's own steps, which
// ledger.Execute composes (BeginAttempt, Deliver, RecordDelivery), with a
// boundary mark between them so the crash matrix can kill the process
// between any two.
func playSend(ctx context.Context, l *ledger.Ledger, dest destination.Destination, actor string, keys []string, mk *marker) error {
	for i, k := range keys {
		if err := sendSteps(ctx, l, dest, actor, fmt.Sprintf("a%d", i+1), k, mk); err != nil {
			return err
		}
	}
	return nil
}

func sendSteps(ctx context.Context, l *ledger.Ledger, dest destination.Destination, actor, tag, key string, mk *marker) error {
	att, msg, err := l.BeginAttempt(ctx, ledger.ExecuteRequest{Key: key, Executor: actor, Reread: consentYes,
		Endpoint: destination.EndpointAt(ctx, dest)})
	if err != nil {
		return fmt.Errorf("begin %s: %w", key, err)
	}
	mk.mark(tag + "/attempt-recorded")
	d := l.Deliver(ctx, att, msg, dest)
	mk.mark(tag + "/handed-over:" + string(d.Outcome))
	if _, err := l.RecordDelivery(ctx, att, d); errors.Is(err, ledger.ErrNotRecorded) {
		return fmt.Errorf("record %s: %w", key, err)
	}
	mk.mark(tag + "/outcome-recorded")
	return nil
}

// playTakeover is a person taking over a task whose workflow died mid-send:
// the ledger's recovery has already marked the dead executor's attempt
// unknown; the new owner takes over, reconciles it from the mailbox's own
// records, re-approves the rest under their ownership (the old approvals were
// bound to the old owner) and sends them.
func playTakeover(ctx context.Context, l *ledger.Ledger, dest destination.Destination, actor, task string, keys []string, mk *marker) error {
	mk.mark("opened-and-recovered")
	if _, err := l.TakeOver(ctx, ledger.TaskRef{ID: task}, actor, "the workflow's executor died mid-send"); err != nil {
		return err
	}
	mk.mark("takeover-committed")
	for i, k := range keys {
		tag := fmt.Sprintf("a%d", i+1)
		a, err := l.Action(ctx, k)
		if err != nil {
			return err
		}
		if needsReconcile(a) {
			if a, err = l.Reconcile(ctx, ledger.ReconcileRequest{Key: k, Actor: actor, Open: registry.Records()}); err != nil {
				return err
			}
			mk.mark(tag + "/reconciled:" + string(a.State))
		}
		if a.State == ledger.StateSent {
			continue
		}
		if _, err := l.Approve(ctx, k, "lead", consentYes); err != nil {
			return err
		}
		mk.mark(tag + "/reapproved")
		if err := sendSteps(ctx, l, dest, actor, tag, k, mk); err != nil {
			return err
		}
	}
	return nil
}

// playAudience sends a whole audience release through the gate, marking the
// boundaries from inside: the consent re-read before each recipient's attempt
// (after the previous outcome was recorded), the attempt recorded, the
// mailbox's answer, and the end of the run.
func playAudience(ctx context.Context, l *ledger.Ledger, dest destination.Destination, actor, release string, concurrency int, mk *marker) error {
	md := markingDest{dest: dest, mk: mk}
	dir := markingDir{Directory: l.Customers(), mk: mk}
	if _, err := l.SendAudience(ctx, ledger.AudienceSend{ReleaseID: release, Actor: actor, Concurrency: concurrency}, md, dir); err != nil {
		return err
	}
	mk.mark("run-finished")
	return nil
}

// playFinish is the workflow picking up after a crash, on a fresh process
// whose ledger.Open has already run recovery: it takes the task over if it
// is not the owner, reconciles unknown outcomes from the mailbox's records,
// releases holds that reconciliation proved safe, re-approves what a change
// of owner made stale, and executes the rest. Every loop is bounded.
func playFinish(ctx context.Context, l *ledger.Ledger, dest destination.Destination, actor string, keys []string) error {
	for _, k := range keys {
		a, err := l.Action(ctx, k)
		if err != nil {
			return err
		}
		tk, err := l.Task(ctx, a.TaskID)
		if err != nil {
			return err
		}
		if tk.Owner != actor {
			if _, err := l.TakeOver(ctx, ledger.TaskRef{ID: tk.ID}, actor, "finishing the run after a crash"); err != nil {
				return err
			}
		}
		if err := finishOne(ctx, l, dest, actor, k); err != nil {
			return fmt.Errorf("finish %s: %w", k, err)
		}
	}
	return nil
}

func finishOne(ctx context.Context, l *ledger.Ledger, dest destination.Destination, actor, key string) error {
	var prev ledger.Action
	for range 8 {
		a, err := l.Action(ctx, key)
		if err != nil {
			return err
		}
		if a.State == ledger.StateHeld && a.State == prev.State && a.HoldCause == prev.HoldCause && a.Reason == prev.Reason {
			// Reconciling again changed nothing: the outcome is a
			// person's to establish (an HTTP destination without a
			// duplicate control, or past its key window without a
			// reference).
			return nil
		}
		prev = a
		switch {
		case a.State == ledger.StateHeld && a.HoldCause == ledger.HoldNotFoundYet:
			if err = awaitSettled(ctx, l, key); err == nil {
				_, err = l.Reconcile(ctx, ledger.ReconcileRequest{Key: key, Actor: actor, Open: registry.Records()})
			}
		case needsReconcile(a):
			_, err = l.Reconcile(ctx, ledger.ReconcileRequest{Key: key, Actor: actor, Open: registry.Records()})
		case a.State == ledger.StateHeld && a.HoldCause == ledger.HoldSafeToRetry:
			_, err = l.ReleaseHold(ctx, key, actor, "reconciliation proved nothing arrived")
		case a.State == ledger.StateApproved, a.State == ledger.StateHeld && a.HoldCause == ledger.HoldProbeDue:
			// A probe due is a send: the same bytes under the same key,
			// through every check of a send.
			_, err = l.Execute(ctx, ledger.ExecuteRequest{Key: key, Executor: actor, Reread: consentYes}, dest)
			if expectedRefusal(err) {
				err = nil
			}
		case a.State == ledger.StateDenied || a.State == ledger.StateAwaitingApproval:
			_, err = l.Approve(ctx, key, "lead", consentYes)
		default:
			return nil // sent, or an end state that needs a person
		}
		if err != nil && !errors.Is(err, ledger.ErrHeld) {
			return err
		}
	}
	return errors.New("did not settle in 8 steps")
}

func needsReconcile(a ledger.Action) bool {
	return a.State == ledger.StateUnknown || (a.State == ledger.StateHeld &&
		(a.HoldCause == ledger.HoldUnknownOutcome || a.HoldCause == ledger.HoldContradiction))
}

// expectedRefusal reports whether err is one of the gate's typed answers
// (as opposed to an infrastructure failure such as a locked database).
func expectedRefusal(err error) bool {
	for _, s := range []error{ledger.ErrDuplicate, ledger.ErrInFlight, ledger.ErrDenied, ledger.ErrOwnershipConflict,
		ledger.ErrCancelled, ledger.ErrHeld, ledger.ErrUnknownOutcome, ledger.ErrNotDelivered, ledger.ErrFailed,
		ledger.ErrWrongState, ledger.ErrApprovalStale} {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

// markingDest marks the boundaries around the hand-over to the mailbox and
// keeps the wrapped destination's Records, which SendAudience uses to
// reconcile.
type markingDest struct {
	dest destination.Destination
	mk   *marker
}

func (d markingDest) Send(ctx context.Context, m destination.Message) (destination.Receipt, error) {
	c := customerOf(m.ActionKey)
	d.mk.mark(c + "/attempt-recorded")
	r, err := d.dest.Send(ctx, m)
	d.mk.mark(c + "/handed-over:" + string(destination.ClassifyDelivery(err)))
	return r, err
}

// Identity is the wrapped destination's: the marks change nothing about
// where messages go.
func (d markingDest) Identity() string { return d.dest.Identity() }

// LookupEndpoint is the wrapped destination's.
func (d markingDest) LookupEndpoint() string {
	if lk, ok := d.dest.(destination.Records); ok {
		return lk.LookupEndpoint()
	}
	return ""
}

// SettleTime is the wrapped destination's: the marks hold no message.
func (d markingDest) SettleTime() time.Duration { return destination.SettleTimeOf(d.dest) }

// Settings are the wrapped destination's.
func (d markingDest) Settings() string { return destination.EndpointOf(d.dest).Settings }

// Epoch is the wrapped destination's, so that attempts through the marks
// record the epoch of the records as any other attempt does.
func (d markingDest) Epoch(ctx context.Context) (string, error) {
	if er, ok := d.dest.(destination.EpochReporter); ok {
		return er.Epoch(ctx)
	}
	return "", nil
}

func (d markingDest) Lookup(ctx context.Context, q destination.LookupQuery) (destination.LookupResult, error) {
	if lk, ok := d.dest.(destination.Records); ok {
		return lk.Lookup(ctx, q)
	}
	return destination.LookupResult{}, destination.ErrLookupUnavailable
}

// markingDir marks the consent re-read that precedes each recipient's
// attempt: at that point the previous recipient's outcome is recorded.
type markingDir struct {
	ledger.Directory
	mk *marker
}

func (d markingDir) CustomerByID(ctx context.Context, id string) (ledger.Customer, bool, error) {
	d.mk.mark(id + "/consent-reread")
	return d.Directory.CustomerByID(ctx, id)
}

func customerOf(key string) string {
	p, err := ledger.ParseKey(key)
	if err != nil {
		return key
	}
	return p.Customer
}

// wrapDouble returns the test doubles the checker must catch: "twice"
// delivers every message two times (a duplicate), "claim" reports acceptance
// without delivering (a loss). Anything else is the real destination.
func wrapDouble(dest destination.Destination, kind string) destination.Destination {
	switch kind {
	case "twice":
		return sendTwice{dest}
	case "claim":
		return claimOnly{dest.Identity(), destination.SettleTimeOf(dest)}
	}
	return dest
}

// The doubles declare the settle time of the destination they stand for:
// the approval bound it, and a send declaring another is refused before
// the double could show what the checker must catch.

func (d sendTwice) SettleTime() time.Duration { return destination.SettleTimeOf(d.Destination) }

func (c claimOnly) SettleTime() time.Duration { return c.settle }

type sendTwice struct{ destination.Destination }

func (d sendTwice) Send(ctx context.Context, m destination.Message) (destination.Receipt, error) {
	if _, err := d.Destination.Send(ctx, m); err != nil {
		return destination.Receipt{}, err
	}
	return d.Destination.Send(ctx, m)
}

type claimOnly struct {
	identity string
	settle   time.Duration
}

func (c claimOnly) Identity() string { return c.identity }

func (claimOnly) Send(_ context.Context, m destination.Message) (destination.Receipt, error) {
	return destination.Receipt{TransportID: m.TransportID, Response: "250 pretended"}, nil
}

// awaitSettled waits, in real time, until no attempt of key can still
// land: what a person does when reconciliation says "not found yet".
func awaitSettled(ctx context.Context, l *ledger.Ledger, key string) error {
	atts, err := l.Attempts(ctx, key)
	if err != nil {
		return err
	}
	var last time.Time
	for _, at := range atts {
		if at.SettlesAt.After(last) {
			last = at.SettlesAt
		}
	}
	select {
	case <-time.After(time.Until(last) + 10*time.Millisecond):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// playFinishAudience re-runs a release's send after a crash, as an operator
// does: a recipient whose attempt was not found yet (it might still have
// landed) waits until it can no longer land, and the send runs again.
func playFinishAudience(ctx context.Context, l *ledger.Ledger, dest destination.Destination, actor, release string) error {
	for range 4 {
		if _, err := l.SendAudience(ctx, ledger.AudienceSend{ReleaseID: release, Actor: actor, Concurrency: concurrency()},
			dest, l.Customers()); err != nil {
			return err
		}
		rows, err := l.AudienceRows(ctx, release, "eligible", 1<<20, 0)
		if err != nil {
			return err
		}
		waited := false
		for _, r := range rows {
			if r.State != ledger.StateHeld {
				continue
			}
			a, err := l.Action(ctx, r.ActionKey)
			if err != nil {
				return err
			}
			if a.HoldCause == ledger.HoldNotFoundYet {
				if err := awaitSettled(ctx, l, r.ActionKey); err != nil {
					return err
				}
				waited = true
			}
		}
		if !waited {
			return nil
		}
	}
	return nil
}

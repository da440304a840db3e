package ledger_test

import (
	"errors"
	"testing"
	"time"

	"gatehouse/destination"
	"gatehouse/ledger"
)

// TestLateExecutorReportsWhatTheLedgerHoldsNow: an executor resumes after
// its attempt was recovered as unknown and a person settled it as
// delivered; its own "not delivered" changes nothing, and its answer is
// that the action is sent (ErrDuplicate), never "approved again and may be
// retried".
func TestLateExecutorReportsWhatTheLedgerHoldsNow(t *testing.T) {
	w := newWorld(t)
	a := w.approved("wf-ack")
	att, _, err := w.l.BeginAttempt(w.ctx, ledger.ExecuteRequest{Key: a.Key, Executor: "wf-ack", Reread: consentYes,
		Endpoint: destination.EndpointOf(w.dest)})
	w.must(err)
	w.clock.Advance(10 * time.Minute)
	_, err = w.l.Recover(w.ctx)
	w.must(err)
	_, err = w.l.ResolveUnknown(w.ctx, a.Key, "ops", true, "the customer has it")
	w.must(err)
	res, err := w.l.RecordDelivery(w.ctx, att, ledger.Delivery{Outcome: destination.OutcomeNotDelivered,
		Err: &destination.DeliveryError{Outcome: destination.OutcomeNotDelivered, Err: errors.New("connection reset")}})
	if !errors.Is(err, ledger.ErrDuplicate) || errors.Is(err, ledger.ErrNotDelivered) || res.Action.State != ledger.StateSent {
		t.Fatalf("late report: %v (state %s), want already sent", err, res.Action.State)
	}
}

// TestResolveNotDeliveredWaitsForTheSettleTime: a person who looks while a
// relay still holds the message finds nothing; their "not delivered" is
// not taken before the attempt can no longer land, as a lookup's "nothing
// found" is not. After the settle time it is.
func TestResolveNotDeliveredWaitsForTheSettleTime(t *testing.T) {
	w := newWorld(t)
	w.dest.Settle = time.Minute
	a := w.approved("wf-ack")
	_, _, err := w.l.BeginAttempt(w.ctx, ledger.ExecuteRequest{Key: a.Key, Executor: "wf-ack", Reread: consentYes,
		Endpoint: destination.EndpointOf(w.dest)})
	w.must(err)
	w.clock.Advance(2*time.Minute + 30*time.Second) // past the lease, not past lease + settle
	_, err = w.l.Recover(w.ctx)
	w.must(err)
	req := ledger.ResolveRequest{Key: a.Key, Actor: "ops", Reason: "the customer says nothing came", Open: records(w.dest)}
	got, err := w.l.Resolve(w.ctx, req)
	if !errors.Is(err, ledger.ErrUnknownOutcome) || got.State != ledger.StateUnknown {
		t.Fatalf("not delivered before the settle time: %v, %s; want refused, still unknown", err, got.State)
	}
	w.settled(a.Key)
	if got, err = w.l.Resolve(w.ctx, req); err != nil || got.State != ledger.StateHeld || got.HoldCause != ledger.HoldSafeToRetry {
		t.Fatalf("not delivered after the settle time: %v, %s/%s", err, got.State, got.HoldCause)
	}
}

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

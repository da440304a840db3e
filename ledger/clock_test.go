package ledger_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"gatehouse/internal/clock"
	"gatehouse/ledger"
)

// TestSendBoundIsOnTheLedgerClock: Deliver cuts a send off once three
// quarters of the lease have passed on the ledger's clock, the clock the
// lease itself runs on, not after wall-clock time.
func TestSendBoundIsOnTheLedgerClock(t *testing.T) {
	w := newWorld(t)
	a := w.approved("wf-ack")
	w.dest.Gate = make(chan struct{}) // the destination answers only when its context ends
	done := make(chan error, 1)
	go func() {
		_, err := w.l.Execute(w.ctx, ledger.ExecuteRequest{Key: a.Key, Executor: "wf-ack", Reread: consentYes}, w.dest)
		done <- err
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := w.clock.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	const lease = 2 * time.Minute // the ledger's default
	w.clock.Advance(lease*3/4 - time.Second)
	select {
	case err := <-done:
		t.Fatalf("the send ended before its bound on the ledger clock: %v", err)
	default:
	}
	w.clock.Advance(time.Second)
	select {
	case err := <-done:
		if !errors.Is(err, ledger.ErrNotDelivered) {
			t.Fatalf("execute = %v; want not delivered once the bound passed", err)
		}
	case <-ctx.Done():
		t.Fatal("the send was not cut off once the ledger clock passed its bound")
	}
}

func TestWithClockTimeout(t *testing.T) {
	w := newWorld(t)
	ctx, cancel := clock.WithTimeout(context.Background(), w.clock, time.Second)
	w.clock.Advance(time.Second)
	<-ctx.Done()
	if !errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
		t.Errorf("cause %v; want context.DeadlineExceeded", context.Cause(ctx))
	}
	cancel()
	ctx, cancel = clock.WithTimeout(context.Background(), w.clock, time.Second)
	cancel()
	if w.clock.Pending() != 0 || !errors.Is(context.Cause(ctx), context.Canceled) {
		t.Errorf("cancel left %d timers, cause %v", w.clock.Pending(), context.Cause(ctx))
	}
}

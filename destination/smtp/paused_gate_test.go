package smtp_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"gatehouse/destination"
	"gatehouse/destination/registry"
	smtpdest "gatehouse/destination/smtp"
	"gatehouse/ledger"
	"gatehouse/testmailbox"
)

// TestPausedExecutorAfterAnotherSent is the incident of a lease that is not
// a fence, through the whole gate on real time: an executor stands still
// inside its send (waiting for 354, or with the body written and its final
// "." not yet) until its lease has run out; another process recovers the
// attempt as unknown, reconciliation finds nothing but holds it as "not
// found yet" until the settle time has passed, then as safe to retry; a
// person releases the hold and a second executor sends attempt 2. Then the
// first wakes. Exactly one message arrives, in every trial.
//
// A trial whose send ends before it reaches the phase (a machine too loaded
// for its 100 ms timeouts and 400 ms lease) runs again with every time
// doubled, up to eight times as long.
func TestPausedExecutorAfterAnotherSent(t *testing.T) {
	for _, phase := range []smtpdest.Phase{smtpdest.PhaseData, smtpdest.PhaseCommit} {
		for trial := range 5 {
			t.Run(fmt.Sprintf("%s/%d", phase, trial), func(t *testing.T) {
				for scale := time.Duration(1); ; scale *= 2 {
					if pausedAfterAnotherSent(t, phase, scale) {
						return
					}
					if scale == 8 {
						t.Fatal("the send never reached its pause, even with every time eight times as long")
					}
					t.Logf("the send ended before its pause at %d× the times; again at %d×", scale, 2*scale)
				}
			})
		}
	}
}

// pausedAfterAnotherSent is one trial with every time scale times as long;
// false when the send ended before it reached its pause.
func pausedAfterAnotherSent(t *testing.T, phase smtpdest.Phase, scale time.Duration) bool {
	lease := 400 * time.Millisecond * scale
	ctx := ctxT(t)
	mb, err := testmailbox.Start(ctx, testmailbox.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer mb.Close()
	paused, resume := make(chan struct{}), make(chan struct{})
	quick := []smtpdest.Option{smtpdest.WithConnectTimeout(100 * time.Millisecond * scale), smtpdest.WithCommandTimeout(100 * time.Millisecond * scale),
		smtpdest.WithDataTimeout(100 * time.Millisecond * scale), smtpdest.WithSettleTime(300 * time.Millisecond * scale)}
	stalled, err := smtpdest.New(mb.Target(), append(quick, smtpdest.WithPause(func(_ context.Context, p smtpdest.Phase) {
		if p == phase {
			close(paused)
			<-resume
		}
	}))...)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "ledger.db")
	first, err := ledger.Open(path, ledger.WithLease(lease))
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	key := approvedAction(t, first, destination.EndpointOf(stalled.Gate()))
	req := ledger.ExecuteRequest{Key: key, Executor: "wf-ack", Reread: []ledger.MaterialRead{{Source: "crm", Field: "consent", Value: "yes"}}}
	done := make(chan error, 1)
	go func() {
		_, err := first.Execute(ctx, req, stalled.Gate())
		done <- err
	}()
	select {
	case <-paused:
	case err := <-done:
		t.Logf("the send ended before its pause: %v", err)
		return false
	}

	// Another process, once the lease has run out.
	awaitRecoveryDue(t, first)
	other, err := ledger.Open(path, ledger.WithLease(lease)) // recovers: attempt 1 unknown
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	reconcile := func() ledger.Action {
		a, _ := other.Reconcile(ctx, ledger.ReconcileRequest{Key: key, Actor: "lead", Open: registry.Records()})
		return a
	}
	// Nothing found, but the paused executor may still land it.
	if a := reconcile(); a.State != ledger.StateHeld || a.HoldCause != ledger.HoldNotFoundYet {
		t.Fatalf("reconcile within the settle time: %s/%s", a.State, a.HoldCause)
	}
	if _, err := other.ReleaseHold(ctx, key, "lead", "nothing arrived"); err == nil {
		t.Fatal("a person released an attempt that may still land")
	}
	atts, err := other.Attempts(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	<-time.After(time.Until(atts[0].SettlesAt) + 20*time.Millisecond)
	if a := reconcile(); a.State != ledger.StateHeld || a.HoldCause != ledger.HoldSafeToRetry {
		t.Fatalf("reconcile after the settle time: %s/%s", a.State, a.HoldCause)
	}
	if _, err := other.ReleaseHold(ctx, key, "lead", "nothing arrived"); err != nil {
		t.Fatal(err)
	}
	second, err := smtpdest.New(mb.Target(), smtpdest.WithSettleTime(300*time.Millisecond*scale)) // the approved settle time
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Execute(ctx, req, second.Gate()); err != nil {
		t.Fatalf("attempt 2: %v", err)
	}

	close(resume)
	err = <-done
	if o := destination.ClassifyDelivery(err); o == destination.OutcomeAccepted {
		t.Fatalf("the paused executor says its late send was accepted")
	}
	if n, err := mb.Count(ctx, testmailbox.Filter{ActionKey: key}); err != nil || n != 1 {
		t.Fatalf("%d arrivals (%v), want exactly 1", n, err)
	}
	return true
}

// awaitRecoveryDue waits until l's recovery would mark an attempt: its
// lease has run out.
func awaitRecoveryDue(t *testing.T, l *ledger.Ledger) {
	t.Helper()
	for {
		due, err := l.RecoveryDue(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(due) > 0 {
			return
		}
		select {
		case <-time.After(10 * time.Millisecond):
		case <-ctxT(t).Done():
			t.Fatal("the lease never ran out")
		}
	}
}

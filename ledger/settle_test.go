package ledger_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"gatehouse/destination"
	"gatehouse/ledger"
)

// TestAbsenceOnlyOnceTheAttemptCanNoLongerLand: an attempt whose executor
// stopped after recording its intent is unknown once its lease has run
// out, but its message may still land until its destination's settle time
// has passed too. Until then reconciliation that finds nothing holds it as
// "not found yet", which nothing but a later reconciliation releases; a
// message that lands meanwhile settles it as sent, and only after the
// settle time does finding nothing make it safe to retry.
func TestAbsenceOnlyOnceTheAttemptCanNoLongerLand(t *testing.T) {
	for _, lands := range []bool{true, false} {
		t.Run(map[bool]string{true: "LandsLate", false: "NeverLands"}[lands], func(t *testing.T) {
			w := newWorld(t)
			w.dest.Settle = 30 * time.Second
			a := w.approved("wf-ack")
			req := ledger.ExecuteRequest{Key: a.Key, Executor: "wf-ack", Reread: consentYes, Endpoint: destination.EndpointOf(w.dest)}
			att, msg, err := w.l.BeginAttempt(w.ctx, req) // the executor stops here
			w.must(err)
			if want := att.LeaseUntil.Add(30 * time.Second); !att.SettlesAt.Equal(want) {
				t.Fatalf("attempt settles at %v, want its lease's end plus 30s (%v)", att.SettlesAt, want)
			}
			w.clock.Advance(2*time.Minute + time.Second) // the lease is over
			_, err = w.l.Recover(w.ctx)
			w.must(err)

			got, err := w.reconcile(a.Key, "ops")
			if !errors.Is(err, ledger.ErrHeld) || got.State != ledger.StateHeld || got.HoldCause != ledger.HoldNotFoundYet {
				t.Fatalf("reconcile within the settle time: %s/%s, %v; want held not_found_yet", got.State, got.HoldCause, err)
			}
			if !strings.Contains(got.Reason, "may still land until") {
				t.Errorf("reason %q does not say until when it may land", got.Reason)
			}
			if _, err := w.l.ReleaseHold(w.ctx, a.Key, "lead", "looked myself"); !errors.Is(err, ledger.ErrUnknownOutcome) {
				t.Fatalf("release of a not-found-yet hold: %v, want refused", err)
			}
			if _, err := w.execute(a.Key, "wf-ack", consentYes); err == nil {
				t.Fatal("a send was allowed while the first attempt may still land")
			}
			if lands {
				w.dest.Inject(msg) // the relay delivers it at last
			}
			w.clock.Advance(30 * time.Second)
			got, err = w.reconcile(a.Key, "ops")
			want, cause := ledger.StateHeld, ledger.HoldSafeToRetry
			if lands {
				want, cause = ledger.StateSent, ""
			}
			if got.State != want || got.HoldCause != cause {
				t.Fatalf("reconcile after the settle time: %s/%s, %v; want %s/%s", got.State, got.HoldCause, err, want, cause)
			}
			if !lands {
				_, err = w.l.ReleaseHold(w.ctx, a.Key, "lead", "nothing arrived")
				w.must(err)
				_, err = w.execute(a.Key, "wf-ack", consentYes)
				w.must(err)
			}
			if n := w.dest.Arrivals(a.Key); n != 1 {
				t.Fatalf("%d arrivals, want 1", n)
			}
			if vs, err := w.l.Check(w.ctx); err != nil || len(vs) != 0 {
				t.Fatalf("check: %v %v", vs, err)
			}
		})
	}
}

package ledger_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"gatehouse/destination"
	"gatehouse/destination/fake"
	"gatehouse/ledger"
)

// crashingDest closes the ledger (as a crash takes the process's storage
// away) at its nth send, in the middle of a pipelined run: batches decided
// in advance, deliveries not yet recorded, withdrawals that cannot be
// recorded.
type crashingDest struct {
	*fake.Destination
	l    *ledger.Ledger
	at   int
	mu   sync.Mutex
	sent int
}

func (d *crashingDest) Send(ctx context.Context, m destination.Message) (destination.Receipt, error) {
	d.mu.Lock()
	d.sent++
	if d.sent == d.at {
		d.l.Close()
	}
	d.mu.Unlock()
	return d.Destination.Send(ctx, m)
}

// TestPipelinedAudienceSendRerunAfterACrashSendsOnce: a pipelined run
// that loses its ledger mid-batch leaves attempts in flight (handed over
// and not recorded, decided in advance and never handed over, withdrawn
// where it could not be recorded); after a restart, a re-run reconciles
// them and sends each recipient at most once, and every recipient ends
// sent or held for a person, never in flight, with ledger check clean.
func TestPipelinedAudienceSendRerunAfterACrashSendsOnce(t *testing.T) {
	for _, at := range []int{1, 9, 13} {
		t.Run("", func(t *testing.T) {
			w := newWorld(t)
			const n, batch = 40, 8
			dir := bigRelease(t, w, "big", n)
			send := ledger.AudienceSend{ReleaseID: "big", Actor: "notice-bot", Concurrency: 3, Batch: batch}
			if _, err := w.l.SendAudience(w.ctx, send, &crashingDest{Destination: w.dest, l: w.l, at: at}, dir); err == nil {
				t.Fatal("the run whose ledger went away reported no error")
			}
			first := w.dest.Calls()
			w.clock.Advance(5 * time.Minute) // the executor's lease ran out
			w.open()
			s, err := w.l.SendAudience(w.ctx, send, w.dest, dir)
			w.must(err)
			rows, err := w.l.AudienceRows(w.ctx, "big", ledger.RowEligible, n, 0)
			w.must(err)
			for _, r := range rows {
				if a := w.dest.Arrivals(r.ActionKey); a > 1 {
					t.Errorf("%s arrived %d times", r.ActionKey, a)
				}
				if r.State == ledger.StateExecuting || r.State == ledger.StateUnknown {
					t.Errorf("%s left %s after the re-run", r.ActionKey, r.State)
				}
			}
			vs, err := w.l.Check(w.ctx)
			w.must(err)
			for _, v := range vs {
				t.Errorf("check: %v", v)
			}
			t.Logf("crash at send %d: %d sends before it, %d in all; re-run confirmed %d, held %d", at, first, w.dest.Calls(), s.Confirmed, s.Held)
			if s.Confirmed+s.Held < n {
				t.Errorf("after the re-run %d confirmed and %d held of %d", s.Confirmed, s.Held, n)
			}
		})
	}
}

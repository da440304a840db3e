package ledger_test

import (
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"gatehouse/ledger"
)

// TestAudienceSendOnAFullDisk: the ledger fills up during a send, at a
// point drawn from a seed (its file may grow by 1 to 280 pages more; a
// recipient takes about one). The run must end with an error saying what
// was not recorded, and right then every message that reached the
// destination must have its attempt recorded (the intent was durable
// before the hand-over) — nothing half-written, nothing sent on a decision
// that was not kept. Once there is room again, a restart and a re-run
// reconcile what was left open and send the rest: each recipient exactly
// once, ledger check clean.
func TestAudienceSendOnAFullDisk(t *testing.T) {
	sqliteOnly(t)
	const n = 300
	rng := rand.New(rand.NewPCG(15, 17))
	for range 10 {
		room := 1 + rng.IntN(280)
		concurrency := 1 + rng.IntN(8)
		t.Run("", func(t *testing.T) {
			w := newWorld(t)
			dir := bigRelease(t, w, "big", n)
			w.must(ledger.LimitPages(w.l, room))
			send := ledger.AudienceSend{ReleaseID: "big", Actor: "notice-bot", Concurrency: concurrency}
			_, err := w.l.SendAudience(w.ctx, send, w.dest, dir)
			full := err != nil
			if full && !errors.Is(err, ledger.ErrNotRecorded) {
				t.Fatalf("room for %d pages, concurrency %d: %v, want an error wrapping ErrNotRecorded", room, concurrency, err)
			}
			rows, err := w.l.AudienceRows(w.ctx, "big", ledger.RowEligible, 2*n, 0)
			w.must(err)
			for _, r := range rows {
				arrived := w.dest.Arrivals(r.ActionKey)
				switch r.State {
				case ledger.StateExecuting, ledger.StateSent, ledger.StateUnknown:
				default:
					if arrived > 0 {
						t.Fatalf("room for %d pages: %s arrived but the ledger holds it %q: no durable intent", room, r.ActionKey, r.State)
					}
				}
			}
			first := w.dest.Calls()

			// Room again; the process restarts (the executor's lease runs
			// out) and the send is run again.
			w.must(ledger.LimitPages(w.l, 1<<30))
			w.l.Close()
			w.clock.Advance(5 * time.Minute)
			w.open()
			s, err := w.l.SendAudience(w.ctx, send, w.dest, dir)
			w.must(err)
			rows, err = w.l.AudienceRows(w.ctx, "big", ledger.RowEligible, 2*n, 0)
			w.must(err)
			for _, r := range rows {
				if a := w.dest.Arrivals(r.ActionKey); a != 1 || r.State != ledger.StateSent {
					t.Errorf("%s: %s with %d arrivals", r.ActionKey, r.State, a)
				}
			}
			vs, err := w.l.Check(w.ctx)
			w.must(err)
			for _, v := range vs {
				t.Errorf("check: %v", v)
			}
			t.Logf("room for %d pages, concurrency %d: full %v after %d sends; re-run confirmed %d, %d sends in all", room, concurrency, full, first, s.Confirmed, w.dest.Calls())
		})
	}
}

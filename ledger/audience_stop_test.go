package ledger_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"gatehouse/ledger"
)

// TestPipelinedAudienceSendNoAttemptBeginsAfterAStop turns the stop
// switch on from another host at many points of a pipelined run (at the
// nth send, batches decided in advance or not): no attempt begins after
// the stop's line in the history (invariant 2), what is handed over after
// it was decided before it and is bounded (the batch being handed over and
// the one decided in advance, and what the workers hold), nothing stays in
// flight, and after a resume a re-run sends each recipient once.
func TestPipelinedAudienceSendNoAttemptBeginsAfterAStop(t *testing.T) {
	const n, batch, workers = 40, 8, 3
	for _, at := range []int{1, 7, 8, 9, 12, 16, 17, 24} {
		t.Run(fmt.Sprint("send", at), func(t *testing.T) {
			w := newWorld(t)
			dir := bigRelease(t, w, "big", n)
			ops, err := ledger.Open(w.path, ledger.WithClock(w.clock)) // another host
			w.must(err)
			defer ops.Close()
			seq := newSequence()
			var atStop int
			// The sends after the nth wait until the stop has landed, so
			// that it lands while the run goes on however slowly the
			// stop's transaction runs.
			var landing sync.RWMutex
			seq.onSend = func(sends int) {
				if sends != at {
					landing.RLock()
					landing.RUnlock() // the stop has landed
					return
				}
				landing.Lock()
				defer landing.Unlock()
				start := time.Now()
				if err := ops.Stop(w.ctx, "ops", "wrong notice"); err != nil {
					t.Error(err)
				}
				atStop = w.dest.Calls()
				t.Logf("the stop took %v; %d sends when it returned", time.Since(start), atStop)
			}
			send := ledger.AudienceSend{ReleaseID: "big", Actor: "notice-bot", Concurrency: workers, Batch: batch}
			_, err = w.l.SendAudience(w.ctx, send, seqDest{w.dest, seq}, seqDir{dir, seq})
			if !errors.Is(err, ledger.ErrStopped) {
				sw, _ := w.l.StopState(w.ctx)
				t.Fatalf("send stopped at send %d: %v, want ErrStopped (%d sends; switch %+v)", at, err, w.dest.Calls(), sw)
			}
			if after := w.dest.Calls() - atStop; after > 2*batch+workers {
				t.Errorf("%d sends after the stop", after)
			}
			h, err := w.l.History(w.ctx, ledger.HistoryFilter{})
			w.must(err)
			stopped := false
			for _, e := range h {
				switch {
				case e.Kind == ledger.EvStopped:
					stopped = true
				case stopped && e.Kind == ledger.EvAttemptStarted:
					t.Errorf("attempt of %s begun after the stop (event %d)", e.ActionKey, e.ID)
				}
			}
			rows, err := w.l.AudienceRows(w.ctx, "big", ledger.RowEligible, n, 0)
			w.must(err)
			for _, r := range rows {
				if r.State == ledger.StateExecuting {
					t.Errorf("%s left in flight by the stopped run", r.ActionKey)
				}
			}
			w.must(w.l.Resume(w.ctx, "ops", "notice corrected"))
			s, err := w.l.SendAudience(w.ctx, send, w.dest, dir)
			w.must(err)
			if s.Confirmed != n || w.dest.Calls() != n {
				t.Errorf("after the resume: %d confirmed, %d sends, want %d", s.Confirmed, w.dest.Calls(), n)
			}
			for _, r := range rows {
				if a := w.dest.Arrivals(r.ActionKey); a != 1 {
					t.Errorf("%s arrived %d times", r.ActionKey, a)
				}
			}
			t.Logf("stop at send %d: %d sends before the resume", at, w.dest.Calls())
		})
	}
}

package ledger_test

import (
	"errors"
	"testing"
	"time"

	"gatehouse/ledger"
)

// TestStopFromAnotherProcessDuringASend: an operator turns the stop
// switch on from another shell while an audience send writes batch after
// batch. The stop must get the write lock between two of the run's
// transactions and halt the run, not wait for the run to end (SQLite's
// write lock is not fair: a process writing back to back took it again
// before the stop's next try, for the whole run).
func TestStopFromAnotherProcessDuringASend(t *testing.T) {
	w := newWorld(t)
	const n = 2000
	dir := bigRelease(t, w, "big", n)
	ops, err := ledger.Open(w.path, ledger.WithClock(w.clock)) // the other shell
	w.must(err)
	defer ops.Close()
	stopped := make(chan time.Duration, 1)
	seq := newSequence()
	seq.onSend = func(sends int) {
		if sends == 10 {
			go func() {
				start := time.Now()
				if err := ops.Stop(w.ctx, "ops", "wrong notice"); err != nil {
					t.Error(err)
				}
				stopped <- time.Since(start)
			}()
		}
	}
	send := ledger.AudienceSend{ReleaseID: "big", Actor: "notice-bot", Concurrency: 4, Batch: 64}
	_, err = w.l.SendAudience(w.ctx, send, seqDest{w.dest, seq}, seqDir{dir, seq})
	took := <-stopped
	t.Logf("the stop took %v; %d of %d sent", took, w.dest.Calls(), n)
	if !errors.Is(err, ledger.ErrStopped) || w.dest.Calls() >= n {
		t.Fatalf("send: %v, %d of %d sent: the stop waited %v for the run to end", err, w.dest.Calls(), n, took)
	}
}

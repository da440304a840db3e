package proof_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"testing"

	"gatehouse/ledger"
	"gatehouse/proof"
)

// Randomized kills of the pipelined audience send. The deterministic crash
// matrix sends one recipient at a time, so its kill points can be listed;
// with several connections in flight the order of marks differs from run
// to run, so here each seed draws one mark at random and the process is
// killed there, while its other workers are mid-send.
const (
	killConcurrency = 4  // messages in flight at once
	killBatch       = 16 // 4 × concurrency: the send's default batch
)

// TestRandomKillPipelinedSend: for each seed, a real executor process sends
// an approved release with concurrency 4 (batches of 16) and is SIGKILLed
// at a random mark (a consent re-read, an attempt handed over, an answer
// from the mailbox); the ledger is then opened as a fresh process would
// (recovery runs) and every recipient must be sent, unknown or not started;
// a fresh process finishes the run, and the checker, which attributes
// arrivals by recorded Message-ID, must find 0 duplicates, 0 losses and 0
// contradictions, with every recipient sent once.
func TestRandomKillPipelinedSend(t *testing.T) {
	seeds, n := 10, 40
	if *long || os.Getenv("PROOF_LONG") == "1" {
		seeds, n = 200, 120
	}
	marks := 3*n + 1 // per recipient: consent re-read, attempt recorded, handed over; then run-finished
	var mu sync.Mutex
	var runs, killed, dups, losses, contradictions, leftOver int
	for seed := range seeds {
		t.Run(fmt.Sprintf("Seed%03d", seed), func(t *testing.T) {
			t.Parallel()
			w := newWorld(t)
			w.audienceRelease(n)
			rng := rand.New(rand.NewPCG(uint64(seed), 0x9e3779b97f4a7c15))
			killAt := rng.IntN(marks - 1) // never the last: the run would be over
			env := w.env("PROOF_ACTOR="+w.owner, fmt.Sprintf("PROOF_CONCURRENCY=%d", killConcurrency))
			res := run(t, proc{Role: "audience", Env: env, KillAt: killAt})
			stateAfterCrash(t, w)
			run(t, proc{Role: "finish-audience", Env: env, KillAt: -1})

			l, err := ledger.Open(w.path, ledger.WithoutRecovery())
			must(t, err)
			defer l.Close()
			v, err := proof.CheckByMessageID(w.ctx, l, w.mb)
			must(t, err)
			st, err := w.mb.Stats(w.ctx)
			must(t, err)
			t.Logf("killed at mark %d (%s): %s", killAt, res.Marks[len(res.Marks)-1], v)
			mu.Lock()
			runs++
			if res.Killed {
				killed++
			}
			dups += len(v.Duplicates)
			losses += len(v.Losses)
			contradictions += len(v.Contradictions)
			leftOver += n - v.Sent
			mu.Unlock()
			if !v.OK() || st.DuplicateActionKeys != 0 {
				t.Fatalf("killed at %s: %s (mailbox flags %d duplicate keys)\n%s", res.Marks[len(res.Marks)-1], v, st.DuplicateActionKeys, v.Summary())
			}
			if v.Sent != n || v.Arrivals != n {
				t.Fatalf("killed at %s: %d of %d recipients sent, %d arrivals", res.Marks[len(res.Marks)-1], v.Sent, n, v.Arrivals)
			}
		})
	}
	t.Cleanup(func() {
		t.Logf("randomized kills: %d seeds × %d recipients at concurrency %d (batches of %d): %d killed runs, %d duplicates, %d losses, %d contradictions, %d recipients not sent after the finishing run",
			seeds, n, killConcurrency, killBatch, killed, dups, losses, contradictions, leftOver)
	})
}

// stateAfterCrash opens the ledger as the next process would (recovery
// marks the dead executor's attempts unknown) and checks that every
// recipient is sent, unknown, or not started (no attempt at all).
func stateAfterCrash(t *testing.T, w *world) {
	t.Helper()
	l := w.open()
	defer l.Close()
	rows, err := l.AudienceRows(w.ctx, w.releas, ledger.RowEligible, 1<<20, 0)
	must(t, err)
	for _, r := range rows {
		switch r.State {
		case ledger.StateSent, ledger.StateUnknown:
			continue
		}
		atts, err := l.Attempts(w.ctx, r.ActionKey)
		must(t, err)
		if len(atts) != 0 {
			t.Fatalf("after the crash %s is %s with %d attempt(s): want sent, unknown or not started", r.ActionKey, r.State, len(atts))
		}
	}
}

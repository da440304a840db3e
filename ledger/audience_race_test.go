package ledger_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"gatehouse/destination/fake"
	"gatehouse/ledger"
)

// lockedDir is a CRM whose consent can change while sends read it.
type lockedDir struct {
	mu sync.Mutex
	c  crm
}

func (d *lockedDir) CustomerByID(ctx context.Context, id string) (ledger.Customer, bool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.c.CustomerByID(ctx, id)
}

func (d *lockedDir) CustomerByEmail(ctx context.Context, email string) (ledger.Customer, bool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.c.CustomerByEmail(ctx, email)
}

func (d *lockedDir) withdraw(id string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	c := d.c[id]
	c.Consent = "no"
	d.c[id] = c
}

// TestConcurrentSendsOfOneReleaseSendEachOnce: several ledger handles
// (hosts or processes sharing the ledger) send the same release at once,
// each with its own concurrency and batch size, while the destination
// answers some messages "unknown" (it took them) or "rejected for now",
// and some customers withdraw consent mid-run. New recipients are
// proposed, approved and started in one transaction per batch, so two
// handles race to create the same actions. Then one handle finishes the
// release (reconciling the unknown ones). Checked: no message arrives
// twice; a recipient is sent exactly when its message arrived; every
// customer who kept consent is sent; ledger check finds nothing. The
// settings come from a seed (GATEHOUSE_RACE_SEED repeats a run; the seed
// is logged); the interleaving is the scheduler's.
func TestConcurrentSendsOfOneReleaseSendEachOnce(t *testing.T) {
	seed := raceSeed(t)
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	const n, rounds = 120, 3
	for round := range rounds {
		w := newWorld(t)
		release := fmt.Sprintf("spring-%d", round)
		dir := &lockedDir{c: bigRelease(t, w, release, n)}
		dest := fake.New()
		scriptOutcomes(dest, rng, n/2, 8)
		handles := 2 + rng.IntN(3)
		withdrawn := map[string]bool{}
		for range 1 + rng.IntN(6) {
			withdrawn[fmt.Sprintf("r%d", 1+rng.IntN(n))] = true
		}
		var wg sync.WaitGroup
		errs := make(chan error, handles)
		for h := range handles {
			req := ledger.AudienceSend{ReleaseID: release, Actor: "notice-bot", Concurrency: 1 + rng.IntN(8), Batch: rng.IntN(24)}
			l, err := ledger.Open(w.path, ledger.WithClock(w.clock))
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := l.SendAudience(w.ctx, req, dest, dir)
				if err != nil {
					errs <- fmt.Errorf("handle %d (%+v): %w", h, req, err)
				}
			}()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for id := range withdrawn {
				dir.withdraw(id)
			}
		}()
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("round %d: %v", round, err) // another run's recipients are refused one by one, never the run
		}
		// Another run finishes the release: reconciles the unknown
		// outcomes, sends what was rejected for now.
		if _, err := w.l.SendAudience(w.ctx, ledger.AudienceSend{ReleaseID: release, Actor: "notice-bot", Concurrency: 4}, dest, dir); err != nil {
			t.Fatalf("round %d: finishing run: %v", round, err)
		}
		rows, err := w.l.AudienceRows(w.ctx, release, ledger.RowEligible, 2*n, 0)
		w.must(err)
		sent := 0
		for _, r := range rows {
			arrived := dest.Arrivals(r.ActionKey)
			switch {
			case arrived > 1:
				t.Errorf("round %d: %s arrived %d times", round, r.ActionKey, arrived)
			case (arrived == 1) != (r.State == ledger.StateSent):
				t.Errorf("round %d: %s is %s with %d arrivals", round, r.ActionKey, r.State, arrived)
			case !withdrawn[r.CustomerID] && r.State != ledger.StateSent:
				t.Errorf("round %d: %s kept consent and is %s", round, r.ActionKey, r.State)
			}
			if r.State == ledger.StateSent {
				sent++
			}
		}
		vs, err := w.l.Check(w.ctx)
		w.must(err)
		if len(vs) != 0 {
			t.Fatalf("round %d: check: %v", round, vs)
		}
		t.Logf("round %d: %d handles, %d recipients, %d withdrawn, %d sent, %d destination calls", round, handles, n, len(withdrawn), sent, dest.Calls())
	}
}

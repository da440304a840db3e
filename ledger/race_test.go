package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"gatehouse/destination"
	"gatehouse/destination/fake"
	"gatehouse/ledger"
)

// TestHandlesRacingOnFewKeysKeepTheInvariants: several ledger handles on
// one ledger (hosts, or processes, sharing it) race to propose, re-propose,
// submit, approve, execute, hold, release, reconcile, stop and resume on
// three actions of one task. The operations each handle tries come from a
// seed (GATEHOUSE_RACE_SEED repeats a run; the seed is logged); the
// interleaving is the scheduler's. Checked while they run: never two
// attempts of one action without an outcome; and at the end: no action
// accepted twice or arrived twice, and ledger check (history leads to the
// state, counters, kept counts, one attempt in flight, …) finds nothing.
func TestHandlesRacingOnFewKeysKeepTheInvariants(t *testing.T) {
	seed := raceSeed(t)
	const handles, ops = 4, 80
	path := ledgerLocation(t)
	ctx := context.Background()
	inner := fake.New()
	// Some sends end unknown (the message did arrive) or are rejected for
	// now; each takes a moment, so executions overlap.
	scriptOutcomes(inner, rand.New(rand.NewPCG(seed, 1<<32)), 200, 10)
	dest := slowDest{inner}
	first, err := ledger.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	if _, err := first.Claim(ctx, ledger.TaskRef{ID: "task-7"}, "wf"); err != nil {
		t.Fatal(err)
	}
	ls := []*ledger.Ledger{first}
	for range handles - 1 {
		l, err := ledger.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		ls = append(ls, l)
	}

	var mu sync.Mutex
	keys := map[string]bool{}
	someKey := func(r *rand.Rand) string {
		mu.Lock()
		defer mu.Unlock()
		if len(keys) == 0 {
			return "none"
		}
		n := r.IntN(len(keys))
		for k := range keys {
			if n == 0 {
				return k
			}
			n--
		}
		return ""
	}
	var failures []string
	answers := map[string]int{}
	fail := func(format string, args ...any) {
		mu.Lock()
		failures = append(failures, fmt.Sprintf(format, args...))
		mu.Unlock()
	}

	done := make(chan struct{})
	sampled := make(chan int)
	go func() { // one attempt in flight per action, at every moment sampled
		n := 0
		defer func() { sampled <- n }()
		for {
			select {
			case <-done:
				return
			default:
			}
			vs, err := first.Check(ctx)
			if err != nil {
				fail("check while racing: %v", err)
				return
			}
			for _, v := range vs {
				if v.Rule == "one attempt in flight" {
					fail("while racing: %v", v)
				}
			}
			n++
		}
	}()

	var wg sync.WaitGroup
	for h, l := range ls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(seed, uint64(h)))
			for i := range ops {
				key := someKey(r)
				var err error
				var what string
				switch op := r.IntN(100); {
				case op < 20:
					event := fmt.Sprintf("e%d", r.IntN(3))
					what = "propose " + event
					var a ledger.Action
					a, err = l.Propose(ctx, ledger.Proposal{Task: ledger.TaskRef{ID: "task-7"}, Customer: "cust-42",
						Event: event, ActionType: "reply_ack", Target: "task-7", Recipient: "ada@example.com",
						Subject: "Hello", Body: fmt.Sprintf("Body %d", r.IntN(2)), Actor: "wf", Destination: fake.DefaultName})
					if err == nil {
						mu.Lock()
						keys[a.Key] = true
						mu.Unlock()
					}
				case op < 30:
					what = "submit " + key
					_, err = l.Submit(ctx, key, "wf")
				case op < 50:
					what = "approve " + key
					_, err = l.Approve(ctx, key, "lead", consentYes)
				case op < 75:
					executor := "wf"
					if r.IntN(10) == 0 {
						executor = "intruder"
					}
					what = "execute " + key + " as " + executor
					_, err = l.Execute(ctx, ledger.ExecuteRequest{Key: key, Executor: executor, Reread: consentYes}, dest)
				case op < 82:
					what = "hold " + key
					_, err = l.Hold(ctx, key, "lead", "look first")
				case op < 89:
					what = "release " + key
					_, err = l.ReleaseHold(ctx, key, "lead", "looked")
				case op < 93:
					what = "reconcile " + key
					_, err = l.Reconcile(ctx, ledger.ReconcileRequest{Key: key, Actor: "lead", Open: records(inner)})
				case op < 97:
					what = "stop"
					err = l.Stop(ctx, "ops", fmt.Sprintf("drill %d.%d", h, i))
				default:
					what = "resume"
					err = l.Resume(ctx, "ops", fmt.Sprintf("drill over %d.%d", h, i))
				}
				// The gate's refusals are answers; a ledger that could not
				// record is a failure of the run.
				if errors.Is(err, ledger.ErrNotRecorded) {
					fail("handle %d, op %d, %s: %v", h, i, what, err)
				}
				mu.Lock()
				switch {
				case errors.Is(err, ledger.ErrInFlight):
					answers["in flight"]++
				case errors.Is(err, ledger.ErrDuplicate):
					answers["already sent"]++
				case errors.Is(err, ledger.ErrStopped):
					answers["stopped"]++
				case err != nil:
					answers["other refusal"]++
				default:
					answers["done"]++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(done)
	t.Logf("ledger check ran %d times while the handles raced", <-sampled)
	for _, f := range failures {
		t.Error(f)
	}
	vs, err := first.Check(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vs {
		t.Errorf("after the race: %v", v)
	}
	accepted := map[string]int{}
	for k := range keys {
		atts, err := first.Attempts(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range atts {
			if a.Outcome == destination.OutcomeAccepted {
				accepted[k]++
			}
		}
		if accepted[k] > 1 || inner.Arrivals(k) > 1 {
			t.Errorf("%s: %d attempts accepted, arrived %d times", k, accepted[k], inner.Arrivals(k))
		}
	}
	t.Logf("%d keys, accepted %v, %d sends; answers %v", len(keys), accepted, inner.Calls(), answers)
}

// slowDest takes a moment over every send.
type slowDest struct{ *fake.Destination }

func (d slowDest) Send(ctx context.Context, m destination.Message) (destination.Receipt, error) {
	time.Sleep(3 * time.Millisecond)
	return d.Destination.Send(ctx, m)
}

// raceSeed is the seed of a race test: GATEHOUSE_RACE_SEED repeats a run,
// otherwise a new one is drawn; it is logged either way.
func raceSeed(t *testing.T) uint64 {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("GATEHOUSE_RACE_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("GATEHOUSE_RACE_SEED=%d", seed)
	return seed
}

// scriptOutcomes scripts the destination's next n answers: of every
// oneIn, on average one unknown (the message arrived) and one rejected for
// now; accepted otherwise.
func scriptOutcomes(dest *fake.Destination, rng *rand.Rand, n, oneIn int) {
	for range n {
		switch rng.IntN(oneIn) {
		case 0:
			dest.Script(destination.OutcomeUnknown)
		case 1:
			dest.Script(destination.OutcomeRejectedTemporary)
		default:
			dest.Script(destination.OutcomeAccepted)
		}
	}
}

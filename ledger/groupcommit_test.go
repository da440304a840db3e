package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"gatehouse/ledger"
)

// groupedWorld is a world whose first group of grouped writes holds its
// transaction back until want writes have joined the queue, so that the
// writes are decided in two groups, the first and the rest.
func groupedWorld(t *testing.T, want int) (*world, func() []int) {
	sqliteOnly(t) // PostgreSQL writers each have their own connection
	w := newWorld(t)
	ready := make(chan struct{})
	var once sync.Once
	var mu sync.Mutex
	var sizes []int
	var first sync.Once
	joined := 0
	ledger.OnQueue(w.l, func(int) {
		if joined++; joined >= want { // under the queue's lock
			once.Do(func() { close(ready) })
		}
	})
	ledger.OnGroup(w.l, func(n int) {
		first.Do(func() { <-ready })
		mu.Lock()
		sizes = append(sizes, n)
		mu.Unlock()
	})
	return w, func() []int {
		mu.Lock()
		defer mu.Unlock()
		return append([]int(nil), sizes...)
	}
}

// approvedActions sets up task-7 owned by wf-ack with n approved actions
// on consent "yes", one per enquiry, and returns their keys.
func approvedActions(w *world, n int) []string {
	w.t.Helper()
	_, err := w.l.Claim(w.ctx, ledger.TaskRef{ID: "task-7"}, "wf-ack")
	w.must(err)
	keys := make([]string, n)
	for i := range keys {
		p := ackProposal("wf-ack")
		p.Event = fmt.Sprint("enquiry-", 2000+i)
		a, err := w.l.Propose(w.ctx, p)
		w.must(err)
		_, err = w.l.Approve(w.ctx, a.Key, "lead", consentYes)
		w.must(err)
		keys[i] = a.Key
	}
	return keys
}

// TestGroupedExecutionsAreDecidedAsAlone: executions that share one
// transaction (group commit) each get the answer and leave the history a
// lone execution would: sends, a denial and an owner's refusal recorded, a
// caller's slip and a cancelled caller recorded nothing, and of two
// executors racing for one action one sends and the other is blocked.
func TestGroupedExecutionsAreDecidedAsAlone(t *testing.T) {
	const sends = 6
	type job struct {
		name     string
		action   int
		executor string
		reread   []ledger.MaterialRead
		cancel   bool
		want     func(error) bool
		recorded bool // whether the job leaves a history line
	}
	ok := func(err error) bool { return err == nil }
	var jobs []job
	for i := range sends {
		jobs = append(jobs, job{name: fmt.Sprint("send ", i), action: i, executor: "wf-ack", reread: consentYes, want: ok, recorded: true})
	}
	jobs = append(jobs,
		job{name: "denied", action: sends, executor: "wf-ack", reread: []ledger.MaterialRead{{Source: "crm", Field: "consent", Value: "withdrawn"}},
			want: func(err error) bool { return errors.Is(err, ledger.ErrDenied) }, recorded: true},
		job{name: "not the owner", action: sends + 1, executor: "wf-other", reread: consentYes,
			want: func(err error) bool { return errors.Is(err, ledger.ErrOwnershipConflict) }, recorded: true},
		job{name: "slip", action: sends + 2, executor: "wf-ack",
			want: func(err error) bool { return errors.Is(err, ledger.ErrInvalid) }},
		job{name: "cancelled", action: sends + 3, executor: "wf-ack", reread: consentYes, cancel: true,
			want: func(err error) bool { return errors.Is(err, context.Canceled) }},
		job{name: "race a", action: sends + 4, executor: "wf-ack", reread: consentYes, want: func(error) bool { return true }, recorded: true},
		job{name: "race b", action: sends + 4, executor: "wf-ack", reread: consentYes, want: func(error) bool { return true }, recorded: true},
	)
	w, sizes := groupedWorld(t, len(jobs))
	keys := approvedActions(w, sends+5)
	lines := map[string]int{}
	for _, k := range keys {
		h, err := w.l.History(w.ctx, ledger.HistoryFilter{ActionKey: k})
		w.must(err)
		lines[k] = len(h)
	}

	errs := make([]error, len(jobs))
	var wg sync.WaitGroup
	for i, j := range jobs {
		wg.Go(func() {
			ctx := w.ctx
			if j.cancel {
				c, cancel := context.WithCancel(ctx)
				cancel()
				ctx = c
			}
			_, errs[i] = w.l.Execute(ctx, ledger.ExecuteRequest{Key: keys[j.action], Executor: j.executor, Reread: j.reread}, w.dest)
		})
	}
	wg.Wait()

	if got := sizes(); len(got) < 2 || got[0]+got[1] < len(jobs) || got[0] == 1 && got[1] == 1 {
		t.Fatalf("groups %v: the executions were not decided together", got)
	}
	for i, j := range jobs {
		if !j.want(errs[i]) {
			t.Errorf("%s: %v", j.name, errs[i])
		}
	}
	// Of the racing pair exactly one sent.
	if (errs[len(jobs)-1] == nil) == (errs[len(jobs)-2] == nil) {
		t.Errorf("racing executors: %v and %v, want one send and one block", errs[len(jobs)-2], errs[len(jobs)-1])
	}
	for _, j := range jobs {
		k := keys[j.action]
		h, err := w.l.History(w.ctx, ledger.HistoryFilter{ActionKey: k})
		w.must(err)
		if grew := len(h) > lines[k]; grew != j.recorded {
			t.Errorf("%s: history of %s went from %d to %d lines", j.name, k, lines[k], len(h))
		}
	}
	for _, i := range []int{sends + 2, sends + 3} {
		if st := w.state(keys[i]); st != ledger.StateApproved {
			t.Errorf("%s is %s after a request that recorded nothing", keys[i], st)
		}
	}
	if got := w.dest.Calls(); got != sends+1 {
		t.Errorf("destination called %d times, want %d", got, sends+1)
	}
	v, err := w.l.Check(w.ctx)
	w.must(err)
	if len(v) != 0 {
		t.Errorf("ledger check: %v", v)
	}
}

// TestGroupThatCannotCommitRunsEachAlone: when the group's transaction
// fails (a full disk), nothing of it is committed and each execution runs
// again by itself: each gets the answer a lone one gets (sent when its own
// transaction found room; not recorded, and nothing sent, when its intent
// found none; handed over and its outcome not recorded when only that found
// none), and none waits for ever.
func TestGroupThatCannotCommitRunsEachAlone(t *testing.T) {
	const n = 6
	w, sizes := groupedWorld(t, n)
	keys := approvedActions(w, n)
	w.must(ledger.LimitPages(w.l, 0))
	before := w.l.Activity().Writes
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			_, errs[i] = w.l.Execute(w.ctx, ledger.ExecuteRequest{Key: keys[i], Executor: "wf-ack", Reread: consentYes}, w.dest)
		})
	}
	wg.Wait()
	if got := sizes(); len(got) < 2 || got[0]+got[1] < n || got[0] == 1 && got[1] == 1 {
		t.Fatalf("groups %v: the executions were not decided together", got)
	}
	sent, handed := 0, 0
	for i, err := range errs {
		st := w.state(keys[i])
		switch {
		case err == nil && st == ledger.StateSent:
			sent++
		case errors.Is(err, ledger.ErrNotRecorded) && errors.Is(err, ledger.ErrUnknownOutcome) && st == ledger.StateExecuting:
			handed++ // its intent was recorded and handed over, its outcome not
		case errors.Is(err, ledger.ErrNotRecorded) && !errors.Is(err, ledger.ErrUnknownOutcome) && st == ledger.StateApproved:
		default:
			t.Errorf("execution %d on a full disk: %v, and its action is %s", i, err, st)
		}
	}
	if sent == n {
		t.Fatal("every execution was recorded: the disk was not full")
	}
	if got := w.dest.Calls(); got != sent+handed {
		t.Errorf("destination called %d times for %d recorded intents", got, sent+handed)
	}
	// A transaction for each group, and one for each write of a group that
	// failed, run again alone.
	if writes := w.l.Activity().Writes - before; writes < int64(len(sizes())+2) {
		t.Errorf("%d write transactions: the group's executions did not run again alone", writes)
	}
}

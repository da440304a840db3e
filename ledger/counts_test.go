package ledger_test

import (
	"fmt"
	"slices"
	"testing"

	"gatehouse/ledger"
)

// TestListTotalsAndPagesFollowStateChanges: as actions are proposed and
// move between states, every list the inspector pages (all actions, one
// state, the holds) has the total a recount gives, and its pages at every
// offset, read from either end, laid end to end are that list exactly:
// newest first, no action twice, none missing. The totals come from the
// counts schema 10 keeps; the pages skip their offsets in an index.
func TestListTotalsAndPagesFollowStateChanges(t *testing.T) {
	w := newWorld(t)
	var keys []string // oldest first
	for i := range 23 {
		keys = append(keys, w.proposeFor(fmt.Sprintf("cust-%02d", i%5), fmt.Sprintf("e-%02d", i), "a@example.com", "Hello").Key)
	}
	filters := []struct {
		name   string
		states []ledger.State
	}{
		{"All", nil},
		{"Drafting", []ledger.State{ledger.StateDrafting}},
		{"Awaiting", []ledger.State{ledger.StateAwaitingApproval}},
		{"Cancelled", []ledger.State{ledger.StateCancelled}},
		{"Holds", []ledger.State{ledger.StateHeld, ledger.StateUnknown}},
	}
	verify := func(step string) {
		t.Helper()
		state := map[string]ledger.State{}
		for _, k := range keys {
			state[k] = w.state(k)
		}
		for _, f := range filters {
			var want []string // newest first
			for _, k := range slices.Backward(keys) {
				if len(f.states) == 0 || slices.Contains(f.states, state[k]) {
					want = append(want, k)
				}
			}
			for _, limit := range []int{1, 3, 7, 30} {
				var got []string
				for off := 0; off < len(want)+limit; off += limit {
					total, page, err := w.l.ListActions(w.ctx, ledger.ActionFilter{States: f.states, Limit: limit, Offset: off})
					w.must(err)
					if total != len(want) {
						t.Fatalf("%s, %s, limit %d offset %d: total %d, want %d", step, f.name, limit, off, total, len(want))
					}
					got = append(got, keysOf(page)...)
				}
				if !slices.Equal(got, want) {
					t.Fatalf("%s, %s, limit %d: pages give\n%v\nwant\n%v", step, f.name, limit, got, want)
				}
			}
		}
		vs, err := w.l.Check(w.ctx)
		w.must(err)
		if len(vs) > 0 {
			t.Fatalf("%s: check: %v", step, vs)
		}
	}
	verify("proposed")
	for i, k := range keys {
		switch i % 4 {
		case 0:
			_, err := w.l.Submit(w.ctx, k, "wf-ack")
			w.must(err)
		case 1:
			_, err := w.l.Hold(w.ctx, k, "ops", "looks wrong")
			w.must(err)
		case 2:
			_, err := w.l.Cancel(w.ctx, k, "ops", "not needed")
			w.must(err)
		}
	}
	verify("moved")
	for i, k := range keys {
		if i%8 == 1 {
			_, err := w.l.ReleaseHold(w.ctx, k, "ops", "checked")
			w.must(err)
		}
	}
	keys = append(keys, w.proposeFor("cust-new", "e-new", "a@example.com", "Hello").Key)
	verify("released and one more")
}

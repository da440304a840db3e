package ledger_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"gatehouse/destination/fake"
	"gatehouse/ledger"
)

// proposeFor records one draft for customer on its own task, a second
// after the previous one.
func (w *world) proposeFor(customer, event, recipient, subject string) ledger.Action {
	w.t.Helper()
	w.clock.Advance(time.Second)
	task := "task-" + event
	a, err := w.l.Propose(w.ctx, ledger.Proposal{Task: ledger.TaskRef{ID: task, Customer: customer, Subject: "Enquiry"},
		Customer: customer, Event: event, ActionType: "reply_ack", Target: task,
		Recipient: recipient, Subject: subject, Body: "Hello", Actor: "wf-ack", Destination: fake.DefaultName})
	w.must(err)
	return a
}

func keysOf(as []ledger.Action) []string {
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = a.Key
	}
	return out
}

// TestSearchIsASubstringInAnyCase: a search matches a substring of the key,
// customer, recipient or subject, whatever the case, and % and _ mean
// themselves.
func TestSearchIsASubstringInAnyCase(t *testing.T) {
	w := newWorld(t)
	ada := w.proposeFor("cust-ada", "enquiry-1", "ada@example.com", "We have your enquiry")
	ben := w.proposeFor("cust-ben", "enquiry-2", "Ben@Example.com", "Refund of 10% approved")
	cy := w.proposeFor("cust-cy", "webhook_3", "cy@example.org", "Your delivery")
	for _, tc := range []struct {
		name, search string
		want         []string
	}{
		{"RecipientMiddle", "ben@", []string{ben.Key}},
		{"RecipientOtherCase", "BEN@EXAMPLE", []string{ben.Key}},
		{"CustomerMiddle", "ada", []string{ada.Key}},
		{"KeyEvent", "enquiry-2", []string{ben.Key}},
		{"SubjectWord", "delivery", []string{cy.Key}},
		{"Domain", "example.com", []string{ben.Key, ada.Key}},
		{"PercentIsLiteral", "10%", []string{ben.Key}},
		{"UnderscoreIsLiteral", "k_3", []string{cy.Key}},
		{"UnderscoreIsNotAWildcard", "k_2", nil},
		{"Nothing", "zed", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			total, got, err := w.l.ListActions(w.ctx, ledger.ActionFilter{Search: tc.search})
			w.must(err)
			if total != len(tc.want) || !slices.Equal(keysOf(got), tc.want) {
				t.Fatalf("search %q: %d %v, want %v", tc.search, total, keysOf(got), tc.want)
			}
		})
	}
	total, tasks, err := w.l.ListTasks(w.ctx, ledger.TaskFilter{Search: "TASK-WEBHOOK"})
	w.must(err)
	if total != 1 || tasks[0].ID != "task-webhook_3" {
		t.Fatalf("task search: %d %+v", total, tasks)
	}
}

// TestListIsNewestFirst: every page, filtered or not, searched or not, in
// either half of the list, is in the order the actions were proposed,
// newest first.
func TestListIsNewestFirst(t *testing.T) {
	w := newWorld(t)
	var all []string
	for i := range 25 {
		to := "a@example.com"
		if i%2 == 1 {
			to = "b@example.com"
		}
		all = append(all, w.proposeFor(fmt.Sprintf("cust-%02d", i), fmt.Sprintf("e-%02d", i), to, "Hello").Key)
	}
	slices.Reverse(all)
	var odd []string
	for i, k := range all {
		if i%2 == 0 { // all[0] is the newest, number 24, sent to a@
			continue
		}
		odd = append(odd, k)
	}
	for _, tc := range []struct {
		name string
		f    ledger.ActionFilter
		want []string
	}{
		{"All", ledger.ActionFilter{}, all},
		{"State", ledger.ActionFilter{States: []ledger.State{ledger.StateDrafting}}, all},
		{"Search", ledger.ActionFilter{Search: "b@"}, odd},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, limit := range []int{1, 4, 7, 25} {
				for off := 0; off <= len(tc.want); off++ {
					f := tc.f
					f.Limit, f.Offset = limit, off
					total, got, err := w.l.ListActions(w.ctx, f)
					w.must(err)
					want := tc.want[off:min(off+limit, len(tc.want))]
					if total != len(tc.want) || !slices.Equal(keysOf(got), want) {
						t.Fatalf("limit %d offset %d: %d %v, want %d %v", limit, off, total, keysOf(got), len(tc.want), want)
					}
				}
			}
		})
	}
}

// TestRankFollowsNewerRows: a key's rank is its index in the list the
// filter selects, and grows as newer actions arrive above it.
func TestRankFollowsNewerRows(t *testing.T) {
	w := newWorld(t)
	ada := w.proposeFor("cust-ada", "e-1", "ada@example.com", "Hello")
	w.proposeFor("cust-ben", "e-2", "ben@example.com", "Hello")
	w.proposeFor("cust-ada", "e-3", "ada@example.com", "Hello")
	for _, tc := range []struct {
		name string
		f    ledger.ActionFilter
		rank int
		ok   bool
	}{
		{"All", ledger.ActionFilter{}, 2, true},
		{"Search", ledger.ActionFilter{Search: "ada@"}, 1, true},
		{"NotSelected", ledger.ActionFilter{Search: "ben@"}, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rank, ok, err := w.l.ActionRank(w.ctx, tc.f, ada.Key)
			w.must(err)
			if rank != tc.rank || ok != tc.ok {
				t.Fatalf("rank %d %v, want %d %v", rank, ok, tc.rank, tc.ok)
			}
		})
	}
	rank, ok, err := w.l.TaskRank(w.ctx, ledger.TaskFilter{}, ada.TaskID)
	w.must(err)
	if rank != 2 || !ok {
		t.Fatalf("task rank %d %v, want 2 true", rank, ok)
	}
}

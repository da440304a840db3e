package tui

import (
	"slices"
	"testing"

	"gatehouse/destination"
	"gatehouse/ledger"
)

func TestKeyLabels(t *testing.T) {
	key := func(customer, event, target string, rev int) string {
		return ledger.Key(customer, event, "delivery_notice", target, rev)
	}
	tests := []struct {
		name        string
		keys, tasks []string
		want        []string
	}{
		{"OneKeyWhole", []string{key("cust-ada", "delay-14", "t-1", 0)}, []string{"t-1"},
			[]string{"cust-ada:delay-14:delivery_notice"}},
		{"SharedEventAndType", []string{key("cust-ada", "delay-14", "t-1", 0), key("cust-cy", "delay-14", "t-2", 0)},
			[]string{"t-1", "t-2"}, []string{"cust-ada…", "cust-cy…"}},
		{"SharedCustomer", []string{key("cust-ada", "enquiry-1", "t-1", 0), key("cust-ada", "refund-2", "t-1", 0)},
			[]string{"t-1", "t-1"}, []string{"…enquiry-1…", "…refund-2…"}},
		{"TargetOtherThanTask", []string{key("cust-ada", "e-1", "order-9", 0)}, []string{"t-1"},
			[]string{"cust-ada:e-1:delivery_notice:order-9"}},
		{"RevisionKept", []string{key("cust-ada", "e-1", "t-1", 0), key("cust-ada", "e-1", "t-1", 1)},
			[]string{"t-1", "t-1"}, []string{"…delivery_notice", "…delivery_notice:r1"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := keyLabels(tc.keys, tc.tasks); !slices.Equal(got, tc.want) {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// TestShortWordsAreDistinct: no two states, and no two outcomes, share a
// short form, and a short form is never longer than the long one.
func TestShortWordsAreDistinct(t *testing.T) {
	seen := map[string]ledger.State{}
	for _, s := range ledger.AllStates {
		w := stateWord(s, true)
		if other, ok := seen[w]; ok {
			t.Errorf("%s and %s both read %q", s, other, w)
		}
		seen[w] = s
		if len(w) > 9 || len(w) > len(stateWord(s, false)) {
			t.Errorf("%s reads %q", s, w)
		}
	}
	owner := map[string]destination.Outcome{} // which outcome each short word stands for
	for _, o := range []destination.Outcome{destination.OutcomeAccepted, destination.OutcomeNotDelivered,
		destination.OutcomeRejectedTemporary, destination.OutcomeRejectedPermanent, destination.OutcomeUnknown, ""} {
		plain, rec := outcomeWord(string(o), false, true), outcomeWord(string(o), true, true)
		for _, w := range []string{plain, rec} {
			if other, ok := owner[w]; ok && other != o {
				t.Errorf("%q stands for both %q and %q", w, o, other)
			}
			owner[w] = o
		}
		if (o == destination.OutcomeAccepted || o == destination.OutcomeNotDelivered) && plain == rec {
			t.Errorf("%s reads %q whether or not it was reconciled", o, plain)
		}
	}
}

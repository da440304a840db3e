package tui

import (
	"testing"

	"gatehouse/destination"
	"gatehouse/ledger"
)

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

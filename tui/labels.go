package tui

import (
	"strings"

	"github.com/charmbracelet/x/ansi"

	"gatehouse/destination"
)

// Short forms for narrow columns. Each is still a word a reader knows, and
// no two states or outcomes share one, so a narrow table is never
// ambiguous; the detail screen (enter) always has the full words.

// outcomeWord is an attempt's outcome in plain words: outcome is the
// ledger's value ("" while in flight), reconciled says it was established
// afterwards. The short forms use the mail trade's own words: a temporary
// rejection is "deferred"; an outcome established from the destination's
// records is "found" or "not found".
func outcomeWord(outcome string, reconciled, short bool) string {
	if outcome == "" || outcome == "in flight" {
		return "in flight"
	}
	if !short {
		s := strings.ReplaceAll(outcome, "_", " ")
		if reconciled {
			s += " (reconciled)"
		}
		return s
	}
	switch destination.Outcome(outcome) {
	case destination.OutcomeAccepted:
		if reconciled {
			return "found"
		}
		return "accepted"
	case destination.OutcomeNotDelivered:
		if reconciled {
			return "not found"
		}
		return "undelivered"
	case destination.OutcomeRejectedTemporary:
		return "deferred"
	case destination.OutcomeRejectedPermanent:
		return "rejected"
	}
	return outcome
}

// scenarioOutcome splits a rehearsal's outcome text ("accepted
// (reconciled)") back into the ledger's value.
func scenarioOutcome(text string) string { return strings.TrimSuffix(text, " (reconciled)") }

// abbrev fits a scenario's or an actor's name into w columns keeping its
// end, which is where names such as notice-ada and notice-ben differ:
// "noti…-ada". Action keys are named by keyname instead.
func abbrev(s string, w int) string {
	if ansi.StringWidth(s) <= w || w <= 1 {
		return s
	}
	r := []rune(s)
	tail := ""
	if i := strings.LastIndexAny(s, "-:_."); i > 0 {
		tail = s[i:]
	}
	tr := []rune(tail)
	if tail == "" || len(tr)+2 > w {
		return ellipsis + string(r[len(r)-(w-1):])
	}
	head := w - 1 - len(tr)
	return string(r[:head]) + ellipsis + tail
}

package tui

import (
	"strconv"
	"strings"

	"github.com/charmbracelet/x/ansi"

	"gatehouse/destination"
	"gatehouse/ledger"
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

// keyLabels shortens action keys to the part that tells them apart: the
// format prefix goes, so do a target equal to the key's task and the
// revision r0; then the leading and trailing parts (customer, event, action
// type) that every key on the list shares, each marked with an ellipsis.
// Parts are dropped whole, never cut to a stem.
func keyLabels(keys, tasks []string) []string {
	parts := make([][]string, len(keys))
	for i, k := range keys {
		task := ""
		if i < len(tasks) {
			task = tasks[i]
		}
		parts[i] = strings.Split(keyLabel(k, task), ":")
	}
	lead, trail := sharedParts(parts)
	out := make([]string, len(keys))
	for i, p := range parts {
		s := strings.Join(p[lead:len(p)-trail], ":")
		if lead > 0 {
			s = ellipsis + s
		}
		if trail > 0 {
			s += ellipsis
		}
		out[i] = s
	}
	return out
}

// sharedParts counts the leading and the trailing parts all lists share,
// leaving each at least one part. Fewer than two lists share nothing.
func sharedParts(parts [][]string) (lead, trail int) {
	if len(parts) < 2 {
		return 0, 0
	}
	shortest := len(parts[0])
	for _, p := range parts {
		shortest = min(shortest, len(p))
	}
	same := func(at func(p []string) string) bool {
		for _, p := range parts[1:] {
			if at(p) != at(parts[0]) {
				return false
			}
		}
		return true
	}
	for lead < shortest-1 && same(func(p []string) string { return p[lead] }) {
		lead++
	}
	for trail < shortest-1-lead && same(func(p []string) string { return p[len(p)-1-trail] }) {
		trail++
	}
	return lead, trail
}

// keyLabel is one key without what its columns already say.
func keyLabel(key, task string) string {
	parts, err := ledger.ParseKey(key)
	if err != nil {
		return key
	}
	s := parts.Customer + ":" + parts.Event + ":" + parts.ActionType
	if parts.Target != task {
		s += ":" + parts.Target
	}
	if parts.Revision > 0 {
		s += ":r" + strconv.Itoa(parts.Revision)
	}
	return s
}

// abbrev fits s into w columns keeping its end, which is where names such
// as notice-ada and notice-ben differ: "noti…-ada".
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

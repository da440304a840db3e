package tui

import (
	"strconv"
	"strings"

	"github.com/charmbracelet/x/ansi"

	"gatehouse/ledger"
)

// Short forms for narrow columns. Each is still a word a reader knows, and
// no two states or outcomes share one, so a narrow table is never
// ambiguous; the detail screen (enter) always has the full words.

// stateWord is a state in plain words; short gives the form for a narrow
// column (at most 9 columns wide).
func stateWord(s ledger.State, short bool) string {
	if short && s == ledger.StateAwaitingApproval {
		return "awaiting"
	}
	return strings.ReplaceAll(string(s), "_", " ")
}

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
	switch ledger.Outcome(outcome) {
	case ledger.OutcomeAccepted:
		if reconciled {
			return "found"
		}
		return "accepted"
	case ledger.OutcomeNotDelivered:
		if reconciled {
			return "not found"
		}
		return "undelivered"
	case ledger.OutcomeRejectedTemporary:
		return "deferred"
	case ledger.OutcomeRejectedPermanent:
		return "rejected"
	}
	return outcome
}

// scenarioOutcome splits a rehearsal's outcome text ("accepted
// (reconciled)") back into the ledger's value.
func scenarioOutcome(text string) string { return strings.TrimSuffix(text, " (reconciled)") }

// keyLabels shortens action keys to the part that tells them apart: the
// format prefix goes, so do a target equal to the key's task and the
// revision r0; then the trailing parts every key on the list shares (such
// as the action type) and the leading text they share (such as a customer
// prefix), each marked with an ellipsis.
func keyLabels(keys, tasks []string) []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		task := ""
		if i < len(tasks) {
			task = tasks[i]
		}
		out[i] = keyLabel(k, task)
	}
	if s := sharedSuffix(out); s > 0 {
		for i := range out {
			out[i] = out[i][:len(out[i])-s] + ellipsis
		}
	}
	if p := sharedPrefix(out); p > 0 {
		for i := range out {
			out[i] = ellipsis + out[i][p:]
		}
	}
	return out
}

// sharedSuffix is the length of the trailing ":part…" segments all of ss
// share, leaving each at least one segment. Fewer than two strings share
// nothing.
func sharedSuffix(ss []string) int {
	if len(ss) < 2 {
		return 0
	}
	segs := func(s string) []string { return strings.Split(s, ":") }
	first := segs(ss[0])
	n := len(first) - 1
	for _, s := range ss[1:] {
		other := segs(s)
		m := 0
		for m < min(n, len(other)-1) && other[len(other)-1-m] == first[len(first)-1-m] {
			m++
		}
		n = m
	}
	if n == 0 {
		return 0
	}
	return len(strings.Join(first[len(first)-n:], ":")) + 1
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

// sharedPrefix is the length of the leading text all of ss share, cut
// back to just after a separator, so that at least three characters of
// every string remain. Fewer than two strings share nothing.
func sharedPrefix(ss []string) int {
	if len(ss) < 2 {
		return 0
	}
	p := len(ss[0])
	for _, s := range ss[1:] {
		n := 0
		for n < min(p, len(s)) && s[n] == ss[0][n] {
			n++
		}
		p = n
	}
	for _, s := range ss {
		p = min(p, len(s)-3)
	}
	for p > 0 && !strings.ContainsRune(":-_.", rune(ss[0][p-1])) {
		p--
	}
	return max(p, 0)
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

package tui

import (
	"strings"

	"github.com/charmbracelet/x/ansi"

	"gatehouse/internal/wrap"
	"gatehouse/ledger"
)

// The words every screen shares: one wrapper, one stand-in for a missing
// value, one name for a ledger and for a state, so two screens never say
// one thing two ways.

// para wraps text at width after prefix, indenting the continuation lines
// under the text so a long sentence stays readable instead of being cut.
func para(prefix, text string, width int) []string { return wrap.Hanging(prefix, text, width) }

// wrapWords breaks text at spaces only (see internal/wrap).
func wrapWords(text string, width int) []string { return wrap.Words(text, width) }

// orDash is s, or a dash where nothing was recorded.
func orDash(s string) string {
	if strings.TrimSpace(s) == "" {
		return "—"
	}
	return s
}

// orText is s, or alt where s is empty.
func orText(s, alt string) string {
	if s == "" {
		return alt
	}
	return s
}

// sourceName names a ledger on screen: its location with any password
// taken out, as every command that prints one does (a PostgreSQL URL
// carries it).
func sourceName(l *ledger.Ledger) string { return ledger.RedactLocation(l.Path()) }

// clockWords is what a screen's title adds for a ledger whose records mark
// it as a rehearsal's: its times are the rehearsal's pretend time, not the
// wall clock's, and the reader must know before reading any of them.
func clockWords(l *ledger.Ledger) string {
	if l == nil || l.Rehearsal() == "" {
		return ""
	}
	return " · on a rehearsal's clock"
}

// stateWord is a state in plain words; short gives the form for a narrow
// column (at most 9 columns wide).
func stateWord(s ledger.State, short bool) string {
	if short && s == ledger.StateAwaitingApproval {
		return "awaiting"
	}
	return strings.ReplaceAll(string(s), "_", " ")
}

// stateCode is a state as the review's history codes it, "held:cause" for
// a hold, in its short words.
func stateCode(code string) string {
	st, cause, _ := strings.Cut(code, ":")
	if cause != "" {
		return "held(" + strings.ReplaceAll(cause, "_", " ") + ")"
	}
	return stateWord(ledger.State(st), true)
}

// packItems joins items with " · " into as few lines of width w as it can
// without breaking an item, so a figure never sits apart from its name; a
// line that goes on below ends in " ·".
func packItems(items []string, w int) []string {
	var lines []string
	cur := ""
	for _, it := range items {
		switch {
		case cur == "":
			cur = it
		case ansi.StringWidth(cur+" · "+it+" ·") <= w:
			cur += " · " + it
		default:
			lines, cur = append(lines, cur+" ·"), it
		}
	}
	return append(lines, cur)
}

package review

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"gatehouse/ledger"
)

// WriteJSON writes the report as one indented JSON object.
func (r Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(r); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	return nil
}

// WriteMarkdown writes the report as Markdown that reads well pasted into
// a ticket.
func (r Report) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# Incident review: %s\n\n", r.Ledger)
	if r.Rehearsal != "" {
		fmt.Fprintf(&b, "Runs on a rehearsal's clock: the ledger of a rehearsal of %s, whose times are the rehearsal's pretend time, not the wall clock's.\n\n", r.Rehearsal)
	}
	fmt.Fprintf(&b, "Window: %s to %s (%d history lines).\n\n", orDash(r.Window.Since), orDash(r.Window.Until), r.Window.Events)
	r.mdStop(&b)
	fmt.Fprintf(&b, "## At %s\n\n", r.Moment)
	b.WriteString("| bucket | actions |\n| --- | ---: |\n")
	for _, c := range r.Counts {
		fmt.Fprintf(&b, "| %s | %d |\n", c.Title, c.N)
	}
	b.WriteString("\n")
	for k, ba := range r.Buckets {
		if len(ba.Actions) == 0 {
			continue
		}
		fmt.Fprintf(&b, "### %s: %d\n\n", r.Counts[k].Title, len(ba.Actions))
		b.WriteString("| action | task | then | now | after the moment | sends tried after | approved material |\n| --- | --- | --- | --- | --- | ---: | --- |\n")
		for _, a := range ba.Actions {
			then := a.State
			if a.Inferred {
				then += " (inferred)"
			}
			now := orDash(a.Now)
			if a.ArrivedTwice {
				now += " (arrived twice)"
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %d | %s |\n", cell(a.Key), cell(a.Task), then, now,
				cell(orDash(strings.Join(a.After, ", "))), a.SendsTried, cell(a.Material.Words(false)))
		}
		b.WriteString("\n")
	}
	r.mdUnknown(&b)
	r.mdOverrides(&b)
	r.mdLate(&b)
	r.mdDays(&b)
	r.mdTotals(&b)
	_, err := io.WriteString(w, b.String())
	if err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	return nil
}

func (r Report) mdStop(b *strings.Builder) {
	if r.Stop == nil {
		b.WriteString("No stop in the window: the buckets describe the end of the window.\n\n")
		return
	}
	s := r.Stop
	fmt.Fprintf(b, "Stop %d of %d: %s by %s because: %s (history line %d).\n", s.Number, s.Of, s.At, s.Actor, orDash(s.Reason), s.EventID)
	if s.Resumed != nil {
		fmt.Fprintf(b, "Resumed %s by %s because: %s.\n\n", s.Resumed.At, s.Resumed.Actor, orDash(s.Resumed.Reason))
	} else {
		b.WriteString("Not resumed: execution is still stopped.\n\n")
	}
}

func (r Report) mdUnknown(b *strings.Builder) {
	b.WriteString("## Unknown outcomes\n\n")
	if len(r.Unknown) == 0 {
		b.WriteString("None in flight at the moment.\n\n")
		return
	}
	b.WriteString("| action | attempt | destination | Message-ID | started | outcome now | evidence |\n| --- | ---: | --- | --- | --- | --- | --- |\n")
	for _, u := range r.Unknown {
		out := orDash(u.Outcome)
		if u.Reconciled {
			out += " (reconciled)"
		}
		fmt.Fprintf(b, "| %s | %d | %s | %s | %s | %s | %s |\n", cell(u.Key), u.Attempt, cell(orDash(u.Destination)), cell(u.MessageID),
			u.Started, out, cell(u.Evidence))
	}
	b.WriteString("\n")
}

func (r Report) mdOverrides(b *strings.Builder) {
	b.WriteString("## Manual overrides\n\n")
	if len(r.Overrides) == 0 {
		b.WriteString("None in the window.\n\n")
		return
	}
	b.WriteString("| at | who | what | action | why |\n| --- | --- | --- | --- | --- |\n")
	for _, o := range r.Overrides {
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s |\n", o.At, cell(o.Actor), o.Kind, cell(orDash(o.Key)), cell(orDash(o.Reason)))
	}
	b.WriteString("\n")
}

// mdLate lists the late evidence of the window and the actions that
// arrived twice.
func (r Report) mdLate(b *strings.Builder) {
	b.WriteString("## Late evidence\n\n")
	if len(r.LateEvidence) == 0 {
		b.WriteString("None in the window: nothing turned up about an attempt after it was settled.\n\n")
	} else {
		b.WriteString("| at | kind | action | attempt | what |\n| --- | --- | --- | ---: | --- |\n")
		for _, l := range r.LateEvidence {
			fmt.Fprintf(b, "| %s | %s | %s | %d | %s |\n", l.At, l.Kind, cell(l.Key), l.Attempt, cell(l.Message))
		}
		b.WriteString("\n")
	}
	if len(r.ArrivedTwice) == 0 {
		b.WriteString("Arrived twice: no action, as far as the ledger knows.\n\n")
		return
	}
	fmt.Fprintf(b, "Arrived twice, as the ledger knows now (the customer has the message more than once; each action stays in its state): %d\n\n",
		len(r.ArrivedTwice))
	for _, t := range r.ArrivedTwice {
		fmt.Fprintf(b, "- %s (%s): %s arrived\n", t.Key, t.State, ledger.AttemptList(t.Attempts))
	}
	b.WriteString("\n")
}

func (r Report) mdDays(b *strings.Builder) {
	b.WriteString("## Per day\n\n")
	b.WriteString("| day | proposed | attempts | sent | denied | denial rate | duplicate blocks | ownership conflicts | unknown | holds | manual overrides | failed | stale approvals | stops | late evidence | not permitted |\n")
	b.WriteString("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	row := func(label string, m Measures) {
		fmt.Fprintf(b, "| %s | %d | %d | %d | %d | %.1f%% | %d | %d | %d | %d | %d | %d | %d | %d | %d | %d |\n", label, m.Proposed, m.Attempts, m.Sent,
			m.Denied, m.DenialRate(), m.DuplicateBlocks, m.OwnershipConflicts, m.Unknown, m.Holds, m.ManualOverrides, m.Failed,
			m.StaleApprovals, m.Stops, m.LateEvidence, m.NotPermitted)
	}
	for _, d := range r.Days {
		row(d.Day, d.Measures)
	}
	row("total", r.Total)
	b.WriteString("\nDenial rate: denied sends / (denied sends + attempts started).\n\n")
}

func (r Report) mdTotals(b *strings.Builder) {
	b.WriteString("## At the end of the window\n\n")
	fmt.Fprintf(b, "- Stale proposals (only proposed, unchanged for a day): %d", len(r.StaleProposals))
	if len(r.StaleProposals) > 0 {
		fmt.Fprintf(b, ": %s", strings.Join(r.StaleProposals, ", "))
	}
	b.WriteString("\n")
	if len(r.Unmatched) == 0 {
		b.WriteString("- Unmatched identities: no release has any.\n")
	}
	for _, u := range r.Unmatched {
		fmt.Fprintf(b, "- Unmatched identities in release %s: %d\n", u.Release, u.Rows)
	}
	if r.Inferred.Lines > 0 {
		fmt.Fprintf(b, "- Inferred: %d history lines before line %d were written before lines recorded their state; the states of %d actions above rest on states inferred from those lines' kinds (marked \"inferred\").\n",
			r.Inferred.Lines, r.Inferred.Before, r.Inferred.Actions)
	} else {
		b.WriteString("- Every state above is as the history recorded it; nothing was inferred.\n")
	}
}

// materialWords are the statuses of Material in words: for a report's
// table cell, and short, for a line on a screen.
var materialWords = map[string][2]string{
	"same":        {"same as the latest read", "same as latest read"},
	"not_reread":  {"not re-read since", "not re-read since"},
	"no_approval": {"no approval", "no approval"},
	"no_fields":   {"no material fields", "no fields"},
	"unreadable":  {"the approval's snapshot is unreadable", "snapshot unreadable"},
}

// Words says what Material found, in a report's table cell or, short, on
// a screen's line (the fields changed without when each was read).
func (m *Material) Words(short bool) string {
	if m == nil {
		return "—"
	}
	form := 0
	if short {
		form = 1
	}
	if w, ok := materialWords[m.Status]; ok {
		return w[form]
	}
	var parts []string
	for _, c := range m.Changed {
		if short {
			parts = append(parts, fmt.Sprintf("%s %s→%s", c.Field, c.Approved, c.Latest))
		} else {
			parts = append(parts, fmt.Sprintf("%s %s → %s (read %s)", c.Field, c.Approved, c.Latest, c.ReadAt))
		}
	}
	if short {
		return "CHANGED " + strings.Join(parts, ", ")
	}
	return "changed: " + strings.Join(parts, "; ")
}

func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

// cellText keeps a value inside its Markdown table cell; built once, as a
// report of 100,000 actions writes half a million cells.
var cellText = strings.NewReplacer("|", `\|`, "\n", " ", "\r", " ")

func cell(s string) string { return cellText.Replace(s) }

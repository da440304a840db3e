package tui

import (
	"fmt"
	"strings"

	"github.com/charmbracelet/x/ansi"

	"gatehouse/internal/keyname"
	"gatehouse/ledger"
	"gatehouse/review"
)

// View implements Screen.
func (rv *Review) View() string {
	switch {
	case rv.form != nil:
		return rv.form.view(rv.th, rv.width)
	case rv.loadErr != nil:
		return rv.th.Bad.Render("The history could not be read: " + rv.loadErr.Error())
	case rv.h == nil:
		return rv.th.Dim.Render("Reading the history…")
	}
	var body []string
	switch rv.tab {
	case tabTimeline:
		body = rv.timeline.view(rv)
	case tabRates:
		body = rv.rates.view(rv)
	default:
		body = rv.atStop.view(rv)
	}
	return strings.Join(append([]string{rv.tabBar()}, body...), "\n")
}

func (rv *Review) tabBar() string {
	var b strings.Builder
	for i, name := range reviewTabNames {
		st := rv.th.Tab
		if reviewTab(i) == rv.tab {
			st = rv.th.TabActive
		}
		b.WriteString(st.Render(name))
	}
	if rv.operating {
		b.WriteString("  " + rv.th.Warn.Render("OPERATING"))
	} else {
		b.WriteString("  " + rv.th.Dim.Render("read-only"))
	}
	// What the review follows, where it fits: the tabs come first.
	if note, room := rv.followNote(), rv.width-ansi.StringWidth(b.String())-3; note != "" && room > 0 {
		b.WriteString(rv.th.Dim.Render(" · " + ansi.Truncate(note, room, ellipsis)))
	}
	return b.String()
}

// The timeline's fixed columns: span glyph, moment, kind.
const (
	tlTimeW = 14 // 01-02 15:04:05
	tlKindW = 18
)

// timelineRows is how many lines of history fit: the body less the tab
// bar, the filter line, the header and the selected line's sentence.
func (rv *Review) timelineRows() int { return max(rv.height-7, 1) }

func (rv *Review) rateRows() int { return max(rv.height-5-len(sparkMeasures), 1) }

// view is the timeline's lines, or its spans.
func (t *timelineTab) view(rv *Review) []string {
	if t.spans {
		return t.spansView(rv)
	}
	lines := []string{t.filterLine(rv)}
	c := rv.timelineWidths()
	head := fmt.Sprintf("  %-*s %-*s ", tlTimeW, "at", tlKindW, "what")
	if c.to > 0 {
		head += fmt.Sprintf("%-*s ", c.to, "leads to")
	}
	head += fmt.Sprintf("%-*s %-*s", c.actor, "who", c.action, "action")
	if c.msg > 0 {
		head += " said"
	}
	lines = append(lines, rv.th.Header.Render(fitLine(head, rv.width)))
	if len(t.sel) == 0 {
		return append(lines, rv.th.Dim.Render("No history line matches the filters (c clears them)."))
	}
	end := min(t.pos.top+t.pos.rows, len(t.sel))
	labels := t.pageLabels(rv.h, t.pos.top, end, c.action)
	for p := t.pos.top; p < end; p++ {
		lines = append(lines, t.row(rv, p, labels[p-t.pos.top], c))
	}
	for len(lines) < t.pos.rows+2 {
		lines = append(lines, "")
	}
	return append(lines, t.selectedLines(rv)...)
}

// tlCols are the widths of the timeline's columns that depend on the
// screen: the state a line led to and the sentence only where there is room
// (at 80 columns the selected line's detail says both).
type tlCols struct{ to, actor, action, msg int }

func (rv *Review) timelineWidths() tlCols {
	var c tlCols
	if rv.width >= 120 {
		c.to = 24
	}
	rest := max(rv.width-2-tlTimeW-tlKindW-2-c.to-1, 12)
	if c.to == 0 {
		rest++
	}
	c.actor = min(14, rest/3)
	c.action = rest - c.actor - 1
	if rv.width >= 120 {
		c.action = min(32, c.action)
		c.msg = max(rest-c.actor-c.action-2, 0)
	}
	return c
}

// pageLabels names the actions of the lines on the page by the parts of
// their keys that tell them apart.
func (t *timelineTab) pageLabels(h *review.History, from, to, w int) []string {
	var keys, tasks []string
	for p := from; p < to; p++ {
		if ev := h.Events[t.sel[p]]; ev.Action != 0 {
			keys, tasks = append(keys, h.Key(ev.Action)), append(tasks, h.Tasks[ev.Task])
		}
	}
	short := keyname.Names(keys, tasks, w)
	out := make([]string, 0, to-from)
	k := 0
	for p := from; p < to; p++ {
		ev := h.Events[t.sel[p]]
		switch {
		case ev.Action != 0:
			out = append(out, short[k])
			k++
		case h.Tasks[ev.Task] != "":
			out = append(out, abbrev("task "+h.Tasks[ev.Task], w))
		default:
			out = append(out, "")
		}
	}
	return out
}

func (t *timelineTab) row(rv *Review, p int, label string, c tlCols) string {
	i := int(t.sel[p])
	h := rv.h
	ev := h.Events[i]
	kind := h.KindOf(ev)
	what := string(kind)
	if ev.Flags&review.FlagInferred != 0 {
		what += "*"
	}
	row := fmt.Sprintf("%s %-*s %-*s ", spanGlyph(h, i), tlTimeW, ev.Time().Format("01-02 15:04:05"),
		tlKindW, ansi.Truncate(what, tlKindW, ellipsis))
	if c.to > 0 {
		to := ""
		if ev.To != 0 {
			to = stateCode(h.States[ev.To])
		}
		row += fmt.Sprintf("%-*s ", c.to, ansi.Truncate(to, c.to, ellipsis))
	}
	row += fmt.Sprintf("%-*s %-*s", c.actor, abbrev(h.Actors[ev.Actor], c.actor), c.action, label)
	if c.msg > 0 {
		row += " " + ansi.Truncate(t.text[ev.ID].Message, c.msg, ellipsis)
	}
	row = fitLine(row, rv.width)
	if p == t.pos.cursor {
		return rv.th.Selected.Render(row)
	}
	return rv.th.mark(lineMark(h, ev, kind)).Render(row)
}

// spanGlyph draws where a line sits in its action's life, so one action's
// lines read as a span down the timeline.
func spanGlyph(h *review.History, i int) string {
	if h.KindOf(h.Events[i]) == ledger.EvStopped {
		return "■"
	}
	return [...]string{" ", "•", "┌", "│", "└"}[h.SpanOf(i)]
}

// lineMark colours a line by what it says and by how its action ended.
func lineMark(h *review.History, ev review.Event, kind ledger.EventKind) mark {
	switch kind {
	case ledger.EvDenied, ledger.EvDuplicateBlock, ledger.EvFailed, ledger.EvContradiction, ledger.EvStopped, ledger.EvLateOutcome,
		ledger.EvLateArrival:
		return markBad
	case ledger.EvUnknown, ledger.EvRecoveredUnknown, ledger.EvHeld, ledger.EvRefusedStopped:
		return markWarn
	}
	if ev.Action == 0 {
		return markNone
	}
	switch review.BucketOf(h.Final(ev.Action)) {
	case review.Committed:
		return markGood
	case review.InFlight, review.Held:
		return markWarn
	case review.Denied, review.Failed:
		return markBad
	}
	return markNone
}

// filterLine says what the timeline selects, or is the prompt.
func (t *timelineTab) filterLine(rv *Review) string {
	if rv.prompt != promptNone {
		rv.input.SetWidth(max(rv.width-ansi.StringWidth(rv.input.Prompt)-2, 10))
		return rv.input.View()
	}
	f := rv.filter
	parts := []string{"kind " + review.Groups[f.Group].Name}
	if f.Actor != "" {
		parts = append(parts, fmt.Sprintf("actor %q", f.Actor))
	}
	if f.Subject != "" {
		parts = append(parts, fmt.Sprintf("customer/task %q", f.Subject))
	}
	if w := windowText(f); w != "" {
		parts = append(parts, "window "+w)
	}
	pos := fmt.Sprintf("%d of %d lines", len(t.sel), len(rv.h.Events))
	switch {
	case t.spans:
		pos = fmt.Sprintf("%d actions in %d of %d lines", len(t.spanList), len(t.sel), len(rv.h.Events))
	case len(t.sel) > 0:
		pos = fmt.Sprintf("line %d of %d (%d in all)", t.pos.cursor+1, len(t.sel), len(rv.h.Events))
	}
	return rv.th.Dim.Render(fitLine(strings.Join(parts, " · ")+" · "+pos, rv.width))
}

// selectedLines is the selected line's sentence and reason, wrapped.
func (t *timelineTab) selectedLines(rv *Review) []string {
	out := []string{rv.th.Dim.Render(strings.Repeat("─", rv.width))}
	if len(t.sel) == 0 {
		return out
	}
	ev := rv.h.Events[t.sel[t.pos.cursor]]
	e, ok := t.text[ev.ID]
	text := "…"
	if ok {
		text = e.Message
		if e.Reason != "" && !strings.Contains(e.Message, e.Reason) {
			text += " Why: " + e.Reason
		}
	}
	if ev.To != 0 {
		text = "→ " + stateCode(rv.h.States[ev.To]) + ". " + text
	}
	if ev.Flags&review.FlagInferred != 0 {
		text += " (* state inferred: written before lines recorded their state)"
	}
	wrapped := wrapWords(text, rv.width)
	if len(wrapped) > 3 {
		wrapped = wrapped[:3]
		wrapped[2] = ansi.Truncate(wrapped[2]+" "+ellipsis, rv.width, ellipsis)
	}
	return append(out, wrapped...)
}

// spansView is the timeline one action per row: when its selected lines
// begin (and, where there is room, end), how many there are, and the
// states its history went through, marked by how it ended.
func (t *timelineTab) spansView(rv *Review) []string {
	lines := []string{t.filterLine(rv)}
	h := rv.h
	wide := rv.width >= 120
	labelW := 22
	head := fmt.Sprintf("  %-*s %5s %-*s %s", tlTimeW, "from", "lines", labelW, "action", "states")
	if wide {
		labelW = 40
		head = fmt.Sprintf("  %-*s %-*s %5s %-*s %s", tlTimeW, "from", tlTimeW, "to", "lines", labelW, "action", "states")
	}
	lines = append(lines, rv.th.Header.Render(fitLine(head, rv.width)))
	if len(t.spanList) == 0 {
		return append(lines, rv.th.Dim.Render("No action has a line the filters select (c clears them)."))
	}
	end := min(t.spanPos.top+t.spanPos.rows, len(t.spanList))
	var keys, tasks []string
	for _, sp := range t.spanList[t.spanPos.top:end] {
		keys = append(keys, h.Key(sp.Action))
		tasks = append(tasks, h.Facts.Actions[h.Key(sp.Action)].TaskID)
	}
	labels := keyname.Names(keys, tasks, labelW)
	for p := t.spanPos.top; p < end; p++ {
		sp := t.spanList[p]
		from := h.Events[sp.First].Time().Format("01-02 15:04:05")
		label := labels[p-t.spanPos.top]
		var row string
		if wide {
			row = fmt.Sprintf("%s %-*s %-*s %5d %-*s %s", spanMark(h, sp.Action), tlTimeW, from, tlTimeW,
				h.Events[sp.Last].Time().Format("01-02 15:04:05"), sp.Lines, labelW, label, statePath(h.StatePath(sp.Action), false))
		} else {
			row = fmt.Sprintf("%s %-*s %5d %-*s %s", spanMark(h, sp.Action), tlTimeW, from, sp.Lines, labelW, label,
				statePath(h.StatePath(sp.Action), true))
		}
		row = fitLine(row, rv.width)
		if p == t.spanPos.cursor {
			row = rv.th.Selected.Render(row)
		} else {
			row = rv.th.mark(lineMark(h, h.Events[sp.Last], "")).Render(row)
		}
		lines = append(lines, row)
	}
	return lines
}

// spanMark says in one character how the action ended: ✓ sent, ? in
// flight, ✗ denied or failed, ! held, - cancelled, · only proposed or
// approved.
func spanMark(h *review.History, a int32) string {
	switch review.BucketOf(h.Final(a)) {
	case review.Committed:
		return "✓"
	case review.InFlight:
		return "?"
	case review.Denied, review.Failed:
		return "✗"
	case review.Held:
		return "!"
	case review.Cancelled:
		return "-"
	}
	return "·"
}

// statePath writes a state path for the screen, in short words where
// columns are few.
func statePath(path string, short bool) string {
	if !short {
		return strings.ReplaceAll(path, string(ledger.StateAwaitingApproval), "awaiting")
	}
	words := map[string]string{"drafting": "draft", string(ledger.StateAwaitingApproval): "await", "approved": "appr",
		"executing": "exec"}
	parts := strings.Split(path, " › ")
	for i, p := range parts {
		st, _, _ := strings.Cut(p, ":") // the hold's cause is in the detail, not here
		if w, ok := words[st]; ok {
			st = w
		}
		parts[i] = st
	}
	return strings.Join(parts, "›")
}

package tui

import (
	"fmt"
	"strings"

	"github.com/charmbracelet/x/ansi"

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
	switch {
	case rv.tab == tabTimeline && rv.spans:
		body = rv.spansView()
	case rv.tab == tabTimeline:
		body = rv.timelineView()
	case rv.tab == tabRates:
		body = rv.ratesView()
	default:
		body = rv.stopView()
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

func (rv *Review) timelineView() []string {
	lines := []string{rv.filterLine()}
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
	if len(rv.sel) == 0 {
		return append(lines, rv.th.Dim.Render("No history line matches the filters (c clears them)."))
	}
	end := min(rv.pos.top+rv.pos.rows, len(rv.sel))
	labels := rv.pageLabels(rv.pos.top, end)
	for p := rv.pos.top; p < end; p++ {
		lines = append(lines, rv.timelineRow(p, labels[p-rv.pos.top], c))
	}
	for len(lines) < rv.pos.rows+2 {
		lines = append(lines, "")
	}
	return append(lines, rv.selectedLines()...)
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
func (rv *Review) pageLabels(from, to int) []string {
	h := rv.h
	var keys, tasks []string
	for p := from; p < to; p++ {
		if ev := h.Events[rv.sel[p]]; ev.Action != 0 {
			keys, tasks = append(keys, h.Key(ev.Action)), append(tasks, h.Tasks[ev.Task])
		}
	}
	short := keyLabels(keys, tasks)
	out := make([]string, 0, to-from)
	k := 0
	for p := from; p < to; p++ {
		ev := h.Events[rv.sel[p]]
		switch {
		case ev.Action != 0:
			out = append(out, short[k])
			k++
		case h.Tasks[ev.Task] != "":
			out = append(out, "task "+h.Tasks[ev.Task])
		default:
			out = append(out, "")
		}
	}
	return out
}

func (rv *Review) timelineRow(p int, label string, c tlCols) string {
	i := int(rv.sel[p])
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
	row += fmt.Sprintf("%-*s %-*s", c.actor, abbrev(h.Actors[ev.Actor], c.actor), c.action, abbrev(label, c.action))
	if c.msg > 0 {
		row += " " + ansi.Truncate(rv.text[ev.ID].Message, c.msg, ellipsis)
	}
	row = fitLine(row, rv.width)
	if p == rv.pos.cursor {
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
func (rv *Review) filterLine() string {
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
	pos := fmt.Sprintf("%d of %d lines", len(rv.sel), len(rv.h.Events))
	switch {
	case rv.spans:
		pos = fmt.Sprintf("%d actions in %d of %d lines", len(rv.spanList), len(rv.sel), len(rv.h.Events))
	case len(rv.sel) > 0:
		pos = fmt.Sprintf("line %d of %d (%d in all)", rv.pos.cursor+1, len(rv.sel), len(rv.h.Events))
	}
	return rv.th.Dim.Render(fitLine(strings.Join(parts, " · ")+" · "+pos, rv.width))
}

// selectedLines is the selected line's sentence and reason, wrapped.
func (rv *Review) selectedLines() []string {
	out := []string{rv.th.Dim.Render(strings.Repeat("─", rv.width))}
	if len(rv.sel) == 0 {
		return out
	}
	ev := rv.h.Events[rv.sel[rv.pos.cursor]]
	e, ok := rv.text[ev.ID]
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

// sparkBlocks draw a count relative to the largest in its row.
var sparkBlocks = []rune(" ▁▂▃▄▅▆▇█")

func sparkline(vals []int, w int) string {
	if len(vals) > w {
		vals = vals[len(vals)-w:]
	}
	peak := 0
	for _, v := range vals {
		peak = max(peak, v)
	}
	var b strings.Builder
	for _, v := range vals {
		i := 0
		if peak > 0 && v > 0 {
			i = max(1, v*(len(sparkBlocks)-1)/peak)
		}
		b.WriteRune(sparkBlocks[i])
	}
	return b.String()
}

func bucketLabel(b review.RateBucket) string {
	if b.Width < 24*60*60*1e9 {
		return b.Start.Format("2006-01-02 15:00")
	}
	return b.Start.Format("2006-01-02")
}

// sparkMeasures are the measures drawn as sparklines above the buckets.
var sparkMeasures = []string{"sent", "denied", "duplicate blocks", "unknown", "holds", "manual overrides", "late evidence"}

func (rv *Review) ratesView() []string {
	width := "per day"
	if rv.hourly {
		width = "per hour"
	}
	var total review.Measures
	for _, b := range rv.rates {
		total = addMeasures(total, b.M)
	}
	buckets := fmt.Sprintf("%d buckets", len(rv.rates))
	if len(rv.rates) == 1 {
		buckets = "1 bucket"
	}
	lines := []string{rv.th.Dim.Render(fitLine(fmt.Sprintf("%s · %s · denial rate %.1f%% over the %s", width, buckets,
		total.DenialRate(), windowOrAll(rv.filter)), rv.width))}
	sparkW := max(rv.width-26, 4)
	for _, name := range sparkMeasures {
		m := measureNamed(name)
		vals := make([]int, len(rv.rates))
		for i, b := range rv.rates {
			vals[i] = m.Get(b.M)
		}
		lines = append(lines, fitLine(fmt.Sprintf("%-17s %5d %s", name, m.Get(total), sparkline(vals, sparkW)), rv.width))
	}
	labelW := 10
	if rv.hourly {
		labelW = 16
	}
	// The bar takes what the label and the counts leave.
	barW := min(max(rv.width-labelW-4-6-6*4-10, 0), 40)
	lines = append(lines, "", rv.th.Header.Render(fitLine(fmt.Sprintf("%-*s %4s %-*s %6s %4s %4s %4s %4s %4s %4s", labelW, "bucket", "sent",
		barW, "", "denied", "dup", "own", "unk", "hold", "ovr", "late"), rv.width)))
	peak := 0
	for _, b := range rv.rates {
		peak = max(peak, b.M.Sent)
	}
	end := min(rv.rpos.top+rv.rpos.rows, len(rv.rates))
	for p := rv.rpos.top; p < end; p++ {
		b := rv.rates[p]
		bar := ""
		if peak > 0 {
			bar = strings.Repeat("█", b.M.Sent*barW/peak)
		}
		denied := fmt.Sprintf("%d", b.M.Denied)
		if b.M.Denied > 0 {
			denied = fmt.Sprintf("%d/%.0f%%", b.M.Denied, b.M.DenialRate())
		}
		row := fitLine(fmt.Sprintf("%-*s %4d %-*s %6s %4d %4d %4d %4d %4d %4d", labelW, bucketLabel(b), b.M.Sent, barW, bar, denied,
			b.M.DuplicateBlocks, b.M.OwnershipConflicts, b.M.Unknown, b.M.Holds, b.M.ManualOverrides, b.M.LateEvidence), rv.width)
		if p == rv.rpos.cursor {
			row = rv.th.Selected.Render(row)
		}
		lines = append(lines, row)
	}
	return lines
}

func windowOrAll(f review.Filter) string {
	if w := windowText(f); w != "" {
		return "window " + w
	}
	return "whole history"
}

func measureNamed(name string) review.Measure {
	for _, m := range review.MeasureList {
		if m.Name == name {
			return m
		}
	}
	return review.MeasureList[0]
}

func addMeasures(a, b review.Measures) review.Measures {
	for _, m := range []struct{ dst, src *int }{{&a.Proposed, &b.Proposed}, {&a.Attempts, &b.Attempts}, {&a.Sent, &b.Sent},
		{&a.Denied, &b.Denied}, {&a.DuplicateBlocks, &b.DuplicateBlocks}, {&a.OwnershipConflicts, &b.OwnershipConflicts},
		{&a.Unknown, &b.Unknown}, {&a.Holds, &b.Holds}, {&a.ManualOverrides, &b.ManualOverrides}, {&a.Failed, &b.Failed},
		{&a.StaleApprovals, &b.StaleApprovals}, {&a.Stops, &b.Stops}, {&a.LateEvidence, &b.LateEvidence}} {
		*m.dst += *m.src
	}
	return a
}

func (rv *Review) stopView() []string {
	r := rv.report
	if r == nil {
		return []string{rv.th.Dim.Render("Folding the history up to the stop…")}
	}
	var head string
	if s := r.Stop; s != nil {
		head = fmt.Sprintf("Stop %d of %d at %s by %s: %s", s.Number, s.Of, s.At, s.Actor, s.Reason)
		if s.Resumed != nil {
			head += fmt.Sprintf(" · resumed %s by %s", s.Resumed.At, s.Resumed.Actor)
		} else {
			head += " · still stopped"
		}
	} else {
		head = "No stop in the history: the state at its end, " + r.Moment
	}
	var counts []string
	for _, c := range r.Counts {
		counts = append(counts, fmt.Sprintf("%s %d", c.Title, c.N))
	}
	lines := []string{rv.th.Warn.Render(fitLine(head, rv.width))}
	// The counts answer the first question after a stop: they wrap rather
	// than lose a bucket at 80 columns.
	lines = append(lines, joinFitting(counts, " · ", rv.width)...)
	end := min(rv.spos.top+rv.spos.rows, len(rv.stopLines))
	for p := rv.spos.top; p < end; p++ {
		l := fitLine(rv.stopLines[p], rv.width)
		if p == rv.spos.cursor {
			l = rv.th.Selected.Render(l)
		} else {
			l = rv.styled(rv.stopStyles[p], l)
		}
		lines = append(lines, l)
	}
	return lines
}

// stopBody lists each bucket's actions: then and now on one line, what
// happened after and whether the approval still rests on current values on
// the next.
//
// The lines stay plain (with a style to draw them in) and are styled when
// shown: a stop with 100,000 actions has 200,000 of them.
func stopBody(r *review.Report) ([]string, []string, []lineStyle) {
	var out, keys []string
	var styles []lineStyle
	for k, b := range r.Buckets {
		if len(b.Actions) == 0 {
			continue
		}
		out = append(out, fmt.Sprintf("%s: %d", r.Counts[k].Title, len(b.Actions)))
		keys, styles = append(keys, ""), append(styles, styleHeader)
		for _, a := range b.Actions {
			then := stateCode(a.State)
			if a.Inferred {
				then += "*"
			}
			line, style := fmt.Sprintf("  %s  %s → now %s", keyLabel(a.Key, a.Task), then, stateCode(a.Now)), stylePlain
			if a.ArrivedTwice {
				line, style = line+" · ARRIVED TWICE", styleBad
			}
			out = append(out, line)
			after := "nothing after"
			if len(a.After) > 0 {
				after = "after: " + strings.Join(a.After, ", ")
			}
			detail := fmt.Sprintf("    %s · tried after: %d", after, a.SendsTried)
			if a.Material != nil {
				detail += " · material: " + materialWords(a.Material)
			}
			out = append(out, detail)
			keys, styles = append(keys, a.Key, a.Key), append(styles, style, styleDim)
		}
	}
	if r.Inferred.Lines > 0 {
		out = append(out, fmt.Sprintf("* inferred from %d lines written before lines recorded their state", r.Inferred.Lines))
		keys, styles = append(keys, ""), append(styles, styleDim)
	}
	return out, keys, styles
}

// lineStyle is how a prepared line is drawn.
type lineStyle uint8

const (
	stylePlain lineStyle = iota
	styleHeader
	styleDim
	styleBad
)

func (rv *Review) styled(st lineStyle, s string) string {
	switch st {
	case styleHeader:
		return rv.th.Header.Render(s)
	case styleBad:
		return rv.th.Bad.Render(s)
	case styleDim:
		return rv.th.Dim.Render(s)
	}
	return s
}

func materialWords(m *review.Material) string {
	switch m.Status {
	case "same":
		return "same as latest read"
	case "not_reread":
		return "not re-read since"
	case "no_approval":
		return "no approval"
	case "no_fields":
		return "no fields"
	case "unreadable":
		return "snapshot unreadable"
	}
	var parts []string
	for _, c := range m.Changed {
		parts = append(parts, fmt.Sprintf("%s %s→%s", c.Field, c.Approved, c.Latest))
	}
	return "CHANGED " + strings.Join(parts, ", ")
}

// joinFitting joins parts with sep into as many lines of width w as they
// need, never splitting a part.
func joinFitting(parts []string, sep string, w int) []string {
	var out []string
	cur := ""
	for _, p := range parts {
		switch {
		case cur == "":
			cur = p
		case ansi.StringWidth(cur+sep+p) <= w:
			cur += sep + p
		default:
			out = append(out, cur)
			cur = p
		}
	}
	return append(out, cur)
}

// spansView is the timeline one action per row: when its selected lines
// begin (and, where there is room, end), how many there are, and the
// states its history went through, marked by how it ended.
func (rv *Review) spansView() []string {
	lines := []string{rv.filterLine()}
	h := rv.h
	wide := rv.width >= 120
	labelW := 22
	head := fmt.Sprintf("  %-*s %5s %-*s %s", tlTimeW, "from", "lines", labelW, "action", "states")
	if wide {
		labelW = 40
		head = fmt.Sprintf("  %-*s %-*s %5s %-*s %s", tlTimeW, "from", tlTimeW, "to", "lines", labelW, "action", "states")
	}
	lines = append(lines, rv.th.Header.Render(fitLine(head, rv.width)))
	if len(rv.spanList) == 0 {
		return append(lines, rv.th.Dim.Render("No action has a line the filters select (c clears them)."))
	}
	end := min(rv.spanPos.top+rv.spanPos.rows, len(rv.spanList))
	var keys, tasks []string
	for _, sp := range rv.spanList[rv.spanPos.top:end] {
		keys = append(keys, h.Key(sp.Action))
		tasks = append(tasks, h.Facts.Actions[h.Key(sp.Action)].TaskID)
	}
	labels := keyLabels(keys, tasks)
	for p := rv.spanPos.top; p < end; p++ {
		sp := rv.spanList[p]
		from := h.Events[sp.First].Time().Format("01-02 15:04:05")
		label := abbrev(labels[p-rv.spanPos.top], labelW)
		var row string
		if wide {
			row = fmt.Sprintf("%s %-*s %-*s %5d %-*s %s", spanMark(h, sp.Action), tlTimeW, from, tlTimeW,
				h.Events[sp.Last].Time().Format("01-02 15:04:05"), sp.Lines, labelW, label, statePath(h.StatePath(sp.Action), false))
		} else {
			row = fmt.Sprintf("%s %-*s %5d %-*s %s", spanMark(h, sp.Action), tlTimeW, from, sp.Lines, labelW, label,
				statePath(h.StatePath(sp.Action), true))
		}
		row = fitLine(row, rv.width)
		if p == rv.spanPos.cursor {
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

package tui

import (
	"fmt"
	"strings"

	"github.com/charmbracelet/x/ansi"

	"gatehouse/ledger"
	"gatehouse/scenarios"
)

// View implements Screen.
func (r *Rehearsal) View() string {
	w := r.width
	top := r.headLines(w)
	top = append(top, para("", r.countsBar(), w)...)
	top = append(top, r.audienceLines(w, audienceSampleRows(r.height))...)
	exp := r.verdictLines(w, max(r.height/4, 3))
	rest := r.height - len(top) - len(exp)
	table := r.columns(w, max(rest/2, 3))
	hist := r.historyLines(w, max(rest-len(table), 2))
	lines := append(top, table...)
	lines = append(lines, hist...)
	return strings.Join(append(lines, exp...), "\n")
}

// headLines say where the run is: the step that ran, how it went and what
// comes next.
func (r *Rehearsal) headLines(w int) []string {
	state := "paused"
	switch {
	case r.report != nil && r.report.Passed:
		state = r.th.Good.Render("finished: PASSED")
	case r.report != nil:
		state = r.th.Bad.Render(fmt.Sprintf("finished: FAILED (%d)", r.report.Failed()))
	case r.playing:
		state = fmt.Sprintf("playing, %s per step", speeds[r.speed])
	}
	lines := []string{r.th.Header.Render(fmt.Sprintf("step %d of %d", r.snap.Step, r.snap.Steps)) + " · " + state}
	if r.last != nil {
		res := r.last.Class
		if r.last.Detail != "" {
			res += ": " + r.last.Detail
		}
		lines = append(lines, para(fmt.Sprintf("did %d: ", r.last.Index), r.last.Label+" → "+res, w)...)
	}
	if r.snap.Step < len(r.sc.Steps) {
		lines = append(lines, para(r.th.Dim.Render("next: "), describeStep(r.sc.Steps[r.snap.Step]), w)...)
	}
	return lines
}

// countsBar keeps the figures apart, as the design demands.
func (r *Rehearsal) countsBar() string {
	c := r.snap.Counts
	return (fmt.Sprintf("intended %d · attempts %d · confirmed %d · arrived %d · denials %d · duplicate blocks %d · holds %d · conflicts %d · unknown %d",
		c.Intended, c.Attempts, c.Confirmed, c.Arrived, c.Denials, c.DuplicateBlocks, c.Holds, c.Conflicts, c.Unknown))
}

var threeCols = []column{
	{"action", 6, 2}, {"state", 7, 1}, {"owner", 6, 1},
	{"#", 2, 0}, {"transport id", 6, 2}, {"outcome", 8, 1},
	{"message-id", 6, 2}, {"to", 5, 1}, {"subject", 6, 2}, {"at", 8, 0},
}

// narrowWidth is below which the transport id and recipient columns give
// way to the others; the detail (enter) still shows them.
const narrowWidth = 120

// visibleCols are the indexes of threeCols shown at width w, and where
// each group (intended, attempts, arrived) starts among them.
func visibleCols(w int) (keep, groups []int) {
	if w < narrowWidth {
		return []int{0, 1, 2, 3, 5, 6, 8, 9}, []int{0, 3, 5}
	}
	return []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, []int{0, 3, 6}
}

func project(keep []int, cols []column, rows []row) ([]column, []row) {
	pc := make([]column, len(keep))
	for i, k := range keep {
		pc[i] = cols[k]
	}
	pr := make([]row, len(rows))
	for j, r := range rows {
		cells := make([]string, len(keep))
		for i, k := range keep {
			cells[i] = r.cells[k]
		}
		pr[j] = row{cells: cells, mark: r.mark}
	}
	return pc, pr
}

// columns draws intended actions | attempts | arrived messages joined by
// action key, one block of lines per key.
func (r *Rehearsal) columns(w, h int) []string {
	rows, owner := threeRows(r.snap.Rows)
	sel := -1
	if r.pos.total > 0 {
		sel = owner[0]
		for i, o := range owner {
			if o == r.pos.cursor {
				sel = i
				break
			}
		}
	}
	keep, groups := visibleCols(w)
	cols, rows := project(keep, threeCols, rows)
	colW := widths(cols, rows, w)
	// Group line, column header and a footer leave h-3 lines for rows;
	// scroll so the selected line stays on screen.
	var footer string
	if avail := max(h-3, 1); len(rows) > avail {
		start := min(max(sel-avail/2, 0), len(rows)-avail)
		footer = r.th.Dim.Render(fmt.Sprintf("lines %d–%d of %d (%d keys); ↑/↓ select, enter opens",
			start+1, start+avail, len(rows), len(r.snap.Rows)))
		rows, sel = rows[start:start+avail], sel-start
	}
	table := renderTableIn(r.th, cols, rows, sel, colW)
	group := groupHeader(r.th, colW, groups, []string{"intended actions", "attempts", "arrived messages"})
	out := append([]string{group}, table...)
	if footer != "" {
		out = append(out, footer)
	}
	return out
}

// threeRows expands each key into as many lines as it has attempts or
// arrivals; owner maps each line back to its key's row.
func threeRows(keys []scenarios.Row) (rows []row, owner []int) {
	for i, k := range keys {
		n := max(len(k.Attempts), len(k.Arrivals), 1)
		m, note := rowMark(k)
		for j := range n {
			cells := make([]string, len(threeCols))
			if j == 0 {
				cells[0], cells[1], cells[2] = orText(k.Name, k.Key), orText(k.State, "(none)"), k.Owner
			}
			if j < len(k.Attempts) {
				a := k.Attempts[j]
				cells[3], cells[4], cells[5] = fmt.Sprint(a.Number), a.TransportID, a.Outcome
			}
			if j < len(k.Arrivals) {
				a := k.Arrivals[j]
				cells[6], cells[7], cells[8], cells[9] = a.MessageID, a.To, a.Subject, a.At.Format(clockFormat)
			} else if j == 0 && note != "" {
				cells[6] = note
			}
			rows = append(rows, row{cells: cells, mark: m})
			owner = append(owner, i)
		}
	}
	return rows, owner
}

// rowMark highlights a duplicate (two arrivals for one action), a missing
// send (the ledger says sent, nothing arrived) and an arrival nobody
// intended.
func rowMark(k scenarios.Row) (mark, string) {
	switch {
	case len(k.Arrivals) > 1:
		return markBad, ""
	case k.State == "":
		return markBad, ""
	case len(k.Arrivals) == 0 && k.State == "sent":
		return markBad, "MISSING: the ledger says sent, nothing arrived"
	case len(k.Arrivals) == 1:
		return markGood, ""
	}
	return markNone, ""
}

// groupHeader labels groups of columns starting at the given indexes.
func groupHeader(th Theme, ws, starts []int, names []string) string {
	var b strings.Builder
	for g, start := range starts {
		end := len(ws)
		if g+1 < len(starts) {
			end = starts[g+1]
		}
		span := -colGap
		for _, x := range ws[start:end] {
			span += x + colGap
		}
		if g > 0 {
			b.WriteString(strings.Repeat(" ", colGap))
		}
		b.WriteString(ansi.Truncate("── "+names[g]+" "+strings.Repeat("─", span), span, ""))
	}
	return th.Dim.Render(b.String())
}

// historyLines shows the newest whole sentences of the history that fit
// in h lines.
func (r *Rehearsal) historyLines(w, h int) []string {
	var lines []string
	n := 0
	for i := len(r.snap.History) - 1; i >= 0; i-- {
		s := para("  ", r.snap.History[i], w)
		if len(lines)+len(s) > h-1 {
			break
		}
		lines, n = append(s, lines...), n+1
	}
	title := fmt.Sprintf("History (newest %d of %d)", n, len(r.snap.History))
	return append([]string{r.th.Header.Render(title)}, lines...)
}

// verdictLines show the expectations decided so far in at most h lines,
// failures first, because those are what a rehearsal is for.
func (r *Rehearsal) verdictLines(w, h int) []string {
	passed := 0
	var fails, passes []string
	for _, v := range r.snap.Verdicts {
		if v.Pass {
			passed++
			passes = append(passes, r.th.Good.Render(fitLine("  ✓ "+v.Name, w)))
			continue
		}
		fails = append(fails, r.th.Bad.Render(fitLine("  ✗ "+v.Message(), w)))
	}
	head := fmt.Sprintf("Expectations: %d passed, %d failed", passed, len(fails))
	out := append([]string{r.th.Header.Render(head)}, fails...)
	out = append(out, passes...)
	if len(out) > h {
		out = append(out[:h-1], r.th.Dim.Render(fmt.Sprintf("  … %d more", len(out)-h+1)))
	}
	return out
}

// audienceLines summarise each audience release: the counts in the order
// they add up, then (when h > 0) at most h sample rows across statuses and
// lifecycle states.
func (r *Rehearsal) audienceLines(w, h int) []string {
	var out []string
	for _, a := range r.snap.Audiences {
		s := a.Summary
		out = append(out, para(r.th.Header.Render("Audience "+s.ReleaseID+": "), fmt.Sprintf(
			"%d rows = %d errors + %d unmatched + %d duplicates + %d resolved = %d excluded + %d removed + %d eligible · "+
				"attempted %d · confirmed %d · arrived %d",
			s.SourceRows, s.ErrorRows, s.Unmatched, s.Duplicates, s.Resolved,
			s.Excluded, s.Removed, s.Eligible, s.Attempted, s.Confirmed, s.Arrived), w)...)
		for i, row := range a.Samples {
			if h <= 0 {
				break // a short screen keeps the counts only; the detail has the rows
			}
			if i == h {
				out = append(out, r.th.Dim.Render(fmt.Sprintf("  … %d more sample rows", len(a.Samples)-h)))
				break
			}
			out = append(out, fitLine(fmt.Sprintf("  line %-3d %-18s %s", row.Line, orText(row.CustomerID, row.Identity), audienceFate(row)), w))
		}
	}
	return out
}

// audienceFate says what became of a row: its status, why, and for an
// eligible recipient how far its notice got.
func audienceFate(row ledger.AudienceRow) string {
	switch {
	case row.Status == ledger.RowEligible && row.State != "":
		return "eligible → " + string(row.State)
	case row.Status == ledger.RowEligible:
		return "eligible, not sent yet"
	case row.Reason != "":
		return row.Status + ": " + row.Reason
	}
	return row.Status
}

func orText(s, alt string) string {
	if s == "" {
		return alt
	}
	return s
}

// audienceSampleRows is how many sample audience rows fit: none on a short
// screen, where the table and history need the room.
func audienceSampleRows(height int) int {
	if height < 30 {
		return 0
	}
	return height / 5
}

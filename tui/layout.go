package tui

import (
	"strings"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"
	"charm.land/lipgloss/v2/table"
	"github.com/charmbracelet/x/ansi"
)

// ellipsis marks text cut to fit, so nothing is cut mid-word unannounced.
const ellipsis = "…"

// fitLine cuts s to width w (with an ellipsis) and pads it to exactly w.
func fitLine(s string, w int) string {
	if w <= 0 {
		return ""
	}
	if ansi.StringWidth(s) > w {
		s = ansi.Truncate(s, w, ellipsis)
	}
	if pad := w - ansi.StringWidth(s); pad > 0 {
		s += strings.Repeat(" ", pad)
	}
	return s
}

// fitBlock makes s exactly w columns by h lines; when lines are cut off
// at the bottom, the last line says so.
func fitBlock(s string, w, h int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > h {
		lines = lines[:h]
		lines[h-1] = ellipsis
	}
	for len(lines) < h {
		lines = append(lines, "")
	}
	for i, l := range lines {
		lines[i] = fitLine(l, w)
	}
	return strings.Join(lines, "\n")
}

// mark highlights a row: why a reader should look at it.
type mark int

const (
	markNone mark = iota
	markGood
	markWarn
	markBad
)

func (t Theme) mark(m mark) lipgloss.Style {
	switch m {
	case markGood:
		return t.Good
	case markWarn:
		return t.Warn
	case markBad:
		return t.Bad
	}
	return lipgloss.NewStyle()
}

// column is one table column: its minimum width and its share of the room
// left over.
type column struct {
	title  string
	min    int
	weight int
}

// row is one table row of plain cells.
type row struct {
	cells []string
	mark  mark
}

const colGap = 2

// widths shares width among the columns. Each column wants its natural
// width (its widest cell); room left over goes to the weighted columns by
// weight, and when there is too little the weighted columns give up width
// by weight, down to their minimum. Only if that is not enough are all
// columns scaled.
func widths(cols []column, rows []row, width int) []int {
	avail := width - colGap*(len(cols)-1)
	out := naturalWidths(cols, rows)
	total, slack, sumWeight := 0, 0, 0
	for i, c := range cols {
		total += out[i]
		sumWeight += c.weight
		slack += max(out[i]-c.min, 0) * c.weight
	}
	if total <= avail {
		return spread(cols, out, avail-total, sumWeight)
	}
	over := total - avail
	if slack == 0 {
		return scaledMins(cols, avail)
	}
	// Each weighted column gives in proportion to its weight and to how far
	// it is above its minimum.
	for i, c := range cols {
		give := max(out[i]-c.min, 0)
		share := give * c.weight
		out[i] -= min((over*share+slack-1)/slack, give)
	}
	if sum(out) > avail {
		return scaledMins(cols, avail)
	}
	return out
}

func sum(xs []int) int {
	n := 0
	for _, x := range xs {
		n += x
	}
	return n
}

func naturalWidths(cols []column, rows []row) []int {
	out := make([]int, len(cols))
	for i, c := range cols {
		out[i] = ansi.StringWidth(c.title)
	}
	for _, r := range rows {
		for i := range min(len(r.cells), len(cols)) {
			out[i] = max(out[i], ansi.StringWidth(r.cells[i]))
		}
	}
	return out
}

// spread gives extra columns of room to the weighted columns.
func spread(cols []column, ws []int, extra, sumWeight int) []int {
	if sumWeight == 0 {
		return ws
	}
	for i, c := range cols {
		ws[i] += extra * c.weight / sumWeight
	}
	return ws
}

func scaledMins(cols []column, avail int) []int {
	sumMin := 0
	for _, c := range cols {
		sumMin += c.min
	}
	out := make([]int, len(cols))
	for i, c := range cols {
		out[i] = max(c.min*avail/max(sumMin, 1), 1)
	}
	return out
}

// renderTable draws a header and rows, each cell cut with an ellipsis to
// its column; the row at index selected (-1: none) is highlighted.
func renderTable(th Theme, cols []column, rows []row, selected, width int) []string {
	return renderTableIn(th, cols, rows, selected, widths(cols, rows, width))
}

// renderTableIn is renderTable with the column widths given, so a window of
// rows keeps the widths of the whole table while it scrolls. It draws each
// row as one styled line: the inspector redraws its page on every change,
// and this costs a sixth of lipgloss's table (BenchmarkInspectorRender).
func renderTableIn(th Theme, cols []column, rows []row, selected int, ws []int) []string {
	titles := make([]string, len(cols))
	for i, c := range cols {
		titles[i] = c.title
	}
	out := make([]string, 0, len(rows)+1)
	out = append(out, th.Header.Render(joinCells(titles, ws)))
	for i, r := range rows {
		style := th.mark(r.mark)
		if i == selected {
			style = th.Selected
		}
		out = append(out, style.Render(joinCells(r.cells, ws)))
	}
	return out
}

func joinCells(cells []string, ws []int) string {
	var b strings.Builder
	for i, w := range ws {
		if i > 0 {
			b.WriteString(strings.Repeat(" ", colGap))
		}
		c := ""
		if i < len(cells) {
			c = cells[i]
		}
		b.WriteString(fitLine(c, w))
	}
	return b.String()
}

// renderLipglossTable draws what renderTableIn draws with lipgloss's
// table, borderless, each column at its width plus the gap. The rehearsal's
// three columns, redrawn once a step, use it.
func renderLipglossTable(th Theme, cols []column, rows []row, selected int, ws []int) []string {
	titles := make([]string, len(cols))
	for i, c := range cols {
		titles[i] = c.title
	}
	cells := make([][]string, len(rows))
	for i, r := range rows {
		cells[i] = make([]string, len(cols))
		copy(cells[i], r.cells)
	}
	t := table.New().Wrap(false).
		BorderTop(false).BorderBottom(false).BorderLeft(false).BorderRight(false).
		BorderHeader(false).BorderColumn(false).
		Headers(titles...).Rows(cells...).
		StyleFunc(func(r, c int) lipgloss.Style {
			st := th.Header
			switch {
			case r == table.HeaderRow:
			case r == selected:
				st = th.Selected
			default:
				st = th.mark(rows[r].mark)
			}
			if c == len(ws)-1 {
				return st.Width(max(ws[c], 1))
			}
			return st.Width(max(ws[c], 1) + colGap).PaddingRight(colGap)
		})
	return strings.Split(t.String(), "\n")
}

// listPos is a cursor over a list the screen does not hold whole: the
// number of rows that exist, the selected one, the first visible one and
// how many fit on screen. Screens load only the visible window.
type listPos struct {
	total, cursor, top, rows int
}

// setTotal records how many rows exist and keeps the cursor inside them.
func (p *listPos) setTotal(n int) {
	p.total = n
	p.move(0)
}

// setRows records how many rows fit on screen.
func (p *listPos) setRows(n int) {
	p.rows = max(n, 1)
	p.move(0)
}

// move shifts the cursor by d rows and scrolls so it stays visible.
func (p *listPos) move(d int) {
	p.cursor = min(max(p.cursor+d, 0), max(p.total-1, 0))
	if p.cursor < p.top {
		p.top = p.cursor
	}
	if p.cursor >= p.top+p.rows {
		p.top = p.cursor - p.rows + 1
	}
	p.top = max(min(p.top, p.total-p.rows), 0)
}

// onKey moves for the navigation keys and reports whether it did.
func (p *listPos) onKey(msg tea.KeyPressMsg) bool {
	switch {
	case key.Matches(msg, Keys.Up):
		p.move(-1)
	case key.Matches(msg, Keys.Down):
		p.move(1)
	case key.Matches(msg, Keys.PageUp):
		p.move(-p.rows)
	case key.Matches(msg, Keys.PageDown):
		p.move(p.rows)
	case key.Matches(msg, Keys.Top):
		p.move(-p.total)
	case key.Matches(msg, Keys.Bottom):
		p.move(p.total)
	default:
		return false
	}
	return true
}

// selected is the cursor's index within the visible window.
func (p *listPos) selected() int { return p.cursor - p.top }

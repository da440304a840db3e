package tui

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"gatehouse/scenarios"
)

// pane is what the movement keys of the rehearsal move: the three
// columns, the expectations or the history. tab moves between them; the
// pane in focus gets the room it needs to be read.
type pane int

const (
	paneColumns pane = iota
	paneExpect
	paneHistory
	paneCount
)

var paneNames = [paneCount]string{"columns", "expectations", "history"}

// The expectations pane is drawn by the table helper the inspector uses,
// over a listPos: bubbles' table keeps a scroll offset that does not follow
// its height, and this pane's height changes with the focus.
var expectCols = []column{{" ", 1, 0}, {"expectation", 10, 1}, {"expected", 8, 0}, {"actual", 8, 0}}

// expectRows are the verdicts as rows, failures first: those are what a
// rehearsal is for.
func expectRows(vs []scenarios.Verdict) []scenarios.Verdict {
	var fails, passes []scenarios.Verdict
	for _, v := range vs {
		if v.Pass {
			passes = append(passes, v)
		} else {
			fails = append(fails, v)
		}
	}
	return append(fails, passes...)
}

// expectWidths share the width: the expected and actual values get what
// they need up to a fifth of the line each, the expectation's name the
// rest.
func expectWidths(rows []row, w int) []int {
	ws := naturalWidths(expectCols, rows)
	ws[2], ws[3] = min(ws[2], max(w/5, 8)), min(ws[3], max(w/5, 8))
	ws[1] = max(w-colGap*3-1-ws[2]-ws[3], 10)
	return ws
}

// expectLines are the expectations pane in h lines: its title, the table
// (failures first) and, in focus, the selected expectation whole, since
// the cells may cut it.
func (r *Rehearsal) expectLines(w, h int) []string {
	vs := expectRows(r.snap.Verdicts)
	passed := 0
	rows := make([]row, len(vs))
	for i, v := range vs {
		mark, m := "✗", markBad
		if v.Pass {
			mark, m = "✓", markGood
			passed++
		}
		rows[i] = row{cells: []string{mark, v.Name, orDash(v.Expected), orDash(v.Actual)}, mark: m}
	}
	title := fmt.Sprintf("Expectations: %d passed, %d failed", passed, len(vs)-passed)
	if len(vs) == 0 {
		return []string{r.th.Header.Render(title)}
	}
	focused := r.focus == paneExpect
	var sel []string
	if focused && r.expPos.cursor < len(vs) {
		v := vs[r.expPos.cursor]
		sel = para("  ", fmt.Sprintf("%s:%d:%d · %s", r.sc.File, v.Pos.Line, v.Pos.Col, v.Message()), w)
		sel = sel[:min(len(sel), 2)]
	}
	r.expPos.setRows(max(h-2-len(sel), 1))
	r.expPos.setTotal(len(vs))
	p := r.expPos
	if focused {
		title += fmt.Sprintf(" · %d of %d", p.cursor+1, p.total)
	} else if p.total > p.rows {
		title += fmt.Sprintf(" · %d more: %s to read them", p.total-p.rows, keyOf(Keys.NextPane))
	}
	selected := -1
	if focused {
		selected = p.selected()
	}
	out := []string{r.th.Header.Render(fitLine(title, w))}
	out = append(out, renderTableIn(r.th, expectCols, rows[p.top:min(p.top+p.rows, p.total)], selected, expectWidths(rows, w))...)
	return append(out, sel...)
}

func passMark(pass bool) mark {
	if pass {
		return markGood
	}
	return markBad
}

// historyNeed is how many lines the whole history takes, wrapped at w,
// with its title.
func (r *Rehearsal) historyNeed(w int) int {
	n := 1
	for _, s := range r.snap.History {
		n += len(para("  ", s, w))
	}
	return n
}

// historyPane is the history, wrapped, in h lines: its newest lines, or in
// focus wherever it was scrolled to.
func (r *Rehearsal) historyPane(w, h int) []string {
	var lines []string
	for _, s := range r.snap.History {
		lines = append(lines, para("  ", s, w)...)
	}
	r.hist.SetWidth(w)
	r.hist.SetHeight(max(h-1, 1))
	r.hist.SetContentLines(lines)
	if r.focus != paneHistory {
		r.hist.GotoBottom()
	}
	title := fmt.Sprintf("History (%d lines)", len(r.snap.History))
	switch {
	case r.focus == paneHistory:
		title += fmt.Sprintf(" · %d%%", int(r.hist.ScrollPercent()*100))
	case len(lines) > h-1:
		title += fmt.Sprintf(" · newest below; %s to scroll", keyOf(Keys.NextPane))
	}
	out := []string{r.th.Header.Render(fitLine(title, w))}
	if len(lines) == 0 {
		return out
	}
	return append(out, strings.Split(r.hist.View(), "\n")...)
}

// paneKey moves the pane in focus; it reports whether the key was one of
// the movement keys.
func (r *Rehearsal) paneKey(msg tea.KeyPressMsg) bool {
	switch r.focus {
	case paneExpect:
		return r.expPos.onKey(msg)
	case paneHistory:
		return scrollViewport(&r.hist, msg)
	}
	if r.pos.onKey(msg) {
		r.selKey = ""
		r.follow()
		return true
	}
	return false
}

// exportedMsg is a result written to a file.
type exportedMsg struct {
	path, format string
	n            int
	err          error
}

// exportFormats are the formats a result is written in, by the file's
// extension.
var exportFormats = map[string]struct {
	name  string
	write func(w *bytes.Buffer, reps []scenarios.Report) error
}{
	".json": {"JSON", func(w *bytes.Buffer, reps []scenarios.Report) error { return scenarios.WriteJSON(w, reps) }},
	".xml":  {"JUnit XML", func(w *bytes.Buffer, reps []scenarios.Report) error { return scenarios.WriteJUnit(w, reps) }},
	".md":   {"Markdown", func(w *bytes.Buffer, reps []scenarios.Report) error { return scenarios.WriteMarkdown(w, reps) }},
}

// askExport opens the prompt for the file the result is written to; its
// extension chooses the format.
func (r *Rehearsal) askExport() tea.Cmd {
	if r.report == nil {
		return info("the rehearsal has not finished: its result can be exported when it has")
	}
	in := newInput("export to: ", ".json, .xml (JUnit) or .md")
	in.SetValue(r.sc.Name + "-result.json")
	in.CursorEnd()
	in.SetWidth(max(r.width-ansi.StringWidth(in.Prompt)-2, 10))
	r.export = &in
	return r.export.Focus()
}

func (r *Rehearsal) onExportKey(msg tea.KeyPressMsg) tea.Cmd {
	switch {
	case key.Matches(msg, Keys.Cancel):
		r.export = nil
		return nil
	case key.Matches(msg, Keys.Confirm):
		path := strings.TrimSpace(r.export.Value())
		f, ok := exportFormats[strings.ToLower(filepath.Ext(path))]
		if !ok {
			return fail(fmt.Errorf("export: name a .json, .xml (JUnit) or .md file, not %q", path))
		}
		r.export = nil
		rep := *r.report
		return r.do(func(context.Context) tea.Msg {
			var b bytes.Buffer
			if err := f.write(&b, []scenarios.Report{rep}); err != nil {
				return exportedMsg{err: fmt.Errorf("export %s: %w", path, err)}
			}
			if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
				return exportedMsg{err: fmt.Errorf("export: %w", err)}
			}
			abs, _ := filepath.Abs(path)
			return exportedMsg{path: abs, format: f.name, n: b.Len()}
		})
	}
	var cmd tea.Cmd
	*r.export, cmd = r.export.Update(msg)
	return cmd
}

func (m exportedMsg) status() tea.Cmd {
	if m.err != nil {
		return fail(m.err)
	}
	return info(fmt.Sprintf("wrote the result as %s to %s (%d bytes)", m.format, m.path, m.n))
}

package tui

import (
	"context"
	"fmt"
	"strings"

	"charm.land/bubbles/v2/help"
	"charm.land/bubbles/v2/key"
	"charm.land/bubbles/v2/textinput"
	tea "charm.land/bubbletea/v2"

	"gatehouse/ledger"
	"gatehouse/scenarios"
)

// HomeConfig configures the home screen.
type HomeConfig struct {
	Scenarios []*scenarios.Scenario // built-in and from --dir
	NewRun    NewRunFunc            // nil: scenarios.NewRun on a temporary ledger
	// NewDemo opens the takeover demo on a fresh ledger and mailbox. It
	// runs as a command, never inside Update: it opens files and starts a
	// server.
	NewDemo func(ctx context.Context) (Screen, error)
}

// Home lists the scenarios with their last verdict and opens rehearsals,
// the inspector and the takeover demo.
type Home struct {
	base
	cfg       HomeConfig
	shown     []*scenarios.Scenario
	pos       listPos
	verdicts  map[string]bool
	filtering bool
	filter    textinput.Model
	lastRun   *Rehearsal   // the inspector opens on its ledger
	runs      []*Rehearsal // every rehearsal opened, released on Close
}

// Close releases every rehearsal's ledger and mailbox.
func (h *Home) Close() {
	for _, r := range h.runs {
		r.Close()
	}
	h.runs = nil
}

// NewHome returns the home screen.
func NewHome(th Theme, cfg HomeConfig) *Home {
	h := &Home{base: newBase(th), cfg: cfg, verdicts: map[string]bool{}, filter: newInput(keyOf(Keys.Filter), "filter scenarios")}
	h.applyFilter()
	return h
}

// Title implements Screen.
func (h *Home) Title() string { return "rehearse · inspect · demonstrate" }

// Busy implements Screen.
func (h *Home) Busy() bool { return false }

// Capturing implements Screen.
func (h *Home) Capturing() bool { return h.filtering }

// Init implements Screen.
func (h *Home) Init() tea.Cmd { return nil }

// SetSize implements Screen.
func (h *Home) SetSize(w, ht int) {
	h.base.SetSize(w, ht)
	h.pos.setRows(max(ht-10, 1))
}

// Update implements Screen.
func (h *Home) Update(msg tea.Msg) (Screen, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.KeyPressMsg:
		return h, h.onKey(msg)
	case verdictMsg:
		h.verdicts[msg.name] = msg.passed
	case demoReadyMsg:
		if msg.err != nil {
			return h, fail(msg.err)
		}
		return h, push(msg.demo)
	}
	return h, nil
}

func (h *Home) onKey(msg tea.KeyPressMsg) tea.Cmd {
	if h.filtering {
		return h.onFilterKey(msg)
	}
	switch {
	case key.Matches(msg, Keys.Filter):
		h.filtering = true
		return h.filter.Focus()
	case key.Matches(msg, Keys.Back) && h.filter.Value() != "":
		h.filter.SetValue("") // esc on a filtered list shows everything again
		h.applyFilter()
		return nil
	case key.Matches(msg, Keys.Open):
		return h.openRehearsal()
	case key.Matches(msg, Keys.Demo):
		return h.openDemo()
	case key.Matches(msg, Keys.Inspect):
		return h.openInspector()
	}
	h.pos.onKey(msg)
	return nil
}

func (h *Home) onFilterKey(msg tea.KeyPressMsg) tea.Cmd {
	switch {
	case key.Matches(msg, Keys.Cancel):
		h.filter.SetValue("")
		fallthrough
	case key.Matches(msg, Keys.Apply):
		h.filtering = false
		h.filter.Blur()
		h.applyFilter()
		return nil
	}
	var cmd tea.Cmd
	h.filter, cmd = h.filter.Update(msg)
	h.applyFilter() // filter as you type
	return cmd
}

// applyFilter keeps the scenarios whose name, title or description
// contain the filter text.
// The selected scenario stays selected while it is shown.
func (h *Home) applyFilter() {
	was := h.selected()
	q := strings.ToLower(h.filter.Value())
	h.shown = h.shown[:0]
	for _, sc := range h.cfg.Scenarios {
		if strings.Contains(strings.ToLower(sc.Name+" "+sc.Title+" "+sc.Description), q) {
			h.shown = append(h.shown, sc)
		}
	}
	for i, sc := range h.shown {
		if sc == was {
			h.pos.cursor = i
		}
	}
	h.pos.setTotal(len(h.shown))
}

func (h *Home) selected() *scenarios.Scenario {
	if h.pos.cursor < len(h.shown) {
		return h.shown[h.pos.cursor]
	}
	return nil
}

func (h *Home) openRehearsal() tea.Cmd {
	sc := h.selected()
	if sc == nil {
		return nil
	}
	h.lastRun = NewRehearsal(h.th, sc, h.cfg.NewRun, h.id)
	h.runs = append(h.runs, h.lastRun)
	return push(h.lastRun)
}

// demoReadyMsg is the takeover demo, opened by a command.
type demoReadyMsg struct {
	demo Screen
	err  error
}

func (h *Home) openDemo() tea.Cmd {
	newDemo := h.cfg.NewDemo
	if newDemo == nil {
		return info("the takeover demo is not available here")
	}
	return h.do(func(ctx context.Context) tea.Msg {
		d, err := newDemo(ctx)
		return demoReadyMsg{demo: d, err: err}
	})
}

// openInspector inspects the ledger of the last rehearsal opened.
func (h *Home) openInspector() tea.Cmd {
	var l *ledger.Ledger
	if h.lastRun != nil && h.lastRun.run != nil {
		l = h.lastRun.run.Ledger()
	}
	if l == nil {
		return info("open a rehearsal first: the inspector shows its ledger")
	}
	return push(NewInspector(h.th, InspectorConfig{Ledger: l, Actor: "trainer", Source: h.lastRun.sc.Name}))
}

// KeyMap implements Screen.
func (h *Home) KeyMap() help.KeyMap {
	k := Keys
	if h.filtering {
		return helpKeys{short: []key.Binding{k.Apply, k.Cancel}}
	}
	rehearse := k.Rehearse
	short := []key.Binding{rehearse, k.Filter, k.Demo, k.Inspect, k.Up, k.Down}
	return helpKeys{short: short, full: [][]key.Binding{navKeys(), {rehearse, k.Filter, k.Demo, k.Inspect}}}
}

// A scenario's name is what a reader types (rehearse NAME), so it is never
// cut; the title gives way.
var homeCols = []column{{"scenario", 10, 0}, {"title", 10, 1}, {"verdict", 7, 0}}

// View implements Screen.
func (h *Home) View() string {
	lines := []string{h.th.Header.Render("Scenarios") + h.th.Dim.Render(" — "+keyOf(Keys.Rehearse)+" rehearses one, "+keyOf(Keys.Demo)+" shows the takeover demo"), h.filterLine()}
	end := min(h.pos.top+h.pos.rows, len(h.shown))
	rows := make([]row, 0, end-h.pos.top)
	for _, sc := range h.shown[h.pos.top:end] {
		rows = append(rows, h.scenarioRow(sc))
	}
	if len(h.shown) == 0 {
		return strings.Join(append(lines, "", h.th.Dim.Render("  no matches: "+keyOf(Keys.Back)+" shows every scenario")), "\n")
	}
	// Widths come from every scenario, so filtering never narrows a column.
	all := make([]row, len(h.cfg.Scenarios))
	for i, sc := range h.cfg.Scenarios {
		all[i] = h.scenarioRow(sc)
	}
	lines = append(lines, renderTableIn(h.th, homeCols, rows, h.pos.selected(), widths(homeCols, all, h.width))...)
	if sc := h.selected(); sc != nil {
		lines = append(lines, "")
		lines = append(lines, para("", sc.Description, h.width)...)
		// A file from someone else may start programs on this machine:
		// say which before anyone rehearses it.
		for _, c := range sc.Commands() {
			lines = append(lines, para(h.th.Bad.Render("runs: "), c, h.width)...)
		}
	}
	return strings.Join(lines, "\n")
}

func (h *Home) filterLine() string {
	if h.filtering || h.filter.Value() != "" {
		return h.filter.View()
	}
	s := plural(len(h.shown), "scenario")
	if n := len(h.shown); n > h.pos.rows {
		s += fmt.Sprintf(" · %d–%d shown", h.pos.top+1, min(h.pos.top+h.pos.rows, n))
	}
	return h.th.Dim.Render(s)
}

func (h *Home) scenarioRow(sc *scenarios.Scenario) row {
	passed, ok := h.verdicts[sc.Name]
	switch {
	case !ok:
		return row{cells: []string{sc.Name, sc.Title, "not run"}}
	case passed:
		return row{cells: []string{sc.Name, sc.Title, "passed"}, mark: markGood}
	}
	return row{cells: []string{sc.Name, sc.Title, "FAILED"}, mark: markBad}
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

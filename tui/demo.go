package tui

import (
	"context"
	"fmt"
	"strings"

	"charm.land/bubbles/v2/help"
	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"

	"gatehouse/destination"
	"gatehouse/ledger"
)

// DemoConfig configures the takeover demo.
type DemoConfig struct {
	Ledger  *ledger.Ledger          // an empty ledger the demo may write
	Dest    destination.Destination // where sends go
	Mailbox Arrivals                // what arrived there
}

// paneResult is the latest thing that happened to one participant.
type paneResult struct {
	text    string
	refused bool
}

// Demo shows an ownership takeover: the workflow's pane and two staff
// panes on one task, and a mailbox column that proves what arrived.
type Demo struct {
	base
	env   demoEnv
	box   Arrivals
	next  int // the next scripted beat
	focus int // index into demoCast
	last  map[string]paneResult
	told  string // what just happened
	state demoState
	busy  bool
	queue int // beats asked for while one was running
	form  *form
}

var demoCast = []string{demoWorkflow, demoBea, demoCarl}

// demoDoneMsg is the result of a beat or of a trainer's action.
type demoDoneMsg struct {
	actor string
	text  string
	err   error
	state demoState
	serr  error
}

// NewDemo returns the takeover demo over cfg.
func NewDemo(th Theme, cfg DemoConfig) *Demo {
	return &Demo{base: newBase(th), env: demoEnv{l: cfg.Ledger, dest: cfg.Dest}, box: cfg.Mailbox,
		last: map[string]paneResult{}, told: "Press " + keyOf(Keys.Step) + " to start the demonstration."}
}

// Title implements Screen.
func (d *Demo) Title() string { return "takeover demo" }

// Busy implements Screen.
func (d *Demo) Busy() bool { return d.busy }

// Capturing implements Screen.
func (d *Demo) Capturing() bool { return d.form != nil }

// Init implements Screen: read the (empty) mailbox.
func (d *Demo) Init() tea.Cmd { return d.act("", "", nil) }

// Update implements Screen.
func (d *Demo) Update(msg tea.Msg) (Screen, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.KeyPressMsg:
		return d, d.onKey(msg)
	case demoDoneMsg:
		return d, d.onDone(msg)
	}
	if d.form != nil {
		var cmd tea.Cmd
		d.form.input, cmd = d.form.input.Update(msg)
		return d, cmd
	}
	return d, nil
}

func (d *Demo) onKey(msg tea.KeyPressMsg) tea.Cmd {
	if d.form != nil {
		done, cmd := d.form.update(msg)
		if done {
			d.form = nil
		}
		return cmd
	}
	switch {
	case key.Matches(msg, Keys.Step) && d.busy:
		d.queue++ // one beat at a time, so the panes read in order
	case d.busy:
		return nil
	case key.Matches(msg, Keys.Focus):
		d.focus = (d.focus + 1) % len(demoCast)
	case key.Matches(msg, Keys.Step):
		return d.advance()
	case key.Matches(msg, Keys.ActView):
		return d.staffAct(func(who string) tea.Cmd {
			return d.act(who, who+" opens the task (advisory: ownership does not change).",
				func(ctx context.Context, e demoEnv) error { return e.view(ctx, who) })
		})
	case key.Matches(msg, Keys.ActTakeOver):
		return d.staffAct(d.askTakeOver)
	}
	return nil
}

// advance runs the next scripted beat.
func (d *Demo) advance() tea.Cmd {
	if d.next >= len(demoSteps) {
		return info("The demonstration is over: the mailbox column shows what arrived.")
	}
	s := demoSteps[d.next]
	d.next++
	return d.act(s.actor, s.text, s.run)
}

// staffAct applies f to the focused participant when that is a person.
func (d *Demo) staffAct(f func(who string) tea.Cmd) tea.Cmd {
	who := demoCast[d.focus]
	if who == demoWorkflow {
		return info("The workflow acts only through the script; " + keyOf(Keys.NextPane) + " to a staff pane first.")
	}
	return f(who)
}

func (d *Demo) askTakeOver(who string) tea.Cmd {
	var cmd tea.Cmd
	d.form, cmd = newForm(who+" takes over task "+demoTask+"?",
		"The previous owner is notified; its pending sends are stopped by the gate.", true,
		func(reason string) tea.Cmd {
			return d.act(who, who+" takes ownership: "+reason,
				func(ctx context.Context, e demoEnv) error { return e.takeOver(ctx, who, reason) })
		})
	return cmd
}

// act runs f for actor through the gate, then reads what every pane shows.
func (d *Demo) act(actor, text string, f func(context.Context, demoEnv) error) tea.Cmd {
	d.busy = true
	env, box := d.env, d.box
	return d.do(func(ctx context.Context) tea.Msg {
		var err error
		if f != nil {
			err = f(ctx, env)
		}
		st, serr := readDemoState(ctx, env.l, box)
		return demoDoneMsg{actor: actor, text: text, err: err, state: st, serr: serr}
	})
}

func (d *Demo) onDone(msg demoDoneMsg) tea.Cmd {
	d.busy = false
	d.state = msg.state
	if msg.text != "" {
		d.told = msg.text
	}
	if msg.actor != "" {
		d.last[msg.actor] = resultOf(msg.err)
	}
	if msg.serr != nil {
		return fail(msg.serr)
	}
	if d.queue > 0 {
		d.queue--
		return d.advance()
	}
	return nil
}

// resultOf words a gate result for a pane; a refusal is the point of the
// demonstration, so it is shown in the gate's own words.
func resultOf(err error) paneResult {
	if err != nil {
		return paneResult{text: "✗ refused: " + err.Error(), refused: true}
	}
	return paneResult{text: "✓ done"}
}

// KeyMap implements Screen.
func (d *Demo) KeyMap() help.KeyMap {
	k := Keys
	if d.form != nil {
		return helpKeys{short: []key.Binding{k.Confirm, k.Cancel}}
	}
	focus := k.NextPane
	short := []key.Binding{k.Step, k.ActTakeOver, k.ActView, focus}
	return helpKeys{short: short, full: [][]key.Binding{{k.Step, focus, k.ActView, k.ActTakeOver}}}
}

// View implements Screen.
func (d *Demo) View() string {
	w := d.width
	lines := para(d.th.Header.Render(d.stepLabel())+" ", d.told, w)
	if d.next < len(demoSteps) {
		lines = append(lines, para(d.th.Dim.Render("next: "), demoSteps[d.next].text, w)...)
	}
	if d.form != nil {
		return strings.Join(append(lines, "", d.form.view(d.th, min(w-2, 76))), "\n")
	}
	// Under the panes (two border lines each): the mailbox title, then its
	// table (a header and a line per arrival) or one line saying it is empty.
	mailH := 1
	if n := len(d.state.arrivals); n > 0 {
		mailH = n + 1
	}
	paneH := max(d.height-len(lines)-2-1-mailH, 6)
	lines = append(lines, d.panes(w, paneH), d.th.Header.Render(fmt.Sprintf("Mailbox — what actually arrived (%d)", len(d.state.arrivals))))
	if len(d.state.arrivals) == 0 {
		return strings.Join(append(lines, d.th.Dim.Render("  nothing has arrived yet")), "\n")
	}
	lines = append(lines, renderTable(d.th, arrivalCols, arrivalRows(d.state.arrivals), -1, w)...)
	return strings.Join(lines, "\n")
}

func (d *Demo) stepLabel() string {
	if d.next == 0 {
		return "Takeover demo:"
	}
	return fmt.Sprintf("Step %d of %d:", d.next, len(demoSteps))
}

// panes draws the three participants side by side.
func (d *Demo) panes(w, h int) string {
	pw := w / len(demoCast)
	boxes := make([]string, len(demoCast))
	for i, who := range demoCast {
		style := d.th.Pane
		if i == d.focus {
			style = d.th.PaneFocus
		}
		inner := max(pw-2, 4)
		boxes[i] = style.Render(fitBlock(strings.Join(d.paneLines(who, inner), "\n"), inner, h))
	}
	return lipgloss.JoinHorizontal(lipgloss.Top, boxes...)
}

func (d *Demo) paneLines(who string, w int) []string {
	st := d.state
	role := "staff"
	if who == demoWorkflow {
		role = "workflow"
	}
	owner := "owner: no"
	if st.task.Owner == who {
		owner = d.th.Good.Render("owner: yes")
	}
	lines := []string{d.th.Header.Render(who) + d.th.Dim.Render(" · "+role), owner, "looking: " + yesNo(st.viewers[who])}
	for _, a := range st.actions {
		if a.ProposedBy == who {
			lines = append(lines, d.th.mark(stateMark(a.State)).Render(a.ActionType+": "+stateWord(a.State, false)))
		}
	}
	if r, ok := d.last[who]; ok {
		m := markGood
		if r.refused {
			m = markWarn
		}
		for _, l := range para("", r.text, w) {
			lines = append(lines, d.th.mark(m).Render(l))
		}
	}
	for _, n := range st.notes[who] {
		lines = append(lines, para("✉ ", n.Message, w)...)
	}
	return lines
}

func yesNo(b bool) string {
	if b {
		return "yes (advisory)"
	}
	return "no"
}

// The message-id (without its constant domain) and the recipient are what
// prove an arrival, so they are never cut; the subject gives way.
var arrivalCols = []column{{"message-id", 12, 0}, {"to", 8, 0}, {"subject", 8, 1}, {"arrived", 8, 0}}

func arrivalRows(as []Arrival) []row {
	out := make([]row, len(as))
	for i, a := range as {
		out[i] = row{cells: []string{localPart(a.MessageID), a.To, a.Subject, a.At.Format(clockFormat)}}
		if a.Duplicate {
			out[i].mark = markBad
			out[i].cells[2] = "DUPLICATE · " + a.Subject
		}
	}
	return out
}

package tui

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"charm.land/bubbles/v2/help"
	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"

	"gatehouse/destination"
	"gatehouse/ledger"
)

// PretendClock is the clock a demo's ledger and mailbox read. The demo
// moves it a minute for each thing done, so every time on screen is on
// the story's clock, not the wall clock.
type PretendClock interface {
	Now() time.Time
	Advance(d time.Duration)
}

// DemoWorld is what one run of the demo acts on. A ledger's history is
// append-only, so a step back or a restart replays the script on a fresh
// world rather than undoing anything.
type DemoWorld struct {
	Ledger  *ledger.Ledger          // an empty ledger the demo may write
	Dest    destination.Destination // where sends go
	Mailbox Arrivals                // what arrived there
	Clock   PretendClock            // the clock Ledger and Mailbox read
	Close   func()                  // releases the world once the demo has left it
}

// DemoConfig configures the takeover demo.
type DemoConfig struct {
	// Open returns a fresh world: at the start, and for each step back and
	// restart.
	Open func(ctx context.Context) (DemoWorld, error)
}

// Demo shows an ownership takeover: the workflow's pane and two staff
// panes on one task, a mailbox that proves what arrived and the history
// in the gate's own sentences.
type Demo struct {
	base
	open  func(ctx context.Context) (DemoWorld, error)
	run   demoRun
	focus int // index into demoCast
	busy  bool
	queue int // beats asked for while one was running
	form  *form
	// hinted: the status line tells the trainer to move to a staff pane,
	// which moving there makes untrue.
	hinted bool
}

var demoCast = []string{demoWorkflow, demoBea, demoCarl}

// demoAct is one thing done in a run: the script's next step, or a
// trainer's own act for the focused staff member. A run's acts are what a
// step back replays.
type demoAct struct {
	script bool
	view   bool // a trainer's act: a view, else a takeover
	actor  string
	reason string
}

// demoRun is one world and everything done in it, with what the screen
// says about it. Commands build a new one; the model only swaps it in.
type demoRun struct {
	world DemoWorld
	acts  []demoAct
	next  int // the next scripted step
	notes map[string][]demoNote
	label string // whose act the narration is about
	told  string // what just happened
	state demoState
}

// demoDoneMsg is a run after a step, a trainer's act, a step back or a
// restart.
type demoDoneMsg struct {
	run demoRun
	err error
}

// NewDemo returns the takeover demo; its first world opens in Init.
func NewDemo(th Theme, cfg DemoConfig) *Demo {
	return &Demo{base: newBase(th), open: cfg.Open}
}

// Title implements Screen.
func (d *Demo) Title() string { return "takeover demo" }

// Busy implements Screen.
func (d *Demo) Busy() bool { return d.busy }

// Capturing implements Screen.
func (d *Demo) Capturing() bool { return d.form != nil }

// Init implements Screen: open the first world.
func (d *Demo) Init() tea.Cmd { return d.replay(nil) }

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
		if d.hinted && demoCast[d.focus] != demoWorkflow {
			d.hinted = false
			return info("")
		}
	case key.Matches(msg, Keys.Step):
		return d.advance()
	case key.Matches(msg, Keys.StepBack):
		if len(d.run.acts) == 0 {
			return info("Nothing to step back from: nothing has been done yet.")
		}
		return d.replay(d.run.acts[:len(d.run.acts)-1])
	case key.Matches(msg, Keys.Restart):
		return d.replay(nil)
	case key.Matches(msg, Keys.ActView):
		return d.staffAct(func(who string) tea.Cmd { return d.perform(demoAct{view: true, actor: who}) })
	case key.Matches(msg, Keys.ActTakeOver):
		return d.staffAct(d.askTakeOver)
	}
	return nil
}

// advance runs the next scripted step.
func (d *Demo) advance() tea.Cmd {
	if d.run.next >= len(demoSteps) {
		return info("The demonstration is over: " + keyOf(Keys.StepBack) + " steps back, " + keyOf(Keys.Restart) + " starts again.")
	}
	return d.perform(demoAct{script: true})
}

// staffAct applies f to the focused participant when that is a person.
func (d *Demo) staffAct(f func(who string) tea.Cmd) tea.Cmd {
	who := demoCast[d.focus]
	if who == demoWorkflow {
		d.hinted = true
		return info("The workflow acts only through the script; " + keyOf(Keys.NextPane) + " to a staff pane first.")
	}
	return f(who)
}

func (d *Demo) askTakeOver(who string) tea.Cmd {
	var cmd tea.Cmd
	d.form, cmd = newForm(who+" takes over task "+demoTask+"?",
		"The previous owner is notified; its pending sends are stopped by the gate.", true,
		func(reason string) tea.Cmd { return d.perform(demoAct{actor: who, reason: reason}) })
	return cmd
}

// perform does act in the current world.
func (d *Demo) perform(act demoAct) tea.Cmd {
	d.busy = true
	run := d.run
	return d.do(func(ctx context.Context) tea.Msg {
		next, err := run.perform(ctx, act)
		return demoDoneMsg{run: next, err: err}
	})
}

// replay opens a fresh world and does acts in it again, in order: a
// restart replays none, a step back all but the last.
func (d *Demo) replay(acts []demoAct) tea.Cmd {
	d.busy = true
	open := d.open
	acts = slices.Clone(acts)
	return d.do(func(ctx context.Context) tea.Msg {
		run, err := replayDemo(ctx, open, acts)
		return demoDoneMsg{run: run, err: err}
	})
}

func (d *Demo) onDone(msg demoDoneMsg) tea.Cmd {
	d.busy = false
	if msg.err != nil {
		d.queue = 0
		return fail(msg.err)
	}
	if old := d.run.world; old.Ledger != nil && old.Ledger != msg.run.world.Ledger && old.Close != nil {
		old.Close()
	}
	d.run = msg.run
	if d.queue > 0 {
		d.queue--
		return d.advance()
	}
	return nil
}

// replayDemo opens a world and does acts in it.
func replayDemo(ctx context.Context, open func(context.Context) (DemoWorld, error), acts []demoAct) (demoRun, error) {
	if open == nil {
		return demoRun{}, errors.New("demo: no world to run in")
	}
	w, err := open(ctx)
	if err != nil {
		return demoRun{}, fmt.Errorf("demo: %w", err)
	}
	// Every world is a registered ledger: the story runs under the
	// permission table, as a production ledger would.
	if err := RegisterDemoCast(ctx, w.Ledger); err != nil {
		w.Close()
		return demoRun{}, fmt.Errorf("demo: %w", err)
	}
	run := demoRun{world: w, notes: map[string][]demoNote{}, label: "Takeover demo:",
		told: "Press " + keyOf(Keys.Step) + " to start the demonstration."}
	if run.state, err = readDemoState(ctx, w.Ledger, w.Mailbox); err != nil {
		w.Close()
		return demoRun{}, err
	}
	for _, a := range acts {
		if run, err = run.perform(ctx, a); err != nil {
			w.Close()
			return demoRun{}, err
		}
	}
	return run, nil
}

func (r demoRun) env() demoEnv { return demoEnv{l: r.world.Ledger, dest: r.world.Dest} }

// perform does act a beat after the last one and reads what the screen
// shows afterwards. A refusal by the gate is part of the story, not an
// error; the error is for a ledger or mailbox that cannot be read.
func (r demoRun) perform(ctx context.Context, act demoAct) (demoRun, error) {
	out := r
	out.acts = append(slices.Clone(r.acts), act)
	out.notes = maps.Clone(r.notes)
	r.world.Clock.Advance(demoBeat)
	at := r.world.Clock.Now()
	before := r.state
	var (
		note  demoNote
		skip  string
		err   error
		actor = act.actor
		tell  func(after demoState) string
	)
	switch {
	case act.script:
		s := demoSteps[r.next]
		out.next++
		actor = s.actor
		out.label = fmt.Sprintf("Step %d of %d · %s:", out.next, len(demoSteps), at.Format(demoClock))
		note, skip, err = s.run(ctx, r.env(), before)
		tell = func(after demoState) string { return s.tell(before, after, err) }
	case act.view:
		out.label = fmt.Sprintf("By hand, as %s · %s:", capital(actor), at.Format(demoClock))
		note = demoNote{did: "opened the task", more: "a viewer: advisory, ownership does not change"}
		if err = r.env().view(ctx, actor); err != nil {
			note.did = "open refused"
		}
		tell = func(after demoState) string { return viewWords(actor, after, err) }
	default:
		out.label = fmt.Sprintf("By hand, as %s · %s:", capital(actor), at.Format(demoClock))
		note = demoNote{did: "took over", more: act.reason}
		switch {
		case before.task.Owner == actor:
			note = demoNote{did: "already the owner", more: "nothing changed"}
		default:
			if err = r.env().takeOver(ctx, actor, act.reason); err != nil {
				note.did = "takeover refused"
			}
		}
		tell = func(after demoState) string { return takeOverWords(actor, act.reason, before, err) }
	}
	if skip == "" {
		note.at = at
		if err != nil {
			note.refused, note.more = true, err.Error()
		}
		out.notes[actor] = append(slices.Clone(r.notes[actor]), note)
	}
	st, serr := readDemoState(ctx, r.world.Ledger, r.world.Mailbox)
	if serr != nil {
		return r, serr
	}
	out.state, out.told = st, tell(st)
	return out, nil
}

// viewWords narrates a trainer's view.
func viewWords(actor string, after demoState, err error) string {
	if err != nil {
		return capital(actor) + " could not open the task: " + err.Error() + "."
	}
	owner := "nobody owns it"
	switch o := after.task.Owner; o {
	case actor:
		owner = capital(actor) + " owns it already"
	case "":
	default:
		owner = who(o) + " still owns it"
	}
	return capital(actor) + " opens the task. Presence is advisory: " + owner + "."
}

// takeOverWords narrates a trainer's takeover from the owner before it.
func takeOverWords(actor, reason string, before demoState, err error) string {
	switch prev := before.task.Owner; {
	case err != nil:
		return capital(actor) + " cannot take over task " + demoTask + ": " + err.Error() + "."
	case prev == actor:
		return capital(actor) + " already owns task " + demoTask + "; the gate records nothing new."
	case prev == "":
		return capital(actor) + " takes over task " + demoTask + ", which had no owner, because: " + reason + "."
	default:
		return capital(actor) + " takes over task " + demoTask + " from " + who(prev) + " because: " + reason + ". " +
			capital(who(prev)) + ", the previous owner, is notified."
	}
}

// demoClock is how the demo writes pretend times: a beat is a minute.
const demoClock = "15:04"

// KeyMap implements Screen.
func (d *Demo) KeyMap() help.KeyMap {
	k := Keys
	if d.form != nil {
		return helpKeys{short: []key.Binding{k.Confirm, k.Cancel}}
	}
	focus := k.NextPane
	short := []key.Binding{k.Step, k.StepBack, k.Restart, k.ActTakeOver, k.ActView, focus}
	return helpKeys{short: short, full: [][]key.Binding{{k.Step, k.StepBack, k.Restart}, {focus, k.ActView, k.ActTakeOver}}}
}

// View implements Screen. Top to bottom: what just happened, what comes
// next, the three panes, the mailbox and the history; when the screen is
// short, the next step's preview goes first, then older pane lines, and
// the history keeps at least its newest line.
func (d *Demo) View() string {
	r := d.run
	if r.world.Ledger == nil {
		return "opening the demo…"
	}
	w, h := d.width, d.height
	lines := para(d.th.Header.Render(r.label)+" ", r.told, w)
	var next []string
	switch {
	case r.next < len(demoSteps):
		next = para(d.th.Dim.Render("next: "), demoSteps[r.next].plan(r.state), w)
	case len(r.acts) > 0:
		next = para(d.th.Dim.Render("next: "), "nothing: the demonstration is over; "+keyOf(Keys.StepBack)+
			" steps back, "+keyOf(Keys.Restart)+" starts again.", w)
	}
	if d.form != nil {
		return strings.Join(append(append(lines, next...), "", d.form.view(d.th, min(w-2, 76))), "\n")
	}
	mail := d.mailLines(w, true)
	inner := max(w/len(demoCast)-2, 4)
	need := 0
	for _, who := range demoCast {
		need = max(need, len(d.paneLines(who, inner, 1<<20)))
	}
	room := h - len(lines) - len(mail)
	histMin := 0
	if len(r.state.history) > 0 {
		histMin = 2
	}
	if room-(need+2)-len(next)-histMin < 0 {
		next = nil
	}
	if room-(need+2)-histMin < 0 && len(mail) > 1 {
		mail = d.mailLines(w, false) // the title names the columns well enough
		room = h - len(lines) - len(mail)
	}
	paneH := max(min(need, room-2-len(next)-histMin), 4)
	lines = append(lines, next...)
	lines = append(lines, d.panes(w, inner, paneH))
	lines = append(lines, mail...)
	used := 0
	for _, l := range lines {
		used += strings.Count(l, "\n") + 1
	}
	lines = append(lines, d.historyLines(w, h-used)...)
	return strings.Join(lines, "\n")
}

// panes draws the three participants side by side, h lines inside each.
func (d *Demo) panes(w, inner, h int) string {
	boxes := make([]string, len(demoCast))
	for i, who := range demoCast {
		style := d.th.Pane
		if i == d.focus {
			style = d.th.PaneFocus
		}
		boxes[i] = style.Render(fitBlock(strings.Join(d.paneLines(who, inner, h), "\n"), inner, h))
	}
	return lipgloss.JoinHorizontal(lipgloss.Top, boxes...)
}

// paneLines is one participant's pane in at most h lines where it can:
// who they are, whether they own the task and look at it, their actions,
// the newest thing they did in full and what they were told; older acts
// in a line each, newest first, as many as fit.
func (d *Demo) paneLines(who string, w, h int) []string {
	st := d.run.state
	role := "staff"
	if who == demoWorkflow {
		role = "workflow"
	}
	// One line says whose the task is and whether they look at it.
	var owner string
	switch o := st.task.Owner; {
	case st.task.ID == "":
		owner = "no task yet"
	case o == who:
		owner = d.th.Good.Render("owner: yes")
	case o == "":
		owner = "owner: nobody"
	default:
		owner = "owner: " + o
	}
	if st.viewers[who] {
		owner += " · looking"
	}
	lines := []string{d.th.Header.Render(who) + d.th.Dim.Render(" · "+role)}
	lines = append(lines, para("", owner, w)...)
	for _, a := range st.actions {
		if a.ProposedBy == who {
			lines = append(lines, d.th.mark(stateMark(a.State)).Render(a.ActionType+": "+stateWord(a.State, false)))
		}
	}
	notes := d.run.notes[who]
	if n := len(notes); n > 0 {
		lines = append(lines, d.noteLines(notes[n-1], true, w)...)
		if e, ok := ownerChangedSince(st, notes[n-1]); ok && notes[n-1].refused {
			// A refusal names the owner of its moment; say that it moved on.
			for _, l := range para("", fmt.Sprintf("since then: %s took over at %s", e.Actor, e.At.Format(demoClock)), w) {
				lines = append(lines, d.th.Dim.Render(l))
			}
		}
	}
	for _, n := range st.notes[who] {
		lines = append(lines, para("", "✉ "+n.At.Format(demoClock)+" "+n.Message, w)...)
	}
	for i := len(notes) - 2; i >= 0 && len(lines) < h; i-- {
		lines = append(lines, d.noteLines(notes[i], false, w)...)
	}
	return lines
}

// ownerChangedSince is the newest takeover after n, if any.
func ownerChangedSince(st demoState, n demoNote) (ledger.Event, bool) {
	for i := len(st.history) - 1; i >= 0; i-- {
		if e := st.history[i]; e.Kind == ledger.EvTakeover && e.At.After(n.at) {
			return e, true
		}
	}
	return ledger.Event{}, false
}

// noteLines words one act: what was done with a tick or a cross, and, in
// full, the reason or the gate's refusal, wrapped rather than cut.
func (d *Demo) noteLines(n demoNote, full bool, w int) []string {
	m, sign := markGood, "✓ "
	if n.refused {
		m, sign = markWarn, "✗ "
	}
	text := n.at.Format(demoClock) + " " + sign + n.did
	if !full {
		return []string{d.th.mark(m).Render(fitLine(text, w))}
	}
	if n.more != "" {
		text += ": " + n.more
	}
	var out []string
	for _, l := range para("", text, w) {
		out = append(out, d.th.mark(m).Render(l))
	}
	return out
}

// mailLines is the mailbox: a title line, then the columns' header when
// header is set, and a line per arrival.
func (d *Demo) mailLines(w int, header bool) []string {
	as := d.run.state.arrivals
	if len(as) == 0 {
		return []string{d.th.Header.Render("Mailbox — what actually arrived: ") + d.th.Dim.Render("nothing yet")}
	}
	out := []string{d.th.Header.Render(fmt.Sprintf("Mailbox — what actually arrived (%d)", len(as)))}
	table := renderTable(d.th, arrivalCols, arrivalRows(as), -1, w)
	if !header {
		table = table[1:]
	}
	return append(out, table...)
}

// historyLines is the gate's own account of the task in h lines: the
// newest whole sentences that fit, or, when not even one does, the newest
// cut to the room, marked as cut.
func (d *Demo) historyLines(w, h int) []string {
	evs := d.run.state.history
	if h <= 0 || len(evs) == 0 {
		return nil
	}
	var lines []string
	n := 0
	for i := len(evs) - 1; i >= 0; i-- {
		s := para(d.th.Dim.Render("  "+evs[i].At.Format(demoClock)+" "), evs[i].Message, w)
		if len(lines)+len(s) > h-1 {
			if n == 0 && h > 1 {
				s = s[:h-1]
				s[h-2] = ansi.Truncate(s[h-2], w-1, "") + ellipsis
				lines, n = s, 1
			}
			break
		}
		lines, n = append(s, lines...), n+1
	}
	title := d.th.Header.Render(fmt.Sprintf("History — what the gate recorded (newest %d of %d)", n, len(evs)))
	return append([]string{title}, lines...)
}

// The message-id (without its constant domain) and the recipient are what
// prove an arrival, so they are never cut; the subject gives way.
var arrivalCols = []column{{"message-id", 12, 0}, {"to", 8, 0}, {"subject", 8, 1}, {"arrived", 5, 0}}

func arrivalRows(as []Arrival) []row {
	out := make([]row, len(as))
	for i, a := range as {
		out[i] = row{cells: []string{localPart(a.MessageID), a.To, a.Subject, a.At.Format(demoClock)}}
		if a.Duplicate {
			out[i].mark = markBad
			out[i].cells[2] = "DUPLICATE · " + a.Subject
		}
	}
	return out
}

package tui

import (
	"context"
	"fmt"
	"time"

	"charm.land/bubbles/v2/help"
	"charm.land/bubbles/v2/key"
	"charm.land/bubbles/v2/textinput"
	"charm.land/bubbles/v2/viewport"
	tea "charm.land/bubbletea/v2"

	"gatehouse/scenarios"
)

// speeds are the pauses between steps while playing.
var speeds = []time.Duration{2 * time.Second, time.Second, 500 * time.Millisecond, 250 * time.Millisecond}

// NewRunFunc starts a rehearsal of a scenario (scenarios.NewRun by default).
type NewRunFunc func(ctx context.Context, sc *scenarios.Scenario) (*scenarios.Run, error)

// Rehearsal runs one scenario step by step and shows the three columns
// (intended actions | attempts | at the destination), the counts, the history
// and the expectations as they are decided.
type Rehearsal struct {
	base
	sc      *scenarios.Scenario
	newRun  NewRunFunc
	run     *scenarios.Run
	snap    scenarios.Snapshot
	last    *scenarios.StepResult
	report  *scenarios.Report
	pos     listPos
	selKey  string // the selected row's action key, kept across steps
	playing bool
	speed   int // index into speeds
	gen     int // invalidates the play ticks of an earlier play or run
	busy    bool
	homeID  int // where the verdict is reported (0: nowhere)
	// layouts are the three columns' layouts chosen so far, by width; they
	// depend on the scenario only, so a run's columns never change width.
	layouts map[layoutAt]threeLayout
	focus   pane             // what the movement keys move
	expPos  listPos          // over the expectations, failures first
	hist    viewport.Model   // the history, wrapped
	export  *textinput.Model // the file the result goes to, while asked
}

// Rehearsal messages (delivered through routedMsg).
type (
	runReadyMsg struct {
		run  *scenarios.Run
		snap scenarios.Snapshot
		err  error
	}
	steppedMsg struct {
		res    scenarios.StepResult
		snap   scenarios.Snapshot
		report *scenarios.Report
		err    error
	}
	playMsg struct{ gen int }
	// verdictMsg tells the home screen how a rehearsal ended.
	verdictMsg struct {
		name   string
		passed bool
	}
)

// NewRehearsal returns a rehearsal of sc; homeID (0 for none) receives
// the verdict when it is decided.
func NewRehearsal(th Theme, sc *scenarios.Scenario, newRun NewRunFunc, homeID int) *Rehearsal {
	if newRun == nil {
		newRun = func(ctx context.Context, sc *scenarios.Scenario) (*scenarios.Run, error) {
			return scenarios.NewRun(ctx, sc, scenarios.Options{})
		}
	}
	return &Rehearsal{base: newBase(th), sc: sc, newRun: newRun, homeID: homeID, speed: 1, busy: true,
		hist: viewport.New()}
}

// Title implements Screen.
func (r *Rehearsal) Title() string { return "rehearsal · " + r.sc.Title }

// Busy implements Screen.
func (r *Rehearsal) Busy() bool { return r.busy }

// Capturing implements Screen.
func (r *Rehearsal) Capturing() bool { return r.export != nil }

// SetSize implements Screen.
func (r *Rehearsal) SetSize(w, h int) {
	r.base.SetSize(w, h)
	r.pos.setRows(h)
}

// Init implements Screen: start a fresh run.
func (r *Rehearsal) Init() tea.Cmd { return r.start(nil) }

// Close ends the run (its ledger and mailbox). It must not be called while
// a step is running; the app calls it on exit.
func (r *Rehearsal) Close() {
	if r.run != nil {
		r.run.Close()
		r.run = nil
	}
}

// start closes old (if any) and opens a fresh run with a new ledger and
// mailbox.
func (r *Rehearsal) start(old *scenarios.Run) tea.Cmd {
	r.busy, r.last, r.report, r.playing = true, nil, nil, false
	r.gen++
	sc, newRun := r.sc, r.newRun
	return r.do(func(ctx context.Context) tea.Msg {
		if old != nil {
			old.Close()
		}
		run, err := newRun(ctx, sc)
		if err != nil {
			return runReadyMsg{err: fmt.Errorf("start rehearsal of %s: %w", sc.Name, err)}
		}
		snap, err := run.Snapshot(ctx)
		return runReadyMsg{run: run, snap: snap, err: err}
	})
}

// Update implements Screen.
func (r *Rehearsal) Update(msg tea.Msg) (Screen, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.KeyPressMsg:
		return r, r.onKey(msg)
	case runReadyMsg:
		return r, r.onReady(msg)
	case steppedMsg:
		return r, r.onStepped(msg)
	case playMsg:
		return r, r.onPlay(msg)
	case exportedMsg:
		return r, msg.status()
	}
	return r, nil
}

func (r *Rehearsal) onReady(msg runReadyMsg) tea.Cmd {
	r.busy = false
	if msg.err != nil {
		return fail(msg.err)
	}
	r.run, r.snap = msg.run, msg.snap
	r.pos, r.selKey = listPos{rows: r.pos.rows}, ""
	r.follow()
	r.expPos = listPos{}
	return nil
}

// follow keeps the selected key selected when a step adds rows, and
// remembers which key the cursor is on.
func (r *Rehearsal) follow() {
	for i, row := range r.snap.Rows {
		if r.selKey != "" && row.Key == r.selKey {
			r.pos.cursor = i
			break
		}
	}
	r.pos.setTotal(len(r.snap.Rows))
	r.selKey = ""
	if r.pos.cursor < len(r.snap.Rows) {
		r.selKey = r.snap.Rows[r.pos.cursor].Key
	}
}

func (r *Rehearsal) onKey(msg tea.KeyPressMsg) tea.Cmd {
	switch {
	case r.export != nil:
		return r.onExportKey(msg)
	case key.Matches(msg, Keys.NextPane):
		r.focus = (r.focus + 1) % paneCount
		return info("focus: " + paneNames[r.focus])
	case key.Matches(msg, Keys.Export):
		return r.askExport()
	case key.Matches(msg, Keys.Step):
		r.playing = false
		return r.step()
	case key.Matches(msg, Keys.Play):
		return r.togglePlay()
	case key.Matches(msg, Keys.Restart):
		if r.busy {
			return info("a step is running; restart when it has finished")
		}
		return r.start(r.run)
	case key.Matches(msg, Keys.Faster):
		r.speed = min(r.speed+1, len(speeds)-1)
	case key.Matches(msg, Keys.Slower):
		r.speed = max(r.speed-1, 0)
	case key.Matches(msg, Keys.Open):
		return r.openDetail()
	case key.Matches(msg, Keys.Inspect) && r.run != nil:
		return push(NewInspector(r.th, InspectorConfig{Ledger: r.run.Ledger(), Actor: "trainer", Source: r.sc.Name}))
	default:
		r.paneKey(msg)
	}
	return nil
}

func (r *Rehearsal) togglePlay() tea.Cmd {
	r.playing = !r.playing
	r.gen++
	if r.playing {
		return r.step()
	}
	return nil
}

// step runs the next step; after the last one it checks the final
// expectations.
func (r *Rehearsal) step() tea.Cmd {
	if r.busy || r.run == nil {
		return nil
	}
	if r.report != nil {
		r.playing = false
		return info("the rehearsal is over: " + keyOf(Keys.Restart) + " restarts it")
	}
	r.busy = true
	run := r.run
	return r.do(func(ctx context.Context) tea.Msg { return stepRun(ctx, run) })
}

func stepRun(ctx context.Context, run *scenarios.Run) steppedMsg {
	var m steppedMsg
	if m.res, m.err = run.Step(ctx); m.err != nil {
		return m
	}
	if m.snap, m.err = run.Snapshot(ctx); m.err != nil || !run.Done() {
		return m
	}
	rep, err := run.Finish(ctx)
	m.report, m.err = &rep, err
	return m
}

func (r *Rehearsal) onStepped(msg steppedMsg) tea.Cmd {
	r.busy = false
	if msg.err != nil {
		r.playing = false
		return fail(msg.err)
	}
	r.last, r.snap = &msg.res, msg.snap
	if msg.report != nil {
		r.report, r.playing = msg.report, false
		r.snap.Rows, r.snap.Counts, r.snap.Verdicts = msg.report.Rows, msg.report.Counts, msg.report.Verdicts
	}
	r.follow()
	var cmds []tea.Cmd
	if r.report != nil {
		cmds = append(cmds, r.tellHome())
	}
	if r.playing {
		gen, id := r.gen, r.id
		cmds = append(cmds, tea.Tick(speeds[r.speed], func(time.Time) tea.Msg { return routedMsg{to: id, msg: playMsg{gen: gen}} }))
	}
	return tea.Batch(cmds...)
}

func (r *Rehearsal) onPlay(msg playMsg) tea.Cmd {
	if msg.gen != r.gen || !r.playing {
		return nil // paused or restarted since
	}
	return r.step()
}

// tellHome reports the verdict to the home screen's list.
func (r *Rehearsal) tellHome() tea.Cmd {
	if r.homeID == 0 {
		return nil
	}
	v := verdictMsg{name: r.sc.Name, passed: r.report.Passed}
	to := r.homeID
	return func() tea.Msg { return routedMsg{to: to, msg: v} }
}

// openDetail opens the selected row's action in the run's ledger.
func (r *Rehearsal) openDetail() tea.Cmd {
	i := r.pos.cursor
	if r.run == nil || i >= len(r.snap.Rows) || r.snap.Rows[i].State == "" {
		return nil
	}
	// The detail speaks the rehearsal screen's names for the mailbox, so
	// one address does not appear under two names on the way in (the
	// inspector shows the ledger's records as they are).
	return push(newNamedActionDetail(r.th, operator{l: r.run.Ledger(), actor: "trainer"}, r.snap.Rows[i].Key, r.run.Stable))
}

// KeyMap implements Screen.
func (r *Rehearsal) KeyMap() help.KeyMap {
	k := Keys
	if r.export != nil {
		return helpKeys{short: []key.Binding{k.Confirm, k.Cancel}}
	}
	short := []key.Binding{k.Step, k.Play, k.NextPane, k.Open, k.Export, k.Inspect, k.Restart, k.Faster, k.Slower}
	return helpKeys{short: short, full: [][]key.Binding{{k.Step, k.Play, k.Restart, k.Faster, k.Slower}, navKeys(), {k.NextPane, k.Open, k.Inspect, k.Export}}}
}

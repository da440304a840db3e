package tui

import (
	"context"
	"time"

	"charm.land/bubbles/v2/help"
	"charm.land/bubbles/v2/key"
	"charm.land/bubbles/v2/textinput"
	tea "charm.land/bubbletea/v2"

	"gatehouse/destination"
	"gatehouse/ledger"
)

// DefaultPoll is how often the inspector asks the ledger whether anything
// changed: often enough that a change is on screen within a second, rarely
// enough that an idle inspector costs one tiny query a third of a second.
const DefaultPoll = 300 * time.Millisecond

// InspectorConfig configures a ledger inspector.
type InspectorConfig struct {
	Ledger *ledger.Ledger
	// Records reaches the records of the destination each attempt
	// recorded, for reconcile; nil means the gate holds the action for a
	// person instead.
	Records destination.RecordsOpener
	// Actor is who the operator is; every operation is recorded under it.
	Actor string
	// Poll overrides DefaultPoll; a negative Poll does not follow the
	// ledger at all (tests drive reloads themselves).
	Poll time.Duration
	// Source names what is inspected in the title (default: the file).
	Source string
}

// tab is one of the inspector's views of the ledger.
type tab int

const (
	tabTasks tab = iota
	tabActions
	tabHolds
	tabMetrics
	tabStop
	tabCount
)

var tabNames = [tabCount]string{"Tasks", "Actions", "Holds & unknown", "Metrics", "Stop"}

// list is the visible window of one list tab and what selects it.
type list struct {
	pos     listPos
	follow  string // the selected row's key or task id, kept across reloads
	loaded  bool   // a load of this list has come back
	search  string
	state   int // actions tab: index into stateChoices
	tasks   []ledger.TaskSummary
	actions []ledger.Action
}

// stateChoices are what the state filter cycles through ("" is all).
var stateChoices = append([]ledger.State{""}, ledger.AllStates...)

// Inspector follows a ledger that other processes write, page by page,
// and lets an operator act through the same gate operations a workflow
// uses.
type Inspector struct {
	base
	cfg       InspectorConfig
	tab       tab
	lists     [tabMetrics]list
	metrics   ledger.Metrics
	sw        ledger.Switch
	standing  standing // who operates, and their roles
	seen      int64    // the ledger's change counter when last loaded
	seq       int      // the newest load asked for; older results are dropped
	loadedTop int      // the first row of the loaded window
	loaded    bool
	ops       int // operations in flight
	searching bool
	search    textinput.Model
	form      *form
}

// NewInspector returns an inspector over cfg.Ledger.
func NewInspector(th Theme, cfg InspectorConfig) *Inspector {
	if cfg.Poll == 0 {
		cfg.Poll = DefaultPoll
	}
	if cfg.Actor == "" {
		cfg.Actor = "operator"
	}
	if cfg.Source == "" {
		cfg.Source = sourceName(cfg.Ledger)
	}
	s := newInput(keyOf(Keys.Filter), "")
	return &Inspector{base: newBase(th), cfg: cfg, search: s}
}

// Title implements Screen.
func (in *Inspector) Title() string {
	return "inspector · " + in.cfg.Source + clockWords(in.cfg.Ledger)
}

// Busy implements Screen.
func (in *Inspector) Busy() bool { return in.ops > 0 || !in.loaded }

// Capturing implements Screen.
func (in *Inspector) Capturing() bool { return in.searching || in.form != nil }

// SetSize implements Screen; a different height changes the window to load.
func (in *Inspector) SetSize(w, h int) {
	in.base.SetSize(w, h)
	for i := range in.lists {
		in.lists[i].pos.setRows(in.listRows())
	}
}

// Init implements Screen: load the first page and start following.
func (in *Inspector) Init() tea.Cmd { return tea.Batch(in.load(), in.pollLater()) }

// Inspector messages (delivered through routedMsg).
type (
	pollMsg    struct{}
	changesMsg struct {
		n   int64
		err error
	}
)

// Update implements Screen.
func (in *Inspector) Update(msg tea.Msg) (Screen, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.KeyPressMsg:
		return in, in.onKey(msg)
	case pollMsg:
		return in, in.checkChanges()
	case changesMsg:
		return in, in.onChanges(msg)
	case loadedMsg:
		return in, in.onLoaded(msg)
	case opMsg:
		return in, in.onOp(msg)
	case permitMsg:
		return in, in.onPermit(msg)
	}
	return in, in.updateInputs(msg)
}

// updateInputs lets the text inputs handle their own messages (blink).
func (in *Inspector) updateInputs(msg tea.Msg) tea.Cmd {
	var cmd tea.Cmd
	if in.form != nil {
		in.form.input, cmd = in.form.input.Update(msg)
		return cmd
	}
	in.search, cmd = in.search.Update(msg)
	return cmd
}

func (in *Inspector) pollLater() tea.Cmd {
	if in.cfg.Poll < 0 {
		return nil
	}
	// A PostgreSQL ledger wakes the wait when any host writes; any ledger
	// ends it after the poll interval, so a lost notification costs at
	// most one interval.
	l, poll := in.cfg.Ledger, in.cfg.Poll
	return in.do(func(ctx context.Context) tea.Msg {
		l.WaitForChange(ctx, poll)
		return pollMsg{}
	})
}

// checkChanges asks the ledger for its change counter, a single-row query.
func (in *Inspector) checkChanges() tea.Cmd {
	l := in.cfg.Ledger
	return in.do(func(ctx context.Context) tea.Msg {
		n, err := l.Changes(ctx)
		return changesMsg{n: n, err: err}
	})
}

// onChanges reloads the visible page only when the ledger changed, and
// re-arms the poll in every case.
func (in *Inspector) onChanges(msg changesMsg) tea.Cmd {
	if msg.err != nil {
		return tea.Batch(fail(msg.err), in.pollLater())
	}
	if msg.n == in.seen {
		return in.pollLater()
	}
	in.seen = msg.n
	return tea.Batch(in.load(), in.pollLater())
}

// current is the list of the tab in view, nil on the metrics and stop tabs.
func (in *Inspector) current() *list {
	if in.tab >= tabMetrics {
		return nil
	}
	return &in.lists[in.tab]
}

// listRows is how many rows of a list fit: the body minus the tab bar,
// the filter line and the table header.
func (in *Inspector) listRows() int { return max(in.height-4, 1) }

// KeyMap implements Screen.
func (in *Inspector) KeyMap() help.KeyMap {
	k := Keys
	switch {
	case in.form != nil:
		return helpKeys{short: []key.Binding{k.Confirm, k.Cancel}}
	case in.searching:
		return helpKeys{short: []key.Binding{k.Apply, k.Cancel}}
	}
	// Most important first: the app drops keys from the end to fit.
	focus := k.NextTab
	short := []key.Binding{k.Open, focus}
	switch in.tab {
	case tabTasks:
		short = append(short, k.Filter, k.TakeOver)
	case tabActions:
		short = append(short, k.Filter, k.StateFilter, k.Hold, k.ReleaseHold, k.Reconcile)
	case tabHolds:
		short = append(short, k.Reconcile, k.ReleaseHold, k.Filter)
	}
	short = append(short, k.Stop, k.Resume)
	ops := []key.Binding{k.Hold, k.ReleaseHold, k.Reconcile, k.Arrived, k.NotArrived, k.TakeOver, k.Stop, k.Resume}
	return helpKeys{short: short, full: [][]key.Binding{navKeys(), {k.Open, focus, k.Filter, k.StateFilter}, ops}}
}

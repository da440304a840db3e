package tui

import (
	"context"
	"fmt"
	"strings"
	"time"

	"charm.land/bubbles/v2/help"
	"charm.land/bubbles/v2/key"
	"charm.land/bubbles/v2/textinput"
	tea "charm.land/bubbletea/v2"

	"gatehouse/destination"
	"gatehouse/ledger"
	"gatehouse/review"
)

// ReviewConfig configures an incident review.
type ReviewConfig struct {
	Ledger *ledger.Ledger
	// Actor is who reviews: recorded when they switch into operating mode.
	Actor string
	// Records reaches destinations' records for the inspector that
	// operating mode opens.
	Records destination.RecordsOpener
	// Source names the ledger in the title (default: the file).
	Source string
	// Poll overrides DefaultPoll, how long the review waits for word of a
	// change before it asks the ledger's change counter itself; a negative
	// Poll does not follow the ledger at all.
	Poll time.Duration
	// MinInterval overrides ReviewMinInterval.
	MinInterval time.Duration
}

// ReviewMinInterval is the least time between the end of one read of the
// history and the start of the next when the review follows a ledger that
// others write: a busy ledger is re-read about once a second, not after
// every line. A read that took longer spaces the next by its own cost, so
// following a history of a million lines leaves the machine at least half
// its time.
const ReviewMinInterval = time.Second

// reviewTab is one of the review's views of the history.
type reviewTab int

const (
	tabTimeline reviewTab = iota
	tabRates
	tabAtStop
	reviewTabCount
)

var reviewTabNames = [reviewTabCount]string{"Timeline", "Rates", "At a stop"}

// prompt is what the review's text input is asking for.
type prompt int

const (
	promptNone prompt = iota
	promptActor
	promptSubject
	promptWindow
)

// Review is the incident review: the ledger's history as a timeline of
// action spans, its rates per hour or day, and every action's state at a
// stop. It only reads, until the reviewer switches into operating mode
// (recorded in the history), which opens the inspector's operations.
//
// Each tab is its own model (review_timeline.go, review_rates.go,
// review_stop.go) over the history the review holds; the review reads the
// history, follows the ledger (review_follow.go), owns the filters the
// timeline and the rates share, and moves between the tabs.
type Review struct {
	base
	cfg       ReviewConfig
	h         *review.History
	loadErr   error
	tab       reviewTab
	filter    review.Filter
	timeline  timelineTab
	rates     ratesTab
	atStop    stopTab
	prompt    prompt
	input     textinput.Model
	form      *form
	operating bool
	busy      int
	watch     follower
}

// NewReview returns a review of cfg.Ledger.
func NewReview(th Theme, cfg ReviewConfig) *Review {
	if cfg.Actor == "" {
		cfg.Actor = "reviewer"
	}
	if cfg.Source == "" {
		cfg.Source = sourceName(cfg.Ledger)
	}
	if cfg.Poll == 0 {
		cfg.Poll = DefaultPoll
	}
	if cfg.MinInterval == 0 {
		cfg.MinInterval = ReviewMinInterval
	}
	return &Review{base: newBase(th), cfg: cfg, timeline: timelineTab{text: map[int64]ledger.Event{}}, input: newInput("", "")}
}

// Review messages (delivered through routedMsg).
type (
	reviewLoadedMsg struct {
		h *review.History
		// n is the change counter, read just before the history: a later
		// counter means lines the history may lack.
		n    int64
		took time.Duration // the read's cost in real time
		auto bool          // the follower asked for it, not the reviewer
		err  error
	}
	reviewChangesMsg struct {
		n   int64
		err error
	}
	reviewTextMsg struct {
		text map[int64]ledger.Event
		err  error
	}
	reviewReportMsg struct {
		stop int
		r    review.Report
		// The report's lines, laid out with it off the screen's
		// goroutine: a stop with 100,000 actions has 200,000 of them.
		lines, keys []string
		styles      []lineStyle
		err         error
	}
	operatingMsg struct{ err error }
	// askOperateMsg is who the reviewer is and whether they may operate,
	// read before the switch is offered.
	askOperateMsg struct {
		s   standing
		ok  bool
		why string
	}
)

// Title implements Screen.
func (rv *Review) Title() string {
	mode := "read-only"
	if rv.operating {
		mode = "operating mode"
	}
	return "review · " + rv.cfg.Source + clockWords(rv.cfg.Ledger) + " · " + mode
}

// Busy implements Screen.
func (rv *Review) Busy() bool { return rv.busy > 0 }

// Capturing implements Screen.
func (rv *Review) Capturing() bool { return rv.prompt != promptNone || rv.form != nil }

// SetSize implements Screen.
func (rv *Review) SetSize(w, h int) {
	rv.base.SetSize(w, h)
	rv.timeline.setRows(rv.timelineRows())
	rv.rates.pos.setRows(rv.rateRows())
	rv.atStop.pos.setRows(max(h-4, 1))
}

// Init implements Screen: load the history, then follow the ledger (see
// follow): when others write it, the review reads it again by itself; the
// reload key reads it again at once.
func (rv *Review) Init() tea.Cmd { return rv.load(false) }

// Update implements Screen: one handler per kind of message.
func (rv *Review) Update(msg tea.Msg) (Screen, tea.Cmd) {
	switch msg := msg.(type) {
	case reviewLoadedMsg:
		return rv, rv.onLoaded(msg)
	case reviewTextMsg:
		rv.busy--
		if msg.err != nil {
			return rv, fail(msg.err)
		}
		rv.timeline.addText(msg.text)
	case reviewReportMsg:
		rv.busy--
		return rv, rv.atStop.onReport(rv, msg)
	case pollMsg:
		return rv, rv.checkChanges()
	case reviewChangesMsg:
		return rv, rv.onChanges(msg)
	case operatingMsg:
		return rv, rv.onOperating(msg)
	case askOperateMsg:
		return rv, rv.offerOperate(msg)
	case tea.KeyPressMsg:
		return rv, rv.onKey(msg)
	case tea.MouseClickMsg:
		if msg.Button == tea.MouseLeft && !rv.Capturing() && rv.h != nil {
			return rv, rv.onClick(msg.X, msg.Y-1) // the app bar is the line above the body
		}
	}
	return rv, nil
}

// Where the review's lists begin in its body: below the tab bar, the
// filter line and the header; the rates below their sparklines too.
const listTop = 3

var ratesTop = 4 + len(sparkMeasures)

// onClick selects what was clicked: a tab, or a row of the tab shown.
func (rv *Review) onClick(x, y int) tea.Cmd {
	if y > 0 {
		switch rv.tab {
		case tabTimeline:
			rv.timeline.onClick(y - listTop)
		case tabRates:
			if rv.rates.onClick(y - ratesTop) {
				return rv.rates.onKey(rv, tea.KeyPressMsg{Code: tea.KeyEnter})
			}
		}
		return nil
	}
	left := 0
	for i, name := range reviewTabNames {
		w := len([]rune(name)) + 2 // the tab's padding
		if x >= left && x < left+w && reviewTab(i) != rv.tab {
			return rv.show(reviewTab(i))
		}
		left += w
	}
	return nil
}

func (rv *Review) onLoaded(msg reviewLoadedMsg) tea.Cmd {
	rv.busy--
	rv.watch.loading = false
	rv.watch.gap = max(rv.cfg.MinInterval, msg.took)
	if msg.err != nil {
		if rv.h == nil {
			rv.loadErr = msg.err // nothing to show
			return fail(msg.err)
		}
		return tea.Batch(fail(msg.err), rv.follow(true)) // a failed reload keeps what was read
	}
	rv.watch.seen = msg.n
	rv.watch.readAt = rv.cfg.Ledger.Clock().Now()
	if rv.h == nil {
		rv.h = msg.h
		rv.applyFilter()
		rv.atStop.stop = len(rv.h.Stops())
		rv.timeline.pos.move(rv.timeline.pos.total) // the newest lines first on screen
		return tea.Batch(rv.fetchText(), rv.follow(true))
	}
	// A reload keeps the filters, the stop chosen and what the reviewer
	// was looking at (see anchor).
	at := rv.timeline.anchor(rv.h)
	rv.watch.added = len(msg.h.Events) - len(rv.h.Events)
	rv.h = msg.h
	rv.rates.buckets, rv.timeline.sel = nil, nil
	rv.applyFilter()
	rv.timeline.restore(rv.h, at)
	if rv.atStop.stop == 0 {
		rv.atStop.stop = len(rv.h.Stops()) // the first stop since the review opened
	}
	var build tea.Cmd
	if rv.tab == tabAtStop {
		build = rv.buildReport() // the old report stays on screen meanwhile
	} else {
		rv.atStop.stale = true // built again when its tab opens
	}
	var said tea.Cmd
	if !msg.auto {
		said = info(fmt.Sprintf("history read again: %d lines", len(rv.h.Events)))
	}
	return tea.Batch(rv.fetchText(), build, said, rv.follow(true))
}

func (rv *Review) onOperating(msg operatingMsg) tea.Cmd {
	rv.busy--
	if msg.err != nil {
		return fail(fmt.Errorf("operating mode: %w", msg.err))
	}
	rv.operating = true
	return tea.Batch(info("operating mode: recorded in the history; operations are open"), rv.openInspector())
}

func (rv *Review) openInspector() tea.Cmd {
	return push(NewInspector(rv.th, InspectorConfig{Ledger: rv.cfg.Ledger, Actor: rv.cfg.Actor,
		Records: rv.cfg.Records, Source: rv.cfg.Source}))
}

func (rv *Review) onKey(msg tea.KeyPressMsg) tea.Cmd {
	switch {
	case rv.form != nil:
		done, cmd := rv.form.update(msg)
		if done {
			rv.form = nil
		}
		return cmd
	case rv.prompt != promptNone:
		return rv.onPromptKey(msg)
	case rv.h == nil:
		return nil
	case key.Matches(msg, Keys.Focus):
		return rv.show((rv.tab + 1) % reviewTabCount)
	case key.Matches(msg, Keys.Operate):
		return rv.askOperate()
	case key.Matches(msg, Keys.Reload):
		if rv.watch.loading {
			return info("already reading the history")
		}
		return rv.load(false)
	}
	switch rv.tab {
	case tabTimeline:
		return rv.timeline.onKey(rv, msg)
	case tabRates:
		return rv.rates.onKey(rv, msg)
	default:
		return rv.atStop.onKey(rv, msg)
	}
}

// show opens a tab, with what it needs read or built.
func (rv *Review) show(t reviewTab) tea.Cmd {
	rv.tab = t
	switch {
	case t == tabAtStop && (rv.atStop.report == nil || rv.atStop.stale):
		return rv.buildReport()
	case t == tabTimeline:
		return rv.fetchText()
	}
	return nil
}

func (rv *Review) askOperate() tea.Cmd {
	if rv.operating {
		return rv.openInspector()
	}
	l, actor := rv.cfg.Ledger, rv.cfg.Actor
	return rv.do(func(ctx context.Context) tea.Msg {
		m := askOperateMsg{s: readStanding(ctx, l, actor), ok: true}
		if ok, why, err := l.Permitted(ctx, actor, ledger.VerbOperate); err == nil {
			m.ok, m.why = ok, why
		}
		return m
	})
}

// offerOperate opens the switch into operating mode, naming who switches
// and their roles, or says at once why this reviewer may not operate.
func (rv *Review) offerOperate(msg askOperateMsg) tea.Cmd {
	if !msg.ok {
		return permitMsg{op: operation{verb: "switch into operating mode"}, why: msg.why}.refused()
	}
	l, actor := rv.cfg.Ledger, rv.cfg.Actor
	f, cmd := newForm("Switch into operating mode as "+actor,
		"The review only reads. Operating mode opens the inspector's operations (hold, release, reconcile, stop, resume) on this ledger; the switch is recorded in the history with your reason. You are "+strings.TrimPrefix(msg.s.line, "as ")+".",
		true, func(reason string) tea.Cmd {
			rv.busy++
			return rv.do(func(ctx context.Context) tea.Msg {
				return operatingMsg{err: l.RecordOperating(ctx, actor, reason)}
			})
		})
	rv.form = f
	return cmd
}

// KeyMap implements Screen: the tab's own keys, then operating mode.
func (rv *Review) KeyMap() help.KeyMap {
	k := Keys
	switch {
	case rv.form != nil:
		return helpKeys{short: []key.Binding{k.Confirm, k.Cancel}}
	case rv.prompt != promptNone:
		return helpKeys{short: []key.Binding{k.Apply, k.Cancel}}
	}
	var short []key.Binding
	switch rv.tab {
	case tabTimeline:
		short = rv.timeline.keys()
	case tabRates:
		short = ratesKeys()
	default:
		short = stopKeys()
	}
	short = append(append([]key.Binding{k.NextTab}, short...), k.Operate)
	jumps := []key.Binding{k.NextInAction, k.PrevInAction, k.NextStop}
	return helpKeys{short: short, full: [][]key.Binding{navKeys(), append(timelineFilters(), k.NextTab, k.Spans),
		append(jumps, k.RateWidth, k.Operate, k.Reload)}}
}

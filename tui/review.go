package tui

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
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
type Review struct {
	base
	cfg     ReviewConfig
	h       *review.History
	loadErr error
	tab     reviewTab
	filter  review.Filter
	sel     []int32 // the timeline lines the filter selects
	pos     listPos // over sel
	text    map[int64]ledger.Event
	// spans shows the timeline one action per row (its lines grouped)
	// instead of one line per row.
	spans    bool
	spanList []review.ActionSpan
	spanPos  listPos
	hourly   bool
	rates    []review.RateBucket
	// ratesWindow is the time window the rates were counted for.
	ratesWindow [2]int64
	rpos        listPos
	stop        int // the stop at-a-stop shows, from 1; 0 until loaded
	report      *review.Report
	stopLines   []string
	stopKeys    []string // the action each line of stopLines is about ("" for none)
	stopStyles  []lineStyle
	spos        listPos
	prompt      prompt
	input       textinput.Model
	form        *form
	operating   bool
	busy        int

	// Following the ledger (review_follow.go).
	seen     int64         // the change counter read before the history in view
	loading  bool          // a read of the history is in flight
	polling  bool          // the follower's wait or change check is in flight
	gap      time.Duration // the wait after a read before the next check
	readAt   time.Time     // when the history in view was read (the ledger's clock)
	added    int           // lines the last read added
	watchErr string        // the follower's last error, said once
	building bool          // a report is being built
	rebuild  bool          // the history changed while it was: build again
	stale    bool          // the report is of an older read of the history
	reads    atomic.Int64  // reads of the history (tests count them)
	checks   atomic.Int64  // change checks (tests count them)
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
	return &Review{base: newBase(th), cfg: cfg, text: map[int64]ledger.Event{}, input: newInput("", "")}
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
)

// Title implements Screen.
func (rv *Review) Title() string {
	mode := "read-only"
	if rv.operating {
		mode = "operating mode"
	}
	return "review · " + rv.cfg.Source + " · " + mode
}

// Busy implements Screen.
func (rv *Review) Busy() bool { return rv.busy > 0 }

// Capturing implements Screen.
func (rv *Review) Capturing() bool { return rv.prompt != promptNone || rv.form != nil }

// SetSize implements Screen.
func (rv *Review) SetSize(w, h int) {
	rv.base.SetSize(w, h)
	rv.pos.setRows(rv.timelineRows())
	rv.spanPos.setRows(rv.timelineRows())
	rv.rpos.setRows(rv.rateRows())
	rv.spos.setRows(max(h-4, 1))
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
		for id, e := range msg.text {
			rv.text[id] = e
		}
	case reviewReportMsg:
		return rv, rv.onReport(msg)
	case pollMsg:
		return rv, rv.checkChanges()
	case reviewChangesMsg:
		return rv, rv.onChanges(msg)
	case operatingMsg:
		return rv, rv.onOperating(msg)
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

// onClick selects what was clicked: a tab, a line or an action of the
// timeline, or a rate bucket, which filters the timeline to it as enter
// does.
func (rv *Review) onClick(x, y int) tea.Cmd {
	if y == 0 {
		left := 0
		for i, name := range reviewTabNames {
			w := len([]rune(name)) + 2 // the tab's padding
			if x >= left && x < left+w && reviewTab(i) != rv.tab {
				rv.tab = reviewTab(i)
				return rv.enterTab()
			}
			left += w
		}
		return nil
	}
	switch {
	case rv.tab == tabTimeline && rv.spans:
		if p := rv.spanPos.top + y - listTop; y >= listTop && p < min(rv.spanPos.top+rv.spanPos.rows, rv.spanPos.total) {
			rv.spanPos.move(p - rv.spanPos.cursor)
		}
	case rv.tab == tabTimeline:
		if p := rv.pos.top + y - listTop; y >= listTop && p < min(rv.pos.top+rv.pos.rows, rv.pos.total) {
			rv.pos.move(p - rv.pos.cursor)
		}
	case rv.tab == tabRates:
		if p := rv.rpos.top + y - ratesTop; y >= ratesTop && p < min(rv.rpos.top+rv.rpos.rows, rv.rpos.total) {
			rv.rpos.move(p - rv.rpos.cursor)
			return rv.onRatesKey(tea.KeyPressMsg{Code: tea.KeyEnter})
		}
	}
	return nil
}

func (rv *Review) onLoaded(msg reviewLoadedMsg) tea.Cmd {
	rv.busy--
	rv.loading = false
	rv.gap = max(rv.cfg.MinInterval, msg.took)
	if msg.err != nil {
		if rv.h == nil {
			rv.loadErr = msg.err // nothing to show
			return fail(msg.err)
		}
		return tea.Batch(fail(msg.err), rv.follow(true)) // a failed reload keeps what was read
	}
	rv.seen = msg.n
	rv.readAt = rv.cfg.Ledger.Clock().Now()
	if rv.h == nil {
		rv.h = msg.h
		rv.applyFilter()
		rv.loadSpans()
		rv.stop = len(rv.h.Stops())
		rv.pos.move(rv.pos.total) // the newest lines first on screen
		return tea.Batch(rv.fetchText(), rv.follow(true))
	}
	// A reload keeps the filters, the stop chosen and what the reviewer
	// was looking at (see anchor).
	at := rv.anchor()
	rv.added = len(msg.h.Events) - len(rv.h.Events)
	rv.h = msg.h
	rv.rates, rv.sel = nil, nil
	rv.applyFilter()
	rv.loadSpans()
	rv.restore(at)
	if rv.stop == 0 {
		rv.stop = len(rv.h.Stops()) // the first stop since the review opened
	}
	var build tea.Cmd
	if rv.tab == tabAtStop {
		build = rv.buildReport() // the old report stays on screen meanwhile
	} else {
		rv.stale = true // built again when its tab opens
	}
	var said tea.Cmd
	if !msg.auto {
		said = info(fmt.Sprintf("history read again: %d lines", len(rv.h.Events)))
	}
	return tea.Batch(rv.fetchText(), build, said, rv.follow(true))
}

func (rv *Review) onReport(msg reviewReportMsg) tea.Cmd {
	rv.busy--
	rv.building = false
	var again tea.Cmd
	if rv.rebuild {
		// The history was read again, or another stop chosen, while this
		// one was built: one more build, never two at once.
		rv.rebuild = false
		again = rv.buildReport()
	}
	if msg.err != nil {
		return tea.Batch(fail(msg.err), again)
	}
	if msg.stop != rv.stop {
		return again // another stop was chosen meanwhile
	}
	rv.stale = false
	// The same stop built again over a longer history keeps the line the
	// reviewer was on (an action's, found by its key; a heading, by its
	// place) on the same row; another stop starts at its top.
	same := rv.report != nil && stopNumber(rv.report) == stopNumber(&msg.r)
	was, keep, nth := rv.spos, "", 0
	if same && rv.spos.cursor < len(rv.stopKeys) {
		keep = rv.stopKeys[rv.spos.cursor]
		for i := rv.spos.cursor - 1; keep != "" && i >= 0 && rv.stopKeys[i] == keep; i-- {
			nth++ // the action's second line
		}
	}
	rv.report = &msg.r
	rv.stopLines, rv.stopKeys, rv.stopStyles = msg.lines, msg.keys, msg.styles
	rv.spos = listPos{rows: rv.spos.rows}
	if same {
		if i := slices.Index(rv.stopKeys, keep); keep != "" && i >= 0 {
			was.cursor, was.top = i+nth, i+nth-(was.cursor-was.top)
		}
		rv.spos.cursor, rv.spos.top = was.cursor, was.top
	}
	rv.spos.setTotal(len(rv.stopLines))
	return again
}

// stopNumber is the stop a report is of, 0 for the end of a history
// without one.
func stopNumber(r *review.Report) int {
	if r.Stop == nil {
		return 0
	}
	return r.Stop.Number
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
		rv.tab = (rv.tab + 1) % reviewTabCount
		return rv.enterTab()
	case key.Matches(msg, Keys.Operate):
		return rv.askOperate()
	case key.Matches(msg, Keys.Reload):
		if rv.loading {
			return info("already reading the history")
		}
		return rv.load(false)
	}
	switch rv.tab {
	case tabTimeline:
		return rv.onTimelineKey(msg)
	case tabRates:
		return rv.onRatesKey(msg)
	default:
		return rv.onStopKey(msg)
	}
}

func (rv *Review) enterTab() tea.Cmd {
	if rv.tab == tabAtStop && (rv.report == nil || rv.stale) {
		return rv.buildReport()
	}
	if rv.tab == tabTimeline {
		return rv.fetchText()
	}
	return nil
}

func (rv *Review) askOperate() tea.Cmd {
	if rv.operating {
		return rv.openInspector()
	}
	l, actor := rv.cfg.Ledger, rv.cfg.Actor
	f, cmd := newForm("Switch into operating mode as "+actor,
		"The review only reads. Operating mode opens the inspector's operations (hold, release, reconcile, stop, resume) on this ledger; the switch is recorded in the history with your reason.",
		true, func(reason string) tea.Cmd {
			rv.busy++
			return rv.do(func(ctx context.Context) tea.Msg {
				return operatingMsg{err: l.RecordOperating(ctx, actor, reason)}
			})
		})
	rv.form = f
	return cmd
}

func (rv *Review) onTimelineKey(msg tea.KeyPressMsg) tea.Cmd {
	k := Keys
	if key.Matches(msg, k.Spans) {
		rv.spans = !rv.spans
		rv.loadSpans()
		return rv.fetchText()
	}
	if rv.spans {
		return rv.onSpanKey(msg)
	}
	switch {
	case rv.pos.onKey(msg):
	case key.Matches(msg, k.KindFilter):
		rv.filter.Group = (rv.filter.Group + 1) % len(review.Groups)
		rv.applyFilter()
	case key.Matches(msg, k.ActorFilter):
		return rv.ask(promptActor, "actor: ", rv.filter.Actor)
	case key.Matches(msg, k.SubjectFilter):
		return rv.ask(promptSubject, "customer/task: ", rv.filter.Subject)
	case key.Matches(msg, k.Window):
		return rv.ask(promptWindow, "window: ", windowText(rv.filter))
	case key.Matches(msg, k.ClearFilters):
		rv.filter = review.Filter{}
		rv.applyFilter()
	case key.Matches(msg, k.NextInAction), key.Matches(msg, k.PrevInAction):
		dir := 1
		if key.Matches(msg, k.PrevInAction) {
			dir = -1
		}
		p, ok := rv.h.NextOfAction(rv.sel, rv.pos.cursor, dir)
		if !ok {
			return info("no other line of this action in the timeline as filtered")
		}
		rv.pos.move(p - rv.pos.cursor)
	case key.Matches(msg, k.NextStop):
		p, ok := rv.h.NextStop(rv.sel, rv.pos.cursor)
		if !ok {
			return info("no stop in the timeline as filtered")
		}
		rv.pos.move(p - rv.pos.cursor)
	default:
		return nil
	}
	return rv.fetchText()
}

// onSpanKey moves over the actions; enter shows the selected action's
// lines (the customer/task filter set to its key).
func (rv *Review) onSpanKey(msg tea.KeyPressMsg) tea.Cmd {
	switch {
	case rv.spanPos.onKey(msg):
	case key.Matches(msg, Keys.Open) && rv.spanPos.total > 0:
		sp := rv.spanList[rv.spanPos.cursor]
		rv.filter.Subject = rv.h.Key(sp.Action)
		rv.spans = false
		rv.applyFilter()
		rv.pos.move(-rv.pos.total)
		return rv.fetchText()
	case key.Matches(msg, Keys.KindFilter), key.Matches(msg, Keys.ClearFilters),
		key.Matches(msg, Keys.ActorFilter), key.Matches(msg, Keys.SubjectFilter), key.Matches(msg, Keys.Window):
		rv.spans = false // filters are set on the lines, then v groups them again
		cmd := rv.onTimelineKey(msg)
		rv.spans = true
		rv.loadSpans()
		return cmd
	}
	return nil
}

// loadSpans groups the selection by action when the spans are shown.
func (rv *Review) loadSpans() {
	if !rv.spans || rv.h == nil {
		return
	}
	rv.spanList = rv.h.Spans(rv.sel)
	rv.spanPos.setTotal(len(rv.spanList))
}

func (rv *Review) onRatesKey(msg tea.KeyPressMsg) tea.Cmd {
	switch {
	case rv.rpos.onKey(msg):
	case key.Matches(msg, Keys.RateWidth):
		rv.hourly = !rv.hourly
		rv.loadRates()
	case key.Matches(msg, Keys.Open) && rv.rpos.total > 0:
		b := rv.rates[rv.rpos.cursor]
		rv.filter.Since, rv.filter.Until = b.Start.UnixNano(), b.Start.Add(b.Width).UnixNano()
		rv.applyFilter()
		rv.tab = tabTimeline
		return tea.Batch(rv.fetchText(), info("timeline filtered to "+bucketLabel(b)))
	}
	return nil
}

func (rv *Review) onStopKey(msg tea.KeyPressMsg) tea.Cmd {
	switch {
	case rv.spos.onKey(msg):
	case key.Matches(msg, Keys.Open) && rv.spos.cursor < len(rv.stopKeys) && rv.stopKeys[rv.spos.cursor] != "":
		// The action's lines in the timeline, from the first after the stop.
		rv.filter = review.Filter{Subject: rv.stopKeys[rv.spos.cursor]}
		rv.spans = false
		rv.applyFilter()
		rv.tab = tabTimeline
		after := len(rv.sel) - 1
		if stops := rv.h.Stops(); rv.stop > 0 && rv.stop <= len(stops) {
			after = min(sort.Search(len(rv.sel), func(i int) bool { return int(rv.sel[i]) > stops[rv.stop-1] }), len(rv.sel)-1)
		}
		rv.pos.move(after - rv.pos.cursor)
		return rv.fetchText()
	case key.Matches(msg, Keys.NextStop):
		n := len(rv.h.Stops())
		if n == 0 {
			return info("the history holds no stop")
		}
		rv.stop = rv.stop%n + 1
		return rv.buildReport()
	}
	return nil
}

// ask opens the text input for a filter.
func (rv *Review) ask(p prompt, label, value string) tea.Cmd {
	rv.prompt = p
	rv.input.Prompt = label
	rv.input.Placeholder = map[prompt]string{promptActor: "part of a name", promptSubject: "part of a customer, task or key",
		promptWindow: "FROM..TO, e.g. 2026-03-02 10:00..2026-03-02 12:00 (either may be empty)"}[p]
	rv.input.SetValue(value)
	rv.input.CursorEnd()
	return rv.input.Focus()
}

func (rv *Review) onPromptKey(msg tea.KeyPressMsg) tea.Cmd {
	switch {
	case key.Matches(msg, Keys.Cancel):
		rv.prompt = promptNone
		rv.input.Blur()
		return nil
	case key.Matches(msg, Keys.Confirm):
		v := strings.TrimSpace(rv.input.Value())
		switch rv.prompt {
		case promptActor:
			rv.filter.Actor = v
		case promptSubject:
			rv.filter.Subject = v
		case promptWindow:
			since, until, err := parseWindow(v)
			if err != nil {
				return fail(err) // the prompt stays open to fix it
			}
			rv.filter.Since, rv.filter.Until = since, until
		}
		rv.prompt = promptNone
		rv.input.Blur()
		rv.applyFilter()
		rv.loadSpans()
		return rv.fetchText()
	}
	var cmd tea.Cmd
	rv.input, cmd = rv.input.Update(msg)
	return cmd
}

// applyFilter selects the timeline's lines again, keeping the selected
// line when it is still selected.
func (rv *Review) applyFilter() {
	keep := int32(-1)
	if rv.pos.cursor < len(rv.sel) {
		keep = rv.sel[rv.pos.cursor]
	}
	rv.sel = rv.h.Select(rv.filter)
	rv.pos.setTotal(len(rv.sel))
	if keep >= 0 {
		// The first selected line at or after the one kept: a binary
		// search, sel being in history order.
		i := sort.Search(len(rv.sel), func(i int) bool { return rv.sel[i] >= keep })
		rv.pos.move(min(i, len(rv.sel)-1) - rv.pos.cursor)
	}
	// Rates count the window, whatever else the timeline filters.
	if w := [2]int64{rv.filter.Since, rv.filter.Until}; w != rv.ratesWindow || rv.rates == nil {
		rv.ratesWindow = w
		rv.loadRates()
	}
}

func (rv *Review) loadRates() {
	if rv.h == nil {
		return
	}
	width := 24 * time.Hour
	if rv.hourly {
		width = time.Hour
	}
	from, to := 0, len(rv.h.Events)
	if rv.filter.Since != 0 || rv.filter.Until != 0 {
		from, to = rv.h.Window(nsTime(rv.filter.Since), nsTime(rv.filter.Until))
	}
	rv.rates = rv.h.Rates(from, to, width)
	rv.rpos.setTotal(len(rv.rates))
}

func nsTime(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns).UTC()
}

// fetchText reads the sentences of the visible lines not read yet.
func (rv *Review) fetchText() tea.Cmd {
	if rv.h == nil || rv.spans {
		return nil
	}
	var ids []int64
	end := min(rv.pos.top+rv.pos.rows, len(rv.sel))
	for _, i := range rv.sel[rv.pos.top:end] {
		if id := rv.h.Events[i].ID; rv.text[id].ID == 0 {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	rv.busy++
	l := rv.cfg.Ledger
	return rv.do(func(ctx context.Context) tea.Msg {
		text, err := review.Text(ctx, l, ids)
		return reviewTextMsg{text: text, err: err}
	})
}

func (rv *Review) buildReport() tea.Cmd {
	if rv.building {
		rv.rebuild = true
		return nil
	}
	rv.building = true
	rv.busy++
	l, h, stop := rv.cfg.Ledger, rv.h, rv.stop
	return rv.do(func(ctx context.Context) tea.Msg {
		r, err := review.Build(ctx, l, h, review.Options{Stop: stop})
		if err != nil {
			return reviewReportMsg{stop: stop, err: err}
		}
		lines, keys, styles := stopBody(&r)
		return reviewReportMsg{stop: stop, r: r, lines: lines, keys: keys, styles: styles}
	})
}

// KeyMap implements Screen.
func (rv *Review) KeyMap() help.KeyMap {
	k := Keys
	switch {
	case rv.form != nil:
		return helpKeys{short: []key.Binding{k.Confirm, k.Cancel}}
	case rv.prompt != promptNone:
		return helpKeys{short: []key.Binding{k.Apply, k.Cancel}}
	}
	focus := k.NextTab
	filters := []key.Binding{k.KindFilter, k.ActorFilter, k.SubjectFilter, k.Window, k.ClearFilters}
	jumps := []key.Binding{k.NextInAction, k.PrevInAction, k.NextStop}
	var short []key.Binding
	switch rv.tab {
	case tabTimeline:
		short = append([]key.Binding{focus, k.Spans, k.NextInAction, k.NextStop}, filters...)
		if rv.spans {
			short = append([]key.Binding{focus, k.Spans, k.OpenLines}, filters...)
		}
	case tabRates:
		short = []key.Binding{focus, k.BucketToTimeline, k.RateWidth}
	default:
		short = []key.Binding{focus, k.NextStop, k.OpenLines}
	}
	short = append(short, k.Operate)
	return helpKeys{short: short, full: [][]key.Binding{navKeys(), append(filters, focus, k.Spans), append(jumps, k.RateWidth, k.Operate, k.Reload)}}
}

// windowText writes a filter's window the way the prompt reads it.
func windowText(f review.Filter) string {
	if f.Since == 0 && f.Until == 0 {
		return ""
	}
	w := func(ns int64) string {
		if ns == 0 {
			return ""
		}
		return nsTime(ns).Format("2006-01-02 15:04:05")
	}
	return w(f.Since) + ".." + w(f.Until)
}

// errWindow explains the time window a prompt reads.
var errWindow = errors.New("window: write FROM..TO as 2006-01-02, 2006-01-02 15:04 or 2006-01-02 15:04:05 (UTC); either end may be empty")

// parseWindow reads "FROM..TO" (UTC); an empty text clears the window.
func parseWindow(s string) (since, until int64, err error) {
	if s == "" {
		return 0, 0, nil
	}
	from, to, ok := strings.Cut(s, "..")
	if !ok {
		return 0, 0, errWindow
	}
	parse := func(v string) (int64, error) {
		v = strings.TrimSpace(v)
		if v == "" {
			return 0, nil
		}
		t, err := ParseMoment(v)
		if err != nil {
			return 0, errWindow
		}
		return t.UnixNano(), nil
	}
	if since, err = parse(from); err != nil {
		return 0, 0, err
	}
	if until, err = parse(to); err != nil {
		return 0, 0, err
	}
	if since != 0 && until != 0 && until <= since {
		return 0, 0, errors.New("window: TO must be after FROM")
	}
	return since, until, nil
}

// ParseMoment reads a moment as a reviewer writes it, in UTC: RFC 3339, or
// 2006-01-02, 2006-01-02 15:04, 2006-01-02 15:04:05 (a T may replace the
// space).
func ParseMoment(s string) (time.Time, error) {
	s = strings.Replace(strings.TrimSpace(s), "T", " ", 1)
	if t, err := time.Parse(time.RFC3339, strings.Replace(s, " ", "T", 1)); err == nil {
		return t.UTC(), nil
	}
	for _, layout := range []string{"2006-01-02 15:04:05", "2006-01-02 15:04", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is not a moment: write 2006-01-02, 2006-01-02 15:04, 2006-01-02 15:04:05 or RFC 3339", s)
}

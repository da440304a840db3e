package tui

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/exp/golden"

	"gatehouse/destination"
	"gatehouse/destination/fake"
	"gatehouse/internal/testids"
	"gatehouse/ledger"
)

// reviewLedger records, on the fake clock, five actions around a stop:
// day 1 (03-14) c1 sent, c2 unknown, c3 approved, c4 proposed, c5 denied,
// then the stop; day 2 (03-15) a send of c3 queued by the stop, a second
// send of c1 blocked, c2 resolved by hand, the resume, c3 sent.
func reviewLedger(t testing.TB) (*ledger.Ledger, string) {
	t.Helper()
	l, clk := openLedger(t)
	ctx := context.Background()
	dest := fake.New()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	step := func(d time.Duration) { clk.Advance(d) }
	send := func(key, value string) error {
		step(time.Minute)
		_, err := l.Execute(ctx, ledger.ExecuteRequest{Key: key, Executor: "ack-workflow",
			Reread: []ledger.MaterialRead{{Source: "crm", Field: "consent", Value: value}}}, dest)
		return err
	}
	keys := map[string]string{}
	for _, c := range []string{"c1", "c2", "c3", "c5"} {
		step(time.Minute)
		keys[c] = proposeApproved(t, l, "T-"+c, "cust-"+c, "ack-workflow").Key
	}
	step(time.Minute)
	_, err := l.Claim(ctx, ledger.TaskRef{ID: "T-c4"}, "ack-workflow")
	must(err)
	a, err := l.Propose(ctx, ledger.Proposal{Task: ledger.TaskRef{ID: "T-c4"}, Customer: "cust-c4", Event: "enquiry-T-c4",
		ActionType: "reply_ack", Target: "T-c4", Recipient: "cust-c4@example.test", Subject: "We have your enquiry",
		Body: "Hello, we are on it.", Actor: "ack-workflow", Destination: fake.DefaultName})
	must(err)
	keys["c4"] = a.Key
	must(send(keys["c1"], "yes"))
	dest.Script(destination.OutcomeUnknown)
	if err := send(keys["c2"], "yes"); !errors.Is(err, ledger.ErrUnknownOutcome) {
		t.Fatal(err)
	}
	if err := send(keys["c5"], "no"); !errors.Is(err, ledger.ErrDenied) {
		t.Fatal(err)
	}
	step(time.Hour)
	must(l.Stop(ctx, "ops-lead", "duplicate acknowledgements reported"))
	clk.Set(epoch.Add(24 * time.Hour))
	if err := send(keys["c3"], "yes"); !errors.Is(err, ledger.ErrStopped) {
		t.Fatal(err)
	}
	if err := send(keys["c1"], "yes"); !errors.Is(err, ledger.ErrDuplicate) {
		t.Fatal(err)
	}
	step(time.Hour)
	_, err = l.ResolveUnknown(ctx, keys["c2"], "ops-lead", true, "found in the mailbox")
	must(err)
	step(time.Hour)
	must(l.Resume(ctx, "ops-lead", "cause fixed"))
	must(send(keys["c3"], "yes"))
	return l, keys["c3"]
}

func newTestReview(t *testing.T, w, h int) (*App, *Review, *ledger.Ledger) {
	t.Helper()
	l, _ := reviewLedger(t)
	rv := NewReview(NewTheme(true), quickFollow(ReviewConfig{Ledger: l, Actor: "olga", Source: "ledger.db"}))
	return newDriven(rv, w, h), rv, l
}

// quickFollow makes the follower's waits short: drive runs each wait it
// arms (and drops the poll that ends it), so model tests step the follower
// by hand without sitting out a second per screen.
func quickFollow(cfg ReviewConfig) ReviewConfig {
	cfg.Poll, cfg.MinInterval = time.Millisecond, time.Millisecond
	return cfg
}

// TestGoldenReview: the timeline, the rates and the state at the stop, at
// 80x24 and 200x50.
func TestGoldenReview(t *testing.T) {
	views := []struct {
		name string
		keys []string
	}{
		{"Timeline", []string{"x"}},                 // the selection on the stop
		{"Spans", []string{"v"}},                    // one row per action
		{"Rates", []string{"tab", "r"}},             // per hour
		{"AtAStop", []string{"tab", "tab", "down"}}, // the first action selected
	}
	for _, v := range views {
		for _, sz := range []struct{ w, h int }{{80, 24}, {200, 50}} {
			t.Run(v.name+"/"+sizeName(sz.w, sz.h), func(t *testing.T) {
				a, _, _ := newTestReview(t, sz.w, sz.h)
				typeKeys(a, v.keys...)
				golden.RequireEqual(t, testids.Mask(screenText(a)))
			})
		}
	}
}

// selectedKinds lists the kinds of the lines the timeline selects.
func selectedKinds(rv *Review) []string {
	var out []string
	for _, i := range rv.timeline.sel {
		out = append(out, string(rv.h.KindOf(rv.h.Events[i])))
	}
	return out
}

func TestReviewFilters(t *testing.T) {
	t.Run("KindCycles", func(t *testing.T) {
		a, rv, _ := newTestReview(t, 100, 30)
		all := len(rv.timeline.sel)
		typeKeys(a, "f") // denials
		if got := selectedKinds(rv); strings.Join(got, ",") != "denied" {
			t.Fatalf("denials: %v", got)
		}
		typeKeys(a, "f") // duplicate blocks
		if got := selectedKinds(rv); strings.Join(got, ",") != "duplicate_block" {
			t.Fatalf("duplicate blocks: %v", got)
		}
		typeKeys(a, "f", "f", "f", "f") // manual overrides
		if got := selectedKinds(rv); strings.Join(got, ",") != "reconciled,hold_released" {
			t.Fatalf("manual overrides: %v", got)
		}
		if !strings.Contains(screenText(a), "kind manual overrides · line 1 of 2") {
			t.Errorf("the filter line does not say what it selects:\n%s", screenText(a))
		}
		typeKeys(a, "c")
		if len(rv.timeline.sel) != all {
			t.Fatalf("clear: %d lines, want %d", len(rv.timeline.sel), all)
		}
	})
	t.Run("Actor", func(t *testing.T) {
		a, rv, _ := newTestReview(t, 100, 30)
		typeKeys(a, "a", "o", "p", "s", "enter")
		for _, i := range rv.timeline.sel {
			if got := rv.h.Actors[rv.h.Events[i].Actor]; got != "ops-lead" {
				t.Fatalf("actor filter ops selected a line by %s", got)
			}
		}
		// stop, resolved by hand (reconciled, sent), resume, its release.
		if len(rv.timeline.sel) != 5 {
			t.Fatalf("ops-lead's lines: %v", selectedKinds(rv))
		}
	})
	t.Run("CustomerOrTask", func(t *testing.T) {
		a, rv, _ := newTestReview(t, 100, 30)
		typeKeys(a, "/", "c", "4", "enter")
		if got := strings.Join(selectedKinds(rv), ","); got != "task_created,claimed,proposed" {
			t.Fatalf("customer c4: %s", got)
		}
	})
	t.Run("Window", func(t *testing.T) {
		a, rv, _ := newTestReview(t, 100, 30)
		typeKeys(a, "w")
		typeKeys(a, strings.Split("2025-03-15..", "")...)
		typeKeys(a, "enter")
		// day 2: refused_stopped, duplicate_block, reconciled, sent,
		// resumed, hold_released, attempt_started, sent.
		if got := strings.Join(selectedKinds(rv), ","); got != "refused_stopped,duplicate_block,reconciled,sent,resumed,hold_released,attempt_started,sent" {
			t.Fatalf("day 2: %s", got)
		}
	})
	t.Run("BadWindowKeepsThePrompt", func(t *testing.T) {
		a, rv, _ := newTestReview(t, 100, 30)
		typeKeys(a, "w", "s", "o", "o", "n", "enter")
		if rv.prompt != promptWindow || !strings.Contains(screenText(a), "window: write FROM..TO") {
			t.Fatalf("a bad window was accepted:\n%s", screenText(a))
		}
		typeKeys(a, "esc")
		if rv.prompt != promptNone || rv.filter.Since != 0 {
			t.Fatal("esc did not close the prompt unchanged")
		}
	})
}

func TestReviewJumps(t *testing.T) {
	a, rv, _ := newTestReview(t, 100, 30)
	typeKeys(a, "g")
	if rv.timeline.pos.cursor != 0 {
		t.Fatal("g did not go to the first line")
	}
	typeKeys(a, "x")
	at := rv.h.Events[rv.timeline.sel[rv.timeline.pos.cursor]]
	if rv.h.KindOf(at) != ledger.EvStopped {
		t.Fatalf("x went to %s, not the stop", rv.h.KindOf(at))
	}
	// From c3's proposal, n walks its span: approved, then (after the
	// stop) refused_stopped, hold_released, attempt_started, sent.
	typeKeys(a, "g", "/", "c", "3", "enter", "c")
	for rv.h.KindOf(rv.h.Events[rv.timeline.sel[rv.timeline.pos.cursor]]) != ledger.EvProposed {
		typeKeys(a, "down")
	}
	var walk []string
	for range 6 {
		typeKeys(a, "n")
		walk = append(walk, string(rv.h.KindOf(rv.h.Events[rv.timeline.sel[rv.timeline.pos.cursor]])))
	}
	if got := strings.Join(walk, ","); got != "approved,refused_stopped,hold_released,attempt_started,sent,sent" {
		t.Fatalf("n walked %s", got)
	}
	if !strings.Contains(screenText(a), "no other line of this action") {
		t.Errorf("the last n does not say there is no later line")
	}
	typeKeys(a, "N")
	if got := rv.h.KindOf(rv.h.Events[rv.timeline.sel[rv.timeline.pos.cursor]]); got != ledger.EvAttemptStarted {
		t.Fatalf("N went to %s", got)
	}
	typeKeys(a, "f", "x") // denials hold no stop
	if !strings.Contains(screenText(a), "no stop in the timeline as filtered") {
		t.Errorf("x without a stop says nothing:\n%s", screenText(a))
	}
}

// TestReviewSpans: v groups the selected lines by action; enter shows the
// lines of the action under the cursor.
func TestReviewSpans(t *testing.T) {
	a, rv, _ := newTestReview(t, 100, 30)
	typeKeys(a, "v")
	if len(rv.timeline.spanList) != 5 {
		t.Fatalf("%d spans, want one per action (5)", len(rv.timeline.spanList))
	}
	if got := rv.h.StatePath(rv.timeline.spanList[2].Action); got != "drafting › approved › held:stopped › approved › executing › sent" {
		t.Fatalf("c3's states: %s", got)
	}
	typeKeys(a, "f") // denials: only c5's span is left
	if len(rv.timeline.spanList) != 1 || !strings.Contains(rv.h.Key(rv.timeline.spanList[0].Action), "cust-c5") || !rv.timeline.spans {
		t.Fatalf("spans of denials: %+v", rv.timeline.spanList)
	}
	typeKeys(a, "c", "down", "down", "enter")
	if rv.timeline.spans || rv.filter.Subject == "" || !strings.Contains(rv.filter.Subject, "cust-c3") {
		t.Fatalf("enter on c3's span: spans %v, filter %+v", rv.timeline.spans, rv.filter)
	}
	if got := strings.Join(selectedKinds(rv), ","); got != "proposed,approved,refused_stopped,hold_released,attempt_started,sent" {
		t.Fatalf("c3's lines: %s", got)
	}
}

// TestReviewClicks: a click on a tab opens it, on a rate bucket filters the
// timeline to it, on a timeline line selects it.
func TestReviewClicks(t *testing.T) {
	a, rv, _ := newTestReview(t, 100, 30)
	click := func(x, y int) {
		_, cmd := a.Update(tea.MouseClickMsg{X: x, Y: y, Button: tea.MouseLeft})
		drive(a, cmd)
	}
	click(12, 1) // " Rates " after " Timeline "
	if rv.tab != tabRates {
		t.Fatalf("a click on Rates opened tab %d", rv.tab)
	}
	click(3, 1+ratesTop+1) // the second day
	if rv.tab != tabTimeline || len(rv.timeline.sel) != 8 {
		t.Fatalf("a click on day 2: tab %d, %d lines", rv.tab, len(rv.timeline.sel))
	}
	click(3, 1+listTop+2)
	if rv.timeline.pos.cursor != 2 {
		t.Fatalf("a click on the third line selected %d", rv.timeline.pos.cursor)
	}
}

// TestReviewStopActionOpensItsLines: enter on an action at the stop shows
// its lines in the timeline, from the first one after the stop.
func TestReviewStopActionOpensItsLines(t *testing.T) {
	a, rv, _ := newTestReview(t, 100, 30)
	typeKeys(a, "tab", "tab")
	for rv.atStop.pos.cursor < len(rv.atStop.keys) && !strings.Contains(rv.atStop.keys[rv.atStop.pos.cursor], "cust-c3") {
		typeKeys(a, "down")
	}
	typeKeys(a, "enter")
	if rv.tab != tabTimeline || !strings.Contains(rv.filter.Subject, "cust-c3") {
		t.Fatalf("enter on c3 at the stop: tab %d, filter %+v", rv.tab, rv.filter)
	}
	if got := rv.h.KindOf(rv.h.Events[rv.timeline.sel[rv.timeline.pos.cursor]]); got != ledger.EvRefusedStopped {
		t.Fatalf("the selection is on %s, not the first line after the stop", got)
	}
}

func TestReviewRateBucketFiltersTimeline(t *testing.T) {
	a, rv, _ := newTestReview(t, 100, 30)
	typeKeys(a, "tab")
	if len(rv.rates.buckets) != 2 {
		t.Fatalf("%d day buckets, want 2", len(rv.rates.buckets))
	}
	if rv.rates.buckets[0].M.Denied != 1 || rv.rates.buckets[0].M.Sent != 1 || rv.rates.buckets[1].M.Sent != 2 || rv.rates.buckets[1].M.ManualOverrides != 2 {
		t.Fatalf("per day: %+v", rv.rates.buckets)
	}
	typeKeys(a, "G", "enter")
	if rv.tab != tabTimeline || len(rv.timeline.sel) != 8 {
		t.Fatalf("enter on day 2: tab %d, %d lines", rv.tab, len(rv.timeline.sel))
	}
	if !strings.Contains(screenText(a), "window 2025-03-15 00:00:00..2025-03-16 00:00:00") {
		t.Errorf("the timeline does not say its window:\n%s", screenText(a))
	}
}

// reviewedCopy backs the review ledger up to a file and opens the copy as
// the review command does (read-only, writes only on demand); it returns
// the copy's path and bytes before the test, and the open handle.
func reviewedCopy(t *testing.T) (path string, before map[string][]byte, l *ledger.Ledger) {
	t.Helper()
	src, _ := reviewLedger(t)
	// A live copy, as a restore makes it: a backup file itself refuses
	// every write, and operating mode must be able to write.
	dir := t.TempDir()
	backup, path := filepath.Join(dir, "backup.db"), filepath.Join(dir, "ledger.db")
	if _, err := src.Backup(context.Background(), backup, false); err != nil {
		t.Fatal(err)
	}
	if _, err := ledger.Restore(context.Background(), path, backup); err != nil {
		t.Fatal(err)
	}
	before = fileBytes(t, path)
	l, err := ledger.OpenReadOnly(path, ledger.WithWritesOnDemand())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return path, before, l
}

// TestReviewNeverWritesUntilOperatingMode drives every view and key of the
// review on a ledger opened as the command opens it and finds the file and
// WAL unchanged; then operating mode, confirmed with a reason, is recorded
// in the history and opens the inspector.
func TestReviewNeverWritesUntilOperatingMode(t *testing.T) {
	path, before, l := reviewedCopy(t)
	rv := NewReview(NewTheme(true), quickFollow(ReviewConfig{Ledger: l, Actor: "olga", Source: "ledger.db"}))
	a := newDriven(rv, 100, 30)
	typeKeys(a, "x", "n", "N", "f", "c", "a", "o", "enter", "c", "/", "c", "1", "enter", "tab", "r", "enter", "tab", "tab", "x", "tab")
	if !l.ReadOnly() {
		t.Fatal("the review opened the ledger for writing")
	}
	if after := fileBytes(t, path); !bytes.Equal(before[""], after[""]) || !bytes.Equal(before["-wal"], after["-wal"]) {
		t.Fatal("the review changed the ledger or its WAL")
	}

	typeKeys(a, "O", "enter")
	if !strings.Contains(screenText(a), errNoReason.Error()) {
		t.Fatalf("operating mode without a reason:\n%s", screenText(a))
	}
	typeKeys(a, strings.Split("reconcile c2 by hand", "")...)
	typeKeys(a, "enter")
	if _, ok := a.top().(*Inspector); !ok || !rv.operating {
		t.Fatalf("operating mode did not open the inspector: %T", a.top())
	}
	evs, err := l.History(context.Background(), ledger.HistoryFilter{Newest: true, Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	if e := evs[0]; e.Kind != ledger.EvOperating || e.Actor != "olga" || e.Reason != "reconcile c2 by hand" {
		t.Fatalf("operating mode recorded as %+v", e)
	}
	typeKeys(a, "esc")
	if !strings.Contains(screenText(a), "review · ledger.db · operating mode") {
		t.Errorf("the title does not say operating mode:\n%s", screenText(a))
	}
	lines := len(rv.h.Events)
	typeKeys(a, "l")
	if len(rv.h.Events) != lines+1 || rv.h.KindOf(rv.h.Events[lines]) != ledger.EvOperating {
		t.Fatalf("the reload did not read the switch: %d lines, had %d", len(rv.h.Events), lines)
	}
}

// fileBytes reads a ledger and its WAL ("" and "-wal"; a missing WAL is nil).
func fileBytes(t *testing.T, path string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for _, suffix := range []string{"", "-wal"} {
		b, err := os.ReadFile(path + suffix)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
		out[suffix] = b
	}
	return out
}

// TestReviewReloadErrorKeepsTheHistory: a reload that fails says so and
// keeps what was read.
func TestReviewReloadErrorKeepsTheHistory(t *testing.T) {
	a, rv, l := newTestReview(t, 80, 24)
	lines := len(rv.h.Events)
	l.Close()
	typeKeys(a, "l")
	if rv.loadErr != nil || len(rv.h.Events) != lines || !strings.Contains(screenText(a), "✗ review") {
		t.Fatalf("a failed reload:\n%s", screenText(a))
	}
}

func TestReviewLoadError(t *testing.T) {
	l, _ := openLedger(t)
	l.Close()
	rv := NewReview(NewTheme(true), quickFollow(ReviewConfig{Ledger: l, Source: "ledger.db"}))
	a := newDriven(rv, 80, 24)
	if !strings.Contains(screenText(a), "The history could not be read") {
		t.Fatalf("a closed ledger:\n%s", screenText(a))
	}
}

package tui

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/exp/teatest/v2"

	"gatehouse/ledger"
)

func newTestInspector(l *ledger.Ledger) *Inspector {
	return NewInspector(NewTheme(true), InspectorConfig{Ledger: l, Poll: -1, Source: "test.db", Actor: "olga"})
}

// TestInspectorTabsShowTheLedger walks every tab of the inspector over the
// seeded ledger (one action sent, one unknown, one held, one denied) and
// checks what each must show, then opens the denied action's detail.
func TestInspectorTabsShowTheLedger(t *testing.T) {
	a := newDriven(newTestInspector(seedLedger(t)), 80, 24)
	tabs := []struct {
		name string
		want []string
	}{
		{"Tasks", []string{"1–4 of 4", "T-1001  cust-ada", "bea", "T-1004  cust-dan", "o take over"}},
		{"Actions", []string{"1–4 of 4", "denied   T-1004", "held     T-1003", "unknown  T-1002", "sent     T-1001", "s filter state"}},
		{"HoldsAndUnknown", []string{"1–2 of 2", "held     operator  T-1003", "unknown            T-1002", "c reconcile"}},
		{"Metrics", []string{"intended actions            4", "confirmed                   1", "held now                    1", "unknown now                 1"}},
		{"Stop", []string{"Execution is running.", "S stops every attempt everywhere"}},
	}
	for i, tab := range tabs {
		if i > 0 {
			typeKeys(a, "tab")
		}
		s := screenText(a)
		for _, want := range tab.want {
			if !strings.Contains(s, want) {
				t.Errorf("%s tab lacks %q:\n%s", tab.name, want, s)
			}
		}
	}
	typeKeys(a, "tab", "tab", "enter") // back to Actions, open the first row
	s := screenText(a)
	for _, want := range []string{"Action gh1:cust-dan:enquiry-T-1004:reply_ack:T-1004:r0", "crm.consent changed since approval",
		"via        fake://destination", "to cust-dan@example.test from gatehouse@localhost via fake://destination",
		`before any attempt  crm.consent  "yes" → "no"  DIFFERS`, "Attempts", "more lines"} {
		// The state's reason wraps where its line ends: look for it in the words too.
		if !strings.Contains(s, want) && !strings.Contains(strings.Join(strings.Fields(s), " "), want) {
			t.Errorf("the denied action's detail lacks %q:\n%s", want, s)
		}
	}
	typeKeys(a, "pgdown")
	if s := screenText(a); !strings.Contains(s, "none") {
		t.Errorf("a page down does not show that the denied action has no attempt:\n%s", s)
	}
}

// TestInspectorFollowsAnotherWriter writes to the ledger through a second
// handle (as another process would) while the inspector runs, and waits for
// the new task to appear on screen.
func TestInspectorFollowsAnotherWriter(t *testing.T) {
	l := seedLedger(t)
	other, err := ledger.Open(l.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	in := NewInspector(NewTheme(true), InspectorConfig{Ledger: l, Source: "ledger.db"})
	tm, rec := startApp(t, NewApp(NewTheme(true), in), 100, 30)
	rec.waitText(t, tm, "T-1001")
	done := make(chan struct{})
	go func() {
		defer close(done)
		proposeApproved(t, other, "T-7777", "cust-late", "late-workflow")
	}()
	rec.waitText(t, tm, "T-7777")
	<-done
	if s := rec.screen(); !strings.Contains(s, "late-workflow") {
		t.Fatalf("the new owner is not on screen:\n%s", s)
	}
	tm.Send(press("q"))
	tm.WaitFinished(t, teatest.WithFinalTimeout(10*time.Second))
}

func TestInspectorKeys(t *testing.T) {
	tests := []struct {
		name  string
		keys  []string
		want  []string // on screen afterwards
		quit  bool
		check func(t *testing.T, a *App, in *Inspector)
	}{
		{name: "TabCyclesTabs", keys: []string{"tab"}, want: []string{"why"},
			check: func(t *testing.T, _ *App, in *Inspector) { wantTab(t, in, tabActions) }},
		{name: "TabWrapsAround", keys: []string{"tab", "tab", "tab", "tab", "tab"}, want: []string{"viewers"}},
		{name: "JMovesDown", keys: []string{"j", "j"},
			check: func(t *testing.T, _ *App, in *Inspector) { wantCursor(t, in, 2) }},
		{name: "DownStopsAtLast", keys: []string{"down", "down", "down", "down", "down", "down"},
			check: func(t *testing.T, _ *App, in *Inspector) { wantCursor(t, in, 3) }},
		{name: "KUpAfterLast", keys: []string{"G", "k"},
			check: func(t *testing.T, _ *App, in *Inspector) { wantCursor(t, in, 2) }},
		{name: "SearchFilters", keys: []string{"tab", "/", "c", "u", "s", "t", "-", "b", "enter"},
			want: []string{`search "cust-b"`, "1–1 of 1", "cust-bob"}},
		{name: "SearchTypesQ", keys: []string{"/", "q"}, want: []string{"/q"}},
		{name: "SearchEscCancels", keys: []string{"/", "x", "esc"}, want: []string{"1–4 of 4"}},
		{name: "StateFilterCycles", keys: []string{"tab", "s", "s", "s", "s", "s"},
			want: []string{"state sent", "1–1 of 1", "cust-ada"}},
		{name: "EnterOpensDetail", keys: []string{"tab", "enter"}, want: []string{"Material checks", "DIFFERS", "via        fake://destination", "from       gatehouse@localhost"}},
		{name: "EscGoesBack", keys: []string{"tab", "enter", "esc"}, want: []string{"1–4 of 4"}},
		{name: "HelpShowsAllKeys", keys: []string{"?"}, want: []string{"Keys", "release hold", "resume"}},
		{name: "AnyKeyClosesHelp", keys: []string{"?", "j"}, want: []string{"1–4 of 4"}},
		{name: "QQuits", keys: []string{"q"}, quit: true},
		{name: "CtrlCQuitsFromSearch", keys: []string{"/", "ctrl+c"}, quit: true},
		{name: "HoldNeedsReason", keys: []string{"tab", "j", "h", "enter"},
			want: []string{"Hold gh1:cust-cyd", "a reason is required"}},
		{name: "ReleaseRefusedInGateWords", keys: []string{"tab", "G", "u", "o", "k", "enter"},
			want: []string{"✗ release hold on cust-ada:enquiry-T-1001:reply_ack → not done (exit 1):", "not held (it is sent)"},
			check: func(t *testing.T, a *App, _ *Inspector) {
				if s := screenText(a); strings.Count(s, "gh1:cust-ada") > 0 && strings.Index(s, "not held") > strings.Index(s, "gh1:cust-ada") {
					t.Fatalf("the key comes before the reason:\n%s", s)
				}
			}},
		{name: "HoldRecorded", keys: []string{"tab", "G", "k", "h", "w", "a", "i", "t", "enter"},
			want: []string{"hold cust-bob:enquiry-T-1002:reply_ack → held: held by olga: wait"}},
		{name: "FormEscCancels", keys: []string{"tab", "h", "esc"}, want: []string{"cancelled: Hold"}},
		{name: "ArrivedRefusedUnlessUnknown", keys: []string{"tab", "G", "Y", "o", "k", "enter"},
			want: []string{"✗ record as arrived cust-ada:enquiry-T-1001:reply_ack → nothing to reconcile;", "its outcome is not unknown (it is sent)"}},
		{name: "StopAndResume", keys: []string{"S", "x", "enter"}, want: []string{"■ STOPPED", "stop all execution → stopped: no attempt starts anywhere until resume"},
			check: func(t *testing.T, a *App, _ *Inspector) {
				typeKeys(a, "R", "o", "k", "enter")
				if s := screenText(a); strings.Contains(s, "■ STOPPED") {
					t.Fatalf("still stopped after resume:\n%s", s)
				}
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := newTestInspector(seedLedger(t))
			a := newDriven(in, 80, 24)
			if quit := typeKeys(a, tc.keys...); quit != tc.quit {
				t.Fatalf("quit = %v, want %v", quit, tc.quit)
			}
			s := screenText(a)
			for _, w := range tc.want {
				if !strings.Contains(s, w) {
					t.Errorf("screen lacks %q:\n%s", w, s)
				}
			}
			if tc.check != nil {
				tc.check(t, a, in)
			}
		})
	}
}

func wantTab(t *testing.T, in *Inspector, want tab) {
	t.Helper()
	if in.tab != want {
		t.Fatalf("tab = %v, want %v", in.tab, want)
	}
}

func wantCursor(t *testing.T, in *Inspector, want int) {
	t.Helper()
	if got := in.current().pos.cursor; got != want {
		t.Fatalf("cursor = %d, want %d", got, want)
	}
}

// TestInspectorSelectionFollowsKey: newer rows arriving above the selection
// (a proposal elsewhere, a task that changed) leave the same key or task
// selected; a scrolled window moves with it, so it keeps its screen line.
func TestInspectorSelectionFollowsKey(t *testing.T) {
	tests := []struct {
		name   string
		h      int
		keys   []string
		insert int
		line   int // the selection's screen line afterwards
	}{
		// A list that fits shows the newer rows above the selection.
		{"Actions", 24, []string{"tab", "j"}, 1, 2},
		{"ActionsTwoNewer", 24, []string{"tab", "j", "j"}, 2, 4},
		{"Tasks", 24, []string{"j", "j"}, 1, 3},
		{"Holds", 24, []string{"tab", "tab", "j"}, 1, 2},
		// A window of three rows scrolls so the selection keeps its line.
		{"ActionsScrolledWindow", 10, []string{"tab", "j", "j"}, 2, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := seedLedger(t)
			if tc.name == "Holds" {
				if _, err := l.Hold(context.Background(), proposeApproved(t, l, "T-1010", "cust-eli", "wf").Key, "olga", "wait"); err != nil {
					t.Fatal(err)
				}
			}
			in := newTestInspector(l)
			a := newDriven(in, 80, tc.h)
			typeKeys(a, tc.keys...)
			before := in.keyAt(in.tab, in.current().pos.selected())
			if before == "" {
				t.Fatal("nothing selected")
			}
			for i := range tc.insert {
				a := proposeApproved(t, l, fmt.Sprintf("T-20%02d", i), fmt.Sprintf("cust-new%d", i), "late-workflow")
				if tc.name == "Holds" {
					if _, err := l.Hold(context.Background(), a.Key, "olga", "wait"); err != nil {
						t.Fatal(err)
					}
				}
			}
			drive(a, in.checkChanges())
			li := in.current()
			if got := in.keyAt(in.tab, li.pos.selected()); got != before {
				t.Fatalf("selected %q after the reload, want %q still\n%s", got, before, screenText(a))
			}
			if li.pos.selected() != tc.line {
				t.Fatalf("selection on line %d, want %d", li.pos.selected(), tc.line)
			}
			typeKeys(a, "k") // and moving still moves
			if got := in.keyAt(in.tab, li.pos.selected()); got == before {
				t.Fatalf("k left %q selected", got)
			}
		})
	}
}

// TestMetricsTabShowsTheReviewsFigures: the figures a review reports for the
// first week (stale proposals, a person's overrides, unmatched source rows
// per audience release) are on the live Metrics tab too.
func TestMetricsTabShowsTheReviewsFigures(t *testing.T) {
	m := ledger.Metrics{Intended: 9, StaleProposals: 2, ManualOverrides: 3,
		UnmatchedByRelease: map[string]int{"rel-b": 4, "rel-a": 1}}
	s := strings.Join(metricsLines(NewTheme(true), m), "\n")
	for _, want := range []string{"stale proposals             2", "manual overrides            3",
		"unmatched source rows, by audience release", "rel-a                       1\n  rel-b                       4"} {
		if !strings.Contains(s, want) {
			t.Errorf("metrics lack %q:\n%s", want, s)
		}
	}
	if s := strings.Join(metricsLines(NewTheme(true), ledger.Metrics{}), "\n"); strings.Contains(s, "unmatched") {
		t.Errorf("a ledger without releases shows an unmatched section:\n%s", s)
	}
}

package tui

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gatehouse/scenarios"
)

func lookupScenario(t testing.TB, name string) *scenarios.Scenario {
	t.Helper()
	sc, err := scenarios.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

func newTestRehearsal(t testing.TB, name string) *Rehearsal {
	r := NewRehearsal(NewTheme(true), lookupScenario(t, name), nil, 0)
	t.Cleanup(r.Close)
	return r
}

func TestRehearsalKeys(t *testing.T) {
	tests := []struct {
		name string
		keys []string
		want []string
	}{
		{"SpaceSteps", []string{"space"}, []string{"step 1 of 6", "did 1: propose ack"}},
		{"NSteps", []string{"n", "n"}, []string{"step 2 of 6", "next: wf-ack's process dies"}},
		{"RestartStartsOver", []string{"n", "n", "r"}, []string{"step 0 of 6"}},
		{"PlayShowsSpeed", []string{"+", "+", "p"}, []string{"step 1 of 6 · playing, 250ms per step"}},
		{"PlayThenPause", []string{"+", "+", "p", "p"}, []string{"step 1 of 6 · paused"}},
		{"EnterOpensDetail", []string{"n", "enter"}, []string{"Action gh1:cust-ada", "Approvals"}},
		{"InspectorOnRunLedger", []string{"n", "i"}, []string{"Tasks", "t-3001"}},
		{"StepsToTheEnd", []string{"n", "n", "n", "n", "n", "n", "n"}, []string{"finished: PASSED", "the rehearsal is over"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := newDriven(newTestRehearsal(t, "interrupted-after-accept"), 120, 40)
			typeKeys(a, tc.keys...)
			s := screenText(a)
			for _, w := range tc.want {
				if !strings.Contains(s, w) {
					t.Errorf("screen lacks %q:\n%s", w, s)
				}
			}
		})
	}
}

// TestRehearsalShowsAPausedExecutor: the paused-executor built-in says in
// words what the pause and the wake-up do, and plays to a pass: the woken
// executor's send refused, one arrival.
func TestRehearsalShowsAPausedExecutor(t *testing.T) {
	a := newDriven(newTestRehearsal(t, "paused-executor"), 120, 40)
	typeKeys(a, "n", "n")
	if s := screenText(a); !strings.Contains(s, "next: wf-ack's executor starts sending ack and stands still (before_data)") {
		t.Errorf("screen lacks the pause's sentence:\n%s", s)
	}
	typeKeys(a, "n", "n", "n", "n", "n", "n", "n", "n")
	if s := screenText(a); !strings.Contains(s, "next: the paused executor of ack wakes and goes on with its send") {
		t.Errorf("screen lacks the wake-up's sentence:\n%s", s)
	}
	typeKeys(a, "n")
	s := screenText(a)
	for _, w := range []string{"did 11: resume_executor ack → not_delivered", "finished: PASSED"} {
		if !strings.Contains(s, w) {
			t.Errorf("screen lacks %q:\n%s", w, s)
		}
	}
}

// TestRehearsalShowsAudience: the reconciliation summary adds up on every
// screen size; a tall screen also shows recipients across their states.
func TestRehearsalShowsAudience(t *testing.T) {
	tests := []struct {
		name          string
		width, height int
		want, absent  []string
	}{
		{"Short", 80, 24, []string{"Audience hours-2026-04: 9 rows = 1 errors + 1 unmatched + 2", "finished: PASSED"},
			[]string{"eligible → sent"}},
		{"Tall", 200, 50, []string{"9 rows = 1 errors + 1 unmatched + 2 duplicates + 5 resolved = 2 excluded + 1 removed + 2 eligible",
			"c-ada              eligible → sent", "c-ben              eligible → denied", "excluded: no consent (no)",
			"removed: removed by lead: asked for no more notices by phone"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := newDriven(newTestRehearsal(t, "audience-messy-file"), tc.width, tc.height)
			typeKeys(a, repeat("n", 7)...)
			s := screenText(a)
			for _, w := range tc.want {
				if !strings.Contains(s, w) {
					t.Errorf("screen lacks %q:\n%s", w, s)
				}
			}
			for _, w := range tc.absent {
				if strings.Contains(s, w) {
					t.Errorf("short screen shows %q:\n%s", w, s)
				}
			}
		})
	}
}

// TestRehearsalTableScrollsToSelection: on a short screen the three columns
// show a window of lines that follows the selection.
func TestRehearsalTableScrollsToSelection(t *testing.T) {
	a := newDriven(newTestRehearsal(t, "stop-mid-batch"), 100, 18)
	typeKeys(a, repeat("n", 15)...)
	if s := screenText(a); !strings.Contains(s, "lines 1–") {
		t.Fatalf("no scroll footer at the top:\n%s", s)
	}
	typeKeys(a, "j", "j")
	s := screenText(a)
	if !strings.Contains(s, "of 3 (3 keys)") || strings.Contains(s, "lines 1–1 ") {
		t.Fatalf("the window did not follow the selection:\n%s", s)
	}
}

func TestHomeEscClearsFilter(t *testing.T) {
	list, err := scenarios.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	a := newDriven(NewHome(NewTheme(true), HomeConfig{Scenarios: list}), 100, 40)
	typeKeys(a, "/", "o", "v", "e", "r", "l", "enter")
	if s := screenText(a); strings.Contains(s, "webhook-twice") || !strings.Contains(s, "overlapping-rep") {
		t.Fatalf("filter not applied:\n%s", s)
	}
	typeKeys(a, "esc")
	if s := screenText(a); !strings.Contains(s, "webhook-twice") {
		t.Fatalf("esc kept the filter:\n%s", s)
	}
}

// TestRehearsalShowsUnmatchedArrival: an arrival whose Message-ID no
// attempt carries gets a line of its own, marked, at every width.
func TestRehearsalShowsUnmatchedArrival(t *testing.T) {
	for _, w := range []int{80, 100, 200} {
		t.Run(fmt.Sprint(w), func(t *testing.T) {
			r := newTestRehearsal(t, "webhook-twice")
			a := newDriven(r, w, 30)
			at := epoch.Add(5 * time.Second)
			r.snap.Rows = []scenarios.Row{{Key: "gh1:cust-ada:enquiry-5001:reply_ack:t-5001:r0", Name: "ack", State: "sent", Owner: "wf-ack",
				Attempts: []scenarios.AttemptCell{{Number: 1, TransportID: "gh-aa-a1@gatehouse.invalid", Outcome: "accepted"}},
				Arrivals: []scenarios.ArrivalCell{
					{MessageID: "gh-aa-a1@gatehouse.invalid", To: "ada@example.com", Subject: "Hello", At: at, Attempt: 1},
					{MessageID: "by-hand-7@elsewhere.test", To: "ada@example.com", Subject: "Hello again", At: at, Duplicate: true, Unmatched: true},
				}}}
			r.pos.setTotal(1)
			s := screenText(a)
			var line string
			for _, l := range strings.Split(s, "\n") {
				if strings.Contains(l, "UNMATCHED") {
					line = l
				}
			}
			if line == "" || !strings.Contains(line, "by-hand-7") || strings.Contains(line, "accepted") {
				t.Fatalf("no line of its own for the unmatched arrival:\n%s", s)
			}
		})
	}
}

// TestRehearsalColumnsKeepTheirWidths: the three columns' header does not
// move between steps, from the first to the last, at any width.
func TestRehearsalColumnsKeepTheirWidths(t *testing.T) {
	for _, name := range []string{"stop-mid-batch", "audience-messy-file", "interrupted-before-accept", "deliberate-correction"} {
		for _, w := range []int{80, 100, 200} {
			t.Run(fmt.Sprintf("%s/%d", name, w), func(t *testing.T) {
				r := newTestRehearsal(t, name)
				a := newDriven(r, w, 40)
				var first string
				for step := 0; step <= len(r.sc.Steps); step++ {
					var header string
					for _, l := range strings.Split(screenText(a), "\n") {
						if strings.HasPrefix(l, "action ") {
							header = l
						}
					}
					switch {
					case header == "":
					case first == "":
						first = header
					case header != first:
						t.Fatalf("after step %d the columns moved:\n%s\nwas\n%s", step, header, first)
					}
					typeKeys(a, "n")
				}
				if first == "" {
					t.Fatal("the columns never showed")
				}
			})
		}
	}
}

// TestRehearsalSelectionFollowsKey: a step that adds a row above the
// selected one leaves the same key selected.
func TestRehearsalSelectionFollowsKey(t *testing.T) {
	r := newTestRehearsal(t, "webhook-twice")
	a := newDriven(r, 100, 30)
	row := func(key string) scenarios.Row { return scenarios.Row{Key: key, Name: key, State: "drafting"} }
	r.snap.Rows = []scenarios.Row{row("a"), row("b")}
	r.follow()
	typeKeys(a, "j")
	if r.selKey != "b" {
		t.Fatalf("selected %q, want b", r.selKey)
	}
	snap := r.snap
	snap.Rows = []scenarios.Row{row("new"), row("a"), row("b")}
	r.onStepped(steppedMsg{snap: snap})
	if r.selKey != "b" || r.pos.cursor != 2 {
		t.Fatalf("selected %q at %d after a row arrived above, want b at 2", r.selKey, r.pos.cursor)
	}
}

// TestRehearsalShowsRuns: a step that runs a command shows the command, how
// it ended and its last line of output in the rehearsal view.
func TestRehearsalShowsRuns(t *testing.T) {
	file := filepath.Join(t.TempDir(), "runs.yaml")
	src := `name: runs
title: A command in the rehearsal view
description: it prints and exits
world:
  actors: [{id: wf, kind: workflow}]
steps:
  - {do: run_workflow, actor: wf, shell: "echo first; echo handled enquiry-1; exit 10", expect_exit: 10}
expect:
  arrivals: {total: 0}
`
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	sc, err := scenarios.ParseFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if got := describeStep(sc, sc.Steps[0]); got != `run wf's command: sh -c echo first; echo handled enquiry-1; exit 10` {
		t.Errorf("step described as %q", got)
	}
	r := NewRehearsal(NewTheme(true), sc, nil, 0)
	t.Cleanup(r.Close)
	a := newDriven(r, 100, 30)
	typeKeys(a, "n")
	s := screenText(a)
	for _, w := range []string{"did 1: run_workflow by wf → exit 10", `$ sh -c "echo first; echo handled enquiry-1; exit 10" → exit 10`, "│ handled enquiry-1"} {
		if !strings.Contains(s, w) {
			t.Errorf("screen lacks %q:\n%s", w, s)
		}
	}
}

// TestHomeSaysAFileRunsCommands: selecting a scenario file that starts
// programs lists them before anyone rehearses it.
func TestHomeSaysAFileRunsCommands(t *testing.T) {
	sc, err := scenarios.ParseFile(filepath.Join("..", "examples", "ack-takeover.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	a := newDriven(NewHome(NewTheme(true), HomeConfig{Scenarios: []*scenarios.Scenario{sc}}), 100, 40)
	if s := screenText(a); !strings.Contains(s, "runs: ./ack.sh t-4201 cust-ada enquiry-4201 ada@example.com") {
		t.Fatalf("home does not list the command:\n%s", s)
	}
}

// TestRehearsalDetailSpeaksTheScreensNames: the rehearsal screen names the
// mailbox as its reports do (its port changes every run); the action detail
// opened from it must use the same names, not the run's loopback address.
func TestRehearsalDetailSpeaksTheScreensNames(t *testing.T) {
	a := newDriven(newTestRehearsal(t, "interrupted-after-accept"), 120, 200)
	typeKeys(a, "n", "n", "n", "n", "n", "n")
	if s := screenText(a); !strings.Contains(s, scenarios.MailboxName) {
		t.Fatalf("the rehearsal screen does not name the mailbox %s:\n%s", scenarios.MailboxName, s)
	}
	typeKeys(a, "enter")
	s := screenText(a)
	for _, want := range []string{"Attempts", "via " + scenarios.MailboxName + " (records at " + scenarios.MailboxAPIName + ")"} {
		if !strings.Contains(s, want) {
			t.Errorf("detail lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "127.0.0.1") {
		t.Errorf("detail shows the run's loopback address instead of the mailbox's name:\n%s", s)
	}
}

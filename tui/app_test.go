package tui

import (
	"context"
	"errors"
	"strings"
	"testing"

	"gatehouse/scenarios"
)

func newTestHome(t *testing.T) *Home {
	t.Helper()
	list, err := scenarios.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	h := NewHome(NewTheme(true), HomeConfig{Scenarios: list,
		NewDemo: func(context.Context) (Screen, error) { d, _ := newTestDemo(t); return d, nil }})
	t.Cleanup(h.Close)
	return h
}

// TestStatusBelongsToItsScreen: a status line is shown only while the
// screen that set it is on top, so the demo's last words do not follow the
// trainer into the next rehearsal.
func TestStatusBelongsToItsScreen(t *testing.T) {
	a := newDriven(newTestHome(t), 80, 24)
	typeKeys(a, "d")
	typeKeys(a, repeat("space", len(demoSteps)+1)...)
	const over = "The demonstration is over"
	if s := screenText(a); !strings.Contains(s, over) {
		t.Fatalf("the demo does not say it is over:\n%s", s)
	}
	typeKeys(a, "esc")
	if s := screenText(a); strings.Contains(s, over) {
		t.Fatalf("the demo's status stayed on the home screen:\n%s", s)
	}
	typeKeys(a, "enter")
	if s := screenText(a); strings.Contains(s, over) || !strings.Contains(s, "step 0 of") {
		t.Fatalf("the demo's status followed into the rehearsal:\n%s", s)
	}
}

// TestHelpLineKeepsQuit: at 80 columns every screen's help line ends with
// help and quit (and back below the first screen), its own keys cut first.
func TestHelpLineKeepsQuit(t *testing.T) {
	tests := []struct {
		name string
		keys []string
		back bool
	}{
		{"Home", nil, false},
		{"Rehearsal", []string{"enter"}, true},
		{"Detail", []string{"enter", "n", "enter"}, true},
		{"Inspector", []string{"enter", "n", "i", "tab"}, true},
		{"Demo", []string{"d"}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := newDriven(newTestHome(t), 80, 24)
			typeKeys(a, tc.keys...)
			lines := strings.Split(screenText(a), "\n")
			last := strings.TrimRight(lines[len(lines)-1], " ")
			want := "? help • q quit"
			if tc.back {
				want = "esc back • " + want
			}
			if !strings.HasSuffix(last, want) || strings.Contains(last, "…") {
				t.Fatalf("help line %q does not end with %q", last, want)
			}
		})
	}
}

// TestFullHelpFitsTwoColumns: the ? help of the busiest screen fits 80x24
// in two columns, nothing cut.
func TestFullHelpFitsTwoColumns(t *testing.T) {
	a := newDriven(newTestInspector(seedLedger(t)), 80, 24)
	typeKeys(a, "tab", "?")
	s := screenText(a)
	for _, want := range []string{"you found it did not arrive", "release hold", "filter state", "resume", "quit"} {
		if !strings.Contains(s, want) {
			t.Errorf("help lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "…") {
		t.Errorf("help is cut:\n%s", s)
	}
}

// TestHomeFilterKeepsColumnsAndSelection: filtering narrows neither the
// name column nor changes the selected scenario while it is shown, and a
// filter nothing matches says so.
func TestHomeFilterKeepsColumnsAndSelection(t *testing.T) {
	h := newTestHome(t)
	a := newDriven(h, 80, 24)
	header := func() int {
		for _, l := range strings.Split(screenText(a), "\n") {
			if strings.HasPrefix(l, "scenario ") {
				return strings.Index(l, "title")
			}
		}
		t.Fatalf("no table header:\n%s", screenText(a))
		return 0
	}
	before := header()
	typeKeys(a, "j", "j", "j", "j") // interrupted-before-accept
	typeKeys(a, "/", "i", "n", "t", "e", "r", "enter")
	if got := h.selected().Name; got != "interrupted-before-accept" {
		t.Fatalf("selected %s after filtering", got)
	}
	if after := header(); after != before {
		t.Fatalf("the title column moved from %d to %d", before, after)
	}
	typeKeys(a, "/", "z", "z", "z", "enter")
	if s := screenText(a); !strings.Contains(s, "no matches") {
		t.Fatalf("an empty filter result does not say so:\n%s", s)
	}
}

// TestDemoOpensInACommand: opening the takeover demo starts a mailbox and
// a ledger, so it runs as the app's command, never inside Update; a
// failure to open it is shown in the status line.
func TestDemoOpensInACommand(t *testing.T) {
	calls := 0
	h := NewHome(NewTheme(true), HomeConfig{NewDemo: func(ctx context.Context) (Screen, error) {
		calls++
		if ctx == nil || ctx.Err() != nil {
			t.Error("the demo opened without the app's live context")
		}
		return nil, errors.New("demo: start mailbox: address in use")
	}})
	a := newDriven(h, 80, 24)
	_, cmd := a.Update(press("d"))
	if calls != 0 {
		t.Fatal("Update opened the demo itself")
	}
	drive(a, cmd)
	if calls != 1 {
		t.Fatalf("the command opened the demo %d times", calls)
	}
	if s := screenText(a); !strings.Contains(s, "✗ demo: start mailbox: address in use") {
		t.Fatalf("the failure is not shown:\n%s", s)
	}
}

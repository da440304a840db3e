package tui

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"

	"gatehouse/destination/fake"
	"gatehouse/fakes"
	"gatehouse/ledger"
)

// fakeArrivals shows what a fake.Destination holds, stamped with the
// pretend clock's time when the demo first read it (right after the send:
// the clock moves before an act, never during one).
type fakeArrivals struct {
	dest *fake.Destination
	clk  *fakes.Clock
	mu   *sync.Mutex
	seen map[string]time.Time
}

func (f fakeArrivals) Arrivals(context.Context) ([]Arrival, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []Arrival
	for _, m := range f.dest.Arrived() {
		at, ok := f.seen[m.TransportID]
		if !ok {
			at = f.clk.Now()
			f.seen[m.TransportID] = at
		}
		out = append(out, Arrival{ActionKey: m.ActionKey, MessageID: m.TransportID, To: m.To, Subject: m.Subject, At: at})
	}
	return out, nil
}

// demoWorlds opens the demo's worlds for a test: each a fresh ledger in the
// test's directory and a fake destination, on a pretend clock at epoch.
type demoWorlds struct {
	t      testing.TB
	mu     sync.Mutex
	opened []*ledger.Ledger
	closed int
}

func (dw *demoWorlds) open(context.Context) (DemoWorld, error) {
	l, clk := openLedger(dw.t)
	dest := fake.New()
	dw.mu.Lock()
	dw.opened = append(dw.opened, l)
	dw.mu.Unlock()
	var once sync.Once
	return DemoWorld{Ledger: l, Dest: dest, Clock: clk,
		Mailbox: fakeArrivals{dest: dest, clk: clk, mu: &sync.Mutex{}, seen: map[string]time.Time{}},
		Close: func() {
			once.Do(func() {
				dw.mu.Lock()
				dw.closed++
				dw.mu.Unlock()
			})
		}}, nil
}

// current is the ledger of the newest world.
func (dw *demoWorlds) current() *ledger.Ledger {
	dw.mu.Lock()
	defer dw.mu.Unlock()
	return dw.opened[len(dw.opened)-1]
}

func newTestDemo(t testing.TB) (*Demo, *demoWorlds) {
	dw := &demoWorlds{t: t}
	return NewDemo(NewTheme(true), DemoConfig{Open: dw.open}), dw
}

func TestDemoScript(t *testing.T) {
	d, _ := newTestDemo(t)
	a := newDriven(d, 80, 24)
	for range demoSteps {
		typeKeys(a, "space")
	}
	s := screenText(a)
	for _, want := range []string{"Step 6 of 6 · 09:06", "Mailbox — what actually arrived (1)", "About your damaged",
		"Exactly one message reaches the customer."} {
		if !strings.Contains(s, want) {
			t.Errorf("screen lacks %q:\n%s", want, s)
		}
	}
}

func TestDemoKeys(t *testing.T) {
	tests := []struct {
		name string
		keys []string
		want []string
	}{
		{"SpaceAdvances", []string{"space"}, []string{"Step 1 of 6 · 09:01", "reply_ack: approved"}},
		{"NAdvances", []string{"n", "n"}, []string{"Step 2 of 6 · 09:02", "owner: ack-workflow · looking"}},
		{"PastTheEnd", []string{"n", "n", "n", "n", "n", "n", "n"}, []string{"The demonstration is over"}},
		{"WorkflowActsOnlyByScript", []string{"v"}, []string{"tab to a staff pane"}},
		{"StaffViews", []string{"tab", "v"}, []string{"Bea opens the task. Presence is advisory: nobody owns it.", "owner: nobody · looking"}},
		{"TakeOverAsksReason", []string{"n", "tab", "tab", "t", "enter"}, []string{"carl takes over", "a reason is required"}},
		{"TakeOverByKey", []string{"n", "tab", "tab", "t", "u", "r", "g", "e", "n", "t", "enter"},
			[]string{"Carl takes over task T-4711 from the workflow because: urgent.", "✉ 09:02 carl took over task T-4711 from you because: urgent."}},
		{"TakeOverCancelled", []string{"n", "tab", "t", "esc"}, []string{"cancelled: bea takes over"}},
		{"TakeOverBeforeTheTask", []string{"tab", "t", "x", "enter"}, []string{"Bea cannot take over task T-4711", "takeover refused"}},
		{"StepBackAtTheStart", []string{"b"}, []string{"Nothing to step back from"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, _ := newTestDemo(t)
			a := newDriven(d, 100, 30)
			typeKeys(a, tc.keys...)
			s := screenText(a)
			// Narration and panes wrap: look for the words in the lines
			// joined, and in each pane's text.
			texts := []string{strings.Join(strings.Fields(s), " ")}
			for i := range demoCast {
				texts = append(texts, paneText(s, 100, i))
			}
			for _, w := range tc.want {
				if !slices.ContainsFunc(texts, func(x string) bool { return strings.Contains(x, w) }) {
					t.Errorf("screen lacks %q:\n%s", w, s)
				}
			}
		})
	}
}

// typeText types each character of s.
func typeText(a *App, s string) {
	for _, r := range s {
		if r == ' ' {
			typeKeys(a, "space")
			continue
		}
		typeKeys(a, string(r))
	}
}

// checkFits fails when the screen has a line wider than w or more than h
// lines.
func checkFits(t *testing.T, s string, w, h int) {
	t.Helper()
	lines := strings.Split(s, "\n")
	if len(lines) > h {
		t.Errorf("%d lines on a %d-line terminal:\n%s", len(lines), h, s)
	}
	for _, l := range lines {
		if ansi.StringWidth(l) > w {
			t.Errorf("a line of %d columns on a %d-column terminal: %q", ansi.StringWidth(l), w, l)
		}
	}
}

// paneText is the words of pane i (0 the workflow's) on the screen, its
// wrapped lines joined, so a sentence can be looked for whole.
func paneText(s string, w, i int) string {
	pw := w / len(demoCast)
	var words []string
	for _, l := range strings.Split(s, "\n") {
		r := []rune(l)
		if len(r) < (i+1)*pw || !strings.ContainsAny(string(r[i*pw]), "│┃") {
			continue
		}
		words = append(words, strings.Fields(string(r[i*pw+1:(i+1)*pw-1]))...)
	}
	return strings.Join(words, " ")
}

// TestDemoFollowsATrainersTakeover is the trainer's path from issue 28:
// step once, tab to Bea, take over with the reason "customer called", then
// keep pressing n. The narration follows the ledger: no step says the
// workflow owns the task once Bea does, step 4 does not narrate a second
// takeover, and the gate records one takeover. The workflow's pane keeps
// the reason whole at 80x24 and at 160x45, and nothing is wider than the
// terminal.
func TestDemoFollowsATrainersTakeover(t *testing.T) {
	for _, sz := range []struct{ w, h int }{{80, 24}, {160, 45}} {
		t.Run(sizeName(sz.w, sz.h), func(t *testing.T) {
			d, worlds := newTestDemo(t)
			a := newDriven(d, sz.w, sz.h)
			typeKeys(a, "n", "tab", "t")
			typeText(a, "customer called")
			typeKeys(a, "enter")
			s := screenText(a)
			checkFits(t, s, sz.w, sz.h)
			if !strings.Contains(s, "By hand, as Bea · 09:02: Bea takes over task T-4711 from the workflow because: customer called.") &&
				!strings.Contains(strings.Join(strings.Fields(s), " "), "Bea takes over task T-4711 from the workflow because: customer called.") {
				t.Errorf("the takeover is not narrated:\n%s", s)
			}
			told := map[int]string{}
			for step := 2; step <= len(demoSteps); step++ {
				typeKeys(a, "n")
				s = screenText(a)
				checkFits(t, s, sz.w, sz.h)
				flat := strings.Join(strings.Fields(s), " ")
				told[step] = flat
				if strings.Contains(flat, "the workflow still owns") || strings.Contains(flat, "The workflow, the previous owner") {
					t.Errorf("step %d narrates the workflow as owner after Bea took over:\n%s", step, s)
				}
				if wf := paneText(s, sz.w, 0); !strings.Contains(wf, "bea took over task T-4711 from you because: customer called.") {
					t.Errorf("step %d: the workflow's pane does not show the takeover's reason whole: %q\n%s", step, wf, s)
				}
			}
			for step, want := range map[int]string{
				2: "she owns it already: Bea took it over at 09:02 (“customer called”)",
				3: "refused, because Bea already owns the task",
				4: "Bea already owns the task: Bea took it over at 09:02 (“customer called”). The script does not take it over a second time.",
				5: "the gate stops it and cancels the proposal, because Bea owns the task now",
				6: "Exactly one message reaches the customer.",
			} {
				if !strings.Contains(told[step], want) {
					t.Errorf("step %d does not say %q:\n%s", step, want, told[step])
				}
			}
			evs, err := worlds.current().History(context.Background(), ledger.HistoryFilter{TaskID: demoTask})
			if err != nil {
				t.Fatal(err)
			}
			takeovers := 0
			for _, e := range evs {
				if e.Kind == ledger.EvTakeover {
					takeovers++
				}
			}
			if takeovers != 1 {
				t.Errorf("the ledger holds %d takeovers, want the trainer's one", takeovers)
			}
			if bea := paneText(s, sz.w, 1); !strings.Contains(bea, "owner: yes") || !strings.Contains(bea, "answer sent") ||
				!strings.Contains(bea, "took over") {
				t.Errorf("Bea's pane does not say what she did: %q", bea)
			}
			if carl := paneText(s, sz.w, 2); !strings.Contains(carl, "owner: bea") || !strings.Contains(carl, "09:04 ✗ claim refused") {
				t.Errorf("Carl's pane does not say whose the task is and when he was refused: %q", carl)
			}
		})
	}
}

// TestDemoUsesTheRoom: on a tall screen the panes are as tall as what they
// say and the history strip below them has every sentence of the gate's,
// the refusal among them; on a small one everything still fits.
func TestDemoUsesTheRoom(t *testing.T) {
	for _, sz := range []struct{ w, h int }{{80, 24}, {160, 45}} {
		t.Run(sizeName(sz.w, sz.h), func(t *testing.T) {
			d, worlds := newTestDemo(t)
			a := newDriven(d, sz.w, sz.h)
			for step := 1; step <= len(demoSteps); step++ {
				typeKeys(a, "n")
				s := screenText(a)
				checkFits(t, s, sz.w, sz.h)
				// The reason reaches the workflow whole, however full its pane.
				const told = "✉ 09:04 bea took over task T-4711 from you because: " + demoReason + "."
				if wf := paneText(s, sz.w, 0); step >= 4 && !strings.Contains(wf, told) {
					t.Errorf("step %d: the workflow's pane cuts the takeover's reason: %q\n%s", step, wf, s)
				}
			}
			s := screenText(a)
			// Carl was refused while the workflow owned the task; his pane
			// says that it moved on since.
			if carl := paneText(s, sz.w, 2); !strings.Contains(carl, "owned by ack-workflow, not carl since then: bea took over at 09:04") {
				t.Errorf("Carl's refusal is not brought up to date: %q", carl)
			}
			if !strings.Contains(s, "History — what the gate recorded") {
				t.Fatalf("no history strip:\n%s", s)
			}
			if sz.h < 45 {
				return
			}
			evs, err := worlds.current().History(context.Background(), ledger.HistoryFilter{TaskID: demoTask})
			if err != nil {
				t.Fatal(err)
			}
			if want := fmt.Sprintf("(newest %d of %d)", len(evs), len(evs)); !strings.Contains(s, want) {
				t.Errorf("the history strip does not show all %d sentences:\n%s", len(evs), s)
			}
			flat := strings.Join(strings.Fields(s), " ")
			if !strings.Contains(flat, "The gate stopped ack-workflow's send") {
				t.Errorf("the strip does not show the gate's refusal:\n%s", s)
			}
			// A pane as tall as its longest content: no pane line is blank
			// in every pane at once.
			for _, l := range strings.Split(s, "\n") {
				if strings.HasPrefix(l, "│") || strings.HasPrefix(l, "┃") {
					if strings.Trim(l, "│┃ ") == "" {
						t.Errorf("a blank line across all panes: the panes do not use the room:\n%s", s)
						break
					}
				}
			}
		})
	}
}

// TestDemoStepBack: b replays the script to the step before on a fresh
// ledger (the old one is left as it was, history and all, and closed), a
// step back after a trainer's act undoes that act, and r starts again.
func TestDemoStepBack(t *testing.T) {
	ctx := context.Background()
	d, worlds := newTestDemo(t)
	a := newDriven(d, 100, 30)
	typeKeys(a, "n", "n", "n")
	first := worlds.current()
	typeKeys(a, "b")
	s := screenText(a)
	if !strings.Contains(s, "Step 2 of 6 · 09:02") || !strings.Contains(s, "next: Carl opens it too") {
		t.Errorf("b did not go back to step 2:\n%s", s)
	}
	if worlds.current() == first {
		t.Fatal("the step back reused the ledger it stepped back from")
	}
	if worlds.closed != 1 {
		t.Errorf("%d worlds closed, want the one left", worlds.closed)
	}
	kinds := func(l *ledger.Ledger) []ledger.EventKind {
		evs, err := l.History(ctx, ledger.HistoryFilter{TaskID: demoTask})
		if err != nil {
			t.Fatal(err)
		}
		var out []ledger.EventKind
		for _, e := range evs {
			out = append(out, e.Kind)
		}
		return out
	}
	if k := kinds(first); !slices.Contains(k, ledger.EvOwnershipConflict) {
		t.Errorf("the old ledger lost Carl's refused claim: %v", k)
	}
	if k := kinds(worlds.current()); slices.Contains(k, ledger.EvOwnershipConflict) {
		t.Errorf("the replayed ledger has step 3's refusal: %v", k)
	}
	if p := paneText(s, 100, 2); strings.Contains(p, "looking") || strings.Contains(p, "refused") {
		t.Errorf("Carl's pane still shows step 3: %q", p)
	}

	// A trainer's act is undone by the next step back; the steps before it stay.
	typeKeys(a, "tab", "tab", "t")
	typeText(a, "urgent")
	typeKeys(a, "enter")
	if s := screenText(a); !strings.Contains(s, "owner: carl") {
		t.Fatalf("the takeover did not happen:\n%s", s)
	}
	typeKeys(a, "b")
	s = screenText(a)
	if strings.Contains(s, "owner: carl") || !strings.Contains(s, "Step 2 of 6 · 09:02") {
		t.Errorf("b did not undo the trainer's takeover:\n%s", s)
	}

	typeKeys(a, "r")
	s = screenText(a)
	if !strings.Contains(s, "Press space/n to start") || strings.Contains(s, "History —") {
		t.Errorf("r did not start again:\n%s", s)
	}
	if k := kinds(worlds.current()); len(k) != 0 {
		t.Errorf("the restarted ledger is not empty: %v", k)
	}
}

// TestDemoHintGoesWhenFollowed: the hint to move to a staff pane stays
// only until the trainer moves there.
func TestDemoHintGoesWhenFollowed(t *testing.T) {
	d, _ := newTestDemo(t)
	a := newDriven(d, 100, 30)
	const hint = "tab to a staff pane first"
	typeKeys(a, "n", "t")
	if !strings.Contains(screenText(a), hint) {
		t.Fatalf("no hint:\n%s", screenText(a))
	}
	typeKeys(a, "tab")
	if s := screenText(a); strings.Contains(s, hint) {
		t.Errorf("the hint stays after it was followed:\n%s", s)
	}
}

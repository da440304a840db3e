package tui

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/colorprofile"
	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/exp/golden"
	"github.com/charmbracelet/x/exp/teatest/v2"

	"gatehouse/internal/testids"
	"gatehouse/scenarios"
)

// sizes are the terminal sizes every screen is checked at.
var sizes = []struct{ w, h int }{{80, 24}, {100, 30}, {200, 50}}

// startApp runs app in a test program at a size, without colour.
func startApp(t *testing.T, app *App, w, h int) (*teatest.TestModel, *recorder) {
	t.Helper()
	rec := &recorder{App: app}
	tm := teatest.NewTestModel(t, rec, teatest.WithInitialTermSize(w, h),
		teatest.WithProgramOptions(tea.WithColorProfile(colorprofile.NoTTY)))
	return tm, rec
}

// finalScreen quits the program and returns its last screen as plain text.
// WaitFor consumes the output it reads, so goldens come from the final
// model rather than from the output.
func finalScreen(t *testing.T, tm *teatest.TestModel) string {
	t.Helper()
	tm.Send(press("q"))
	fm := tm.FinalModel(t, teatest.WithFinalTimeout(10*time.Second))
	return testids.Mask(ansi.Strip(fm.(*recorder).Render()))
}

// recorder keeps the frame the program drew last. The renderer writes only
// the cells that changed, so the raw output is not searchable text; the
// frame is exactly what the terminal shows.
type recorder struct {
	*App
	last atomic.Pointer[string]
}

// View implements tea.Model, recording the frame.
func (r *recorder) View() tea.View {
	v := r.App.View()
	s := ansi.Strip(v.Content)
	r.last.Store(&s)
	return v
}

// Update implements tea.Model, keeping the recorder as the model.
func (r *recorder) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	_, cmd := r.App.Update(msg)
	return r, cmd
}

func (r *recorder) screen() string {
	if s := r.last.Load(); s != nil {
		return *s
	}
	return ""
}

// waitText waits, with teatest's WaitFor reading the program's output,
// until the frame on screen shows want.
func (r *recorder) waitText(t *testing.T, tm *teatest.TestModel, want string) {
	t.Helper()
	teatest.WaitFor(t, tm.Output(), func([]byte) bool {
		return strings.Contains(r.screen(), want)
	}, teatest.WithDuration(10*time.Second), teatest.WithCheckInterval(10*time.Millisecond))
}

func sizeName(w, h int) string { return fmt.Sprintf("%dx%d", w, h) }

func TestGoldenInspector(t *testing.T) {
	for _, sz := range sizes {
		t.Run(sizeName(sz.w, sz.h), func(t *testing.T) {
			l := seedLedger(t)
			in := NewInspector(NewTheme(true), InspectorConfig{Ledger: l, Source: "ledger.db", Actor: "olga"})
			tm, rec := startApp(t, NewApp(NewTheme(true), in), sz.w, sz.h)
			rec.waitText(t, tm, "T-1001")
			tm.Send(press("tab"))
			rec.waitText(t, tm, "enquiry-T-1004")
			golden.RequireEqual(t, finalScreen(t, tm))
		})
	}
}

func TestGoldenDemo(t *testing.T) {
	for _, sz := range sizes {
		t.Run(sizeName(sz.w, sz.h), func(t *testing.T) {
			d, _ := newTestDemo(t)
			tm, rec := startApp(t, NewApp(NewTheme(true), d), sz.w, sz.h)
			for i := range 5 {
				tm.Send(press("space"))
				// The label moves on once the beat is done.
				rec.waitText(t, tm, fmt.Sprintf("Step %d of 6 ·", i+1))
			}
			golden.RequireEqual(t, finalScreen(t, tm))
		})
	}
}

// TestGoldenRehearsal rehearses built-in scenarios with a real mailbox on
// the runner's fake clock: interrupted-after-accept mid-run (after the crash
// and restart) and finished, and interrupted-before-accept finished, where
// the one arrival sits on attempt 2's line, not on attempt 1's.
func TestGoldenRehearsal(t *testing.T) {
	for _, stage := range []struct {
		name, scenario string
		steps, of      int
		want           string
	}{
		{"MidRun", "interrupted-after-accept", 4, 6, "step 4 of 6"},
		{"Finished", "interrupted-after-accept", 6, 6, "finished: PASSED"},
		{"RetryArrives", "interrupted-before-accept", 11, 11, "finished: PASSED"},
	} {
		for _, sz := range sizes {
			t.Run(stage.name+"/"+sizeName(sz.w, sz.h), func(t *testing.T) {
				r := newTestRehearsal(t, stage.scenario)
				tm, rec := startApp(t, NewApp(NewTheme(true), r), sz.w, sz.h)
				rec.waitText(t, tm, fmt.Sprintf("step 0 of %d", stage.of))
				for i := range stage.steps {
					tm.Send(press("n"))
					rec.waitText(t, tm, fmt.Sprintf("step %d of %d", i+1, stage.of))
				}
				rec.waitText(t, tm, stage.want)
				golden.RequireEqual(t, finalScreen(t, tm))
			})
		}
	}
}

func TestGoldenHome(t *testing.T) {
	list, err := scenarios.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	for _, sz := range sizes {
		t.Run(sizeName(sz.w, sz.h), func(t *testing.T) {
			h := NewHome(NewTheme(true), HomeConfig{Scenarios: list})
			h.verdicts["webhook-twice"] = true
			h.verdicts["missing-owner"] = false
			tm, rec := startApp(t, NewApp(NewTheme(true), h), sz.w, sz.h)
			rec.waitText(t, tm, "Scenarios")
			tm.Send(press("j"))
			golden.RequireEqual(t, finalScreen(t, tm))
		})
	}
}

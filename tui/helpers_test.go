package tui

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"charm.land/bubbles/v2/spinner"
	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"gatehouse/destination"
	"gatehouse/destination/fake"
	"gatehouse/fakes"
	"gatehouse/ledger"
)

// epoch is the fake clock's start, so every time on screen is stable.
var epoch = time.Date(2025, 3, 14, 9, 0, 0, 0, time.UTC)

var consent = []ledger.MaterialRead{{Source: "crm", Field: "consent", Value: "yes"}}

// openLedger opens a fresh ledger in a temp dir on a fake clock.
func openLedger(t testing.TB) (*ledger.Ledger, *fakes.Clock) {
	t.Helper()
	clk := fakes.NewClock(epoch)
	l, err := ledger.Open(filepath.Join(t.TempDir(), "ledger.db"), ledger.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l, clk
}

// proposeApproved claims a task for actor and records an approved reply.
func proposeApproved(t testing.TB, l *ledger.Ledger, task, customer, actor string) ledger.Action {
	t.Helper()
	ctx := context.Background()
	ref := ledger.TaskRef{ID: task, Customer: customer, Subject: "Where is my order?"}
	if _, err := l.Claim(ctx, ref, actor); err != nil {
		t.Fatal(err)
	}
	a, err := l.Propose(ctx, ledger.Proposal{Task: ref, Customer: customer, Event: "enquiry-" + task,
		ActionType: "reply_ack", Target: task, Recipient: customer + "@example.test",
		Subject: "We have your enquiry", Body: "Hello, we are on it.", Actor: actor, Destination: fake.DefaultName})
	if err != nil {
		t.Fatal(err)
	}
	if a, err = l.Approve(ctx, a.Key, actor, consent); err != nil {
		t.Fatal(err)
	}
	return a
}

// seedLedger records one action in each interesting state, a second apart.
func seedLedger(t testing.TB) *ledger.Ledger {
	t.Helper()
	l, clk := openLedger(t)
	ctx := context.Background()
	dest := fake.New()
	exec := func(a ledger.Action, value string) {
		clk.Advance(time.Second)
		_, _ = l.Execute(ctx, ledger.ExecuteRequest{Key: a.Key, Executor: "ack-workflow",
			Reread: []ledger.MaterialRead{{Source: "crm", Field: "consent", Value: value}}}, dest)
	}
	exec(proposeApproved(t, l, "T-1001", "cust-ada", "ack-workflow"), "yes")
	dest.Script(destination.OutcomeUnknown)
	exec(proposeApproved(t, l, "T-1002", "cust-bob", "ack-workflow"), "yes")
	held := proposeApproved(t, l, "T-1003", "cust-cyd", "ack-workflow")
	clk.Advance(time.Second)
	if _, err := l.Hold(ctx, held.Key, "operator", "customer called, wait"); err != nil {
		t.Fatal(err)
	}
	exec(proposeApproved(t, l, "T-1004", "cust-dan", "ack-workflow"), "no")
	clk.Advance(time.Second)
	if err := l.View(ctx, ledger.TaskRef{ID: "T-1001"}, "bea", "viewer", time.Hour); err != nil {
		t.Fatal(err)
	}
	return l
}

// press builds the key message a terminal sends for a key name.
func press(k string) tea.KeyPressMsg {
	special := map[string]rune{"enter": tea.KeyEnter, "esc": tea.KeyEscape, "tab": tea.KeyTab,
		"up": tea.KeyUp, "down": tea.KeyDown, "pgdown": tea.KeyPgDown, "backspace": tea.KeyBackspace}
	switch {
	case k == "space":
		return tea.KeyPressMsg{Code: tea.KeySpace, Text: " "}
	case k == "ctrl+c":
		return tea.KeyPressMsg{Code: 'c', Mod: tea.ModCtrl}
	case special[k] != 0:
		return tea.KeyPressMsg{Code: special[k]}
	}
	r := []rune(k)[0]
	return tea.KeyPressMsg{Code: r, Text: k}
}

// drive runs cmd and feeds everything it produces back into the app,
// synchronously, until nothing is left, so model tests need no timing.
// It reports whether the app asked to quit.
func drive(a *App, cmd tea.Cmd) (quit bool) {
	queue := []tea.Cmd{cmd}
	for len(queue) > 0 {
		c := queue[0]
		queue = queue[1:]
		if c == nil {
			continue
		}
		switch msg := c().(type) {
		case nil, spinner.TickMsg: // the spinner only animates on a terminal
		case tea.BatchMsg:
			queue = append(queue, msg...)
		case tea.QuitMsg:
			quit = true
		case routedMsg:
			switch msg.msg.(type) {
			case pollMsg, playMsg:
				continue // timers would run on forever; tests step by hand
			}
			_, next := a.Update(msg)
			queue = append(queue, next)
		default:
			_, next := a.Update(msg)
			queue = append(queue, next)
		}
	}
	return quit
}

// keys types each key into the app and drives what follows.
func typeKeys(a *App, ks ...string) (quit bool) {
	for _, k := range ks {
		_, cmd := a.Update(press(k))
		if drive(a, cmd) {
			quit = true
		}
	}
	return quit
}

// newDriven returns an app at a size with its first screen loaded.
func newDriven(s Screen, w, h int) *App {
	a := NewApp(NewTheme(true), s)
	a.Update(tea.WindowSizeMsg{Width: w, Height: h})
	drive(a, a.Init())
	return a
}

func screenText(a *App) string { return ansi.Strip(a.Render()) }

package tui

import (
	"context"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
)

// TestCloseWaitsForRunningCommands: quitting cancels the app's context and
// Close returns only once every command still running has returned; a
// command Bubble Tea starts after that does nothing.
func TestCloseWaitsForRunningCommands(t *testing.T) {
	a := NewApp(NewTheme(true), NewHome(NewTheme(true), HomeConfig{}))
	started, finished := make(chan struct{}), make(chan struct{})
	s := newBase(NewTheme(true))
	_, cmd := a.Update(s.do(func(ctx context.Context) tea.Msg {
		close(started)
		<-ctx.Done() // I/O that only ends when the app quits
		close(finished)
		return nil
	})())
	go cmd()
	<-started

	_, quit := a.Update(press("ctrl+c"))
	if _, ok := quit().(tea.QuitMsg); !ok {
		t.Fatal("ctrl+c did not quit")
	}
	closed := make(chan struct{})
	go func() { a.Close(); close(closed) }()
	select {
	case <-closed:
		select {
		case <-finished:
		default:
			t.Fatal("Close returned while a command was still running")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return once the running command ended")
	}

	ran := false
	_, late := a.Update(s.do(func(context.Context) tea.Msg { ran = true; return nil })())
	if msg := late(); msg != nil || ran {
		t.Fatalf("a command started after Close ran (msg %v)", msg)
	}
}

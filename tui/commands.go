package tui

import (
	"context"
	"sync"

	tea "charm.land/bubbletea/v2"
)

// commands runs the screens' I/O under one context and knows which are
// still running, so the app can cancel them and wait for them on quit.
type commands struct {
	ctx    context.Context
	cancel context.CancelFunc

	mu      sync.Mutex
	closed  bool
	running sync.WaitGroup
}

func newCommands() *commands {
	ctx, cancel := context.WithCancel(context.Background())
	return &commands{ctx: ctx, cancel: cancel}
}

// run returns the command that performs m's I/O and routes its result to
// the screen that asked. A command that Bubble Tea starts only after the
// app closed does nothing: what it would use may be gone.
func (c *commands) run(m ioMsg) tea.Cmd {
	return func() tea.Msg {
		if !c.enter() {
			return nil
		}
		defer c.running.Done()
		return routedMsg{to: m.to, msg: m.run(c.ctx)}
	}
}

// enter counts a command as running unless the app has closed.
func (c *commands) enter() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	c.running.Add(1)
	return true
}

// close cancels the context and waits for every running command; no new
// one starts afterwards.
func (c *commands) close() {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.cancel()
	c.running.Wait()
}

// Package tui is gatehouse's terminal app: the scenario browser, the
// rehearsal view, the live ledger inspector and the takeover demo. The root
// model (App) owns the terminal; each screen is a component that renders a
// string into the space the root gives it.
package tui

import (
	"context"
	"sync/atomic"

	"charm.land/bubbles/v2/help"
	tea "charm.land/bubbletea/v2"
)

// Screen is one screen of the app. Only the root returns a tea.View; a
// screen renders plain (styled) text at the size it was given.
type Screen interface {
	// Init starts the screen's first commands (loads, subscriptions).
	Init() tea.Cmd
	// Update handles one message and returns the screen to show next.
	Update(msg tea.Msg) (Screen, tea.Cmd)
	// View renders the screen in exactly the size set by SetSize.
	View() string
	// SetSize tells the screen how much room it has.
	SetSize(width, height int)
	// KeyMap lists the screen's bindings for the help line and full help.
	KeyMap() help.KeyMap
	// Title names the screen in the app bar.
	Title() string
	// Capturing reports that the screen reads text (a search, a reason),
	// so every key but ctrl+c goes to it before the app's own bindings.
	Capturing() bool
	// Busy reports that the screen waits for something slow (the app shows
	// a spinner meanwhile).
	Busy() bool
	// ID identifies this screen instance (see routedMsg).
	ID() int
}

var lastScreenID atomic.Int64

// base is what every screen shares: its identity, theme and size.
type base struct {
	id            int
	th            Theme
	width, height int
}

func newBase(th Theme) base { return base{id: int(lastScreenID.Add(1)), th: th} }

// ID implements Screen.
func (b *base) ID() int { return b.id }

// SetSize implements Screen for screens without inner layout.
func (b *base) SetSize(w, h int) { b.width, b.height = w, h }

// Capturing implements Screen for screens without text input.
func (b *base) Capturing() bool { return false }

// routedMsg carries the result of a screen's command back to that screen,
// even when another screen is on top by then, and drops it when the screen
// is gone (so a closed inspector's poll does not wake a new one).
type routedMsg struct {
	to  int
	msg tea.Msg
}

// ioMsg asks the app to run a screen's I/O (see base.do).
type ioMsg struct {
	to  int
	run func(context.Context) tea.Msg
}

// do asks the app to run f, the screen's I/O, as a command whose result
// goes back to this screen. f gets the app's context, which ends when the
// app quits; the app waits for f to return before it closes anything f
// may use. Update never does I/O itself: it returns do(…).
func (b *base) do(f func(ctx context.Context) tea.Msg) tea.Cmd {
	id := b.id
	return func() tea.Msg { return ioMsg{to: id, run: f} }
}

// pushMsg opens a screen on top of the current one.
type pushMsg struct{ screen Screen }

// popMsg closes the top screen.
type popMsg struct{}

// statusMsg puts a line into the status bar. It belongs to the screen
// that set it (owner, filled in by the app) and is shown only while that
// screen is on top.
type statusMsg struct {
	text  string
	err   bool
	owner int
}

func push(s Screen) tea.Cmd { return func() tea.Msg { return pushMsg{screen: s} } }

func pop() tea.Msg { return popMsg{} }

func info(text string) tea.Cmd {
	return func() tea.Msg { return statusMsg{text: text} }
}

// fail shows err in the status line; the screen stays as it is.
func fail(err error) tea.Cmd {
	return func() tea.Msg { return statusMsg{text: err.Error(), err: true} }
}

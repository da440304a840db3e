package main

import (
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/colorprofile"
	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/exp/teatest/v2"

	"gatehouse/tui"
)

// frames keeps the inspector's last frame as plain text.
type frames struct {
	*tui.App
	last atomic.Pointer[string]
}

func (f *frames) View() tea.View {
	v := f.App.View()
	s := ansi.Strip(v.Content)
	f.last.Store(&s)
	return v
}

func (f *frames) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	_, cmd := f.App.Update(msg)
	return f, cmd
}

func (f *frames) waitText(t *testing.T, tm *teatest.TestModel, want string) {
	t.Helper()
	teatest.WaitFor(t, tm.Output(), func([]byte) bool {
		s := f.last.Load()
		return s != nil && strings.Contains(*s, want)
	}, teatest.WithDuration(10*time.Second), teatest.WithCheckInterval(10*time.Millisecond))
}

// TestInspectSessionLeavesLedgerAndWALUnchanged runs the inspector on what
// a killed writer left, looks at tasks and actions, and quits without an
// operation: the ledger and its WAL keep their bytes.
func TestInspectSessionLeavesLedgerAndWALUnchanged(t *testing.T) {
	path, _, _ := crashedCopy(t, false)
	dir := filepath.Dir(path)
	before := dirFiles(t, dir)

	l, err := openInspected(path)
	if err != nil {
		t.Fatal(err)
	}
	th := tui.NewTheme(true)
	app := &frames{App: tui.NewApp(th, tui.NewInspector(th, tui.InspectorConfig{Ledger: l, Actor: "operator:test"}))}
	tm := teatest.NewTestModel(t, app, teatest.WithInitialTermSize(120, 30),
		teatest.WithProgramOptions(tea.WithColorProfile(colorprofile.NoTTY)))
	app.waitText(t, tm, "task-late")
	tm.Send(tea.KeyPressMsg{Code: tea.KeyTab})
	app.waitText(t, tm, "enq-read")
	tm.Send(tea.KeyPressMsg{Code: 'q', Text: "q"})
	tm.WaitFinished(t, teatest.WithFinalTimeout(10*time.Second))
	if !l.ReadOnly() {
		t.Error("looking opened the ledger for writing")
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	sameLedgerAndWAL(t, before, dirFiles(t, dir), "ledger.db", "inspect")
}

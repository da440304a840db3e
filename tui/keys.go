package tui

import (
	"slices"
	"strings"

	"charm.land/bubbles/v2/help"
	"charm.land/bubbles/v2/key"
	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"
)

// KeyMap is the one keymap of the whole app. Screens pick the bindings
// that apply to them (see helpKeys); a key has one meaning per screen.
type KeyMap struct {
	// Everywhere. ForceQuit also works while a screen reads text.
	Quit, ForceQuit, Back, Help, Focus, Up, Down, PageUp, PageDown, Top, Bottom, Open key.Binding
	// Focus as the inspector (tabs) and the demo (panes) name it.
	NextTab, NextPane key.Binding
	// Lists.
	Filter, StateFilter key.Binding
	// Inspector operations.
	Hold, ReleaseHold, Reconcile, Arrived, NotArrived, TakeOver, Stop, Resume key.Binding
	// Forms and text being typed (a search, a filter).
	Confirm, Cancel, Apply key.Binding
	// Demo and rehearsal.
	Step, StepBack, Play, Restart, Faster, Slower, ActView, ActTakeOver, Export key.Binding
	// Home.
	Rehearse, Inspect, Demo key.Binding
	// Review.
	KindFilter, ActorFilter, SubjectFilter, Window, ClearFilters, NextInAction, PrevInAction, NextStop, RateWidth, Operate, Spans, Reload, OpenLines, BucketToTimeline key.Binding
}

// Keys is the app's keymap.
var Keys = DefaultKeyMap()

func bind(help, desc string, keys ...string) key.Binding {
	return key.NewBinding(key.WithKeys(keys...), key.WithHelp(help, desc))
}

// DefaultKeyMap returns the bindings the app ships with.
func DefaultKeyMap() KeyMap {
	return KeyMap{
		Quit:        bind("q", "quit", "q", "ctrl+c"),
		ForceQuit:   bind("ctrl+c", "quit", "ctrl+c"),
		Back:        bind("esc", "back", "esc"),
		Help:        bind("?", "help", "?"),
		Focus:       bind("tab", "next tab/pane", "tab"),
		NextTab:     bind("tab", "next tab", "tab"),
		NextPane:    bind("tab", "next pane", "tab"),
		Up:          bind("↑/k", "up", "up", "k"),
		Down:        bind("↓/j", "down", "down", "j"),
		PageUp:      bind("pgup", "page up", "pgup", "ctrl+u"),
		PageDown:    bind("pgdn", "page down", "pgdown", "ctrl+d"),
		Top:         bind("g", "first", "g", "home"),
		Bottom:      bind("G", "last", "G", "end"),
		Open:        bind("enter", "detail", "enter"),
		Filter:      bind("/", "search", "/"),
		StateFilter: bind("s", "filter state", "s"),
		Hold:        bind("h", "hold", "h"),
		ReleaseHold: bind("u", "release hold", "u"),
		Reconcile:   bind("c", "reconcile", "c"),
		Arrived:     bind("Y", "you found it arrived", "Y"),
		NotArrived:  bind("N", "you found it did not arrive", "N"),
		TakeOver:    bind("o", "take over", "o"),
		Stop:        bind("S", "stop all", "S"),
		Resume:      bind("R", "resume", "R"),
		Confirm:     bind("enter", "confirm", "enter"),
		Cancel:      bind("esc", "cancel", "esc"),
		Apply:       bind("enter", "apply", "enter"),
		Step:        bind("space/n", "next step", "space", "n"),
		StepBack:    bind("b", "step back", "b"),
		Play:        bind("p", "play/pause", "p"),
		Restart:     bind("r", "restart", "r"),
		Faster:      bind("+", "faster", "+", "="),
		Slower:      bind("-", "slower", "-"),
		ActView:     bind("v", "staff views", "v"),
		ActTakeOver: bind("t", "staff takes over", "t"),
		Export:      bind("e", "export result", "e"),
		Rehearse:    bind("enter", "rehearse", "enter"),
		Inspect:     bind("i", "inspector", "i"),
		Demo:        bind("d", "takeover demo", "d"),

		// Review.
		KindFilter:       bind("f", "filter kind", "f"),
		ActorFilter:      bind("a", "filter actor", "a"),
		SubjectFilter:    bind("/", "filter customer/task", "/"),
		Window:           bind("w", "time window", "w"),
		ClearFilters:     bind("c", "clear filters", "c"),
		NextInAction:     bind("n", "next of action", "n"),
		PrevInAction:     bind("N", "previous of action", "N"),
		NextStop:         bind("x", "next stop", "x"),
		RateWidth:        bind("r", "hour/day", "r"),
		Operate:          bind("O", "operating mode", "O"),
		Spans:            bind("v", "lines/spans", "v"),
		Reload:           bind("l", "read the history again", "l"),
		OpenLines:        bind("enter", "its lines", "enter"),
		BucketToTimeline: bind("enter", "filter timeline to it", "enter"),
	}
}

// keyOf is how help and screen texts name the key of a binding, so a
// sentence such as "r restarts it" follows the keymap.
func keyOf(b key.Binding) string { return b.Help().Key }

// helpKeys is a help.KeyMap made of a short line and full-help columns.
type helpKeys struct {
	short []key.Binding
	full  [][]key.Binding
}

var _ help.KeyMap = helpKeys{}

// ShortHelp implements help.KeyMap.
func (h helpKeys) ShortHelp() []key.Binding { return h.short }

// FullHelp implements help.KeyMap.
func (h helpKeys) FullHelp() [][]key.Binding { return h.full }

// navKeys are the movement bindings every list shares, for full help.
func navKeys() []key.Binding {
	k := Keys
	return []key.Binding{k.Up, k.Down, k.PageUp, k.PageDown, k.Top, k.Bottom}
}

// appKeys are the bindings the root handles everywhere, for full help.
func appKeys() []key.Binding {
	k := Keys
	return []key.Binding{k.Help, k.Quit}
}

// shortHelpLine is bubbles' short help of keys, in order, as many as fit
// width w, followed by every one of tail: keys are dropped from the end,
// never the tail, so q quit is always on screen. The fitting is done here,
// not by the model's width, which cuts the tail too and marks the cut with
// a column the line cannot spare.
func shortHelpLine(m help.Model, keys, tail []key.Binding, w int) string {
	m.SetWidth(0)
	for n := len(keys); n >= 0; n-- {
		line := m.ShortHelpView(append(slices.Clip(keys[:n]), tail...))
		if ansi.StringWidth(line) <= w || n == 0 {
			return line
		}
	}
	return ""
}

// fullHelpLines is bubbles' full help of groups, each binding once in the
// order given: as many groups side by side as fit width w, the rest in
// further rows of columns below, so no group is cut away on a narrow
// terminal.
func fullHelpLines(m help.Model, groups [][]key.Binding, w int) []string {
	m.SetWidth(0)
	seen := map[string]bool{}
	var out []string
	var row [][]key.Binding
	flush := func() {
		if len(row) > 0 {
			out = append(out, strings.Split(m.FullHelpView(row), "\n")...)
			out = append(out, "")
			row = nil
		}
	}
	for _, g := range groups {
		var group []key.Binding
		for _, b := range g {
			h := b.Help()
			if !b.Enabled() || h.Key == "" || seen[h.Key+h.Desc] {
				continue
			}
			seen[h.Key+h.Desc] = true
			group = append(group, b)
		}
		if len(group) == 0 {
			continue
		}
		if len(row) > 0 && lipgloss.Width(m.FullHelpView(append(slices.Clip(row), group))) > w {
			flush()
		}
		row = append(row, group)
	}
	flush()
	return out[:max(len(out)-1, 0)]
}

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
	Step, StepBack, Play, Restart, Faster, Slower, ActView, ActTakeOver key.Binding
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

// helpEntry is one binding as help shows it.
func helpEntry(b key.Binding, keyStyle, descStyle lipgloss.Style) string {
	return keyStyle.Render(b.Help().Key) + " " + descStyle.Render(b.Help().Desc)
}

// shortHelpLine fits keys, in order, into width w followed by every one of
// tail: keys are dropped from the end, never the tail (so q quit is always
// on screen).
func shortHelpLine(st help.Styles, keys, tail []key.Binding, w int) string {
	sep := st.ShortSeparator.Render(" • ")
	render := func(bs []key.Binding) string {
		parts := make([]string, 0, len(bs))
		for _, b := range bs {
			if b.Enabled() && b.Help().Key != "" {
				parts = append(parts, helpEntry(b, st.ShortKey, st.ShortDesc))
			}
		}
		return strings.Join(parts, sep)
	}
	for n := len(keys); n >= 0; n-- {
		line := render(append(slices.Clip(keys[:n]), tail...))
		if ansi.StringWidth(line) <= w || n == 0 {
			return line
		}
	}
	return ""
}

// fullHelpLines lays every binding of groups out in two columns (one
// below 60 columns), each binding once, in the order given.
func fullHelpLines(st help.Styles, groups [][]key.Binding, w int) []string {
	var entries []key.Binding
	seen := map[string]bool{}
	keyW := 0
	for _, g := range groups {
		for _, b := range g {
			h := b.Help()
			if !b.Enabled() || h.Key == "" || seen[h.Key+h.Desc] {
				continue
			}
			seen[h.Key+h.Desc] = true
			entries = append(entries, b)
			keyW = max(keyW, ansi.StringWidth(h.Key))
		}
	}
	cell := func(b key.Binding) string {
		h := b.Help()
		return st.FullKey.Render(h.Key+strings.Repeat(" ", keyW-ansi.StringWidth(h.Key))) + "  " + st.FullDesc.Render(h.Desc)
	}
	if w < 60 {
		out := make([]string, len(entries))
		for i, b := range entries {
			out[i] = cell(b)
		}
		return out
	}
	half := (len(entries) + 1) / 2
	colW := w/2 - 2
	var out []string
	for i := range half {
		left := fitLine(cell(entries[i]), colW)
		right := ""
		if i+half < len(entries) {
			right = cell(entries[i+half])
		}
		out = append(out, left+"  "+right)
	}
	return out
}

package tui

import (
	"os"

	"charm.land/lipgloss/v2"
)

// Theme holds every style the app draws with, so colours live in one place.
// With NO_COLOR set the styles keep weight and reverse video (which carry
// meaning without colour) and drop every colour.
type Theme struct {
	Title     lipgloss.Style // the app bar
	Tab       lipgloss.Style // an inactive tab
	TabActive lipgloss.Style // the tab in focus
	Header    lipgloss.Style // table headers and section titles
	Selected  lipgloss.Style // the row under the cursor
	Dim       lipgloss.Style // secondary text
	Good      lipgloss.Style // sent, passed
	Warn      lipgloss.Style // held, unknown, pending decisions
	Bad       lipgloss.Style // duplicates, missing sends, failures, errors
	Status    lipgloss.Style // the status line
	Pane      lipgloss.Style // a pane's border
	PaneFocus lipgloss.Style // the focused pane's border
	Help      lipgloss.Style // the help line
}

// NoColor reports whether the NO_COLOR convention asks for plain output
// (the variable is set and not empty).
func NoColor() bool { return os.Getenv("NO_COLOR") != "" }

// NewTheme returns the app's theme; noColor gives the plain variant.
func NewTheme(noColor bool) Theme {
	plain := lipgloss.NewStyle()
	border := plain.Border(lipgloss.RoundedBorder())
	t := Theme{
		Title:     plain.Bold(true),
		Tab:       plain.Padding(0, 1),
		TabActive: plain.Padding(0, 1).Bold(true).Reverse(true),
		Header:    plain.Bold(true),
		Selected:  plain.Reverse(true),
		Dim:       plain,
		Good:      plain,
		Warn:      plain.Bold(true),
		Bad:       plain.Bold(true),
		Status:    plain,
		Pane:      border,
		PaneFocus: border.BorderStyle(lipgloss.ThickBorder()),
		Help:      plain,
	}
	if noColor {
		return t
	}
	t.Title = t.Title.Foreground(lipgloss.Color("#FAFAFA")).Background(lipgloss.Color("#5A56E0")).Padding(0, 1)
	t.TabActive = t.TabActive.Reverse(false).Foreground(lipgloss.Color("#FAFAFA")).Background(lipgloss.Color("#7D56F4"))
	t.Header = t.Header.Foreground(lipgloss.Color("#7D56F4"))
	t.Selected = t.Selected.Reverse(false).Foreground(lipgloss.Color("#FAFAFA")).Background(lipgloss.Color("#3C3A7A"))
	t.Dim = t.Dim.Foreground(lipgloss.Color("#8A8A8A"))
	t.Good = t.Good.Foreground(lipgloss.Color("#3FB950"))
	t.Warn = t.Warn.Foreground(lipgloss.Color("#D29922"))
	t.Bad = t.Bad.Foreground(lipgloss.Color("#F85149"))
	t.Status = t.Status.Foreground(lipgloss.Color("#C9D1D9"))
	t.Pane = t.Pane.BorderForeground(lipgloss.Color("#555555"))
	t.PaneFocus = t.PaneFocus.BorderForeground(lipgloss.Color("#7D56F4"))
	t.Help = t.Help.Foreground(lipgloss.Color("#8A8A8A"))
	return t
}

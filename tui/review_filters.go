package tui

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"

	"gatehouse/review"
)

// ask opens the text input for a filter.
func (rv *Review) ask(p prompt, label, value string) tea.Cmd {
	rv.prompt = p
	rv.input.Prompt = label
	rv.input.Placeholder = map[prompt]string{promptActor: "part of a name", promptSubject: "part of a customer, task or key",
		promptWindow: "FROM..TO, e.g. 2026-03-02 10:00..2026-03-02 12:00 (either may be empty)"}[p]
	rv.input.SetValue(value)
	rv.input.CursorEnd()
	return rv.input.Focus()
}

func (rv *Review) onPromptKey(msg tea.KeyPressMsg) tea.Cmd {
	switch {
	case key.Matches(msg, Keys.Cancel):
		rv.prompt = promptNone
		rv.input.Blur()
		return nil
	case key.Matches(msg, Keys.Confirm):
		v := strings.TrimSpace(rv.input.Value())
		switch rv.prompt {
		case promptActor:
			rv.filter.Actor = v
		case promptSubject:
			rv.filter.Subject = v
		case promptWindow:
			since, until, err := parseWindow(v)
			if err != nil {
				return fail(err) // the prompt stays open to fix it
			}
			rv.filter.Since, rv.filter.Until = since, until
		}
		rv.prompt = promptNone
		rv.input.Blur()
		rv.applyFilter()
		return rv.fetchText()
	}
	var cmd tea.Cmd
	rv.input, cmd = rv.input.Update(msg)
	return cmd
}

// applyFilter selects the timeline's lines again; the rates count the
// window again when it changed, whatever else the timeline filters.
func (rv *Review) applyFilter() {
	rv.timeline.applyFilter(rv.h, rv.filter)
	rv.rates.count(rv.h, rv.filter, false)
}

// windowText writes a filter's window the way the prompt reads it.
func windowText(f review.Filter) string {
	if f.Since == 0 && f.Until == 0 {
		return ""
	}
	w := func(ns int64) string {
		if ns == 0 {
			return ""
		}
		return nsTime(ns).Format("2006-01-02 15:04:05")
	}
	return w(f.Since) + ".." + w(f.Until)
}

// errWindow explains the time window a prompt reads.
var errWindow = errors.New("window: write FROM..TO as 2006-01-02, 2006-01-02 15:04 or 2006-01-02 15:04:05 (UTC); either end may be empty")

// parseWindow reads "FROM..TO" (UTC); an empty text clears the window.
func parseWindow(s string) (since, until int64, err error) {
	if s == "" {
		return 0, 0, nil
	}
	from, to, ok := strings.Cut(s, "..")
	if !ok {
		return 0, 0, errWindow
	}
	parse := func(v string) (int64, error) {
		v = strings.TrimSpace(v)
		if v == "" {
			return 0, nil
		}
		t, err := ParseMoment(v)
		if err != nil {
			return 0, errWindow
		}
		return t.UnixNano(), nil
	}
	if since, err = parse(from); err != nil {
		return 0, 0, err
	}
	if until, err = parse(to); err != nil {
		return 0, 0, err
	}
	if since != 0 && until != 0 && until <= since {
		return 0, 0, errors.New("window: TO must be after FROM")
	}
	return since, until, nil
}

// ParseMoment reads a moment as a reviewer writes it, in UTC: RFC 3339, or
// 2006-01-02, 2006-01-02 15:04, 2006-01-02 15:04:05 (a T may replace the
// space).
func ParseMoment(s string) (time.Time, error) {
	s = strings.Replace(strings.TrimSpace(s), "T", " ", 1)
	if t, err := time.Parse(time.RFC3339, strings.Replace(s, " ", "T", 1)); err == nil {
		return t.UTC(), nil
	}
	for _, layout := range []string{"2006-01-02 15:04:05", "2006-01-02 15:04", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is not a moment: write 2006-01-02, 2006-01-02 15:04, 2006-01-02 15:04:05 or RFC 3339", s)
}

func nsTime(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns).UTC()
}

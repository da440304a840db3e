package tui

import (
	"errors"
	"strings"

	"charm.land/bubbles/v2/key"
	"charm.land/bubbles/v2/textinput"
	tea "charm.land/bubbletea/v2"
)

// errNoReason refuses an operation confirmed without a reason.
var errNoReason = errors.New("a reason is required: it is recorded with the operation")

// form asks for confirmation of one operator operation and, when the
// operation records one, a mandatory reason.
type form struct {
	title   string // what will happen, e.g. "Hold gh1:…"
	explain string // what it means, in plain words
	reason  bool   // a reason is mandatory
	input   textinput.Model
	problem string
	run     func(reason string) tea.Cmd
}

func newForm(title, explain string, reason bool, run func(string) tea.Cmd) (*form, tea.Cmd) {
	in := newInput("reason: ", "why (recorded in the history)")
	in.CharLimit = 200
	f := &form{title: title, explain: explain, reason: reason, input: in, run: run}
	if !reason {
		return f, nil
	}
	return f, f.input.Focus()
}

// update handles a key; done reports that the form closed (confirmed or
// cancelled).
func (f *form) update(msg tea.KeyPressMsg) (done bool, cmd tea.Cmd) {
	switch {
	case key.Matches(msg, Keys.Cancel):
		return true, info("cancelled: " + f.title)
	case key.Matches(msg, Keys.Confirm):
		r := strings.TrimSpace(f.input.Value())
		if f.reason && r == "" {
			f.problem = errNoReason.Error()
			return false, nil
		}
		return true, f.run(r)
	}
	if !f.reason {
		return false, nil
	}
	f.input, cmd = f.input.Update(msg)
	return false, cmd
}

// view renders the form as a block of lines.
func (f *form) view(th Theme, width int) string {
	f.input.SetWidth(max(width-len(f.input.Prompt)-4, 10))
	lines := []string{th.Warn.Render(f.title), f.explain, ""}
	if f.reason {
		lines = append(lines, f.input.View(), "")
	}
	if f.problem != "" {
		lines = append(lines, th.Bad.Render(f.problem))
	}
	lines = append(lines, th.Dim.Render(keyOf(Keys.Confirm)+" confirms · "+keyOf(Keys.Cancel)+" cancels"))
	return th.PaneFocus.Width(width).Render(strings.Join(lines, "\n"))
}

// newInput returns a text input with a steady cursor: a blinking one would
// redraw the screen twice a second for nothing.
func newInput(prompt, placeholder string) textinput.Model {
	in := textinput.New()
	st := textinput.DefaultStyles(true)
	st.Cursor.Blink = false
	in.SetStyles(st)
	in.Prompt = prompt
	in.Placeholder = placeholder
	return in
}

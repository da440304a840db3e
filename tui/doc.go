package tui

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"charm.land/bubbles/v2/help"
	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"
)

// renderFunc lays a loaded document out at a width, so a resize re-wraps it.
type renderFunc func(th Theme, width int) []string

// docScreen shows one document (a detail) that is loaded once and scrolled.
type docScreen struct {
	base
	title   string
	load    func(ctx context.Context) (renderFunc, error)
	render  renderFunc
	off     int
	loading bool
}

// docLoadedMsg is a loaded document.
type docLoadedMsg struct {
	render renderFunc
	err    error
}

func newDoc(th Theme, title string, load func(context.Context) (renderFunc, error)) *docScreen {
	return &docScreen{base: newBase(th), title: title, load: load, loading: true}
}

// Title implements Screen.
func (d *docScreen) Title() string { return d.title }

// Busy implements Screen.
func (d *docScreen) Busy() bool { return d.loading }

// Init implements Screen.
func (d *docScreen) Init() tea.Cmd {
	load := d.load
	return d.do(func(ctx context.Context) tea.Msg {
		r, err := load(ctx)
		return docLoadedMsg{render: r, err: err}
	})
}

// Update implements Screen.
func (d *docScreen) Update(msg tea.Msg) (Screen, tea.Cmd) {
	switch msg := msg.(type) {
	case docLoadedMsg:
		d.loading = false
		if msg.err != nil {
			return d, fail(msg.err)
		}
		d.render = msg.render
	case tea.KeyPressMsg:
		d.off = scroll(msg, d.off, len(d.lines()), d.height)
	}
	return d, nil
}

func (d *docScreen) lines() []string {
	if d.render == nil {
		return nil
	}
	return d.render(d.th, d.width)
}

// View implements Screen.
func (d *docScreen) View() string {
	lines := d.lines()
	if d.loading {
		return "loading…"
	}
	end := min(d.off+d.height, len(lines))
	shown := slices.Clone(lines[min(d.off, end):end])
	if end < len(lines) && len(shown) > 0 { // say that there is more, and how to see it
		shown[len(shown)-1] = d.th.Dim.Render(fmt.Sprintf("↓ %d more lines: j or pgdn", len(lines)-end+1))
	}
	return strings.Join(shown, "\n")
}

// KeyMap implements Screen.
func (d *docScreen) KeyMap() help.KeyMap {
	k := Keys
	return helpKeys{short: []key.Binding{k.Up, k.Down, k.PageDown},
		full: [][]key.Binding{navKeys()}}
}

// scroll moves a view offset over n lines shown h at a time.
func scroll(msg tea.KeyPressMsg, off, n, h int) int {
	switch {
	case key.Matches(msg, Keys.Up):
		off--
	case key.Matches(msg, Keys.Down):
		off++
	case key.Matches(msg, Keys.PageUp):
		off -= h
	case key.Matches(msg, Keys.PageDown):
		off += h
	case key.Matches(msg, Keys.Top):
		off = 0
	case key.Matches(msg, Keys.Bottom):
		off = n
	}
	return max(min(off, n-h), 0)
}

// para wraps text at width after prefix, indenting the continuation lines
// under the text so a long sentence stays readable instead of being cut.
func para(prefix, text string, width int) []string {
	pw := ansi.StringWidth(prefix)
	lines := wrapWords(text, max(width-pw, 10))
	out := make([]string, len(lines))
	for i, l := range lines {
		if i == 0 {
			out[i] = prefix + l
			continue
		}
		out[i] = strings.Repeat(" ", pw) + l
	}
	return out
}

// wrapWords breaks text at spaces only (a key such as T-4711 stays whole);
// a word wider than the line is cut hard.
func wrapWords(text string, width int) []string {
	var lines []string
	var cur strings.Builder
	curW := 0
	for _, word := range strings.Fields(text) {
		ww := ansi.StringWidth(word)
		if curW > 0 && curW+1+ww > width {
			lines = append(lines, cur.String())
			cur.Reset()
			curW = 0
		}
		for ww > width && curW == 0 {
			lines = append(lines, ansi.Cut(word, 0, width))
			word = ansi.Cut(word, width, ww)
			ww = ansi.StringWidth(word)
		}
		if curW > 0 {
			cur.WriteByte(' ')
			curW++
		}
		cur.WriteString(word)
		curW += ww
	}
	return append(lines, cur.String())
}

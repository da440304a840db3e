package tui

import (
	"context"
	"fmt"
	"strings"

	"charm.land/bubbles/v2/help"
	"charm.land/bubbles/v2/key"
	"charm.land/bubbles/v2/viewport"
	tea "charm.land/bubbletea/v2"

	"gatehouse/ledger"
)

// renderFunc lays a loaded document out at a width, so a resize re-wraps it.
type renderFunc func(th Theme, width int) []string

// docScreen shows one document (a detail) that is loaded once and scrolled
// in a bubbles viewport. The viewport's own keys are not used: scrolling
// follows the app's keymap.
type docScreen struct {
	base
	title   string
	load    func(ctx context.Context) (renderFunc, *ledger.Action, error)
	render  renderFunc
	vp      viewport.Model
	loading bool
}

// docLoadedMsg is a loaded document, and the action it is about, if any.
type docLoadedMsg struct {
	render renderFunc
	action *ledger.Action
	err    error
}

func newDoc(th Theme, title string, load func(context.Context) (renderFunc, *ledger.Action, error)) *docScreen {
	return &docScreen{base: newBase(th), title: title, load: load, loading: true, vp: viewport.New()}
}

// Title implements Screen.
func (d *docScreen) Title() string { return d.title }

// Busy implements Screen.
func (d *docScreen) Busy() bool { return d.loading }

// Init implements Screen.
func (d *docScreen) Init() tea.Cmd {
	load := d.load
	return d.do(func(ctx context.Context) tea.Msg {
		r, a, err := load(ctx)
		return docLoadedMsg{render: r, action: a, err: err}
	})
}

// SetSize implements Screen: the document is laid out again at the new
// width.
func (d *docScreen) SetSize(w, h int) {
	d.base.SetSize(w, h)
	d.vp.SetWidth(w)
	d.vp.SetHeight(h)
	d.layout()
}

func (d *docScreen) layout() {
	if d.render != nil {
		d.vp.SetContentLines(d.render(d.th, d.width))
	}
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
		d.layout()
	case tea.KeyPressMsg:
		d.scroll(msg)
	}
	return d, nil
}

// scroll moves the viewport by the app's movement keys.
func (d *docScreen) scroll(msg tea.KeyPressMsg) { scrollViewport(&d.vp, msg) }

// scrollViewport moves a bubbles viewport by the app's movement keys (its
// own keys are not used); it reports whether msg was one of them.
func scrollViewport(vp *viewport.Model, msg tea.KeyPressMsg) bool {
	switch {
	case key.Matches(msg, Keys.Up):
		vp.ScrollUp(1)
	case key.Matches(msg, Keys.Down):
		vp.ScrollDown(1)
	case key.Matches(msg, Keys.PageUp):
		vp.PageUp()
	case key.Matches(msg, Keys.PageDown):
		vp.PageDown()
	case key.Matches(msg, Keys.Top):
		vp.GotoTop()
	case key.Matches(msg, Keys.Bottom):
		vp.GotoBottom()
	default:
		return false
	}
	return true
}

// View implements Screen.
func (d *docScreen) View() string {
	if d.loading {
		return "loading…"
	}
	shown := strings.Split(d.vp.View(), "\n")
	if !d.vp.AtBottom() && len(shown) > 0 { // say that there is more, and how to see it
		more := d.vp.TotalLineCount() - d.vp.YOffset() - len(shown) + 1
		shown[len(shown)-1] = d.th.Dim.Render(fmt.Sprintf("↓ %d more lines: %s or %s", more, keyOf(Keys.Down), keyOf(Keys.PageDown)))
	}
	return strings.Join(shown, "\n")
}

// KeyMap implements Screen.
func (d *docScreen) KeyMap() help.KeyMap {
	k := Keys
	return helpKeys{short: []key.Binding{k.Up, k.Down, k.PageDown},
		full: [][]key.Binding{navKeys()}}
}

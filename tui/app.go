package tui

import (
	"fmt"
	"strings"

	"charm.land/bubbles/v2/help"
	"charm.land/bubbles/v2/key"
	"charm.land/bubbles/v2/spinner"
	tea "charm.land/bubbletea/v2"
)

// App is the root model: it owns the terminal (alt screen, mouse), the app
// bar, the status line, the spinner, the help line, a stack of screens
// (esc returns to the one below) and the screens' I/O commands, which it
// runs under its own context and waits for when it closes (Bubble Tea
// does not wait for commands still running when the program quits).
type App struct {
	th       Theme
	stack    []Screen
	width    int
	height   int
	help     help.Model
	showHelp bool
	status   statusMsg
	spin     spinner.Model
	spinning bool
	onClose  []func()
	cmds     *commands
}

// chrome is how many lines the app bar, status line and help line take.
const chrome = 3

// NewApp returns the root model showing first. Functions in onClose run
// when the app quits (e.g. to remove a temporary ledger).
func NewApp(th Theme, first Screen, onClose ...func()) *App {
	h := help.New()
	h.Styles.ShortKey = th.Help.Bold(true)
	h.Styles.ShortDesc = th.Help
	h.Styles.FullKey = th.Help.Bold(true)
	h.Styles.FullDesc = th.Help
	return &App{
		th: th, stack: []Screen{first}, help: h,
		width: 80, height: 24, onClose: onClose,
		spin: spinner.New(spinner.WithSpinner(spinner.MiniDot)),
		cmds: newCommands(),
	}
}

// closer is a screen that holds something to release when the app closes
// (the home screen holds its rehearsals' ledgers and mailboxes, which the
// inspector may still be showing after the rehearsal screen was left).
type closer interface{ Close() }

// Close ends the app's context, waits for every I/O command still
// running, then closes every open screen and runs the clean-up functions
// given to NewApp: nothing is released while a command may still use it.
func (a *App) Close() {
	a.cmds.close()
	for i := len(a.stack) - 1; i >= 0; i-- {
		if c, ok := a.stack[i].(closer); ok {
			c.Close()
		}
	}
	for _, f := range a.onClose {
		f()
	}
	a.onClose = nil
}

func (a *App) top() Screen { return a.stack[len(a.stack)-1] }

// Init implements tea.Model.
func (a *App) Init() tea.Cmd {
	a.resize()
	return a.top().Init()
}

// Update implements tea.Model: it dispatches each kind of message to its
// handler.
func (a *App) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	var cmd tea.Cmd
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		a.width, a.height = msg.Width, msg.Height
		a.resize()
	case tea.KeyPressMsg:
		cmd = a.onKey(msg)
	case tea.MouseWheelMsg:
		cmd = a.onWheel(msg)
	case spinner.TickMsg:
		cmd = a.onSpin(msg)
	case routedMsg:
		cmd = a.onRouted(msg)
	case ioMsg:
		cmd = a.cmds.run(msg)
	case pushMsg:
		cmd = a.onPush(msg.screen)
	case popMsg:
		a.onPop()
	case statusMsg:
		if msg.owner == 0 {
			msg.owner = a.top().ID()
		}
		a.status = msg
		a.resize() // a long status takes lines from the body
	default:
		cmd = a.updateTop(msg)
	}
	return a, tea.Batch(cmd, a.startSpinner())
}

// resize gives every screen the body's size.
func (a *App) resize() {
	a.help.SetWidth(a.width)
	for _, s := range a.stack {
		s.SetSize(a.width, a.bodyHeight())
	}
}

func (a *App) bodyHeight() int { return max(a.height-chrome-(len(a.statusLines())-1), 1) }

func (a *App) onKey(msg tea.KeyPressMsg) tea.Cmd {
	if a.showHelp {
		a.showHelp = false // any key closes full help
		return nil
	}
	if key.Matches(msg, Keys.ForceQuit) {
		return a.quit()
	}
	if a.top().Capturing() {
		return a.updateTop(msg)
	}
	switch {
	case key.Matches(msg, Keys.Quit):
		return a.quit()
	case key.Matches(msg, Keys.Help):
		a.showHelp = true
		return nil
	case key.Matches(msg, Keys.Back) && len(a.stack) > 1:
		a.onPop()
		return nil
	}
	return a.updateTop(msg)
}

// quit ends the program and cancels the commands still running; the
// caller of Run closes the app afterwards, which waits for them, so that
// nothing is removed while a command may still use it.
func (a *App) quit() tea.Cmd {
	a.cmds.cancel()
	return tea.Quit
}

// onWheel turns the mouse wheel into the up and down keys of the screen.
func (a *App) onWheel(msg tea.MouseWheelMsg) tea.Cmd {
	switch msg.Button {
	case tea.MouseWheelUp:
		return a.updateTop(tea.KeyPressMsg{Code: tea.KeyUp})
	case tea.MouseWheelDown:
		return a.updateTop(tea.KeyPressMsg{Code: tea.KeyDown})
	}
	return nil
}

// startSpinner starts the spinner when the top screen became busy; the
// spinner stops re-arming itself once nothing is busy.
func (a *App) startSpinner() tea.Cmd {
	if a.spinning || !a.top().Busy() {
		return nil
	}
	a.spinning = true
	return a.spin.Tick
}

func (a *App) onSpin(msg spinner.TickMsg) tea.Cmd {
	if !a.top().Busy() {
		a.spinning = false
		return nil
	}
	var cmd tea.Cmd
	a.spin, cmd = a.spin.Update(msg)
	return cmd
}

// onRouted delivers a command's result to the screen that asked for it.
func (a *App) onRouted(msg routedMsg) tea.Cmd {
	for i, s := range a.stack {
		if s.ID() == msg.to {
			var cmd tea.Cmd
			a.stack[i], cmd = s.Update(msg.msg)
			return owned(s.ID(), cmd)
		}
	}
	return nil // the screen was closed meanwhile
}

func (a *App) onPush(s Screen) tea.Cmd {
	a.stack = append(a.stack, s)
	a.status = statusMsg{}
	a.resize()
	return owned(s.ID(), s.Init())
}

// onPop closes the top screen, and with it the status line it set.
func (a *App) onPop() {
	if len(a.stack) > 1 {
		a.stack = a.stack[:len(a.stack)-1]
		a.status = statusMsg{}
		a.resize()
	}
}

func (a *App) updateTop(msg tea.Msg) tea.Cmd {
	i := len(a.stack) - 1
	var cmd tea.Cmd
	a.stack[i], cmd = a.stack[i].Update(msg)
	return owned(a.stack[i].ID(), cmd)
}

// owned marks the status lines cmd produces as set by screen id, so each
// is shown only while that screen is on top.
func owned(id int, cmd tea.Cmd) tea.Cmd {
	if cmd == nil {
		return nil
	}
	return func() tea.Msg {
		switch msg := cmd().(type) {
		case statusMsg:
			if msg.owner == 0 {
				msg.owner = id
			}
			return msg
		case tea.BatchMsg:
			for i := range msg {
				msg[i] = owned(id, msg[i])
			}
			return msg
		default:
			return msg
		}
	}
}

// View implements tea.Model. The root alone decides alt screen and mouse.
func (a *App) View() tea.View {
	v := tea.NewView(a.Render())
	v.AltScreen = true
	v.MouseMode = tea.MouseModeCellMotion
	v.WindowTitle = "gatehouse · " + a.top().Title()
	return v
}

// Render draws the whole screen as text: app bar, body, status, help.
func (a *App) Render() string {
	body := a.top().View()
	if a.showHelp {
		body = a.th.Header.Render("Keys") + a.th.Dim.Render(" — any key closes this") + "\n\n" +
			strings.Join(fullHelpLines(a.help, a.fullKeys(), a.width), "\n")
	}
	lines := []string{
		fitLine(a.th.Title.Render("gatehouse")+" "+a.th.Header.Render(a.top().Title()), a.width),
		fitBlock(body, a.width, a.bodyHeight()),
		a.statusBlock(),
		fitLine(a.shortHelp(), a.width),
	}
	return strings.Join(lines, "\n")
}

// fullKeys adds the app's own bindings to the screen's full help: back
// only where there is a screen to go back to.
func (a *App) fullKeys() [][]key.Binding {
	app := appKeys()
	if len(a.stack) > 1 {
		app = append([]key.Binding{Keys.Back}, app...)
	}
	return append(a.top().KeyMap().FullHelp(), app)
}

// shortHelp is the help line: the screen's keys, most important first, as
// many as fit, then always back (below the first screen), help and quit.
// While a screen reads text its own keys (confirm, cancel) are all there is.
func (a *App) shortHelp() string {
	keys := a.top().KeyMap().ShortHelp()
	if a.top().Capturing() {
		return shortHelpLine(a.help, keys, nil, a.width)
	}
	tail := []key.Binding{Keys.Help, Keys.Quit}
	if len(a.stack) > 1 {
		tail = append([]key.Binding{Keys.Back}, tail...)
	}
	return shortHelpLine(a.help, keys, tail, a.width)
}

// maxStatusLines is how many lines a status may take from the body: an
// error is shown whole (wrapped), not cut at the screen's edge, up to this.
const maxStatusLines = 4

// statusLines are the status line's text, wrapped at the width after the
// spinner's column and the error mark: one line at least.
func (a *App) statusLines() []string {
	if a.status.owner != a.top().ID() || a.status.text == "" {
		return []string{""}
	}
	text := a.status.text
	if a.status.err {
		text = "✗ " + text
	}
	lines := wrapWords(text, max(a.width-2, 10))
	if len(lines) > maxStatusLines {
		lines = lines[:maxStatusLines]
		lines[maxStatusLines-1] = fitLine(lines[maxStatusLines-1], a.width-3) + ellipsis
	}
	return lines
}

// statusBlock draws the status lines, the spinner before the first while
// the screen is busy.
func (a *App) statusBlock() string {
	prefix := ""
	if a.top().Busy() {
		prefix = a.spin.View() + " "
	}
	style := a.th.Status
	if a.status.err {
		style = a.th.Bad
	}
	lines := a.statusLines()
	for i, l := range lines {
		if l != "" {
			l = style.Render(l)
		}
		if i == 0 {
			l = prefix + l
		} else {
			l = "  " + l
		}
		lines[i] = fitLine(l, a.width)
	}
	return strings.Join(lines, "\n")
}

// Run runs the app on the terminal until it quits, then closes it.
func Run(a *App) error {
	defer a.Close()
	if _, err := tea.NewProgram(a).Run(); err != nil {
		return fmt.Errorf("terminal app: %w", err)
	}
	return nil
}

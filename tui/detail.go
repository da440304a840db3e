package tui

import (
	"context"
	"fmt"
	"strings"

	"charm.land/bubbles/v2/help"
	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"

	"gatehouse/destination"
	"gatehouse/ledger"
)

// actionDetail shows everything the ledger knows about one action, and
// takes the operations on it the inspector takes (hold, release,
// reconcile, record by hand), reading the action again after each.
type actionDetail struct {
	*docScreen
	o      operator
	action ledger.Action // as last read
	form   *form
	ops    int // operations in flight
}

// newActionDetail is the detail of the action key, operated by o.
func newActionDetail(th Theme, o operator, key string) *actionDetail {
	return newNamedActionDetail(th, o, key, nil)
}

// newNamedActionDetail is newActionDetail with the text the ledger recorded
// passed through name (see scenarios.Run.Stable), when not nil, before it
// is laid out.
func newNamedActionDetail(th Theme, o operator, key string, name func(string) string) *actionDetail {
	l := o.l
	doc := newDoc(th, "action "+key, func(ctx context.Context) (renderFunc, *ledger.Action, error) {
		d, err := l.Detail(ctx, key)
		if err != nil {
			return nil, nil, fmt.Errorf("read action %s: %w", key, err)
		}
		a := d.Action
		if name != nil {
			d = renameDetail(d, name)
		}
		return func(th Theme, w int) []string { return actionDetailLines(th, d, w) }, &a, nil
	})
	return &actionDetail{docScreen: doc, o: o}
}

// Busy implements Screen.
func (d *actionDetail) Busy() bool { return d.docScreen.Busy() || d.ops > 0 }

// Capturing implements Screen.
func (d *actionDetail) Capturing() bool { return d.form != nil }

// Update implements Screen.
func (d *actionDetail) Update(msg tea.Msg) (Screen, tea.Cmd) {
	switch msg := msg.(type) {
	case docLoadedMsg:
		if msg.action != nil {
			d.action = *msg.action
		}
	case opMsg:
		d.ops--
		return d, tea.Batch(msg.status(), d.docScreen.Init())
	case tea.KeyPressMsg:
		if d.form != nil {
			done, cmd := d.form.update(msg)
			if done {
				d.form = nil
			}
			return d, cmd
		}
		if op, ok := actionOperation(msg, d.action, d.o.records != nil); ok && d.action.Key != "" {
			return d, d.do(d.o.permit(op))
		}
	case permitMsg:
		if !msg.ok {
			return d, msg.refused()
		}
		op := msg.op
		var cmd tea.Cmd
		d.form, cmd = op.form(func(reason string) tea.Cmd {
			d.ops++
			return d.do(d.o.perform(op, reason))
		})
		return d, cmd
	}
	_, cmd := d.docScreen.Update(msg)
	return d, cmd
}

// View implements Screen.
func (d *actionDetail) View() string {
	if d.form != nil {
		return d.form.view(d.th, d.width)
	}
	return d.docScreen.View()
}

// KeyMap implements Screen.
func (d *actionDetail) KeyMap() help.KeyMap {
	k := Keys
	if d.form != nil {
		return helpKeys{short: []key.Binding{k.Confirm, k.Cancel}}
	}
	ops := []key.Binding{k.Hold, k.ReleaseHold, k.Reconcile, k.Arrived, k.NotArrived}
	return helpKeys{short: append([]key.Binding{k.Down, k.PageDown}, ops...), full: [][]key.Binding{navKeys(), ops}}
}

// renameDetail passes every free text and address of d through name.
func renameDetail(d ledger.ActionDetail, name func(string) string) ledger.ActionDetail {
	a := &d.Action
	a.Destination, a.Lookup, a.Reason = name(a.Destination), name(a.Lookup), name(a.Reason)
	d.Approvals = append([]ledger.Approval(nil), d.Approvals...)
	for i := range d.Approvals {
		ap := &d.Approvals[i]
		ap.Destination, ap.Invalidated = name(ap.Destination), name(ap.Invalidated)
	}
	d.Attempts = append([]ledger.Attempt(nil), d.Attempts...)
	for i := range d.Attempts {
		at := &d.Attempts[i]
		at.Destination, at.Lookup, at.Response = name(at.Destination), name(at.Lookup), name(at.Response)
	}
	d.Events = append([]ledger.Event(nil), d.Events...)
	for i := range d.Events {
		e := &d.Events[i]
		e.Message, e.Reason = name(e.Message), name(e.Reason)
	}
	return d
}

// newTaskDetail shows a task: owner, who is on it, its actions (first page)
// and its newest history.
func newTaskDetail(th Theme, l *ledger.Ledger, id string) *docScreen {
	return newDoc(th, "task "+id, func(ctx context.Context) (renderFunc, *ledger.Action, error) {
		t, err := l.Task(ctx, id)
		if err != nil {
			return nil, nil, fmt.Errorf("read task %s: %w", id, err)
		}
		pres, err := l.Presence(ctx, id)
		if err != nil {
			return nil, nil, fmt.Errorf("read presence on %s: %w", id, err)
		}
		total, acts, err := l.ListActions(ctx, ledger.ActionFilter{TaskID: id, Limit: 50})
		if err != nil {
			return nil, nil, fmt.Errorf("list actions of %s: %w", id, err)
		}
		evs, err := l.History(ctx, ledger.HistoryFilter{TaskID: id, Limit: 50, Newest: true})
		if err != nil {
			return nil, nil, fmt.Errorf("read history of %s: %w", id, err)
		}
		return func(th Theme, w int) []string { return taskDetailLines(th, t, pres, total, acts, evs, w) }, nil, nil
	})
}

func actionDetailLines(th Theme, d ledger.ActionDetail, w int) []string {
	a := d.Action
	out := []string{th.Header.Render("Action " + a.Key)}
	state := stateWord(a.State, false)
	// Whose act the state is, from the history: "denied by the gate at
	// wf-ack's send", "cancelled: removed by lead".
	credit := ledger.CreditOf(a, d.Events)
	switch by := credit.Words(); {
	case by == "":
	case strings.HasPrefix(by, state+" "):
		state = by + " at " + credit.At.Format(clockFormat)
	default:
		state += ": " + by + " at " + credit.At.Format(clockFormat)
	}
	if a.HoldCause != "" {
		state += " (" + strings.ReplaceAll(string(a.HoldCause), "_", " ") + ")"
	}
	out = append(out, para("  state      ", th.mark(stateMark(a.State)).Render(state)+" — "+plainReason(a.Reason), w)...)
	if a.LateArrivals > 0 {
		out = append(out, para("  arrived    ", arrivalWords(th, d), w)...)
	}
	if req := a.RequestText(); req != "" {
		// The approval surface shows the write the provider will receive.
		out = append(out,
			fmt.Sprintf("  task       %s (owner %s)", a.TaskID, orDash(d.Task.Owner)),
			fmt.Sprintf("  via        %s", orDash(a.Endpoint().String())))
		for i, line := range strings.Split(req, "\n") {
			label := "  request    "
			if i > 0 {
				label = "             "
			}
			out = append(out, label+line)
		}
		out = append(out, fmt.Sprintf("  proposed   by %s at %s, digest %s", a.ProposedBy, a.CreatedAt.Format(clockFormat), short(a.Digest)))
		out = append(out, approvalLines(th, d.Approvals, w)...)
		out = append(out, checkLines(th, d.Checks)...)
		out = append(out, attemptLines(th, d.Attempts, w)...)
		return append(out, eventLines(th, "History", d.Events, w)...)
	}
	out = append(out,
		fmt.Sprintf("  task       %s (owner now %s)", a.TaskID, orDash(d.Task.Owner)),
		fmt.Sprintf("  to         %s", recipientLabel(a.Recipient, a.RecipientName)),
		fmt.Sprintf("  from       %s", orDash(a.Sender)),
		fmt.Sprintf("  via        %s", orDash(a.Endpoint().String())),
		fmt.Sprintf("  subject    %s", a.Subject),
		proposedLine(a, credit),
	)
	out = append(out, approvalLines(th, d.Approvals, w)...)
	out = append(out, checkLines(th, d.Checks)...)
	out = append(out, attemptLines(th, d.Attempts, w)...)
	if len(d.Correction) > 0 {
		out = append(out, "", th.Header.Render("Corrections"), "  "+strings.Join(d.Correction, ", "))
	}
	return append(out, eventLines(th, "History", d.Events, w)...)
}

// proposedLine names who proposed the action, from its history: an action
// recorded by someone's removal of a recipient was proposed by nobody.
func proposedLine(a ledger.Action, c ledger.Credit) string {
	if c.ProposedBy == "" && c.By != "" {
		return fmt.Sprintf("  proposed   by nobody (recorded at %s), digest %s", a.CreatedAt.Format(clockFormat), short(a.Digest))
	}
	return fmt.Sprintf("  proposed   by %s at %s, digest %s", orText(c.ProposedBy, a.ProposedBy), a.CreatedAt.Format(clockFormat), short(a.Digest))
}

func approvalLines(th Theme, aps []ledger.Approval, w int) []string {
	out := []string{"", th.Header.Render("Approvals")}
	if len(aps) == 0 {
		return append(out, th.Dim.Render("  none"))
	}
	for _, ap := range aps {
		valid := th.Good.Render("valid")
		if !ap.Valid {
			valid = th.Bad.Render("invalid: " + ap.Invalidated)
		}
		out = append(out, para(fmt.Sprintf("  %s by %s for owner %s, digest %s — ", ap.At.Format(clockFormat),
			ap.Approver, orDash(ap.Owner), short(ap.Digest)), valid, w)...)
		out = append(out, para("      ", fmt.Sprintf("to %s from %s via %s", ap.Recipient, orDash(ap.Sender), orDash(ap.Destination)), w)...)
		for _, m := range ap.Material {
			out = append(out, fmt.Sprintf("      approved %s = %q", m.Name(), m.Value))
		}
	}
	return out
}

func checkLines(th Theme, cs []ledger.MaterialCheck) []string {
	out := []string{"", th.Header.Render("Material checks (approved → read just before sending)")}
	if len(cs) == 0 {
		return append(out, th.Dim.Render("  none yet"))
	}
	for _, c := range cs {
		verdict, m := "matches", markGood
		switch {
		case c.Unavailable:
			verdict, m = "source unavailable", markWarn
		case !c.Matched:
			verdict, m = "DIFFERS", markBad
		}
		when := "before any attempt"
		if c.Attempt > 0 {
			when = fmt.Sprintf("attempt %d", c.Attempt)
		}
		out = append(out, fmt.Sprintf("  %s  %s.%s  %q → %q  %s", when, c.Source, c.Field,
			c.Approved, c.Read, th.mark(m).Render(verdict)))
	}
	return out
}

// attemptLines lead each attempt with its outcome, which a narrow screen
// must not cut, then who started it and its transport id (the Message-ID).
func attemptLines(th Theme, ats []ledger.Attempt, w int) []string {
	out := []string{"", th.Header.Render("Attempts")}
	if len(ats) == 0 {
		return append(out, th.Dim.Render("  none"))
	}
	for _, at := range ats {
		out = append(out, fmt.Sprintf("  #%d  %s, started by %s at %s", at.Number,
			th.mark(attemptMark(at)).Render(outcomeLabel(at)), at.Executor, at.StartedAt.Format(clockFormat)))
		where := ""
		if host, pid := at.ExecutorHost(); host != "" {
			where = fmt.Sprintf(", executor on %s (pid %d)", host, pid)
		}
		out = append(out, para("      ", fmt.Sprintf("to %s via %s, Message-ID %s%s", orDash(at.Recipient),
			orDash(at.Endpoint().String()), at.MessageID, where), w)...)
		for _, l := range para("      ", plainReason(at.Response), w) {
			out = append(out, th.Dim.Render(l))
		}
	}
	return out
}

// arrivalWords says which attempts of an action arrived, when one settled
// as not arrived did after all: twice is a fact shown, not a state.
func arrivalWords(th Theme, d ledger.ActionDetail) string {
	var arrived []int
	for _, at := range d.Attempts {
		if at.Arrived() {
			arrived = append(arrived, at.Number)
		}
	}
	if d.Action.ArrivedTwice() {
		return th.Bad.Render("ARRIVED TWICE") + fmt.Sprintf(": %s arrived, the customer has the message %d times; the state stays %s",
			ledger.AttemptList(arrived), len(arrived), stateWord(d.Action.State, false))
	}
	return th.Warn.Render("arrived late") + fmt.Sprintf(": %s arrived after it was settled as not arrived; it will not be sent again",
		ledger.AttemptList(arrived))
}

// outcomeLabel is an attempt's outcome in plain words.
func outcomeLabel(at ledger.Attempt) string {
	if at.Outcome == "" {
		return "in flight"
	}
	s := strings.ReplaceAll(string(at.Outcome), "_", " ")
	if at.Reconciled {
		s += " (reconciled)"
	}
	if !at.ArrivedLate.IsZero() {
		s += ", but ARRIVED LATE"
	}
	return s
}

// attemptMark is outcomeMark, and bad for an attempt that arrived after it
// was settled as not arrived.
func attemptMark(at ledger.Attempt) mark {
	if !at.ArrivedLate.IsZero() {
		return markBad
	}
	return outcomeMark(at.Outcome)
}

func outcomeMark(o destination.Outcome) mark {
	switch o {
	case destination.OutcomeAccepted:
		return markGood
	case destination.OutcomeUnknown, "":
		return markWarn
	case destination.OutcomeRejectedPermanent:
		return markBad
	}
	return markNone
}

func eventLines(th Theme, title string, evs []ledger.Event, w int) []string {
	out := []string{"", th.Header.Render(title)}
	for _, e := range evs {
		out = append(out, para("  "+e.At.Format(clockFormat)+"  ", eventSentence(e), w)...)
	}
	return out
}

// eventSentence is one history line: who did what, and why.
func eventSentence(e ledger.Event) string {
	s := e.Message
	if e.Reason != "" && !strings.Contains(s, e.Reason) {
		s += " — " + e.Reason
	}
	return plainReason(s)
}

func taskDetailLines(th Theme, t ledger.Task, pres []ledger.Presence, total int, acts []ledger.Action, evs []ledger.Event, w int) []string {
	out := []string{th.Header.Render("Task " + t.ID + " — " + t.Subject),
		fmt.Sprintf("  customer   %s", t.Customer),
		fmt.Sprintf("  status     %s", t.Status),
		fmt.Sprintf("  owner      %s (authoritative)", orDash(t.Owner)),
	}
	var on []string
	for _, p := range pres {
		on = append(on, p.Actor+" ("+p.Kind+")")
	}
	out = append(out, para("  on it now  ", orDash(strings.Join(on, ", "))+" — advisory only", w)...)
	out = append(out, "", th.Header.Render(fmt.Sprintf("Actions (%d)", total)))
	out = append(out, renderTable(th, actionCols, actionRows(acts, w), -1, w)...)
	return append(out, eventLines(th, "History (newest 50)", evs, w)...)
}

// short abbreviates a digest for display.
func short(digest string) string {
	digest = strings.TrimPrefix(digest, "sha256:")
	if len(digest) > 12 {
		return digest[:12]
	}
	return digest
}

// recipientLabel shows the address with its display name, if any.
func recipientLabel(addr, name string) string {
	if name == "" {
		return addr
	}
	return addr + " (" + name + ")"
}

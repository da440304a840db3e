package tui

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"

	"gatehouse/destination"
	"gatehouse/internal/keyname"
	"gatehouse/ledger"
	"gatehouse/ledger/answer"
)

// operator runs the gate's operations for a screen (the inspector, an
// action's detail) as someone, and says what came of each in the words of
// the command line: the state it led to, or what the verb's exit code
// means.
type operator struct {
	l     *ledger.Ledger
	actor string
	// records reaches destinations' records for reconcile and resolve;
	// nil holds the action for a person instead.
	records destination.RecordsOpener
}

// operation is one operator action on an action, a task, or the whole
// ledger (stop and resume).
type operation struct {
	verb    string // as the status line says it: "reconcile", "hold"
	title   string // as the confirmation asks it: "Reconcile", "Hold"
	explain string
	reason  bool
	done    string      // what came of it, for an operation on no action
	target  string      // an action key, a task id, or "" for the whole ledger
	task    string      // the action's task, so its name leaves it out
	gate    ledger.Verb // the gate verb, whose permission is asked before the confirmation
	run     func(ctx context.Context, o operator, target, reason string) (ledger.Action, error)
}

func (o operation) on(target string) operation {
	o.target = target
	return o
}

// opMsg is an operation's result.
type opMsg struct {
	op  operation
	a   ledger.Action
	err error
}

var (
	opHold = operation{verb: "hold", title: "Hold", reason: true, gate: ledger.VerbHold,
		explain: "The action waits for a person; no attempt starts until the hold is released.",
		run: func(ctx context.Context, o operator, key, reason string) (ledger.Action, error) {
			return o.l.Hold(ctx, key, o.actor, reason)
		}}
	opRelease = operation{verb: "release hold on", title: "Release hold on", reason: true, gate: ledger.VerbReleaseHold,
		explain: "The action continues: approved again while its approval still matches.",
		run: func(ctx context.Context, o operator, key, reason string) (ledger.Action, error) {
			return o.l.ReleaseHold(ctx, key, o.actor, reason)
		}}
	opTakeOver = operation{verb: "take over task", title: "Take over task", reason: true, gate: ledger.VerbTakeover,
		done:    "you own it now; the previous owner's pending sends are stopped by the gate",
		explain: "You become the owner; the previous owner is notified and its pending sends are stopped by the gate.",
		run: func(ctx context.Context, o operator, task, reason string) (ledger.Action, error) {
			_, err := o.l.TakeOver(ctx, ledger.TaskRef{ID: task}, o.actor, reason)
			return ledger.Action{}, err
		}}
	opStop = operation{verb: "stop all execution", title: "STOP all execution", reason: true, gate: ledger.VerbStop,
		done:    "stopped: no attempt starts anywhere until resume",
		explain: "From now on no attempt starts anywhere; attempts in flight finish and record their outcome.",
		run: func(ctx context.Context, o operator, _, reason string) (ledger.Action, error) {
			return ledger.Action{}, o.l.Stop(ctx, o.actor, reason)
		}}
	opResume = operation{verb: "resume execution", title: "Resume execution", reason: true, gate: ledger.VerbResume,
		done:    "resumed: the holds the stop caused are released",
		explain: "Turns the stop switch off and releases the holds the stop caused.",
		run: func(ctx context.Context, o operator, _, reason string) (ledger.Action, error) {
			return ledger.Action{}, o.l.Resume(ctx, o.actor, reason)
		}}
)

// opResolve records an unknown outcome a person established by checking
// the destination themselves, for when no lookup can: `gate resolve`.
func opResolve(arrived bool) operation {
	op := operation{verb: "record as arrived", title: "Record as arrived:", reason: true, gate: ledger.VerbResolve,
		explain: "You checked the destination yourself and the message is there: the action becomes sent."}
	if !arrived {
		op.verb, op.title = "record as not arrived", "Record as not arrived:"
		op.explain = "You checked the destination yourself and the message is not there: the action is held, safe to retry after review."
	}
	op.run = func(ctx context.Context, o operator, key, reason string) (ledger.Action, error) {
		return o.l.Resolve(ctx, ledger.ResolveRequest{Key: key, Actor: o.actor, Delivered: arrived, Reason: reason, Open: o.records})
	}
	return op
}

// opReconcile asks the destination's records, never re-sends, as `gate
// reconcile` does (answer.Reconcile). It records the evidence it finds, so
// it asks for confirmation only; what it promises depends on the action.
func opReconcile(a ledger.Action, records bool) operation {
	var explain string
	switch {
	case !a.OutcomeOpen():
		explain = fmt.Sprintf("Its outcome is not open (it is %s): nothing is asked about it. The gate only reads again the records of earlier attempts settled as not arrived, and otherwise answers \"nothing to reconcile\" and changes nothing.",
			stateWord(a.State, false))
	case !records:
		explain = "No destination records can be reached from here: the gate will hold the action for a person."
	default:
		explain = "Asks the records of the destination the last attempt went to for its own message: found → sent; absent → held, safe to retry after review; anything else → held for a person."
	}
	return operation{verb: "reconcile", title: "Reconcile", explain: explain, gate: ledger.VerbReconcile,
		run: func(ctx context.Context, o operator, key, _ string) (ledger.Action, error) {
			return answer.Reconcile(ctx, o.l, ledger.ReconcileRequest{Key: key, Actor: o.actor, Open: o.records})
		}}
}

// actionOperation maps a key to the operation it asks for on action a.
func actionOperation(msg tea.KeyPressMsg, a ledger.Action, records bool) (operation, bool) {
	var op operation
	switch {
	case key.Matches(msg, Keys.Hold):
		op = opHold
	case key.Matches(msg, Keys.ReleaseHold):
		op = opRelease
	case key.Matches(msg, Keys.Reconcile):
		op = opReconcile(a, records)
	case key.Matches(msg, Keys.Arrived):
		op = opResolve(true)
	case key.Matches(msg, Keys.NotArrived):
		op = opResolve(false)
	default:
		return operation{}, false
	}
	op.task = a.TaskID
	return op.on(a.Key), true
}

// form asks to confirm op, with a reason where the gate records one.
func (op operation) form(run func(reason string) tea.Cmd) (*form, tea.Cmd) {
	title := op.title
	if op.target != "" {
		title += " " + op.target
	}
	return newForm(title+"?", op.explain, op.reason, run)
}

// perform runs op through the gate, as the screen's I/O.
func (o operator) perform(op operation, reason string) func(context.Context) tea.Msg {
	return func(ctx context.Context) tea.Msg {
		a, err := op.run(ctx, o, op.target, reason)
		return opMsg{op: op, a: a, err: err}
	}
}

// status says what came of the operation, in the words of the CLI: what
// the action is now and why, or what the verb's exit code means and what
// the gate said. A hold is the gate's answer, not a failure.
func (m opMsg) status() tea.Cmd {
	text := m.sentence()
	if code := answer.Code(m.err); code != answer.OK && code != answer.Held {
		return func() tea.Msg { return statusMsg{text: text, err: true} }
	}
	return info(text)
}

// sentence is the result line: "reconcile enquiry-3301 → sent: …",
// "reconcile enquiry-3301 → nothing to reconcile … (exit 19): …".
func (m opMsg) sentence() string {
	what := m.op.verb
	if m.op.target != "" {
		name := m.op.target
		if _, err := ledger.ParseKey(name); err == nil {
			name = keyname.Name(name, m.op.task, 0)
		}
		what += " " + name
	}
	code := answer.Code(m.err)
	switch {
	case m.err == nil && m.a.Key != "":
		return fmt.Sprintf("%s → %s: %s", what, stateWord(m.a.State, false), plainReason(withoutKey(m.a.Reason, m.a.Key)))
	case m.err == nil:
		return what + " → " + orText(m.op.done, "done")
	}
	return fmt.Sprintf("%s → %s (exit %d): %s", what, answer.Meaning(code), code, plainReason(withoutKey(refusal(m.err), m.op.target)))
}

// refusal is a gate error in plain words: what a person can do says most,
// then the state the action is in.
func refusal(err error) string {
	var se *ledger.StateError
	if errors.As(err, &se) {
		if se.Hint != "" {
			return fmt.Sprintf("%s (it is %s)", se.Hint, stateWord(se.State, false))
		}
		return fmt.Sprintf("%v (it is %s)", se.Err, stateWord(se.State, false))
	}
	return err.Error()
}

// plainReason turns what a lookup of a mailbox that is gone says (a dial
// error, its URL escaped) into what it means, and where to go from there:
// a rehearsal's mailbox lives as long as the rehearsal, so a ledger kept
// after it (rehearse --ledger) can only be settled by hand.
func plainReason(s string) string {
	loc := refusedHere.FindStringSubmatchIndex(s)
	if loc == nil {
		return s
	}
	at := s[loc[2]:loc[3]]
	said := fmt.Sprintf("nothing answers at %s: its mailbox has stopped, as a rehearsal's does when the rehearsal ends; check by hand, then %s arrived or %s did not arrive",
		at, keyOf(Keys.Arrived), keyOf(Keys.NotArrived))
	// The error stands in parentheses in the gate's sentence: the whole
	// of them is replaced, URL and all.
	open, end := strings.LastIndex(s[:loc[0]], "("), strings.Index(s[loc[1]:], ")")
	if open < 0 || end < 0 {
		return s[:loc[0]] + said + s[loc[1]:]
	}
	return s[:open] + "(" + said + ")" + s[loc[1]+end+1:]
}

// refusedHere is a refused connection to this machine in a lookup's
// error, and the address it tried.
var refusedHere = regexp.MustCompile(`dial tcp ((?:127\.0\.0\.1|\[::1\]|localhost):\d+): connect: connection refused`)

package tui

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"

	"gatehouse/ledger"
)

// onKey handles a key press: the open form or search first, then the
// inspector's bindings, then list movement.
func (in *Inspector) onKey(msg tea.KeyPressMsg) tea.Cmd {
	switch {
	case in.form != nil:
		return in.onFormKey(msg)
	case in.searching:
		return in.onSearchKey(msg)
	case key.Matches(msg, Keys.Focus):
		in.tab = (in.tab + 1) % tabCount
		return in.load()
	case key.Matches(msg, Keys.Filter) && in.current() != nil:
		in.searching = true
		in.search.SetValue(in.current().search)
		in.search.Placeholder = "any part of the key, customer, recipient or subject"
		if in.tab == tabTasks {
			in.search.Placeholder = "any part of the task id, customer or subject"
		}
		in.search.CursorEnd()
		return in.search.Focus()
	case key.Matches(msg, Keys.StateFilter) && in.tab == tabActions:
		li := in.current()
		li.state = (li.state + 1) % len(stateChoices)
		li.pos.cursor, li.pos.top, li.follow = 0, 0, ""
		return in.load()
	case key.Matches(msg, Keys.Open):
		return in.openDetail()
	}
	if op, ok := in.operationFor(msg); ok {
		return in.ask(op)
	}
	if li := in.current(); li != nil && li.pos.onKey(msg) {
		// The selection moved: it is what the cursor is on now, once loaded.
		li.follow = ""
		if li.pos.top != in.loadedTop {
			return in.load()
		}
		li.follow = in.keyAt(in.tab, li.pos.selected())
	}
	return nil
}

func (in *Inspector) onSearchKey(msg tea.KeyPressMsg) tea.Cmd {
	switch {
	case key.Matches(msg, Keys.Cancel):
		in.searching = false
		in.search.Blur()
		return nil
	case key.Matches(msg, Keys.Apply):
		in.searching = false
		in.search.Blur()
		li := in.current()
		li.search = in.search.Value()
		li.pos.cursor, li.pos.top, li.follow = 0, 0, ""
		return in.load()
	}
	var cmd tea.Cmd
	in.search, cmd = in.search.Update(msg)
	return cmd
}

func (in *Inspector) onFormKey(msg tea.KeyPressMsg) tea.Cmd {
	done, cmd := in.form.update(msg)
	if done {
		in.form = nil
	}
	return cmd
}

// operation is one operator action on the selected row (or on the whole
// ledger, for stop and resume).
type operation struct {
	verb    string
	explain string
	reason  bool
	target  string // an action key, a task id, or "" for the whole ledger
	run     func(ctx context.Context, l *ledger.Ledger, actor, target, reason string) error
}

// operationFor maps a key to the operation it asks for on the selection.
func (in *Inspector) operationFor(msg tea.KeyPressMsg) (operation, bool) {
	act, task := in.selectedKey(), in.selectedTask()
	switch {
	case key.Matches(msg, Keys.Stop):
		return opStop, true
	case key.Matches(msg, Keys.Resume):
		return opResume, true
	case key.Matches(msg, Keys.TakeOver) && task != "":
		return opTakeOver.on(task), true
	case act == "":
		return operation{}, false
	case key.Matches(msg, Keys.Hold):
		return opHold.on(act), true
	case key.Matches(msg, Keys.ReleaseHold):
		return opRelease.on(act), true
	case key.Matches(msg, Keys.Reconcile):
		return in.opReconcile().on(act), true
	case key.Matches(msg, Keys.Arrived):
		return opResolve(true).on(act), true
	case key.Matches(msg, Keys.NotArrived):
		return opResolve(false).on(act), true
	}
	return operation{}, false
}

func (o operation) on(target string) operation {
	o.target = target
	return o
}

var (
	opHold = operation{verb: "Hold", reason: true,
		explain: "The action waits for a person; no attempt starts until the hold is released.",
		run: func(ctx context.Context, l *ledger.Ledger, actor, key, reason string) error {
			_, err := l.Hold(ctx, key, actor, reason)
			return err
		}}
	opRelease = operation{verb: "Release hold on", reason: true,
		explain: "The action continues: approved again while its approval still matches.",
		run: func(ctx context.Context, l *ledger.Ledger, actor, key, reason string) error {
			_, err := l.ReleaseHold(ctx, key, actor, reason)
			return err
		}}
	opTakeOver = operation{verb: "Take over task", reason: true,
		explain: "You become the owner; the previous owner is notified and its pending sends are stopped by the gate.",
		run: func(ctx context.Context, l *ledger.Ledger, actor, task, reason string) error {
			_, err := l.TakeOver(ctx, ledger.TaskRef{ID: task}, actor, reason)
			return err
		}}
	opStop = operation{verb: "STOP all execution", reason: true,
		explain: "From now on no attempt starts anywhere; attempts in flight finish and record their outcome.",
		run: func(ctx context.Context, l *ledger.Ledger, actor, _, reason string) error {
			return l.Stop(ctx, actor, reason)
		}}
	opResume = operation{verb: "Resume execution", reason: true,
		explain: "Turns the stop switch off and releases the holds the stop caused.",
		run: func(ctx context.Context, l *ledger.Ledger, actor, _, reason string) error {
			return l.Resume(ctx, actor, reason)
		}}
)

// opResolve records an unknown outcome a person established by checking
// the destination themselves, for when no lookup can.
func opResolve(arrived bool) operation {
	op := operation{verb: "Record as arrived:", reason: true,
		explain: "You checked the destination yourself and the message is there: the action becomes sent."}
	if !arrived {
		op.verb = "Record as not arrived:"
		op.explain = "You checked the destination yourself and the message is not there: the action is held, safe to retry after review."
	}
	op.run = func(ctx context.Context, l *ledger.Ledger, actor, key, reason string) error {
		_, err := l.ResolveUnknown(ctx, key, actor, arrived, reason)
		return err
	}
	return op
}

// opReconcile asks the destination's records, never re-sends. Reconcile
// records the evidence it found, so it asks for confirmation only.
func (in *Inspector) opReconcile() operation {
	explain := "Asks the records of the destination the last attempt went to for its own message: found → sent; absent → held, safe to retry after review; anything else → held for a person."
	records := in.cfg.Records
	if records == nil {
		explain = "No destination records can be reached from here: the gate will hold the action for a person."
	}
	return operation{verb: "Reconcile", explain: explain,
		run: func(ctx context.Context, l *ledger.Ledger, actor, key, _ string) error {
			_, err := l.Reconcile(ctx, ledger.ReconcileRequest{Key: key, Actor: actor, Open: records})
			return err
		}}
}

// ask opens the confirmation form for op.
func (in *Inspector) ask(op operation) tea.Cmd {
	title := op.verb
	if op.target != "" {
		title += " " + op.target
	}
	var cmd tea.Cmd
	in.form, cmd = newForm(title+"?", op.explain, op.reason, func(reason string) tea.Cmd {
		return in.perform(op, title, reason)
	})
	return cmd
}

// perform runs op through the gate; a refusal comes back in the gate's
// words, reason first (so a narrow status line keeps it) and the key once.
func (in *Inspector) perform(op operation, title, reason string) tea.Cmd {
	in.ops++
	l, actor := in.cfg.Ledger, in.cfg.Actor
	return in.do(func(ctx context.Context) tea.Msg {
		err := op.run(ctx, l, actor, op.target, reason)
		name := strings.TrimSuffix(strings.TrimSuffix(op.verb, ":"), " on")
		if err != nil && op.target != "" {
			err = fmt.Errorf("%s refused: %s — %s", name, withoutKey(refusal(err), op.target), op.target)
		} else if err != nil {
			err = fmt.Errorf("%s refused: %w", name, err)
		}
		return opMsg{what: title, err: err}
	})
}

// refusal is a gate error in plain words, without the key it is about.
func refusal(err error) string {
	var se *ledger.StateError
	if errors.As(err, &se) {
		if se.Hint != "" { // what a person can do says most
			return fmt.Sprintf("%s (it is %s)", se.Hint, stateWord(se.State, false))
		}
		return fmt.Sprintf("%v (it is %s)", se.Err, stateWord(se.State, false))
	}
	return err.Error()
}

func (in *Inspector) onOp(msg opMsg) tea.Cmd {
	in.ops--
	var se *ledger.StateError
	if errors.As(msg.err, &se) && errors.Is(se.Err, ledger.ErrHeld) {
		// The gate's answer, not a failure: the action now waits for a person.
		return tea.Batch(info(msg.what+": held for a person — "+se.Hint), in.load())
	}
	if msg.err != nil {
		return fail(msg.err)
	}
	return tea.Batch(info("done: "+msg.what), in.load())
}

// selectedKey is the action key under the cursor, if any.
func (in *Inspector) selectedKey() string {
	li := in.current()
	if li == nil || in.tab == tabTasks {
		return ""
	}
	if i := li.pos.selected(); i >= 0 && i < len(li.actions) {
		return li.actions[i].Key
	}
	return ""
}

// selectedTask is the task under the cursor, or the selected action's task.
func (in *Inspector) selectedTask() string {
	li := in.current()
	if li == nil {
		return ""
	}
	i := li.pos.selected()
	switch {
	case in.tab == tabTasks && i >= 0 && i < len(li.tasks):
		return li.tasks[i].ID
	case i >= 0 && i < len(li.actions):
		return li.actions[i].TaskID
	}
	return ""
}

// openDetail opens the selected row's detail.
func (in *Inspector) openDetail() tea.Cmd {
	l := in.cfg.Ledger
	if k := in.selectedKey(); k != "" {
		return push(newActionDetail(in.th, l, k))
	}
	if in.tab == tabTasks {
		if t := in.selectedTask(); t != "" {
			return push(newTaskDetail(in.th, l, t))
		}
	}
	return nil
}

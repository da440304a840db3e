package tui

import (
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

// operationFor maps a key to the operation it asks for on the selection.
func (in *Inspector) operationFor(msg tea.KeyPressMsg) (operation, bool) {
	act, task := in.selectedAction(), in.selectedTask()
	switch {
	case key.Matches(msg, Keys.Stop):
		return opStop, true
	case key.Matches(msg, Keys.Resume):
		return opResume, true
	case key.Matches(msg, Keys.TakeOver) && task != "":
		return opTakeOver.on(task), true
	case act == nil:
		return operation{}, false
	}
	return actionOperation(msg, *act, in.operator().records != nil)
}

func (in *Inspector) operator() operator {
	return operator{l: in.cfg.Ledger, actor: in.cfg.Actor, records: in.cfg.Records}
}

// ask asks the ledger whether the operator may do op; onPermit opens the
// confirmation or says why not.
func (in *Inspector) ask(op operation) tea.Cmd {
	return in.do(in.operator().permit(op))
}

func (in *Inspector) onPermit(msg permitMsg) tea.Cmd {
	if !msg.ok {
		return msg.refused()
	}
	return in.confirm(msg.op)
}

// confirm opens the confirmation form for op.
func (in *Inspector) confirm(op operation) tea.Cmd {
	var cmd tea.Cmd
	in.form, cmd = op.form(func(reason string) tea.Cmd {
		in.ops++
		return in.do(in.operator().perform(op, reason))
	})
	return cmd
}

func (in *Inspector) onOp(msg opMsg) tea.Cmd {
	in.ops--
	return tea.Batch(msg.status(), in.load())
}

// selectedAction is the action under the cursor, if any.
func (in *Inspector) selectedAction() *ledger.Action {
	li := in.current()
	if li == nil || in.tab == tabTasks {
		return nil
	}
	if i := li.pos.selected(); i >= 0 && i < len(li.actions) {
		return &li.actions[i]
	}
	return nil
}

// selectedKey is the action key under the cursor, if any.
func (in *Inspector) selectedKey() string {
	if a := in.selectedAction(); a != nil {
		return a.Key
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
		return push(newActionDetail(in.th, in.operator(), k))
	}
	if in.tab == tabTasks {
		if t := in.selectedTask(); t != "" {
			return push(newTaskDetail(in.th, l, t))
		}
	}
	return nil
}

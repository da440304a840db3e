package tui

import (
	"context"
	"fmt"

	tea "charm.land/bubbletea/v2"

	"gatehouse/ledger"
)

// query is what one load reads: only the visible window of the tab in
// view, never a whole table.
type query struct {
	seq     int
	tab     tab
	actions ledger.ActionFilter
	tasks   ledger.TaskFilter
}

// loadedMsg is the result of a query.
type loadedMsg struct {
	seq     int
	tab     tab
	total   int
	tasks   []ledger.TaskSummary
	actions []ledger.Action
	metrics ledger.Metrics
	sw      ledger.Switch
	err     error
}

// holdStates are the states the holds tab shows.
var holdStates = []ledger.State{ledger.StateHeld, ledger.StateUnknown}

// load reads the visible window of the tab in view.
func (in *Inspector) load() tea.Cmd {
	in.seq++
	q := query{seq: in.seq, tab: in.tab}
	if li := in.current(); li != nil {
		q.actions = ledger.ActionFilter{Search: li.search, Limit: li.pos.rows, Offset: li.pos.top}
		q.tasks = ledger.TaskFilter{Search: li.search, Limit: li.pos.rows, Offset: li.pos.top}
		if s := stateChoices[li.state]; in.tab == tabActions && s != "" {
			q.actions.States = []ledger.State{s}
		}
		if in.tab == tabHolds {
			q.actions.States = holdStates
		}
		in.loadedTop = li.pos.top
	}
	l := in.cfg.Ledger
	return in.do(func() tea.Msg { return q.run(context.Background(), l) })
}

// run performs the query. The stop switch is read with every load so the
// banner is never stale.
func (q query) run(ctx context.Context, l *ledger.Ledger) loadedMsg {
	m := loadedMsg{seq: q.seq, tab: q.tab}
	if m.sw, m.err = l.StopState(ctx); m.err != nil {
		m.err = fmt.Errorf("read stop switch: %w", m.err)
		return m
	}
	switch q.tab {
	case tabTasks:
		m.total, m.tasks, m.err = l.ListTasks(ctx, q.tasks)
	case tabActions, tabHolds:
		m.total, m.actions, m.err = l.ListActions(ctx, q.actions)
	case tabMetrics:
		m.metrics, m.err = l.Metrics(ctx)
	}
	if m.err != nil {
		m.err = fmt.Errorf("load %s: %w", tabNames[q.tab], m.err)
	}
	return m
}

// onLoaded shows a result unless a newer load was asked for meanwhile.
func (in *Inspector) onLoaded(msg loadedMsg) tea.Cmd {
	if msg.seq != in.seq {
		return nil
	}
	in.loaded = true
	if msg.err != nil {
		return fail(msg.err)
	}
	in.sw = msg.sw
	if msg.tab >= tabMetrics {
		in.metrics = msg.metrics
		return nil
	}
	li := &in.lists[msg.tab]
	li.tasks, li.actions = msg.tasks, msg.actions
	li.pos.setTotal(msg.total)
	if li.pos.top != in.loadedTop {
		return in.load() // the list shrank under the cursor: load where it is now
	}
	return nil
}

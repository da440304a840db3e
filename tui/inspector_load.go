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
	// follow is the key or task id selected before the load; the load finds
	// where it stands now and keeps it on the same screen line (selRow).
	follow string
	selRow int
}

// loadedMsg is the result of a query.
type loadedMsg struct {
	seq     int
	tab     tab
	top     int  // the first row loaded
	found   bool // the followed row was found, at rank
	rank    int
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
		q.follow, q.selRow = li.follow, li.pos.selected()
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
	if m.err = q.findFollowed(ctx, l, &m); m.err != nil {
		return m
	}
	m.top = q.actions.Offset
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

// findFollowed finds where the selected row stands now and moves the window
// so that it stays on the same screen line.
func (q *query) findFollowed(ctx context.Context, l *ledger.Ledger, m *loadedMsg) error {
	if q.follow == "" {
		return nil
	}
	var err error
	switch q.tab {
	case tabTasks:
		m.rank, m.found, err = l.TaskRank(ctx, q.tasks, q.follow)
	case tabActions, tabHolds:
		m.rank, m.found, err = l.ActionRank(ctx, q.actions, q.follow)
	}
	if err != nil {
		return fmt.Errorf("find %s: %w", q.follow, err)
	}
	if m.found {
		top := max(m.rank-q.selRow, 0)
		q.actions.Offset, q.tasks.Offset = top, top
	}
	return nil
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
	li.tasks, li.actions, li.loaded = msg.tasks, msg.actions, true
	if msg.found {
		li.pos.cursor, li.pos.top = msg.rank, msg.top
	}
	in.loadedTop = li.pos.top
	li.pos.setTotal(msg.total)
	if li.pos.top != in.loadedTop {
		return in.load() // the list shrank under the cursor: load where it is now
	}
	li.follow = in.keyAt(msg.tab, li.pos.selected())
	return nil
}

// keyAt is the identity (action key or task id) of a loaded row of tab t.
func (in *Inspector) keyAt(t tab, i int) string {
	li := &in.lists[t]
	switch {
	case i < 0:
	case t == tabTasks && i < len(li.tasks):
		return li.tasks[i].ID
	case t != tabTasks && i < len(li.actions):
		return li.actions[i].Key
	}
	return ""
}

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
	// standing is read with every load, so a role granted or revoked
	// while the screen is open shows at the next change.
	standing standing
	err      error
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
	l, actor := in.cfg.Ledger, in.cfg.Actor
	return in.do(func(ctx context.Context) tea.Msg {
		m := q.run(ctx, l)
		m.standing = readStanding(ctx, l, actor)
		return m
	})
}

// run performs the query. The stop switch is read with every load so the
// banner is never stale.
func (q query) run(ctx context.Context, l *ledger.Ledger) loadedMsg {
	m := loadedMsg{seq: q.seq, tab: q.tab}
	if m.sw, m.err = l.StopState(ctx); m.err != nil {
		m.err = fmt.Errorf("read stop switch: %w", m.err)
		return m
	}
	if q.tab >= tabMetrics {
		if q.tab == tabMetrics {
			if m.metrics, m.err = l.Metrics(ctx); m.err != nil {
				m.err = fmt.Errorf("load %s: %w", tabNames[q.tab], m.err)
			}
		}
		return m
	}
	if m.err = q.page(ctx, l, &m); m.err == nil {
		m.err = q.findFollowed(ctx, l, &m)
	}
	if m.err != nil {
		m.err = fmt.Errorf("load %s: %w", tabNames[q.tab], m.err)
	}
	return m
}

// page reads the window of rows at the query's offset.
func (q *query) page(ctx context.Context, l *ledger.Ledger, m *loadedMsg) error {
	var err error
	m.top = q.actions.Offset
	if q.tab == tabTasks {
		m.total, m.tasks, err = l.ListTasks(ctx, q.tasks)
	} else {
		m.total, m.actions, err = l.ListActions(ctx, q.actions)
	}
	return err
}

// findFollowed keeps the selected row selected: when newer rows arrived
// above it, it finds where the row stands now and reads the window that
// keeps it on the same screen line. When the row is still on that line, as
// on most reloads, it costs nothing more.
func (q *query) findFollowed(ctx context.Context, l *ledger.Ledger, m *loadedMsg) error {
	if q.follow == "" {
		return nil
	}
	if i := m.indexOf(q.follow); i >= 0 {
		m.found, m.rank = true, m.top+i
	} else {
		var err error
		if q.tab == tabTasks {
			m.rank, m.found, err = l.TaskRank(ctx, q.tasks, q.follow)
		} else {
			m.rank, m.found, err = l.ActionRank(ctx, q.actions, q.follow)
		}
		if err != nil || !m.found {
			return err
		}
	}
	top := max(m.rank-q.selRow, 0)
	if top == m.top {
		return nil
	}
	q.actions.Offset, q.tasks.Offset = top, top
	return q.page(ctx, l, m)
}

// indexOf is where the row with this key or task id is in the page, or -1.
func (m *loadedMsg) indexOf(id string) int {
	for i, t := range m.tasks {
		if t.ID == id {
			return i
		}
	}
	for i, a := range m.actions {
		if a.Key == id {
			return i
		}
	}
	return -1
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
	in.standing = msg.standing
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

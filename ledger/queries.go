package ledger

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Action reads one action.
func (l *Ledger) Action(ctx context.Context, key string) (Action, error) {
	var a Action
	err := l.read(ctx, func(tx queryTx) error {
		var err error
		a, err = getAction(tx, key)
		return err
	})
	return a, err
}

// ActionDetail is everything the ledger knows about one action.
type ActionDetail struct {
	Action     Action
	Task       Task
	Approvals  []Approval // newest first
	Attempts   []Attempt  // in order
	Checks     []MaterialCheck
	Events     []Event
	Correction []string // keys of corrections of this action
}

// Detail reads an action with its approvals, attempts, material checks and
// history.
func (l *Ledger) Detail(ctx context.Context, key string) (ActionDetail, error) {
	var d ActionDetail
	err := l.read(ctx, func(tx queryTx) error {
		var err error
		if d.Action, err = getAction(tx, key); err != nil {
			return err
		}
		if d.Task, err = getTask(tx, d.Action.TaskID); err != nil {
			return err
		}
		if d.Approvals, err = listApprovals(tx, key); err != nil {
			return err
		}
		if d.Attempts, err = listAttempts(tx, key); err != nil {
			return err
		}
		if d.Checks, err = listChecks(tx, key); err != nil {
			return err
		}
		if d.Events, err = listEvents(tx, HistoryFilter{ActionKey: key}); err != nil {
			return err
		}
		rows, err := tx.Query(`SELECT key FROM actions WHERE corrects = ? ORDER BY revision`, key)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var k string
			if err := rows.Scan(&k); err != nil {
				return err
			}
			d.Correction = append(d.Correction, k)
		}
		return rows.Err()
	})
	return d, err
}

func listApprovals(q queryer, key string) ([]Approval, error) {
	rows, err := q.Query(`SELECT id, action_key, approver, digest, recipient, target, destination, sender, owner, material, at, valid, invalidated, settle
		FROM approvals WHERE action_key = ? ORDER BY id DESC`, key)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Approval
	for rows.Next() {
		var ap Approval
		var mat string
		var at int64
		var valid int
		if err := rows.Scan(&ap.ID, &ap.ActionKey, &ap.Approver, &ap.Digest, &ap.Recipient, &ap.Target, &ap.Destination, &ap.Sender,
			&ap.Owner, &mat, &at, &valid, &ap.Invalidated, &ap.Settle); err != nil {
			return nil, err
		}
		ap.At, ap.Valid = fromNS(at), valid == 1
		if err := json.Unmarshal([]byte(mat), &ap.Material); err != nil {
			return nil, fmt.Errorf("approval %d material: %w", ap.ID, err)
		}
		out = append(out, ap)
	}
	return out, rows.Err()
}

func listAttempts(q queryer, key string) ([]Attempt, error) {
	rows, err := q.Query(`SELECT `+attemptCols+` FROM attempts WHERE action_key = ? ORDER BY number`, key)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Attempt
	for rows.Next() {
		at, err := scanAttempt(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, at)
	}
	return out, rows.Err()
}

func listChecks(q queryer, key string) ([]MaterialCheck, error) {
	rows, err := q.Query(`SELECT action_key, attempt, at, source, field, approved, read_value, matched, unavailable
		FROM material_checks WHERE action_key = ? ORDER BY id`, key)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []MaterialCheck
	for rows.Next() {
		var c MaterialCheck
		var at int64
		var m, u int
		if err := rows.Scan(&c.ActionKey, &c.Attempt, &at, &c.Source, &c.Field, &c.Approved, &c.Read, &m, &u); err != nil {
			return nil, err
		}
		c.At, c.Matched, c.Unavailable = fromNS(at), m == 1, u == 1
		out = append(out, c)
	}
	return out, rows.Err()
}

// Attempts lists the attempts of an action in order.
func (l *Ledger) Attempts(ctx context.Context, key string) ([]Attempt, error) {
	var out []Attempt
	err := l.read(ctx, func(tx queryTx) error {
		var err error
		out, err = listAttempts(tx, key)
		return err
	})
	return out, err
}

// ActionFilter selects a page of actions. Zero values select everything.
type ActionFilter struct {
	States []State
	TaskID string
	Search string // a substring of the key, customer, recipient or subject, in any case
	Limit  int    // default 100
	Offset int
}

func (f ActionFilter) where() (string, []any) {
	var conds []string
	var args []any
	if len(f.States) > 0 {
		ph := strings.TrimSuffix(strings.Repeat("?,", len(f.States)), ",")
		conds = append(conds, "state IN ("+ph+")")
		for _, s := range f.States {
			args = append(args, string(s))
		}
	}
	if f.TaskID != "" {
		conds = append(conds, "task_id = ?")
		args = append(args, f.TaskID)
	}
	if f.Search != "" {
		// A substring anywhere, which no index serves: a scan. LIKE is
		// case-insensitive (for ASCII) without building a lowered copy of
		// each value. See BenchmarkSearch for what it costs.
		conds = append(conds, `(key LIKE ? ESCAPE '\' OR customer LIKE ? ESCAPE '\' OR recipient LIKE ? ESCAPE '\' OR subject LIKE ? ESCAPE '\')`)
		pat := likePattern(f.Search)
		args = append(args, pat, pat, pat, pat)
	}
	if len(conds) == 0 {
		return "", nil
	}
	return " WHERE " + strings.Join(conds, " AND "), args
}

// likePattern matches s anywhere, its own % and _ taken literally.
func likePattern(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)
	return "%" + r.Replace(s) + "%"
}

// ListActions returns one page of actions, newest first, and the total
// number matching the filter. A page is read through an index (by state, by
// task, or the table's own order) and never sorted whole.
func (l *Ledger) ListActions(ctx context.Context, f ActionFilter) (int, []Action, error) {
	if f.Limit <= 0 {
		f.Limit = 100
	}
	if f.Search != "" {
		return l.searchActions(ctx, f)
	}
	where, args := f.where()
	var total int
	var out []Action
	err := l.read(ctx, func(tx queryTx) error {
		if err := countActions(tx, f, where, args, &total); err != nil {
			return err
		}
		if where == "" {
			// Actions are never deleted, so rowids are 1…total and a page
			// of the whole list is a rowid range: no offset to walk.
			var maxID int64
			if err := tx.QueryRow(`SELECT COALESCE(max(rowid), 0) FROM actions`).Scan(&maxID); err != nil {
				return err
			}
			if maxID == int64(total) {
				where, args = " WHERE rowid <= ?", []any{total - f.Offset}
				f.Offset = 0
			}
		}
		// An offset is walked row by row, so a page in the older half is
		// read from the other end.
		order, limit, offset := "DESC", f.Limit, f.Offset
		if offset > total/2 {
			order, offset = "ASC", max(total-f.Offset-f.Limit, 0)
			limit = min(f.Limit, total-f.Offset)
		}
		if limit <= 0 {
			return nil
		}
		// The rows an offset skips are walked in an index of rowids (by
		// state, or the table's own), and only the page's rows are read.
		page, pargs := `SELECT `+actionCols+` FROM actions`+where+` ORDER BY rowid `+order+` LIMIT ?`, append(args, limit)
		if offset > 0 {
			page = `SELECT ` + actionCols + ` FROM actions WHERE rowid IN (SELECT rowid FROM actions` + where +
				` ORDER BY rowid ` + order + ` LIMIT ? OFFSET ?) ORDER BY rowid ` + order
			pargs = append(pargs, offset)
		}
		rows, err := tx.Query(page, pargs...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			a, err := scanAction(rows)
			if err != nil {
				return err
			}
			out = append(out, a)
		}
		if order == "ASC" {
			slices.Reverse(out)
		}
		return rows.Err()
	})
	return total, out, err
}

// countActions counts the actions f selects. Without a task or a search
// the count is the sum of the kept counts of the states selected (see
// schema 10), which costs the same at any size; otherwise it is counted.
func countActions(tx queryTx, f ActionFilter, where string, args []any, total *int) error {
	if f.TaskID != "" || f.Search != "" {
		return tx.QueryRow(`SELECT count(*) FROM actions`+where, args...).Scan(total)
	}
	states := ""
	if len(f.States) > 0 {
		states = " WHERE state IN (" + strings.TrimSuffix(strings.Repeat("?,", len(f.States)), ",") + ")"
	}
	return tx.QueryRow(`SELECT COALESCE(sum(n), 0) FROM action_counts`+states, args...).Scan(total)
}

// searchActions answers a filter with a search in one scan instead of two
// (a count, then a page that, for a rare match, scans as far): it reads the
// rowids of every match, sorts them newest first, then reads the page's
// rows by rowid. The scan asks for no order, so that SQLite may read a
// narrower index covering the searched columns, should one exist.
//
// On PostgreSQL with the trigram index (schema 10, where pg_trgm is
// available) the scan is an index lookup instead: the index holds the four
// columns joined, which selects every row a column matches (and perhaps a
// few more, matching across two columns), and the usual condition keeps
// exactly the rows a column matches.
func (l *Ledger) searchActions(ctx context.Context, f ActionFilter) (int, []Action, error) {
	where, args := f.where()
	var ids []any
	var out []Action
	err := l.read(ctx, func(tx queryTx) error {
		where, args := where, args
		if ok, err := l.dialect.trigramIndex(tx); err != nil {
			return err
		} else if ok {
			where = and(where, `(key || ' ' || customer || ' ' || recipient || ' ' || subject) LIKE ? ESCAPE '\'`)
			args = append(slices.Clip(args), likePattern(f.Search))
		}
		rows, err := tx.Query(`SELECT rowid FROM actions`+where, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				return err
			}
			ids = append(ids, id)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		slices.SortFunc(ids, func(a, b any) int { return cmp.Compare(b.(int64), a.(int64)) })
		page := ids[min(f.Offset, len(ids)):min(f.Offset+f.Limit, len(ids))]
		if len(page) == 0 {
			return nil
		}
		ph := strings.TrimSuffix(strings.Repeat("?,", len(page)), ",")
		prow, err := tx.Query(`SELECT `+actionCols+` FROM actions WHERE rowid IN (`+ph+`) ORDER BY rowid DESC`, page...)
		if err != nil {
			return err
		}
		defer prow.Close()
		for prow.Next() {
			a, err := scanAction(prow)
			if err != nil {
				return err
			}
			out = append(out, a)
		}
		return prow.Err()
	})
	return len(ids), out, err
}

// TaskFilter selects a page of tasks.
type TaskFilter struct {
	Owner  string
	Search string
	Limit  int
	Offset int
}

func (f TaskFilter) where() (string, []any) {
	var conds []string
	var args []any
	if f.Owner != "" {
		conds = append(conds, "owner = ?")
		args = append(args, f.Owner)
	}
	if f.Search != "" {
		conds = append(conds, `(id LIKE ? ESCAPE '\' OR customer LIKE ? ESCAPE '\' OR subject LIKE ? ESCAPE '\')`)
		pat := likePattern(f.Search)
		args = append(args, pat, pat, pat)
	}
	if len(conds) == 0 {
		return "", nil
	}
	return " WHERE " + strings.Join(conds, " AND "), args
}

// and joins one more condition to a WHERE clause (which may be empty).
func and(where, cond string) string {
	if where == "" {
		return " WHERE " + cond
	}
	return where + " AND " + cond
}

// ActionRank is where key stands in the list f selects (0: the newest),
// so a viewer can keep an action selected while newer ones arrive above
// it; ok is false when f does not select it. Limit and Offset are ignored.
func (l *Ledger) ActionRank(ctx context.Context, f ActionFilter, key string) (rank int, ok bool, err error) {
	where, args := f.where()
	err = l.read(ctx, func(tx queryTx) error {
		var id int64
		err := tx.QueryRow(`SELECT rowid FROM actions`+and(where, "key = ?"), append(slices.Clip(args), key)...).Scan(&id)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		ok = true
		return tx.QueryRow(`SELECT count(*) FROM actions`+and(where, "rowid > ?"), append(slices.Clip(args), id)...).Scan(&rank)
	})
	return rank, ok, err
}

// TaskRank is where task id stands in the list f selects (0: the most
// recently changed); ok is false when f does not select it.
func (l *Ledger) TaskRank(ctx context.Context, f TaskFilter, id string) (rank int, ok bool, err error) {
	where, args := f.where()
	err = l.read(ctx, func(tx queryTx) error {
		var up int64
		err := tx.QueryRow(`SELECT updated_at FROM tasks`+and(where, "id = ?"), append(slices.Clip(args), id)...).Scan(&up)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		ok = true
		return tx.QueryRow(`SELECT count(*) FROM tasks`+and(where, "(updated_at > ? OR (updated_at = ? AND id > ?))"),
			append(slices.Clip(args), up, up, id)...).Scan(&rank)
	})
	return rank, ok, err
}

// TaskSummary is a task with what is pending on it.
type TaskSummary struct {
	Task
	Viewers []string
	Pending int // actions without a settled outcome
}

// ListTasks returns one page of tasks, most recently changed first, with
// viewers and pending counts, and the total matching.
func (l *Ledger) ListTasks(ctx context.Context, f TaskFilter) (int, []TaskSummary, error) {
	if f.Limit <= 0 {
		f.Limit = 100
	}
	where, args := f.where()
	var total int
	var out []TaskSummary
	now := ns(l.clock.Now())
	err := l.read(ctx, func(tx queryTx) error {
		if err := tx.QueryRow(`SELECT count(*) FROM tasks`+where, args...).Scan(&total); err != nil {
			return err
		}
		// Page first, then count what is pending on the page's tasks only.
		rows, err := tx.Query(`SELECT `+taskCols+`,
			(SELECT count(*) FROM actions a WHERE a.task_id = t.id AND a.state NOT IN ('sent','failed','denied','cancelled')),
			(SELECT COALESCE(group_concat(actor, ','), '') FROM presence p WHERE p.task_id = t.id AND p.expires_at > ?)
			FROM (SELECT * FROM tasks`+where+` ORDER BY updated_at DESC, id DESC LIMIT ? OFFSET ?) t
			ORDER BY updated_at DESC, id DESC`, append(append([]any{now}, args...), f.Limit, f.Offset)...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var s TaskSummary
			var up int64
			var viewers string
			if err := rows.Scan(&s.ID, &s.Customer, &s.Subject, &s.Status, &s.Owner, &s.Version, &up, &s.Pending, &viewers); err != nil {
				return err
			}
			s.UpdatedAt = fromNS(up)
			if viewers != "" {
				s.Viewers = strings.Split(viewers, ",")
			}
			out = append(out, s)
		}
		return rows.Err()
	})
	return total, out, err
}

// HistoryFilter selects history events.
type HistoryFilter struct {
	TaskID    string
	ActionKey string
	AfterID   int64 // only events newer than this id
	Limit     int   // 0: all
	Newest    bool  // the newest Limit events (still returned oldest first)
}

// History returns events oldest first.
func (l *Ledger) History(ctx context.Context, f HistoryFilter) ([]Event, error) {
	var out []Event
	err := l.read(ctx, func(tx queryTx) error {
		var err error
		out, err = listEvents(tx, f)
		return err
	})
	return out, err
}

func listEvents(q queryer, f HistoryFilter) ([]Event, error) {
	var conds []string
	var args []any
	if f.TaskID != "" {
		conds = append(conds, "task_id = ?")
		args = append(args, f.TaskID)
	}
	if f.ActionKey != "" {
		conds = append(conds, "action_key = ?")
		args = append(args, f.ActionKey)
	}
	if f.AfterID > 0 {
		conds = append(conds, "id > ?")
		args = append(args, f.AfterID)
	}
	query := `SELECT id, at, actor, task_id, action_key, kind, message, reason, to_state, detail FROM events`
	if len(conds) > 0 {
		query += " WHERE " + strings.Join(conds, " AND ")
	}
	order := " ORDER BY id"
	if f.Newest {
		order = " ORDER BY id DESC"
	}
	query += order
	if f.Limit > 0 {
		query += fmt.Sprintf(" LIMIT %d", f.Limit)
	}
	rows, err := q.Query(query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Event
	for rows.Next() {
		var e Event
		var at int64
		var kind string
		if err := rows.Scan(&e.ID, &at, &e.Actor, &e.TaskID, &e.ActionKey, &kind, &e.Message, &e.Reason, &e.ToState, &e.Detail); err != nil {
			return nil, err
		}
		e.At, e.Kind = fromNS(at), EventKind(kind)
		out = append(out, e)
	}
	if f.Newest {
		for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
			out[i], out[j] = out[j], out[i]
		}
	}
	return out, rows.Err()
}

// Metrics counts intended actions, attempts, confirmed outcomes and the
// refusals, each kept apart.
func (l *Ledger) Metrics(ctx context.Context) (Metrics, error) {
	m := Metrics{ByState: map[State]int{}, UnmatchedByRelease: map[string]int{}}
	staleBefore := ns(l.clock.Now().Add(-StaleAfter))
	err := l.read(ctx, func(tx queryTx) error {
		rows, err := tx.Query(`SELECT state, count(*) FROM actions GROUP BY state`)
		if err != nil {
			return err
		}
		for rows.Next() {
			var s string
			var n int
			if err := rows.Scan(&s, &n); err != nil {
				rows.Close()
				return err
			}
			m.ByState[State(s)] = n
			m.Intended += n
		}
		rows.Close()
		m.Holds = m.ByState[StateHeld]
		for _, q := range []struct {
			dst   *int
			query string
		}{
			{&m.Attempts, `SELECT count(*) FROM attempts`},
			{&m.Confirmed, `SELECT count(*) FROM attempts WHERE outcome = 'accepted'`},
			{&m.UnknownOutcomes, `SELECT COALESCE(sum(n), 0) FROM counters WHERE kind IN ('unknown', 'recovered_unknown')`},
			{&m.DuplicateBlocks, `SELECT COALESCE(sum(n), 0) FROM counters WHERE kind = 'duplicate_block'`},
			{&m.NotPermitted, `SELECT COALESCE(sum(n), 0) FROM counters WHERE kind = 'not_permitted'`},
			{&m.LateEvidence, `SELECT COALESCE(sum(n), 0) FROM counters WHERE kind IN ('late_outcome', 'late_arrival')`},
			{&m.ArrivedTwice, `SELECT count(*) FROM actions WHERE late_arrivals > 0 AND (late_arrivals > 1 OR state = 'sent')`},
			{&m.Denials, `SELECT COALESCE(sum(n), 0) FROM counters WHERE kind = 'denied'`},
			{&m.OwnershipConflicts, `SELECT COALESCE(sum(n), 0) FROM counters WHERE kind = 'ownership_conflict'`},
			{&m.Unknown, `SELECT count(*) FROM actions WHERE state = 'unknown' OR (state = 'held' AND hold_cause = 'unknown_outcome')`},
			{&m.ManualOverrides, `SELECT COALESCE(sum(n), 0) FROM counters WHERE kind IN ('hold_released', 'destination_moved', '` + CounterResolvedByPerson + `')`},
		} {
			if err := tx.QueryRow(q.query).Scan(q.dst); err != nil {
				return fmt.Errorf("metrics: %w", err)
			}
		}
		if err := tx.QueryRow(`SELECT count(*) FROM actions WHERE state IN ('drafting', 'awaiting_approval') AND updated_at < ?`,
			staleBefore).Scan(&m.StaleProposals); err != nil {
			return fmt.Errorf("metrics: stale proposals: %w", err)
		}
		unmatched, err := kindCounts(tx, `SELECT release_id, count(*) FROM audience_rows WHERE status = 'unmatched' GROUP BY release_id`)
		if err != nil {
			return fmt.Errorf("metrics: unmatched identities: %w", err)
		}
		maps.Copy(m.UnmatchedByRelease, unmatched)
		sw, err := readSwitch(tx)
		m.Stopped = sw.Stopped
		return err
	})
	return m, err
}

// Changes returns a number that grows whenever anything was recorded (the
// newest history id), so a viewer can follow the ledger cheaply.
func (l *Ledger) Changes(ctx context.Context) (int64, error) {
	var id sql.NullInt64
	err := l.pool().QueryRowContext(ctx, `SELECT max(id) FROM events`).Scan(&id)
	return id.Int64, err
}

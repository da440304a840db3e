package ledger

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
)

// batchState is what a transaction that decides many recipients at once
// (BeginAttempts with new recipients, RecordDeliveries) keeps in memory to
// spare statements the single-action paths run one by one. It is nil
// outside those transactions, so every other path runs exactly as before.
type batchState struct {
	// tasks are the task rows this transaction read, by id. The
	// transaction holds the write lock (BEGIN IMMEDIATE on SQLite, the
	// decision lock on PostgreSQL) and nothing in a batch changes a task
	// (setOwner updates its entry all the same), so a task read once is
	// the row as of this transaction for every later recipient.
	tasks map[string]Task
	// fresh is the key of the action this transaction inserted last: it
	// has no approvals to invalidate (approvals reference actions, and
	// the row did not exist before this transaction).
	fresh string
	// events and counters are the history lines and counter increments
	// waiting to be written (SQLite only; PostgreSQL's writes already
	// wait in pgTx's queue, see wtx.later): in the order they were
	// appended, as one multi-row INSERT before the transaction commits or
	// anything reads the history.
	events   []bufferedEvent
	counters []string
	// sw, when set, is the stop switch as BeginAttempts read it once for
	// the whole batch: nothing in the batch writes it, and no other writer
	// can while the transaction holds the write lock.
	sw *Switch
	// careful runs each request inside a savepoint (see writeBatch).
	careful bool
	// pending is an action this request inserted whose row waits for the
	// request's next statement (SQLite only): its approval's transition
	// folds into the row instead of updating it right after.
	pending *Action
	// pendingApproval is the approval of the pending action, waiting to
	// be inserted right after it (its row references the action's), so
	// that a transition after the approval (the attempt's) still folds
	// into the action's row.
	pendingApproval []any
	// approved is an action this transaction inserted and approved just
	// now, with its approval, as the rows say (see takeApproved): the
	// attempt that follows in the same transaction decides on them
	// without reading back what was written a statement ago.
	approved *freshApproval
}

// freshApproval is an action inserted and approved by this transaction,
// as its rows now stand.
type freshApproval struct {
	action   Action
	approval Approval // ID unknown: nothing that reads this one needs it
}

// bufferedEvent is one history line as wtx.event would have written it.
type bufferedEvent struct {
	at                                                    int64
	actor, taskID, key, kind, message, reason, to, detail string
}

// writeBatch runs a batch transaction (see batchState), durable or
// relaxed as write and writeRelaxed. Each request of a batch runs in a
// savepoint (wtx.savepoint) so that an answer that records nothing rolls
// back that request alone. Most requests keep what they wrote (a change,
// or a refusal with its history line), and for them the savepoint's two
// statements change nothing: so the batch first runs without savepoints,
// and only if a request's answer must be rolled back is the whole
// transaction rolled back and run again with them (the answers are then
// exactly those of the savepoints' run, since nothing of the first run
// was committed).
func (l *Ledger) writeBatch(ctx context.Context, durable bool, fn func(*wtx) error) error {
	careful := false
	for {
		err := l.writeWith(ctx, durable, func(t *wtx) error {
			t.batch = &batchState{tasks: map[string]Task{}, careful: careful}
			return fn(t)
		})
		if !careful && errors.Is(err, errNeedsSavepoints) {
			careful = true
			continue
		}
		return err
	}
}

// errNeedsSavepoints asks writeBatch to run a batch again with a savepoint
// around each request.
var errNeedsSavepoints = errors.New("a request of the batch must be rolled back alone")

// task reads a task, once per batch transaction.
func (t *wtx) task(id string) (Task, error) {
	if t.batch == nil {
		return getTask(t, id)
	}
	if tk, ok := t.batch.tasks[id]; ok {
		return tk, nil
	}
	tk, err := getTask(t, id)
	if err == nil {
		t.batch.tasks[id] = tk
	}
	return tk, err
}

// batchMark is how far a batch transaction's memory reached when a
// savepoint began; rolling back to the savepoint takes it back there.
type batchMark struct{ events, counters int }

func (t *wtx) batchMark() batchMark {
	if t.batch == nil {
		return batchMark{}
	}
	return batchMark{len(t.batch.events), len(t.batch.counters)}
}

func (t *wtx) batchRollback(m batchMark) {
	if t.batch == nil {
		return
	}
	t.batch.pending, t.batch.pendingApproval = nil, nil
	t.batch.approved = nil
	t.batch.events = t.batch.events[:m.events]
	t.batch.counters = t.batch.counters[:m.counters]
	// What a rolled-back request read or inserted is forgotten too.
	clear(t.batch.tasks)
	t.batch.fresh = ""
}

// bufferEvents reports whether history lines wait in memory (SQLite batch
// transactions).
func (t *wtx) bufferEvents() bool { return t.batch != nil && t.pg == nil }

// eventsPerInsert bounds one INSERT's rows: 9 arguments each, within
// SQLite's oldest limit of 999 arguments per statement.
const eventsPerInsert = 100

// flushEvents writes the history lines and counter increments waiting in
// memory: the lines in the order they were appended (so their ids ascend
// in that order, as if each had been written when it was appended), then
// each counter once, by the sum of its increments.
func (t *wtx) flushEvents() error {
	if !t.bufferEvents() {
		return nil
	}
	if err := t.flushPending(); err != nil {
		return err
	}
	if len(t.batch.events)+len(t.batch.counters) == 0 {
		return nil
	}
	for chunk := range slices.Chunk(t.batch.events, eventsPerInsert) {
		var q strings.Builder
		q.WriteString(`INSERT INTO events (at, actor, task_id, action_key, kind, message, reason, to_state, detail) VALUES `)
		args := make([]any, 0, 9*len(chunk))
		for i, e := range chunk {
			if i > 0 {
				q.WriteString(", ")
			}
			q.WriteString("(?, ?, ?, ?, ?, ?, ?, ?, ?)")
			args = append(args, e.at, e.actor, e.taskID, e.key, e.kind, e.message, e.reason, e.to, e.detail)
		}
		if _, err := t.tx.Exec(q.String(), args...); err != nil {
			return fmt.Errorf("record %d events: %w", len(chunk), err)
		}
	}
	var names []string
	sums := map[string]int{}
	for _, c := range t.batch.counters {
		if sums[c] == 0 {
			names = append(names, c)
		}
		sums[c]++
	}
	for _, c := range names {
		if _, err := t.tx.Exec(`INSERT INTO counters (kind, n) VALUES (?, ?)
			ON CONFLICT(kind) DO UPDATE SET n = counters.n + ?`, c, sums[c], sums[c]); err != nil {
			return fmt.Errorf("count event %s: %w", c, err)
		}
	}
	t.batch.events, t.batch.counters = t.batch.events[:0], t.batch.counters[:0]
	return nil
}

// flushBefore writes what waits before a statement runs: the pending
// action always, the history lines when the statement names them.
func (t *wtx) flushBefore(q string) error {
	if !t.bufferEvents() {
		return nil
	}
	if !touchesHistory(q) {
		return t.flushPending()
	}
	return t.flushEvents() // the pending action first, then the history
}

// touchesHistory reports whether a statement names the history or its
// counters, remembered by statement: the same few statements run for
// every recipient.
func touchesHistory(q string) bool {
	if v, ok := historyStatements.Load(q); ok {
		return v.(bool)
	}
	touches := strings.Contains(q, "events") || strings.Contains(q, "counters")
	historyStatements.Store(q, touches)
	return touches
}

var historyStatements sync.Map

// errRow is a row whose read failed before it was asked for.
type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

// pendingFor is the action with this key waiting to be inserted, if any.
func (t *wtx) pendingFor(key string) *Action {
	if t.batch == nil || t.batch.pending == nil || t.batch.pending.Key != key {
		return nil
	}
	return t.batch.pending
}

// holdInsert keeps a new action's row in memory until the request's next
// statement (SQLite batch transactions; see batchState.pending) and
// reports whether it did.
func (t *wtx) holdInsert(a Action) bool {
	if !t.bufferEvents() {
		return false
	}
	t.batch.pending = &a
	return true
}

// foldTransition applies a transition to the pending action's row instead
// of updating the row once written: the same columns get the same values
// as transition's UPDATE gives them (held_from stays empty: a hold is not
// folded). It reports whether it did.
func (t *wtx) foldTransition(a *Action, to State, reason string, cause HoldCause) bool {
	p := t.pendingFor(a.Key)
	if p == nil || to == StateHeld || p.Version != a.Version {
		return false
	}
	t.moved(a, to, reason, cause)
	*p = *a
	return true
}

// flushPending inserts the pending action: the row insertAction would have
// inserted, with any transition folded into it.
func (t *wtx) flushPending() error {
	if t.batch == nil || t.batch.pending == nil {
		return nil
	}
	a := *t.batch.pending
	approval := t.batch.pendingApproval
	t.batch.pending, t.batch.pendingApproval = nil, nil
	var corr any
	if a.Corrects != "" {
		corr = a.Corrects
	}
	if _, err := t.tx.Exec(`INSERT INTO actions (key, task_id, customer, event, action_type, target, revision,
		recipient, recipient_name, destination, lookup, sender, subject, body, digest, state, reason, hold_cause, version,
		proposed_by, corrects, created_at, updated_at, request, settle)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		a.Key, a.TaskID, a.Customer, a.Event, a.ActionType, a.Target, a.Revision,
		a.Recipient, a.RecipientName, a.Destination, a.Lookup, a.Sender, a.Subject, a.Body, a.Digest, string(a.State), a.Reason,
		string(a.HoldCause), a.Version, a.ProposedBy, corr, ns(a.CreatedAt), ns(a.UpdatedAt), a.Request, int64(a.Settle)); err != nil {
		return fmt.Errorf("record action %s: %w", a.Key, err)
	}
	if approval != nil {
		if _, err := t.tx.Exec(insertApprovalSQL, approval...); err != nil {
			return fmt.Errorf("record approval of %s: %w", a.Key, err)
		}
	}
	return nil
}

// takeApproved is the action with this key that this transaction has just
// inserted and approved, with its approval, if it is the last thing the
// transaction did (see batchState.approved); it is handed out once. Only
// an action with a bound destination qualifies: binding one later would
// update the approval's row by an id the transaction never read.
func (t *wtx) takeApproved(key string) *freshApproval {
	if t.batch == nil || t.batch.approved == nil {
		return nil
	}
	f := t.batch.approved
	t.batch.approved = nil
	if f.action.Key != key || t.batch.fresh != key || f.approval.Destination == "" {
		return nil
	}
	return f
}

package ledger

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// wtx is one deciding write transaction with the time it decides at.
type wtx struct {
	tx *sqliteTx // SQLite
	pg *pgTx     // PostgreSQL
	l  *Ledger
	// at is the time the transaction decides at; on PostgreSQL the server's
	// clock, which arrives with the first round trip (see now); atFromLock
	// is set until it has.
	at         time.Time
	atFromLock bool
	durable    bool
	// The state the latest transition led to, written with the next history
	// line of the same action: a review folds the history into states.
	movedKey, movedTo string
	// What the next history line carries beyond its sentence (see note).
	detail  []byte
	counter string
	// savepoints are savepoint's statements, prepared on first use.
	savepoints [3]*sql.Stmt
	// batch, when set, is what a batch transaction keeps in memory (see
	// batchState).
	batch *batchState
	// attemptID, when set, receives the id of the attempt the transaction
	// records, on PostgreSQL after COMMIT (see startAttempt): its caller
	// reads it only once the transaction committed.
	attemptID *int64
	// token is the one the caller presented (WithToken), for permit;
	// who is the standing the transaction's last permission check read.
	token string
	who   *standing
	// standings, when set (a group of executions, see groupCommit), keeps
	// the standings this transaction read: none of its writes changes an
	// actor, a token or the ledger's mode, and no other writer can while
	// it holds the write lock.
	standings map[standingKey]standing
}

// now is the time the transaction decides at. On PostgreSQL with the
// system clock it is the server's, read by the lock statement, which waits
// for the first statement to travel with it; a time asked for before that
// sends the lock at once.
func (t *wtx) now() time.Time {
	if t.atFromLock && t.pg != nil {
		_ = t.pg.roundTrip(nil) // a failure fails every later statement
	}
	return t.at
}

// later runs a write whose result the code does not read. On PostgreSQL it
// waits to travel with the next statement the code waits for, or with
// COMMIT; its failure, named by what, then fails the transaction.
func (t *wtx) later(what, q string, args ...any) error {
	if t.pg != nil {
		t.pg.later(what, t.l.dialect.rebind(q), args)
		return nil
	}
	if err := t.flushBefore(q); err != nil {
		return err
	}
	if _, err := t.tx.Exec(q, args...); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// compareAndSwap runs an UPDATE that must change exactly one row (its WHERE
// names the row and the version the transaction read) and fails with
// "what: lost" otherwise. On PostgreSQL it waits, like later, for the next
// statement or COMMIT; the statement itself then raises an error when no
// row changed, so that neither a later statement nor COMMIT runs, and the
// transaction fails with the same error as on SQLite.
func (t *wtx) compareAndSwap(what, lost, update string, args ...any) error {
	failed := &casError{what: what, lost: lost}
	if t.pg != nil {
		t.pg.compareAndSwap(failed, t.l.dialect.rebind(update), args)
		return nil
	}
	if err := t.flushBefore(update); err != nil {
		return err
	}
	res, err := t.tx.Exec(update, args...)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return failed
	}
	return nil
}

// casError is a compare-and-swap that found the row changed.
type casError struct{ what, lost string }

func (e *casError) Error() string { return e.what + ": " + e.lost }

// readAhead sends a read the transaction will make with the next round
// trip, on PostgreSQL (see pgTx); as, when not "", is the statement the
// answer stands for, keyed by the answer's first column. On SQLite it does
// nothing: a read there costs no round trip.
func (t *wtx) readAhead(q string, args []any, as string) {
	if t.pg == nil {
		return
	}
	if as != "" {
		as = t.l.dialect.rebind(as)
	}
	t.pg.readAhead(t.l.dialect.rebind(q), args, as)
}

// note attaches facts to the next history line (JSON in events.detail):
// what a review needs and the sentence only names. counter, when not "",
// counts that line under a name of its own as well (a manual override).
func (t *wtx) note(detail map[string]any, counter string) {
	t.detail, _ = json.Marshal(detail)
	t.counter = counter
}

// stateCode is how a transition is written in events.to_state: the state,
// and for a hold its cause, which tells an open outcome from a queued send.
func stateCode(to State, cause HoldCause) string {
	if to == StateHeld && cause != "" {
		return string(to) + ":" + string(cause)
	}
	return string(to)
}

// requireDurable makes a relaxed transaction start over durably: call it
// before a change that restricts execution (an invalidated approval, say).
func (t *wtx) requireDurable() error {
	if t.durable {
		return nil
	}
	return errNeedsDurable
}

func notFound(err error) error {
	if errors.Is(err, sql.ErrNoRows) {
		return ErrNotFound
	}
	return err
}

// queryer is what both read and write transactions offer.
type queryer interface {
	QueryRow(query string, args ...any) row
	Query(query string, args ...any) (*sql.Rows, error)
}

// event appends one plain-language history line.
// It carries the state the action's latest transition in this transaction
// led to (if not yet written) and the facts note attached.
func (t *wtx) event(actor, taskID, key string, kind EventKind, reason, format string, args ...any) error {
	to := ""
	if key != "" && key == t.movedKey {
		to, t.movedKey = t.movedTo, ""
	}
	detail, counter := string(t.detail), t.counter
	t.detail, t.counter = nil, ""
	if t.bufferEvents() {
		t.batch.events = append(t.batch.events, bufferedEvent{at: ns(t.now()), actor: actor, taskID: taskID, key: key,
			kind: string(kind), message: fmt.Sprintf(format, args...), reason: reason, to: to, detail: detail})
		for _, c := range []string{countedName(kind), counter} {
			if c != "" {
				t.batch.counters = append(t.batch.counters, c)
			}
		}
		return nil
	}
	// Nothing reads what these writes return: on PostgreSQL they travel
	// with the next statement (see wtx.later).
	if err := t.later("record event "+string(kind), `INSERT INTO events (at, actor, task_id, action_key, kind, message, reason, to_state, detail)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		ns(t.now()), actor, taskID, key, string(kind), fmt.Sprintf(format, args...), reason, to, detail); err != nil {
		return err
	}
	for _, c := range []string{countedName(kind), counter} {
		if c == "" {
			continue
		}
		if err := t.later("count event "+string(kind), `INSERT INTO counters (kind, n) VALUES (?, 1)
			ON CONFLICT(kind) DO UPDATE SET n = counters.n + 1`, c); err != nil {
			return err
		}
	}
	return nil
}

func countedName(k EventKind) string {
	if countedKinds[k] {
		return string(k)
	}
	return ""
}

// countedKinds are the history events Metrics counts.
var countedKinds = map[EventKind]bool{EvDuplicateBlock: true, EvDenied: true,
	EvOwnershipConflict: true, EvUnknown: true, EvRecoveredUnknown: true,
	EvHoldReleased: true, EvDestinationMoved: true, EvLateOutcome: true, EvLateArrival: true, EvNotPermitted: true}

// CounterResolvedByPerson counts the outcomes a person established by
// checking the destination by hand (ResolveUnknown): a manual override whose
// history line has the kind of any reconciliation.
const CounterResolvedByPerson = "resolved_by_person"

// ensureTask returns the task, creating it (mirrored from the helpdesk) when
// the ledger has not seen it yet.
func (t *wtx) ensureTask(id, customer, subject, actor string) (Task, error) {
	if id == "" {
		return Task{}, invalidf("task id is empty")
	}
	if tk, err := t.task(id); !errors.Is(err, ErrNotFound) {
		return tk, err // known (or unreadable): no write needed
	}
	res, err := t.Exec(`INSERT INTO tasks (id, customer, subject, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?) ON CONFLICT(id) DO NOTHING`, id, customer, subject, ns(t.now()), ns(t.now()))
	if err != nil {
		return Task{}, fmt.Errorf("create task %s: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 1 {
		if err := t.event(actor, id, "", EvTaskCreated, "", "Task %s was opened in the ledger.", id); err != nil {
			return Task{}, err
		}
	}
	return t.task(id)
}

const taskCols = `id, customer, subject, status, owner, version, updated_at`

func scanTask(s interface{ Scan(...any) error }) (Task, error) {
	var tk Task
	var up int64
	err := s.Scan(&tk.ID, &tk.Customer, &tk.Subject, &tk.Status, &tk.Owner, &tk.Version, &up)
	tk.UpdatedAt = fromNS(up)
	return tk, err
}

// Reads of a task, and of the task an action belongs to (sent ahead, see
// wtx.readAhead, for getTask to find).
const (
	taskByID        = `SELECT ` + taskCols + ` FROM tasks WHERE id = ?`
	taskOfActionKey = `SELECT ` + taskCols + ` FROM tasks WHERE id = (SELECT task_id FROM actions WHERE key = ?)`
)

func getTask(q queryer, id string) (Task, error) {
	tk, err := scanTask(q.QueryRow(taskByID, id))
	if errors.Is(err, sql.ErrNoRows) {
		return Task{}, fmt.Errorf("task %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return Task{}, fmt.Errorf("read task %s: %w", id, err)
	}
	return tk, nil
}

// setOwner changes the owner with compare-and-swap on the version.
func (t *wtx) setOwner(tk *Task, owner string) error {
	res, err := t.Exec(`UPDATE tasks SET owner = ?, version = version + 1, updated_at = ?
		WHERE id = ? AND version = ?`, owner, ns(t.now()), tk.ID, tk.Version)
	if err != nil {
		return fmt.Errorf("update owner of %s: %w", tk.ID, err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return fmt.Errorf("update owner of %s: task changed concurrently", tk.ID)
	}
	tk.Owner = owner
	tk.Version++
	if t.batch != nil {
		t.batch.tasks[tk.ID] = *tk
	}
	return nil
}

const actionCols = `key, task_id, customer, event, action_type, target, revision, recipient,
	recipient_name, destination, lookup, destination_settings, sender,
	subject, body, digest, state, reason, hold_cause, proposed_by, COALESCE(corrects, ''),
	late_arrivals, version, created_at, updated_at, request, settle`

func scanAction(s interface{ Scan(...any) error }) (Action, error) {
	var a Action
	var st, hc string
	var cr, up int64
	err := s.Scan(&a.Key, &a.TaskID, &a.Customer, &a.Event, &a.ActionType, &a.Target,
		&a.Revision, &a.Recipient, &a.RecipientName, &a.Destination, &a.Lookup, &a.DestinationSettings, &a.Sender,
		&a.Subject, &a.Body, &a.Digest, &st, &a.Reason, &hc,
		&a.ProposedBy, &a.Corrects, &a.LateArrivals, &a.Version, &cr, &up, &a.Request, &a.Settle)
	a.State, a.HoldCause = State(st), HoldCause(hc)
	a.CreatedAt, a.UpdatedAt = fromNS(cr), fromNS(up)
	return a, err
}

// Reads of an action, and of the action an attempt belongs to (sent ahead,
// see wtx.readAhead, for getAction to find).
const (
	actionByKey         = `SELECT ` + actionCols + ` FROM actions WHERE key = ?`
	actionOfTransportID = `SELECT ` + actionCols + ` FROM actions WHERE key = (SELECT action_key FROM attempts WHERE transport_id = ?)`
)

func getAction(q queryer, key string) (Action, error) {
	a, err := scanAction(q.QueryRow(actionByKey, key))
	if errors.Is(err, sql.ErrNoRows) {
		return Action{}, fmt.Errorf("action %s: %w", key, ErrNotFound)
	}
	if err != nil {
		return Action{}, fmt.Errorf("read action %s: %w", key, err)
	}
	return a, nil
}

// transition moves an action to a new state with compare-and-swap on its
// version. heldFrom is remembered while held so a release knows where to go.
func (t *wtx) transition(a *Action, to State, reason string, cause HoldCause) error {
	heldFrom := ""
	if to == StateHeld {
		heldFrom = string(a.State)
	}
	if t.foldTransition(a, to, reason, cause) {
		return t.endedAfterRestore(a.Key, to)
	}
	if err := t.compareAndSwap(fmt.Sprintf("move %s to %s", a.Key, to), "action changed concurrently",
		`UPDATE actions SET state = ?, reason = ?, hold_cause = ?,
		held_from = CASE WHEN ? = 'held' THEN ? ELSE '' END,
		version = version + 1, updated_at = ?
		WHERE key = ? AND version = ?`,
		string(to), reason, string(cause), string(to), heldFrom, ns(t.now()), a.Key, a.Version); err != nil {
		return err
	}
	t.moved(a, to, reason, cause)
	return t.endedAfterRestore(a.Key, to)
}

// endedAfterRestore ends an action's unverified mark when it ends: nothing
// is left to verify.
func (t *wtx) endedAfterRestore(key string, to State) error {
	if to == StateSent || to == StateCancelled || to == StateFailed {
		return t.verified(key)
	}
	return nil
}

// moved is a transition as the action's row now has it, and as the next
// history line of the action will name it.
func (t *wtx) moved(a *Action, to State, reason string, cause HoldCause) {
	a.State, a.Reason, a.HoldCause = to, reason, cause
	a.Version++
	a.UpdatedAt = t.now()
	t.movedKey, t.movedTo = a.Key, stateCode(to, cause)
}

func (t *wtx) heldFrom(key string) (State, error) {
	var s string
	err := t.QueryRow(`SELECT held_from FROM actions WHERE key = ?`, key).Scan(&s)
	return State(s), err
}

func (t *wtx) stopSwitch() (Switch, error) {
	if t.batch != nil && t.batch.sw != nil {
		return *t.batch.sw, nil
	}
	return readSwitch(t)
}

const stopSwitchRead = `SELECT stopped, actor, reason, at FROM stop_switch WHERE id = 1`

func readSwitch(q queryer) (Switch, error) {
	var sw Switch
	var stopped int
	var at int64
	err := q.QueryRow(stopSwitchRead).Scan(&stopped, &sw.Actor, &sw.Reason, &at)
	sw.Stopped, sw.At = stopped == 1, fromNS(at)
	if err != nil {
		return sw, fmt.Errorf("read stop switch: %w", err)
	}
	return sw, nil
}

// onActionBy is onAction for a verb of actor: the permission check comes
// first, inside the same transaction, and a refusal writes nothing else.
// On PostgreSQL the actor's standing is read in the round trip that reads
// the action (and what ahead sends).
func (l *Ledger) onActionBy(ctx context.Context, key string, durable bool, actor string, verb Verb, fn func(t *wtx, a *Action) error, ahead ...func(*wtx)) (Action, error) {
	var out Action
	err := l.writeWith(ctx, durable, func(t *wtx) error {
		for _, a := range ahead {
			a(t)
		}
		t.readAhead(actionByKey, []any{key}, "")
		s, err := t.standingOf(actor)
		if err != nil {
			return err
		}
		a, err := getAction(t, key)
		if err != nil {
			return err
		}
		out = a
		if err := t.judge(s, actor, verb, a.TaskID, a.Key); err != nil {
			return err
		}
		return fn(t, &out)
	})
	return out, err
}

// onAction runs fn on the action in one write transaction (durable or
// relaxed, see writeRelaxed) and returns the action as fn left it, also when
// fn refuses.
// ahead, when set, sends the reads fn will make ahead with the action's.
func (l *Ledger) onAction(ctx context.Context, key string, durable bool, fn func(t *wtx, a *Action) error, ahead ...func(*wtx)) (Action, error) {
	var out Action
	err := l.writeWith(ctx, durable, func(t *wtx) error {
		for _, a := range ahead {
			a(t)
		}
		a, err := getAction(t, key)
		if err != nil {
			return err
		}
		out = a
		return fn(t, &out)
	})
	return out, err
}

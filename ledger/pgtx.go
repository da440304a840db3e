package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/stdlib"
)

// pgTx is a deciding write transaction on PostgreSQL, sent in as few round
// trips as the decision allows. On 2 shared cores a round trip costs about
// 150 µs, several times what the server spends on a statement, so a
// decision's cost is the number of times it waits for the server.
//
// Three things save round trips; none changes a write or the order of the
// writes (reads sent ahead run earlier, still under the decision lock):
//
//   - BEGIN and the lock statement (lockForDecision) are not sent on their
//     own: they travel with the transaction's first statement.
//   - Writes whose result the code does not look at (a history line, a
//     counter, a material check) are queued (wtx.later) and sent with the
//     next statement the code waits for, or with COMMIT. They run before it,
//     in order, on the same connection, so every read sees them. A queued
//     write's error is reported, with what the write was for, by the
//     statement it travelled with; the transaction then fails as before.
//   - Reads the decision will ask for next are sent ahead (wtx.readAhead)
//     with the next round trip and answered from memory when asked, unless a
//     write came in between (then they are asked again).
//
// The transaction is the session's own (BEGIN … COMMIT on one connection
// taken from the pool for it); a connection given back with a transaction
// open is discarded by the driver.
type pgTx struct {
	ctx   context.Context
	conn  *sql.Conn
	trips *countTrips

	queue []*pgStmt
	ahead map[string]*pgRow // answers of reads sent ahead, by statement and arguments
	sent  bool              // BEGIN went to the server
	err   error             // the transaction failed: every later statement reports this
}

// countTrips counts a ledger's round trips to PostgreSQL in deciding
// transactions (a test pins a decision's count).
type countTrips struct{ n atomic.Int64 }

func (c *countTrips) add() {
	if c != nil {
		c.n.Add(1)
	}
}

// pgStmt is one statement waiting for a round trip.
type pgStmt struct {
	sql  string
	args []any
	what string // what the statement is for, in an error

	read  bool         // a query: its first row is kept
	ahead bool         // a read sent ahead (readAhead)
	done  func(*pgRow) // called with the answer of a read
	cas   *casError    // a compare-and-swap: its failure
	res   pgconn.CommandTag
	row   *pgRow
}

// pgRow is the first row a query answered (or why there was none), decoded
// when scanned.
type pgRow struct {
	fields []pgconn.FieldDescription
	values [][]byte
	err    error
}

// pgTypes decode rows read outside a connection's own scan (a pgtype.Map
// is not safe for concurrent use and costly to build).
var pgTypes = sync.Pool{New: func() any { return pgtype.NewMap() }}

// Scan is sql.Row.Scan for a row sent in a batch.
func (r *pgRow) Scan(dest ...any) error {
	if r.err != nil {
		return r.err
	}
	if len(dest) != len(r.values) {
		return fmt.Errorf("sql: expected %d destination arguments in Scan, not %d", len(r.values), len(dest))
	}
	m := pgTypes.Get().(*pgtype.Map)
	defer pgTypes.Put(m)
	for i, d := range dest {
		f := r.fields[i]
		if err := m.Scan(f.DataTypeOID, f.Format, r.values[i], d); err != nil {
			return fmt.Errorf("sql: Scan error on column index %d, name %q: %w", i, f.Name, err)
		}
	}
	return nil
}

// beginPgTx starts (without a round trip) a deciding transaction on conn.
// A relaxed one (see writeRelaxed) commits without waiting for its flush,
// as SQLite's relaxed transactions commit without their fsync: the server's
// write-ahead log is sequential too, so the next durable commit (every
// attempt's intent is one), on any host, flushes it as well, and losing it
// in a crash before then can only make the gate refuse, hold or reconcile
// again, never send twice. The setting (synchronous_commit off for this
// transaction alone) is made by the lock statement (lockForDecision),
// which saves the server a statement.
func beginPgTx(ctx context.Context, conn *sql.Conn, trips *countTrips) *pgTx {
	p := &pgTx{ctx: ctx, conn: conn, trips: trips}
	p.queue = append(p.queue, &pgStmt{sql: "BEGIN", what: "begin"})
	return p
}

// aheadKey names a read by its statement and arguments: each argument by
// its kind and value, strings with their length (no two argument lists
// share a name).
func aheadKey(q string, args []any) string {
	b := make([]byte, 0, len(q)+16*len(args)+1)
	b = append(b, q...)
	b = append(b, 0)
	for _, a := range args {
		switch v := a.(type) {
		case string:
			b = append(b, 's')
			b = strconv.AppendInt(b, int64(len(v)), 10)
			b = append(b, ':')
			b = append(b, v...)
		case int64:
			b = append(b, 'i')
			b = strconv.AppendInt(b, v, 10)
			b = append(b, ';')
		case int:
			b = append(b, 'i')
			b = strconv.AppendInt(b, int64(v), 10)
			b = append(b, ';')
		default:
			v2 := fmt.Sprintf("%#v", a)
			b = append(b, 'v')
			b = strconv.AppendInt(b, int64(len(v2)), 10)
			b = append(b, ':')
			b = append(b, v2...)
		}
	}
	return string(b)
}

// later queues a write whose result nobody reads.
func (p *pgTx) later(what, q string, args []any) {
	p.queueWrite(&pgStmt{sql: q, args: args, what: what})
}

// queueWrite queues a write, unless the transaction failed already: the
// reads sent ahead are forgotten, since it may change their answers.
func (p *pgTx) queueWrite(s *pgStmt) {
	if p.err != nil {
		return
	}
	p.dropAhead()
	p.queue = append(p.queue, s)
}

// laterReturning queues an INSERT … RETURNING id whose id nobody in the
// transaction reads: *id is set when the round trip it travels with
// returns (COMMIT's, or an earlier one), so it is known only once that
// round trip succeeded.
func (p *pgTx) laterReturning(what, q string, args []any, id *int64) {
	p.queueWrite(&pgStmt{sql: q, args: args, what: what, read: true, done: func(r *pgRow) {
		_ = r.Scan(id)
	}})
}

// compareAndSwap queues an UPDATE that must change one row, as a statement
// that raises an error when it changed none (or more): the error aborts
// the transaction, so no statement after it, nor COMMIT, takes effect. The
// ELSE branch depends on the row count, so the server evaluates it only
// when it is taken.
func (p *pgTx) compareAndSwap(failed *casError, update string, args []any) {
	q := `WITH swapped AS (` + update + ` RETURNING 1)
		SELECT CASE WHEN count(*) = 1 THEN 1 ELSE ('` + casMark + ` ' || count(*))::int END FROM swapped`
	p.queueWrite(&pgStmt{sql: q, args: args, what: failed.what, cas: failed})
}

// casMark is the text of the error a failed compare-and-swap raises.
const casMark = "gatehouse: compare-and-swap changed rows:"

// dropAhead forgets the reads sent ahead, and those waiting to be: a write
// is about to change what they would answer.
func (p *pgTx) dropAhead() {
	clear(p.ahead)
	kept := p.queue[:0]
	for _, s := range p.queue {
		if !s.ahead {
			kept = append(kept, s)
		}
	}
	clear(p.queue[len(kept):])
	p.queue = kept
}

// readAhead queues a read the transaction will ask for. as, when not "",
// is the statement the answer stands for, with the value of the answer's
// first column as its only argument (a read that finds a row through
// another table: the task of an action, say).
func (p *pgTx) readAhead(q string, args []any, as string) {
	if p.err != nil {
		return
	}
	s := &pgStmt{sql: q, args: args, what: "read ahead", read: true, ahead: true}
	s.done = func(r *pgRow) {
		if p.ahead == nil {
			p.ahead = map[string]*pgRow{}
		}
		if as == "" {
			p.ahead[aheadKey(q, args)] = r
			return
		}
		var id string
		if r.err == nil && len(r.values) > 0 && (&pgRow{fields: r.fields[:1], values: r.values[:1]}).Scan(&id) == nil {
			p.ahead[aheadKey(as, []any{id})] = r
		}
	}
	p.queue = append(p.queue, s)
}

// queryRow answers a read, from the reads sent ahead or in a round trip
// with the queued statements.
func (p *pgTx) queryRow(q string, args []any) *pgRow {
	if len(p.ahead) > 0 {
		k := aheadKey(q, args)
		if r, ok := p.ahead[k]; ok {
			delete(p.ahead, k)
			return r
		}
	}
	if !isSelect(q) {
		p.dropAhead() // INSERT … RETURNING, say
	}
	s := &pgStmt{sql: q, args: args, read: true}
	if err := p.roundTrip(s); err != nil {
		return &pgRow{err: err}
	}
	return s.row
}

// isSelect reports whether q only reads.
func isSelect(q string) bool {
	q = strings.TrimSpace(q)
	return len(q) >= 6 && strings.EqualFold(q[:6], "SELECT")
}

// exec runs a write whose result the code reads, with the queued ones.
func (p *pgTx) exec(q string, args []any) (sql.Result, error) {
	p.dropAhead()
	s := &pgStmt{sql: q, args: args}
	if err := p.roundTrip(s); err != nil {
		return nil, err
	}
	return pgResult(s.res.RowsAffected()), nil
}

// pgResult is sql.Result for a write sent in a batch.
type pgResult int64

func (r pgResult) LastInsertId() (int64, error) {
	return 0, errors.New("LastInsertId is not supported by PostgreSQL")
}
func (r pgResult) RowsAffected() (int64, error) { return int64(r), nil }

// flush sends the queued statements, before the code talks to the
// connection through database/sql (a multi-row query, a prepared
// statement).
func (p *pgTx) flush() error {
	p.dropAhead()
	return p.roundTrip(nil)
}

// commit sends the queued statements and COMMIT in one round trip. A
// failure rolls the transaction back. A context that ended before COMMIT
// left rolls the transaction back; once COMMIT is sent, its answer is
// awaited whatever the context: a cancellation could otherwise report "not
// recorded" for a transaction the server committed.
func (p *pgTx) commit() error {
	if err := p.ctx.Err(); err != nil && p.err == nil {
		p.rollback()
		return err
	}
	ctx := p.ctx
	p.ctx = context.WithoutCancel(ctx)
	err := p.roundTrip(&pgStmt{sql: "COMMIT", what: "commit"})
	p.ctx = ctx
	if err != nil {
		p.rollback()
	}
	return err
}

// rollback ends a transaction that failed or was refused. Nothing is sent
// when nothing was.
func (p *pgTx) rollback() {
	p.queue = nil
	if !p.sent {
		return
	}
	p.trips.add()
	_, _ = p.conn.ExecContext(context.WithoutCancel(p.ctx), "ROLLBACK")
	p.sent = false
}

// queuedError is the failure of a queued write, found when it was sent.
type queuedError struct {
	what string
	err  error
}

func (e *queuedError) Error() string { return e.what + ": " + e.err.Error() }
func (e *queuedError) Unwrap() error { return e.err }

// roundTrip sends the queued statements, then last (if any), in one batch.
// The first failure fails the transaction.
func (p *pgTx) roundTrip(last *pgStmt) error {
	if p.err != nil {
		return p.err
	}
	stmts := p.queue
	if last != nil {
		stmts = append(stmts, last)
	}
	p.queue = nil
	if len(stmts) == 0 {
		return nil
	}
	p.trips.add()
	p.sent = true
	err := p.conn.Raw(func(dc any) error {
		c := dc.(*stdlib.Conn).Conn()
		b := &pgx.Batch{}
		for _, s := range stmts {
			b.Queue(s.sql, s.args...)
		}
		br := c.SendBatch(p.ctx, b)
		var first error
		for _, s := range stmts {
			if err := s.receive(br); err != nil {
				first = blame(stmts, s, err)
				break
			}
		}
		if err := br.Close(); first == nil && err != nil {
			first = err
		}
		return first
	})
	if err != nil {
		p.err = err
		return err
	}
	for _, s := range stmts {
		if s.done != nil {
			s.done(s.row)
		}
	}
	return nil
}

// blame names the statement err came from: the one whose answer was being
// read, unless the batch failed before it ran (a statement the server could
// not prepare, or arguments the driver could not encode), which the error
// names.
func blame(stmts []*pgStmt, reading *pgStmt, err error) error {
	var pre pgx.ErrPreprocessingBatch
	if errors.As(err, &pre) {
		for _, s := range stmts {
			if s.sql == pre.SQL() {
				return s.fail(err)
			}
		}
	}
	return reading.fail(err)
}

// receive reads the statement's answer from the batch.
func (s *pgStmt) receive(br pgx.BatchResults) error {
	if !s.read {
		res, err := br.Exec()
		s.res = res
		return err
	}
	rows, err := br.Query()
	if err != nil {
		return err
	}
	s.row = &pgRow{err: sql.ErrNoRows}
	if rows.Next() {
		fields := rows.FieldDescriptions()
		raw := rows.RawValues()
		r := &pgRow{fields: make([]pgconn.FieldDescription, len(fields)), values: make([][]byte, len(raw))}
		copy(r.fields, fields)
		for i, v := range raw {
			if v != nil {
				r.values[i] = append([]byte{}, v...)
			}
		}
		s.row = r
	}
	rows.Close()
	return rows.Err()
}

// fail names a queued statement's failure by what it was for.
func (s *pgStmt) fail(err error) error {
	if err == nil || s.what == "" || s.what == "commit" {
		return err
	}
	var pe *pgconn.PgError
	if s.cas != nil && errors.As(err, &pe) && pe.Code == "22P02" && strings.Contains(pe.Message, casMark) {
		return s.cas
	}
	return &queuedError{what: s.what, err: err}
}

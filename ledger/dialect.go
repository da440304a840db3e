package ledger

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// dialect is the SQL the ledger's store speaks. The ledger writes its
// statements once, in SQLite's spelling (`?` placeholders); a PostgreSQL
// store rewrites each statement once (and caches it) into its own.
type dialect struct {
	postgres bool
	cache    sync.Map // statement → rewritten statement

	// PostgreSQL only: the location (with its password: never shown) and
	// the connection that listens for other hosts' changes.
	loc        string
	listenOnce sync.Once
	listen     *listener

	// trigram is whether the trigram index schema 10 makes where pg_trgm
	// is available exists: 0 not yet looked up, 1 yes, 2 no.
	trigram atomic.Int32
}

// trigramIndex reports whether searches can use the trigram index
// (PostgreSQL only), looking it up once per process.
func (d *dialect) trigramIndex(q queryer) (bool, error) {
	if !d.isPostgres() {
		return false, nil
	}
	if v := d.trigram.Load(); v != 0 {
		return v == 1, nil
	}
	var n int
	if err := q.QueryRow(`SELECT count(*) FROM pg_indexes WHERE schemaname = current_schema() AND indexname = 'actions_search_trgm'`).Scan(&n); err != nil {
		return false, fmt.Errorf("look for the search index: %w", err)
	}
	if n == 0 {
		d.trigram.Store(2)
		return false, nil
	}
	d.trigram.Store(1)
	return true, nil
}

// Statement fragments whose SQLite spelling PostgreSQL does not accept.
var postgresSpellings = strings.NewReplacer(
	"email = ? COLLATE NOCASE", "lower(email) = lower(?)",
	// SQLite's LIKE ignores the case of ASCII letters; PostgreSQL's ILIKE
	// does the same (and more).
	" LIKE ", " ILIKE ",
	"group_concat(", "string_agg(",
)

// rebind returns q as the store's SQL.
func (d *dialect) rebind(q string) string {
	if d == nil || !d.postgres {
		return q
	}
	if r, ok := d.cache.Load(q); ok {
		return r.(string)
	}
	r := numberPlaceholders(postgresSpellings.Replace(q))
	d.cache.Store(q, r)
	return r
}

// numberPlaceholders turns `?` into `$1`, `$2`, … outside quoted text.
func numberPlaceholders(q string) string {
	var b strings.Builder
	n := 0
	quote := byte(0)
	for i := 0; i < len(q); i++ {
		c := q[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '?':
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// Exec, Query, QueryRow and Prepare speak the store's dialect; every
// deciding write goes through them. On PostgreSQL they send the queued
// statements first, in the same round trip where they can (see pgTx).
func (t *wtx) Exec(q string, args ...any) (sql.Result, error) {
	if t.pg != nil {
		return t.pg.exec(t.l.dialect.rebind(q), args)
	}
	if err := t.flushBefore(q); err != nil {
		return nil, err
	}
	return t.tx.Exec(q, args...)
}

// Query is sql.Tx.Query in the store's dialect.
func (t *wtx) Query(q string, args ...any) (*sql.Rows, error) {
	if err := t.beforeDirect(q); err != nil {
		return nil, err
	}
	if t.pg != nil {
		return t.pg.conn.QueryContext(t.pg.ctx, t.l.dialect.rebind(q), args...)
	}
	return t.tx.Query(q, args...)
}

// beforeDirect writes what waits before q runs outside a batch: on
// PostgreSQL the queued statements (q then takes a round trip of its own,
// through database/sql), on SQLite what a batch transaction holds in
// memory (see flushBefore).
func (t *wtx) beforeDirect(q string) error {
	if t.pg == nil {
		return t.flushBefore(q)
	}
	if err := t.pg.flush(); err != nil {
		return err
	}
	t.pg.trips.add()
	return nil
}

// row is one row a query answered.
type row interface{ Scan(dest ...any) error }

// QueryRow is sql.Tx.QueryRow in the store's dialect.
func (t *wtx) QueryRow(q string, args ...any) row {
	if t.pg != nil {
		return t.pg.queryRow(t.l.dialect.rebind(q), args)
	}
	if err := t.flushBefore(q); err != nil {
		return errRow{err}
	}
	return t.tx.QueryRow(q, args...)
}

// Prepare is sql.Tx.Prepare in the store's dialect.
func (t *wtx) Prepare(q string) (*sql.Stmt, error) {
	if err := t.beforeDirect(q); err != nil {
		return nil, err
	}
	if t.pg != nil {
		return t.pg.conn.PrepareContext(t.pg.ctx, t.l.dialect.rebind(q))
	}
	return t.tx.Prepare(q)
}

// rtx is a read snapshot speaking the store's dialect.
type rtx struct {
	*sql.Tx
	d *dialect
}

// Query is sql.Tx.Query in the store's dialect.
func (r *rtx) Query(q string, args ...any) (*sql.Rows, error) {
	return r.Tx.Query(r.d.rebind(q), args...)
}

// QueryRow is sql.Tx.QueryRow in the store's dialect.
func (r *rtx) QueryRow(q string, args ...any) row {
	return r.Tx.QueryRow(r.d.rebind(q), args...)
}

// QueryRowContext is sql.Tx.QueryRowContext in the store's dialect.
func (r *rtx) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	return r.Tx.QueryRowContext(ctx, r.d.rebind(q), args...)
}

// QueryContext is sql.Tx.QueryContext in the store's dialect.
func (r *rtx) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	return r.Tx.QueryContext(ctx, r.d.rebind(q), args...)
}

// QueryRowContext on the wtx, for code that reads inside a write.
func (t *wtx) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	if t.pg != nil {
		_ = t.pg.flush() // a failure fails the transaction: COMMIT reports it
		t.pg.trips.add()
		return t.pg.conn.QueryRowContext(ctx, t.l.dialect.rebind(q), args...)
	}
	// Only a batch transaction keeps writes in memory, and none reads
	// through here (an import reads its refreshed mirror, see mirror).
	_ = t.flushBefore(q)
	return t.tx.QueryRowContext(ctx, q, args...)
}

// readPool reads outside a snapshot, in the store's dialect.
type readPool struct {
	db    *sql.DB
	d     *dialect
	reads *atomic.Int64 // the ledger's count of reads (Activity)
}

// QueryRowContext is sql.DB.QueryRowContext in the store's dialect. On
// SQLite a one-row read is microseconds of local work and is not watched
// for cancellation once it has started: database/sql and the driver would
// each start a goroutine to watch ctx, for every read (a send re-reads
// each recipient's consent here). A ctx already done still ends it.
func (p readPool) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	if !p.d.isPostgres() && ctx.Err() == nil {
		ctx = context.WithoutCancel(ctx)
	}
	p.reads.Add(1)
	return p.db.QueryRowContext(ctx, p.d.rebind(q), args...)
}

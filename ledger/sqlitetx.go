package ledger

import (
	"context"
	"database/sql"
)

// sqliteTx is a write transaction on SQLite, begun with BEGIN IMMEDIATE on
// the write connection itself rather than through database/sql's Tx. A Tx
// keeps a cancellable context of its own, and database/sql watches it from
// a new goroutine for every query the transaction runs, about 8% of the
// CPU of an audience send. Here statements run
// with no context to watch; the transaction is a few milliseconds of
// statements that commit or roll back whole, and the caller's context
// bounds the wait for the write turn before it begins (tryWrite).
type sqliteTx struct {
	conn     *sql.Conn
	prepared []*sql.Stmt // closed when the transaction ends, as a Tx closes its own
	done     bool
}

// beginSQLite begins a write transaction on conn. BEGIN IMMEDIATE takes the
// write lock at once, waiting for it under the connection's busy timeout.
func beginSQLite(conn *sql.Conn) (*sqliteTx, error) {
	if _, err := conn.ExecContext(context.Background(), "BEGIN IMMEDIATE"); err != nil {
		return nil, err
	}
	return &sqliteTx{conn: conn}, nil
}

func (x *sqliteTx) Exec(q string, args ...any) (sql.Result, error) {
	if x.done {
		return nil, sql.ErrTxDone
	}
	return x.conn.ExecContext(context.Background(), q, args...)
}

func (x *sqliteTx) Query(q string, args ...any) (*sql.Rows, error) {
	if x.done {
		return nil, sql.ErrTxDone
	}
	return x.conn.QueryContext(context.Background(), q, args...)
}

func (x *sqliteTx) QueryRow(q string, args ...any) row {
	if x.done {
		return errRow{sql.ErrTxDone}
	}
	return x.conn.QueryRowContext(context.Background(), q, args...)
}

// QueryRowContext reads under ctx, for the few reads inside a write that
// may take long (an import's look at its refreshed mirror).
func (x *sqliteTx) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	return x.conn.QueryRowContext(ctx, q, args...)
}

func (x *sqliteTx) Prepare(q string) (*sql.Stmt, error) {
	if x.done {
		return nil, sql.ErrTxDone
	}
	st, err := x.conn.PrepareContext(context.Background(), q)
	if err == nil {
		x.prepared = append(x.prepared, st)
	}
	return st, err
}

// Commit ends the transaction keeping its writes. When COMMIT fails SQLite
// may leave the transaction open; it is rolled back then, as go-sqlite3's
// own Tx does, so that the connection goes back to the pool with none.
func (x *sqliteTx) Commit() error {
	if x.done {
		return sql.ErrTxDone
	}
	x.end()
	_, err := x.conn.ExecContext(context.Background(), "COMMIT")
	if err != nil {
		x.conn.ExecContext(context.Background(), "ROLLBACK")
	}
	return err
}

// Rollback ends the transaction discarding its writes.
func (x *sqliteTx) Rollback() error {
	if x.done {
		return sql.ErrTxDone
	}
	x.end()
	_, err := x.conn.ExecContext(context.Background(), "ROLLBACK")
	return err
}

func (x *sqliteTx) end() {
	x.done = true
	for _, st := range x.prepared {
		st.Close() // finalizing a statement cannot fail in a way the transaction's outcome depends on
	}
	x.prepared = nil
}

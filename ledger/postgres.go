package ledger

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver

	"gatehouse/internal/clock"
	"gatehouse/internal/oswait"
	"gatehouse/internal/redact"
)

// The PostgreSQL store: the same gate, for ledgers several hosts share.
//
// Isolation. Every deciding write is one transaction that first takes a
// transaction-level advisory lock on the ledger (pg_advisory_xact_lock), so
// deciding writes run one at a time, exactly as SQLite's BEGIN IMMEDIATE
// makes them, and each reads the state it decides on (the action, the
// owner, the stop switch) after the previous decision committed. The
// constraints hold on their own besides: a partial unique index allows one
// attempt in flight per action, and every state change is a compare-and-swap
// on the row's version. Reads run in REPEATABLE READ, one snapshot each.
// Serialization failures and deadlocks (40001, 40P01) are retried like
// SQLite's "busy". Durable commits wait for their flush (synchronous_commit
// on); relaxed ones (writeRelaxed) do not, and are made durable by the
// next durable commit, as on SQLite (see beginPgTx).

//go:embed schema/pg/*.sql
var pgSchemaFS embed.FS

// writeLockKey is the advisory lock every deciding write takes: "GHLD".
const writeLockKey = int64(applicationID)

// migrateLockKey is the session lock under which migrations run, so two
// hosts starting at once migrate once.
const migrateLockKey = int64(applicationID) + 1

// IsPostgres reports whether a ledger location names a PostgreSQL database
// (postgres:// or postgresql://) rather than a file.
func IsPostgres(loc string) bool {
	return strings.HasPrefix(loc, "postgres://") || strings.HasPrefix(loc, "postgresql://")
}

// RedactLocation shows a ledger location with every credential it carries
// masked: a userinfo password, password=, sslpassword=, passfile=.
func RedactLocation(loc string) string { return redact.Location(loc) }

// LocationSecrets are the credential values a ledger location carries, for
// scrubbing text that may quote them (see internal/redact).
func LocationSecrets(loc string) []string { return redact.Secrets(loc) }

// ErrKeyValueDSN refuses a PostgreSQL connection string in key=value form:
// it would otherwise be taken for the name of an SQLite file.
var ErrKeyValueDSN = errors.New("a PostgreSQL key=value connection string is not a ledger location")

// dsnKeys are the libpq keywords that mark a key=value connection string.
var dsnKeys = []string{"host", "hostaddr", "port", "dbname", "user", "password", "sslmode", "passfile", "sslpassword", "service", "connect_timeout"}

// checkLocation refuses a location that looks like a key=value DSN, saying
// the URL form, and never quoting what was given (it may hold a password).
func checkLocation(loc string) error {
	if IsPostgres(loc) || !strings.Contains(loc, "=") {
		return nil
	}
	for _, field := range strings.Fields(loc) {
		k, _, ok := strings.Cut(field, "=")
		if ok && slices.Contains(dsnKeys, strings.ToLower(k)) {
			return fmt.Errorf("%w: %w: give it as a URL, postgres://USER@HOST:PORT/DBNAME?sslmode=…, with the password in PGPASSWORD or a passfile rather than in the URL", ErrInvalid, ErrKeyValueDSN)
		}
	}
	return nil
}

func openPostgres(loc string, o options, readOnly bool) (*Ledger, error) {
	shown := RedactLocation(loc)
	db, err := sql.Open("pgx", loc)
	if err != nil {
		return nil, fmt.Errorf("open ledger %s: %w", shown, err)
	}
	db.SetMaxOpenConns(16)
	db.SetMaxIdleConns(8)
	l := &Ledger{path: shown, dialect: &dialect{postgres: true, loc: loc}, r: db, clock: o.clock, lease: o.lease, notice: o.notice,
		holder: processHolder(), onDemand: o.onDemand}
	ctx := o.context()
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("open ledger %s: %w", shown, err)
	}
	if o.rehearsalClock {
		mark, err := pgRehearsal(ctx, db)
		if err == nil {
			err = refuseUnlessRehearsal(shown, mark)
		}
		if err != nil {
			db.Close()
			return nil, err
		}
	}
	if readOnly {
		if err := l.checkPostgresReadable(ctx, o.olderSchema); err != nil {
			db.Close()
			return nil, fmt.Errorf("open ledger %s: %w", shown, err)
		}
		l.loadRehearsal(ctx, db)
		return l, nil
	}
	if o.existing {
		if err := l.checkPostgresReadable(ctx, true); err != nil {
			db.Close()
			return nil, fmt.Errorf("open ledger %s: %w", shown, err)
		}
	}
	l.w = db
	if err := createSchema(ctx, db, loc); err != nil {
		db.Close()
		return nil, fmt.Errorf("open ledger %s: %w", shown, err)
	}
	if err := l.migratePostgres(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("open ledger %s: %w", shown, err)
	}
	l.loadIdentity(ctx, db)
	l.loadRestored(ctx, db)
	l.loadRehearsal(ctx, db)
	if !o.noRecover {
		if _, err := l.Recover(ctx); err != nil {
			db.Close()
			return nil, fmt.Errorf("open ledger %s: recover: %w", shown, err)
		}
	}
	return l, nil
}

// pgRehearsal reads the rehearsal mark of a PostgreSQL ledger without
// creating or migrating anything: "" where no ledger is, or its schema
// predates the mark.
func pgRehearsal(ctx context.Context, db *sql.DB) (string, error) {
	var exists bool
	if err := db.QueryRowContext(ctx, `SELECT to_regclass('gatehouse_schema') IS NOT NULL`).Scan(&exists); err != nil {
		return "", fmt.Errorf("read the schema version: %w", err)
	}
	if !exists {
		return "", nil
	}
	var version int
	if err := db.QueryRowContext(ctx, `SELECT version FROM gatehouse_schema`).Scan(&version); err != nil {
		return "", fmt.Errorf("read the schema version: %w", err)
	}
	if version < rehearsalSchema {
		return "", nil
	}
	var name string
	if err := db.QueryRowContext(ctx, `SELECT rehearsal FROM ledger_identity`).Scan(&name); err != nil {
		return "", fmt.Errorf("read the rehearsal mark: %w", err)
	}
	return name, nil
}

// pgMigration is one schema file as PostgreSQL runs it: its own spelling in
// schema/pg/ where SQLite's is not portable, SQLite's file otherwise.
type pgMigration struct {
	version int
	path    string
	fs      fs.FS
}

func pgMigrations() ([]pgMigration, error) {
	files, err := migrations()
	if err != nil {
		return nil, err
	}
	var out []pgMigration
	for _, m := range files {
		own := path.Join("schema/pg", path.Base(m.path))
		if _, err := fs.Stat(pgSchemaFS, own); err == nil {
			out = append(out, pgMigration{version: m.version, path: own, fs: pgSchemaFS})
			continue
		}
		out = append(out, pgMigration{version: m.version, path: m.path, fs: schemaFS})
	}
	return out, nil
}

// migratePostgres applies the schema files in order under a session
// advisory lock, each with its version in gatehouse_schema, refusing a
// database that holds other tables and no ledger, and one from a newer
// gatehouse.
func (l *Ledger) migratePostgres(ctx context.Context) error {
	conn, err := l.w.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `SELECT pg_advisory_lock($1)`, migrateLockKey); err != nil {
		return fmt.Errorf("lock for migration: %w", err)
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, migrateLockKey)
	version, err := pgVersion(ctx, conn)
	if err != nil {
		return err
	}
	files, err := pgMigrations()
	if err != nil {
		return err
	}
	if known := schemaVersions(); version > known {
		return fmt.Errorf("%w: the database has schema version %d, this binary knows up to %d; upgrade gatehouse (left unchanged)", ErrTooNew, version, known)
	}
	for _, m := range files {
		if m.version <= version {
			continue
		}
		body, err := fs.ReadFile(m.fs, m.path)
		if err != nil {
			return err
		}
		tx, err := conn.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, string(body)); err != nil {
			tx.Rollback()
			return fmt.Errorf("migration %s: %w", m.path, err)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE gatehouse_schema SET version = $1`, m.version); err != nil {
			tx.Rollback()
			return err
		}
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("migration %s: %w", m.path, err)
		}
	}
	return nil
}

// pgVersion reads the schema version, creating the version table in an
// empty database and refusing one that holds another application's tables.
func pgVersion(ctx context.Context, conn *sql.Conn) (int, error) {
	var mine, tables int
	if err := conn.QueryRowContext(ctx, `SELECT count(*) FILTER (WHERE tablename = 'gatehouse_schema'), count(*)
		FROM pg_tables WHERE schemaname = current_schema()`).Scan(&mine, &tables); err != nil {
		return 0, fmt.Errorf("read the database's tables: %w", err)
	}
	if mine == 0 {
		if perr := pgPermissionProblem(ctx, conn); perr != nil {
			return 0, perr
		}
		if tables > 0 {
			return 0, fmt.Errorf("%w: the database holds %d tables of another application (left unchanged); give the ledger its own database or schema", ErrNotLedger, tables)
		}
		if _, err := conn.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS gatehouse_schema (version INTEGER NOT NULL);
			INSERT INTO gatehouse_schema SELECT 0 WHERE NOT EXISTS (SELECT 1 FROM gatehouse_schema)`); err != nil {
			return 0, fmt.Errorf("create the schema version table: %w", err)
		}
	}
	var version int
	if err := conn.QueryRowContext(ctx, `SELECT version FROM gatehouse_schema`).Scan(&version); err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	return version, nil
}

// ErrPermission means the database role may not do what the ledger needs.
var ErrPermission = errors.New("permission denied")

// pgQueryer is what pgPermissionProblem reads through: a pool or a conn.
type pgQueryer interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// pgPermissionProblem names a schema on the search path that exists but
// that the role may not use: PostgreSQL then resolves the ledger's tables
// to nothing, and without this the role would be told the database holds
// no ledger (or the ledger would be created elsewhere).
func pgPermissionProblem(ctx context.Context, q pgQueryer) error {
	var role, schema string
	err := q.QueryRowContext(ctx, `SELECT current_user, n.nspname
		FROM pg_namespace n, unnest(string_to_array(replace(current_setting('search_path'), ' ', ''), ',')) AS p(name)
		WHERE n.nspname = trim(both '"' from replace(p.name, '$user', current_user))
		  AND NOT has_schema_privilege(n.oid, 'USAGE')
		LIMIT 1`).Scan(&role, &schema)
	if errors.Is(err, sql.ErrNoRows) || err != nil {
		return nil // nothing to name (or nothing readable to name it by): the caller's error stands
	}
	return fmt.Errorf("%w: role %s may not use schema %s: grant USAGE (GRANT USAGE ON SCHEMA %s TO %s), and the ledger's table privileges, or use another schema",
		ErrPermission, role, schema, schema, role)
}

// pgPrivilegeError names the role and what it may not do.
func pgPrivilegeError(ctx context.Context, q pgQueryer, pe *pgconn.PgError) error {
	var role string
	_ = q.QueryRowContext(ctx, `SELECT current_user`).Scan(&role)
	return fmt.Errorf("%w: role %s: %s; grant it the ledger's privileges (see docs/RELIABILITY.md, several hosts)", ErrPermission, orDash(role), pe.Message)
}

// checkPostgresReadable refuses, for a reader, what is not a current ledger.
func (l *Ledger) checkPostgresReadable(ctx context.Context, olderSchema bool) error {
	var version int
	err := l.r.QueryRowContext(ctx, `SELECT version FROM gatehouse_schema`).Scan(&version)
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "42P01" { // undefined_table
		if perr := pgPermissionProblem(ctx, l.r); perr != nil {
			return perr
		}
		return fmt.Errorf("%w: the database holds no ledger", ErrNoLedger)
	}
	if errors.As(err, &pe) && pe.Code == "42501" { // insufficient_privilege
		return pgPrivilegeError(ctx, l.r, pe)
	}
	if err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	known := schemaVersions()
	switch {
	case version > known:
		return fmt.Errorf("%w: the database has schema version %d, this binary knows up to %d", ErrTooNew, version, known)
	case version < known && !olderSchema:
		return fmt.Errorf("%w: the database has schema version %d, this binary knows %d; run: gatehouse ledger migrate --ledger %s",
			ErrNeedsMigration, version, known, l.path)
	}
	return nil
}

// lockForDecision serialises deciding writes on PostgreSQL (see the
// package comment above) and, in the same statement, reads the server's
// clock: with the system clock, several hosts' decisions and leases take
// the server's time, since the hosts' clocks disagree. The statement
// travels, after BEGIN, with the transaction's first statement (see pgTx);
// the lock is taken before that statement runs, and the time is known
// before anything could be decided on it (see wtx.now).
func (t *wtx) lockForDecision() {
	if t.pg == nil {
		return
	}
	_, system := t.l.clock.(clock.System)
	t.atFromLock = system
	// The notification is delivered only if the transaction commits: it
	// wakes followers (WaitForChange) on every host, who then re-read. A
	// relaxed transaction (see beginPgTx) sets, in the same statement,
	// synchronous_commit off for itself alone (set_config's is_local, what
	// a SET LOCAL of its own would do at the cost of a statement).
	q := lockStmt
	if !t.durable {
		q = lockStmtRelaxed
	}
	t.pg.queue = append(t.pg.queue, &pgStmt{sql: q,
		args: []any{writeLockKey}, what: "lock for decision", read: true,
		done: func(r *pgRow) {
			var ns int64
			if err := r.Scan(&ns); err != nil {
				t.pg.err = fmt.Errorf("lock for decision: %w", err)
				return
			}
			if system {
				t.at = time.Unix(0, ns).UTC()
			}
			t.atFromLock = false
		}})
}

// The lock statements (see lockForDecision): the functions in the
// subquery are volatile, so each runs once, before the clock is read.
const (
	lockStmt = `SELECT (extract(epoch from clock_timestamp()) * 1e9)::bigint
		FROM (SELECT pg_advisory_xact_lock($1), pg_notify('` + changesChannel + `', '')) AS locked`
	lockStmtRelaxed = `SELECT (extract(epoch from clock_timestamp()) * 1e9)::bigint
		FROM (SELECT pg_advisory_xact_lock($1), pg_notify('` + changesChannel + `', ''),
			set_config('synchronous_commit', 'off', true)) AS locked`
)

func (d *dialect) isPostgres() bool { return d != nil && d.postgres }

// pgRetryable reports a PostgreSQL error a write is retried on.
func pgRetryable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40001" || pe.Code == "40P01" || pe.Code == "55P03")
}

// pgStorageFailure reports a failure of the PostgreSQL server or the
// connection to it.
func pgStorageFailure(err error) bool {
	var pe *pgconn.PgError
	var ne net.Error
	return errors.As(err, &pe) || errors.As(err, &ne) || pgconn.Timeout(err)
}

// migratePostgresAt is Migrate for a PostgreSQL ledger: it never creates
// one (an empty database is refused) and never runs the recovery pass.
func migratePostgresAt(ctx context.Context, loc string) (from, to int, err error) {
	l, err := openPostgres(loc, options{clock: clock.System{}, olderSchema: true}, true)
	if err != nil {
		return 0, 0, err
	}
	defer l.Close()
	if err := l.r.QueryRowContext(ctx, `SELECT version FROM gatehouse_schema`).Scan(&from); err != nil {
		return 0, 0, err
	}
	l.w = l.r
	if err := l.migratePostgres(ctx); err != nil {
		return from, from, fmt.Errorf("migrate ledger %s: %w", l.path, err)
	}
	return from, schemaVersions(), nil
}

// SchemaLocation is loc with the ledger kept in the named schema of its
// database (search_path), so one database can hold several ledgers, e.g.
// one per rehearsed scenario.
func SchemaLocation(loc, schema string) (string, error) {
	u, err := url.Parse(loc)
	if err != nil {
		return "", fmt.Errorf("ledger location %s: %w", RedactLocation(loc), err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// createSchema creates the schema a location names with search_path, so a
// new ledger can be made in it; an existing one is kept as it is.
func createSchema(ctx context.Context, db *sql.DB, loc string) error {
	u, err := url.Parse(loc)
	if err != nil {
		return err
	}
	schema := u.Query().Get("search_path")
	if schema == "" || strings.Contains(schema, ",") {
		return nil
	}
	var exists bool
	if err := db.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)`, schema).Scan(&exists); err != nil {
		return fmt.Errorf("look for schema %s: %w", schema, err)
	}
	if exists {
		return nil // a role that may not create schemas can still use one made for it
	}
	if _, err := db.ExecContext(ctx, `CREATE SCHEMA IF NOT EXISTS `+pgIdent(schema)); err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "42501" {
			return fmt.Errorf("create schema %s: %w", schema, pgPrivilegeError(ctx, db, pe))
		}
		return fmt.Errorf("create schema %s: %w", schema, err)
	}
	return nil
}

// pgIdent quotes an identifier.
func pgIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// changesChannel is the LISTEN/NOTIFY channel every deciding write
// notifies on commit.
const changesChannel = "gatehouse_changes"

// listener wakes followers of a PostgreSQL ledger: one connection that
// LISTENs, and a channel closed (and replaced) on every notification.
type listener struct {
	mu     sync.Mutex
	wake   chan struct{}
	err    error // why listening stopped; followers then poll
	cancel context.CancelFunc
}

// WaitForChange returns once the ledger may have changed, or when d has
// passed, or ctx ends. On PostgreSQL a writer's notification on any host
// ends the wait at once (LISTEN/NOTIFY: a wake-up only; the follower
// re-reads); elsewhere, or when notifications are lost, the wait is d, so a
// follower that polls a change counter still sees every change.
func (l *Ledger) WaitForChange(ctx context.Context, d time.Duration) error {
	var wake <-chan struct{}
	if l.dialect.isPostgres() {
		wake = l.dialect.changes(l)
	}
	t := oswait.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
	case <-wake:
	}
	return nil
}

// changes returns the channel the next notification closes, starting the
// listening connection on first use. A nil channel (never closed) means
// the ledger is not listening right now (the connection was lost and run is
// connecting again, or the ledger was closed before it ever listened): the
// caller's timer is the fallback.
func (d *dialect) changes(l *Ledger) <-chan struct{} {
	d.listenOnce.Do(func() {
		ctx, cancel := context.WithCancel(context.Background())
		d.listen = &listener{wake: make(chan struct{}), cancel: cancel}
		go d.listen.run(ctx, d.loc)
	})
	if d.listen == nil { // closed before it ever listened
		return nil
	}
	d.listen.mu.Lock()
	defer d.listen.mu.Unlock()
	if d.listen.err != nil {
		return nil
	}
	return d.listen.wake
}

// stopListening ends the listening connection, if there is one.
func (d *dialect) stopListening() {
	if !d.isPostgres() {
		return
	}
	// A ledger closed before it listened never starts: a wait on it
	// afterwards would open a connection nothing ends.
	d.listenOnce.Do(func() {})
	if d.listen != nil {
		d.listen.cancel()
	}
}

// Bounds of the pause between attempts to listen again after the
// listening connection was lost (a server restart, a terminated backend, a
// network cut). Meanwhile followers poll.
const (
	relistenFirst = 250 * time.Millisecond
	relistenMost  = 30 * time.Second
)

// run keeps one listening connection for as long as ctx lasts: when it is
// lost, every follower is woken once and polls while run connects again,
// backing off up to relistenMost; once listening again, followers are woken
// once more (they may have missed notifications) and wait for the next one.
func (ln *listener) run(ctx context.Context, loc string) {
	pause := relistenFirst
	for lost := false; ; lost = true {
		var held oswait.Stopwatch
		listening := false
		conn, err := pgx.Connect(ctx, loc)
		if err == nil {
			_, err = conn.Exec(ctx, "LISTEN "+changesChannel)
		}
		if err == nil {
			held, listening = oswait.StartStopwatch(), true
			ln.mu.Lock()
			ln.err = nil
			if lost {
				close(ln.wake)
				ln.wake = make(chan struct{})
			}
			ln.mu.Unlock()
		}
		for err == nil {
			_, err = conn.WaitForNotification(ctx)
			if err == nil {
				ln.wakeAll(nil)
			}
		}
		ln.wakeAll(err) // wake everyone once more; they poll until listening again
		if conn != nil {
			conn.Close(context.Background())
		}
		var wait time.Duration
		wait, pause = relistenPause(pause, listening && held.Elapsed() >= relistenMost)
		if oswait.Pause(ctx, wait) != nil {
			return
		}
	}
}

// relistenPause is how long to wait before listening again after a loss,
// and the pause after that. The backoff starts over only after a connection
// that held for relistenMost: a server that takes the LISTEN and drops the
// connection at once would otherwise be asked four times a second forever.
func relistenPause(pause time.Duration, heldLong bool) (wait, next time.Duration) {
	if heldLong {
		pause = relistenFirst
	}
	return pause, min(2*pause, relistenMost)
}

// wakeAll ends every follower's current wait; err, when not nil, says why
// listening stopped, and until it is cleared followers poll.
func (ln *listener) wakeAll(err error) {
	ln.mu.Lock()
	defer ln.mu.Unlock()
	ln.err = err
	close(ln.wake)
	ln.wake = make(chan struct{})
}

package ledger

import (
	"bytes"
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mattn/go-sqlite3"

	"gatehouse/internal/clock"
	"gatehouse/internal/oswait"
)

//go:embed schema/*.sql
var schemaFS embed.FS

// driverName is go-sqlite3 with the ledger's per-connection settings.
const driverName = "sqlite3_gatehouse"

func init() {
	sql.Register(driverName, &sqlite3.SQLiteDriver{ConnectHook: func(c *sqlite3.SQLiteConn) error {
		// 4 KiB pages (SQLite's default; before, ledgers were created
		// with 1 KiB): WAL frames are written one system call per header
		// and one per page, and a batch of recipients writes rows that
		// fill whole pages, so larger pages mean far fewer calls per
		// recipient (an audience send costs 17% less CPU); a single
		// decision, which dirties a few scattered pages, costs about 5%
		// more. page_size only takes effect when a file is created: an
		// older ledger keeps its pages. Checkpoint less often: the gate
		// rewrites the same hot pages in every decision, and a checkpoint
		// copies each distinct page once however often it changed.
		_, err := c.Exec("PRAGMA page_size = 4096; PRAGMA wal_autocheckpoint = 10000", nil)
		return err
	}})
}

// applicationID marks an SQLite file as a gatehouse ledger ("GHLD").
const applicationID = 0x47484C44

// Ledger is the authoritative execution ledger on one SQLite file. It is safe
// for concurrent use by many goroutines, and several processes may open the
// same file: every deciding write is one BEGIN IMMEDIATE transaction.
type Ledger struct {
	path    string
	dialect *dialect // the SQL the store speaks (nil: SQLite's)
	r       *sql.DB  // read pool (query_only)
	clock   clock.Clock
	lease   time.Duration
	holder  string

	// wmu guards w, the one connection all deciding writes use. It is nil
	// in a ledger opened read-only until (with WithWritesOnDemand) the first
	// write opens it.
	wmu      sync.Mutex
	w        *sql.DB
	onDemand bool

	// syncMu guards the write connection's last synchronous setting.
	syncMu      sync.Mutex
	syncKnown   bool
	syncDurable bool

	// turn makes the processes writing a SQLite ledger take turns (see
	// writeTurn); opened with the first write.
	turnOnce sync.Once
	turn     *writeTurn

	// trips counts round trips of deciding transactions on PostgreSQL,
	// when a test asks (nil otherwise).
	trips *countTrips

	// writes and reads count what this handle asked of its store (Activity).
	writes, reads atomic.Int64

	// identity is the ledger's name (ledger_identity), read once by the
	// first attempt this handle starts: it never changes.
	identity atomic.Pointer[string]
	// keySecret is the ledger's secret for provider-facing keys
	// (ledger_identity.key_secret), read by the first HTTP attempt.
	keySecret atomic.Pointer[[]byte]
	// restored is set while a restore left anything unverified (see
	// loadRestored): only then does a decision read the marks.
	restored atomic.Bool
	// everRestored is set once the ledger was restored or marked restored:
	// an action proposed from then on may be one the lost history proposed
	// and sent (see unverifiedAtBirth).
	everRestored atomic.Bool
	// rehearsal names the scenario whose rehearsal created the ledger
	// (ledger_identity.rehearsal, see MarkRehearsal); read at open.
	rehearsal atomic.Pointer[string]
	// notice, when set, is told who holds the write lock a write waits for.
	notice func(string)
	// seenMode is what the last permission check found (see CheckedOpen).
	seenMode atomic.Int32
	// group lets this handle's concurrent executions share transactions
	// (see groupCommit).
	group groupCommit
	// opensBackup lets Open open a file marked as a backup (ToMarkRestored,
	// restore's own copy); writesBackup lets every write change it
	// (restore's own copy only). Otherwise a backup is refused (ErrBackup).
	opensBackup, writesBackup bool
}

// Activity is what one ledger handle asked of its store since it was
// opened: write transactions begun (one retried after a busy lock counts
// again) and reads (read snapshots and one-row reads from the read pool).
// Opening the ledger counts too: its migration check and recovery.
type Activity struct {
	Writes int64
	Reads  int64
}

// Activity returns the counts so far; a caller that wants one operation's
// share takes the difference of two.
func (l *Ledger) Activity() Activity {
	return Activity{Writes: l.writes.Load(), Reads: l.reads.Load()}
}

// Option configures Open.
type Option func(*options)

type options struct {
	clock       clock.Clock
	lease       time.Duration
	noRecover   bool
	onDemand    bool
	existing    bool
	olderSchema bool
	// rehearsalClock: clock is a rehearsal's, offered from outside; the
	// ledger is opened only if its records mark it as a rehearsal's.
	rehearsalClock bool
	openBackup     bool            // ToMarkRestored, or restore's own copy
	writeBackup    bool            // restore's own copy: every write may change a backup
	ctx            context.Context // what Open's own writes (migration, recovery) run under
	notice         func(string)    // told when a write waits for another's lock (WithWaitNotice)
}

// WithContext makes Open's own work (migration, the recovery pass) end
// when ctx does: an interrupted verb does not wait for a lock behind it.
func WithContext(ctx context.Context) Option { return func(o *options) { o.ctx = ctx } }

// WithWaitNotice calls f, once per write, when the write has waited a
// second for another process's write lock, with a line that names the
// holder (its pid, host and command line, where they can be read).
func WithWaitNotice(f func(string)) Option { return func(o *options) { o.notice = f } }

func (o options) context() context.Context {
	if o.ctx != nil {
		return o.ctx
	}
	return context.Background()
}

// WithClock makes the ledger read time from c.
func WithClock(c clock.Clock) Option { return func(o *options) { o.clock = c } }

// DefaultLease is the lease of an attempt whose process sets none (WithLease).
const DefaultLease = 2 * time.Minute

// WithLease sets how long an attempt may stay in flight before recovery may
// declare its outcome unknown (default DefaultLease). It must exceed the
// destination's longest send.
func WithLease(d time.Duration) Option { return func(o *options) { o.lease = d } }

// WithoutRecovery skips the start-up recovery pass (for tools that only read).
func WithoutRecovery() Option { return func(o *options) { o.noRecover = true } }

// RequireExisting makes Open refuse, like OpenReadOnly, a path with no
// ledger (a missing or empty file) instead of creating one.
func RequireExisting() Option { return func(o *options) { o.existing = true } }

// ErrNotLedger means the file exists but is not a gatehouse ledger.
var ErrNotLedger = errors.New("not a gatehouse ledger")

// ErrTooNew means the ledger was written by a newer gatehouse.
var ErrTooNew = errors.New("ledger schema is newer than this gatehouse")

// Open opens (creating if needed, unless RequireExisting) the ledger at
// path, applies pending migrations and recovers attempts left in flight by
// dead executors. A file that is not an SQLite database, or an SQLite
// database that is not a gatehouse ledger, or a ledger from a newer
// gatehouse is refused and left untouched, and so is a backup written by
// ledger backup (ErrBackup), whatever put it in place: restore it, or mark
// it restored (ToMarkRestored). Tools that only read use OpenReadOnly.
func Open(path string, opts ...Option) (*Ledger, error) {
	o := options{clock: clock.System{}, lease: DefaultLease}
	for _, opt := range opts {
		opt(&o)
	}
	if IsPostgres(path) {
		return openPostgres(path, o, false)
	}
	if err := checkLocation(path); err != nil {
		return nil, err
	}
	if o.existing || o.rehearsalClock {
		if err := statLedger(path); err != nil {
			if o.rehearsalClock {
				// A rehearsal creates and marks its ledger before it
				// runs anything that could read its clock.
				return nil, fmt.Errorf("%w: %w", ErrNotRehearsal, err)
			}
			return nil, err
		}
	}
	if err := checkHeader(path); err != nil {
		return nil, err
	}
	l := &Ledger{path: path, clock: o.clock, lease: o.lease, holder: processHolder(), notice: o.notice,
		opensBackup: o.openBackup, writesBackup: o.writeBackup}
	ctx := o.context()
	var err error
	if l.w, err = openWriter(path); err != nil {
		return nil, err
	}
	if o.rehearsalClock {
		mark, err := sqliteRehearsal(l.w)
		if err == nil {
			err = refuseUnlessRehearsal(path, mark)
		}
		if err != nil {
			l.w.Close()
			return nil, err
		}
	}
	if err := l.migrate(ctx); err != nil {
		l.w.Close()
		return nil, fmt.Errorf("open ledger %s: %w", path, err)
	}
	if l.r, err = openPool(path, true); err != nil {
		l.w.Close()
		return nil, err
	}
	l.r.SetMaxOpenConns(4)
	l.loadIdentity(ctx, l.r)
	l.loadRestored(ctx, l.r)
	l.loadRehearsal(ctx, l.r)
	if !o.noRecover {
		if _, err := l.Recover(ctx); err != nil {
			l.Close()
			return nil, fmt.Errorf("open ledger %s: recover: %w", path, err)
		}
	}
	return l, nil
}

// openWriter opens the single write connection, refusing a file that is
// not a ledger (or is a newer one) before anything could change it, and
// switches the file to WAL.
func openWriter(path string) (*sql.DB, error) {
	w, err := openPool(path, false)
	if err != nil {
		return nil, err
	}
	w.SetMaxOpenConns(1)
	if err := checkIdentity(w); err != nil {
		w.Close()
		return nil, fmt.Errorf("open ledger %s: %w", path, err)
	}
	if err := enableWAL(w); err != nil {
		w.Close()
		return nil, fmt.Errorf("open ledger %s: %w", path, err)
	}
	// From now on the write connection waits for another process's write
	// lock in Go (writeWith's retries, bounded and interruptible), not
	// inside SQLite's busy handler, where SIGINT and SIGTERM cannot end it.
	// Opening keeps the long timeout: a connection's first read can meet
	// another's checkpoint or index recovery for a moment.
	if _, err := w.Exec("PRAGMA busy_timeout = 100"); err != nil {
		w.Close()
		return nil, fmt.Errorf("open ledger %s: %w", path, err)
	}
	return w, nil
}

// writer is the write connection. A ledger opened read-only has none and
// refuses with ErrReadOnly, unless it was opened WithWritesOnDemand: then
// the first write opens it, checking the file's identity again. It never
// migrates (an older schema is refused with ErrNeedsMigration) and never
// runs the recovery pass.
func (l *Ledger) writer() (*sql.DB, error) {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if l.w != nil {
		return l.w, nil
	}
	if !l.onDemand {
		return nil, fmt.Errorf("ledger %s: %w", l.path, ErrReadOnly)
	}
	if l.dialect.isPostgres() {
		// The pool reads and writes alike; a reader that starts writing
		// checks once more that the schema is current.
		if err := l.checkPostgresReadable(context.Background(), false); err != nil {
			return nil, fmt.Errorf("open ledger %s for writing: %w", l.path, err)
		}
		l.w = l.r
		return l.w, nil
	}
	w, err := openWriter(l.path)
	if err != nil {
		return nil, err
	}
	if id, err := readIdentity(w); err != nil || id.version < schemaVersions() {
		w.Close()
		if err == nil {
			err = fmt.Errorf("%w: file has schema version %d, this binary knows %d", ErrNeedsMigration, id.version, schemaVersions())
		}
		return nil, fmt.Errorf("open ledger %s for writing: %w", l.path, err)
	}
	l.w = w
	return w, nil
}

// Path is the ledger file.
func (l *Ledger) Path() string { return l.path }

// Clock is the ledger's clock.
func (l *Ledger) Clock() clock.Clock { return l.clock }

// Close releases the file.
func (l *Ledger) Close() error {
	l.dialect.stopListening()
	var errs []error
	if l.r != nil {
		errs = append(errs, l.r.Close())
	}
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if l.w != nil && l.w != l.r {
		errs = append(errs, l.w.Close())
	}
	l.turnOnce.Do(func() {})
	l.turn.close()
	return errors.Join(errs...)
}

func openPool(path string, readOnly bool) (*sql.DB, error) {
	q := url.Values{}
	q.Set("_busy_timeout", "10000")
	q.Set("_foreign_keys", "1")
	// FULL: the commit that records "executing" must survive power loss
	// before the destination is called, or a re-send could follow.
	q.Set("_synchronous", "FULL")
	q.Set("_txlock", "immediate")
	// The gate runs the same few statements in every decision; preparing
	// them once per connection halves the CPU a decision costs.
	q.Set("_stmt_cache_size", "128")
	if readOnly {
		q.Set("_query_only", "1")
		q.Set("_txlock", "deferred")
	}
	dsn := "file:" + escapePath(path) + "?" + q.Encode()
	db, err := sql.Open(driverName, dsn)
	if err != nil {
		return nil, fmt.Errorf("open ledger %s: %w", path, err)
	}
	return db, nil
}

func escapePath(p string) string {
	return strings.NewReplacer("?", "%3f", "#", "%23").Replace(p)
}

// checkHeader refuses a non-empty file that is not SQLite before the driver
// can touch it.
func checkHeader(path string) error {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("cannot read ledger %s: %w", path, pathErrCause(err))
	}
	defer f.Close()
	head := make([]byte, 16)
	n, err := io.ReadFull(f, head)
	if n == 0 && (err == io.EOF || err == nil) {
		return nil // empty file: a new ledger
	}
	if !bytes.Equal(head[:n], []byte("SQLite format 3\x00")[:n]) || n < 16 {
		return fmt.Errorf("open ledger %s: %w: the file is not an SQLite database (left unchanged)", path, ErrNotLedger)
	}
	return nil
}

// checkIdentity reads (never writes) the file's identity, so that a foreign
// or newer database is refused before anything could change it.
func checkIdentity(db *sql.DB) error {
	id, err := readIdentity(db)
	if err != nil {
		return err
	}
	return identityError(id.appID, id.version, id.tables)
}

// identity is what tells a ledger from another file, and its schema version.
type identity struct{ appID, version, tables int }

func readIdentity(db *sql.DB) (identity, error) {
	var id identity
	for _, q := range []struct {
		dst   *int
		query string
	}{
		{&id.appID, "PRAGMA application_id"},
		{&id.version, "PRAGMA user_version"},
		{&id.tables, "SELECT count(*) FROM sqlite_master"},
	} {
		if err := db.QueryRow(q.query).Scan(q.dst); err != nil {
			if isNotADB(err) {
				return id, fmt.Errorf("%w: the file is not an SQLite database (left unchanged)", ErrNotLedger)
			}
			return id, fmt.Errorf("read %s: %w", q.query, err)
		}
	}
	return id, nil
}

// sqliteRehearsal reads the rehearsal mark of an SQLite ledger without
// changing the file: "" when its schema predates the mark.
func sqliteRehearsal(db *sql.DB) (string, error) {
	id, err := readIdentity(db)
	if err != nil {
		return "", err
	}
	if id.version < rehearsalSchema {
		return "", nil
	}
	var name string
	if err := db.QueryRow(`SELECT rehearsal FROM ledger_identity`).Scan(&name); err != nil {
		return "", fmt.Errorf("read the rehearsal mark: %w", err)
	}
	return name, nil
}

func identityError(appID, version, tables int) error {
	if appID != applicationID && (appID != 0 || tables > 0) {
		return fmt.Errorf("%w: an SQLite database of another application (left unchanged)", ErrNotLedger)
	}
	if known := schemaVersions(); version > known {
		return fmt.Errorf("%w: file has schema version %d, this binary knows up to %d; upgrade gatehouse (file left unchanged)", ErrTooNew, version, known)
	}
	return nil
}

func isNotADB(err error) bool {
	var se sqlite3.Error
	return errors.As(err, &se) && se.Code == sqlite3.ErrNotADB
}

// enableWAL switches the file to WAL; the mode is persistent, so this is a
// no-op after the first open.
func enableWAL(w *sql.DB) error {
	budget := oswait.NewBudget(time.Minute)
	for {
		var mode string
		err := w.QueryRow("PRAGMA journal_mode = WAL").Scan(&mode)
		if err == nil {
			if mode != "wal" {
				return fmt.Errorf("journal mode is %s, want wal", mode)
			}
			return nil
		}
		if !isBusy(err) || budget.Spent() {
			return fmt.Errorf("enable WAL: %w", err)
		}
		_ = oswait.Pause(context.Background(), 5*time.Millisecond)
	}
}

// schemaVersions is the highest schema version the embedded files reach.
func schemaVersions() int {
	files, _ := migrations()
	if len(files) == 0 {
		return 0
	}
	return files[len(files)-1].version
}

// migration is one embedded schema file; its version is the number its name
// starts with (0005_consent.sql is version 5).
type migration struct {
	version int
	path    string
}

// migrations lists the embedded schema files in version order. Versions
// are the files' numbers, not their count, so a number left free for
// another branch's file does not shift the versions of those after it.
func migrations() ([]migration, error) {
	files, err := fs.Glob(schemaFS, "schema/*.sql")
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	var out []migration
	for _, f := range files {
		base := strings.TrimPrefix(f, "schema/")
		n, err := strconv.Atoi(strings.SplitN(base, "_", 2)[0])
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("schema file %s: name does not start with its version number", f)
		}
		if len(out) > 0 && out[len(out)-1].version == n {
			return nil, fmt.Errorf("schema files %s and %s have the same version %d", out[len(out)-1].path, f, n)
		}
		out = append(out, migration{version: n, path: f})
	}
	return out, nil
}

// migrate applies the embedded schema files in order, each in one
// transaction, recording the version in PRAGMA user_version.
func (l *Ledger) migrate(ctx context.Context) error {
	files, err := migrations()
	if err != nil {
		return err
	}
	known := schemaVersions()
	// The file may predate the tables the guard of every write reads: the
	// migration reads the backup mark itself, before it changes anything.
	return l.write(writingBackup(ctx), func(tx *wtx) error {
		var appID, version int
		if err := tx.QueryRow("PRAGMA application_id").Scan(&appID); err != nil {
			return fmt.Errorf("read application id: %w", err)
		}
		if err := tx.QueryRow("PRAGMA user_version").Scan(&version); err != nil {
			return fmt.Errorf("read schema version: %w", err)
		}
		var tables int
		if err := tx.QueryRow("SELECT count(*) FROM sqlite_master").Scan(&tables); err != nil {
			return err
		}
		if err := identityError(appID, version, tables); err != nil {
			return err
		}
		if !l.opensBackup {
			if err := tx.refuseBackupBeforeMigration(); err != nil {
				return err
			}
		}
		for _, m := range files {
			if m.version <= version {
				continue
			}
			body, err := schemaFS.ReadFile(m.path)
			if err != nil {
				return err
			}
			if _, err := tx.Exec(string(body)); err != nil {
				return fmt.Errorf("migration %s: %w", m.path, err)
			}
		}
		if version < known {
			if _, err := tx.Exec("PRAGMA application_id = " + strconv.Itoa(applicationID)); err != nil {
				return err
			}
			if _, err := tx.Exec("PRAGMA user_version = " + strconv.Itoa(known)); err != nil {
				return err
			}
		}
		return nil
	})
}

// write runs fn in one durable BEGIN IMMEDIATE transaction (see
// writeWith).
func (l *Ledger) write(ctx context.Context, fn func(*wtx) error) error {
	return l.writeWith(ctx, true, fn)
}

// writeRelaxed is write for transactions whose loss on power failure is
// safe: losing them can only make the gate refuse, hold or reconcile again,
// never send twice (a proposal, an approval, a recorded outcome, which
// recovery turns into "unknown" and reconciliation re-establishes). They
// commit with synchronous=NORMAL (on PostgreSQL: synchronous_commit off);
// the next durable commit (every attempt's intent is one) makes them
// durable too, since the WAL is sequential. A relaxed transaction that
// finds it must restrict execution calls requireDurable and is re-run
// durably.
func (l *Ledger) writeRelaxed(ctx context.Context, fn func(*wtx) error) error {
	return l.writeWith(ctx, false, fn)
}

// writeWith runs fn in one BEGIN IMMEDIATE transaction on the single write
// connection, retrying while another process holds the write lock, so that no
// "database is locked" reaches a caller before ctx or a generous deadline ends.
func (l *Ledger) writeWith(ctx context.Context, durable bool, fn func(*wtx) error) error {
	if l.notice != nil {
		// A write that still waits after a second says for whom: a stop
		// that prints nothing for twenty seconds looks like a hung one.
		timer := oswait.AfterFunc(time.Second, func() { l.notice(l.lockHolderNotice()) })
		defer timer.Stop()
	}
	// Another process's lock is released in real time, whatever the
	// ledger's clock says.
	budget := oswait.NewBudget(2 * time.Minute)
	backoff := time.Millisecond
	for {
		err := l.tryWrite(ctx, durable, fn)
		if errors.Is(err, errNeedsDurable) && !durable {
			durable = true
			continue
		}
		if err == nil || !isBusy(err) || budget.Spent() {
			return err
		}
		if werr := oswait.Pause(ctx, backoff); werr != nil {
			return fmt.Errorf("%w (last: %v)", werr, err)
		}
		if backoff < 50*time.Millisecond {
			backoff *= 2
		}
	}
}

// setDurability switches the write connection between synchronous FULL and
// NORMAL, only when it changes. The guess of the connection's mode can only
// be wrong towards FULL (a reopened connection starts FULL from its DSN),
// which is slower, never less safe.
func (l *Ledger) setDurability(ctx context.Context, conn *sql.Conn, durable bool) error {
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	if l.syncKnown && l.syncDurable == durable {
		return nil
	}
	mode := "PRAGMA synchronous = FULL"
	if !durable {
		mode = "PRAGMA synchronous = NORMAL"
	}
	if _, err := conn.ExecContext(ctx, mode); err != nil {
		l.syncKnown = false
		return fmt.Errorf("set durability: %w", err)
	}
	l.syncKnown, l.syncDurable = true, durable
	return nil
}

// errNeedsDurable asks writeWith to run a relaxed transaction again durably.
var errNeedsDurable = errors.New("transaction must be durable")

func (l *Ledger) tryWrite(ctx context.Context, durable bool, fn func(*wtx) error) error {
	w, err := l.writer()
	if err != nil {
		return err
	}
	conn, err := w.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if !l.dialect.isPostgres() {
		l.turnOnce.Do(func() { l.turn = openWriteTurn(l.path) })
		defer l.turn.enter(ctx)()
	}
	l.writes.Add(1)
	t := &wtx{l: l, at: l.clock.Now().UTC(), durable: durable, token: tokenFrom(ctx)}
	if l.dialect.isPostgres() {
		t.pg = beginPgTx(ctx, conn, l.trips)
	} else {
		if err := l.setDurability(ctx, conn, durable); err != nil {
			return err
		}
		// The transaction runs without ctx's cancellation (sqliteTx); ctx
		// still bounds the wait for the write turn and the connection
		// above, and is checked once more here.
		if err := ctx.Err(); err != nil {
			return err
		}
		if t.tx, err = beginSQLite(conn); err != nil {
			return err
		}
		if !l.writesBackup && !mayWriteBackup(ctx) {
			if err := t.refuseBackup(); err != nil {
				t.rollback()
				if isBusy(err) || !isStorageFailure(err) {
					return err
				}
				return fmt.Errorf("%w: %w", ErrNotRecorded, err)
			}
		}
	}
	t.lockForDecision()
	// A panic inside fn (a bug, recovered by a caller) ends the
	// transaction before the connection goes back to the pool: left open,
	// it would keep the write lock from every other writer.
	defer func() {
		if r := recover(); r != nil {
			t.rollback()
			panic(r)
		}
	}()
	err = fn(t)
	var keep *committedRefusal
	if err != nil && !errors.As(err, &keep) {
		t.rollback()
		if isBusy(err) || !isStorageFailure(err) {
			return err
		}
		return fmt.Errorf("%w: %w", ErrNotRecorded, err)
	}
	if ferr := t.flushEvents(); ferr != nil {
		// History lines a batch kept in memory (SQLite): as if their
		// INSERT had failed when the code asked for it.
		t.rollback()
		if isBusy(ferr) {
			return ferr
		}
		return fmt.Errorf("%w: %w", ErrNotRecorded, ferr)
	}
	if cerr := t.commit(); cerr != nil {
		var qe *queuedError
		var lost *casError
		switch {
		case isBusy(cerr), errors.As(cerr, &lost):
			return cerr
		case errors.As(cerr, &qe):
			// A write that waited for COMMIT failed: as if it had failed
			// when the code asked for it.
			return fmt.Errorf("%w: %w", ErrNotRecorded, cerr)
		}
		return fmt.Errorf("%w: commit: %w", ErrNotRecorded, cerr)
	}
	if keep != nil {
		return keep.err
	}
	return nil
}

// commit ends the transaction, keeping what it wrote.
func (t *wtx) commit() error {
	if t.pg != nil {
		return t.pg.commit()
	}
	return t.tx.Commit()
}

// rollback ends the transaction, discarding what it wrote.
func (t *wtx) rollback() {
	if t.pg != nil {
		t.pg.rollback()
		return
	}
	t.tx.Rollback()
}

// isStorageFailure reports whether err is a failure of the storage (a full
// disk, an I/O error, a closed database) rather than the gate's own answer.
func isStorageFailure(err error) bool {
	var se sqlite3.Error
	return errors.As(err, &se) || pgStorageFailure(err) || errors.Is(err, sql.ErrConnDone) || errors.Is(err, sql.ErrTxDone) ||
		strings.Contains(err.Error(), "sql: database is closed")
}

// committedRefusal is a refusal whose history (the event saying what was
// refused and why) must still be committed.
type committedRefusal struct{ err error }

func (c *committedRefusal) Error() string { return c.err.Error() }

// refuse returns err to the caller after committing what the transaction
// recorded so far.
func refuse(err error) error { return &committedRefusal{err: err} }

// queryTx is a read snapshot.
type queryTx = *rtx

// read runs fn on a read snapshot.
func (l *Ledger) read(ctx context.Context, fn func(queryTx) error) error {
	l.reads.Add(1)
	opts := &sql.TxOptions{ReadOnly: true}
	if l.dialect != nil && l.dialect.postgres {
		opts.Isolation = sql.LevelRepeatableRead // one snapshot for the whole read, as SQLite's
	}
	tx, err := l.r.BeginTx(ctx, opts)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	return fn(&rtx{Tx: tx, d: l.dialect})
}

// pool reads from the read pool outside a snapshot.
func (l *Ledger) pool() readPool { return readPool{db: l.r, d: l.dialect, reads: &l.reads} }

func isBusy(err error) bool {
	if pgRetryable(err) {
		return true
	}
	var se sqlite3.Error
	if errors.As(err, &se) {
		return se.Code == sqlite3.ErrBusy || se.Code == sqlite3.ErrLocked
	}
	return false
}

// processHolder names this process for the attempts it starts:
// "host/boot/pidns:pid". Recovery may only judge a holder dead when all but
// the pid match its own, because the same host name can front several boots
// or PID namespaces (containers) where a pid means another process.
func processHolder() string {
	return processSpace() + ":" + strconv.Itoa(os.Getpid())
}

// processSpace is where this process's pid means this process.
var processSpace = sync.OnceValue(func() string {
	host, _ := os.Hostname()
	boot, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	ns, _ := os.Readlink("/proc/self/ns/pid")
	return host + "/" + strings.TrimSpace(string(boot)) + "/" + ns
})

func ns(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func fromNS(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

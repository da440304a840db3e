package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/mattn/go-sqlite3"

	"gatehouse/internal/clock"
)

// readOnlyDriver is go-sqlite3 for connections that only read.
const readOnlyDriver = "sqlite3_gatehouse_ro"

// fcntlPersistWAL is SQLITE_FCNTL_PERSIST_WAL.
const fcntlPersistWAL = 10

func init() {
	sql.Register(readOnlyDriver, &sqlite3.SQLiteDriver{ConnectHook: func(c *sqlite3.SQLiteConn) error {
		// A read-only connection cannot checkpoint (its file descriptor on
		// the ledger is read-only), so closing the last one never deletes the
		// WAL; persisting the WAL says the same once more, in SQLite's terms.
		return c.SetFileControlInt("main", fcntlPersistWAL, 1)
	}})
}

// ErrNoLedger means there is no ledger at the path: no file, an empty file,
// or something that is not a file. Reading never creates one.
var ErrNoLedger = errors.New("no ledger")

// ErrReadOnly means a write was asked of a ledger opened with OpenReadOnly.
var ErrReadOnly = errors.New("opened read-only")

// ErrNeedsMigration means the ledger's schema is older than this binary's
// and the ledger was opened read-only, which never migrates.
var ErrNeedsMigration = errors.New("ledger schema is older than this gatehouse")

// WithWritesOnDemand lets a ledger opened with OpenReadOnly open its write
// connection at the first write: for a viewer that stays read-only until a
// person acts through it.
func WithWritesOnDemand() Option { return func(o *options) { o.onDemand = true } }

// WithOlderSchema lets OpenReadOnly open a ledger whose schema is older
// than this binary's, for a tool that copies the file rather than reading
// its content through the current schema (a backup before a migration).
func WithOlderSchema() Option { return func(o *options) { o.olderSchema = true } }

// OpenReadOnly opens an existing ledger for reading only. It never changes
// the ledger or its WAL: it does not create the file, migrate, recover,
// checkpoint, truncate or delete the WAL. Like every SQLite reader of a WAL
// file it may create the shared-memory index (-shm) and an empty -wal beside
// the ledger when no process has the ledger open: both hold no data of their
// own, are what any writer creates, and are removed by the last writer to
// close.
//
// A ledger on a read-only file system (or in a directory this process may
// not write) is read as immutable when no -wal lies beside it: without a
// -wal no writer can have the file open in WAL mode, and none can start.
//
// Errors name the path once: a missing file or directory, a directory, an
// empty file (ErrNoLedger); a file that is not a ledger or comes from a newer
// gatehouse (ErrNotLedger, ErrTooNew); an older schema (ErrNeedsMigration,
// unless WithOlderSchema).
func OpenReadOnly(path string, opts ...Option) (*Ledger, error) {
	o := options{clock: clock.System{}, lease: 2 * time.Minute}
	for _, opt := range opts {
		opt(&o)
	}
	if IsPostgres(path) {
		return openPostgres(path, o, true)
	}
	if err := statLedger(path); err != nil {
		if o.rehearsalClock {
			return nil, fmt.Errorf("%w: %w", ErrNotRehearsal, err)
		}
		return nil, err
	}
	if err := checkHeader(path); err != nil {
		return nil, err
	}
	r, err := openReadPool(path)
	if err != nil {
		return nil, err
	}
	l := &Ledger{path: path, r: r, clock: o.clock, lease: o.lease, holder: processHolder(), onDemand: o.onDemand}
	if err := l.checkReadable(o.olderSchema); err != nil {
		r.Close()
		return nil, fmt.Errorf("open ledger %s: %w", path, err)
	}
	if o.rehearsalClock {
		mark, err := sqliteRehearsal(r)
		if err == nil {
			err = refuseUnlessRehearsal(path, mark)
		}
		if err != nil {
			r.Close()
			return nil, err
		}
	}
	l.loadIdentity(context.Background(), r)
	l.loadRehearsal(context.Background(), r)
	return l, nil
}

// statLedger says, in one line naming the path, why there is no ledger to
// read at path.
func statLedger(path string) error {
	if err := checkLocation(path); err != nil {
		return err
	}
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		dir := filepath.Dir(path)
		di, derr := os.Stat(dir)
		switch {
		case errors.Is(derr, fs.ErrNotExist):
			return fmt.Errorf("%w at %s: directory %s does not exist", ErrNoLedger, path, dir)
		case derr != nil:
			return fmt.Errorf("cannot read ledger %s: directory %s: %v", path, dir, pathErrCause(derr))
		case !di.IsDir():
			return fmt.Errorf("%w at %s: %s is not a directory", ErrNoLedger, path, dir)
		}
		return fmt.Errorf("%w at %s", ErrNoLedger, path)
	case errors.Is(err, syscall.ENOTDIR):
		dir := filepath.Dir(path)
		if di, derr := os.Stat(dir); derr == nil && !di.IsDir() {
			return fmt.Errorf("%w at %s: %s is not a directory", ErrNoLedger, path, dir)
		}
		return fmt.Errorf("%w at %s: a part of the path is not a directory", ErrNoLedger, path)
	case errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("cannot read ledger %s: permission denied on a directory of its path", path)
	case err != nil:
		return fmt.Errorf("cannot read ledger %s: %v", path, pathErrCause(err))
	case fi.IsDir():
		return fmt.Errorf("%w at %s: it is a directory", ErrNoLedger, path)
	case !fi.Mode().IsRegular():
		return fmt.Errorf("%w at %s: not a regular file (%s)", ErrNoLedger, path, fi.Mode().Type())
	case fi.Size() == 0:
		return fmt.Errorf("%w at %s: the file is empty (left unchanged)", ErrNoLedger, path)
	}
	return nil
}

// pathErrCause drops the operation and path a *fs.PathError repeats, so a
// message names the path once.
func pathErrCause(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// openReadPool opens the read-only pool and makes sure it can read.
func openReadPool(path string) (*sql.DB, error) {
	r, err := sql.Open(readOnlyDriver, readOnlyDSN(path, false))
	if err != nil {
		return nil, fmt.Errorf("open ledger %s: %w", path, err)
	}
	r.SetMaxOpenConns(4)
	err = r.Ping()
	if err == nil {
		_, err = readIdentity(r)
	}
	if err != nil && cannotOpen(err) && immutableIsSafe(path) {
		r.Close()
		if r, err = sql.Open(readOnlyDriver, readOnlyDSN(path, true)); err != nil {
			return nil, fmt.Errorf("open ledger %s: %w", path, err)
		}
		r.SetMaxOpenConns(4)
		_, err = readIdentity(r)
	}
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("open ledger %s: %w", path, err)
	}
	return r, nil
}

func readOnlyDSN(path string, immutable bool) string {
	q := url.Values{}
	q.Set("mode", "ro")
	q.Set("_busy_timeout", "10000")
	q.Set("_query_only", "1")
	q.Set("_txlock", "deferred")
	if immutable {
		q.Set("immutable", "1")
	}
	return "file:" + escapePath(path) + "?" + q.Encode()
}

// cannotOpen is SQLite failing to open the WAL or its index read-only,
// which it does when neither exists and it may not create them.
func cannotOpen(err error) bool {
	var se sqlite3.Error
	return errors.As(err, &se) && (se.Code == sqlite3.ErrCantOpen || se.Code == sqlite3.ErrReadonly)
}

// immutableIsSafe reports whether the ledger can be read as immutable: no
// -wal beside it, and its directory refuses to let one be created, so no
// process can be writing it in WAL mode (every ledger is in WAL mode).
func immutableIsSafe(path string) bool {
	if _, err := os.Lstat(path + "-wal"); !errors.Is(err, fs.ErrNotExist) {
		return false
	}
	err := syscall.Access(filepath.Dir(path), 2 /* W_OK */)
	return errors.Is(err, syscall.EROFS) || errors.Is(err, syscall.EACCES)
}

// checkReadable refuses, without writing, what a read cannot use: a file
// that is not a ledger, a newer ledger, and an older one (reads never
// migrate).
func (l *Ledger) checkReadable(olderSchema bool) error {
	id, err := readIdentity(l.r)
	if err != nil {
		return err
	}
	if err := identityError(id.appID, id.version, id.tables); err != nil {
		return err
	}
	if id.tables == 0 {
		return fmt.Errorf("%w: an empty SQLite database (left unchanged)", ErrNotLedger)
	}
	if known := schemaVersions(); id.version < known && !(olderSchema && id.version > 0) {
		return fmt.Errorf("%w: file has schema version %d, this binary knows %d; reading never migrates (file left unchanged)", ErrNeedsMigration, id.version, known)
	}
	return nil
}

// ReadOnly reports whether the ledger was opened with OpenReadOnly and has
// not opened its write connection since.
func (l *Ledger) ReadOnly() bool {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	return l.w == nil
}

package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/mattn/go-sqlite3"

	"gatehouse/internal/clock"
	"gatehouse/internal/oswait"
)

// ErrInUse means another process has the ledger open.
var ErrInUse = errors.New("ledger is open in another process")

// ErrCheckFailed means a ledger failed Check.
var ErrCheckFailed = errors.New("ledger check failed")

// BackupInfo describes a backup: the file written and what it holds.
type BackupInfo struct {
	Path    string
	Bytes   int64
	Actions int // actions in the copy: the ledger's count at the moment copied
	Events  int
	// Point is the copy's last history line and Generation the ledger's
	// generation then: a restore compares them with the ledger it replaces.
	Point      int64
	Generation int64
	TakenAt    time.Time
}

// Backup writes a consistent copy of the ledger as of one moment to dst,
// while other processes go on writing: SQLite's online backup API copies
// every page inside one read transaction. The copy is written beside dst
// and moved into place only once complete and synced, so dst is never half
// written. An existing dst is refused (fs.ErrExist) unless overwrite is set;
// even then a dst with a non-empty WAL beside it is refused, because that
// WAL would be replayed into the copy. The ledger may be opened read-only.
func (l *Ledger) Backup(ctx context.Context, dst string, overwrite bool) (BackupInfo, error) {
	info := BackupInfo{Path: dst}
	if l.dialect.isPostgres() {
		return info, ErrPostgresBackup
	}
	if err := checkBackupTarget(l.path, dst, overwrite); err != nil {
		return info, err
	}
	tmp, err := os.CreateTemp(filepath.Dir(dst), "."+filepath.Base(dst)+".backup-*")
	if err != nil {
		return info, fmt.Errorf("backup to %s: %w", dst, pathErrCause(err))
	}
	tmp.Close()
	defer removeDatabase(tmp.Name())
	if fi, err := os.Stat(l.path); err == nil {
		os.Chmod(tmp.Name(), fi.Mode().Perm()) // the copy is as private as the ledger
	}

	dest, err := sql.Open("sqlite3", "file:"+escapePath(tmp.Name())+"?_synchronous=FULL")
	if err != nil {
		return info, fmt.Errorf("backup to %s: %w", dst, err)
	}
	defer dest.Close()
	if err := copyDatabase(ctx, dest, l.r); err != nil {
		return info, fmt.Errorf("backup %s to %s: %w", l.path, dst, err)
	}
	if err := dest.QueryRowContext(ctx, `SELECT (SELECT count(*) FROM actions), (SELECT count(*) FROM events)`).
		Scan(&info.Actions, &info.Events); err != nil {
		return info, fmt.Errorf("backup to %s: read the copy: %w", dst, err)
	}
	if hasLineage(ctx, dest) {
		info.TakenAt = l.clock.Now()
		if info.Point, info.Generation, err = markBackup(ctx, dest, info.TakenAt); err != nil {
			return info, fmt.Errorf("backup to %s: %w", dst, err)
		}
	}
	if err := dest.Close(); err != nil {
		return info, fmt.Errorf("backup to %s: %w", dst, err)
	}
	if info.Bytes, err = syncFile(tmp.Name()); err != nil {
		return info, fmt.Errorf("backup to %s: %w", dst, err)
	}
	if err := place(tmp.Name(), dst, overwrite); err != nil {
		return info, fmt.Errorf("backup to %s: %w", dst, err)
	}
	return info, nil
}

func checkBackupTarget(src, dst string, overwrite bool) error {
	fi, err := os.Stat(dst)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("backup to %s: %w", dst, pathErrCause(err))
	case !overwrite:
		return fmt.Errorf("backup to %s: %w", dst, fs.ErrExist)
	case !fi.Mode().IsRegular():
		return fmt.Errorf("backup to %s: not a regular file", dst)
	}
	if si, err := os.Stat(src); err == nil && os.SameFile(si, fi) {
		return fmt.Errorf("backup to %s: that is the ledger itself", dst)
	}
	// An empty WAL (what a reader leaves) holds nothing to replay.
	if wi, err := os.Lstat(dst + "-wal"); err == nil && wi.Size() > 0 {
		return fmt.Errorf("backup to %s: a WAL with content lies beside it, so it is or was a live database; choose another file", dst)
	}
	return nil
}

// copyDatabase copies src into dest with the online backup API, in one step
// so that the copy is one snapshot of src.
func copyDatabase(ctx context.Context, dest, src *sql.DB) error {
	dc, err := dest.Conn(ctx)
	if err != nil {
		return err
	}
	defer dc.Close()
	sc, err := src.Conn(ctx)
	if err != nil {
		return err
	}
	defer sc.Close()
	return dc.Raw(func(d any) error {
		return sc.Raw(func(s any) error {
			b, err := d.(*sqlite3.SQLiteConn).Backup("main", s.(*sqlite3.SQLiteConn), "main")
			if err != nil {
				return err
			}
			for {
				done, err := b.Step(-1)
				if err != nil || done {
					return errors.Join(err, b.Finish())
				}
				// Busy: another connection holds a lock the copy needs.
				if err := oswait.Pause(ctx, 10*time.Millisecond); err != nil {
					return errors.Join(err, b.Finish())
				}
			}
		})
	})
}

// syncFile makes a written file durable and returns its size.
func syncFile(path string) (int64, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return 0, pathErrCause(err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return 0, err
	}
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

// place moves a complete file to dst: a hard link where dst must not
// exist (so a file created meanwhile is never replaced), a rename
// otherwise; then syncs the directory.
func place(tmp, dst string, overwrite bool) error {
	if overwrite {
		if err := os.Rename(tmp, dst); err != nil {
			return pathErrCause(err)
		}
	} else if err := os.Link(tmp, dst); err != nil {
		var le *os.LinkError
		if errors.As(err, &le) {
			err = le.Err
		}
		if errors.Is(err, fs.ErrExist) {
			return fs.ErrExist
		}
		return err
	}
	d, err := os.Open(filepath.Dir(dst))
	if err != nil {
		return pathErrCause(err)
	}
	defer d.Close()
	return d.Sync()
}

// removeDatabase removes a temporary database and whatever SQLite left
// beside it.
func removeDatabase(path string) {
	for _, suffix := range []string{"", "-wal", "-shm", "-journal", "-turn", "-wait"} {
		os.Remove(path + suffix)
	}
}

// RestoreInfo describes a restore.
type RestoreInfo struct {
	From          string
	Actions       int
	SchemaVersion int
	// Backup is the lineage the backup recorded (its point, when taken);
	// Discarded what the replaced ledger held past it.
	Backup    Lineage
	Discarded History
	Mark      RestoreMark
}

// History counts what some history lines record.
type History struct {
	Lines, Actions, Attempts, Sends int
}

// Empty reports whether there is nothing.
func (h History) Empty() bool { return h.Lines == 0 }

func (h History) String() string {
	return fmt.Sprintf("%d history line(s): %d action(s) proposed, %d attempt(s) started, %d send(s) confirmed", h.Lines, h.Actions, h.Attempts, h.Sends)
}

// RestoreOptions say who restores, why, and whether history newer than the
// backup may be discarded.
type RestoreOptions struct {
	Actor, Reason string
	// DiscardNewer lets a restore replace a ledger that holds history past
	// the backup's point (or another lineage's): without it such a restore
	// is refused with ErrNewerHistory and nothing changes.
	DiscardNewer bool
	// Clock dates the restore (default: the system's); the restored
	// ledger's settle times count from it.
	Clock clock.Clock
}

// Restore is RestoreWith without options: it refuses to discard newer
// history.
func Restore(ctx context.Context, path, from string) (RestoreInfo, error) {
	return RestoreWith(ctx, path, from, RestoreOptions{})
}

// RestoreWith replaces the content of the ledger at path with the backup at
// from. The backup must be a ledger (Open's refusals apply, an older schema
// is migrated in a copy, never in from) that passes Check. The ledger is
// refused with ErrInUse while another process has it open; during the
// restore this process holds SQLite's exclusive lock, so no process can
// open it halfway. The pages are written through SQLite into the existing
// file, and the WAL and its index are checkpointed and removed, so no stale
// -wal or -shm is left beside the restored ledger. A missing ledger file is
// created.
//
// A backup is a time machine: the destinations kept what the ledger sent
// after it was taken. So a ledger holding history past the backup's point
// (or another ledger's history) is replaced only with DiscardNewer, and the
// restored ledger starts a new generation with every action that had not
// ended and every audience release unverified (see MarkRestored), whether
// or not the replaced ledger survived to be compared.
func RestoreWith(ctx context.Context, path, from string, opts RestoreOptions) (RestoreInfo, error) {
	info := RestoreInfo{From: from}
	if IsPostgres(path) || IsPostgres(from) {
		return info, ErrPostgresBackup
	}
	if err := statLedger(from); err != nil {
		return info, fmt.Errorf("restore: %w", err)
	}
	if err := checkRestoreTarget(path); err != nil {
		return info, err
	}
	if pid, held := lockHolder(path); held {
		return info, inUse(path, pid)
	}
	tmp, err := prepareRestore(ctx, path, from, opts, &info)
	defer removeDatabase(tmp)
	if err != nil {
		return info, err
	}
	if err := restoreInto(ctx, path, tmp); err != nil {
		return info, err
	}
	return info, nil
}

// RefuseInUse returns ErrInUse (with the holder's pid when known) while
// another process has the SQLite ledger at path open.
func RefuseInUse(path string) error {
	if pid, held := lockHolder(path); held {
		return fmt.Errorf("%s: %w (pid %d); stop the processes using it first", path, ErrInUse, pid)
	}
	return nil
}

func inUse(path string, pid int) error {
	if pid > 0 {
		return fmt.Errorf("restore %s: %w (pid %d); stop the processes using it first", path, ErrInUse, pid)
	}
	return fmt.Errorf("restore %s: %w; stop the processes using it first", path, ErrInUse)
}

// checkRestoreTarget refuses to restore over something that is not an
// SQLite file, or into a directory that does not exist.
func checkRestoreTarget(path string) error {
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if _, err := os.Stat(filepath.Dir(path)); err != nil {
			return fmt.Errorf("restore %s: directory %s: %w", path, filepath.Dir(path), pathErrCause(err))
		}
		return nil
	case err != nil:
		return fmt.Errorf("restore %s: %w", path, pathErrCause(err))
	case !fi.Mode().IsRegular():
		return fmt.Errorf("restore %s: not a regular file", path)
	}
	if err := checkHeader(path); err != nil {
		return fmt.Errorf("restore refused: %w", err)
	}
	return nil
}

// prepareRestore copies from beside path and opens the copy as a ledger:
// refusing what is not one, migrating an older schema, and checking it. It
// returns the copy's name, closed and without a WAL.
func prepareRestore(ctx context.Context, path, from string, opts RestoreOptions, info *RestoreInfo) (string, error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".restore-*")
	if err != nil {
		return "", fmt.Errorf("restore %s: %w", path, pathErrCause(err))
	}
	name := tmp.Name()
	err = copyFile(tmp, from)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return name, fmt.Errorf("restore from %s: %w", from, err)
	}
	if err := checkBackupIdentity(name); err != nil {
		return name, fmt.Errorf("restore from %s: %w", from, err)
	}
	copyOpts := []Option{asRestoreCopy()}
	if opts.Clock != nil {
		copyOpts = append(copyOpts, WithClock(opts.Clock))
	}
	l, err := Open(name, copyOpts...)
	if err != nil {
		return name, fmt.Errorf("restore from %s: prepare a copy: %w", from, err)
	}
	defer l.Close()
	all, err := l.Check(ctx)
	if err != nil {
		return name, fmt.Errorf("restore from %s: %w", from, err)
	}
	// An approval whose approver could not give it now is refused by the
	// send itself; a backup taken after a role was revoked must still
	// restore.
	var vs []Violation
	for _, v := range all {
		if v.Rule != RuleLapsedApproval {
			vs = append(vs, v)
		}
	}
	if len(vs) > 0 {
		return name, fmt.Errorf("restore from %s: %w: %d violations, the first: %s", from, ErrCheckFailed, len(vs), vs[0])
	}
	if err := l.r.QueryRowContext(ctx, `SELECT count(*) FROM actions`).Scan(&info.Actions); err != nil {
		return name, fmt.Errorf("restore from %s: %w", from, err)
	}
	info.SchemaVersion = schemaVersions()
	if info.Backup, err = l.Lineage(ctx); err != nil {
		return name, fmt.Errorf("restore from %s: %w", from, err)
	}
	if info.Backup.BackupPoint == 0 { // not written by ledger backup: its last line is its point
		if err := l.r.QueryRowContext(ctx, `SELECT COALESCE(max(id), 0) FROM events`).Scan(&info.Backup.BackupPoint); err != nil {
			return name, fmt.Errorf("restore from %s: %w", from, err)
		}
	}
	newer, replaced, err := newerHistory(ctx, path, info.Backup)
	if err != nil {
		return name, fmt.Errorf("restore %s: read the ledger it would replace: %w", path, err)
	}
	info.Discarded = newer
	if !newer.Empty() && !opts.DiscardNewer {
		return name, fmt.Errorf("restore %s from %s: %w: %s past the backup's point (line %d%s) would be discarded, and what was sent meanwhile would be sent again; nothing was changed. Restore with --discard-newer only if that history is lost anyway",
			path, from, ErrNewerHistory, newer, info.Backup.BackupPoint, takenAt(info.Backup.BackupAt))
	}
	actor := firstNonEmpty(opts.Actor, "ledger restore")
	reason := firstNonEmpty(opts.Reason, "restored from "+from)
	if err := l.write(ctx, func(t *wtx) error {
		if replaced.Generation >= info.Backup.Generation {
			// Generations never repeat along one ledger's life.
			if _, err := t.Exec(`UPDATE ledger_identity SET generation = ?`, replaced.Generation); err != nil {
				return err
			}
		}
		discarded := "The ledger it replaced held nothing past that point."
		switch {
		case replaced.ID == "":
		case !newer.Empty():
			discarded = "Discarded as asked (--discard-newer): " + newer.String() + " of the ledger it replaced."
		}
		if err := t.event(actor, "", "", EvRestored, reason, "The ledger was restored from %s, a copy of generation %d taken at history line %d%s. %s",
			from, info.Backup.Generation, info.Backup.BackupPoint, takenAt(info.Backup.BackupAt), discarded); err != nil {
			return err
		}
		var err error
		info.Mark, err = t.markRestored(actor, reason)
		return err
	}); err != nil {
		return name, fmt.Errorf("restore from %s: mark the copy restored: %w", from, err)
	}
	return name, l.Close()
}

func takenAt(at time.Time) string {
	if at.IsZero() {
		return ""
	}
	return ", " + clockTime(at)
}

// newerHistory is what the ledger at path holds that the backup does not:
// the lines past the backup's point in the same generation of the same
// ledger; every line of another ledger or generation. A generation is
// told by its number and when it began (restored_at): a copy put back by
// hand and marked restored counts on from the copy's number, so two copies
// of one backup put back in turn carry the same number, and only the time
// tells their histories apart. A missing or empty file holds nothing. It
// also returns the replaced ledger's lineage.
func newerHistory(ctx context.Context, path string, backup Lineage) (History, Lineage, error) {
	var h History
	var lin Lineage
	if fi, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) || err == nil && fi.Size() == 0 {
		return h, lin, nil
	}
	db, err := sql.Open("sqlite3", "file:"+escapePath(path)+"?mode=ro")
	if err != nil {
		return h, lin, err
	}
	defer db.Close()
	var tables int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE name IN ('events', 'ledger_identity')`).Scan(&tables); err != nil {
		return h, lin, err
	}
	after := int64(0)
	switch tables {
	case 0:
		return h, lin, nil
	case 2:
		if hasLineage(ctx, db) {
			var rat int64
			if err := db.QueryRowContext(ctx, `SELECT id, generation, restored_at FROM ledger_identity`).Scan(&lin.ID, &lin.Generation, &rat); err != nil {
				return h, lin, err
			}
			lin.RestoredAt = fromNS(rat)
		} else if err := db.QueryRowContext(ctx, `SELECT id FROM ledger_identity`).Scan(&lin.ID); err != nil {
			return h, lin, err
		}
		if lin.Generation == 0 {
			lin.Generation = 1
		}
		if lin.ID == backup.ID && lin.Generation == backup.Generation && lin.RestoredAt.Equal(backup.RestoredAt) {
			after = backup.BackupPoint
		}
	}
	err = db.QueryRowContext(ctx, `SELECT count(*),
		COALESCE(sum(CASE WHEN kind = 'proposed' THEN 1 ELSE 0 END), 0),
		COALESCE(sum(CASE WHEN kind = 'attempt_started' THEN 1 ELSE 0 END), 0),
		COALESCE(sum(CASE WHEN kind = 'sent' THEN 1 ELSE 0 END), 0) FROM events WHERE id > ?`, after).
		Scan(&h.Lines, &h.Actions, &h.Attempts, &h.Sends)
	return h, lin, err
}

// checkBackupIdentity refuses a copy that is not a ledger or is a newer one.
// The copy is this process's own file, so it is read as immutable.
func checkBackupIdentity(file string) error {
	if err := checkHeader(file); err != nil {
		return fmt.Errorf("%w: the file is not an SQLite database", ErrNotLedger)
	}
	db, err := sql.Open("sqlite3", "file:"+escapePath(file)+"?mode=ro&immutable=1")
	if err != nil {
		return err
	}
	defer db.Close()
	id, err := readIdentity(db)
	if err != nil {
		return err
	}
	if err := identityError(id.appID, id.version, id.tables); err != nil {
		return err
	}
	if id.tables == 0 {
		return fmt.Errorf("%w: an empty SQLite database", ErrNotLedger)
	}
	return nil
}

func copyFile(dst *os.File, from string) error {
	src, err := os.Open(from)
	if err != nil {
		return pathErrCause(err)
	}
	defer src.Close()
	if _, err := io.Copy(dst, src); err != nil {
		return err
	}
	return dst.Sync()
}

// restoreInto writes the pages of src into the ledger at path while holding
// SQLite's exclusive lock on it.
func restoreInto(ctx context.Context, path, src string) error {
	dest, err := sql.Open("sqlite3", "file:"+escapePath(path)+"?_locking_mode=EXCLUSIVE&_busy_timeout=2000&_synchronous=FULL")
	if err != nil {
		return fmt.Errorf("restore %s: %w", path, err)
	}
	defer dest.Close()
	dest.SetMaxOpenConns(1)
	// The first read in exclusive locking mode takes the exclusive lock and
	// keeps it until the connection closes; leaving WAL mode checkpoints and
	// removes a WAL a killed writer left.
	var mode string
	if err := dest.QueryRowContext(ctx, `PRAGMA journal_mode = DELETE`).Scan(&mode); err != nil {
		if isBusy(err) {
			pid, _ := lockHolder(path)
			return inUse(path, pid)
		}
		return fmt.Errorf("restore %s: take the ledger: %w", path, err)
	}
	// No process can use the index while the exclusive lock is held.
	if err := os.Remove(path + "-shm"); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("restore %s: remove the stale index: %w", path, pathErrCause(err))
	}
	source, err := sql.Open("sqlite3", "file:"+escapePath(src)+"?mode=ro")
	if err != nil {
		return fmt.Errorf("restore %s: %w", path, err)
	}
	defer source.Close()
	if err := copyDatabase(ctx, dest, source); err != nil {
		return fmt.Errorf("restore %s: %w", path, err)
	}
	if err := dest.QueryRowContext(ctx, `PRAGMA journal_mode = WAL`).Scan(&mode); err != nil {
		return fmt.Errorf("restore %s: %w", path, err)
	}
	if err := dest.Close(); err != nil {
		return fmt.Errorf("restore %s: %w", path, err)
	}
	return removeSpentJournal(path)
}

// removeSpentJournal removes the rollback journal the restore's exclusive
// connection keeps (with its header zeroed) instead of deleting. A WAL-mode
// ledger never uses one, and a journal whose header is zero is never hot.
func removeSpentJournal(path string) error {
	f, err := os.Open(path + "-journal")
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("restore %s: %w", path, pathErrCause(err))
	}
	head := make([]byte, 8)
	n, _ := io.ReadFull(f, head)
	f.Close()
	for _, b := range head[:n] {
		if b != 0 {
			return fmt.Errorf("restore %s: a rollback journal with content lies beside it; open the ledger once to roll it back", path)
		}
	}
	if err := os.Remove(path + "-journal"); err != nil {
		return fmt.Errorf("restore %s: %w", path, pathErrCause(err))
	}
	return nil
}

// lockHolder reports whether another process holds an SQLite lock on the
// database at path (every open connection in WAL mode holds a shared lock
// on the file's lock bytes and on its index), and that process's id.
func lockHolder(path string) (int, bool) {
	for _, probe := range []struct {
		file       string
		start, len int64
	}{
		{path, 0x40000000, 512},  // SQLite's pending, reserved and shared lock bytes
		{path + "-shm", 120, 16}, // the WAL index's lock slots
	} {
		f, err := os.Open(probe.file)
		if err != nil {
			continue
		}
		lk := syscall.Flock_t{Type: syscall.F_WRLCK, Whence: io.SeekStart, Start: probe.start, Len: probe.len}
		err = syscall.FcntlFlock(f.Fd(), syscall.F_GETLK, &lk)
		f.Close()
		if err == nil && lk.Type != syscall.F_UNLCK {
			return int(lk.Pid), true
		}
	}
	return 0, false
}

// Migrate applies the pending schema migrations to the existing ledger at
// path and returns its schema version before and after. It never creates a
// ledger and never runs the recovery pass.
func Migrate(ctx context.Context, path string) (from, to int, err error) {
	if IsPostgres(path) {
		return migratePostgresAt(ctx, path)
	}
	if err := statLedger(path); err != nil {
		return 0, 0, err
	}
	if err := checkHeader(path); err != nil {
		return 0, 0, err
	}
	w, err := openWriter(path)
	if err != nil {
		return 0, 0, err
	}
	l := &Ledger{path: path, w: w, clock: clock.System{}, holder: processHolder()}
	defer l.Close()
	id, err := readIdentity(w)
	if err != nil {
		return 0, 0, fmt.Errorf("open ledger %s: %w", path, err)
	}
	if err := l.migrate(ctx); err != nil {
		return id.version, id.version, fmt.Errorf("migrate ledger %s: %w", path, err)
	}
	return id.version, schemaVersions(), l.Close()
}

// ErrPostgresBackup: backup and restore copy a ledger file; a PostgreSQL
// ledger is backed up with the server's own tools.
var ErrPostgresBackup = errors.New("a PostgreSQL ledger is backed up and restored with the server's own tools (pg_dump, pg_restore, or its continuous archiving), not by copying a file")

package ledger_test

import (
	"bytes"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gatehouse/ledger"
)

// TestBackupInPlaceRefusesEveryWrite: a copy written by ledger backup and
// copied over the ledger by hand is still marked as a backup, and the
// ledger knows it: opening it for writing is refused (ErrBackup, naming
// restore and mark-restored) and leaves the file as it was; it reads as
// any ledger; opened to be marked restored, every other write is still
// refused, and once marked it is a restored ledger like any other.
// Backups are SQLite's only: a PostgreSQL ledger refuses ledger backup.
func TestBackupInPlaceRefusesEveryWrite(t *testing.T) {
	sqliteOnly(t)
	w := newWorld(t)
	a := w.approved("wf-ack")
	backup := filepath.Join(t.TempDir(), "backup.db")
	_, err := w.l.Backup(w.ctx, backup, false)
	w.must(err)
	_, err = w.execute(a.Key, "wf-ack", consentYes)
	w.must(err)
	w.l.Close()
	copyIntoPlace(t, backup, w.path)
	copied, err := os.ReadFile(w.path)
	w.must(err)

	for name, opts := range map[string][]ledger.Option{
		"Open":            nil,
		"WithoutRecovery": {ledger.WithoutRecovery()},
	} {
		l, err := ledger.Open(w.path, append(opts, ledger.WithClock(w.clock))...)
		if !errors.Is(err, ledger.ErrBackup) {
			if l != nil {
				l.Close()
			}
			t.Fatalf("%s of a backup in place: %v, want ErrBackup", name, err)
		}
		for _, want := range []string{"ledger restore", "ledger mark-restored", "nothing was recorded"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: the refusal does not say %q: %v", name, want, err)
			}
		}
	}
	if _, _, err := ledger.Migrate(w.ctx, w.path); !errors.Is(err, ledger.ErrBackup) {
		t.Errorf("migrate a backup in place: %v, want ErrBackup", err)
	}

	r, err := ledger.OpenReadOnly(w.path)
	w.must(err)
	if vs, err := r.Check(w.ctx); err != nil || len(vs) > 0 {
		t.Errorf("check of a backup in place: %v %v", vs, err)
	}
	if got, err := r.Action(w.ctx, a.Key); err != nil || got.State != ledger.StateApproved {
		t.Errorf("a backup in place reads %s (%v), want approved as the backup had it", got.State, err)
	}
	r.Close()
	if now, _ := os.ReadFile(w.path); !bytes.Equal(now, copied) {
		t.Fatal("a refused open changed the backup in place")
	}

	l, err := ledger.Open(w.path, ledger.ToMarkRestored(), ledger.WithClock(w.clock))
	w.must(err)
	defer l.Close()
	if _, err := l.Claim(w.ctx, ledger.TaskRef{ID: "task-8"}, "ops"); !errors.Is(err, ledger.ErrBackup) {
		t.Fatalf("a claim on a backup opened to be marked restored: %v, want ErrBackup", err)
	}
	m, err := l.MarkRestored(w.ctx, "ops", "Monday's copy put back by hand")
	w.must(err)
	if m.UnverifiedActions != 1 {
		t.Fatalf("mark %+v, want 1 unverified action", m)
	}
	if lin, err := l.Lineage(w.ctx); err != nil || lin.BackupPoint != 0 || !lin.BackupAt.IsZero() {
		t.Fatalf("lineage after the mark %+v (%v): still a backup", lin, err)
	}
	res, err := l.Execute(w.ctx, ledger.ExecuteRequest{Key: a.Key, Executor: "wf-ack", Reread: consentYes}, w.dest)
	if !errors.Is(err, ledger.ErrHeld) || res.Action.HoldCause != ledger.HoldFoundAfterRestore {
		t.Fatalf("send after the mark: %v, %s/%s; want held found_after_restore", err, res.Action.State, res.Action.HoldCause)
	}
	if n := w.dest.Arrivals(a.Key); n != 1 {
		t.Fatalf("%d arrivals, want 1", n)
	}
}

// TestBackupMarkIsReadByEveryWrite: the mark is read in the transaction
// that writes, not once at open, so a file that became a backup under a
// handle opened before (a backup copied over a ledger a long-running
// process holds) is not written either. The mark is set here through a
// connection of its own, as the copy would bring it.
func TestBackupMarkIsReadByEveryWrite(t *testing.T) {
	sqliteOnly(t)
	w := newWorld(t)
	a := w.approved("wf-ack")
	db, err := sql.Open("sqlite3", "file:"+w.path+"?_busy_timeout=5000")
	w.must(err)
	defer db.Close()
	_, err = db.Exec(`UPDATE ledger_identity SET backup_point = 3, backup_at = 1`)
	w.must(err)
	res, err := w.execute(a.Key, "wf-ack", consentYes)
	if !errors.Is(err, ledger.ErrBackup) || w.dest.Calls() != 0 {
		t.Fatalf("send on a handle whose file became a backup: %v (%s), %d calls; want ErrBackup, nothing sent",
			err, res.Action.State, w.dest.Calls())
	}
	if got, _ := w.l.Action(w.ctx, a.Key); got.State != ledger.StateApproved {
		t.Fatalf("the refused send left %s", got.State)
	}
}

// TestRestoreTakesABackupInPlace: the backup copied into place is put
// back by ledger restore as any ledger is replaced: the same backup has
// nothing newer, and the result is a live, restored ledger.
func TestRestoreTakesABackupInPlace(t *testing.T) {
	sqliteOnly(t)
	w := newWorld(t)
	w.approved("wf-ack")
	backup := filepath.Join(t.TempDir(), "backup.db")
	_, err := w.l.Backup(w.ctx, backup, false)
	w.must(err)
	w.l.Close()
	copyIntoPlace(t, backup, w.path)
	info, err := ledger.RestoreWith(w.ctx, w.path, backup, ledger.RestoreOptions{Actor: "ops", Reason: "put back properly", Clock: w.clock})
	w.must(err)
	if !info.Discarded.Empty() || info.Mark.UnverifiedActions != 1 {
		t.Fatalf("restore over the backup in place: %+v", info)
	}
	w.open()
	if _, err := w.l.Claim(w.ctx, ledger.TaskRef{ID: "task-8"}, "ops"); err != nil {
		t.Fatalf("a write after the restore: %v", err)
	}
}

// copyIntoPlace is an operator's `rm L-wal L-shm; cp FROM L`.
func copyIntoPlace(t *testing.T, from, path string) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	for _, suffix := range []string{"-wal", "-shm"} {
		os.Remove(path + suffix)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

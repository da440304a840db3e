package ledger_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"gatehouse/destination"
	"gatehouse/ledger"
)

// files holds the bytes of every file in a directory, by name.
type files map[string][]byte

func readFiles(t *testing.T, dir string) files {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := files{}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = b
	}
	return out
}

func writeFiles(t *testing.T, dir string, fs files) {
	t.Helper()
	for name, b := range fs {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// unchangedByRead fails unless the ledger and its WAL are byte-for-byte as
// before. A read may create the -shm index and an empty -wal where none was.
func unchangedByRead(t *testing.T, before, after files, name string) {
	t.Helper()
	for _, f := range []string{name, name + "-wal"} {
		b, had := before[f]
		a, has := after[f]
		switch {
		case had && !has:
			t.Errorf("%s was deleted", f)
		case had && !bytes.Equal(a, b):
			t.Errorf("%s changed: %d bytes before, %d after", f, len(b), len(a))
		case !had && has && len(a) > 0:
			t.Errorf("%s was created with %d bytes", f, len(a))
		}
	}
	for f := range after {
		if _, had := before[f]; !had && f != name+"-wal" && f != name+"-shm" {
			t.Errorf("%s was created", f)
		}
	}
}

// readEverything runs every read the read-only verbs use.
func readEverything(ctx context.Context, l *ledger.Ledger, key string) error {
	var errs []error
	add := func(err error) { errs = append(errs, err) }
	_, _, err := l.ListActions(ctx, ledger.ActionFilter{Limit: 20})
	add(err)
	_, _, err = l.ListTasks(ctx, ledger.TaskFilter{Limit: 20})
	add(err)
	if key != "" {
		_, err = l.Detail(ctx, key)
		add(err)
	}
	_, err = l.History(ctx, ledger.HistoryFilter{Limit: 50, Newest: true})
	add(err)
	_, err = l.Metrics(ctx)
	add(err)
	_, err = l.Notifications(ctx, "wf-ack")
	add(err)
	_, err = l.StopState(ctx)
	add(err)
	_, err = l.RecoveryDue(ctx)
	add(err)
	_, err = l.Check(ctx)
	add(err)
	return errors.Join(errs...)
}

func TestOpenReadOnlyLeavesLedgerAndWALUnchanged(t *testing.T) {
	sqliteOnly(t)
	// live: a writer has the ledger open, its last commits only in the WAL.
	live := func(t *testing.T) (string, string) {
		w := newWorld(t)
		a := w.approved("wf-ack")
		_, err := w.execute(a.Key, "wf-ack", consentYes)
		w.must(err)
		return w.path, a.Key
	}
	// crashed copies what a killed writer leaves: ledger, WAL and index.
	crashed := func(t *testing.T, older bool) (string, string) {
		w := newWorld(t)
		a := w.approved("wf-ack")
		w.must(w.l.Close())
		backup, err := os.ReadFile(w.path)
		w.must(err)
		w.open()
		_, err = w.execute(a.Key, "wf-ack", consentYes)
		w.must(err)
		dir := t.TempDir()
		fs := readFiles(t, filepath.Dir(w.path))
		if older {
			// An older backup copied by hand over the ledger, the killed
			// writer's WAL still beside it.
			fs["ledger.db"] = backup
		}
		writeFiles(t, dir, fs)
		return filepath.Join(dir, "ledger.db"), a.Key
	}
	tests := []struct {
		Name  string
		Setup func(t *testing.T) (path, key string)
		// MayFail: the files disagree, so the read may fail; it still must
		// not change them.
		MayFail bool
	}{
		{"ClosedCleanly", func(t *testing.T) (string, string) {
			w := newWorld(t)
			a := w.approved("wf-ack")
			w.must(w.l.Close())
			return w.path, a.Key
		}, false},
		{"WriterLive", live, false},
		{"KilledWriterLeftWAL", func(t *testing.T) (string, string) { return crashed(t, false) }, false},
		{"KilledWriterWithoutIndex", func(t *testing.T) (string, string) {
			path, key := crashed(t, false)
			if err := os.Remove(path + "-shm"); err != nil {
				t.Fatal(err)
			}
			return path, key
		}, false},
		{"OlderBackupRestoredOverStaleWAL", func(t *testing.T) (string, string) { return crashed(t, true) }, true},
	}
	for _, tc := range tests {
		t.Run(tc.Name, func(t *testing.T) {
			path, key := tc.Setup(t)
			dir, name := filepath.Dir(path), filepath.Base(path)
			before := readFiles(t, dir)
			for range 2 { // the second open finds what the first left
				l, err := ledger.OpenReadOnly(path)
				if err == nil {
					err = readEverything(context.Background(), l, key)
					if cerr := l.Close(); cerr != nil {
						t.Fatal(cerr)
					}
				}
				if err != nil && !tc.MayFail {
					t.Fatal(err)
				}
				unchangedByRead(t, before, readFiles(t, dir), name)
			}
		})
	}
}

func TestOpenReadOnlyRefusesWithOneLine(t *testing.T) {
	sqliteOnly(t)
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.db")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	garbage := filepath.Join(dir, "garbage.db")
	if err := os.WriteFile(garbage, []byte("this is not a database, just some text that is long enough"), 0o644); err != nil {
		t.Fatal(err)
	}
	afile := filepath.Join(dir, "afile")
	if err := os.WriteFile(afile, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	older := filepath.Join(dir, "older.db")
	l, err := ledger.Open(older)
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	db, err := sql.Open("sqlite3", older)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`PRAGMA user_version = 2`); err != nil {
		t.Fatal(err)
	}
	db.Close()

	tests := []struct {
		Name string
		Path string
		Err  error
		Text string
	}{
		{"Missing", filepath.Join(dir, "missing.db"), ledger.ErrNoLedger, "no ledger at "},
		{"MissingDirectory", filepath.Join(dir, "nodir", "ledger.db"), ledger.ErrNoLedger, "does not exist"},
		{"ParentIsAFile", filepath.Join(afile, "ledger.db"), ledger.ErrNoLedger, "is not a directory"},
		{"Directory", dir, ledger.ErrNoLedger, "it is a directory"},
		{"EmptyFile", empty, ledger.ErrNoLedger, "the file is empty"},
		{"NotSQLite", garbage, ledger.ErrNotLedger, "not an SQLite database"},
		{"OlderSchema", older, ledger.ErrNeedsMigration, "schema version 2"},
	}
	for _, tc := range tests {
		t.Run(tc.Name, func(t *testing.T) {
			before := readFiles(t, dir)
			_, err := ledger.OpenReadOnly(tc.Path)
			if !errors.Is(err, tc.Err) || !strings.Contains(err.Error(), tc.Text) {
				t.Fatalf("err = %v, want %v with %q", err, tc.Err, tc.Text)
			}
			msg := err.Error()
			if strings.Count(msg, tc.Path) != 1 || strings.Contains(msg, "\n") {
				t.Errorf("want one line naming %s once: %s", tc.Path, msg)
			}
			if strings.Count(msg, "open ledger") > 1 || strings.Contains(msg, "ledger: open") {
				t.Errorf("doubled prefix: %s", msg)
			}
			after := readFiles(t, dir)
			for name, b := range before {
				if !bytes.Equal(after[name], b) {
					t.Errorf("%s changed", name)
				}
			}
			for name, b := range after {
				// A file SQLite opened may get its index and an empty WAL.
				harmless := strings.HasSuffix(name, "-shm") || strings.HasSuffix(name, "-wal") && len(b) == 0
				if _, ok := before[name]; !ok && !(harmless && tc.Err == ledger.ErrNeedsMigration) {
					t.Errorf("%s was created", name)
				}
			}
		})
	}
}

func TestOpenReadOnlyRefusesWritesUntilAskedToWrite(t *testing.T) {
	sqliteOnly(t)
	w := newWorld(t)
	w.approved("wf-ack")
	w.must(w.l.Close())

	l, err := ledger.OpenReadOnly(w.path)
	w.must(err)
	defer l.Close()
	if _, err := l.Claim(w.ctx, ledger.TaskRef{ID: "task-8"}, "ops"); !errors.Is(err, ledger.ErrReadOnly) {
		t.Fatalf("claim on a read-only ledger: %v", err)
	}

	od, err := ledger.OpenReadOnly(w.path, ledger.WithWritesOnDemand())
	w.must(err)
	defer od.Close()
	if !od.ReadOnly() {
		t.Fatal("opened for writing before the first write")
	}
	if _, err := od.Claim(w.ctx, ledger.TaskRef{ID: "task-8"}, "ops"); err != nil {
		t.Fatalf("claim with writes on demand: %v", err)
	}
	if od.ReadOnly() {
		t.Fatal("still read-only after a write")
	}
}

func TestRecoveryDueOnlyReads(t *testing.T) {
	sqliteOnly(t)
	w := newWorld(t)
	a := w.approved("wf-ack")
	_, _, err := w.l.BeginAttempt(w.ctx, ledger.ExecuteRequest{Key: a.Key, Executor: "wf-ack", Reread: consentYes,
		Endpoint: destination.EndpointOf(w.dest)})
	w.must(err)
	w.must(w.l.Close())
	before := readFiles(t, filepath.Dir(w.path))

	w.clock.Advance(3 * time.Minute) // past the lease
	l, err := ledger.OpenReadOnly(w.path, ledger.WithClock(w.clock))
	w.must(err)
	due, err := l.RecoveryDue(w.ctx)
	w.must(err)
	if len(due) != 1 || due[0].ActionKey != a.Key {
		t.Fatalf("recovery due = %+v, want the one attempt of %s", due, a.Key)
	}
	got, err := l.Action(w.ctx, a.Key)
	w.must(err)
	w.must(l.Close())
	if got.State != ledger.StateExecuting {
		t.Fatalf("a read changed the state to %s", got.State)
	}
	unchangedByRead(t, before, readFiles(t, filepath.Dir(w.path)), "ledger.db")
}

// readOnlyMount makes dir a read-only bind mount of itself, as a read-only
// file system would be; it skips the test where mounting is not allowed.
func readOnlyMount(t *testing.T, dir string) {
	t.Helper()
	if err := syscall.Mount(dir, dir, "", syscall.MS_BIND, ""); err != nil {
		t.Skipf("cannot bind-mount (needs CAP_SYS_ADMIN): %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	if err := syscall.Mount("", dir, "", syscall.MS_BIND|syscall.MS_REMOUNT|syscall.MS_RDONLY, ""); err != nil {
		t.Skipf("cannot remount read-only: %v", err)
	}
}

func TestOpenReadOnlyOnReadOnlyFileSystem(t *testing.T) {
	sqliteOnly(t)
	tests := []struct {
		Name    string
		WithWAL bool // a killed writer's WAL and index lie beside the ledger
	}{
		{"ClosedCleanly", false},
		{"KilledWriterLeftWAL", true},
	}
	for _, tc := range tests {
		t.Run(tc.Name, func(t *testing.T) {
			w := newWorld(t)
			a := w.approved("wf-ack")
			_, err := w.execute(a.Key, "wf-ack", consentYes)
			w.must(err)
			if !tc.WithWAL {
				w.must(w.l.Close())
			}
			dir := t.TempDir()
			writeFiles(t, dir, readFiles(t, filepath.Dir(w.path)))
			readOnlyMount(t, dir)
			before := readFiles(t, dir)

			l, err := ledger.OpenReadOnly(filepath.Join(dir, "ledger.db"))
			w.must(err)
			got, err := l.Action(w.ctx, a.Key)
			w.must(err)
			w.must(readEverything(w.ctx, l, a.Key))
			w.must(l.Close())
			if got.State != ledger.StateSent {
				t.Fatalf("read %s, want sent", got.State)
			}
			if after := readFiles(t, dir); len(after) != len(before) {
				t.Fatalf("files before %d, after %d", len(before), len(after))
			}
			unchangedByRead(t, before, readFiles(t, dir), "ledger.db")
		})
	}
}

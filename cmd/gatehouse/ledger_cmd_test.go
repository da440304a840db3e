package main

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"gatehouse/destination"
	filedest "gatehouse/destination/file"
	"gatehouse/ledger"
)

// holdLedger opens the ledger, writes to it (so its WAL holds commits),
// says so on stdout and keeps it open until stdin closes: another process
// using the ledger.
func holdLedger(path string) int {
	l, err := ledger.Open(path, ledger.WithoutRecovery())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer l.Close()
	if m, err := l.Mode(context.Background()); err == nil && m.Registered {
		// A rehearsal's ledger: its admin registers the holder.
		if _, err := l.AddActor(context.Background(), "rehearsal", ledger.Actor{ID: "holder", Kind: ledger.KindWorkflow}); err != nil && !errors.Is(err, ledger.ErrInvalid) {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	if _, err := l.Claim(context.Background(), ledger.TaskRef{ID: "task-held"}, "holder"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("holding")
	io.Copy(io.Discard, os.Stdin)
	return 0
}

// startHolder starts a process holding the ledger open and returns a
// function that makes it close the ledger and exit.
func startHolder(t *testing.T, path string) func() {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "GATEHOUSE_TEST_HOLD="+path)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || line != "holding\n" {
		t.Fatalf("holder: %q %v %s", line, err, stderr.String())
	}
	var once sync.Once
	stop := func() {
		once.Do(func() {
			stdin.Close()
			cmd.Wait()
		})
	}
	t.Cleanup(stop)
	return stop
}

// ledgerCmd runs `gatehouse ledger <args>` in-process.
func ledgerCmd(args ...string) result {
	var out, errOut bytes.Buffer
	code := run(append([]string{"ledger"}, args...), &out, &errOut)
	return result{code: code, stdout: out.String(), stderr: errOut.String()}
}

// dirFiles holds the bytes of every file in a directory, by name.
func dirFiles(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, e := range ents {
		if e.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = b
	}
	return out
}

// sameLedgerAndWAL fails unless the ledger and its WAL kept their bytes; a
// read may only add the -shm index and an empty -wal.
func sameLedgerAndWAL(t *testing.T, before, after map[string][]byte, name, verb string) {
	t.Helper()
	for _, f := range []string{name, name + "-wal"} {
		b, had := before[f]
		a, has := after[f]
		switch {
		case had && !has:
			t.Errorf("%s deleted %s", verb, f)
		case had && !bytes.Equal(a, b):
			t.Errorf("%s changed %s: %d bytes before, %d after", verb, f, len(b), len(a))
		case !had && has && len(a) > 0:
			t.Errorf("%s created %s with %d bytes", verb, f, len(a))
		}
	}
	for f := range after {
		if _, had := before[f]; !had && f != name+"-wal" && f != name+"-shm" {
			t.Errorf("%s created %s", verb, f)
		}
	}
}

// readVerbs are every verb that only reads, as command lines without
// --ledger; key and release name what the ledger holds.
func readVerbs(key, release string) [][]string {
	return [][]string{
		{"gate", "list"}, {"gate", "list", "--json"},
		{"gate", "show", "--key", key}, {"gate", "show", "--key", key, "--json"},
		{"gate", "history"}, {"gate", "history", "--key", key},
		{"gate", "metrics"}, {"gate", "metrics", "--json"},
		{"gate", "notifications", "--as", "alice"},
		{"audience", "show", "--release", release}, {"audience", "show", "--release", release, "--rows", "eligible", "--json"},
		{"ledger", "check"},
		{"review", "--format", "md"}, {"review", "--format", "json"},
	}
}

// readLedger is a ledger with an action sent and a release reconciled.
func readLedger(t *testing.T) (e *gateEnv, key, release string) {
	e = newGateEnv(t)
	key = e.approved("enq-read", "alice", "crm.consent=yes")
	wantExit(t, e.send(key, "alice", "crm.consent=yes"), exitOK)
	dir := filepath.Dir(e.ledger)
	csv, customers := filepath.Join(dir, "a.csv"), filepath.Join(dir, "c.csv")
	os.WriteFile(csv, []byte(testAudience), 0o644)
	os.WriteFile(customers, []byte(testCustomers), 0o644)
	var out, errOut bytes.Buffer
	if code := run([]string{"audience", "reconcile", "--ledger", e.ledger, "--release", "spring", "--file", csv,
		"--customers", customers, "--as", "ops", "--subject", "Opening hours"}, &out, &errOut); code != 0 {
		t.Fatalf("audience reconcile: %d %s", code, errOut.String())
	}
	return e, key, "spring"
}

// crashedCopy copies what a killed writer leaves (ledger, WAL and index)
// into a new directory, optionally with an older backup copied by hand over
// the ledger.
func crashedCopy(t *testing.T, older bool) (path, key, release string) {
	t.Helper()
	e, key, release := readLedger(t)
	backup, err := os.ReadFile(e.ledger)
	if err != nil {
		t.Fatal(err)
	}
	l, err := ledger.Open(e.ledger)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := l.Claim(context.Background(), ledger.TaskRef{ID: "task-late"}, "bob"); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, b := range dirFiles(t, filepath.Dir(e.ledger)) {
		if older && name == "ledger.db" {
			b = backup
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "ledger.db"), key, release
}

func TestReadVerbsLeaveLedgerAndWALUnchanged(t *testing.T) {
	crashed := crashedCopy
	tests := []struct {
		Name  string
		Setup func(t *testing.T) (path, key, release string)
		// MayFail: ledger and WAL disagree, so a read may fail; it still
		// must leave both as they are.
		MayFail bool
	}{
		{"ClosedCleanly", func(t *testing.T) (string, string, string) {
			e, key, release := readLedger(t)
			return e.ledger, key, release
		}, false},
		{"WriterLive", func(t *testing.T) (string, string, string) {
			e, key, release := readLedger(t)
			l, err := ledger.Open(e.ledger)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { l.Close() })
			if _, err := l.Claim(context.Background(), ledger.TaskRef{ID: "task-live"}, "bob"); err != nil {
				t.Fatal(err)
			}
			return e.ledger, key, release
		}, false},
		{"WriterInAnotherProcess", func(t *testing.T) (string, string, string) {
			e, key, release := readLedger(t)
			startHolder(t, e.ledger)
			return e.ledger, key, release
		}, false},
		{"KilledWriterLeftWAL", func(t *testing.T) (string, string, string) { return crashed(t, false) }, false},
		{"OlderBackupOverStaleWAL", func(t *testing.T) (string, string, string) { return crashed(t, true) }, true},
	}
	for _, tc := range tests {
		t.Run(tc.Name, func(t *testing.T) {
			path, key, release := tc.Setup(t)
			dir, name := filepath.Dir(path), filepath.Base(path)
			if _, ok := dirFiles(t, dir)[name+"-wal"]; !ok && tc.Name != "ClosedCleanly" {
				t.Fatal("the setup left no WAL to protect")
			}
			before := dirFiles(t, dir)
			for _, args := range readVerbs(key, release) {
				var out, errOut bytes.Buffer
				code := run(append(args, "--ledger", path), &out, &errOut)
				verb := strings.Join(args, " ")
				if code != 0 && !tc.MayFail {
					t.Errorf("%s: exit %d: %s", verb, code, errOut.String())
				}
				sameLedgerAndWAL(t, before, dirFiles(t, dir), name, verb)
			}
			// What inspect opens, opened and closed without an operation.
			l, err := openInspected(path)
			if err == nil {
				_, err = l.Metrics(context.Background())
				l.Close()
			}
			if err != nil && !tc.MayFail {
				t.Errorf("inspect's open: %v", err)
			}
			sameLedgerAndWAL(t, before, dirFiles(t, dir), name, "inspect")
		})
	}
}

func TestInspectOpensForWritingOnlyWhenTheOperatorActs(t *testing.T) {
	e, key, _ := readLedger(t)
	l, err := openInspected(e.ledger)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if !l.ReadOnly() {
		t.Fatal("inspect opened the ledger for writing before any operation")
	}
	if _, err := l.Hold(context.Background(), key, "operator", "checking"); err == nil {
		t.Fatal("holding a sent action succeeded")
	}
	if _, err := l.Claim(context.Background(), ledger.TaskRef{ID: "task-ops"}, "operator"); err != nil {
		t.Fatalf("an operation through the inspector: %v", err)
	}
	if l.ReadOnly() {
		t.Fatal("still read-only after an operation")
	}
}

func TestReadVerbErrorsAreOneLine(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.db")
	os.WriteFile(empty, nil, 0o644)
	garbage := filepath.Join(dir, "garbage.db")
	os.WriteFile(garbage, []byte("this is not a database, just some text that is long enough"), 0o644)
	tests := []struct {
		Name, Path, Want string
	}{
		{"Missing", filepath.Join(dir, "missing.db"), "gatehouse: no ledger at " + filepath.Join(dir, "missing.db") + "\n"},
		{"MissingDirectory", filepath.Join(dir, "nodir", "l.db"), "gatehouse: no ledger at " + filepath.Join(dir, "nodir", "l.db") + ": directory " + filepath.Join(dir, "nodir") + " does not exist\n"},
		{"Directory", dir, "gatehouse: no ledger at " + dir + ": it is a directory\n"},
		{"EmptyFile", empty, "gatehouse: no ledger at " + empty + ": the file is empty (left unchanged)\n"},
		{"NotSQLite", garbage, "gatehouse: open ledger " + garbage + ": not a gatehouse ledger: the file is not an SQLite database (left unchanged)\n"},
	}
	for _, tc := range tests {
		t.Run(tc.Name, func(t *testing.T) {
			for _, args := range [][]string{{"gate", "list"}, {"gate", "show", "--key", "gh1:c:e:t:x:r0"}, {"gate", "history"},
				{"gate", "metrics"}, {"gate", "notifications", "--as", "alice"}, {"audience", "show", "--release", "r"},
				{"ledger", "check"}, {"ledger", "backup", "--to", filepath.Join(dir, "b.db")}} {
				before := dirFiles(t, dir)
				var out, errOut bytes.Buffer
				code := run(append(args, "--ledger", tc.Path), &out, &errOut)
				if code != exitOther || errOut.String() != tc.Want {
					t.Errorf("%s: exit %d, stderr %q, want 1 and %q", strings.Join(args, " "), code, errOut.String(), tc.Want)
				}
				after := dirFiles(t, dir)
				if len(after) != len(before) {
					t.Errorf("%s created a file: %d files before, %d after", strings.Join(args, " "), len(before), len(after))
				}
				for f, b := range before {
					if !bytes.Equal(after[f], b) {
						t.Errorf("%s changed %s", strings.Join(args, " "), f)
					}
				}
			}
			var out, errOut bytes.Buffer
			if code := run([]string{"inspect", "--ledger", tc.Path}, &out, &errOut); code != exitOther || errOut.String() != tc.Want {
				t.Errorf("inspect: exit %d, stderr %q", code, errOut.String())
			}
		})
	}
}

// asNobody runs the gatehouse binary as the unprivileged user nobody, for
// permission errors root never meets.
func asNobody(t *testing.T, args ...string) result {
	t.Helper()
	bin := gatehouseBinary(t)
	os.Chmod(filepath.Dir(bin), 0o755)
	cmd := exec.Command(bin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return result{code: 0, stdout: out.String(), stderr: errOut.String()}
	case errorsAs(err, &ee):
		return result{code: ee.ExitCode(), stdout: out.String(), stderr: errOut.String()}
	}
	t.Skipf("cannot run as nobody: %v", err)
	return result{}
}

func errorsAs(err error, ee **exec.ExitError) bool {
	e, ok := err.(*exec.ExitError)
	*ee = e
	return ok
}

func TestReadVerbsWithoutPermission(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to run as another user")
	}
	if testing.Short() {
		t.Skip("builds the binary")
	}
	e, _, _ := readLedger(t)
	// The chain of temporary directories must let nobody through.
	for d := filepath.Dir(e.ledger); d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
		os.Chmod(d, 0o755)
	}
	locked := filepath.Join(filepath.Dir(e.ledger), "locked")
	if err := os.Mkdir(locked, 0o700); err != nil {
		t.Fatal(err)
	}
	behind := filepath.Join(locked, "ledger.db")
	data, _ := os.ReadFile(e.ledger)
	os.WriteFile(behind, data, 0o644)
	private := filepath.Join(filepath.Dir(e.ledger), "private.db")
	os.WriteFile(private, data, 0o600)
	tests := []struct{ Name, Path, Want string }{
		{"UnreadableDirectory", behind, "gatehouse: cannot read ledger " + behind + ": permission denied on a directory of its path\n"},
		{"UnreadableFile", private, "gatehouse: cannot read ledger " + private + ": permission denied\n"},
	}
	for _, tc := range tests {
		t.Run(tc.Name, func(t *testing.T) {
			r := asNobody(t, "gate", "list", "--ledger", tc.Path)
			if r.code != exitOther || r.stderr != tc.Want {
				t.Fatalf("exit %d, stderr %q, want 1 and %q", r.code, r.stderr, tc.Want)
			}
		})
	}
}

func TestReadVerbsWorkOnReadOnlyFileSystem(t *testing.T) {
	e, key, release := readLedger(t)
	dir := t.TempDir()
	for name, b := range dirFiles(t, filepath.Dir(e.ledger)) {
		os.WriteFile(filepath.Join(dir, name), b, 0o644)
	}
	if err := syscall.Mount(dir, dir, "", syscall.MS_BIND, ""); err != nil {
		t.Skipf("cannot bind-mount: %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(dir, 0) })
	if err := syscall.Mount("", dir, "", syscall.MS_BIND|syscall.MS_REMOUNT|syscall.MS_RDONLY, ""); err != nil {
		t.Skipf("cannot remount read-only: %v", err)
	}
	path := filepath.Join(dir, "ledger.db")
	before := dirFiles(t, dir)
	for _, args := range readVerbs(key, release) {
		var out, errOut bytes.Buffer
		if code := run(append(args, "--ledger", path), &out, &errOut); code != 0 {
			t.Errorf("%s on a read-only file system: exit %d: %s", strings.Join(args, " "), code, errOut.String())
		}
	}
	sameLedgerAndWAL(t, before, dirFiles(t, dir), "ledger.db", "the reads")
}

// rawExec changes a ledger file behind the gate's back.
func rawExec(t *testing.T, path string, stmts ...string) {
	t.Helper()
	db, err := sql.Open("sqlite3", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, s := range stmts {
		if _, err := db.Exec(s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

func TestReadsSayWhenRecoveryIsDue(t *testing.T) {
	e := newGateEnv(t)
	key := e.approved("enq-stuck", "alice")
	l, err := ledger.Open(e.ledger)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := l.BeginAttempt(context.Background(), ledger.ExecuteRequest{Key: key, Executor: "alice",
		Endpoint: destination.EndpointOf(&filedest.Destination{Dir: e.outbox})}); err != nil {
		t.Fatal(err)
	}
	l.Close()
	rawExec(t, e.ledger, `UPDATE attempts SET lease_until = 1`) // its lease ran out long ago

	r := e.gate("list")
	wantExit(t, r, exitOK, "recovery due", key, "gatehouse ledger recover --ledger "+e.ledger)
	if strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("want one line on stderr: %q", r.stderr)
	}
	r = e.gate("metrics", "--json")
	var v struct {
		RecoveryDue struct {
			Attempts int      `json:"attempts"`
			Actions  []string `json:"actions"`
			Run      string   `json:"run"`
		} `json:"recovery_due"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil || v.RecoveryDue.Attempts != 1 || v.RecoveryDue.Actions[0] != key ||
		!strings.HasPrefix(v.RecoveryDue.Run, "gatehouse ledger recover") {
		t.Fatalf("metrics --json: %v %s", err, r.stdout)
	}
	if !strings.Contains(e.gate("show", "--key", key).stdout, "executing") {
		t.Fatal("a read recovered the attempt")
	}

	r = ledgerCmd("recover", "--ledger", e.ledger)
	wantExit(t, r, exitOK)
	if !strings.Contains(r.stdout, "marked 1 attempt unknown: "+key) {
		t.Fatalf("recover: %s", r.stdout)
	}
	r = e.gate("show", "--key", key)
	if !strings.Contains(r.stdout, "unknown") || r.stderr != "" {
		t.Fatalf("after recover: %s %s", r.stdout, r.stderr)
	}
}

// TestReconcileInFlightSaysSo: reconciling an attempt whose executor
// still holds it (alive here, and within its lease) establishes nothing:
// exit 11, the attempt left in flight, never 0 as if it were settled.
func TestReconcileInFlightSaysSo(t *testing.T) {
	e := newGateEnv(t)
	key := e.approved("enq-busy", "alice")
	l, err := ledger.Open(e.ledger)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := l.BeginAttempt(context.Background(), ledger.ExecuteRequest{Key: key, Executor: "alice",
		Endpoint: destination.EndpointOf(&filedest.Destination{Dir: e.outbox})}); err != nil {
		t.Fatal(err)
	}
	l.Close()
	wantExit(t, e.gate("reconcile", "--key", key, "--as", "ops"), exitInFlight, "in flight", "lease")
	if r := e.gate("show", "--key", key); !strings.Contains(r.stdout, "executing") {
		t.Fatalf("after the refused reconcile:\n%s", r.stdout)
	}
}

// schemaV2 builds a ledger as gatehouse wrote it at schema version 2.
func schemaV2(t *testing.T, path string) {
	t.Helper()
	var stmts []string
	for _, f := range []string{"0001_init.sql", "0002_audience.sql"} {
		b, err := os.ReadFile(filepath.Join("..", "..", "ledger", "schema", f))
		if err != nil {
			t.Fatal(err)
		}
		stmts = append(stmts, string(b))
	}
	rawExec(t, path, append([]string{"PRAGMA page_size = 1024", "PRAGMA journal_mode = WAL"},
		append(stmts, "PRAGMA application_id = 1195920452", "PRAGMA user_version = 2")...)...)
}

func TestOlderSchemaReadsNameMigrate(t *testing.T) {
	e := newGateEnv(t)
	schemaV2(t, e.ledger)
	before := dirFiles(t, filepath.Dir(e.ledger))
	r := e.gate("list")
	wantExit(t, r, exitOther, "schema version 2", "run: gatehouse ledger migrate --ledger "+e.ledger)
	if strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("want one line: %q", r.stderr)
	}
	sameLedgerAndWAL(t, before, dirFiles(t, filepath.Dir(e.ledger)), "ledger.db", "gate list")
	// A backup before migrating copies the old schema as it is.
	old := filepath.Join(t.TempDir(), "v2.db")
	wantExit(t, ledgerCmd("backup", "--ledger", e.ledger, "--to", old), exitOK)
	sameLedgerAndWAL(t, before, dirFiles(t, filepath.Dir(e.ledger)), "ledger.db", "ledger backup")

	r = ledgerCmd("migrate", "--ledger", e.ledger)
	wantExit(t, r, exitOK)
	// To whatever the newest schema file is: later files raise it further.
	if !strings.Contains(r.stdout, "from schema version 2 to ") {
		t.Fatalf("migrate: %s", r.stdout)
	}
	wantExit(t, e.gate("list"), exitOK)
	r = ledgerCmd("migrate", "--ledger", e.ledger)
	if !strings.Contains(r.stdout, "nothing to migrate") {
		t.Fatalf("second migrate: %s", r.stdout)
	}
	missing := filepath.Join(t.TempDir(), "missing.db")
	wantExit(t, ledgerCmd("migrate", "--ledger", missing), exitOther, "no ledger at "+missing)
	wantExit(t, ledgerCmd("recover", "--ledger", missing), exitOther, "no ledger at "+missing)
	if _, err := os.Stat(missing); err == nil {
		t.Fatal("migrate or recover created a ledger")
	}
}

func countActions(t *testing.T, path string) int {
	t.Helper()
	l, err := ledger.OpenReadOnly(path)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	m, err := l.Metrics(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return m.Intended
}

// loadWorker drives one action after another through propose, approve and
// send, each verb a process of its own, until stop closes; it reports each
// action sent on progress.
func loadWorker(bin, path string, w int, stop <-chan struct{}, progress chan<- struct{}) error {
	for i := 0; ; i++ {
		select {
		case <-stop:
			return nil
		default:
		}
		key := ledger.Key("cust-1", fmt.Sprintf("ev-%d-%d", w, i), "notice", "t", 0)
		for _, args := range [][]string{
			{"propose", "--as", "wf", "--task", "task-load", "--customer", "cust-1", "--event", fmt.Sprintf("ev-%d-%d", w, i),
				"--type", "notice", "--target", "t", "--to", "a@example.com", "--subject", "s", "--body", "b",
				"--destination", "fake://accept"},
			{"approve", "--as", "bob", "--key", key},
			{"send", "--as", "alice", "--key", key},
		} {
			out, err := exec.Command(bin, append(append([]string{"gate"}, args...), "--ledger", path)...).CombinedOutput()
			if err != nil {
				return fmt.Errorf("worker %d, gate %s: %v: %s", w, args[0], err, out)
			}
		}
		progress <- struct{}{}
	}
}

// TestLedgerBackupDuringEightProcessWriteLoad backs up a ledger while eight
// processes propose, approve and send: the copy passes check, holds a count
// of actions between the counts just before and just after the backup, and
// is one moment of the ledger: each worker's actions in it are a prefix of
// the ones it made, in order.
func TestLedgerBackupDuringEightProcessWriteLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := gatehouseBinary(t)
	e := newGateEnv(t)
	e.must("claim", "--task", "task-load", "--customer", "cust-1", "--as", "alice")
	const workers = 8
	stop := make(chan struct{})
	progress := make(chan struct{}, 1024)
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := loadWorker(bin, e.ledger, w, stop, progress); err != nil {
				errs <- err
			}
		}()
	}
	for range 2 * workers { // the load is under way
		select {
		case <-progress:
		case err := <-errs:
			close(stop)
			t.Fatal(err)
		}
	}
	backup := filepath.Join(t.TempDir(), "backup.db")
	before := countActions(t, e.ledger)
	r := ledgerCmd("backup", "--ledger", e.ledger, "--to", backup)
	after := countActions(t, e.ledger)
	for range 2 * workers { // and still going after the backup
		<-progress
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	wantExit(t, r, exitOK)
	for _, suffix := range []string{"-wal", "-shm", "-journal"} {
		if _, err := os.Stat(backup + suffix); err == nil {
			t.Errorf("the backup has %s beside it", suffix)
		}
	}
	got := countActions(t, backup)
	t.Logf("actions: %d before the backup, %d in it, %d after it; %d at the end", before, got, after, countActions(t, e.ledger))
	if got < before || got > after {
		t.Errorf("backup holds %d actions, want between %d and %d", got, before, after)
	}
	if !strings.Contains(r.stdout, fmt.Sprintf("%d actions", got)) {
		t.Errorf("backup output: %s", r.stdout)
	}
	checkPrefixes(t, backup, workers)
	wantExit(t, ledgerCmd("check", "--ledger", backup), exitOK)
	wantExit(t, ledgerCmd("check", "--ledger", e.ledger), exitOK)

	// An existing file is never replaced without --force.
	first, _ := os.ReadFile(backup)
	wantExit(t, ledgerCmd("backup", "--ledger", e.ledger, "--to", backup), exitOther, "already exists; give --force")
	if again, _ := os.ReadFile(backup); !bytes.Equal(first, again) {
		t.Error("backup replaced an existing file without --force")
	}
	wantExit(t, ledgerCmd("backup", "--ledger", e.ledger, "--to", backup, "--force"), exitOK)
}

// checkPrefixes fails unless, for every worker, the actions in the ledger
// at path are its first n, for some n: a copy of one moment.
func checkPrefixes(t *testing.T, path string, workers int) {
	t.Helper()
	l, err := ledger.OpenReadOnly(path)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, actions, err := l.ListActions(context.Background(), ledger.ActionFilter{Limit: 100000})
	if err != nil {
		t.Fatal(err)
	}
	seen := make([]map[int]bool, workers)
	for w := range seen {
		seen[w] = map[int]bool{}
	}
	for _, a := range actions {
		var w, i int
		if _, err := fmt.Sscanf(a.Event, "ev-%d-%d", &w, &i); err != nil || w >= workers {
			t.Fatalf("unexpected action %s", a.Key)
		}
		seen[w][i] = true
	}
	for w, got := range seen {
		for i := range len(got) {
			if !got[i] {
				t.Errorf("worker %d: the backup holds %d of its actions but not ev-%d-%d", w, len(got), w, i)
			}
		}
	}
}

func TestLedgerRestore(t *testing.T) {
	e, key, _ := readLedger(t)
	backup := filepath.Join(t.TempDir(), "backup.db")
	wantExit(t, ledgerCmd("backup", "--ledger", e.ledger, "--to", backup), exitOK)

	// Later work, then a writer killed with its WAL beside the ledger.
	l, err := ledger.Open(e.ledger)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Claim(context.Background(), ledger.TaskRef{ID: "task-after"}, "bob"); err != nil {
		t.Fatal(err)
	}
	crashDir := t.TempDir()
	for name, b := range dirFiles(t, filepath.Dir(e.ledger)) {
		os.WriteFile(filepath.Join(crashDir, name), b, 0o644)
	}
	l.Close()
	crashed := filepath.Join(crashDir, "ledger.db")
	if _, err := os.Stat(crashed + "-wal"); err != nil {
		t.Fatal("no WAL left by the killed writer")
	}

	// The crashed ledger holds work past the backup: replacing it is
	// refused, nothing changed, unless that work is given up.
	beforeRefusal := dirFiles(t, crashDir)
	wantExit(t, ledgerCmd("restore", "--ledger", crashed, "--from", backup), exitUsage, "newer than the backup", "--discard-newer")
	if after := dirFiles(t, crashDir); !bytes.Equal(beforeRefusal["ledger.db"], after["ledger.db"]) || !bytes.Equal(beforeRefusal["ledger.db-wal"], after["ledger.db-wal"]) {
		t.Error("a restore refused over newer history changed the ledger")
	}
	r := ledgerCmd("restore", "--ledger", crashed, "--from", backup, "--discard-newer", "--as", "ops", "--reason", "the disk died")
	wantExit(t, r, exitOK)
	for _, want := range []string{"generation 2 begins", "discarded: 2 history line(s)", "unverified: "} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("restore output lacks %q:\n%s", want, r.stdout)
		}
	}
	for _, suffix := range []string{"-wal", "-shm", "-journal"} {
		if _, err := os.Stat(crashed + suffix); err == nil {
			t.Errorf("restore left %s%s", filepath.Base(crashed), suffix)
		}
	}
	for name := range dirFiles(t, crashDir) {
		if strings.Contains(name, "restore") {
			t.Errorf("restore left %s", name)
		}
	}
	wantExit(t, ledgerCmd("check", "--ledger", crashed), exitOK)
	if show := runOut(t, "gate", "show", "--key", key, "--json", "--ledger", crashed); !strings.Contains(show, `"state":"sent"`) {
		t.Errorf("the restored ledger lacks the sent action: %s", show)
	}
	if hist := runOut(t, "gate", "history", "--limit", "500", "--ledger", crashed); strings.Contains(hist, "task-after") {
		t.Errorf("the restored ledger holds work done after the backup:\n%s", hist)
	}

	// Refused while another process has the ledger open.
	stopHolder := startHolder(t, e.ledger)
	before := dirFiles(t, filepath.Dir(e.ledger))
	wantExit(t, ledgerCmd("restore", "--ledger", e.ledger, "--from", backup, "--discard-newer"), exitOther, "is open in another process (pid ")
	after := dirFiles(t, filepath.Dir(e.ledger))
	for _, f := range []string{"ledger.db", "ledger.db-wal"} {
		if !bytes.Equal(before[f], after[f]) {
			t.Errorf("a refused restore changed %s", f)
		}
	}
	stopHolder()
	wantExit(t, ledgerCmd("restore", "--ledger", e.ledger, "--from", backup, "--discard-newer"), exitOK)

	// Refused: what is not a ledger, and what is not there.
	garbage := filepath.Join(t.TempDir(), "garbage.db")
	os.WriteFile(garbage, []byte("this is not a database, just some text that is long enough"), 0o644)
	wantExit(t, ledgerCmd("restore", "--ledger", e.ledger, "--from", garbage), exitOther, "not a gatehouse ledger")
	wantExit(t, ledgerCmd("restore", "--ledger", e.ledger, "--from", garbage+".missing"), exitOther, "no ledger at "+garbage+".missing")
	wantExit(t, ledgerCmd("restore", "--ledger", e.ledger), exitUsage, "needs --from")
}

func runOut(t *testing.T, args ...string) string {
	t.Helper()
	var out, errOut bytes.Buffer
	if code := run(args, &out, &errOut); code != 0 {
		t.Fatalf("%s: exit %d: %s", strings.Join(args, " "), code, errOut.String())
	}
	return out.String()
}

func TestLedgerCheckNamesTheBrokenInvariant(t *testing.T) {
	tests := []struct {
		Name  string
		Break []string
		Rules []string
	}{
		{"TwoAttemptsInFlight", []string{
			`DROP INDEX attempts_one_in_flight`,
			`INSERT INTO attempts (action_key, number, transport_id, executor, holder, started_at, lease_until)
				SELECT action_key, number + 1, transport_id || '-2', executor, holder, started_at, lease_until FROM attempts WHERE outcome = ''`,
		}, []string{"one attempt in flight", "executing has its attempt"}},
		{"SentWithoutAcceptedAttempt", []string{
			`UPDATE actions SET state = 'sent' WHERE state = 'executing'`,
			`UPDATE attempts SET outcome = 'not_delivered'`,
		}, []string{"sent has an accepted attempt"}},
		{"CounterBumped", []string{
			`INSERT INTO counters (kind, n) VALUES ('denied', 1) ON CONFLICT(kind) DO UPDATE SET n = n + 1`,
		}, []string{"counters match history"}},
		{"AttemptInFlightOfASettledAction", []string{
			`UPDATE actions SET state = 'approved' WHERE state = 'executing'`,
		}, []string{"attempt in flight belongs to an unsettled action"}},
	}
	for _, tc := range tests {
		t.Run(tc.Name, func(t *testing.T) {
			e := newGateEnv(t)
			key := e.approved("enq-check", "alice")
			l, err := ledger.Open(e.ledger)
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := l.BeginAttempt(context.Background(), ledger.ExecuteRequest{Key: key, Executor: "alice",
				Endpoint: destination.EndpointOf(&filedest.Destination{Dir: e.outbox})}); err != nil {
				t.Fatal(err)
			}
			l.Close()
			copyPath := filepath.Join(t.TempDir(), "copy.db")
			wantExit(t, ledgerCmd("backup", "--ledger", e.ledger, "--to", copyPath), exitOK)
			wantExit(t, ledgerCmd("check", "--ledger", copyPath), exitOK)

			rawExec(t, copyPath, tc.Break...)
			r := ledgerCmd("check", "--ledger", copyPath)
			wantExit(t, r, exitOther, "violation")
			for _, rule := range tc.Rules {
				if !strings.Contains(r.stdout, "violation: "+rule+": ") {
					t.Errorf("check does not name %q:\n%s", rule, r.stdout)
				}
			}
			if !strings.Contains(r.stdout, key) && tc.Name != "CounterBumped" {
				t.Errorf("check does not name the action:\n%s", r.stdout)
			}
			r = ledgerCmd("check", "--ledger", copyPath, "--json")
			var v ledgerCheckView
			if err := json.Unmarshal([]byte(r.stdout), &v); err != nil || v.OK || len(v.Violations) == 0 {
				t.Errorf("check --json: %v %s", err, r.stdout)
			}
			wantExit(t, ledgerCmd("check", "--ledger", e.ledger), exitOK)
		})
	}
}

func TestLedgerUsage(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "ledger.db")
	tests := []struct {
		Name string
		Args []string
		Want string
	}{
		{"NoVerb", nil, "ledger needs a verb: backup, restore, mark-restored, check, migrate, recover"},
		{"UnknownVerb", []string{"compact"}, `unknown verb "compact" for ledger`},
		{"NoLedger", []string{"check"}, "ledger check needs --ledger PATH"},
		{"BackupWithoutTo", []string{"backup", "--ledger", path}, "ledger backup needs --to FILE"},
		{"RestoreWithoutFrom", []string{"restore", "--ledger", path}, "ledger restore needs --from FILE"},
		{"Argument", []string{"check", "--ledger", path, "extra"}, `ledger check takes flags only, not "extra"`},
	}
	t.Setenv(ledgerEnv, "")
	for _, tc := range tests {
		t.Run(tc.Name, func(t *testing.T) {
			r := ledgerCmd(tc.Args...)
			if r.code != exitUsage || !strings.HasPrefix(r.stderr, "gatehouse: "+tc.Want) || strings.Count(r.stderr, "\n") != 1 {
				t.Fatalf("exit %d, stderr %q, want 2 and %q", r.code, r.stderr, tc.Want)
			}
			if _, err := os.Stat(path); err == nil {
				t.Fatal("a usage error created the ledger")
			}
		})
	}
}

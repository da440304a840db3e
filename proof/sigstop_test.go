package proof_test

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"gatehouse/destination"
	smtpdest "gatehouse/destination/smtp"
	"gatehouse/ledger"
	"gatehouse/proof"
	"gatehouse/testmailbox"
)

// Process-level pauses. smtp.TestPausedExecutorAfterAnotherSent pauses a
// send inside the test process at a hook; here every party is a process of
// the built binary — the test mailbox (`mailbox serve`), the executor that
// the kernel stops (SIGSTOP) while the mailbox holds its session, and the
// processes that recover its attempt, wait out the settle time and send
// again — and the stopped one is continued (SIGCONT) only after that. A
// stopped process runs nothing meanwhile, not even its timers: what keeps
// one arrival is that its commit point is fenced by a deadline the kernel
// enforces, and that nobody calls its attempt absent while it could land.

// The attempt leases of the stopped executors ($GATEHOUSE_LEASE; the CLI
// takes no less than 1s). The budget, three quarters of the lease, must
// outlast the moment between the mailbox holding the session and the stop
// on a loaded machine, and attempt 2's whole send. A stalled body's 6 MiB
// makes every gatehouse process that reads the action take half a second
// to a second, and its send longer: hence the longer lease, and the longer
// settle time (drawSigstopTrial) for the three processes that must run
// within it.
const (
	sigstopLease      = 2 * time.Second
	sigstopStallLease = 4 * time.Second
)

// sigstopHold is how long the mailbox's holds would last: longer than any
// trial. The test ends them (mailbox end-holds) when it chooses.
const sigstopHold = time.Hour

// stalledBody is the body of the messages stall_body stalls: larger than
// what loopback sockets buffer (about 3.8 MB here, see loopbackBuffering),
// so the sender is still writing it, its final "." not yet written, when
// it is stopped; and under the gate's 10 MiB limit.
const stalledBody = 6 << 20

// child is one gatehouse process a test starts, stops and continues.
type child struct {
	t    *testing.T
	name string
	cmd  *exec.Cmd
	out  lockedBuffer // stdout and stderr
	done chan struct{}
	err  error // Wait's, once done is closed
}

// lockedBuffer is a process's output, read while it may still write.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func startChild(t *testing.T, name, bin string, env []string, args ...string) *child {
	t.Helper()
	c := &child{t: t, name: name, cmd: exec.Command(bin, args...), done: make(chan struct{})}
	c.cmd.Env = append(os.Environ(), env...)
	// Should the test process itself be killed, its children go with it,
	// stopped ones too.
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	c.cmd.Stdout, c.cmd.Stderr = &c.out, &c.out
	if err := c.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		c.err = c.cmd.Wait()
		close(c.done)
	}()
	// A failed trial must not leave a stopped process behind.
	t.Cleanup(func() {
		select {
		case <-c.done:
			return
		default:
		}
		c.cmd.Process.Signal(syscall.SIGCONT)
		c.cmd.Process.Kill()
		<-c.done
	})
	return c
}

// exited reports whether the process has ended.
func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// wait waits for the process to end and returns its exit code.
func (c *child) wait(ctx context.Context) int {
	c.t.Helper()
	select {
	case <-c.done:
	case <-ctx.Done():
		c.t.Fatalf("%s did not end: %v\n%s", c.name, ctx.Err(), c.output())
	}
	return exitOf(c.err)
}

func (c *child) output() string { return strings.TrimSpace(c.out.String()) }

// stopAtRest stops the process with SIGSTOP at a moment it takes no turn at
// writing the ledger at path: a process stopped holding SQLite's write
// lock, or the write turn, would make everyone else wait for it, which is a
// property of a shared file, not of the gate. When it is caught inside a
// write it is continued and stopped again a moment later. It returns how
// many stops that took, or errEnded when the process ended first.
func (c *child) stopAtRest(path string, rng *rand.Rand) (int, error) {
	c.t.Helper()
	pid := c.cmd.Process.Pid
	for tries := 1; ; tries++ {
		if c.exited() {
			return tries, errEnded
		}
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			c.t.Fatalf("SIGSTOP %s: %v", c.name, err)
		}
		if err := awaitStopped(c.t, pid); err != nil {
			return tries, err
		}
		busy, err := writeTurnTaken(path)
		if err != nil {
			c.t.Fatal(err)
		}
		if busy == "" {
			return tries, nil
		}
		if tries == 1000 {
			c.t.Fatalf("%s was inside a write (%s) at each of %d stops", c.name, busy, tries)
		}
		c.cont()
		// The process must get past its write; the moment of the next
		// stop is drawn, not awaited (nothing outside the process marks
		// the end of its write but the lock it lets go).
		time.Sleep(time.Duration(100+rng.IntN(2000)) * time.Microsecond)
	}
}

// cont continues a stopped process.
func (c *child) cont() {
	c.t.Helper()
	if err := syscall.Kill(c.cmd.Process.Pid, syscall.SIGCONT); err != nil {
		c.t.Fatalf("SIGCONT %s: %v", c.name, err)
	}
}

// awaitStopped waits until every thread of pid is stopped (SIGSTOP is
// delivered to each thread on its own), or returns errEnded when the
// process has ended.
func awaitStopped(t *testing.T, pid int) error {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		stopped, err := allThreadsStopped(pid)
		if err != nil {
			return err
		}
		if stopped {
			return nil
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d not stopped 10 s after SIGSTOP", pid)
		}
		time.Sleep(200 * time.Microsecond) // the kernel's state, seen only in /proc: poll it
	}
}

// allThreadsStopped reads each thread's state from /proc.
func allThreadsStopped(pid int) (bool, error) {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
	if err != nil {
		return false, fmt.Errorf("threads of process %d: %w", pid, err)
	}
	if len(tasks) == 0 {
		return false, errEnded
	}
	for _, f := range tasks {
		b, err := os.ReadFile(f)
		if errors.Is(err, os.ErrNotExist) {
			return false, errEnded // the thread, or the process, is gone
		}
		if err != nil {
			return false, fmt.Errorf("thread state: %w", err)
		}
		// pid (comm) state …: the name may hold spaces and parentheses.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 || i+2 >= len(b) {
			return false, fmt.Errorf("%s: unreadable: %q", f, b)
		}
		switch st := b[i+2]; st {
		case 'T', 't':
		case 'Z', 'X':
			return false, errEnded
		default:
			return false, nil
		}
	}
	return true, nil
}

// writeTurnTaken reports what another writer of the ledger at path would
// wait for now: the write turn or the queue for it (ledger/writeturn.go),
// or SQLite's write lock; "" for nothing.
func writeTurnTaken(path string) (string, error) {
	for _, f := range []string{"-turn", "-wait"} {
		fd, err := os.OpenFile(path+f, os.O_RDWR, 0)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return "", err
		}
		err = syscall.Flock(int(fd.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			syscall.Flock(int(fd.Fd()), syscall.LOCK_UN)
		}
		fd.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return "the ledger's " + f + " file", nil
		}
		if err != nil {
			return "", fmt.Errorf("probe %s%s: %w", path, f, err)
		}
	}
	// Through SQLite itself: its locks are per process, and SQLite keeps
	// this connection's from disturbing any other this process holds.
	db, err := sql.Open("sqlite3", "file:"+path+"?_busy_timeout=0")
	if err != nil {
		return "", err
	}
	defer db.Close()
	conn, err := db.Conn(context.Background())
	if err != nil {
		return "", err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(context.Background(), "BEGIN IMMEDIATE"); err != nil {
		if strings.Contains(err.Error(), "locked") || strings.Contains(err.Error(), "busy") {
			return "SQLite's write lock", nil
		}
		return "", fmt.Errorf("probe the write lock of %s: %w", path, err)
	}
	_, err = conn.ExecContext(context.Background(), "ROLLBACK")
	return "", err
}

// runChild runs one short gatehouse process to its end.
func runChild(t *testing.T, ctx context.Context, bin string, env []string, args ...string) (int, string) {
	t.Helper()
	c := startChild(t, args[0]+" "+args[1], bin, env, args...)
	return c.wait(ctx), c.output()
}

// mailboxProcess is the test mailbox as `gatehouse mailbox serve` in a
// process of its own, built without the race detector like every other
// party here: it reads a stalled body's megabytes as fast as a real server
// would, which the race-instrumented mailbox of the test process cannot.
type mailboxProcess struct {
	target string // the destination target it printed
	api    *testmailbox.Client
	store  proof.Store
}

// startMailboxProcess runs `mailbox serve` on loopback ports of the
// system's choosing, in plain SMTP, with faults in force from the start.
func startMailboxProcess(t *testing.T, bin string, faults ...string) *mailboxProcess {
	t.Helper()
	args := []string{"mailbox", "serve", "--smtp", "127.0.0.1:0", "--http", "127.0.0.1:0", "--tls", "off"}
	for _, f := range faults {
		args = append(args, "--fault", f)
	}
	cmd := exec.Command(bin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdout, err := cmd.StdoutPipe()
	must(t, err)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	must(t, cmd.Start())
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	})
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	mp := &mailboxProcess{}
	var api string
	timeout := time.After(30 * time.Second)
	for mp.target == "" || api == "" {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatalf("mailbox serve ended before printing its addresses: %s", stderr.String())
			}
			if v, ok := strings.CutPrefix(line, "target "); ok {
				mp.target = strings.TrimSpace(v)
			}
			if v, ok := strings.CutPrefix(line, "http "); ok {
				api = strings.TrimSpace(v)
			}
		case <-timeout:
			t.Fatal("mailbox serve printed no addresses within 30 s")
		}
	}
	go func() {
		for range lines { // keep its stdout drained until it ends
		}
	}()
	mp.api, err = testmailbox.NewClient(api, nil)
	must(t, err)
	mp.store = proof.APIStore{Client: mp.api}
	return mp
}

func (mp *mailboxProcess) stats(t *testing.T, ctx context.Context) testmailbox.Stats {
	t.Helper()
	st, err := mp.api.Stats(ctx)
	must(t, err)
	return st
}

// errEnded says the process a test waited on ended first.
var errEnded = errors.New("the process ended first")

// awaitHeld waits until the mailbox holds n messages, or returns errEnded
// if c ends first.
func (mp *mailboxProcess) awaitHeld(t *testing.T, ctx context.Context, n int64, c *child) error {
	t.Helper()
	for mp.stats(t, ctx).Held < n {
		select {
		case <-c.done:
			return errEnded
		case <-ctx.Done():
			t.Fatalf("the mailbox never held %d message(s)", n)
		case <-time.After(time.Millisecond): // the mailbox's state, polled through its API
		}
	}
	return nil
}

// awaitFired waits until faults of kind have fired n times, or returns
// errEnded if c ends first.
func (mp *mailboxProcess) awaitFired(t *testing.T, ctx context.Context, kind testmailbox.FaultKind, n int64, c *child) error {
	t.Helper()
	for mp.stats(t, ctx).FaultsFired[kind] < n {
		select {
		case <-c.done:
			return errEnded
		case <-ctx.Done():
			t.Fatalf("%s never fired %d time(s)", kind, n)
		case <-time.After(time.Millisecond): // the mailbox's state, polled through its API
		}
	}
	return nil
}

// tooSlow is a trial whose timing did not hold on this machine at that
// moment: a lease or settle time ran out before the step that needed it
// was done. That is the machine's load, not the gate's doing; the trial
// runs again with both twice as long (retryTooSlow).
type tooSlow struct{ what string }

func (e *tooSlow) Error() string { return e.what }

// retryTooSlow runs a trial with its lease and settle time scaled by 1,
// then 2, then 4, until it is not too slow, and returns how many runs were
// too slow.
func retryTooSlow(t *testing.T, run func(scale int) error) int {
	t.Helper()
	for scale, slow := 1, 0; ; scale, slow = scale*2, slow+1 {
		err := run(scale)
		var ts *tooSlow
		if !errors.As(err, &ts) {
			must(t, err)
			return slow
		}
		if scale == 4 {
			t.Fatalf("too slow even with the lease and settle time ×4: %s", ts.what)
		}
		t.Logf("too slow: %s; again with the lease and settle time ×%d", ts.what, scale*2)
	}
}

// budgetSpent is tooSlow when attempt 1 of key ended not delivered, which
// only its budget running out can do while the mailbox holds it; any other
// end is the trial's failure.
func budgetSpent(t *testing.T, ctx context.Context, path, key string, c *child, when string) error {
	t.Helper()
	if atts := attemptsOf(t, ctx, path, key); len(atts) == 1 && atts[0].Outcome == destination.OutcomeNotDelivered {
		return &tooSlow{"the executor's budget ran out " + when}
	}
	t.Fatalf("%s ended %s (%v):\n%s", c.name, when, c.err, c.output())
	return nil
}

// awaitSessionsEnd waits until the mailbox has no session open: every
// message's fate is then settled.
func (mp *mailboxProcess) awaitSessionsEnd(t *testing.T, ctx context.Context) {
	t.Helper()
	for {
		n := mp.stats(t, ctx).Sessions
		if n == 0 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the mailbox still has %d session(s) open", n)
		case <-time.After(2 * time.Millisecond):
		}
	}
}

func (mp *mailboxProcess) endHolds(t *testing.T, ctx context.Context) int {
	t.Helper()
	n, err := mp.api.EndHolds(ctx)
	must(t, err)
	return n
}

// awaitLeasesOut waits until recovery may mark every attempt still in
// flight in the ledger at path: their leases have run out. It returns how
// many there are.
func awaitLeasesOut(t *testing.T, ctx context.Context, path string) int {
	t.Helper()
	l, err := ledger.OpenReadOnly(path)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for {
		_, inFlight, err := l.ListActions(ctx, ledger.ActionFilter{States: []ledger.State{ledger.StateExecuting}, Limit: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		due, err := l.RecoveryDue(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(inFlight) > 0 && len(due) == len(inFlight) {
			return len(due)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%d attempt(s) in flight, %d of them past their lease", len(inFlight), len(due))
		case <-time.After(10 * time.Millisecond): // the lease runs out on the clock: poll the ledger
		}
	}
}

// sigstopTrial is what one trial drew: seeded, so a trial repeats by name.
type sigstopTrial struct {
	kind  testmailbox.FaultKind
	lease time.Duration
	// settle is the destination's settle time (settle= on the target):
	// long enough for three gatehouse processes to run within it.
	settle time.Duration
	// endHoldFirst ends the mailbox's hold before the executor is
	// continued, so it wakes to a clear path (354 waiting, the body
	// being read); otherwise it wakes inside the hold.
	endHoldFirst bool
	// stopAfter is how long after the mailbox held the session the stop
	// comes (within the executor's budget).
	stopAfter time.Duration
}

func drawSigstopTrial(trial int) sigstopTrial {
	rng := rand.New(rand.NewPCG(uint64(trial), 0x51657709))
	// Kind and order alternate, so that any four trials have each pair;
	// the rest is drawn.
	tr := sigstopTrial{kind: testmailbox.FaultHold354, lease: sigstopLease, settle: time.Duration(1500+rng.IntN(700)) * time.Millisecond,
		endHoldFirst: trial/2%2 == 0, stopAfter: time.Duration(rng.IntN(300)) * time.Millisecond}
	if trial%2 == 1 {
		tr.kind, tr.lease, tr.settle = testmailbox.FaultStallBody, sigstopStallLease, tr.settle+3500*time.Millisecond
	}
	return tr
}

// sigstopFigures are the counts a SIGSTOP proof prints.
type sigstopFigures struct {
	mu                                  sync.Mutex
	trials, arrived                     int
	dups, losses, contradictions, stops int
	kinds                               map[testmailbox.FaultKind]int
	exits                               map[int]int // the first executors' exit codes
	slow                                int         // runs too slow for their times, run again
}

func (f *sigstopFigures) add(g func(f *sigstopFigures)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	g(f)
}

// TestSIGSTOPExecutor: a `gatehouse gate send` process is stopped by the
// kernel while the mailbox holds its session (waiting for the 354, or in
// the middle of its body: larger than the sockets hold, so its final "."
// is not yet written). While its lease lasts, another process's reconcile
// is told it is in flight (11). Once the lease has run out, a reconcile
// finds nothing but holds the action "not found yet" (a release is
// refused, and so is a second send) until the settle time has passed; then
// it holds it as safe to retry, a person releases it and another process
// sends attempt 2, which arrives. Then the stopped executor is continued,
// with the mailbox's hold ended first (it wakes to a 354 waiting, or its
// body being read on) or after it ends, and must commit nothing: its
// budget is long over, and the kernel refuses its late writes. Every
// trial: exactly one arrival, attempt 2 begun only after attempt 1 could
// no longer land, the first executor's message refused unfinished by the
// mailbox, the checker clean. A trial repeats by its name (-run
// 'TestSIGSTOPExecutor/Trial057', with -proof.long past the fourth).
func TestSIGSTOPExecutor(t *testing.T) {
	trials := 4
	if *long || os.Getenv("PROOF_LONG") == "1" {
		trials = 100
	}
	bin := buildGatehouse(t)
	if capacity := loopbackBuffering(t); capacity+1<<20 > stalledBody {
		t.Fatalf("loopback sockets here buffer %d bytes; a stalled body of %d would be written whole before the stop", capacity, stalledBody)
	}
	figs := &sigstopFigures{kinds: map[testmailbox.FaultKind]int{}, exits: map[int]int{}}
	for trial := range trials {
		tr := drawSigstopTrial(trial)
		t.Run(fmt.Sprintf("Trial%03d_%s", trial, tr.kind), func(t *testing.T) {
			t.Parallel()
			slow := retryTooSlow(t, func(scale int) error {
				scaled := tr
				scaled.lease, scaled.settle = tr.lease*time.Duration(scale), tr.settle*time.Duration(scale)
				return sigstopSendTrial(t, bin, trial, scaled, figs)
			})
			figs.add(func(f *sigstopFigures) { f.slow += slow })
		})
	}
	t.Cleanup(func() {
		t.Logf("SIGSTOP executor trials: %d (hold_354 %d at lease %s, stall_body %d at lease %s; %d run again with longer times for the machine's load), each stopped while the mailbox held it and continued once another process had sent attempt 2; %d stops in all; first executors' exits %v; %d arrivals, %d duplicates, %d losses, %d contradictions",
			figs.trials, figs.kinds[testmailbox.FaultHold354], sigstopLease, figs.kinds[testmailbox.FaultStallBody], sigstopStallLease, figs.slow,
			figs.stops, figs.exits, figs.arrived, figs.dups, figs.losses, figs.contradictions)
	})
}

func sigstopSendTrial(t *testing.T, bin string, trial int, tr sigstopTrial, figs *sigstopFigures) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	mb := startMailboxProcess(t, bin, fmt.Sprintf("%s=%s:count=1", tr.kind, sigstopHold))
	path := filepath.Join(t.TempDir(), "ledger.db")
	target := fmt.Sprintf("%s&settle=%s", mb.target, tr.settle)
	body := "We will answer within a day."
	if tr.kind == testmailbox.FaultStallBody {
		body = bigBody(stalledBody)
	}
	key := approveOne(t, ctx, path, target, body)
	env := []string{"GATEHOUSE_LEDGER=" + path, "GATEHOUSE_LEASE=" + tr.lease.String()}
	send := []string{"gate", "send", "--key", key, "--as", "wf-ack", "--material", "crm.consent=yes"}
	rng := rand.New(rand.NewPCG(uint64(trial), 0x5e5e))

	first := startChild(t, "the first executor", bin, env, send...)
	if err := mb.awaitHeld(t, ctx, 1, first); err != nil {
		return budgetSpent(t, ctx, path, key, first, "before the mailbox held it")
	}
	time.Sleep(tr.stopAfter) // the moment of the stop is drawn
	stops, err := first.stopAtRest(path, rng)
	stoppedAt := time.Now()
	att := attemptsOf(t, ctx, path, key)
	if err != nil || first.exited() || len(att) != 1 || att[0].Outcome != "" {
		return budgetSpent(t, ctx, path, key, first, "before it was stopped")
	}

	reconcile := []string{"gate", "reconcile", "--key", key, "--as", "ops"}
	// A stopped process is alive: until its lease runs out nobody may take
	// its attempt from it.
	if code, out := runChild(t, ctx, bin, env, reconcile...); code != 11 {
		if time.Now().After(att[0].LeaseUntil) {
			return &tooSlow{"the lease ran out before the reconcile within it was done"}
		}
		t.Fatalf("reconcile while the stopped executor's lease lasts: exit %d, want 11 (in flight):\n%s", code, out)
	}
	awaitLeasesOut(t, ctx, path)
	pastLease := time.Since(stoppedAt)
	release := []string{"gate", "release-hold", "--key", key, "--as", "lead", "--reason", "the mailbox has no such message"}
	// Within the settle time: nothing found is not absence.
	if code, out := runChild(t, ctx, bin, env, reconcile...); code != 13 || !strings.Contains(out, "may still land until") {
		if time.Now().After(att[0].SettlesAt) {
			return &tooSlow{"the settle time ended before the reconcile within it was done"}
		}
		t.Fatalf("reconcile within the settle time: exit %d, want 13 and \"may still land until\" (not found yet):\n%s", code, out)
	}
	if a := actionOf(t, ctx, path, key); a.State != ledger.StateHeld || a.HoldCause != ledger.HoldNotFoundYet {
		t.Fatalf("after the first reconcile: %s/%s, want held/not_found_yet", a.State, a.HoldCause)
	}
	if code, out := runChild(t, ctx, bin, env, release...); code != 14 {
		t.Fatalf("a release within the settle time: exit %d, want 14 (refused):\n%s", code, out)
	}
	if code, out := runChild(t, ctx, bin, env, send...); code != 14 {
		t.Fatalf("a second send within the settle time: exit %d, want 14 (refused):\n%s", code, out)
	}
	// Held "not found yet", the action stays so until a later reconcile,
	// however late the two checks above ran.
	within := time.Until(att[0].SettlesAt)

	// Once attempt 1 can no longer land: absent, a person releases, and
	// attempt 2 goes out from another process.
	<-time.After(time.Until(att[0].SettlesAt) + 20*time.Millisecond)
	if code, out := runChild(t, ctx, bin, env, reconcile...); code != 13 || !strings.Contains(out, "safe to retry") {
		t.Fatalf("reconcile after the settle time: exit %d, want 13 and \"safe to retry\":\n%s", code, out)
	}
	if code, out := runChild(t, ctx, bin, env, release...); code != 0 {
		t.Fatalf("release after the settle time: exit %d:\n%s", code, out)
	}
	if code, out := runChild(t, ctx, bin, env, send...); code != 0 {
		if atts := attemptsOf(t, ctx, path, key); code == 14 && len(atts) == 2 && atts[1].Outcome == destination.OutcomeUnknown {
			// Its final "." went out and the mailbox did not answer within
			// the budget: the gate rightly calls that unknown.
			return &tooSlow{"attempt 2's budget ran out before the mailbox answered its final dot"}
		}
		t.Fatalf("attempt 2: exit %d:\n%s", code, out)
	}
	if n, err := mb.api.Count(ctx, testmailbox.Filter{ActionKey: key}); err != nil || n != 1 {
		t.Fatalf("after attempt 2: %d arrival(s) (%v), want 1", n, err)
	}

	// The first executor wakes.
	ended := 0
	if tr.endHoldFirst {
		ended = mb.endHolds(t, ctx)
	}
	first.cont()
	code := first.wait(ctx)
	if !tr.endHoldFirst {
		ended = mb.endHolds(t, ctx)
	}
	if ended != 1 {
		t.Errorf("the mailbox ended %d hold(s), want the first executor's 1", ended)
	}
	mb.awaitSessionsEnd(t, ctx)
	if code == 0 {
		t.Errorf("the first executor says its late send was accepted:\n%s", first.output())
	}

	l, err := ledger.Open(path, ledger.WithoutRecovery())
	must(t, err)
	defer l.Close()
	v, err := proof.CheckByMessageID(ctx, l, mb.store)
	must(t, err)
	st := mb.stats(t, ctx)
	att = attemptsOf(t, ctx, path, key)
	t.Logf("%s, lease %s, settle %s, hold ended %s: stopped %s after the hold (%d stop(s)), lease out %s later, %s of the settle time left after the checks within it; first executor exit %d; attempts %d; mailbox accepted %d, refused %d; %s",
		tr.kind, tr.lease, tr.settle, map[bool]string{true: "before it woke", false: "after it woke"}[tr.endHoldFirst], tr.stopAfter, stops,
		pastLease.Round(time.Millisecond), within.Round(time.Millisecond), code, len(att), st.Accepted, st.Refused, v)
	figs.add(func(f *sigstopFigures) {
		f.trials++
		f.kinds[tr.kind]++
		f.stops += stops
		f.arrived += v.Arrivals
		f.exits[code]++
		f.dups += len(v.Duplicates)
		f.losses += len(v.Losses)
		f.contradictions += len(v.Contradictions)
	})
	if !v.OK() || v.Sent != 1 || v.Arrivals != 1 || st.DuplicateActionKeys != 0 {
		t.Fatalf("%s (mailbox flags %d duplicate keys)\n%s", v, st.DuplicateActionKeys, v.Summary())
	}
	if len(att) != 2 || att[1].StartedAt.Before(att[0].SettlesAt) {
		t.Fatalf("%d attempts; attempt 2 must begin after attempt 1 settles (%v)", len(att), att)
	}
	if st.Accepted != 1 || st.Refused != 1 {
		t.Fatalf("the mailbox accepted %d and refused %d; want attempt 2 accepted and the first executor's message refused unfinished", st.Accepted, st.Refused)
	}
	return nil
}

// approveOne records a task owned by wf-ack and one approved action to
// ada@example.org at target with body, and returns its key.
func approveOne(t *testing.T, ctx context.Context, path, target, body string) string {
	t.Helper()
	l, err := ledger.Open(path)
	must(t, err)
	defer l.Close()
	sd, err := smtpdest.New(target)
	must(t, err)
	ep := destination.EndpointOf(sd.Gate())
	_, err = l.Claim(ctx, ledger.TaskRef{ID: "task-1", Customer: "ada"}, "wf-ack")
	must(t, err)
	a, err := l.Propose(ctx, ledger.Proposal{Task: ledger.TaskRef{ID: "task-1"}, Customer: "ada", Event: "enq-1",
		ActionType: "reply_ack", Target: "task-1", Recipient: "ada@example.org", Destination: ep.Destination, Lookup: ep.Lookup,
		DestinationSettings: ep.Settings, Settle: &ep.Settle, Subject: "We received your enquiry", Body: body, Actor: "wf-ack"})
	must(t, err)
	_, err = l.Approve(ctx, a.Key, "lead", consentYes)
	must(t, err)
	return a.Key
}

// bigBody is n bytes of short lines of text.
func bigBody(n int) string {
	line := "We will answer within a working day; thank you for your patience.\n"
	return strings.Repeat(line, n/len(line))
}

func attemptsOf(t *testing.T, ctx context.Context, path, key string) []ledger.Attempt {
	t.Helper()
	l, err := ledger.OpenReadOnly(path)
	must(t, err)
	defer l.Close()
	atts, err := l.Attempts(ctx, key)
	must(t, err)
	return atts
}

func actionOf(t *testing.T, ctx context.Context, path, key string) ledger.Action {
	t.Helper()
	l, err := ledger.OpenReadOnly(path)
	must(t, err)
	defer l.Close()
	a, err := l.Action(ctx, key)
	must(t, err)
	return a
}

// loopbackBuffering measures how much a sender can write to a loopback
// connection whose reader has stopped after one line, before its write
// blocks: what stall_body leaves in the sockets.
func loopbackBuffering(t *testing.T) int {
	t.Helper()
	ln, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", "127.0.0.1:0")
	must(t, err)
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(accepted)
			return
		}
		c.Read(make([]byte, 1)) // one byte read, then nothing
		accepted <- c
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	must(t, err)
	defer c.Close()
	if _, err := c.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	srv := <-accepted
	if srv == nil {
		t.Fatal("loopback accept failed")
	}
	defer srv.Close()
	buf := make([]byte, 64<<10)
	total := 0
	for {
		// A write that makes no progress for this long is blocked: the
		// sockets are full.
		c.SetWriteDeadline(time.Now().Add(300 * time.Millisecond))
		n, err := c.Write(buf)
		total += n
		if err != nil {
			return total
		}
	}
}

// audienceStopTrial is what one audience trial drew.
type audienceStopTrial struct {
	seed         int
	held         []int // the recipients (r<N>) whose 354 the mailbox holds
	settle       time.Duration
	endHoldFirst bool
	stopAfter    time.Duration
}

const (
	stopAudience    = 40 // recipients per release
	stopConcurrency = 8  // audience send --concurrency
	// stopSlowReply is how late the mailbox answers some of the messages
	// it stores.
	stopSlowReply = 250 * time.Millisecond
)

func drawAudienceStopTrial(trial int) audienceStopTrial {
	rng := rand.New(rand.NewPCG(uint64(trial), 0xa0d1e9ce))
	tr := audienceStopTrial{seed: trial, settle: time.Duration(2000+rng.IntN(1000)) * time.Millisecond, endHoldFirst: trial%2 == 0,
		stopAfter: time.Duration(rng.IntN(int(stopSlowReply/time.Millisecond))) * time.Millisecond}
	// Among the first 16 sent, so that the stop comes while the others
	// are still on their way.
	for _, i := range rng.Perm(16)[:1+rng.IntN(3)] {
		tr.held = append(tr.held, i+1)
	}
	sort.Ints(tr.held)
	return tr
}

// TestSIGSTOPAudienceSend: `gatehouse audience send --concurrency 8` sends
// a release of 40; the mailbox holds the 354 of one to three recipients
// (drawn) and answers about 30% of the others a quarter of a second late.
// Once it holds them all the process is stopped by the kernel, a drawn
// moment later, its other workers wherever they are (waiting for a 250 of
// a message stored, their outcomes not yet recorded, batches decided but
// not handed over). Its leases run out. A second
// `audience send` from another process recovers and reconciles: what
// arrived is sent, what was never handed over is sent now, and the held
// recipients are not found yet, so they are held and neither released nor
// sent again before their settle time. After it a third run reconciles
// them as absent and sends them. Then the first process is continued (the
// holds ended before it wakes, or after) and must add nothing. Every
// trial: every recipient sent exactly once, no attempt begun before the
// one before it could no longer land, the checker and `ledger check`
// clean.
func TestSIGSTOPAudienceSend(t *testing.T) {
	trials := 2
	if *long || os.Getenv("PROOF_LONG") == "1" {
		trials = 20
	}
	bin := buildGatehouse(t)
	var mu sync.Mutex
	var runs, slow, held, heldNotFound, sentByB, sentByC, arrivals, dups, losses, contradictions int
	exits := map[int]int{}
	for trial := range trials {
		tr := drawAudienceStopTrial(trial)
		t.Run(fmt.Sprintf("Trial%03d", trial), func(t *testing.T) {
			t.Parallel()
			var r audienceStopResult
			n := retryTooSlow(t, func(scale int) (err error) {
				scaled := tr
				scaled.settle = tr.settle * time.Duration(scale)
				r, err = sigstopAudienceTrial(t, bin, scaled, sigstopLease*time.Duration(scale))
				return err
			})
			mu.Lock()
			defer mu.Unlock()
			slow += n
			runs++
			held += len(tr.held)
			heldNotFound += r.heldNotFound
			sentByB += r.sentByB
			sentByC += r.sentByC
			arrivals += r.v.Arrivals
			dups += len(r.v.Duplicates)
			losses += len(r.v.Losses)
			contradictions += len(r.v.Contradictions)
			exits[r.firstExit]++
		})
	}
	t.Cleanup(func() {
		t.Logf("SIGSTOP audience trials: %d × %d recipients at concurrency %d, lease %s (%d run again with longer times for the machine's load): %d sessions held and the sender stopped; the run after the leases held %d recipients not found yet and sent %d, the run after the settle time sent %d; first runs' exits %v; %d arrivals, %d duplicates, %d losses, %d contradictions",
			runs, stopAudience, stopConcurrency, sigstopLease, slow, held, heldNotFound, sentByB, sentByC, exits, arrivals, dups, losses, contradictions)
	})
}

// audienceStopResult is what one audience trial found.
type audienceStopResult struct {
	heldNotFound     int // recipients the run after the leases held "not found yet"
	sentByB, sentByC int // recipients the second and third runs sent
	firstExit        int
	v                proof.EvidenceVerdict
}

func sigstopAudienceTrial(t *testing.T, bin string, tr audienceStopTrial, lease time.Duration) (audienceStopResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var faults []string
	for _, i := range tr.held {
		faults = append(faults, fmt.Sprintf("hold_354=%s:count=1:to=r%d@example.org", sigstopHold, i))
	}
	// Some of the others are stored but answered late, so that the stop
	// finds workers waiting for their 250 and batches not yet handed over.
	faults = append(faults, fmt.Sprintf("delay_reply=%s:p=0.3:seed=%d", stopSlowReply, tr.seed))
	mb := startMailboxProcess(t, bin, faults...)
	path := filepath.Join(t.TempDir(), "ledger.db")
	target := fmt.Sprintf("%s&settle=%s", mb.target, tr.settle)
	keys := approveRelease(t, ctx, path, target, stopAudience)
	env := []string{"GATEHOUSE_LEDGER=" + path, "GATEHOUSE_LEASE=" + lease.String()}
	send := []string{"audience", "send", "--release", "spring", "--as", "wf-notice", "--destination", target,
		"--concurrency", fmt.Sprint(stopConcurrency), "--json"}
	var res audienceStopResult

	// The first run can end before its stop only when the budget of a held
	// recipient ran out: the machine was too slow for the lease.
	var first *child
	endedEarly := func(when string) error {
		for _, i := range tr.held {
			if atts := attemptsOf(t, ctx, path, keys[i-1]); len(atts) == 1 && atts[0].Outcome == destination.OutcomeNotDelivered {
				return &tooSlow{fmt.Sprintf("r%d's budget ran out %s", i, when)}
			}
		}
		t.Fatalf("the first audience send ended (%v) %s:\n%s", first.err, when, first.output())
		return nil
	}
	first = startChild(t, "the first audience send", bin, env, send...)
	if err := mb.awaitFired(t, ctx, testmailbox.FaultHold354, int64(len(tr.held)), first); err != nil {
		return res, endedEarly("before the mailbox held every drawn recipient")
	}
	time.Sleep(tr.stopAfter) // the moment of the stop is drawn
	stops, err := first.stopAtRest(path, rand.New(rand.NewPCG(uint64(len(tr.held)), uint64(tr.settle))))
	if err != nil {
		return res, endedEarly("before it could be stopped")
	}
	inFlight := awaitLeasesOut(t, ctx, path)
	// What the stopped process had handed over whole has landed by now.
	atStop := mb.stats(t, ctx).Stored

	// The run after the leases: before the settle time nothing found is
	// not absence.
	l, err := ledger.OpenReadOnly(path)
	must(t, err)
	settles := time.Time{}
	for _, i := range tr.held {
		atts, err := l.Attempts(ctx, keys[i-1])
		must(t, err)
		if len(atts) == 1 && atts[0].Outcome == destination.OutcomeNotDelivered {
			l.Close()
			return res, &tooSlow{fmt.Sprintf("r%d's budget ran out before the stop", i)}
		}
		if len(atts) != 1 || atts[0].Outcome != "" {
			t.Fatalf("r%d at the stop: %d attempt(s), outcome %q; want one in flight", i, len(atts), atts[0].Outcome)
		}
		if settles.IsZero() || atts[0].SettlesAt.Before(settles) {
			settles = atts[0].SettlesAt
		}
	}
	l.Close()
	code, out := runChild(t, ctx, bin, env, send...)
	states := releaseStates(t, ctx, path, keys)
	for _, i := range tr.held {
		if s := states[keys[i-1]]; code != 13 || s.State != ledger.StateHeld || s.HoldCause != ledger.HoldNotFoundYet {
			if time.Now().After(settles) {
				return res, &tooSlow{"the first held attempt settled before the run within its settle time was done"}
			}
			t.Fatalf("the run after the leases: exit %d (want 13), r%d %s/%s (want held/not_found_yet):\n%s", code, i, s.State, s.HoldCause, out)
		}
	}
	var wait time.Time
	for _, k := range keys {
		switch s := states[k]; {
		case s.State == ledger.StateSent:
			res.sentByB++
		case s.State == ledger.StateHeld && s.HoldCause == ledger.HoldNotFoundYet:
			res.heldNotFound++
			atts := attemptsOf(t, ctx, path, k)
			if at := atts[len(atts)-1].SettlesAt; at.After(wait) {
				wait = at
			}
		default:
			t.Fatalf("%s after the second run: %s/%s, want sent or held not found yet", k, s.State, s.HoldCause)
		}
	}
	res.sentByB -= int(atStop) // those the stopped process had delivered, recorded by it or reconciled by this run

	// The run after the settle time: absent now, released and sent.
	<-time.After(time.Until(wait) + 20*time.Millisecond)
	if code, out := runChild(t, ctx, bin, env, send...); code != 0 {
		t.Fatalf("the run after the settle time: exit %d:\n%s", code, out)
	}
	res.sentByC = res.heldNotFound
	for k, s := range releaseStates(t, ctx, path, keys) {
		if s.State != ledger.StateSent {
			t.Fatalf("%s after the third run: %s/%s, want sent", k, s.State, s.HoldCause)
		}
	}

	// The first run wakes.
	ended := 0
	if tr.endHoldFirst {
		ended = mb.endHolds(t, ctx)
	}
	first.cont()
	res.firstExit = first.wait(ctx)
	if !tr.endHoldFirst {
		ended = mb.endHolds(t, ctx)
	}
	if ended != len(tr.held) {
		t.Errorf("the mailbox ended %d hold(s), want %d", ended, len(tr.held))
	}
	mb.awaitSessionsEnd(t, ctx)
	if code, out := runChild(t, ctx, bin, env, "ledger", "check", "--ledger", path); code != 0 {
		t.Errorf("ledger check: exit %d:\n%s", code, out)
	}

	lw, err := ledger.Open(path, ledger.WithoutRecovery())
	must(t, err)
	defer lw.Close()
	res.v, err = proof.CheckByMessageID(ctx, lw, mb.store)
	must(t, err)
	st := mb.stats(t, ctx)
	t.Logf("held %v, settle %s, holds ended %s: stopped %s after the holds (%d stop(s)) with %d attempts in flight, %d of its messages stored; second run: %d sent, %d held not found yet; third run sent %d; first run exit %d; mailbox accepted %d, refused %d; %s",
		tr.held, tr.settle, map[bool]string{true: "before it woke", false: "after it woke"}[tr.endHoldFirst], tr.stopAfter, stops, inFlight, atStop,
		res.sentByB, res.heldNotFound, res.sentByC, res.firstExit, st.Accepted, st.Refused, res.v)
	if !res.v.OK() || res.v.Sent != stopAudience || res.v.Arrivals != stopAudience || st.DuplicateActionKeys != 0 || st.Accepted != stopAudience {
		t.Fatalf("%s (mailbox accepted %d, flags %d duplicate keys)\n%s", res.v, st.Accepted, st.DuplicateActionKeys, res.v.Summary())
	}
	for _, k := range keys {
		atts := attemptsOf(t, ctx, path, k)
		for n := 1; n < len(atts); n++ {
			if atts[n].StartedAt.Before(atts[n-1].SettlesAt) {
				t.Errorf("%s: attempt %d began at %s, before attempt %d could no longer land (%s)", k, atts[n].Number,
					atts[n].StartedAt.Format(time.StampMilli), atts[n-1].Number, atts[n-1].SettlesAt.Format(time.StampMilli))
			}
		}
	}
	return res, nil
}

// approveRelease records an approved release "spring" of n eligible
// customers r1…rn to target and returns their action keys, r1's first.
func approveRelease(t *testing.T, ctx context.Context, path, target string, n int) []string {
	t.Helper()
	l, err := ledger.Open(path)
	must(t, err)
	defer l.Close()
	sd, err := smtpdest.New(target)
	must(t, err)
	var cs []ledger.Customer
	csv := "customer_id\n"
	for i := 1; i <= n; i++ {
		id := fmt.Sprintf("r%d", i)
		cs = append(cs, ledger.Customer{ID: id, Email: id + "@example.org", Consent: "yes"})
		csv += id + "\n"
	}
	must(t, l.UpsertCustomers(ctx, cs))
	_, err = l.ImportAudience(ctx, ledger.AudienceImport{ReleaseID: "spring", SourceName: "spring.csv",
		Source: strings.NewReader(csv), ActionType: "notice", Subject: "Opening hours change",
		Body: "Our opening hours change on 1 April.", Actor: "ops"}, l.Customers())
	must(t, err)
	must(t, l.ApproveAudienceAt(ctx, "spring", "lead", destination.EndpointOf(sd.Gate()), ""))
	rows, err := l.AudienceRows(ctx, "spring", ledger.RowEligible, n, 0)
	must(t, err)
	keys := make([]string, n)
	for _, r := range rows {
		var i int
		if _, err := fmt.Sscanf(r.CustomerID, "r%d", &i); err != nil || i < 1 || i > n {
			t.Fatalf("row %+v", r)
		}
		keys[i-1] = r.ActionKey
	}
	return keys
}

// releaseStates reads each key's action.
func releaseStates(t *testing.T, ctx context.Context, path string, keys []string) map[string]ledger.Action {
	t.Helper()
	l, err := ledger.OpenReadOnly(path)
	must(t, err)
	defer l.Close()
	out := map[string]ledger.Action{}
	for _, k := range keys {
		a, err := l.Action(ctx, k)
		must(t, err)
		out[k] = a
	}
	return out
}

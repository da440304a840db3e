package proof_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"gatehouse/destination"
	"gatehouse/destination/httpdest"
	smtpdest "gatehouse/destination/smtp"
	"gatehouse/internal/clock"
	"gatehouse/internal/pgtest"
	"gatehouse/ledger"
	"gatehouse/testmailbox"
)

var long = flag.Bool("proof.long", false, "run the long stress (8 processes × 2,000 actions); also PROOF_LONG=1")

// The test binary doubles as every executor process: with PROOF_ROLE set it
// plays that role against the ledger file and mailbox named in its
// environment, and exits without running any test.
func TestMain(m *testing.M) {
	if role := os.Getenv("PROOF_ROLE"); role != "" {
		os.Exit(playRole(role))
	}
	os.Exit(pgtest.Main(m))
}

// consentYes is the material snapshot every proof action is approved on and
// re-read with.
var consentYes = []ledger.MaterialRead{{Source: "crm", Field: "consent", Value: "yes"}}

// marker prints one line per step boundary the executor passes. At the
// boundary numbered killAt it stops and waits on stdin, so the parent can
// SIGKILL it at exactly that point; stdin closing without a kill means the
// parent gave up, and the process exits with 3. Marks may come from several
// goroutines (a pipelined send): they are numbered in the order they
// happen, and while one waits for its kill the others run on until they
// reach their next mark.
type marker struct {
	mu     sync.Mutex
	next   int
	killAt int
}

func (m *marker) mark(name string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	fmt.Printf("MARK %d %s\n", m.next, name)
	if m.next == m.killAt {
		io.Copy(io.Discard, os.Stdin)
		os.Exit(3)
	}
	m.next++
}

func playRole(role string) int {
	ctx := context.Background()
	killAt, err := strconv.Atoi(envOr("PROOF_KILL_AT", "-1"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	mk := &marker{killAt: killAt}
	var opts []ledger.Option
	if raw := os.Getenv("PROOF_LEASE"); raw != "" {
		lease, err := time.ParseDuration(raw)
		if err != nil {
			fmt.Fprintln(os.Stderr, "PROOF_LEASE:", err)
			return 2
		}
		opts = append(opts, ledger.WithLease(lease))
	}
	if raw := os.Getenv("PROOF_CLOCK_OFFSET"); raw != "" {
		off, err := time.ParseDuration(raw)
		if err != nil {
			fmt.Fprintln(os.Stderr, "PROOF_CLOCK_OFFSET:", err)
			return 2
		}
		opts = append(opts, ledger.WithClock(laterClock{off}))
	}
	l, err := ledger.Open(os.Getenv("PROOF_LEDGER"), opts...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "open ledger:", err)
		return 1
	}
	defer l.Close()
	dest, err := roleDestination(os.Getenv("PROOF_TARGET"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	actor := os.Getenv("PROOF_ACTOR")
	keys := strings.Split(os.Getenv("PROOF_KEYS"), ",")
	switch role {
	case "send":
		err = playSend(ctx, l, wrapDouble(dest, os.Getenv("PROOF_DOUBLE")), actor, keys, mk)
	case "takeover":
		err = playTakeover(ctx, l, dest, actor, os.Getenv("PROOF_TASK"), keys, mk)
	case "audience":
		err = playAudience(ctx, l, dest, actor, os.Getenv("PROOF_RELEASE"), concurrency(), mk)
	case "finish":
		err = playFinish(ctx, l, dest, actor, keys)
	case "finish-audience":
		err = playFinishAudience(ctx, l, dest, actor, os.Getenv("PROOF_RELEASE"))
	case "blast":
		err = playBlast(ctx, os.Getenv("PROOF_TARGET"))
	case "bench-send":
		stop := profileCPU(os.Getenv("PROOF_CPUPROFILE"))
		err = playBenchSend(ctx, l, dest, actor, os.Getenv("PROOF_RELEASE"))
		stop()
	case "end-to-end":
		err = playEndToEnd(ctx, l, dest, actor, os.Getenv("PROOF_RELEASE"))
	case "stress":
		err = playStress(ctx, l, dest)
	default:
		err = fmt.Errorf("unknown role %q", role)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, role+":", err)
		return 1
	}
	return 0
}

// roleDestination opens the destination a role's process sends to: the
// test mailbox's SMTP relay, or a payments fake's HTTP API (an http://
// target declaring its duplicate control).
func roleDestination(target string) (destination.Destination, error) {
	if strings.HasPrefix(target, "http://") {
		return httpdest.New(target)
	}
	sd, err := smtpdest.New(target)
	if err != nil {
		return nil, err
	}
	return sd.Gate(), nil
}

// laterClock is the wall clock moved on by a fixed offset: the process
// that finishes an HTTP world's run "a day later", when the provider's key
// window has ended, without anyone waiting a day.
type laterClock struct{ off time.Duration }

func (c laterClock) Now() time.Time { return clock.System{}.Now().Add(c.off) }

func (laterClock) NewTimer(d time.Duration) (clock.Timer, <-chan time.Time) {
	return clock.System{}.NewTimer(d)
}

func (laterClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	return clock.System{}.AfterFunc(d, f)
}

// profileCPU writes a CPU profile of this process to path (with the
// round appended) until the returned func is called; "" profiles nothing.
func profileCPU(path string) func() {
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path + "." + envOr("PROOF_ROUND", "0"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return func() {}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		fmt.Fprintln(os.Stderr, err)
		f.Close()
		return func() {}
	}
	return func() { pprof.StopCPUProfile(); f.Close() }
}

// concurrency is PROOF_CONCURRENCY: how many messages an audience send
// hands over at once (1 unless set).
func concurrency() int {
	n, _ := strconv.Atoi(envOr("PROOF_CONCURRENCY", "1"))
	return n
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// proc is one executor process started by a test.
type proc struct {
	Role   string
	Env    []string // NAME=value, added to the test's environment
	KillAt int      // SIGKILL at this boundary; -1 lets it run to the end
	// Bound is how long the process may take before it counts as hung
	// (default 3 minutes).
	Bound time.Duration
	// MayFinish: the process may end cleanly before its kill point (a test
	// whose kill point is drawn among marks a slow machine may skip).
	MayFinish bool
}

// procResult is what the parent saw of one executor.
type procResult struct {
	Marks  []string // boundary names, in order
	Killed bool
	Stdout string // lines other than marks
}

// run starts p, follows its boundary marks and, when it reaches p.KillAt,
// SIGKILLs it there. It waits for a condition (a line on a pipe), never for
// time; the context only bounds a process that hangs.
func run(t *testing.T, p proc) procResult {
	t.Helper()
	if p.Bound == 0 {
		p.Bound = 3 * time.Minute
	}
	ctx, cancel := context.WithTimeout(context.Background(), p.Bound)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), "PROOF_ROLE="+p.Role, "PROOF_KILL_AT="+strconv.Itoa(p.KillAt)), p.Env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var res procResult
	var other strings.Builder
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		var n int
		var name string
		if _, err := fmt.Sscanf(line, "MARK %d %s", &n, &name); err != nil {
			other.WriteString(line + "\n")
			continue
		}
		res.Marks = append(res.Marks, name)
		if n == p.KillAt && !res.Killed {
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatalf("kill %s at %s: %v", p.Role, name, err)
			}
			res.Killed = true
		}
	}
	err = cmd.Wait()
	res.Stdout = other.String()
	switch {
	case ctx.Err() != nil:
		t.Fatalf("%s did not finish within its bound; marks %v; stderr:\n%s", p.Role, res.Marks, stderr.String())
	case p.KillAt >= 0 && !res.Killed && (!p.MayFinish || err != nil):
		t.Fatalf("%s never reached boundary %d (marks %v): %v\n%s", p.Role, p.KillAt, res.Marks, err, stderr.String())
	case p.KillAt < 0 && err != nil:
		t.Fatalf("%s failed: %v\n%s", p.Role, err, stderr.String())
	case res.Killed:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != -1 {
			t.Fatalf("%s was not ended by the kill: %v\n%s", p.Role, err, stderr.String())
		}
	}
	return res
}

// startMailbox runs a real SMTP test mailbox with its HTTP API on loopback
// ports chosen by the system.
func startMailbox(t testing.TB, faults ...string) *testmailbox.Mailbox {
	t.Helper()
	var fs []testmailbox.Fault
	for _, s := range faults {
		f, err := testmailbox.ParseFault(s)
		if err != nil {
			t.Fatal(err)
		}
		fs = append(fs, f)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	mb, err := testmailbox.Start(ctx, testmailbox.Config{Faults: fs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mb.Close() })
	return mb
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"gatehouse/destination"
	filedest "gatehouse/destination/file"
	"gatehouse/internal/pgtest"
	"gatehouse/ledger"
	"gatehouse/testmailbox"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// gatehouseBinary builds the command once per test run, so the
// multi-process tests race real OS processes rather than goroutines.
func gatehouseBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "gatehouse-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "gatehouse")
		out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			buildErr = errors.New(string(out))
		}
	})
	if buildErr != nil {
		t.Fatalf("build gatehouse: %v", buildErr)
	}
	return binPath
}

func TestMain(m *testing.M) {
	// The test binary doubles as a process that holds a ledger open (see
	// holdLedger).
	if path := os.Getenv("GATEHOUSE_TEST_HOLD"); path != "" {
		os.Exit(holdLedger(path))
	}
	if path := os.Getenv("GATEHOUSE_TEST_LOCK"); path != "" {
		os.Exit(holdWriteLock(path))
	}
	code := pgtest.Main(m)
	if binPath != "" {
		os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}

func TestGateSendFromEightProcessesSendsOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	tests := []struct {
		Name string
		// target returns the destination URL and a function counting what
		// arrived there for the key.
		Target func(t *testing.T, e *gateEnv) (string, func(key string) int)
	}{
		{"FileTarget", func(t *testing.T, e *gateEnv) (string, func(string) int) {
			return e.target(), func(string) int { return len(e.emlFiles()) }
		}},
		{"MailboxTarget", func(t *testing.T, e *gateEnv) (string, func(string) int) {
			mb, err := testmailbox.Start(context.Background(), testmailbox.Config{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { mb.Close() })
			return mb.Target(), func(key string) int {
				n, err := mb.Count(context.Background(), testmailbox.Filter{ActionKey: key})
				if err != nil {
					t.Fatal(err)
				}
				return n
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.Name, func(t *testing.T) {
			e := newGateEnv(t)
			target, arrivals := tc.Target(t, e)
			key := e.approvedTo(target, "enq-race", "alice", "crm.consent=yes")
			exits := raceSend(t, 8, e, key, target)
			sent := 0
			var codes []int
			for i, x := range exits {
				codes = append(codes, x.code)
				if strings.Contains(x.stderr, "database is locked") {
					t.Errorf("process %d saw the lock: %s", i, x.stderr)
				}
				switch x.code {
				case exitOK:
					sent++
				case exitDuplicate, exitInFlight:
				default:
					t.Errorf("process %d: exit %d, want 0, 10 or 11: %s", i, x.code, x.stderr)
				}
			}
			t.Logf("exit codes: %v", codes)
			if sent != 1 {
				t.Errorf("%d processes sent, want exactly 1: %+v", sent, exits)
			}
			if n := arrivals(key); n != 1 {
				t.Errorf("%d arrivals at %s, want exactly one", n, target)
			}
		})
	}
}

type procExit struct {
	code   int
	stderr string
}

// raceSend starts n real `gatehouse gate send` processes of key at once.
func raceSend(t *testing.T, n int, e *gateEnv, key, target string) []procExit {
	bin := gatehouseBinary(t)
	exits := make([]procExit, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := exec.Command(bin, "gate", "send", "--ledger", e.ledger, "--key", key, "--as", "alice",
				"--material", "crm.consent=yes", "--destination", target)
			var errOut bytes.Buffer
			cmd.Stderr = &errOut
			<-start
			err := cmd.Run()
			var ee *exec.ExitError
			switch {
			case errors.As(err, &ee):
				exits[i] = procExit{ee.ExitCode(), errOut.String()}
			case err != nil:
				exits[i] = procExit{-1, err.Error()}
			default:
				exits[i] = procExit{0, errOut.String()}
			}
		}()
	}
	close(start)
	wg.Wait()
	return exits
}

// unknownOutcome leaves key with one attempt whose outcome is unknown, as a
// crash or a timeout after hand-over would. delivered says whether the
// message reached the file destination before that.
func (e *gateEnv) unknownOutcome(key string, delivered bool) {
	e.t.Helper()
	ctx := context.Background()
	// A lease already over: the attempt can no longer land once it ends
	// (a file destination settles at once), so reconcile may judge it.
	l, err := ledger.Open(e.ledger, ledger.WithLease(time.Millisecond))
	if err != nil {
		e.t.Fatal(err)
	}
	defer l.Close()
	d, err := filedest.New(e.outbox)
	if err != nil {
		e.t.Fatal(err)
	}
	_, msg, err := l.BeginAttempt(ctx, ledger.ExecuteRequest{Key: key, Executor: "alice", Endpoint: destination.EndpointOf(d)})
	if err != nil {
		e.t.Fatal(err)
	}
	if delivered {
		// The message lands, whatever the lease: the test plays the
		// destination, not the gate's send.
		if _, err := d.Send(ctx, msg); err != nil {
			e.t.Fatal(err)
		}
	}
	if _, err := l.RecordOutcome(ctx, msg.TransportID, destination.OutcomeUnknown, "connection lost after DATA"); err != nil {
		e.t.Fatal(err)
	}
}

// TestGateReconcile: reconcile asks only the records of the destination
// the attempt recorded; naming another is refused unless a person says it
// moved, with a reason.
func TestGateReconcile(t *testing.T) {
	tests := []struct {
		name      string
		delivered bool
		setup     func(e *gateEnv)
		args      func(e *gateEnv) []string
		code      int
		state     ledger.State
		cause     ledger.HoldCause
	}{
		{name: "FoundAtItsOwnDestinationIsSent", delivered: true,
			code: exitOK, state: ledger.StateSent},
		{name: "NamingItsOwnDestinationIsSent", delivered: true,
			args: func(e *gateEnv) []string { return []string{"--destination", e.target()} },
			code: exitOK, state: ledger.StateSent},
		{name: "AbsentIsHeldSafeToRetry", delivered: false,
			code: exitHeld, state: ledger.StateHeld, cause: ledger.HoldSafeToRetry},
		{name: "AnotherDestinationIsRefused", delivered: true,
			args: func(e *gateEnv) []string { return []string{"--destination", "file://" + e.t.TempDir()} },
			code: exitWrongDestination, state: ledger.StateUnknown},
		{name: "MovedNeedsAReason", delivered: true,
			args: func(e *gateEnv) []string {
				return []string{"--destination", "file://" + e.t.TempDir(), "--destination-moved"}
			},
			code: exitUsage, state: ledger.StateUnknown},
		{name: "MovedWithAReasonIsAsked", delivered: true,
			setup: func(e *gateEnv) {
				if err := os.Rename(e.outbox, e.outbox+"-moved"); err != nil {
					e.t.Fatal(err)
				}
			},
			args: func(e *gateEnv) []string {
				return []string{"--destination", "file://" + e.outbox + "-moved", "--destination-moved", "--reason", "the outbox was moved"}
			},
			code: exitOK, state: ledger.StateSent},
		{name: "MissingDirectoryIsHeldUnknown", delivered: false,
			setup: func(e *gateEnv) {
				if err := os.RemoveAll(e.outbox); err != nil {
					e.t.Fatal(err)
				}
			},
			code: exitHeld, state: ledger.StateHeld, cause: ledger.HoldUnknownOutcome},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newGateEnv(t)
			key := e.approved("enq-unknown", "alice")
			e.unknownOutcome(key, tt.delivered)
			wantExit(t, e.send(key, "alice"), exitUnknown, "reconcile")
			if tt.setup != nil {
				tt.setup(e)
			}
			args := []string{"reconcile", "--key", key, "--as", "ops"}
			if tt.args != nil {
				args = append(args, tt.args(e)...)
			}
			wantExit(t, e.gate(args...), tt.code)
			l, err := ledger.Open(e.ledger)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			a, err := l.Action(context.Background(), key)
			if err != nil {
				t.Fatal(err)
			}
			if a.State != tt.state || a.HoldCause != tt.cause {
				t.Fatalf("after reconcile: %s/%s (%s), want %s/%s", a.State, a.HoldCause, a.Reason, tt.state, tt.cause)
			}
			if n := len(e.emlFiles()); n > 1 {
				t.Fatalf("reconcile re-sent: %d messages", n)
			}
		})
	}
}

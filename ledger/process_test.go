package ledger_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"gatehouse/destination"
	"gatehouse/destination/fake"
	"gatehouse/internal/pgtest"
	"gatehouse/ledger"
)

// The test binary doubles as the executor process for the multi-process and
// crash tests: with GATEHOUSE_TEST_ROLE set it plays that role and exits.
func TestMain(m *testing.M) {
	if role := os.Getenv("GATEHOUSE_TEST_ROLE"); role != "" {
		os.Exit(playRole(role, os.Getenv("GATEHOUSE_TEST_LEDGER"), os.Getenv("GATEHOUSE_TEST_KEY"), os.Getenv("GATEHOUSE_TEST_OUT")))
	}
	os.Exit(pgtest.Main(m))
}

// appendDestination "delivers" by appending one line per message to a file
// shared by all processes, so arrivals can be counted across processes.
type appendDestination struct{ path string }

// Identity is the one the test proposals name.
func (appendDestination) Identity() string { return fake.DefaultName }

func (d appendDestination) Send(_ context.Context, m destination.Message) (destination.Receipt, error) {
	f, err := os.OpenFile(d.path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return destination.Receipt{}, &destination.DeliveryError{Outcome: destination.OutcomeNotDelivered, Err: err}
	}
	defer f.Close()
	_, err = fmt.Fprintf(f, "%s %s\n", m.ActionKey, m.TransportID)
	if err != nil {
		return destination.Receipt{}, &destination.DeliveryError{Outcome: destination.OutcomeUnknown, Err: err}
	}
	return destination.Receipt{TransportID: m.TransportID, Response: "appended"}, f.Sync()
}

func playRole(role, path, key, out string) int {
	l, err := ledger.Open(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer l.Close()
	req := ledger.ExecuteRequest{Key: key, Executor: "wf-ack", Reread: consentYes}
	switch role {
	case "send":
		_, err := l.Execute(context.Background(), req, appendDestination{out})
		switch {
		case err == nil:
			return 0
		case errors.Is(err, ledger.ErrDuplicate):
			return 10
		case errors.Is(err, ledger.ErrInFlight):
			return 11
		default:
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	case "crash-after-begin":
		req.Endpoint = destination.EndpointOf(appendDestination{out})
		_, _, err := l.BeginAttempt(context.Background(), req)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Println("attempt recorded")
		select {} // wait to be killed before the outcome is recorded
	}
	return 3
}

func startRole(t *testing.T, role, path, key, out string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "GATEHOUSE_TEST_ROLE="+role, "GATEHOUSE_TEST_LEDGER="+path,
		"GATEHOUSE_TEST_KEY="+key, "GATEHOUSE_TEST_OUT="+out)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	return cmd, &stderr
}

func TestEightProcessesRaceOnOneLedgerFile(t *testing.T) {
	w := newWorld(t)
	a := w.approved("wf-ack")
	w.l.Close()
	out := filepath.Join(t.TempDir(), "arrivals.txt")

	const n = 8
	codes := make([]int, n)
	stderrs := make([]*bytes.Buffer, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		cmd, stderr := startRole(t, "send", w.path, a.Key, out)
		stderrs[i] = stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			cmd.Wait()
			codes[i] = cmd.ProcessState.ExitCode()
		}(i)
	}
	wg.Wait()
	var sent, refused int
	for i, c := range codes {
		switch c {
		case 0:
			sent++
		case 10, 11:
			refused++
		default:
			t.Errorf("process %d exited %d: %s", i, c, stderrs[i])
		}
		if strings.Contains(stderrs[i].String(), "locked") {
			t.Errorf("process %d saw a lock error: %s", i, stderrs[i])
		}
	}
	data, err := os.ReadFile(out)
	w.must(err)
	if lines := strings.Count(string(data), "\n"); sent != 1 || refused != n-1 || lines != 1 {
		t.Fatalf("sent=%d refused=%d arrivals=%d", sent, refused, lines)
	}
}

func TestKilledExecutorLeavesUnknownUntilReconciled(t *testing.T) {
	w := newWorld(t)
	a := w.approved("wf-ack")
	cmd, stderr := startRole(t, "crash-after-begin", w.path, a.Key, "")
	stdout, err := cmd.StdoutPipe()
	w.must(err)
	w.must(cmd.Start())
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || !strings.Contains(line, "attempt recorded") {
		t.Fatalf("executor did not record its attempt: %q %v %s", line, err, stderr)
	}
	if got := w.state(a.Key); got != ledger.StateExecuting {
		t.Fatalf("state while in flight = %s", got)
	}
	// A second executor is refused while the first is alive and in flight.
	if _, err := w.execute(a.Key, "wf-ack", consentYes); !errors.Is(err, ledger.ErrInFlight) {
		t.Fatalf("second executor while in flight: %v", err)
	}
	w.must(cmd.Process.Signal(syscall.SIGKILL))
	cmd.Wait()

	// Re-opening recovers: the dead executor's attempt becomes unknown.
	w.l.Close()
	w.open()
	if got := w.state(a.Key); got != ledger.StateUnknown {
		t.Fatalf("state after restart = %s", got)
	}
	if _, err := w.execute(a.Key, "wf-ack", consentYes); !errors.Is(err, ledger.ErrUnknownOutcome) {
		t.Fatalf("second executor before reconcile: %v", err)
	}
	if w.dest.Calls() != 0 {
		t.Fatal("recovery re-sent")
	}
	// Nothing arrived: reconcile proves it, and a reviewed retry sends once.
	w.settled(a.Key)
	got, err := w.reconcile(a.Key, "ops")
	w.must(err)
	if got.State != ledger.StateHeld || got.HoldCause != ledger.HoldSafeToRetry {
		t.Fatalf("after reconcile: %s/%s", got.State, got.HoldCause)
	}
	_, err = w.l.ReleaseHold(w.ctx, a.Key, "ops", "checked: nothing arrived")
	w.must(err)
	_, err = w.execute(a.Key, "wf-ack", consentYes)
	w.must(err)
	if w.dest.Calls() != 1 {
		t.Fatalf("calls = %d", w.dest.Calls())
	}
	hist := historyText(t, w, a.Key)
	if !strings.Contains(hist, "will not be re-sent until reconciled") {
		t.Fatalf("history lacks the recovery:\n%s", hist)
	}
}

func TestLeaseExpiryMarksUnknown(t *testing.T) {
	w := newWorld(t)
	a := w.approved("wf-ack")
	_, _, err := w.l.BeginAttempt(w.ctx, ledger.ExecuteRequest{Key: a.Key, Executor: "wf-ack", Reread: consentYes, Endpoint: destination.EndpointOf(w.dest)})
	w.must(err)
	marked, err := w.l.Recover(w.ctx)
	w.must(err)
	if len(marked) != 0 {
		t.Fatalf("a live attempt within its lease was recovered: %v", marked)
	}
	w.clock.Advance(3 * 60e9)
	marked, err = w.l.Recover(w.ctx)
	w.must(err)
	if len(marked) != 1 || w.state(a.Key) != ledger.StateUnknown {
		t.Fatalf("marked %v, state %s", marked, w.state(a.Key))
	}
}

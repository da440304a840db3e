package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gatehouse/fakes"
	"gatehouse/internal/pgtest"
	"gatehouse/testmailbox"
)

// forgedClock serves, on loopback, what a rehearsal's clock serves: a time
// two hours ahead and the name of the ledger it claims to belong to. Anyone
// on the host can serve it.
func forgedClock(t *testing.T, ledgerPath string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		json.NewEncoder(w).Encode(map[string]any{"now": time.Now().Add(2 * time.Hour).UTC(), "ledger": ledgerPath})
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/clock"
}

// binaryRun runs the real binary with env added to the test's environment.
func binaryRun(t *testing.T, env []string, args ...string) result {
	t.Helper()
	cmd := exec.Command(gatehouseBinary(t), args...)
	cmd.Env = append(os.Environ(), env...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return result{code: ee.ExitCode(), stdout: out.String(), stderr: errOut.String()}
	case err != nil:
		t.Fatal(err)
	}
	return result{stdout: out.String(), stderr: errOut.String()}
}

// TestForgedClockCannotSendTwice: on a registered ledger with tokens, a
// workflow with only propose and execute serves a clock two hours ahead
// naming the ledger, and runs reconcile, release-hold and send while
// another executor's attempt is in flight behind a relay holding the
// message. The ledger is no rehearsal's, so every one of those verbs is
// refused at the door (exit 2, naming the variable, nothing recorded), and
// the customer gets the message once, when the relay lets it go. On
// PostgreSQL as on a file.
func TestForgedClockCannotSendTwice(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	t.Run("SQLite", func(t *testing.T) { forgedClockAttack(t, newGateEnv(t)) })
	t.Run("Postgres", func(t *testing.T) {
		forgedClockAttack(t, &gateEnv{t: t, ledger: pgtest.Database(t), outbox: filepath.Join(t.TempDir(), "outbox")})
	})
}

// forgedClockAttack runs the attack on e's ledger, registered as the
// README registers one: lead (a person with every role, a token), wf-ack
// (a workflow: propose and execute), tokens required.
func forgedClockAttack(t *testing.T, e *gateEnv) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	mbClock := fakes.NewClock(time.Now())
	mb, err := testmailbox.Start(ctx, testmailbox.Config{Clock: mbClock,
		Faults: []testmailbox.Fault{{Kind: testmailbox.FaultHoldThenStore, Duration: time.Hour, Count: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	defer mb.Close()
	e.mustFamily("actors", "add", "--as", "lead", "--id", "lead", "--kind", "person",
		"--roles", "propose,approve,execute,resolve,release,takeover,stop,operate,review,admin")
	e.mustFamily("actors", "add", "--as", "lead", "--id", "wf-ack", "--kind", "workflow")
	var tok issuedToken
	decodeOne(t, e.mustFamily("actors", "token", "--as", "lead", "--id", "lead", "--json").stdout, &tok)
	lead := tok.Token
	e.mustFamily("actors", "require", "--as", "lead", "--tokens", "--token", lead)
	e.must("claim", "--task", "task-forged", "--customer", "cust-42", "--as", "wf-ack")
	key := strings.TrimSpace(e.must("propose", "--as", "wf-ack", "--task", "task-forged",
		"--customer", "cust-42", "--event", "enq-forged", "--type", "reply_ack", "--target", "task-forged",
		"--to", "ada@example.com", "--subject", "We received your enquiry", "--body", "Hello Ada,\nthanks.",
		"--destination", mb.Target()).stdout)
	e.must("approve", "--key", key, "--as", "lead", "--token", lead)

	// Another executor's attempt: the relay reads the whole message and
	// holds it, so the executor waits for its reply.
	first := exec.Command(gatehouseBinary(t), "gate", "send", "--ledger", e.ledger, "--key", key, "--as", "wf-ack",
		"--destination", mb.Target())
	var firstErr bytes.Buffer
	first.Stderr = &firstErr
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- first.Wait() }()
	if err := mbClock.BlockUntil(ctx, 1); err != nil {
		t.Fatalf("the relay never held attempt 1: %v", err)
	}
	before := len(historyLines(t, e))

	forged := []string{rehearsalClockEnv + "=" + forgedClock(t, e.ledger)}
	for _, verb := range [][]string{
		{"reconcile", "--key", key},
		{"release-hold", "--key", key, "--reason", "did not arrive"},
		{"send", "--key", key, "--destination", mb.Target()},
	} {
		args := append([]string{"gate"}, verb...)
		args = append(args, "--as", "wf-ack", "--ledger", e.ledger)
		r := binaryRun(t, forged, args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, "$"+rehearsalClockEnv) || !strings.Contains(r.stderr, "unset it") {
			t.Errorf("gate %s with a forged clock: exit %d, want %d naming $%s\nstdout: %s\nstderr: %s",
				verb[0], r.code, exitUsage, rehearsalClockEnv, r.stdout, r.stderr)
		}
	}
	if after := historyLines(t, e); len(after) != before {
		t.Errorf("the refused verbs recorded %d history line(s): %v", len(after)-before, after[before:])
	}

	mbClock.Advance(time.Hour) // the relay lets attempt 1 go
	select {
	case err := <-done:
		var ee *exec.ExitError
		if err != nil && (!errors.As(err, &ee) || ee.ExitCode() != exitUnknown) {
			t.Errorf("attempt 1: %v, want sent (or unknown, had it waited past its data timeout)\n%s", err, firstErr.String())
		}
	case <-ctx.Done():
		t.Fatal("attempt 1 never ended")
	}
	if n, err := mb.WaitFor(ctx, testmailbox.Filter{ActionKey: key}, 1); err != nil || n != 1 {
		t.Fatalf("%d arrivals, %v; want exactly 1", n, err)
	}
	if n, _ := mb.Count(ctx, testmailbox.Filter{ActionKey: key}); n != 1 {
		t.Fatalf("%d arrivals for %s, want exactly 1", n, key)
	}
}

// historyLines is the ledger's whole history, one "kind: message" a line.
func historyLines(t *testing.T, e *gateEnv) []string {
	t.Helper()
	var h struct {
		Events []struct{ Kind, Message string } `json:"events"`
	}
	decodeOne(t, e.must("history", "--json").stdout, &h)
	var lines []string
	for _, ev := range h.Events {
		lines = append(lines, ev.Kind+": "+ev.Message)
	}
	return lines
}

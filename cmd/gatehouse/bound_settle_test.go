package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gatehouse/fakes"
	"gatehouse/ledger"
	"gatehouse/testmailbox"
)

// relayHolding is a test mailbox that holds the next message it takes the
// final dot for (hold_then_store), on a clock the test moves: a relay that
// keeps a message while its sender gives up waiting for the 250.
func relayHolding(t *testing.T) (*testmailbox.Mailbox, *fakes.Clock) {
	t.Helper()
	mbClock := fakes.NewClock(time.Now())
	mb, err := testmailbox.Start(t.Context(), testmailbox.Config{Clock: mbClock,
		Faults: []testmailbox.Fault{{Kind: testmailbox.FaultHoldThenStore, Duration: time.Hour, Count: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mb.Close() })
	return mb, mbClock
}

// releaseHeld lets the relay store the message it holds, once it holds
// one, and returns once it holds none and no session is open: what arrived
// is then the last word.
func releaseHeld(t *testing.T, mb *testmailbox.Mailbox, mbClock *fakes.Clock) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := mbClock.BlockUntil(ctx, 1); err != nil {
		t.Fatalf("the relay holds no message: %v", err)
	}
	mbClock.Advance(time.Hour)
	for {
		st, err := mb.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.Held == 0 && st.Sessions == 0 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the relay still holds %d message(s) with %d session(s) open", st.Held, st.Sessions)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// mayStillLand is a reconcile's answer while the attempt may still land:
// in flight, or held as not found yet.
func mayStillLand(r result) bool {
	return r.code == exitInFlight || r.code == exitUnknown ||
		(r.code == exitHeld && strings.Contains(r.stderr+r.stdout, "may still land"))
}

// heldOrUnknown is an audience send's answer while a recipient waits.
func heldOrUnknown(r result) bool { return r.code == exitHeld || r.code == exitUnknown }

// repeatWhile repeats run while open says its answer is not final yet,
// and returns the first that is: the attack waits for the gate's own
// "absent", whenever the settle time it works with ends.
func repeatWhile(t *testing.T, open func(result) bool, run func() result) result {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := run()
		if !open(r) {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("still open after 30 s: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// historyLines is the whole history, oldest first.
func (b *binEnv) historyLines() []eventView {
	b.t.Helper()
	var out historyView
	decodeOne(b.t, b.mustRun("history", "--json", "--limit", "10000").stdout, &out)
	return out.Events
}

// TestSendCannotShortenTheApprovedSettleTime is the attack of a workflow
// that names a shorter settle time at send: the action is approved for a
// mailbox whose settle time is the SMTP default (a minute), attempts hold
// a 2 s lease, and a relay holds the message. A send naming settle=1s was
// handed over (unknown), a reconcile 3 s later found nothing and said "safe
// to retry", the hold was released and the action sent again: the relay
// delivered both. Now the send is refused (17) with only its refusal
// recorded, and the customer gets one message.
func TestSendCannotShortenTheApprovedSettleTime(t *testing.T) {
	b := newBinEnv(t)
	t.Setenv("GATEHOUSE_LEASE", "2s")
	mb, mbClock := relayHolding(t)
	key := b.approvedVia(mb.Target(), "enq-settle")
	send := []string{"send", "--key", key, "--as", "wf", "--material", "crm.consent=yes"}
	before := len(b.historyLines())

	r := b.run(append(send, "--destination", mb.Target()+"&settle=1s")...)
	if r.code != exitWrongDestination || !strings.Contains(r.stderr, "the approved settle time is 1m0s, not 1s") {
		t.Errorf("send naming settle=1s: exit %d, want %d naming the approved settle time\n%s", r.code, exitWrongDestination, r.stderr)
	}
	refusedOnly(t, b, key, before)

	// The attack goes on as it used to.
	repeatWhile(t, mayStillLand, func() result { return b.run("reconcile", "--key", key, "--as", "ops") })
	b.run("release-hold", "--key", key, "--as", "lead", "--reason", "nothing arrived")
	b.run(send...)
	releaseHeld(t, mb, mbClock)

	if n, err := mb.Count(t.Context(), testmailbox.Filter{ActionKey: key}); err != nil || n != 1 {
		t.Fatalf("%d messages arrived for %s (%v), want 1", n, key, err)
	}
	var sv struct {
		Attempts []json.RawMessage `json:"attempts"`
	}
	decodeOne(t, b.mustRun("show", "--key", key, "--json").stdout, &sv)
	if len(sv.Attempts) != 1 {
		t.Fatalf("%d attempts, want the one the relay held", len(sv.Attempts))
	}
}

// refusedOnly fails unless the refused send left the action approved with
// no attempt, and the history one line longer: the refusal.
func refusedOnly(t *testing.T, b *binEnv, key string, before int) {
	t.Helper()
	var sv struct {
		Action struct {
			State string `json:"state"`
		} `json:"action"`
		Attempts []json.RawMessage `json:"attempts"`
	}
	decodeOne(t, b.mustRun("show", "--key", key, "--json").stdout, &sv)
	h := b.historyLines()
	if sv.Action.State != string(ledger.StateApproved) || len(sv.Attempts) != 0 || len(h) != before+1 ||
		h[len(h)-1].Kind != string(ledger.EvWrongDestination) {
		last := eventView{}
		if len(h) > 0 {
			last = h[len(h)-1]
		}
		t.Errorf("after the refused send: %s with %d attempts, %d history lines after %d, the last %s: %q; want approved, none, the refusal alone",
			sv.Action.State, len(sv.Attempts), len(h), before, last.Kind, last.Message)
	}
}

// TestAudienceSendCannotShortenTheApprovedSettleTime is the same attack on
// a release: approved for the mailbox (a minute's settle time), sent with
// settle=1s while the relay holds the first notice, then sent again with
// it once that had passed: the re-run reconciled the held recipient as
// absent and sent it again. Now the send is refused (17) before any
// recipient is touched, and every customer gets one notice.
func TestAudienceSendCannotShortenTheApprovedSettleTime(t *testing.T) {
	b := newBinEnv(t)
	t.Setenv("GATEHOUSE_LEASE", "2s")
	mb, mbClock := relayHolding(t)
	dir := t.TempDir()
	file, custom := filepath.Join(dir, "spring.csv"), filepath.Join(dir, "customers.csv")
	for path, text := range map[string]string{file: testAudience, custom: testCustomers} {
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	audience := func(args ...string) result {
		return runCommand(t, exec.Command(b.bin, append(append([]string{"audience"}, args...), "--ledger", b.ledger)...))
	}
	for _, args := range [][]string{
		{"reconcile", "--release", "spring", "--file", file, "--customers", custom, "--as", "ops",
			"--subject", "Opening hours change", "--body", "From 1 April we open at nine."},
		{"approve", "--release", "spring", "--as", "lead", "--destination", mb.Target()},
	} {
		if r := audience(args...); r.code != 0 {
			t.Fatalf("audience %s: exit %d\n%s", args[0], r.code, r.stderr)
		}
	}
	before := len(b.historyLines())
	shorter := []string{"send", "--release", "spring", "--destination", mb.Target() + "&settle=1s", "--as", "notice-bot"}

	r := audience(shorter...)
	if r.code != exitWrongDestination || !strings.Contains(r.stderr, "the approved settle time is 1m0s, not 1s") {
		t.Errorf("audience send naming settle=1s: exit %d, want %d naming the approved settle time\n%s", r.code, exitWrongDestination, r.stderr)
	}
	if h := b.historyLines(); len(h) != before+1 || h[len(h)-1].Kind != string(ledger.EvWrongDestination) {
		t.Errorf("after the refused audience send: %d history lines after %d; want the refusal alone", len(h), before)
	}

	// The attack goes on as it used to: run again until the held
	// recipient is settled on the named settle time, then a plain run.
	repeatWhile(t, heldOrUnknown, func() result { return audience(shorter...) })
	plain := []string{"send", "--release", "spring", "--destination", mb.Target(), "--as", "notice-bot"}
	audience(plain...)
	releaseHeld(t, mb, mbClock)
	if r := repeatWhile(t, heldOrUnknown, func() result { return audience(plain...) }); r.code != exitOK {
		t.Errorf("the last run: exit %d\n%s", r.code, r.stderr)
	}

	for _, to := range []string{"ada@example.org", "bea@example.org", "eve@example.org"} {
		if n, err := mb.Count(t.Context(), testmailbox.Filter{To: to}); err != nil || n != 1 {
			t.Errorf("%s has %d notices (%v), want 1", to, n, err)
		}
	}
}

package main

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"gatehouse/destination"
	filedest "gatehouse/destination/file"
	"gatehouse/ledger"
)

// landLate writes attempt n of key into the env's outbox, as the
// destination would store it had its hand-over finished after the attempt
// was settled: the residual window, forced.
func (e *gateEnv) landLate(key string, n int) {
	e.t.Helper()
	l, err := ledger.OpenReadOnly(e.ledger)
	if err != nil {
		e.t.Fatal(err)
	}
	defer l.Close()
	d, err := l.Detail(context.Background(), key)
	if err != nil {
		e.t.Fatal(err)
	}
	at := d.Attempts[n-1]
	out, err := filedest.New(e.outbox)
	if err != nil {
		e.t.Fatal(err)
	}
	msg := destination.Message{ActionKey: key, Attempt: at.Number, TransportID: at.TransportID, From: at.Sender, To: at.Recipient,
		Subject: d.Action.Subject, Body: d.Action.Body, Target: d.Action.Target}
	if _, err := out.Send(context.Background(), msg); err != nil {
		e.t.Fatal(err)
	}
}

// squash is text with its runs of white space (a table's padding) made one
// space.
func squash(s string) string { return strings.Join(strings.Fields(s), " ") }

// sentTwiceInTheWorld leaves key sent by attempt 2, after attempt 1 was
// reconciled as absent and released, with attempt 1's message landed in
// the outbox afterwards: the customer has it twice and the ledger does
// not know yet.
func (e *gateEnv) sentTwiceInTheWorld(key string) {
	e.t.Helper()
	e.unknownOutcome(key, false)
	wantExit(e.t, e.gate("reconcile", "--key", key, "--as", "ops"), exitHeld)
	e.must("release-hold", "--key", key, "--as", "lead", "--reason", "nothing arrived")
	wantExit(e.t, e.send(key, "alice"), exitOK)
	e.landLate(key, 1)
	if n := len(e.emlFiles()); n != 2 {
		e.t.Fatalf("%d messages in the outbox, want 2", n)
	}
}

// TestLedgerCheckRecordsFindsWhatArrivedLate: a plain check cannot know
// what it never read; check --records reads the records of the attempt
// settled as absent again, records the late arrival in the history (once)
// and names it, and from then on a plain check, show and metrics say it
// too. Late evidence is a finding, not a violation: check still exits 0.
func TestLedgerCheckRecordsFindsWhatArrivedLate(t *testing.T) {
	e := newGateEnv(t)
	key := e.approved("enq-late", "alice")
	e.sentTwiceInTheWorld(key)

	r := ledgerCmd("check", "--ledger", e.ledger)
	wantExit(t, r, exitOK)
	if strings.Contains(r.stdout, "finding") {
		t.Fatalf("a plain check named what nobody read yet:\n%s", r.stdout)
	}

	r = ledgerCmd("check", "--ledger", e.ledger, "--records")
	wantExit(t, r, exitOK)
	for _, want := range []string{"records: read again for 1 attempt settled as not arrived (0 without records to read); 1 attempt arrived after all",
		"finding: late evidence: " + key + ": Attempt 1 of " + key + " arrived after all",
		"finding: arrived twice: " + key + ": attempts 1 and 2 arrived", "2 findings above"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("check --records does not say %q:\n%s", want, r.stdout)
		}
	}
	// Recorded once: reading again finds nothing new.
	r = ledgerCmd("check", "--ledger", e.ledger, "--records", "--json")
	wantExit(t, r, exitOK)
	var v ledgerCheckView
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
		t.Fatalf("%v: %s", err, r.stdout)
	}
	if !v.OK || v.Records == nil || v.Records.Read != 0 || v.Records.Found != 0 || len(v.Findings) != 2 ||
		v.Findings[0].Rule != ledger.RuleLateEvidence || v.Findings[0].Attempt != 1 || v.Findings[1].Rule != ledger.RuleArrivedTwice {
		t.Fatalf("second check --records --json: %s", r.stdout)
	}
	r = ledgerCmd("check", "--ledger", e.ledger)
	wantExit(t, r, exitOK)
	if !strings.Contains(r.stdout, "finding: late evidence: "+key) {
		t.Fatalf("a plain check does not name the recorded late evidence:\n%s", r.stdout)
	}

	show := squash(e.must("show", "--key", key).stdout)
	for _, want := range []string{"state: sent", "ARRIVED TWICE: the customer has the message more than once", "not_delivered (reconciled), but ARRIVED LATE"} {
		if !strings.Contains(show, want) {
			t.Errorf("show does not say %q:\n%s", want, show)
		}
	}
	var sv struct {
		Action struct {
			State        string `json:"state"`
			LateArrivals int    `json:"late_arrivals"`
			ArrivedTwice bool   `json:"arrived_twice"`
		} `json:"action"`
		Attempts []struct {
			ArrivedLate *string `json:"arrived_late"`
		} `json:"attempts"`
		History []struct{ Kind string } `json:"history"`
	}
	decodeOne(t, e.must("show", "--key", key, "--json").stdout, &sv)
	if sv.Action.State != "sent" || sv.Action.LateArrivals != 1 || !sv.Action.ArrivedTwice || len(sv.Attempts) != 2 ||
		sv.Attempts[0].ArrivedLate == nil || sv.Attempts[1].ArrivedLate != nil {
		t.Fatalf("show --json: %+v", sv)
	}
	lines := 0
	for _, h := range sv.History {
		if h.Kind == string(ledger.EvLateArrival) {
			lines++
		}
	}
	if lines != 1 {
		t.Fatalf("%d late_arrival lines in the history, want 1", lines)
	}

	var m metricsView
	decodeOne(t, e.must("metrics", "--json").stdout, &m)
	if m.LateEvidence != 1 || m.ArrivedTwice != 1 {
		t.Fatalf("metrics: late evidence %d, arrived twice %d; want 1 and 1", m.LateEvidence, m.ArrivedTwice)
	}
	if text := squash(e.must("metrics").stdout); !strings.Contains(text, "late evidence: 1") || !strings.Contains(text, "arrived twice: 1") {
		t.Fatalf("metrics text:\n%s", text)
	}
}

// TestLedgerCheckRecordsWhenTheRecordsCannotBeRead: records that cannot
// be read are named per attempt and make check exit 1, since what was
// asked was not checked; nothing is recorded, and the next check, once
// they can be read, finds the late arrival.
func TestLedgerCheckRecordsWhenTheRecordsCannotBeRead(t *testing.T) {
	e := newGateEnv(t)
	key := e.approved("enq-late", "alice")
	e.sentTwiceInTheWorld(key)
	away := e.outbox + ".away"
	if err := os.Rename(e.outbox, away); err != nil {
		t.Fatal(err)
	}
	r := ledgerCmd("check", "--ledger", e.ledger, "--records")
	wantExit(t, r, exitOther, "the records of 1 attempt could not be read; they were not checked")
	if !strings.Contains(r.stdout, "unreadable: "+key+": attempt 1: ") || strings.Contains(r.stdout, "finding") {
		t.Fatalf("check --records with the outbox gone:\n%s", r.stdout)
	}
	if _, err := os.Stat(e.outbox); err == nil {
		t.Fatal("reading the records created the outbox")
	}
	var m metricsView
	decodeOne(t, e.must("metrics", "--json").stdout, &m)
	if m.LateEvidence != 0 {
		t.Fatalf("late evidence %d from records that could not be read", m.LateEvidence)
	}
	if err := os.Rename(away, e.outbox); err != nil {
		t.Fatal(err)
	}
	r = ledgerCmd("check", "--ledger", e.ledger, "--records")
	wantExit(t, r, exitOK)
	if !strings.Contains(r.stdout, "finding: late evidence: "+key) {
		t.Fatalf("check --records once the outbox is back:\n%s", r.stdout)
	}
}

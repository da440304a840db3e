package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"gatehouse/destination"
	filedest "gatehouse/destination/file"
	"gatehouse/destination/registry"
	smtpdest "gatehouse/destination/smtp"
	"gatehouse/fakes"
	"gatehouse/ledger"
	"gatehouse/testmailbox"
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

// forceResidualWindow runs the incident the settle time cannot rule out,
// against a real mailbox on loopback: the mailbox takes attempt 1's final
// dot and holds the message (hold_then_store, on its own clock) while the
// sender gives up waiting for the 250 (unknown); once the attempt's lease
// and settle time are over (on the ledger's clock) reconciliation finds
// nothing, a person releases the hold and attempt 2 is sent and stored; then
// the mailbox stores attempt 1 too. The customer has it twice, and the ledger
// does not know yet. It returns the env and the action's key.
func forceResidualWindow(t *testing.T) (*gateEnv, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	mbClock, ledgerClock := fakes.NewClock(time.Now()), fakes.NewClock(time.Now())
	mb, err := testmailbox.Start(ctx, testmailbox.Config{Clock: mbClock,
		Faults: []testmailbox.Fault{{Kind: testmailbox.FaultHoldThenStore, Duration: time.Hour, Count: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mb.Close() })
	e := newGateEnv(t)
	// Approved for a relay said to settle within a second: the incident is
	// the hold that outlasts even that.
	target := mb.Target() + "&settle=1s"
	key := e.approvedTo(target, "enq-window", "alice")
	l, err := ledger.Open(e.ledger, ledger.WithClock(ledgerClock))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	impatient, err := smtpdest.New(target, smtpdest.WithDataTimeout(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	req := ledger.ExecuteRequest{Key: key, Executor: "alice"}
	if _, err := l.Execute(ctx, req, impatient.Gate()); !errors.Is(err, ledger.ErrUnknownOutcome) {
		t.Fatalf("attempt 1 against a mailbox that holds the final dot: %v, want unknown", err)
	}
	if err := mbClock.BlockUntil(ctx, 1); err != nil { // the mailbox holds attempt 1
		t.Fatal(err)
	}
	ledgerClock.Advance(5 * time.Minute) // its lease and settle time are over
	a, err := l.Reconcile(ctx, ledger.ReconcileRequest{Key: key, Actor: "ops", Open: registry.Records()})
	if a.State != ledger.StateHeld || a.HoldCause != ledger.HoldSafeToRetry {
		t.Fatalf("reconcile after the settle time: %s/%s %q, %v; want safe to retry", a.State, a.HoldCause, a.Reason, err)
	}
	if _, err := l.ReleaseHold(ctx, key, "lead", "nothing arrived"); err != nil {
		t.Fatal(err)
	}
	prompt, err := smtpdest.New(target)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Execute(ctx, req, prompt.Gate()); err != nil {
		t.Fatalf("attempt 2: %v", err)
	}
	mbClock.Advance(time.Hour) // the mailbox stores attempt 1 at last
	if n, err := mb.WaitFor(ctx, testmailbox.Filter{ActionKey: key}, 2); err != nil || n != 2 {
		t.Fatalf("%d stored for the key, %v; want both attempts", n, err)
	}
	return e, key
}

// TestResidualWindowIsCaughtAsLateEvidence forces the residual window and
// has it found by each way that reads the records again: the next
// reconcile of the action, and ledger check --records. Either way the
// history holds one late_arrival line for attempt 1, and show, metrics, the
// review and ledger check each say that the action arrived twice while it
// stays sent.
func TestResidualWindowIsCaughtAsLateEvidence(t *testing.T) {
	for _, finder := range []struct {
		name string
		find func(t *testing.T, e *gateEnv, key string)
	}{
		{"NextReconcile", func(t *testing.T, e *gateEnv, key string) {
			// The action is sent: nothing is open, so reconcile exits 19,
			// but it reads the earlier attempt's records again, and the
			// first time the message is found there it says so (10).
			want := exitDuplicate
			if strings.Contains(e.must("history", "--key", key).stdout, "arrived after all") {
				want = exitNothingToDo // found by the first call already: nothing new
			}
			wantExit(t, e.gate("reconcile", "--key", key, "--as", "ops"), want)
		}},
		{"LedgerCheckRecords", func(t *testing.T, e *gateEnv, _ string) {
			wantExit(t, ledgerCmd("check", "--ledger", e.ledger, "--records"), exitOK)
		}},
	} {
		t.Run(finder.name, func(t *testing.T) {
			e, key := forceResidualWindow(t)
			var m metricsView
			decodeOne(t, e.must("metrics", "--json").stdout, &m)
			if m.LateEvidence != 0 || m.ArrivedTwice != 0 {
				t.Fatalf("before anyone read the records again: %+v", m)
			}
			finder.find(t, e, key)
			finder.find(t, e, key) // once, however often

			t.Run("Show", func(t *testing.T) {
				var sv struct {
					Action struct {
						State        string `json:"state"`
						ArrivedTwice bool   `json:"arrived_twice"`
					} `json:"action"`
					History []struct{ Kind, Message string } `json:"history"`
				}
				decodeOne(t, e.must("show", "--key", key, "--json").stdout, &sv)
				var late []string
				for _, h := range sv.History {
					if h.Kind == string(ledger.EvLateArrival) {
						late = append(late, h.Message)
					}
				}
				if sv.Action.State != "sent" || !sv.Action.ArrivedTwice || len(late) != 1 ||
					!strings.Contains(late[0], "Attempt 1 of "+key+" arrived after all") {
					t.Fatalf("show: %s, arrived twice %v, late evidence %q", sv.Action.State, sv.Action.ArrivedTwice, late)
				}
			})
			t.Run("Metrics", func(t *testing.T) {
				var m metricsView
				decodeOne(t, e.must("metrics", "--json").stdout, &m)
				if m.LateEvidence != 1 || m.ArrivedTwice != 1 {
					t.Fatalf("metrics: late evidence %d, arrived twice %d; want 1 and 1", m.LateEvidence, m.ArrivedTwice)
				}
			})
			t.Run("Review", func(t *testing.T) {
				r := reviewCmd("--ledger", e.ledger, "--format", "json")
				wantExit(t, r, exitOK)
				var rep struct {
					Total struct {
						LateEvidence int `json:"late_evidence"`
					} `json:"total"`
					LateEvidence []struct {
						Kind, Key string
						Attempt   int
					} `json:"late_evidence"`
					ArrivedTwice []struct {
						Key      string
						Attempts []int
					} `json:"arrived_twice"`
				}
				if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
					t.Fatal(err)
				}
				if rep.Total.LateEvidence != 1 || len(rep.LateEvidence) != 1 || rep.LateEvidence[0].Attempt != 1 ||
					len(rep.ArrivedTwice) != 1 || rep.ArrivedTwice[0].Key != key || !slices.Equal(rep.ArrivedTwice[0].Attempts, []int{1, 2}) {
					t.Fatalf("review: %+v", rep)
				}
			})
			t.Run("Check", func(t *testing.T) {
				r := ledgerCmd("check", "--ledger", e.ledger, "--json")
				wantExit(t, r, exitOK)
				var v ledgerCheckView
				if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
					t.Fatal(err)
				}
				if !v.OK || len(v.Findings) != 2 || v.Findings[0].Rule != ledger.RuleLateEvidence || v.Findings[0].Key != key ||
					v.Findings[0].Attempt != 1 || v.Findings[1].Rule != ledger.RuleArrivedTwice {
					t.Fatalf("check: %s", r.stdout)
				}
			})
		})
	}
}

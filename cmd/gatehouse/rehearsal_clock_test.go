package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gatehouse/internal/pgtest"
	"gatehouse/ledger"
	"gatehouse/scenarios"
)

// rehearsalLedger is a ledger as a rehearsal creates it: new, and marked
// in its own records as the rehearsal's.
func rehearsalLedger(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "l.db")
	l, err := ledger.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := l.MarkRehearsal(context.Background(), "drill"); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestRehearsalClock: with $GATEHOUSE_REHEARSAL_CLOCK a gate verb on a
// rehearsal's ledger records the rehearsal's time, not the wall clock's; a
// clock that does not answer with a time refuses the verb before the
// ledger is touched.
func TestRehearsalClock(t *testing.T) {
	ledgerPath := rehearsalLedger(t)
	other := filepath.Join(t.TempDir(), "production.db")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/clock":
			w.Write([]byte(`{"now":"2026-03-02T09:00:07Z","lease":"30s","ledger":"` + ledgerPath + `"}`))
		case "/bad-lease":
			w.Write([]byte(`{"now":"2026-03-02T09:00:07Z","lease":"soon","ledger":"` + ledgerPath + `"}`))
		case "/other-ledger":
			w.Write([]byte(`{"now":"2026-03-02T09:00:07Z","lease":"30s","ledger":"` + other + `"}`))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := "http://" + ln.Addr().String() + "/clock"
	ln.Close()

	claim := []string{"gate", "claim", "--ledger", ledgerPath, "--as", "wf", "--task", "t-1", "--customer", "c-1", "--json"}
	for _, tc := range []struct {
		Name  string
		Clock string
		Code  int
		Want  string
	}{
		{"Answers", srv.URL + "/clock", 0, `"owner":"wf"`},
		{"Gone", gone, 1, "$GATEHOUSE_REHEARSAL_CLOCK: ask the rehearsal's clock: Get"},
		{"NotATime", srv.URL + "/other", 1, "answered 404 Not Found, not a time"},
		{"BadLease", srv.URL + "/bad-lease", 1, `serves lease \"soon\", not a duration`},
		// A pretend clock never reaches another ledger, nor comes from
		// another machine.
		{"AnotherLedgersClock", srv.URL + "/other-ledger", 1, "is the clock of the rehearsal ledger " + other + ", not of " + ledgerPath},
		{"NotLoopback", "http://192.0.2.1:9/clock", 1, "served over http on this machine's loopback"},
	} {
		t.Run(tc.Name, func(t *testing.T) {
			t.Setenv(rehearsalClockEnv, tc.Clock)
			var out, errOut bytes.Buffer
			if code := run(claim, &out, &errOut); code != tc.Code || !strings.Contains(out.String(), tc.Want) {
				t.Fatalf("exit %d, want %d with %q\nstdout: %s\nstderr: %s", code, tc.Code, tc.Want, out.String(), errOut.String())
			}
		})
	}
	t.Setenv(rehearsalClockEnv, srv.URL+"/clock")
	var out, errOut bytes.Buffer
	if code := run([]string{"gate", "history", "--ledger", ledgerPath, "--json"}, &out, &errOut); code != 0 {
		t.Fatalf("history: exit %d: %s", code, errOut.String())
	}
	var h struct {
		Events []struct {
			At string `json:"at"`
		} `json:"events"`
	}
	if err := json.Unmarshal(out.Bytes(), &h); err != nil || len(h.Events) == 0 {
		t.Fatalf("history: %v\n%s", err, out.String())
	}
	for _, e := range h.Events {
		if !strings.HasPrefix(e.At, "2026-03-02T09:00:07") {
			t.Errorf("event at %s, want the rehearsal's time", e.At)
		}
	}
}

// TestRehearsalClockRefusedOnAProductionLedger: the clock is served on
// loopback and names the ledger, as anyone on the host can serve it, but
// the ledger's records do not mark it as a rehearsal's: every verb, reading
// or writing, is refused at the door (exit 2) naming the variable, and
// nothing is recorded nor created.
func TestRehearsalClockRefusedOnAProductionLedger(t *testing.T) {
	e := newGateEnv(t)
	e.must("claim", "--task", "t-1", "--customer", "c-1", "--as", "wf")
	missing := filepath.Join(t.TempDir(), "new.db")
	before := historyLines(t, e)
	for _, tc := range []struct {
		Name   string
		Ledger string
		Args   []string
	}{
		{"Write", e.ledger, []string{"claim", "--task", "t-2", "--customer", "c-1", "--as", "wf"}},
		{"Read", e.ledger, []string{"history"}},
		{"ReadJSON", e.ledger, []string{"list", "--json"}},
		{"NoLedgerYet", missing, []string{"claim", "--task", "t-2", "--customer", "c-1", "--as", "wf"}},
	} {
		t.Run(tc.Name, func(t *testing.T) {
			t.Setenv(rehearsalClockEnv, forgedClock(t, tc.Ledger))
			var out, errOut bytes.Buffer
			code := run(append(append([]string{"gate"}, tc.Args...), "--ledger", tc.Ledger), &out, &errOut)
			if code != exitUsage || !strings.Contains(errOut.String(), "$"+rehearsalClockEnv+" is set") ||
				!strings.Contains(errOut.String(), "unset it") {
				t.Fatalf("exit %d, want %d naming $%s\nstdout: %s\nstderr: %s", code, exitUsage, rehearsalClockEnv, out.String(), errOut.String())
			}
		})
	}
	if after := historyLines(t, e); len(after) != len(before) {
		t.Errorf("the refused verbs recorded %v", after[len(before):])
	}
	if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused verb created %s: %v", missing, err)
	}
}

// TestKeptRehearsalLedgerSaysItsClock: a ledger kept by rehearse --ledger
// stays marked as the rehearsal's, and the review says its times are the
// rehearsal's clock; a production ledger's review says nothing of it.
func TestKeptRehearsalLedgerSaysItsClock(t *testing.T) {
	path := rehearsedStop(t)
	l, err := ledger.OpenReadOnly(path)
	if err != nil {
		t.Fatal(err)
	}
	mark := l.Rehearsal()
	l.Close()
	if mark != "stop-for-review" {
		t.Fatalf("the kept ledger is marked %q, want the scenario's name", mark)
	}
	const words = "Runs on a rehearsal's clock"
	md := reviewCmd("--ledger", path, "--format", "md")
	wantExit(t, md, exitOK)
	if !strings.Contains(md.stdout, words) {
		t.Fatalf("the review of a kept rehearsal ledger does not say its clock:\n%s", md.stdout)
	}
	js := reviewCmd("--ledger", path, "--format", "json")
	wantExit(t, js, exitOK)
	var rep struct{ Rehearsal string }
	if err := json.Unmarshal([]byte(js.stdout), &rep); err != nil || rep.Rehearsal != "stop-for-review" {
		t.Fatalf("json rehearsal %q (%v)", rep.Rehearsal, err)
	}

	e := newGateEnv(t)
	e.must("claim", "--task", "t-1", "--customer", "c-1", "--as", "wf")
	md = reviewCmd("--ledger", e.ledger, "--format", "md")
	wantExit(t, md, exitOK)
	if strings.Contains(md.stdout, words) {
		t.Fatalf("a production ledger's review speaks of a rehearsal's clock:\n%s", md.stdout)
	}
}

// TestRehearseRefusesALedgerWithHistory: rehearse --ledger never marks a
// ledger that already holds history as a rehearsal's (a workflow could run
// rehearse on the production ledger); the ledger is left as it was.
func TestRehearseRefusesALedgerWithHistory(t *testing.T) {
	e := newGateEnv(t)
	e.must("claim", "--task", "t-1", "--customer", "c-1", "--as", "wf")
	before := historyLines(t, e)
	var out, errOut bytes.Buffer
	code := run([]string{"rehearse", "overlapping-reply", "--ledger", e.ledger}, &out, &errOut)
	if code != exitOther || !strings.Contains(out.String(), "already holds history") {
		t.Fatalf("exit %d, want %d saying the ledger holds history\nstdout: %s\nstderr: %s", code, exitOther, out.String(), errOut.String())
	}
	l, err := ledger.OpenReadOnly(e.ledger)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if l.Rehearsal() != "" {
		t.Fatalf("the production ledger is now marked %q", l.Rehearsal())
	}
	if after := historyLines(t, e); len(after) != len(before) {
		t.Fatalf("the refused rehearsal recorded %v", after[len(before):])
	}
}

// TestRehearseWorkflowOnPostgres: a rehearsal kept in a PostgreSQL ledger
// marks it as the rehearsal's, so the workflow's own gate processes open
// it on the rehearsal's clock: the killed run's attempt is recovered once
// the restart runs out the rehearsal's lease, the rerun reconciles, and
// every history line is on the rehearsal's time, not the server's.
func TestRehearseWorkflowOnPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and starts PostgreSQL")
	}
	bin := gatehouseBinary(t)
	t.Setenv("PATH", filepath.Dir(bin)+string(os.PathListSeparator)+os.Getenv("PATH"))
	loc := pgtest.Database(t)
	var out, errOut bytes.Buffer
	code := run([]string{"rehearse", filepath.Join("..", "..", "examples", "ack-crash-after-accept.yaml"), "--ledger", loc}, &out, &errOut)
	if code != exitOK {
		t.Fatalf("rehearse on PostgreSQL: exit %d\n%s\n%s", code, out.String(), errOut.String())
	}
	l, err := ledger.OpenReadOnly(loc)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if l.Rehearsal() != "ack-crash-after-accept" {
		t.Fatalf("the kept ledger is marked %q", l.Rehearsal())
	}
	events, err := l.History(context.Background(), ledger.HistoryFilter{})
	if err != nil || len(events) == 0 {
		t.Fatalf("history: %d lines, %v", len(events), err)
	}
	for _, e := range events {
		if e.At.Before(scenarios.Start) || e.At.After(scenarios.Start.Add(time.Hour)) {
			t.Errorf("event at %s is not on the rehearsal's clock: %s", e.At, e.Message)
		}
	}
}

package main

import (
	"bytes"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
)

// TestRehearsalClock: with $GATEHOUSE_REHEARSAL_CLOCK a gate verb records
// the rehearsal's time, not the wall clock's; a clock that does not answer
// with a time refuses the verb before the ledger is touched.
func TestRehearsalClock(t *testing.T) {
	ledgerPath := filepath.Join(t.TempDir(), "l.db")
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

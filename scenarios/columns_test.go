package scenarios

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gatehouse/internal/testids"
)

// TestArrivalSitsOnItsAttempt: in interrupted-before-accept attempt 1 never
// reached the mailbox and attempt 2 did, so the one arrival belongs on
// attempt 2's line, in the text report and in the JSON.
func TestArrivalSitsOnItsAttempt(t *testing.T) {
	sc, err := Lookup("interrupted-before-accept")
	if err != nil {
		t.Fatal(err)
	}
	rep := mustRun(t, sc, Options{})
	if len(rep.Rows) != 1 || len(rep.Rows[0].Arrivals) != 1 {
		t.Fatalf("rows = %+v, want one key with one arrival", rep.Rows)
	}
	if got := rep.Rows[0].Arrivals[0]; got.Attempt != 2 || got.Unmatched {
		t.Fatalf("arrival = %+v, want it matched to attempt 2", got)
	}
	var b strings.Builder
	writeColumns(&b, rep.Rows, SideBySide)
	checkGolden(t, filepath.Join("testdata", "columns", "interrupted-before-accept.golden"), b.String())
}

// TestUnmatchedArrival: a message whose Message-ID no attempt of its action
// carries is shown as a contradiction, never on an attempt's line.
func TestUnmatchedArrival(t *testing.T) {
	at := time.Date(2026, 3, 2, 9, 0, 5, 0, time.UTC)
	row := Row{Key: "gh1:cust-ada:enquiry-1:reply_ack:t-1:r0", Name: "ack", State: "sent", Owner: "wf-ack",
		Attempts: []AttemptCell{{Number: 1, TransportID: "gh-aa-a1@gatehouse.invalid", Outcome: "accepted"}},
		Arrivals: []ArrivalCell{
			{MessageID: "gh-aa-a1@gatehouse.invalid", To: "ada@example.com", Subject: "Hello", At: at},
			{MessageID: "sent-by-hand@elsewhere.test", To: "ada@example.com", Subject: "Hello again", At: at, Duplicate: true},
		}}
	matchAttempts(&row)
	if a := row.Arrivals; a[0].Attempt != 1 || a[0].Unmatched || a[1].Attempt != 0 || !a[1].Unmatched {
		t.Fatalf("arrivals = %+v, want the first on attempt 1 and the second unmatched", a)
	}
	lines := row.Lines()
	if len(lines) != 2 || lines[0].Attempt == nil || lines[1].Attempt != nil || !lines[1].Arrival.Unmatched {
		t.Fatalf("lines = %+v, want attempt 1 with its arrival, then the unmatched one alone", lines)
	}
	rep := Report{Name: "x", Passed: true, Rows: []Row{row}}
	var text bytes.Buffer
	if err := WriteText(&text, []Report{rep}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "sent-by-hand\n") ||
		!strings.Contains(text.String(), "DUPLICATE  UNMATCHED: no attempt has this Message-ID") {
		t.Fatalf("text report does not mark the unmatched arrival:\n%s", text.String())
	}
	var js bytes.Buffer
	if err := WriteJSON(&js, []Report{rep}); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Scenarios []struct {
			Rows []struct {
				Arrivals []struct {
					MessageID string `json:"message_id"`
					Attempt   int    `json:"attempt"`
					Unmatched bool   `json:"unmatched"`
				} `json:"arrivals"`
			} `json:"rows"`
		} `json:"scenarios"`
	}
	if err := json.Unmarshal(js.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	got := doc.Scenarios[0].Rows[0].Arrivals
	if got[0].Attempt != 1 || got[0].Unmatched || got[1].Attempt != 0 || !got[1].Unmatched {
		t.Fatalf("JSON arrivals = %+v", got)
	}
}

// checkGolden compares got with the golden file at path, the random parts
// of Message-IDs masked (internal/testids).
func checkGolden(t *testing.T, path, got string) {
	t.Helper()
	got = testids.Mask(got)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden (run with -update): %v", err)
	}
	if got != string(want) {
		t.Fatalf("%s differs:\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

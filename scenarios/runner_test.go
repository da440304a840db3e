package scenarios

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gatehouse/internal/testids"
)

func mustRun(t *testing.T, sc *Scenario, opts Options) Report {
	t.Helper()
	rep, err := RunAll(context.Background(), sc, opts)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func TestWrongExpectationFailsClearly(t *testing.T) {
	sc, err := ParseFile(filepath.Join("testdata", "wrong-expectation.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	rep := mustRun(t, sc, Options{LedgerPath: filepath.Join(t.TempDir(), "kept.db")})
	if rep.Passed || rep.Failed() != 1 {
		t.Fatalf("passed=%v failed=%d, want exactly one failure", rep.Passed, rep.Failed())
	}
	var b bytes.Buffer
	if err := WriteText(&b, []Report{rep}); err != nil {
		t.Fatal(err)
	}
	want := "FAIL  arrivals.total: expected 2, got 1  (testdata/wrong-expectation.yaml:19:21)"
	if !strings.Contains(b.String(), want) {
		t.Fatalf("report lacks %q:\n%s", want, b.String())
	}
}

// TestSameReportTwice rehearses scenarios twice, including one with a
// parallel race, and compares the JSON reports byte for byte.
func TestSameReportTwice(t *testing.T) {
	for _, name := range []string{"two-staff-same-task", "interrupted-after-accept", "paused-executor"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			sc, err := Lookup(name)
			if err != nil {
				t.Fatal(err)
			}
			var out [2]bytes.Buffer
			for i := range out {
				if err := WriteJSON(&out[i], []Report{mustRun(t, sc, Options{})}); err != nil {
					t.Fatal(err)
				}
			}
			// Message-IDs are drawn at random: all else is the same.
			if testids.Mask(out[0].String()) != testids.Mask(out[1].String()) {
				t.Fatalf("reports differ:\n%s\n---\n%s", out[0].String(), out[1].String())
			}
		})
	}
}

func TestJSONAndJUnit(t *testing.T) {
	sc, err := Lookup("webhook-twice")
	if err != nil {
		t.Fatal(err)
	}
	bad, err := ParseFile(filepath.Join("testdata", "wrong-expectation.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	reps := []Report{mustRun(t, sc, Options{}), mustRun(t, bad, Options{})}

	var js bytes.Buffer
	if err := WriteJSON(&js, reps); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Passed    bool
		Scenarios []struct {
			Name         string
			Passed       bool
			Expectations []struct {
				Name string
				Pass bool
			}
		}
	}
	if err := json.Unmarshal(js.Bytes(), &doc); err != nil {
		t.Fatalf("invalid JSON: %v", err)
	}
	if doc.Passed || len(doc.Scenarios) != 2 || !doc.Scenarios[0].Passed || doc.Scenarios[1].Passed ||
		len(doc.Scenarios[0].Expectations) == 0 {
		t.Fatalf("unexpected JSON document: %+v", doc)
	}

	var xb bytes.Buffer
	if err := WriteJUnit(&xb, reps); err != nil {
		t.Fatal(err)
	}
	var ju junitSuites
	if err := xml.Unmarshal(xb.Bytes(), &ju); err != nil {
		t.Fatalf("invalid JUnit XML: %v", err)
	}
	if len(ju.Suites) != 2 || ju.Failures != 1 || ju.Suites[1].Failures != 1 || ju.Tests == 0 {
		t.Fatalf("unexpected JUnit: %+v", ju)
	}
}

// TestStepByStep drives a run the way a terminal app does and checks the
// snapshot's three columns between steps.
func TestStepByStep(t *testing.T) {
	sc, err := Lookup("interrupted-after-accept")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	r, err := NewRun(ctx, sc, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for i := 0; i < 3; i++ { // propose, approve, crash after accept
		if _, err := r.Step(ctx); err != nil {
			t.Fatal(err)
		}
	}
	snap, err := r.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Rows) != 1 {
		t.Fatalf("rows = %+v", snap.Rows)
	}
	row := snap.Rows[0]
	if row.State != "executing" || len(row.Attempts) != 1 || row.Attempts[0].Outcome != "in flight" || len(row.Arrivals) != 1 {
		t.Fatalf("after the crash: %+v", row)
	}
	if snap.Counts.Arrived != 1 || snap.Counts.Confirmed != 0 || len(snap.History) == 0 {
		t.Fatalf("counts %+v", snap.Counts)
	}
	rep, err := r.Finish(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Passed || !r.Done() {
		t.Fatal("rest of the scenario failed")
	}
}

func TestFaultsAndRecordCrash(t *testing.T) {
	sc, err := ParseFile(filepath.Join("testdata", "faults-and-record-crash.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if rep := mustRun(t, sc, Options{}); !rep.Passed {
		var b bytes.Buffer
		WriteText(&b, []Report{rep})
		t.Fatalf("failed:\n%s", b.String())
	}
}

// TestTimedFaultsRunOnTheRehearsalClock: the rehearsal mailbox times its
// faults on the pretend clock (docs/scenarios.md): a delayed reply never
// reaches the sender in time, and a timed down ends when a wait passes it.
func TestTimedFaultsRunOnTheRehearsalClock(t *testing.T) {
	sc, err := ParseFile(filepath.Join("testdata", "timed-faults.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if rep := mustRun(t, sc, Options{}); !rep.Passed {
		var b bytes.Buffer
		WriteText(&b, []Report{rep})
		t.Fatalf("failed:\n%s", b.String())
	}
}

// TestPausedExecutors rehearses pause_executor and resume_executor at both
// points: woken within its lease an executor delivers; woken after another
// sent, the fence refuses it; a pause the gate refuses leaves nobody to wake.
func TestPausedExecutors(t *testing.T) {
	sc, err := ParseFile(filepath.Join("testdata", "paused-executors.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if rep := mustRun(t, sc, Options{}); !rep.Passed {
		var b bytes.Buffer
		WriteText(&b, []Report{rep})
		t.Fatalf("failed:\n%s", b.String())
	}
}

// TestCloseWakesPausedExecutors: a rehearsal closed while an executor is
// paused lets it go on and waits for it, instead of hanging or leaving it
// behind.
func TestCloseWakesPausedExecutors(t *testing.T) {
	sc, err := ParseFile(filepath.Join("testdata", "paused-executors.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewRun(context.Background(), sc, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for r.next < 3 { // propose, approve, pause_executor
		if _, err := r.Step(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if len(r.paused) != 1 {
		t.Fatalf("%d executors paused after the pause step, want 1", len(r.paused))
	}
	done := make(chan error, 1)
	go func() { done <- r.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Close did not return with an executor paused")
	}
	if len(r.paused) != 0 {
		t.Errorf("%d executors still paused after Close", len(r.paused))
	}
}

package review_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	_ "github.com/mattn/go-sqlite3"

	"gatehouse/destination"
	"gatehouse/destination/fake"
	"gatehouse/fakes"
	"gatehouse/internal/testids"
	"gatehouse/ledger"
	"gatehouse/review"
)

var update = flag.Bool("update", false, "rewrite the golden reports")

// stopLedger is a ledger built step by step around one stop, with every
// event counted by hand in the comments; the tests compare the report with
// those counts.
type stopLedger struct {
	t     *testing.T
	ctx   context.Context
	path  string
	l     *ledger.Ledger
	clock *fakes.Clock
	dest  *fake.Destination
}

var day1 = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)

func consent(v string) []ledger.MaterialRead {
	return []ledger.MaterialRead{{Source: "crm", Field: "consent", Value: v}}
}

func (s *stopLedger) at(t time.Time) { s.clock.Set(t) }

func (s *stopLedger) must(err error) {
	s.t.Helper()
	if err != nil {
		s.t.Fatal(err)
	}
}

// propose proposes action n for customer cN on task-1 and returns its key.
func (s *stopLedger) propose(n string) string {
	s.t.Helper()
	a, err := s.l.Propose(s.ctx, ledger.Proposal{Task: ledger.TaskRef{ID: "task-1"}, Customer: "c" + n, Event: "enquiry-" + n,
		ActionType: "reply_ack", Target: "task-1", Recipient: "c" + n + "@example.org", Subject: "We received your enquiry",
		Body: "Hello.", Actor: "wf", Destination: s.dest.Identity()})
	s.must(err)
	return a.Key
}

func (s *stopLedger) approve(key, value string) {
	s.t.Helper()
	_, err := s.l.Approve(s.ctx, key, "lead", consent(value))
	s.must(err)
}

func (s *stopLedger) send(key, value string) error {
	_, err := s.l.Execute(s.ctx, ledger.ExecuteRequest{Key: key, Executor: "wf", Reread: consent(value)}, s.dest)
	return err
}

// keys of the six actions.
type stopKeys struct{ sent, unknown, approved, proposed, denied, changed string }

// buildStopLedger: day 1 (2026-03-02) has six proposals, two attempts, one
// send, one unknown outcome, one denial and the stop; day 2 (2026-03-03)
// has the sends tried after the stop, a resolution by hand and the resume.
func buildStopLedger(t *testing.T) (*stopLedger, stopKeys) {
	t.Helper()
	s := &stopLedger{t: t, ctx: context.Background(), path: filepath.Join(t.TempDir(), "stop.db"),
		clock: fakes.NewClock(day1), dest: fake.New()}
	var err error
	s.l, err = ledger.Open(s.path, ledger.WithClock(s.clock))
	s.must(err)
	t.Cleanup(func() { s.l.Close() })
	var k stopKeys
	_, err = s.l.Claim(s.ctx, ledger.TaskRef{ID: "task-1"}, "wf")
	s.must(err)

	s.at(day1.Add(time.Hour)) // 10:00 proposed 1, attempts 1, sent 1
	k.sent = s.propose("1")
	s.approve(k.sent, "yes")
	s.must(s.send(k.sent, "yes"))

	s.at(day1.Add(2 * time.Hour)) // 11:00 proposed 1, attempts 1, unknown 1
	k.unknown = s.propose("2")
	s.approve(k.unknown, "yes")
	s.dest.Script(destination.OutcomeUnknown)
	if err := s.send(k.unknown, "yes"); !errors.Is(err, ledger.ErrUnknownOutcome) {
		t.Fatalf("send with an unknown outcome: %v", err)
	}

	s.at(day1.Add(3 * time.Hour)) // 12:00 proposed 3, denied 1
	k.approved = s.propose("3")
	s.approve(k.approved, "yes")
	k.proposed = s.propose("4")
	k.denied = s.propose("5")
	s.approve(k.denied, "yes")
	if err := s.send(k.denied, "no"); !errors.Is(err, ledger.ErrDenied) {
		t.Fatalf("send after consent changed: %v", err)
	}

	s.at(day1.Add(4 * time.Hour)) // 13:00 proposed 1
	k.changed = s.propose("6")
	s.approve(k.changed, "yes")

	s.at(day1.Add(6 * time.Hour)) // 15:00 stops 1
	s.must(s.l.Stop(s.ctx, "ops-lead", "duplicate acknowledgements reported"))

	day2 := day1.Add(24 * time.Hour)
	s.at(day2) // 09:00 holds 1 (the stop queues the send)
	if err := s.send(k.approved, "yes"); !errors.Is(err, ledger.ErrStopped) {
		t.Fatalf("send after the stop: %v", err)
	}
	s.at(day2.Add(time.Minute)) // duplicate blocks 1
	if err := s.send(k.sent, "yes"); !errors.Is(err, ledger.ErrDuplicate) {
		t.Fatalf("second send of a sent action: %v", err)
	}
	s.at(day2.Add(time.Hour)) // manual overrides 1, sent 1
	_, err = s.l.ResolveUnknown(s.ctx, k.unknown, "ops-lead", true, "found in the mailbox by hand")
	s.must(err)
	s.at(day2.Add(2 * time.Hour)) // manual overrides 1 (the queued send's hold released)
	s.must(s.l.Resume(s.ctx, "ops-lead", "cause fixed"))
	s.at(day2.Add(3 * time.Hour)) // attempts 2, failed 1 (not delivered), sent 1
	// Attempt 1 is answered "not delivered" (its deadline hit the final
	// dot), but the write finished: it lands once attempt 2 was sent.
	_, msg, err := s.l.BeginAttempt(s.ctx, ledger.ExecuteRequest{Key: k.approved, Executor: "wf", Reread: consent("yes"),
		Endpoint: destination.EndpointOf(s.dest)})
	s.must(err)
	_, err = s.l.RecordOutcome(s.ctx, msg.TransportID, destination.OutcomeNotDelivered, "deadline passed at the final dot")
	s.must(err)
	s.must(s.send(k.approved, "yes"))
	s.dest.Inject(msg)
	s.at(day2.Add(3*time.Hour + 30*time.Minute)) // late evidence 1: reconciling finds attempt 1 after all
	_, err = s.l.Reconcile(s.ctx, ledger.ReconcileRequest{Key: k.approved, Actor: "ops-lead",
		Open: destination.RecordsOpenerFunc(func(destination.Endpoint) (destination.Records, error) { return s.dest, nil })})
	s.must(err)
	s.at(day2.Add(4 * time.Hour)) // denied 1
	if err := s.send(k.changed, "no"); !errors.Is(err, ledger.ErrDenied) {
		t.Fatalf("send after consent changed: %v", err)
	}
	return s, k
}

func loadReport(t *testing.T, s *stopLedger, opts review.Options) review.Report {
	t.Helper()
	h, err := review.Load(s.ctx, s.l)
	s.must(err)
	r, err := review.Build(s.ctx, s.l, h, opts)
	s.must(err)
	return r
}

// handCounts are the bucket sizes at the stop, counted in buildStopLedger.
var handCounts = map[string]int{"committed": 1, "in_flight": 1, "approved_not_started": 2, "only_proposed": 1,
	"held": 0, "denied": 1, "cancelled": 0, "failed": 0}

// handDays are the per-day measures counted in buildStopLedger.
var handDays = []review.Day{
	{Day: "2026-03-02", DenialRate: 33.3, Measures: review.Measures{Proposed: 6, Attempts: 2, Sent: 1, Denied: 1, Unknown: 1, Stops: 1}},
	{Day: "2026-03-03", DenialRate: 33.3, Measures: review.Measures{Attempts: 2, Sent: 2, Denied: 1, DuplicateBlocks: 1, Holds: 1, ManualOverrides: 2,
		Failed: 1, LateEvidence: 1}},
}

func TestReportAtAStopEqualsHandCounts(t *testing.T) {
	s, k := buildStopLedger(t)
	r := loadReport(t, s, review.Options{})
	t.Run("JSON", func(t *testing.T) {
		var buf bytes.Buffer
		s.must(r.WriteJSON(&buf))
		var got struct {
			Counts []struct {
				Bucket string
				N      int
			} `json:"bucket_counts"`
			Buckets []struct {
				Bucket  string
				Actions []struct {
					Key        string
					State, Now string
					SendsTried int `json:"sends_tried_after"`
					Material   *struct{ Status string }
				}
			}
			Days []review.Day `json:"per_day"`
			Stop struct {
				Actor, Reason string
				Resumed       struct{ Actor string }
			}
			Overrides []struct{ Kind, Actor, Reason string } `json:"manual_overrides"`
		}
		s.must(json.Unmarshal(buf.Bytes(), &got))
		for _, c := range got.Counts {
			if c.N != handCounts[c.Bucket] {
				t.Errorf("bucket %s: %d, counted by hand %d", c.Bucket, c.N, handCounts[c.Bucket])
			}
		}
		if len(got.Counts) != len(handCounts) {
			t.Errorf("%d buckets, want %d", len(got.Counts), len(handCounts))
		}
		if len(got.Days) != len(handDays) {
			t.Fatalf("days: %+v", got.Days)
		}
		for i, d := range got.Days {
			if d != handDays[i] {
				t.Errorf("day %s:\n got %+v\nwant %+v", d.Day, d, handDays[i])
			}
		}
		if got.Stop.Actor != "ops-lead" || got.Stop.Reason != "duplicate acknowledgements reported" || got.Stop.Resumed.Actor != "ops-lead" {
			t.Errorf("stop: %+v", got.Stop)
		}
		if len(got.Overrides) != 2 || got.Overrides[0].Kind != "resolved_by_person" || got.Overrides[1].Kind != "hold_released" {
			t.Errorf("overrides: %+v", got.Overrides)
		}
		want := map[string]struct {
			state, now, material string
			tried                int
		}{
			k.sent:     {"sent", "sent", "", 1},
			k.unknown:  {"unknown", "sent", "same", 0},
			k.approved: {"approved", "sent", "same", 3},
			k.proposed: {"drafting", "drafting", "no_approval", 0},
			k.denied:   {"denied", "denied", "changed", 0},
			k.changed:  {"approved", "denied", "changed", 1},
		}
		seen := 0
		for _, b := range got.Buckets {
			for _, a := range b.Actions {
				seen++
				w := want[a.Key]
				mat := ""
				if a.Material != nil {
					mat = a.Material.Status
				}
				if a.State != w.state || a.Now != w.now || mat != w.material || a.SendsTried != w.tried {
					t.Errorf("%s: state %s now %s material %q tried %d; want %+v", a.Key, a.State, a.Now, mat, a.SendsTried, w)
				}
			}
		}
		if seen != len(want) {
			t.Errorf("%d actions in the buckets, want %d", seen, len(want))
		}
	})
	t.Run("Markdown", func(t *testing.T) {
		var buf bytes.Buffer
		s.must(r.WriteMarkdown(&buf))
		md := buf.String()
		for _, line := range []string{
			"| committed (sent) | 1 |", "| in flight (reconcile) | 1 |", "| approved, not started | 2 |", "| only proposed | 1 |",
			"| held | 0 |", "| denied | 1 |", "| cancelled | 0 |", "| failed | 0 |",
			"| 2026-03-02 | 6 | 2 | 1 | 1 | 33.3% | 0 | 0 | 1 | 0 | 0 | 0 | 0 | 1 | 0 |",
			"| 2026-03-03 | 0 | 2 | 2 | 1 | 33.3% | 1 | 0 | 0 | 1 | 2 | 1 | 0 | 0 | 1 |",
			"| gh1:c3:enquiry-3:reply_ack:task-1:r0 | task-1 | approved | sent (arrived twice) |",
			"| 2026-03-03 12:30:00Z | late_arrival | gh1:c3:enquiry-3:reply_ack:task-1:r0 | 1 | Attempt 1 of gh1:c3:enquiry-3:reply_ack:task-1:r0 arrived after all:",
			"- gh1:c3:enquiry-3:reply_ack:task-1:r0 (sent): attempts 1 and 2 arrived",
			"Stop 1 of 1: 2026-03-02 15:00:00Z by ops-lead because: duplicate acknowledgements reported",
		} {
			if !strings.Contains(md, line+"\n") && !strings.Contains(md, line+" ") {
				t.Errorf("the report lacks %q", line)
			}
		}
	})
}

// TestReportGolden keeps the report byte for byte: it is what a team files.
func TestReportGolden(t *testing.T) {
	s, _ := buildStopLedger(t)
	r := loadReport(t, s, review.Options{})
	for _, f := range []struct {
		name  string
		write func(*bytes.Buffer) error
	}{
		{"stop.md", func(b *bytes.Buffer) error { return r.WriteMarkdown(b) }},
		{"stop.json", func(b *bytes.Buffer) error { return r.WriteJSON(b) }},
	} {
		t.Run(f.name, func(t *testing.T) {
			var buf bytes.Buffer
			s.must(f.write(&buf))
			masked := []byte(testids.Mask(buf.String())) // Message-IDs are drawn at random
			golden := filepath.Join("testdata", f.name)
			if *update {
				s.must(os.WriteFile(golden, masked, 0o644))
			}
			want, err := os.ReadFile(golden)
			s.must(err)
			if !bytes.Equal(masked, want) {
				t.Errorf("report differs from %s (go test ./review -update):\n%s", golden, buf.String())
			}
			// Deterministic: a second build from a fresh load is the same.
			var again bytes.Buffer
			r2 := loadReport(t, s, review.Options{})
			if f.name == "stop.md" {
				s.must(r2.WriteMarkdown(&again))
			} else {
				s.must(r2.WriteJSON(&again))
			}
			if !bytes.Equal(buf.Bytes(), again.Bytes()) {
				t.Error("two reports of the same ledger differ")
			}
		})
	}
}

// TestReportInfersHistoryWrittenBeforeStates: the same ledger with its
// lines stripped of their states, as a ledger written before schema 6 has
// them, gives the same buckets and per-day counts, and says it inferred.
func TestReportInfersHistoryWrittenBeforeStates(t *testing.T) {
	s, _ := buildStopLedger(t)
	recorded := loadReport(t, s, review.Options{})
	s.must(s.l.Close())
	db, err := sql.Open("sqlite3", s.path)
	s.must(err)
	for _, q := range []string{`UPDATE events SET to_state = '', detail = ''`,
		`UPDATE history_format SET folded_from = (SELECT max(id) + 1 FROM events)`} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	s.l, err = ledger.Open(s.path, ledger.WithClock(s.clock))
	s.must(err)
	inferred := loadReport(t, s, review.Options{})
	for i, c := range inferred.Counts {
		if c != recorded.Counts[i] {
			t.Errorf("bucket %s: inferred %d, recorded %d", c.Bucket, c.N, recorded.Counts[i].N)
		}
	}
	for i := range inferred.Days {
		if inferred.Days[i] != recorded.Days[i] {
			t.Errorf("day %s: inferred %+v, recorded %+v", inferred.Days[i].Day, inferred.Days[i], recorded.Days[i])
		}
	}
	for b := range inferred.Buckets {
		for i, a := range inferred.Buckets[b].Actions {
			if want := recorded.Buckets[b].Actions[i]; a.State != want.State || a.Now != want.Now || !a.Inferred {
				t.Errorf("%s: inferred %s → %s (marked %v), recorded %s → %s", a.Key, a.State, a.Now, a.Inferred, want.State, want.Now)
			}
		}
	}
	if inferred.Inferred.Lines == 0 || inferred.Inferred.Actions != 6 {
		t.Errorf("inferred note: %+v", inferred.Inferred)
	}
	var md bytes.Buffer
	s.must(inferred.WriteMarkdown(&md))
	if !strings.Contains(md.String(), "(inferred)") || !strings.Contains(md.String(), "- Inferred: ") {
		t.Errorf("the Markdown does not mark what it inferred:\n%s", md.String())
	}
}

// TestReportStopOutOfRange names the stops the history holds.
func TestReportStopOutOfRange(t *testing.T) {
	s, _ := buildStopLedger(t)
	h, err := review.Load(s.ctx, s.l)
	s.must(err)
	if _, err := review.Build(s.ctx, s.l, h, review.Options{Stop: 2}); !errors.Is(err, review.ErrNoSuchStop) {
		t.Fatalf("stop 2 of 1: %v", err)
	}
}

// TestReportWindowWithoutStop: a window that ends before the stop holds no
// stop; its buckets are the state at the window's end.
func TestReportWindowWithoutStop(t *testing.T) {
	s, _ := buildStopLedger(t)
	r := loadReport(t, s, review.Options{Until: day1.Add(150 * time.Minute)}) // after 11:00, before 12:00
	want := map[string]int{"committed": 1, "in_flight": 1}
	for _, c := range r.Counts {
		if c.N != want[c.Bucket] {
			t.Errorf("bucket %s: %d, want %d", c.Bucket, c.N, want[c.Bucket])
		}
	}
	if r.Stop != nil || len(r.Days) != 1 || r.Days[0].Proposed != 2 {
		t.Errorf("stop %+v, days %+v", r.Stop, r.Days)
	}
}

// TestReportNamesLateEvidence: attempt 1 of the action sent after the
// stop was answered "not delivered", yet landed, and reconciling the sent
// action found it: the report quotes that line, counts it on its day, marks
// the action as arrived twice where its bucket lists it, and lists it with
// the attempts that arrived; the timeline's late evidence filter selects it.
func TestReportNamesLateEvidence(t *testing.T) {
	s, k := buildStopLedger(t)
	r := loadReport(t, s, review.Options{})
	if len(r.LateEvidence) != 1 {
		t.Fatalf("late evidence %+v, want one line", r.LateEvidence)
	}
	if l := r.LateEvidence[0]; l.Kind != string(ledger.EvLateArrival) || l.Key != k.approved || l.Attempt != 1 ||
		!strings.Contains(l.Message, "arrived after all") {
		t.Errorf("late evidence line %+v", l)
	}
	if r.Total.LateEvidence != 1 || r.Days[0].LateEvidence != 0 || r.Days[1].LateEvidence != 1 {
		t.Errorf("late evidence counted %d in all, %d and %d per day; want 1, 0 and 1", r.Total.LateEvidence, r.Days[0].LateEvidence, r.Days[1].LateEvidence)
	}
	if len(r.ArrivedTwice) != 1 || r.ArrivedTwice[0].Key != k.approved || r.ArrivedTwice[0].State != "sent" ||
		!slices.Equal(r.ArrivedTwice[0].Attempts, []int{1, 2}) {
		t.Errorf("arrived twice %+v, want %s with attempts 1 and 2", r.ArrivedTwice, k.approved)
	}
	for _, b := range r.Buckets {
		for _, a := range b.Actions {
			if a.ArrivedTwice != (a.Key == k.approved) {
				t.Errorf("%s in %s: arrived twice %v", a.Key, b.Bucket, a.ArrivedTwice)
			}
		}
	}
	h, err := review.Load(s.ctx, s.l)
	s.must(err)
	g := slices.IndexFunc(review.Groups, func(g review.Group) bool { return g.Name == "late evidence" })
	sel := h.Select(review.Filter{Group: g})
	if g < 0 || len(sel) != 1 || h.KindOf(h.Events[sel[0]]) != ledger.EvLateArrival {
		t.Fatalf("the late evidence filter selects %v", sel)
	}
}

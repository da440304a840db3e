package tui

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"

	"gatehouse/destination/fake"
	"gatehouse/ledger"
	"gatehouse/scenarios"
)

// namesLedger holds what the naming rule must tell apart: two actions of
// one customer whose events differ only in a suffix (a careless retry),
// and a second action of the same customer under another event.
func namesLedger(t *testing.T) *ledger.Ledger {
	t.Helper()
	l, clk := openLedger(t)
	ctx := context.Background()
	ref := ledger.TaskRef{ID: "t-3301", Customer: "cust-ada", Subject: "Where is my order?"}
	if _, err := l.Claim(ctx, ref, "wf-ack"); err != nil {
		t.Fatal(err)
	}
	for _, ev := range []string{"enquiry-3301", "enquiry-3301-retry", "refund-3302"} {
		clk.Advance(time.Second)
		if _, err := l.Propose(ctx, ledger.Proposal{Task: ref, Customer: "cust-ada", Event: ev, ActionType: "reply_ack",
			Target: "t-3301", Recipient: "ada@example.com", Subject: "We have your enquiry", Body: "Hello.",
			Actor: "wf-ack", Destination: fake.DefaultName}); err != nil {
			t.Fatal(err)
		}
	}
	return l
}

// careTerms are the sizes the naming rule is checked at: the smallest
// terminal and a large one.
var careTerms = []struct{ w, h int }{{80, 24}, {160, 45}}

// TestNamesTellActionsApart: on every screen that lists actions, at 80x24
// and 160x45, the retry's event is shown whole, the two actions of one
// customer under events that share a stem are told apart, and no line is
// wider than the terminal.
func TestNamesTellActionsApart(t *testing.T) {
	screens := []struct {
		name string
		open func(t *testing.T) (Screen, []string)
	}{
		{"Inspector", func(t *testing.T) (Screen, []string) { return newTestInspector(namesLedger(t)), []string{"tab"} }},
		{"ReviewTimeline", func(t *testing.T) (Screen, []string) {
			return NewReview(NewTheme(true), ReviewConfig{Ledger: namesLedger(t), Poll: -1, Source: "names.db"}), nil
		}},
		{"ReviewSpans", func(t *testing.T) (Screen, []string) {
			return NewReview(NewTheme(true), ReviewConfig{Ledger: namesLedger(t), Poll: -1, Source: "names.db"}), []string{"v"}
		}},
		{"Rehearsal", func(t *testing.T) (Screen, []string) {
			return newTestRehearsal(t, "interrupted-before-accept"), nil
		}},
	}
	// The rows careless-accept-then-drop ends with, shown once the
	// rehearsal's own run is ready.
	carelessRows := func(r *Rehearsal) {
		r.snap = scenarios.Snapshot{Step: 2, Steps: 2, Rows: []scenarios.Row{
			{Key: ledger.Key("cust-ada", "enquiry-3301-retry", "reply_ack", "t-3301", 0), State: "sent", Owner: "wf-ack",
				Attempts: []scenarios.AttemptCell{{Number: 1, TransportID: "gh-x-a1@l.gatehouse.invalid", Outcome: "accepted"}}},
			{Key: ledger.Key("cust-ada", "enquiry-3301", "reply_ack", "t-3301", 0), Name: "ack", State: "unknown", Owner: "wf-ack",
				Attempts: []scenarios.AttemptCell{{Number: 1, TransportID: "gh-y-a1@l.gatehouse.invalid", Outcome: "unknown"}}},
		}}
		r.follow()
	}
	for _, sc := range screens {
		for _, term := range careTerms {
			t.Run(sc.name+"/"+sizeName(term.w, term.h), func(t *testing.T) {
				s, keys := sc.open(t)
				a := newDriven(s, term.w, term.h)
				if r, ok := s.(*Rehearsal); ok {
					carelessRows(r)
				}
				typeKeys(a, keys...)
				text := screenText(a)
				if !strings.Contains(text, "enquiry-3301-retry") {
					t.Errorf("the retry's event is not shown whole:\n%s", text)
				}
				if sc.name != "Rehearsal" && !containsWord(text, "enquiry-3301") {
					t.Errorf("the first action's event is not shown whole:\n%s", text)
				}
				for i, l := range strings.Split(text, "\n") {
					if w := ansi.StringWidth(l); w > term.w {
						t.Errorf("line %d is %d columns wide on a %d-column terminal: %q", i+1, w, term.w, l)
					}
				}
			})
		}
	}
}

// containsWord reports whether s holds w not followed by more of a key
// segment ("enquiry-3301" alone, not only inside "enquiry-3301-retry").
func containsWord(s, w string) bool {
	for i := strings.Index(s, w); i >= 0; {
		end := i + len(w)
		if end == len(s) || !strings.ContainsRune("-_", rune(s[end])) {
			return true
		}
		j := strings.Index(s[end:], w)
		if j < 0 {
			return false
		}
		i = end + j
	}
	return false
}

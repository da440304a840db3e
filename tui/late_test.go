package tui

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"gatehouse/destination"
	"gatehouse/destination/fake"
	"gatehouse/internal/keyname"
	"gatehouse/ledger"
	"gatehouse/review"
)

// arrivedTwiceLedger records two sent actions: T-2001 plainly, T-2002
// after its attempt 1 was answered "not delivered" although it landed,
// which a reconcile of the sent action found later. It returns T-2002's
// key.
func arrivedTwiceLedger(t *testing.T) (*ledger.Ledger, string) {
	t.Helper()
	l, clk := openLedger(t)
	ctx := context.Background()
	dest := fake.New()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	reread := []ledger.MaterialRead{{Source: "crm", Field: "consent", Value: "yes"}}
	plain := proposeApproved(t, l, "T-2001", "cust-fay", "ack-workflow")
	clk.Advance(time.Minute)
	_, err := l.Execute(ctx, ledger.ExecuteRequest{Key: plain.Key, Executor: "ack-workflow", Reread: reread}, dest)
	must(err)
	twice := proposeApproved(t, l, "T-2002", "cust-eve", "ack-workflow")
	clk.Advance(time.Minute)
	_, msg, err := l.BeginAttempt(ctx, ledger.ExecuteRequest{Key: twice.Key, Executor: "ack-workflow", Reread: reread,
		Endpoint: destination.EndpointOf(dest)})
	must(err)
	_, err = l.RecordOutcome(ctx, msg.TransportID, destination.OutcomeNotDelivered, "deadline passed at the final dot")
	must(err)
	clk.Advance(time.Minute)
	_, err = l.Execute(ctx, ledger.ExecuteRequest{Key: twice.Key, Executor: "ack-workflow", Reread: reread}, dest)
	must(err)
	dest.Inject(msg) // attempt 1 lands after all
	clk.Advance(time.Minute)
	_, err = l.Reconcile(ctx, ledger.ReconcileRequest{Key: twice.Key, Actor: "ops-lead",
		Open: destination.RecordsOpenerFunc(func(destination.Endpoint) (destination.Records, error) { return dest, nil })})
	must(err)
	return l, twice.Key
}

// TestInspectorShowsWhatArrivedTwice: the action that arrived twice says
// so in its row, whatever its state, and only it; the metrics count late
// evidence and actions that arrived twice; its detail names the attempts
// that arrived and the one that arrived late.
func TestInspectorShowsWhatArrivedTwice(t *testing.T) {
	l, key := arrivedTwiceLedger(t)
	a := newDriven(newTestInspector(l), 160, 30)
	typeKeys(a, "tab") // Actions
	s := screenText(a)
	var marked []string
	for _, line := range strings.Split(s, "\n") {
		if strings.Contains(line, "ARRIVED TWICE") {
			marked = append(marked, line)
		}
	}
	if len(marked) != 1 || !strings.Contains(marked[0], keyname.Name(key, "T-2002", 0)) || !strings.Contains(marked[0], "sent") {
		t.Fatalf("rows marked as arrived twice: %q, want only %s's, still sent:\n%s", marked, key, s)
	}
	typeKeys(a, "tab", "tab") // Metrics
	s = strings.Join(strings.Fields(screenText(a)), " ")
	for _, want := range []string{"late evidence 1 reports", "arrived twice 1 actions"} {
		if !strings.Contains(s, want) {
			t.Errorf("the metrics lack %q:\n%s", want, s)
		}
	}
	typeKeys(a, "tab", "tab", "tab", "enter") // back to Actions; the newest row is the one that arrived twice
	s = screenText(a)
	for _, want := range []string{"Action " + key, "ARRIVED TWICE: attempts 1 and 2 arrived, the customer has the message 2 times; the state stays sent",
		"#1  not delivered, but ARRIVED LATE"} {
		if !strings.Contains(s, want) {
			t.Errorf("the detail lacks %q:\n%s", want, s)
		}
	}
}

// TestReviewShowsWhatArrivedTwice: the review screen marks the action in
// the state it lists it in, counts the late evidence in its rates, and its
// late evidence filter selects the line that found it.
func TestReviewShowsWhatArrivedTwice(t *testing.T) {
	l, _ := arrivedTwiceLedger(t)
	rv := NewReview(NewTheme(true), quickFollow(ReviewConfig{Ledger: l, Actor: "olga", Source: "ledger.db"}))
	a := newDriven(rv, 160, 40)
	typeKeys(a, "tab") // Rates
	if s := strings.Join(strings.Fields(screenText(a)), " "); !strings.Contains(s, "late evidence 1 ") {
		t.Errorf("the rates do not count the late evidence:\n%s", s)
	}
	typeKeys(a, "tab") // At a stop: without one, the end of the history
	s := screenText(a)
	var marked []string
	for _, line := range strings.Split(s, "\n") {
		if strings.Contains(line, "ARRIVED TWICE") {
			marked = append(marked, line)
		}
	}
	if len(marked) != 1 || !strings.Contains(marked[0], "T-2002") || !strings.Contains(marked[0], "now sent") {
		t.Fatalf("lines marked as arrived twice: %q, want only T-2002's:\n%s", marked, s)
	}
	typeKeys(a, "tab") // Timeline
	g := slices.IndexFunc(review.Groups, func(g review.Group) bool { return g.Name == "late evidence" })
	for range g {
		typeKeys(a, "f")
	}
	if got := strings.Join(selectedKinds(rv), ","); got != string(ledger.EvLateArrival) {
		t.Fatalf("the late evidence filter selects %s", got)
	}
	if s := screenText(a); !strings.Contains(s, "kind late evidence") || !strings.Contains(s, "arrived after all") {
		t.Errorf("the timeline does not show the late evidence it selects:\n%s", s)
	}
}

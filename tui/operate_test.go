package tui

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"

	"gatehouse/destination/fake"
	"gatehouse/ledger"
)

// stoppedLedger holds an approved action the stop switch held before any
// attempt started: nothing was sent, nothing is open to reconcile.
func stoppedLedger(t testing.TB) *ledger.Ledger {
	t.Helper()
	l, _ := openLedger(t)
	ctx := context.Background()
	a := proposeApproved(t, l, "T-2001", "cust-eve", "ack-workflow")
	if err := l.Stop(ctx, "lead", "carrier data wrong"); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Execute(ctx, ledger.ExecuteRequest{Key: a.Key, Executor: "ack-workflow", Reread: consent}, fake.New()); err == nil {
		t.Fatal("an attempt started while stopped")
	}
	return l
}

// operationCases are situations each operation meets, with the CLI's exit
// code for the same verb in the same situation (cmd/gatehouse's
// TestGateVerbsAnswerAsTheScreensSay runs the verbs): the screens say the
// code's meaning and the code, or what the action became for exit 0.
var operationCases = []struct {
	name   string
	ledger func(t testing.TB) *ledger.Ledger
	row    []string // selects the row on the Actions tab
	keys   []string // the operation, confirmed
	want   []string // in the status lines
}{
	{"ReconcileSent", seedLedger, []string{"G"}, []string{"c", "enter"},
		[]string{"reconcile cust-ada:enquiry-T-1001:reply_ack → nothing to reconcile; nothing changed (exit 19)"}},
	{"ReconcileHeldByStopWithoutAttempt", stoppedLedger, nil, []string{"c", "enter"},
		[]string{"reconcile cust-eve:enquiry-T-2001:reply_ack → nothing to reconcile; nothing changed (exit 19)"}},
	{"ReconcileUnknownWithoutRecords", seedLedger, []string{"G", "k"}, []string{"c", "enter"},
		[]string{"reconcile cust-bob:enquiry-T-1002:reply_ack → held for a person (exit 13)"}},
	{"ReleaseSent", seedLedger, []string{"G"}, []string{"u", "o", "k", "enter"},
		[]string{"release hold on cust-ada:enquiry-T-1001:reply_ack → not done (exit 1)"}},
	{"HoldUnknown", seedLedger, []string{"G", "k"}, []string{"h", "w", "enter"},
		[]string{"hold cust-bob:enquiry-T-1002:reply_ack → held: held by olga: w"}},
	{"ResolveArrivedUnknown", seedLedger, []string{"G", "k"}, []string{"Y", "s", "a", "w", "enter"},
		[]string{"record as arrived cust-bob:enquiry-T-1002:reply_ack → sent:"}},
	{"ResolveArrivedSent", seedLedger, []string{"G"}, []string{"Y", "s", "a", "w", "enter"},
		[]string{"record as arrived cust-ada:enquiry-T-1001:reply_ack → nothing to reconcile; nothing changed (exit 19)"}},
}

// TestOperationsSayTheirResult: each operation, from the inspector, from
// the review's operating mode and from the action's detail, says what came
// of it in the words of the CLI, never a bare "done".
func TestOperationsSayTheirResult(t *testing.T) {
	surfaces := []struct {
		name string
		open func(l *ledger.Ledger) (Screen, []string)
		// detail says the operation is taken from the action's detail.
		detail bool
	}{
		{"Inspector", func(l *ledger.Ledger) (Screen, []string) { return newTestInspector(l), []string{"tab"} }, false},
		{"ReviewOperating", func(l *ledger.Ledger) (Screen, []string) {
			rv := NewReview(NewTheme(true), ReviewConfig{Ledger: l, Actor: "olga", Source: "ledger.db", Poll: -1})
			return rv, []string{"O", "x", "enter", "tab"}
		}, false},
		{"Detail", func(l *ledger.Ledger) (Screen, []string) { return newTestInspector(l), []string{"tab"} }, true},
	}
	for _, sf := range surfaces {
		for _, tc := range operationCases {
			t.Run(sf.name+"/"+tc.name, func(t *testing.T) {
				s, open := sf.open(tc.ledger(t))
				a := newDriven(s, 120, 30)
				typeKeys(a, open...)
				typeKeys(a, tc.row...)
				if sf.detail {
					typeKeys(a, "enter")
					if !strings.Contains(screenText(a), "Attempts") {
						t.Fatalf("the detail did not open:\n%s", screenText(a))
					}
				}
				typeKeys(a, tc.keys...)
				got := strings.Join(a.statusLines(), " ")
				for _, want := range tc.want {
					if !strings.Contains(strings.Join(strings.Fields(got), " "), want) {
						t.Errorf("status %q lacks %q\n%s", got, want, screenText(a))
					}
				}
				if strings.Contains(got, ": done") {
					t.Errorf("status says done: %q", got)
				}
			})
		}
	}
}

// TestGoneMailboxIsNamed: a reconcile whose records no longer answer (the
// mailbox of a rehearsal kept with --ledger, long over) is said as such,
// with the way on — record by hand — instead of the dial error with its
// escaped URL. The error is a real one: a lookup of a port nothing listens
// on.
func TestGoneMailboxIsNamed(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	_, lookErr := http.Get("http://" + addr + "/api/lookup?key=gh1%3Acust-ada%3Aenquiry-1%3Areply_ack%3At-1%3Ar0")
	if lookErr == nil {
		t.Fatal("a closed port answered")
	}
	// As ledger/reconcile.go records it.
	recorded := fmt.Sprintf("outcome of attempt 1 unknown and could not be checked (%v); a person must look at the destination", lookErr)
	got := plainReason(recorded)
	for _, want := range []string{"nothing answers at " + addr, "as a rehearsal's does when the rehearsal ends", "Y arrived or N did not arrive",
		"outcome of attempt 1 unknown and could not be checked (", "); a person must look at the destination"} {
		if !strings.Contains(got, want) {
			t.Errorf("%q lacks %q", got, want)
		}
	}
	if strings.Contains(got, "%3A") || strings.Contains(got, "dial tcp") {
		t.Errorf("the raw error is still there: %q", got)
	}
	if other := "could not be checked (lookup timed out)"; plainReason(other) != other {
		t.Errorf("another failure was rewritten: %q", plainReason(other))
	}
}

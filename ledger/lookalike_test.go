package ledger_test

import (
	"fmt"
	"testing"

	"gatehouse/destination"
	"gatehouse/ledger"
)

// TestLookAlikeNeverSettlesAnAttempt: a stored message that carries an
// attempt's Message-ID (copied from one that was seen, or drawn by another
// ledger) but another body, another sender or another recipient is not the
// attempt's message: reconciliation holds the action as a contradiction
// for a person, never calls it sent, and nothing is re-sent.
func TestLookAlikeNeverSettlesAnAttempt(t *testing.T) {
	tests := []struct {
		Name   string
		Forge  func(m *destination.Message)
		Settle bool // the forgery is the very message: it settles as sent
	}{
		{"TheMessageItself", func(*destination.Message) {}, true},
		{"OtherBody", func(m *destination.Message) { m.Body = "Your refund was declined." }, false},
		{"OtherSubject", func(m *destination.Message) { m.Subject = "Action required" }, false},
		{"OtherSender", func(m *destination.Message) { m.From = "billing@elsewhere.example" }, false},
		{"OtherRecipient", func(m *destination.Message) { m.To = "eve@example.org" }, false},
		{"SameWordsRewrapped", func(m *destination.Message) { m.Body = "  " + m.Body + "\n\n" }, true},
	}
	for _, tc := range tests {
		t.Run(tc.Name, func(t *testing.T) {
			w := newWorld(t)
			a := w.approved("wf-ack")
			_, msg, err := w.l.BeginAttempt(w.ctx, ledger.ExecuteRequest{Key: a.Key, Executor: "wf-ack", Reread: consentYes,
				Endpoint: destination.EndpointOf(w.dest)}) // the executor stops: nothing handed over
			w.must(err)
			forged := msg
			tc.Forge(&forged)
			w.dest.Inject(forged)
			w.settled(a.Key)
			_, err = w.l.Recover(w.ctx)
			w.must(err)
			got, _ := w.reconcile(a.Key, "ops")
			want, cause := ledger.StateHeld, ledger.HoldContradiction
			if tc.Settle {
				want, cause = ledger.StateSent, ""
			}
			if got.State != want || got.HoldCause != cause {
				t.Fatalf("reconcile: %s/%s (%s), want %s/%s", got.State, got.HoldCause, got.Reason, want, cause)
			}
			if _, err := w.execute(a.Key, "wf-ack", consentYes); err == nil {
				t.Fatal("a send was allowed after a look-alike was found")
			}
		})
	}
}

// TestMessageIDsDoNotCollide: attempts of the same actions in two copies
// of one ledger (a backup restored beside its original, staging and
// production) never draw the same Message-ID.
func TestMessageIDsDoNotCollide(t *testing.T) {
	const n = 10000
	seen := make(map[string]bool, 2*n)
	for copy := range 2 {
		id := "0123456789abcdef" // both copies carry the same ledger identity
		for i := range n {
			mid := ledger.NewTransportID(id, 1+i%3)
			if seen[mid] {
				t.Fatalf("copy %d drew %s twice", copy, mid)
			}
			seen[mid] = true
		}
	}
	if len(seen) != 2*n {
		t.Fatal(fmt.Sprint("drew ", len(seen), " distinct ids, want ", 2*n))
	}
}

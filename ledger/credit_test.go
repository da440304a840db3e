package ledger_test

import (
	"testing"

	"gatehouse/ledger"
)

// TestCreditNamesWhoDidWhat: an action's credit names its proposer and
// whose act put it in its state, never the task's owner for it: a
// workflow's proposal the gate cancelled after a takeover is the
// workflow's, cancelled by the gate at its send, while the new owner owns
// the task.
func TestCreditNamesWhoDidWhat(t *testing.T) {
	consentNo := []ledger.MaterialRead{{Source: "crm", Field: "consent", Value: "unsubscribed"}}
	tests := []struct {
		name       string
		act        func(w *world, key string)
		state      ledger.State
		proposedBy string
		words      string
		short      string
	}{
		{"Approved", func(*world, string) {}, ledger.StateApproved, "wf-ack", "approved by lead", "lead"},
		{"SentByTheOwner", func(w *world, key string) {
			_, err := w.execute(key, "wf-ack", consentYes)
			w.must(err)
		}, ledger.StateSent, "wf-ack", "sent by wf-ack", "wf-ack"},
		{"CancelledAfterATakeover", func(w *world, key string) {
			_, err := w.l.TakeOver(w.ctx, ledger.TaskRef{ID: "task-7"}, "sam", "a specific answer")
			w.must(err)
			_, _ = w.execute(key, "wf-ack", consentYes) // refused: sam owns it now
		}, ledger.StateCancelled, "wf-ack", "cancelled by the gate at wf-ack's send", "gate"},
		{"DeniedAtSend", func(w *world, key string) {
			_, _ = w.execute(key, "wf-ack", consentNo) // refused: consent changed
		}, ledger.StateDenied, "wf-ack", "denied by the gate at wf-ack's send", "gate"},
		{"WithdrawnByTheOwner", func(w *world, key string) {
			_, err := w.l.Cancel(w.ctx, key, "wf-ack", "the customer wrote again")
			w.must(err)
		}, ledger.StateCancelled, "wf-ack", "withdrawn by wf-ack", "wf-ack"},
		{"HeldByAPerson", func(w *world, key string) {
			_, err := w.l.Hold(w.ctx, key, "ops", "looking into it")
			w.must(err)
		}, ledger.StateHeld, "wf-ack", "held by ops", "ops"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			a := w.approved("wf-ack")
			tc.act(w, a.Key)
			d, err := w.l.Detail(w.ctx, a.Key)
			w.must(err)
			if d.Action.State != tc.state {
				t.Fatalf("state %s, want %s", d.Action.State, tc.state)
			}
			c := ledger.CreditOf(d.Action, d.Events)
			if c.ProposedBy != tc.proposedBy || c.Words() != tc.words || c.Short() != tc.short {
				t.Errorf("credit proposed by %q, %q, short %q; want %q, %q, %q",
					c.ProposedBy, c.Words(), c.Short(), tc.proposedBy, tc.words, tc.short)
			}
		})
	}
}

package proof_test

import (
	"testing"

	"gatehouse/destination"
	smtpdest "gatehouse/destination/smtp"
	"gatehouse/ledger"
	"gatehouse/proof"
)

// TestCheckByMessageIDCountsOnlyTheAttemptsOwn: a stored message is an
// arrival of an attempt only when it carries the attempt's Message-ID, went
// to its recipient, and comes from its sender with its content. Action 1
// is sent and its message arrived; action 2 is recorded sent by a person
// although nothing of it arrived. A copy of action 2's Message-ID that
// differs in any of the other three is a look-alike and leaves action 2 a
// loss; an exact copy is its message.
func TestCheckByMessageIDCountsOnlyTheAttemptsOwn(t *testing.T) {
	tests := []struct {
		Name       string
		Of         int // which action's attempt the copy imitates (0: none sent)
		Change     func(m *destination.Message)
		Losses     int
		LookAlikes int
	}{
		{Name: "NothingElseArrived", Losses: 1},
		{Name: "AnotherSender", Of: 2, Change: func(m *destination.Message) { m.From = "security@bank.example" }, Losses: 1, LookAlikes: 1},
		{Name: "AnotherContent", Of: 2, Change: func(m *destination.Message) { m.Body = "Confirm your password here." }, Losses: 1, LookAlikes: 1},
		{Name: "AnotherRecipient", Of: 2, Change: func(m *destination.Message) { m.To = "someone-else@example.org" }, Losses: 1, LookAlikes: 1},
		{Name: "ExactCopy", Of: 2, Change: func(m *destination.Message) {}, Losses: 0},
		{Name: "AnotherSenderOfTheArrivedOne", Of: 1, Change: func(m *destination.Message) { m.From = "security@bank.example" },
			Losses: 1, LookAlikes: 1},
	}
	for _, tc := range tests {
		t.Run(tc.Name, func(t *testing.T) {
			w := newWorld(t)
			w.approvedActions("wf-ack", 2)
			l := w.open()
			defer l.Close()
			d, err := smtpdest.New(w.target())
			must(t, err)
			req := func(key string) ledger.ExecuteRequest {
				return ledger.ExecuteRequest{Key: key, Executor: "wf-ack", Reread: consentYes, Endpoint: destination.EndpointOf(d.Gate())}
			}
			if _, err := l.Execute(w.ctx, req(w.keys[0]), d.Gate()); err != nil {
				t.Fatal(err)
			}
			// Action 2: its executor died before the hand-over, and a
			// person said it was delivered.
			att, _, err := l.BeginAttempt(w.ctx, req(w.keys[1]))
			must(t, err)
			_, err = l.RecordOutcome(w.ctx, att.TransportID, destination.OutcomeUnknown, "the executor died")
			must(t, err)
			_, err = l.ResolveUnknown(w.ctx, w.keys[1], "ops", true, "the customer says so")
			must(t, err)
			if tc.Of > 0 {
				key := w.keys[tc.Of-1]
				atts, err := l.Attempts(w.ctx, key)
				must(t, err)
				a, err := l.Action(w.ctx, key)
				must(t, err)
				at := atts[len(atts)-1]
				m := destination.Message{ActionKey: key, Attempt: at.Number, TransportID: at.MessageID, From: at.Sender, To: at.Recipient,
					Subject: a.Subject, Body: a.Body}
				tc.Change(&m)
				if _, err := d.Send(w.ctx, m); err != nil {
					t.Fatal(err)
				}
			}
			v, err := proof.CheckByMessageID(w.ctx, l, w.mb)
			must(t, err)
			t.Logf("%s\n%s", v, v.Summary())
			if len(v.Losses) != tc.Losses || v.LookAlikes != tc.LookAlikes || len(v.Duplicates) != 0 || len(v.Contradictions) != 0 {
				t.Fatalf("%d losses and %d look-alikes (%d duplicates, %d contradictions), want %d and %d", len(v.Losses), v.LookAlikes,
					len(v.Duplicates), len(v.Contradictions), tc.Losses, tc.LookAlikes)
			}
		})
	}
}

package ledger_test

import (
	"reflect"
	"testing"

	"gatehouse/destination"
	"gatehouse/ledger"
)

// TestExecuteResultIsTheActionAsItStands: whatever Execute answers, sent,
// refused or held, its Result carries the action exactly as a read of the
// ledger right after finds it, so no caller has to read it back.
func TestExecuteResultIsTheActionAsItStands(t *testing.T) {
	tests := []struct {
		Name  string
		Setup func(w *world, key string)
		As    string
		Read  []ledger.MaterialRead
		State ledger.State
	}{
		{"Sent", nil, "wf-ack", consentYes, ledger.StateSent},
		{"AlreadySent", func(w *world, key string) {
			_, err := w.execute(key, "wf-ack", consentYes)
			w.must(err)
		}, "wf-ack", consentYes, ledger.StateSent},
		{"NotTheOwner", nil, "mallory", consentYes, ledger.StateApproved},
		{"StaleMaterial", nil, "wf-ack", []ledger.MaterialRead{{Source: "crm", Field: "consent", Value: "no"}}, ledger.StateDenied},
		{"Stopped", func(w *world, _ string) {
			w.must(w.l.Stop(w.ctx, "lead", "incident"))
		}, "wf-ack", consentYes, ledger.StateHeld},
		{"Unknown", func(w *world, _ string) {
			w.dest.Script(destination.OutcomeUnknown)
		}, "wf-ack", consentYes, ledger.StateUnknown},
	}
	for _, tc := range tests {
		t.Run(tc.Name, func(t *testing.T) {
			w := newWorld(t)
			a := w.approved("wf-ack")
			if tc.Setup != nil {
				tc.Setup(w, a.Key)
			}
			res, _ := w.execute(a.Key, tc.As, tc.Read)
			read, err := w.l.Action(w.ctx, a.Key)
			w.must(err)
			if res.Action.State != tc.State {
				t.Errorf("result state %s, want %s", res.Action.State, tc.State)
			}
			if !reflect.DeepEqual(res.Action, read) {
				t.Errorf("result action differs from the ledger's:\nresult %+v\nledger %+v", res.Action, read)
			}
		})
	}
}

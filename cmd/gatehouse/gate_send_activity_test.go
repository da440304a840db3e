package main

import (
	"testing"

	"gatehouse/ledger"
)

// observe records what each verb run against e's ledger asked of its store,
// beyond opening it.
func (e *gateEnv) observe() *[]ledger.Activity {
	e.t.Helper()
	var seen []ledger.Activity
	verbObservers.Store(e.ledger, func(a ledger.Activity) { seen = append(seen, a) })
	e.t.Cleanup(func() { verbObservers.Delete(e.ledger) })
	return &seen
}

// TestGateSendIsOneDecision counts the transactions of CLI sends: a send
// is the decision that records its attempt and the transaction that
// records the outcome, and a refusal is the decision alone; neither reads
// the action before or after, since Execute's result carries it. Only a
// send that names no destination reads, once, the destination the action
// was approved for.
func TestGateSendIsOneDecision(t *testing.T) {
	tests := []struct {
		Name  string
		Args  func(e *gateEnv, key string) []string
		Exit  int
		Want  ledger.Activity
		State string
	}{
		{"SentNamingTheDestination", func(e *gateEnv, key string) []string {
			return []string{"send", "--key", key, "--as", "alice", "--destination", e.target(), "--material", "crm.consent=yes"}
		}, 0, ledger.Activity{Writes: 2}, "sent"},
		{"SentToTheApprovedDestination", func(e *gateEnv, key string) []string {
			return []string{"send", "--key", key, "--as", "alice", "--material", "crm.consent=yes"}
		}, 0, ledger.Activity{Writes: 2, Reads: 1}, "sent"},
		{"RefusedNotTheOwner", func(e *gateEnv, key string) []string {
			return []string{"send", "--key", key, "--as", "mallory", "--destination", e.target(), "--material", "crm.consent=yes"}
		}, exitDenied, ledger.Activity{Writes: 1}, ""},
		{"RefusedStaleMaterial", func(e *gateEnv, key string) []string {
			return []string{"send", "--key", key, "--as", "alice", "--destination", e.target(), "--material", "crm.consent=no"}
		}, exitDenied, ledger.Activity{Writes: 1}, "denied"},
	}
	for _, tc := range tests {
		t.Run(tc.Name, func(t *testing.T) {
			e := newGateEnv(t)
			key := e.approved("enq-1", "alice", "crm.consent=yes")
			seen := e.observe()
			r := e.gate(append(tc.Args(e, key), "--json")...)
			wantExit(t, r, tc.Exit)
			if len(*seen) != 1 {
				t.Fatalf("observed %d verbs, want 1", len(*seen))
			}
			if got := (*seen)[0]; got != tc.Want {
				t.Errorf("send asked of the ledger %+v, want %+v", got, tc.Want)
			}
			var out struct{ Key, State string }
			decodeOne(t, r.stdout, &out)
			if out.Key != key || tc.State != "" && out.State != tc.State {
				t.Errorf("printed key %q state %q, want %q %q (the action as the send left it)", out.Key, out.State, key, tc.State)
			}
		})
	}
}

// TestGateSendRepeatedIsOneRefusal: a second send of a sent action is a
// duplicate block, recorded in one transaction and printed from it.
func TestGateSendRepeatedIsOneRefusal(t *testing.T) {
	e := newGateEnv(t)
	key := e.approved("enq-1", "alice", "crm.consent=yes")
	wantExit(t, e.send(key, "alice", "crm.consent=yes"), 0)
	seen := e.observe()
	r := e.gate("send", "--key", key, "--as", "alice", "--destination", e.target(), "--material", "crm.consent=yes", "--json")
	wantExit(t, r, exitDuplicate)
	if len(*seen) != 1 || (*seen)[0] != (ledger.Activity{Writes: 1}) {
		t.Errorf("repeated send asked %+v of the ledger, want one write and no read", *seen)
	}
	var out struct{ Key, State string }
	decodeOne(t, r.stdout, &out)
	if out.State != "sent" {
		t.Errorf("printed state %q, want sent", out.State)
	}
}

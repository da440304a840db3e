package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"gatehouse/testmailbox"
)

// TestReconcileWithNothingToReconcile: exit 0 from reconcile means the
// action is sent, established now; an action whose outcome nobody asked
// about (drafting, approved, already sent) exits 19 and nothing changes.
func TestReconcileWithNothingToReconcile(t *testing.T) {
	e := newGateEnv(t)
	e.must("claim", "--task", "task-d", "--customer", "cust-42", "--as", "alice")
	draft := strings.TrimSpace(e.must("propose", "--as", "wf", "--task", "task-d", "--customer", "cust-42", "--event", "d1",
		"--type", "reply_ack", "--target", "task-d", "--to", "ada@example.com", "--subject", "Hi", "--body", "Hello",
		"--destination", e.target()).stdout)
	approved := e.approved("enq-a", "alice", "crm.consent=yes")
	sent := e.approved("enq-s", "alice", "crm.consent=yes")
	wantExit(t, e.send(sent, "alice", "crm.consent=yes"), exitOK)
	for _, tc := range []struct{ name, key, state string }{
		{"Drafting", draft, "drafting"}, {"Approved", approved, "approved"}, {"Sent", sent, "sent"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := e.must("history", "--key", tc.key).stdout
			wantExit(t, e.gate("reconcile", "--key", tc.key, "--as", "ops"), exitNothingToDo, "nothing to reconcile")
			r := e.gate("reconcile", "--key", tc.key, "--as", "ops", "--json")
			var v struct {
				State    string `json:"state"`
				ExitCode int    `json:"exit_code"`
			}
			if err := json.Unmarshal([]byte(r.stdout), &v); err != nil || v.ExitCode != exitNothingToDo || v.State != tc.state {
				t.Fatalf("--json: %v %+v\n%s", err, v, r.stdout)
			}
			if after := e.must("history", "--key", tc.key).stdout; after != before {
				t.Errorf("reconcile with nothing to reconcile wrote history:\n%s", after)
			}
		})
	}
	wantExit(t, e.gate("resolve", "--key", approved, "--as", "ops", "--outcome", "delivered", "--reason", "x"), exitNothingToDo)
}

// TestResolveReadsTheRecordsFirst: the mailbox stores the message and
// hangs up (exit 14). A person's "not delivered" against records that hold
// it is refused (exit 13, nothing changed, both facts in the history); the
// release and send that used to follow cannot happen, and reconcile finds
// the message: 1 arrival. --override-records takes the word, recorded and
// counted as a manual override.
func TestResolveReadsTheRecordsFirst(t *testing.T) {
	mb := startMailbox(t)
	e := newGateEnv(t)
	arrivals := func(key string) int {
		n, err := mb.Count(context.Background(), testmailbox.Filter{ActionKey: key})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	send := func(key string) result {
		return e.gate("send", "--key", key, "--as", "alice", "--destination", mb.Target(), "--material", "crm.consent=yes")
	}
	dropped := func(enquiry string) string {
		key := e.approvedTo(mb.Target(), enquiry, "alice", "crm.consent=yes")
		f, _ := testmailbox.ParseFault("accept_then_drop")
		mb.AddFault(f)
		wantExit(t, send(key), exitUnknown)
		return key
	}

	key := dropped("enq-1")
	wantExit(t, e.gate("resolve", "--key", key, "--as", "ops", "--outcome", "not-delivered", "--reason", "the customer says nothing came"),
		exitHeld, "hold its message")
	if show := e.must("show", "--key", key, "--json").stdout; !strings.Contains(show, `"state":"unknown"`) {
		t.Fatalf("a refused word changed the action: %s", show)
	}
	hist := e.must("history", "--key", key).stdout
	if !strings.Contains(hist, "the customer says nothing came") || !strings.Contains(hist, "hold its message") {
		t.Errorf("the history lacks both facts:\n%s", hist)
	}
	wantExit(t, e.gate("release-hold", "--key", key, "--as", "ops", "--reason", "resend"), exitUnknown)
	wantExit(t, send(key), exitUnknown)
	wantExit(t, e.gate("reconcile", "--key", key, "--as", "ops"), exitOK)
	if n := arrivals(key); n != 1 {
		t.Fatalf("%d arrivals, want 1", n)
	}

	metrics := func() int {
		var m struct {
			ManualOverrides int `json:"manual_overrides"`
		}
		if err := json.Unmarshal([]byte(e.must("metrics", "--json").stdout), &m); err != nil {
			t.Fatal(err)
		}
		return m.ManualOverrides
	}
	before := metrics()
	key2 := dropped("enq-2")
	wantExit(t, e.gate("resolve", "--key", key2, "--as", "ops", "--outcome", "not-delivered", "--override-records",
		"--reason", "the mailbox lost it after storing: its operator confirmed"), exitOK)
	if got := metrics(); got != before+1 {
		t.Errorf("manual overrides %d → %d, want one more", before, got)
	}
	if hist := e.must("history", "--key", key2).stdout; !strings.Contains(hist, "overridden by the person") {
		t.Errorf("the override is not in the history:\n%s", hist)
	}
}

package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"gatehouse/ledger"
)

// TestListSearchFindsBensActions: `gate list --search ben@` matches the
// middle of a recipient, whatever its case.
func TestListSearchFindsBensActions(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.db")
	l, err := ledger.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, p := range []struct{ customer, event, to string }{
		{"cust-ada", "enquiry-1", "ada@example.com"},
		{"cust-ben", "enquiry-2", "Ben@example.com"},
		{"cust-ben", "refund-3", "ben@example.com"},
	} {
		task := ledger.TaskRef{ID: "t-" + p.event, Customer: p.customer, Subject: "Enquiry"}
		if _, err := l.Propose(ctx, ledger.Proposal{Task: task, Customer: p.customer, Event: p.event,
			ActionType: "reply_ack", Target: task.ID, Recipient: p.to, Subject: "Hello", Body: "Hello", Actor: "wf",
			Destination: "fake://accept"}); err != nil {
			t.Fatal(err)
		}
	}
	l.Close()
	var out, errOut bytes.Buffer
	if code := run([]string{"gate", "list", "--search", "ben@", "--ledger", path}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	s := out.String()
	if !strings.Contains(s, "gh1:cust-ben:refund-3") || !strings.Contains(s, "gh1:cust-ben:enquiry-2") ||
		strings.Contains(s, "cust-ada") || !strings.Contains(s, "of 2") {
		t.Fatalf("list --search ben@ printed:\n%s", s)
	}
	if i, j := strings.Index(s, "refund-3"), strings.Index(s, "enquiry-2"); i > j {
		t.Fatalf("not newest first:\n%s", s)
	}
}

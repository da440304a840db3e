package answer

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"gatehouse/ledger"
)

// TestCodeNamesEveryRefusal: each of the gate's refusals maps to the exit
// code docs/cli.md gives it, wrapped or not, and every code has words.
func TestCodeNamesEveryRefusal(t *testing.T) {
	tests := []struct {
		err  error
		code int
	}{
		{nil, OK},
		{ledger.ErrDuplicate, Duplicate},
		{ledger.ErrInFlight, InFlight},
		{ledger.ErrDenied, Denied},
		{ledger.ErrOwnershipConflict, Denied},
		{ledger.ErrApprovalStale, Denied},
		{ledger.ErrCancelled, Denied},
		{ledger.ErrHeld, Held},
		{ledger.ErrUnknownOutcome, Unknown},
		{errors.Join(ledger.ErrUnknownOutcome, ledger.ErrNotRecorded), Unknown},
		{ledger.ErrNotRecorded, Other},
		{ledger.ErrStopped, Stopped},
		{ledger.ErrFailed, Failed},
		{ledger.ErrWrongDestination, WrongDestination},
		{ledger.ErrUnknownConsent, Consent},
		{ledger.ErrNothingToReconcile, NothingToDo},
		{ledger.ErrInvalid, Usage},
		{ledger.ErrBackup, Usage},
		{ledger.ErrWrongState, Other},
		{errors.New("disk full"), Other},
	}
	for _, tc := range tests {
		wrapped := fmt.Errorf("send gh1:x: %w", tc.err)
		if tc.err == nil {
			wrapped = nil
		}
		if got := Code(wrapped); got != tc.code {
			t.Errorf("Code(%v) = %d, want %d", tc.err, got, tc.code)
		}
		if Meaning(tc.code) == "" {
			t.Errorf("code %d has no meaning", tc.code)
		}
	}
}

// TestReconcileOfASettledActionIsNotDone: reconcile of an action whose
// outcome nobody asked about answers "nothing to reconcile" (19), as `gate
// reconcile` exits, although the ledger's own Reconcile returns no error.
func TestReconcileOfASettledActionIsNotDone(t *testing.T) {
	ctx := context.Background()
	l, err := ledger.Open(filepath.Join(t.TempDir(), "ledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ref := ledger.TaskRef{ID: "t-1", Customer: "cust-ada"}
	if _, err := l.Claim(ctx, ref, "wf"); err != nil {
		t.Fatal(err)
	}
	a, err := l.Propose(ctx, ledger.Proposal{Task: ref, Customer: "cust-ada", Event: "e-1", ActionType: "reply_ack", Target: "t-1",
		Recipient: "ada@example.com", Subject: "Hello", Body: "Hi", Actor: "wf", Destination: "fake://destination"})
	if err != nil {
		t.Fatal(err)
	}
	req := ledger.ReconcileRequest{Key: a.Key, Actor: "ops"}
	if _, err := l.Reconcile(ctx, req); err != nil {
		t.Fatalf("the ledger's reconcile of a draft: %v", err)
	}
	if _, err := Reconcile(ctx, l, req); Code(err) != NothingToDo {
		t.Fatalf("answer.Reconcile of a draft: %v (code %d), want %d", err, Code(err), NothingToDo)
	}
}

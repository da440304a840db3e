package ledger

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"gatehouse/internal/pgtest"
)

// TestFreshApprovalIsWhatTheRowsSay: a recipient proposed and approved in
// the transaction that then starts its attempt is decided on the action
// and approval as that transaction holds them in memory, not read back
// (see batchState.approved). Here each is compared with the rows the same
// transaction reads: the action field by field and the approval but for
// its id (which nothing deciding on it needs), for a plain recipient, one
// with a display name and a revision of content, and on both stores.
func TestFreshApprovalIsWhatTheRowsSay(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gate.db")
	if os.Getenv("GATEHOUSE_TEST_STORE") == "postgres" {
		path = pgtest.Database(t)
	}
	l, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()
	if _, err := l.Claim(ctx, TaskRef{ID: "release:r"}, "bot"); err != nil {
		t.Fatal(err)
	}
	proposals := []Proposal{
		{Customer: "c1", Recipient: "c1@example.org", Subject: "Opening hours", Body: "We open at 9."},
		{Customer: "c2", Recipient: "C2@Example.org", RecipientName: "Ada Lovelace", Subject: "Öffnungszeiten ✓", Body: "Line 1\nLine 2\n"},
	}
	for i, p := range proposals {
		p.Task, p.Event, p.ActionType, p.Target, p.Actor = TaskRef{ID: "release:r"}, "r", "notice", "audience", "bot"
		p.Destination, p.Lookup, p.Sender = "smtp://mail.example:25", "http://mail.example/api", "news@shop.example"
		p = p.withDefaults()
		material := []MaterialRead{{Source: "crm", Field: "consent", Value: "yes"}, {Source: "crm", Field: "a-first", Value: fmt.Sprint(i)}}
		err := l.writeBatch(ctx, true, func(tx *wtx) error {
			if err := tx.proposeAndApprove(p, "lead", material); err != nil {
				return err
			}
			f := tx.takeApproved(p.Key())
			if f == nil {
				return fmt.Errorf("no fresh approval kept for %s", p.Key())
			}
			a, err := getAction(tx, p.Key())
			if err != nil {
				return err
			}
			ap, ok, err := currentApproval(tx, p.Key())
			if err != nil || !ok {
				return fmt.Errorf("approval of %s: %v %v", p.Key(), ok, err)
			}
			ap.ID = 0
			if got, want := fmt.Sprintf("%+v", f.action), fmt.Sprintf("%+v", a); got != want {
				t.Errorf("action in memory\n%s\nrows\n%s", got, want)
			}
			if got, want := fmt.Sprintf("%+v", f.approval), fmt.Sprintf("%+v", ap); got != want {
				t.Errorf("approval in memory\n%s\nrows\n%s", got, want)
			}
			if tx.takeApproved(p.Key()) != nil {
				t.Errorf("a fresh approval was handed out twice")
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

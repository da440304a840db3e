package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"gatehouse/destination"
	"gatehouse/destination/fake"
	"gatehouse/ledger"
)

func TestRemovedRecipientIsNeverSent(t *testing.T) {
	send := func(w *world, key string) error {
		_, err := w.execute(key, "notice-bot", []ledger.MaterialRead{{Source: "crm", Field: "consent", Value: "yes"}})
		return err
	}
	t.Run("ApprovedBeforeRemoval", func(t *testing.T) {
		w := newWorld(t)
		importMessy(t, w, "rel-1")
		w.must(w.l.ApproveAudience(w.ctx, "rel-1", "lead", fake.DefaultName, ""))
		w.dest.Script(destination.OutcomeRejectedTemporary, destination.OutcomeRejectedTemporary, destination.OutcomeRejectedTemporary)
		_, err := w.l.SendAudience(w.ctx, ledger.AudienceSend{ReleaseID: "rel-1", Actor: "notice-bot"}, w.dest, testCRM())
		w.must(err)
		key := ledger.Key("c1", "rel-1", "notice", "audience", 0)
		if got := w.state(key); got != ledger.StateApproved {
			t.Fatalf("after a temporary reject: %s", got)
		}
		w.must(w.l.RemoveRecipient(w.ctx, "rel-1", "c1", "ops", "asked not to be contacted"))
		if err := send(w, key); !errors.Is(err, ledger.ErrCancelled) {
			t.Fatalf("send after removal: %v", err)
		}
	})
	t.Run("RemovedWhileASendReadsItsPage", func(t *testing.T) {
		w := newWorld(t)
		importMessy(t, w, "rel-1")
		w.must(w.l.ApproveAudience(w.ctx, "rel-1", "lead", fake.DefaultName, ""))
		w.must(w.l.RemoveRecipient(w.ctx, "rel-1", "c1", "ops", "asked not to be contacted"))
		// What a run that read c1 as eligible before the removal does next.
		key := ledger.Key("c1", "rel-1", "notice", "audience", 0)
		_, err := w.l.Claim(w.ctx, ledger.TaskRef{ID: "release:rel-1"}, "notice-bot")
		w.must(err)
		_, err = w.l.Propose(w.ctx, ledger.Proposal{Task: ledger.TaskRef{ID: "release:rel-1"}, Customer: "c1", Event: "rel-1",
			ActionType: "notice", Target: "audience", Recipient: "ada@example.org", Subject: "Opening hours change",
			Body: "Our opening hours change on 1 April.", Actor: "notice-bot", Destination: fake.DefaultName})
		w.must(err)
		w.l.Approve(w.ctx, key, "lead", []ledger.MaterialRead{{Source: "crm", Field: "consent", Value: "yes"}})
		if err := send(w, key); !errors.Is(err, ledger.ErrCancelled) {
			t.Fatalf("send after removal: %v", err)
		}
		s, err := w.l.SendAudience(w.ctx, ledger.AudienceSend{ReleaseID: "rel-1", Actor: "notice-bot"}, w.dest, testCRM())
		w.must(err)
		if w.dest.Arrivals(key) != 0 || s.Removed != 1 || s.Confirmed != 2 {
			t.Fatalf("arrivals %d, summary %+v", w.dest.Arrivals(key), s)
		}
	})
}

func TestRevisingKeepsHoldsAndWithdrawals(t *testing.T) {
	w := newWorld(t)
	a := w.approved("wf-ack")
	_, err := w.l.Hold(w.ctx, a.Key, "legal", "legal review pending")
	w.must(err)
	p := ackProposal("wf-ack")
	p.Body = "A different answer."
	if _, err := w.l.Propose(w.ctx, p); !errors.Is(err, ledger.ErrHeld) {
		t.Fatalf("revising a held action: %v", err)
	}
	if got, _ := w.l.Action(w.ctx, a.Key); got.State != ledger.StateHeld || got.Body == p.Body {
		t.Fatalf("the hold was lifted or the content changed: %s", got.State)
	}
	_, err = w.l.ReleaseHold(w.ctx, a.Key, "legal", "cleared")
	w.must(err)
	_, err = w.l.Cancel(w.ctx, a.Key, "wf-ack", "colleague answers instead")
	w.must(err)
	if _, err := w.l.Propose(w.ctx, p); !errors.Is(err, ledger.ErrCancelled) {
		t.Fatalf("revising a withdrawn action: %v", err)
	}
}

func TestRevisionAboveZeroNeedsCorrect(t *testing.T) {
	w := newWorld(t)
	a := w.approved("wf-ack")
	_, err := w.execute(a.Key, "wf-ack", consentYes)
	w.must(err)
	p := ackProposal("wf-ack")
	p.Revision = 1
	if _, err := w.l.Propose(w.ctx, p); !errors.Is(err, ledger.ErrInvalid) || !strings.Contains(err.Error(), "Correct") {
		t.Fatalf("a revision proposed directly: %v", err)
	}
}

func TestCompletedTaskTakesNoNewWork(t *testing.T) {
	w := newWorld(t)
	a := w.approved("wf-ack")
	_, err := w.execute(a.Key, "wf-ack", consentYes)
	w.must(err)
	w.must(w.l.Complete(w.ctx, "task-7", "wf-ack"))
	p := ackProposal("wf-ack")
	p.Event = "enquiry-2002"
	if _, err := w.l.Propose(w.ctx, p); !errors.Is(err, ledger.ErrWrongState) {
		t.Fatalf("proposal on a completed task: %v", err)
	}
}

func TestLateAcceptanceAfterSettlingIsFlagged(t *testing.T) {
	w := newWorld(t)
	a := w.approved("wf-ack")
	_, msg, err := w.l.BeginAttempt(w.ctx, ledger.ExecuteRequest{Key: a.Key, Executor: "wf-ack", Reread: consentYes, Endpoint: destination.EndpointOf(w.dest)})
	w.must(err)
	_, err = w.l.RecordOutcome(w.ctx, msg.TransportID, destination.OutcomeUnknown, "timeout")
	w.must(err)
	w.settled(a.Key)
	got, err := w.reconcile(a.Key, "ops") // nothing there yet
	w.must(err)
	if got.HoldCause != ledger.HoldSafeToRetry {
		t.Fatalf("hold cause %s", got.HoldCause)
	}
	_, err = w.l.RecordOutcome(w.ctx, msg.TransportID, destination.OutcomeAccepted, "250 at last")
	w.must(err)
	if h := historyText(t, w, a.Key); !strings.Contains(h, "may receive it twice") {
		t.Fatalf("a late acceptance went unremarked:\n%s", h)
	}
	// Any other late report is kept too, and each is counted; the same
	// report twice is one fact, not two.
	_, err = w.l.RecordOutcome(w.ctx, msg.TransportID, destination.OutcomeUnknown, "connection lost after all")
	w.must(err)
	_, err = w.l.RecordOutcome(w.ctx, msg.TransportID, destination.OutcomeNotDelivered, "not delivered")
	w.must(err)
	if h := historyText(t, w, a.Key); !strings.Contains(h, "reported unknown (connection lost after all) after it had been settled") {
		t.Fatalf("a late unknown was dropped:\n%s", h)
	}
	m, err := w.l.Metrics(w.ctx)
	w.must(err)
	if m.LateEvidence != 2 {
		t.Fatalf("late evidence counted %d, want 2 (the late 250 and the late unknown)", m.LateEvidence)
	}
}

// removingDirectory is a CRM that, the first time it is asked about
// anyone, has a person remove another recipient from the release, as can
// happen while a send runs.
type removingDirectory struct {
	crm
	remove func()
}

func (d *removingDirectory) CustomerByID(ctx context.Context, id string) (ledger.Customer, bool, error) {
	if d.remove != nil {
		d.remove()
		d.remove = nil
	}
	return d.crm.CustomerByID(ctx, id)
}

// TestRemovalDuringASendSkipsNobodyElse: a removal shrinks the eligible
// rows while a send pages through them; every other recipient is still
// sent once, in the same run.
func TestRemovalDuringASendSkipsNobodyElse(t *testing.T) {
	w := newWorld(t)
	const n = 502 // more than one page of recipients
	dir := crm{}
	var file strings.Builder
	file.WriteString("customer_id\n")
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("c%03d", i)
		dir[id] = ledger.Customer{ID: id, Email: id + "@example.org", Consent: "yes"}
		file.WriteString(id + "\n")
	}
	_, err := w.l.ImportAudience(w.ctx, ledger.AudienceImport{ReleaseID: "big", Source: strings.NewReader(file.String()),
		ActionType: "notice", Subject: "Notice", Body: "Hello.", Actor: "ops"}, dir)
	w.must(err)
	w.must(w.l.ApproveAudience(w.ctx, "big", "lead", fake.DefaultName, ""))
	d := &removingDirectory{crm: dir, remove: func() {
		w.must(w.l.RemoveRecipient(w.ctx, "big", "c005", "ops", "asked not to be contacted"))
	}}
	s, err := w.l.SendAudience(w.ctx, ledger.AudienceSend{ReleaseID: "big", Actor: "bot"}, w.dest, d)
	w.must(err)
	if s.Eligible != n-1 || s.Confirmed != n-1 || w.dest.Calls() != n-1 {
		t.Fatalf("eligible %d, confirmed %d, calls %d; want %d each", s.Eligible, s.Confirmed, w.dest.Calls(), n-1)
	}
	w.must(s.Check())
}

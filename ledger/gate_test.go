package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"gatehouse/destination"
	"gatehouse/destination/fake"
	"gatehouse/ledger"
)

// TestSameActionExecutedBy64Goroutines: invariant 1 under real concurrency.
func TestSameActionExecutedBy64Goroutines(t *testing.T) {
	w := newWorld(t)
	a := w.approved("wf-ack")
	w.dest.Gate = make(chan struct{})
	// A second handle on the same file, as a second process would have.
	other, err := ledger.Open(w.path, ledger.WithClock(w.clock))
	w.must(err)
	defer other.Close()

	const n = 64
	errs := make([]error, n)
	var wg sync.WaitGroup
	var refused sync.WaitGroup
	refused.Add(n - 1)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			l := w.l
			if i%2 == 1 {
				l = other
			}
			_, errs[i] = l.Execute(w.ctx, ledger.ExecuteRequest{Key: a.Key, Executor: "wf-ack", Reread: consentYes}, w.dest)
			if errs[i] != nil {
				refused.Done()
			}
		}(i)
	}
	refused.Wait() // every loser has been refused while the winner is still in flight
	close(w.dest.Gate)
	wg.Wait()

	var ok, inFlight, dup int
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case errors.Is(err, ledger.ErrInFlight):
			inFlight++
		case errors.Is(err, ledger.ErrDuplicate):
			dup++
		default:
			t.Errorf("unexpected error: %v", err)
		}
	}
	if ok != 1 || inFlight+dup != n-1 {
		t.Fatalf("ok=%d in_flight=%d duplicate=%d", ok, inFlight, dup)
	}
	if w.dest.Calls() != 1 {
		t.Fatalf("destination called %d times, want 1", w.dest.Calls())
	}
	m, err := w.l.Metrics(w.ctx)
	w.must(err)
	if m.Attempts != 1 || m.Confirmed != 1 || m.DuplicateBlocks != n-1 || m.Intended != 1 {
		t.Fatalf("metrics disagree: %+v", m)
	}
}

func TestChangedMaterialStateDenies(t *testing.T) {
	w := newWorld(t)
	a := w.approved("wf-ack")
	_, err := w.execute(a.Key, "wf-ack", []ledger.MaterialRead{{Source: "crm", Field: "consent", Value: "withdrawn"}})
	var d *ledger.DeniedError
	if !errors.As(err, &d) || !errors.Is(err, ledger.ErrDenied) {
		t.Fatalf("err = %v, want DeniedError", err)
	}
	if d.Source != "crm" || d.Field != "consent" || d.Approved != "yes" || d.Current != "withdrawn" {
		t.Fatalf("denial = %+v", d)
	}
	if got := w.state(a.Key); got != ledger.StateDenied {
		t.Fatalf("state = %s", got)
	}
	if w.dest.Calls() != 0 {
		t.Fatal("a denied action reached the destination")
	}
	hist := historyText(t, w, a.Key)
	if !strings.Contains(hist, `crm.consent changed since approval, from "yes" to "withdrawn"`) {
		t.Fatalf("history lacks the diff:\n%s", hist)
	}
	det, err := w.l.Detail(w.ctx, a.Key)
	w.must(err)
	if len(det.Checks) != 1 || det.Checks[0].Matched || det.Checks[0].Read != "withdrawn" {
		t.Fatalf("material checks = %+v", det.Checks)
	}
	// Re-approval on the current value lets it go.
	_, err = w.l.Approve(w.ctx, a.Key, "lead", []ledger.MaterialRead{{Source: "crm", Field: "consent", Value: "withdrawn"}})
	w.must(err)
	if _, err := w.execute(a.Key, "wf-ack", []ledger.MaterialRead{{Source: "crm", Field: "consent", Value: "withdrawn"}}); err != nil {
		t.Fatal(err)
	}
}

// TestForgottenMaterialFieldIsASlip: a send that omits a field the approval
// rests on is the caller's mistake, not changed data. Nothing is recorded,
// the action stays approved, and the full send then goes out.
func TestForgottenMaterialFieldIsASlip(t *testing.T) {
	w := newWorld(t)
	a := w.approved("wf-ack")
	_, err := w.l.Approve(w.ctx, a.Key, "lead", []ledger.MaterialRead{{Source: "crm", Field: "consent", Value: "yes"},
		{Source: "helpdesk", Field: "status", Value: "open"}})
	w.must(err)
	before, err := w.l.History(w.ctx, ledger.HistoryFilter{ActionKey: a.Key})
	w.must(err)
	_, err = w.execute(a.Key, "wf-ack", consentYes)
	if !errors.Is(err, ledger.ErrInvalid) || !strings.Contains(err.Error(), "helpdesk.status") {
		t.Fatalf("err = %v, want a usage error naming helpdesk.status", err)
	}
	after, err := w.l.History(w.ctx, ledger.HistoryFilter{ActionKey: a.Key})
	w.must(err)
	if st := w.state(a.Key); st != ledger.StateApproved || len(after) != len(before) || w.dest.Calls() != 0 {
		t.Fatalf("after the slip: state %s, history %d → %d, sends %d", st, len(before), len(after), w.dest.Calls())
	}
	if _, err := w.execute(a.Key, "wf-ack", append(consentYes, ledger.MaterialRead{Source: "helpdesk", Field: "status", Value: "open"})); err != nil {
		t.Fatalf("full send: %v", err)
	}
}

func TestUnavailableSourceHolds(t *testing.T) {
	w := newWorld(t)
	a := w.approved("wf-ack")
	_, err := w.execute(a.Key, "wf-ack", []ledger.MaterialRead{{Source: "crm", Field: "consent", Unavailable: true}})
	if !errors.Is(err, ledger.ErrHeld) {
		t.Fatalf("err = %v, want held", err)
	}
	got, _ := w.l.Action(w.ctx, a.Key)
	if got.State != ledger.StateHeld || got.HoldCause != ledger.HoldSourceUnavailable {
		t.Fatalf("action = %s/%s", got.State, got.HoldCause)
	}
	if _, err := w.l.ReleaseHold(w.ctx, a.Key, "ops", "crm is back"); err != nil {
		t.Fatal(err)
	}
	if _, err := w.execute(a.Key, "wf-ack", consentYes); err != nil {
		t.Fatal(err)
	}
}

func TestTwoActorsClaimAtOnce(t *testing.T) {
	for i := 0; i < 10; i++ {
		w := newWorld(t)
		other, err := ledger.Open(w.path, ledger.WithClock(w.clock))
		w.must(err)
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for j, l := range []*ledger.Ledger{w.l, other} {
			wg.Add(1)
			go func(j int, l *ledger.Ledger) {
				defer wg.Done()
				_, errs[j] = l.Claim(w.ctx, ledger.TaskRef{ID: "task-9"}, []string{"alice", "bob"}[j])
			}(j, l)
		}
		wg.Wait()
		other.Close()
		var conflicts int
		for _, err := range errs {
			var oe *ledger.OwnershipError
			if errors.As(err, &oe) {
				conflicts++
			} else if err != nil {
				t.Fatal(err)
			}
		}
		tk, err := w.l.Task(w.ctx, "task-9")
		w.must(err)
		if conflicts != 1 || (tk.Owner != "alice" && tk.Owner != "bob") {
			t.Fatalf("conflicts=%d owner=%q", conflicts, tk.Owner)
		}
		m, _ := w.l.Metrics(w.ctx)
		if m.OwnershipConflicts != 1 {
			t.Fatalf("ownership conflicts = %d", m.OwnershipConflicts)
		}
	}
}

func TestTakeoverNotifiesAndStopsTheWorkflow(t *testing.T) {
	w := newWorld(t)
	a := w.approved("wf-ack")
	if _, err := w.l.TakeOver(w.ctx, ledger.TaskRef{ID: "task-7"}, "alice", ""); !errors.Is(err, ledger.ErrInvalid) {
		t.Fatalf("takeover without reason: %v", err)
	}
	_, err := w.l.TakeOver(w.ctx, ledger.TaskRef{ID: "task-7"}, "alice", "writing a specific answer")
	w.must(err)
	notes, err := w.l.Notifications(w.ctx, "wf-ack")
	w.must(err)
	if len(notes) != 1 || !strings.Contains(notes[0].Message, "alice took over task task-7") {
		t.Fatalf("notifications = %+v", notes)
	}
	_, err = w.execute(a.Key, "wf-ack", consentYes)
	var oe *ledger.OwnershipError
	if !errors.As(err, &oe) || !oe.Cancelled || !errors.Is(err, ledger.ErrCancelled) {
		t.Fatalf("err = %v", err)
	}
	if got := w.state(a.Key); got != ledger.StateCancelled {
		t.Fatalf("state = %s", got)
	}
	if w.dest.Calls() != 0 {
		t.Fatal("the workflow's send reached the destination")
	}
}

func TestStrangerCannotSendOrCancel(t *testing.T) {
	w := newWorld(t)
	a := w.approved("wf-ack")
	_, err := w.execute(a.Key, "mallory", consentYes)
	if !errors.Is(err, ledger.ErrOwnershipConflict) || errors.Is(err, ledger.ErrCancelled) {
		t.Fatalf("err = %v", err)
	}
	if got := w.state(a.Key); got != ledger.StateApproved {
		t.Fatalf("a stranger changed the state to %s", got)
	}
}

func TestViewerNeverBecomesOwner(t *testing.T) {
	w := newWorld(t)
	a := w.approved("wf-ack")
	w.must(w.l.View(w.ctx, ledger.TaskRef{ID: "task-7"}, "bob", "viewer", 0))
	w.must(w.l.View(w.ctx, ledger.TaskRef{ID: "task-7"}, "bob", "viewer", 0)) // heartbeat
	p, err := w.l.Presence(w.ctx, "task-7")
	w.must(err)
	if len(p) != 1 || p[0].Actor != "bob" {
		t.Fatalf("presence = %+v", p)
	}
	tk, _ := w.l.Task(w.ctx, "task-7")
	if tk.Owner != "wf-ack" {
		t.Fatalf("owner = %s", tk.Owner)
	}
	if _, err := w.execute(a.Key, "bob", consentYes); !errors.Is(err, ledger.ErrOwnershipConflict) {
		t.Fatalf("viewer executed: %v", err)
	}
	w.clock.Advance(10 * 60e9)
	p, _ = w.l.Presence(w.ctx, "task-7")
	if len(p) != 0 {
		t.Fatalf("expired presence still listed: %+v", p)
	}
}

func TestMissingOwnerHoldsWhileDraftingWorks(t *testing.T) {
	w := newWorld(t)
	a, err := w.l.Propose(w.ctx, ackProposal("wf-ack"))
	w.must(err)
	p := ackProposal("wf-ack")
	p.Body += " Revised."
	if a, err = w.l.Propose(w.ctx, p); err != nil || a.State != ledger.StateDrafting {
		t.Fatalf("drafting without owner: %v %s", err, a.State)
	}
	// An approval under nobody could never be sent: it is refused, with
	// nothing recorded.
	if _, err = w.l.Approve(w.ctx, a.Key, "lead", consentYes); !errors.Is(err, ledger.ErrInvalid) ||
		!strings.Contains(err.Error(), "claim the task first") {
		t.Fatalf("approve without owner: %v", err)
	}
	if st := w.state(a.Key); st != ledger.StateDrafting {
		t.Fatalf("state after refused approval = %s", st)
	}
	_, err = w.l.Claim(w.ctx, ledger.TaskRef{ID: "task-7"}, "wf-ack")
	w.must(err)
	_, err = w.l.Approve(w.ctx, a.Key, "lead", consentYes)
	w.must(err)
	// The owner lets go before sending: the send is held, not denied.
	_, err = w.l.Release(w.ctx, "task-7", "wf-ack", "end of shift")
	w.must(err)
	_, err = w.execute(a.Key, "wf-ack", consentYes)
	if !errors.Is(err, ledger.ErrHeld) {
		t.Fatalf("err = %v", err)
	}
	got, _ := w.l.Action(w.ctx, a.Key)
	if got.HoldCause != ledger.HoldOwnerMissing {
		t.Fatalf("hold cause = %s", got.HoldCause)
	}
	// The way out: the same owner claims again, a person releases the
	// hold, and the send goes out under the approval it had.
	_, err = w.l.Claim(w.ctx, ledger.TaskRef{ID: "task-7"}, "wf-ack")
	w.must(err)
	_, err = w.l.ReleaseHold(w.ctx, a.Key, "ops", "owner back")
	w.must(err)
	if _, err := w.execute(a.Key, "wf-ack", consentYes); err != nil {
		t.Fatalf("send after claim and release: %v", err)
	}
}

func TestApprovalBinding(t *testing.T) {
	tests := []struct {
		Name      string
		Edit      func(*ledger.Proposal)
		KeepsSend bool
	}{
		{"WhitespaceOnlyBodyEdit", func(p *ledger.Proposal) {
			p.Body = "Hello   Ada,\r\n\r\n  thank you for writing.\nWe will answer\twithin a day.  "
		}, true},
		{"RecipientCaseOnly", func(p *ledger.Proposal) { p.Recipient = "ADA@example.com " }, true},
		{"RecipientChanged", func(p *ledger.Proposal) { p.Recipient = "bea@example.com" }, false},
		{"SubjectChanged", func(p *ledger.Proposal) { p.Subject = "Your refund" }, false},
		{"BodyWordChanged", func(p *ledger.Proposal) { p.Body = strings.Replace(p.Body, "a day", "a week", 1) }, false},
	}
	for _, tc := range tests {
		t.Run(tc.Name, func(t *testing.T) {
			w := newWorld(t)
			a := w.approved("wf-ack")
			p := ackProposal("wf-ack")
			tc.Edit(&p)
			a2, err := w.l.Propose(w.ctx, p)
			w.must(err)
			if a2.Key != a.Key {
				t.Fatalf("key changed: %s → %s", a.Key, a2.Key)
			}
			_, err = w.execute(a.Key, "wf-ack", consentYes)
			if tc.KeepsSend && err != nil {
				t.Fatalf("formatting-only edit lost the approval: %v", err)
			}
			if !tc.KeepsSend && !errors.Is(err, ledger.ErrApprovalStale) {
				t.Fatalf("err = %v, want approval stale", err)
			}
		})
	}
}

func TestNewBusinessEventPermitsSameActionType(t *testing.T) {
	w := newWorld(t)
	a := w.approved("wf-ack")
	_, err := w.execute(a.Key, "wf-ack", consentYes)
	w.must(err)
	// The same event again: blocked as a duplicate.
	if _, err := w.l.Propose(w.ctx, ackProposal("wf-ack")); !errors.Is(err, ledger.ErrDuplicate) {
		t.Fatalf("same event: %v", err)
	}
	// A new event: a new key that may be sent.
	p := ackProposal("wf-ack")
	p.Event = "enquiry-1002"
	b, err := w.l.Propose(w.ctx, p)
	w.must(err)
	if b.Key == a.Key {
		t.Fatal("a new business event produced the same key")
	}
	_, err = w.l.Approve(w.ctx, b.Key, "lead", consentYes)
	w.must(err)
	_, err = w.execute(b.Key, "wf-ack", consentYes)
	w.must(err)
	if w.dest.Calls() != 2 {
		t.Fatalf("calls = %d", w.dest.Calls())
	}
}

func TestStopSwitch(t *testing.T) {
	w := newWorld(t)
	a := w.approved("wf-ack")
	if err := w.l.Stop(w.ctx, "ops", ""); !errors.Is(err, ledger.ErrInvalid) {
		t.Fatalf("stop without reason: %v", err)
	}
	w.must(w.l.Stop(w.ctx, "ops", "wrong template in production"))
	_, err := w.execute(a.Key, "wf-ack", consentYes)
	if !errors.Is(err, ledger.ErrStopped) {
		t.Fatalf("err = %v", err)
	}
	m, err := w.l.Metrics(w.ctx)
	if err != nil || !m.Stopped || m.Holds != 1 {
		t.Fatalf("metrics while stopped: %+v %v", m, err)
	}
	w.must(w.l.Resume(w.ctx, "ops", "template fixed"))
	if got := w.state(a.Key); got != ledger.StateApproved {
		t.Fatalf("after resume: %s", got)
	}
	if _, err := w.execute(a.Key, "wf-ack", consentYes); err != nil {
		t.Fatal(err)
	}
}

func TestOutcomes(t *testing.T) {
	tests := []struct {
		Name    string
		Outcome destination.Outcome
		State   ledger.State
		Err     error
	}{
		{"Temporary", destination.OutcomeRejectedTemporary, ledger.StateApproved, ledger.ErrNotDelivered},
		{"NotDelivered", destination.OutcomeNotDelivered, ledger.StateApproved, ledger.ErrNotDelivered},
		{"Permanent", destination.OutcomeRejectedPermanent, ledger.StateFailed, ledger.ErrFailed},
		{"Unknown", destination.OutcomeUnknown, ledger.StateUnknown, ledger.ErrUnknownOutcome},
	}
	for _, tc := range tests {
		t.Run(tc.Name, func(t *testing.T) {
			w := newWorld(t)
			a := w.approved("wf-ack")
			w.dest.Script(tc.Outcome)
			res, err := w.execute(a.Key, "wf-ack", consentYes)
			if !errors.Is(err, tc.Err) || res.Action.State != tc.State {
				t.Fatalf("got %s, %v", res.Action.State, err)
			}
			_, err = w.execute(a.Key, "wf-ack", consentYes)
			switch tc.State {
			case ledger.StateApproved:
				if err != nil {
					t.Fatalf("retry after %s: %v", tc.Outcome, err)
				}
			case ledger.StateUnknown:
				if !errors.Is(err, ledger.ErrUnknownOutcome) {
					t.Fatalf("second executor after unknown: %v", err)
				}
				if w.dest.Calls() != 1 {
					t.Fatal("an unknown outcome was retried")
				}
			}
		})
	}
}

func TestReconcile(t *testing.T) {
	tests := []struct {
		Name      string
		Arrived   bool
		Records   func(d *fake.Destination) destination.RecordsOpener
		State     ledger.State
		Cause     ledger.HoldCause
		ReleaseOK bool
	}{
		{"FoundAtDestination", true, func(d *fake.Destination) destination.RecordsOpener { return records(d) }, ledger.StateSent, "", false},
		{"ProvablyAbsent", false, func(d *fake.Destination) destination.RecordsOpener { return records(d) }, ledger.StateHeld, ledger.HoldSafeToRetry, true},
		{"NoLookup", true, func(*fake.Destination) destination.RecordsOpener { return nil }, ledger.StateHeld, ledger.HoldUnknownOutcome, false},
		{"LookupDown", true, func(d *fake.Destination) destination.RecordsOpener { d.SetLookupDown(true); return records(d) }, ledger.StateHeld, ledger.HoldUnknownOutcome, false},
	}
	for _, tc := range tests {
		t.Run(tc.Name, func(t *testing.T) {
			w := newWorld(t)
			a := w.approved("wf-ack")
			if tc.Arrived {
				w.dest.Script(destination.OutcomeUnknown) // stored, sender cannot know
			} else {
				w.dest.Script(destination.OutcomeRejectedTemporary)
			}
			_, msg, err := w.l.BeginAttempt(w.ctx, ledger.ExecuteRequest{Key: a.Key, Executor: "wf-ack", Reread: consentYes, Endpoint: destination.EndpointOf(w.dest)})
			w.must(err)
			w.dest.Send(w.ctx, msg)
			_, err = w.l.RecordOutcome(w.ctx, msg.TransportID, destination.OutcomeUnknown, "timeout after data")
			w.must(err)
			w.settled(a.Key)
			got, err := w.l.Reconcile(w.ctx, ledger.ReconcileRequest{Key: a.Key, Actor: "ops", Open: tc.Records(w.dest)})
			if tc.State == ledger.StateSent && err != nil {
				t.Fatal(err)
			}
			if got.State != tc.State || got.HoldCause != tc.Cause {
				t.Fatalf("after reconcile: %s/%s (%v)", got.State, got.HoldCause, err)
			}
			_, err = w.l.ReleaseHold(w.ctx, a.Key, "ops", "reviewed")
			if (err == nil) != tc.ReleaseOK {
				t.Fatalf("release hold: %v", err)
			}
			if tc.ReleaseOK {
				if _, err := w.execute(a.Key, "wf-ack", consentYes); err != nil {
					t.Fatalf("reviewed retry: %v", err)
				}
			}
			if n := w.dest.Arrivals(a.Key); n != 1 && tc.Arrived {
				t.Fatalf("arrivals = %d", n)
			}
			m, _ := w.l.Metrics(w.ctx)
			if m.Confirmed > 1 {
				t.Fatalf("confirmed = %d", m.Confirmed)
			}
		})
	}
}

func TestResolveUnknownByPerson(t *testing.T) {
	w := newWorld(t)
	a := w.approved("wf-ack")
	w.dest.Script(destination.OutcomeUnknown)
	_, err := w.execute(a.Key, "wf-ack", consentYes)
	if !errors.Is(err, ledger.ErrUnknownOutcome) {
		t.Fatal(err)
	}
	if _, err := w.l.ResolveUnknown(w.ctx, a.Key, "ops", true, ""); !errors.Is(err, ledger.ErrInvalid) {
		t.Fatalf("resolve without reason: %v", err)
	}
	got, err := w.l.ResolveUnknown(w.ctx, a.Key, "ops", true, "found in the relay log")
	w.must(err)
	if got.State != ledger.StateSent {
		t.Fatalf("state = %s", got.State)
	}
}

func TestCompleteRefusedWhilePending(t *testing.T) {
	w := newWorld(t)
	a := w.approved("wf-ack")
	err := w.l.Complete(w.ctx, "task-7", "wf-ack")
	if !errors.Is(err, ledger.ErrIncomplete) || !strings.Contains(err.Error(), a.Key) {
		t.Fatalf("err = %v", err)
	}
	_, err = w.execute(a.Key, "wf-ack", consentYes)
	w.must(err)
	w.must(w.l.Complete(w.ctx, "task-7", "wf-ack"))
}

func TestCorrectionIsLinkedAndReviewed(t *testing.T) {
	w := newWorld(t)
	a := w.approved("wf-ack")
	_, err := w.execute(a.Key, "wf-ack", consentYes)
	w.must(err)
	if _, err := w.l.Correct(w.ctx, ledger.Correction{Original: a.Key, Actor: "wf-ack", Body: "x"}); !errors.Is(err, ledger.ErrInvalid) {
		t.Fatalf("correction without reason: %v", err)
	}
	c, err := w.l.Correct(w.ctx, ledger.Correction{Original: a.Key, Actor: "wf-ack", Reason: "wrong delivery date",
		Subject: "Correction: delivery date", Body: "The delivery date is Friday, not Thursday."})
	w.must(err)
	parts, err := ledger.ParseKey(c.Key)
	w.must(err)
	if parts.Revision != 1 || c.Corrects != a.Key {
		t.Fatalf("correction %s corrects %q", c.Key, c.Corrects)
	}
	if _, err := w.l.Approve(w.ctx, c.Key, "wf-ack", consentYes); !errors.Is(err, ledger.ErrNotReviewed) {
		t.Fatalf("self-approved correction: %v", err)
	}
	_, err = w.l.Approve(w.ctx, c.Key, "lead", consentYes)
	w.must(err)
	_, err = w.execute(c.Key, "wf-ack", consentYes)
	w.must(err)
	d, err := w.l.Detail(w.ctx, a.Key)
	w.must(err)
	if len(d.Correction) != 1 || d.Correction[0] != c.Key {
		t.Fatalf("original does not link its correction: %+v", d.Correction)
	}
}

func historyText(t *testing.T, w *world, key string) string {
	t.Helper()
	evs, err := w.l.History(context.Background(), ledger.HistoryFilter{ActionKey: key})
	w.must(err)
	var b strings.Builder
	for _, e := range evs {
		b.WriteString(e.Message + "\n")
	}
	return b.String()
}

func TestListActionsPagesFromBothEnds(t *testing.T) {
	w := newWorld(t)
	_, err := w.l.Claim(w.ctx, ledger.TaskRef{ID: "task-7"}, "wf")
	w.must(err)
	var keys []string // newest first
	for i := 0; i < 25; i++ {
		p := ackProposal("wf")
		p.Event = fmt.Sprintf("enquiry-%02d", i)
		a, err := w.l.Propose(w.ctx, p)
		w.must(err)
		keys = append([]string{a.Key}, keys...)
	}
	for _, tc := range []struct{ offset, limit int }{{0, 10}, {10, 10}, {20, 10}, {13, 4}, {24, 5}, {25, 5}, {30, 5}} {
		total, page, err := w.l.ListActions(w.ctx, ledger.ActionFilter{Limit: tc.limit, Offset: tc.offset})
		w.must(err)
		want := keys[min(tc.offset, 25):min(tc.offset+tc.limit, 25)]
		var got []string
		for _, a := range page {
			got = append(got, a.Key)
		}
		if total != 25 || strings.Join(got, ",") != strings.Join(want, ",") {
			t.Fatalf("offset %d limit %d: total %d\n got %v\nwant %v", tc.offset, tc.limit, total, got, want)
		}
	}
}

// TestReconcileCountsOnlyItsOwnMessage: only the attempt's own Message-ID
// for its own recipient proves delivery; anything else carrying the key is
// a contradiction for a person, never proof of delivery or of absence.
func TestReconcileCountsOnlyItsOwnMessage(t *testing.T) {
	foreign := func(key string) destination.Message {
		return destination.Message{ActionKey: key, TransportID: "foreign-1@elsewhere.example", To: "ada@example.com"}
	}
	tests := []struct {
		Name      string
		Delivered bool
		Arrange   func(d *fake.Destination, key string, own destination.Message)
		State     ledger.State
		Cause     ledger.HoldCause
		Reason    string
	}{
		{Name: "OwnMessageIsSent", Delivered: true, State: ledger.StateSent},
		{Name: "NothingIsSafeToRetry", State: ledger.StateHeld, Cause: ledger.HoldSafeToRetry},
		{Name: "ForeignMessageAloneIsAContradiction",
			Arrange: func(d *fake.Destination, key string, _ destination.Message) { d.Inject(foreign(key)) },
			State:   ledger.StateHeld, Cause: ledger.HoldContradiction, Reason: "foreign-1@elsewhere.example"},
		{Name: "OwnAndForeignIsAContradiction", Delivered: true,
			Arrange: func(d *fake.Destination, key string, _ destination.Message) { d.Inject(foreign(key)) },
			State:   ledger.StateHeld, Cause: ledger.HoldContradiction, Reason: "its own message was found too"},
		{Name: "OwnMessageIDForAnotherRecipient",
			Arrange: func(d *fake.Destination, _ string, own destination.Message) {
				own.To = "eve@example.com"
				d.Inject(own)
			},
			State: ledger.StateHeld, Cause: ledger.HoldContradiction, Reason: "arrived for eve@example.com, not for ada@example.com"},
		{Name: "ForeignWithoutKeyButOurMessageIDForUs",
			Arrange: func(d *fake.Destination, _ string, own destination.Message) {
				own.ActionKey = "" // a copy without our header still names our Message-ID
				d.Inject(own)
			},
			State: ledger.StateSent},
	}
	for _, tc := range tests {
		t.Run(tc.Name, func(t *testing.T) {
			w := newWorld(t)
			a := w.approved("wf-ack")
			att, msg, err := w.l.BeginAttempt(w.ctx, ledger.ExecuteRequest{Key: a.Key, Executor: "wf-ack", Reread: consentYes,
				Endpoint: destination.EndpointOf(w.dest)})
			w.must(err)
			if tc.Delivered {
				w.l.Deliver(w.ctx, att, msg, w.dest)
			}
			_, err = w.l.RecordOutcome(w.ctx, msg.TransportID, destination.OutcomeUnknown, "timeout after data")
			w.must(err)
			if tc.Arrange != nil {
				tc.Arrange(w.dest, a.Key, msg)
			}
			w.settled(a.Key)
			got, _ := w.reconcile(a.Key, "ops")
			if got.State != tc.State || got.HoldCause != tc.Cause || !strings.Contains(got.Reason, tc.Reason) {
				t.Fatalf("after reconcile: %s/%s %q; want %s/%s containing %q", got.State, got.HoldCause, got.Reason, tc.State, tc.Cause, tc.Reason)
			}
			if tc.Cause == ledger.HoldContradiction {
				if _, err := w.l.ReleaseHold(w.ctx, a.Key, "ops", "looks fine"); !errors.Is(err, ledger.ErrUnknownOutcome) {
					t.Fatalf("a contradiction was released into a retry: %v", err)
				}
				if _, err := w.execute(a.Key, "wf-ack", consentYes); !errors.Is(err, ledger.ErrUnknownOutcome) {
					t.Fatalf("a contradiction was executed again: %v", err)
				}
				// A person who checked settles it.
				got, err := w.l.ResolveUnknown(w.ctx, a.Key, "ops", true, "the customer confirmed receipt")
				if err != nil || got.State != ledger.StateSent {
					t.Fatalf("resolve: %s %v", got.State, err)
				}
			}
		})
	}
}

// TestReconcileAsksOnlyTheRecordedDestination: naming another destination
// is refused (and recorded) unless a person says it moved, with a reason.
func TestReconcileAsksOnlyTheRecordedDestination(t *testing.T) {
	w := newWorld(t)
	a := w.approved("wf-ack")
	w.dest.Script(destination.OutcomeUnknown)
	_, err := w.execute(a.Key, "wf-ack", consentYes)
	if !errors.Is(err, ledger.ErrUnknownOutcome) {
		t.Fatal(err)
	}
	elsewhere := fake.New()
	elsewhere.Name = "fake://elsewhere" // empty: would prove absence if asked
	named := destination.EndpointOf(elsewhere)
	req := ledger.ReconcileRequest{Key: a.Key, Actor: "ops", Open: records(w.dest, elsewhere), Named: &named}
	if _, err := w.l.Reconcile(w.ctx, req); !errors.Is(err, ledger.ErrWrongDestination) {
		t.Fatalf("reconcile elsewhere: %v, want ErrWrongDestination", err)
	}
	if st := w.state(a.Key); st != ledger.StateUnknown {
		t.Fatalf("a refused reconcile moved the action to %s", st)
	}
	req.Moved = true
	if _, err := w.l.Reconcile(w.ctx, req); !errors.Is(err, ledger.ErrInvalid) {
		t.Fatalf("moved without a reason: %v", err)
	}
	req.Reason = "the mailbox was restarted elsewhere"
	w.settled(a.Key)
	got, err := w.l.Reconcile(w.ctx, req)
	w.must(err)
	if got.State != ledger.StateHeld || got.HoldCause != ledger.HoldSafeToRetry {
		t.Fatalf("after a recorded move: %s/%s", got.State, got.HoldCause)
	}
	hist, err := w.l.History(w.ctx, ledger.HistoryFilter{ActionKey: a.Key})
	w.must(err)
	var said []string
	for _, e := range hist {
		said = append(said, string(e.Kind)+": "+e.Message)
	}
	all := strings.Join(said, "\n")
	for _, want := range []string{"wrong_destination: The gate refused ops's reconcile", "destination_moved: ops said the destination of attempt 1",
		"because: the mailbox was restarted elsewhere"} {
		if !strings.Contains(all, want) {
			t.Errorf("history lacks %q:\n%s", want, all)
		}
	}
}

// TestSendUsesOnlyTheApprovedDestination: Execute refuses another
// destination or sender with a history line and no change of state; the
// destination is not called.
func TestSendUsesOnlyTheApprovedDestination(t *testing.T) {
	w := newWorld(t)
	a := w.approved("wf-ack")
	other := fake.New()
	other.Name = "fake://other"
	_, err := w.l.Execute(w.ctx, ledger.ExecuteRequest{Key: a.Key, Executor: "wf-ack", Reread: consentYes}, other)
	var de *ledger.DestinationError
	if !errors.As(err, &de) || de.Field != "destination" || other.Calls() != 0 {
		t.Fatalf("send elsewhere: %v (calls %d)", err, other.Calls())
	}
	_, err = w.l.Execute(w.ctx, ledger.ExecuteRequest{Key: a.Key, Executor: "wf-ack", Reread: consentYes, From: "ceo@example.com"}, w.dest)
	if !errors.As(err, &de) || de.Field != "sender" || w.dest.Calls() != 0 {
		t.Fatalf("send from another sender: %v", err)
	}
	if st := w.state(a.Key); st != ledger.StateApproved {
		t.Fatalf("state after refusals: %s", st)
	}
	// Deliver itself refuses a destination the attempt did not record.
	att, msg, err := w.l.BeginAttempt(w.ctx, ledger.ExecuteRequest{Key: a.Key, Executor: "wf-ack", Reread: consentYes,
		Endpoint: destination.EndpointOf(w.dest)})
	w.must(err)
	if d := w.l.Deliver(w.ctx, att, msg, other); d.Outcome != destination.OutcomeNotDelivered || other.Calls() != 0 {
		t.Fatalf("deliver elsewhere: %+v (calls %d)", d, other.Calls())
	}
}

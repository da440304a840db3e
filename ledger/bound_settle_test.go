package ledger_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gatehouse/destination"
	"gatehouse/destination/registry"
	"gatehouse/ledger"
	"gatehouse/ledger/answer"
)

// settleKind is one destination kind of the registry: the URL an action
// is approved for, the settle time that binds, and URLs of the same
// destination naming other terms, each refused at send (17) or, where
// the kind takes no such parameter, by the registry itself.
type settleKind struct {
	name     string
	approved string
	settle   time.Duration
	others   []string
}

// settleKinds are every kind of destination/registry. Nothing listens on
// the addresses: every send here is refused or begun, never handed over.
func settleKinds(dir string) []settleKind {
	mailbox := "smtp://127.0.0.1:1?api=http://127.0.0.1:1"
	payments := "http://127.0.0.1:1?dup=idempotency-key&ref=metadata.gatehouse_key&search=/v1/refunds"
	return []settleKind{
		{"Mailbox", mailbox, time.Minute, []string{mailbox + "&settle=1s", mailbox + "&settle=1h", mailbox + "&settle=0s"}},
		{"MailboxNamedSettle", mailbox + "&settle=90s", 90 * time.Second, []string{mailbox, mailbox + "&settle=1s"}},
		{"SMTPWithoutRecords", "smtp://127.0.0.1:1", time.Minute, []string{"smtp://127.0.0.1:1?settle=1s"}},
		{"HTTP", payments + "&lag=5s&settle=20s", 20 * time.Second,
			[]string{payments + "&lag=5s&settle=1s", payments + "&lag=0s&settle=20s", payments + "&lag=5s"}},
		{"File", "file://" + dir, 0, []string{"file://" + dir + "?settle=1s"}},
		{"Fake", "fake://accept", 0, []string{"fake://accept?settle=1s"}},
	}
}

// proposalFor is the proposal of one action to ep: a refund for an HTTP
// destination, a message otherwise. settle nil states none, as a proposal
// recorded before approvals bound one.
func proposalFor(ep destination.Endpoint, settle *time.Duration) ledger.Proposal {
	p := ackProposal("wf-ack")
	p.Destination, p.Lookup, p.DestinationSettings, p.Settle = ep.Destination, ep.Lookup, ep.Settings, settle
	if strings.HasPrefix(ep.Destination, "http") {
		req, _ := destination.ParseRequest([]byte(refundFile))
		p.Request, _ = req.Canonical()
		p.Recipient, p.Subject, p.Body = "", "", ""
	}
	return p
}

// approvedAt proposes and approves the world's action for url, stating
// its endpoint's settle time unless unbound.
func (w *world) approvedAt(url string, unbound bool) ledger.Action {
	w.t.Helper()
	ep, err := registry.Parse(url)
	w.must(err)
	settle := &ep.Settle
	if unbound {
		settle = nil
	}
	_, err = w.l.Claim(w.ctx, ledger.TaskRef{ID: "task-7"}, "wf-ack")
	w.must(err)
	a, err := w.l.Propose(w.ctx, proposalFor(ep, settle))
	w.must(err)
	a, err = w.l.Approve(w.ctx, a.Key, "lead", consentYes)
	w.must(err)
	return a
}

// events is the whole history of key.
func (w *world) events(key string) []ledger.Event {
	w.t.Helper()
	es, err := w.l.History(w.ctx, ledger.HistoryFilter{ActionKey: key})
	w.must(err)
	return es
}

// beginAt begins an attempt of key through url's endpoint without handing
// anything over.
func (w *world) beginAt(key, url string) (ledger.Attempt, error) {
	w.t.Helper()
	d, err := registry.Open(url)
	w.must(err)
	att, _, err := w.l.BeginAttempt(w.ctx, ledger.ExecuteRequest{Key: key, Executor: "wf-ack", Reread: consentYes,
		Endpoint: destination.EndpointOf(d)})
	return att, err
}

// TestSendNamingOtherTermsIsRefused: for every kind of destination, a send
// through the approved destination named with another settle time (or
// other records parameters) is refused with exit 17 and records nothing
// but its refusal; a kind whose URL takes no such parameter refuses it at
// the door. The send through the approved URL then begins, its attempt
// settling on the bound settle time.
func TestSendNamingOtherTermsIsRefused(t *testing.T) {
	for _, k := range settleKinds(t.TempDir()) {
		for i, other := range k.others {
			t.Run(fmt.Sprintf("%s/%d", k.name, i), func(t *testing.T) {
				w := newWorld(t)
				a := w.approvedAt(k.approved, false)
				before := w.events(a.Key)
				d, err := registry.Open(other)
				if err != nil {
					if !errors.Is(err, registry.ErrBadURL) {
						t.Fatalf("%s: %v, want a bad destination", other, err)
					}
				} else {
					_, err = w.l.Execute(w.ctx, ledger.ExecuteRequest{Key: a.Key, Executor: "wf-ack", Reread: consentYes}, d)
					var de *ledger.DestinationError
					if !errors.As(err, &de) || answer.Code(err) != answer.WrongDestination {
						t.Fatalf("send via %s: %v (exit %d), want refused with 17", other, err, answer.Code(err))
					}
					if strings.Contains(other, "settle") && de.Field == "settle time" && de.Recorded != k.settle.String() {
						t.Errorf("refusal names %s as approved, want %s", de.Recorded, k.settle)
					}
				}
				after := w.events(a.Key)
				refused := 0
				if err == nil || !errors.Is(err, registry.ErrBadURL) {
					refused = 1
				}
				if len(after) != len(before)+refused || (refused == 1 && after[len(after)-1].Kind != ledger.EvWrongDestination) {
					t.Fatalf("history went from %d to %d lines (last %s), want the refusal alone", len(before), len(after), after[len(after)-1].Kind)
				}
				if got := w.state(a.Key); got != ledger.StateApproved {
					t.Fatalf("after the refusal the action is %s, want approved", got)
				}
				att, err := w.beginAt(a.Key, k.approved)
				w.must(err)
				if got := att.SettlesAt.Sub(att.LeaseUntil); got != k.settle {
					t.Fatalf("the attempt settles %s after its lease, want the bound %s", got, k.settle)
				}
			})
		}
	}
}

// TestRevisingTheSettleTimeNeedsApprovalAgain: a proposal of the same
// content naming another settle time is a revision: the approval no longer
// applies and the history says what changed. Other connection settings
// (the TLS mode) are not, and the approval holds.
func TestRevisingTheSettleTimeNeedsApprovalAgain(t *testing.T) {
	const mailbox = "smtp://127.0.0.1:1?api=http://127.0.0.1:1"
	w := newWorld(t)
	a := w.approvedAt(mailbox, false)
	repropose := func(url string) ledger.Action {
		ep, err := registry.Parse(url)
		w.must(err)
		got, err := w.l.Propose(w.ctx, proposalFor(ep, &ep.Settle))
		w.must(err)
		return got
	}
	if got := repropose(mailbox + "&tls=require"); got.State != ledger.StateApproved {
		t.Fatalf("after a TLS change the action is %s, want still approved", got.State)
	}
	got := repropose(mailbox + "&settle=1s")
	if got.State != ledger.StateDrafting || got.Settle != time.Second {
		t.Fatalf("after another settle time the action is %s with %s, want a draft with 1s", got.State, got.Settle)
	}
	h := w.events(a.Key)
	if last := h[len(h)-1].Message; !strings.Contains(last, "settle time 1m0s → 1s") || !strings.Contains(last, "no longer applies") {
		t.Fatalf("the revision's line %q does not say the settle time changed and the approval went", last)
	}
	if _, err := w.execute(a.Key, "wf-ack", consentYes); !errors.Is(err, ledger.ErrApprovalStale) {
		t.Fatalf("send after the revision: %v, want stale", err)
	}
	ap, err := w.l.Approve(w.ctx, a.Key, "lead", consentYes)
	w.must(err)
	if att, err := w.beginAt(ap.Key, mailbox+"&settle=1s"); err != nil || att.SettlesAt.Sub(att.LeaseUntil) != time.Second {
		t.Fatalf("begin under the new approval: %v, settles %s after its lease; want the approved 1s", err, att.SettlesAt.Sub(att.LeaseUntil))
	}
}

// TestApprovalWithoutSettleTimeSettlesOnTheKindsDefault: an approval
// recorded before approvals bound a settle time (the rows a migrated
// ledger holds) refuses no settle time, but its attempts settle on the
// destination kind's default whatever shorter one the send names, and on
// a longer one when the send names that.
func TestApprovalWithoutSettleTimeSettlesOnTheKindsDefault(t *testing.T) {
	dir := t.TempDir()
	const mailbox = "smtp://127.0.0.1:1?api=http://127.0.0.1:1"
	for _, c := range []struct {
		name, approved, send string
		want                 time.Duration
	}{
		{"MailboxShorter", mailbox, mailbox + "&settle=1s", time.Minute},
		{"MailboxZero", mailbox, mailbox + "&settle=0s", time.Minute},
		{"MailboxLonger", mailbox, mailbox + "&settle=1h", time.Hour},
		{"MailboxApprovedShort", mailbox + "&settle=1s", mailbox + "&settle=1s", time.Minute},
		// Proposed before approvals bound a settle time: the proposal's
		// connection settings still carry the one its URL named.
		{"MailboxApprovedLongSentShort", mailbox + "&settle=10m", mailbox + "&settle=1s", 10 * time.Minute},
		{"HTTPProfile", "http://127.0.0.1:1?dup=idempotency-key&settle=20s", "http://127.0.0.1:1?dup=idempotency-key&settle=20s", 20 * time.Second},
		{"File", "file://" + dir, "file://" + dir, 0},
		{"Fake", "fake://accept", "fake://accept", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := newWorld(t)
			a := w.approvedAt(c.approved, true)
			d, err := w.l.Detail(w.ctx, a.Key)
			w.must(err)
			if d.Action.Settle != ledger.SettleUnbound || d.Approvals[0].Settle != ledger.SettleUnbound {
				t.Fatalf("action %s, approval %s; want none recorded", d.Action.Settle, d.Approvals[0].Settle)
			}
			att, err := w.beginAt(a.Key, c.send)
			w.must(err)
			if got := att.SettlesAt.Sub(att.LeaseUntil); got != c.want {
				t.Fatalf("the attempt settles %s after its lease, want %s", got, c.want)
			}
		})
	}
}

// TestAudienceSendNamingAnotherSettleTimeIsRefused: a release approved
// for a destination binds its settle time; a send through the destination
// declaring another is refused (17) before any recipient is touched, and
// the send through the approved one binds every recipient's approval to
// it and settles every attempt on it.
func TestAudienceSendNamingAnotherSettleTimeIsRefused(t *testing.T) {
	w := newWorld(t)
	importMessy(t, w, "rel-1")
	w.dest.Settle = time.Minute
	w.must(w.l.ApproveAudienceAt(w.ctx, "rel-1", "lead", destination.EndpointOf(w.dest), ""))
	before, err := w.l.History(w.ctx, ledger.HistoryFilter{})
	w.must(err)
	send := ledger.AudienceSend{ReleaseID: "rel-1", Actor: "notice-bot"}
	for _, other := range []time.Duration{time.Second, time.Hour} {
		w.dest.Settle = other
		s, err := w.l.SendAudience(w.ctx, send, w.dest, testCRM())
		var de *ledger.DestinationError
		if !errors.As(err, &de) || de.Field != "settle time" || de.Recorded != "1m0s" || answer.Code(err) != answer.WrongDestination {
			t.Fatalf("send declaring %s: %v, want refused (17) naming the approved 1m0s", other, err)
		}
		if s.Attempted != 0 || w.dest.Calls() != 0 {
			t.Fatalf("after the refusal: %d attempted, %d handed over", s.Attempted, w.dest.Calls())
		}
	}
	after, err := w.l.History(w.ctx, ledger.HistoryFilter{})
	w.must(err)
	if len(after) != len(before)+2 || after[len(after)-1].Kind != ledger.EvWrongDestination {
		t.Fatalf("history went from %d to %d lines, want the two refusals alone", len(before), len(after))
	}
	w.dest.Settle = time.Minute
	s, err := w.l.SendAudience(w.ctx, send, w.dest, testCRM())
	w.must(err)
	if s.Confirmed != 3 {
		t.Fatalf("the send through the approved destination: %+v", s)
	}
	rows, err := w.l.AudienceRows(w.ctx, "rel-1", ledger.RowEligible, 0, 0)
	w.must(err)
	for _, r := range rows {
		d, err := w.l.Detail(w.ctx, r.ActionKey)
		w.must(err)
		if d.Approvals[0].Settle != time.Minute || d.Attempts[0].SettlesAt.Sub(d.Attempts[0].LeaseUntil) != time.Minute {
			t.Fatalf("%s: approval binds %s, attempt settles %s after its lease; want 1m0s both", r.ActionKey,
				d.Approvals[0].Settle, d.Attempts[0].SettlesAt.Sub(d.Attempts[0].LeaseUntil))
		}
	}
}

// TestRestoreCheckWaitsOutTheApprovedSettleTime: after a restore, a send
// whose destination declares a shorter settle time than the approved one
// neither sends nor ends the restore's wait; the action is looked up and
// sent only once the restore, a lease and the approved settle time are
// over.
func TestRestoreCheckWaitsOutTheApprovedSettleTime(t *testing.T) {
	sqliteOnly(t)
	w := newWorld(t)
	approved := time.Minute
	w.dest.Settle = approved
	a := w.approvedThenRestored(&approved)
	w.clock.Advance(2*time.Minute + 2*time.Second) // the default lease and a second's settle time are over
	req := ledger.ExecuteRequest{Key: a.Key, Executor: "wf-ack", Reread: consentYes}

	w.dest.Settle = time.Second
	if _, err := w.l.Execute(w.ctx, req, w.dest); err == nil || w.dest.Calls() != 0 {
		t.Fatalf("send declaring 1s after the restore: %v, %d handed over; want refused, nothing sent", err, w.dest.Calls())
	}
	w.dest.Settle = approved
	if _, err := w.l.Execute(w.ctx, req, w.dest); !errors.Is(err, ledger.ErrNotVerifiedYet) || w.dest.Calls() != 0 {
		t.Fatalf("send declaring the approved settle time before it passed: %v, %d handed over; want not verified yet", err, w.dest.Calls())
	}
	w.clock.Advance(approved)
	_, err := w.l.Execute(w.ctx, req, w.dest)
	w.must(err)
	if n := w.dest.Arrivals(a.Key); n != 1 {
		t.Fatalf("%d arrivals, want 1", n)
	}
}

// TestRestoreCheckWaitsOutTheLedgersLease: the wait after a restore covers
// the lease an attempt the restore lost could have held. That attempt is
// another process's, so the sending process's own shorter lease
// ($GATEHOUSE_LEASE) must not end the wait sooner: the wait is the longest
// lease the ledger recorded, and never less than the default.
func TestRestoreCheckWaitsOutTheLedgersLease(t *testing.T) {
	sqliteOnly(t)
	w := newWorld(t)
	a := w.approvedThenRestored(nil)
	w.l.Close()
	w.open(ledger.WithLease(time.Second)) // the sending process's own, short lease
	w.clock.Advance(2 * time.Second)
	req := ledger.ExecuteRequest{Key: a.Key, Executor: "wf-ack", Reread: consentYes}
	if _, err := w.l.Execute(w.ctx, req, w.dest); !errors.Is(err, ledger.ErrNotVerifiedYet) || w.dest.Calls() != 0 {
		t.Fatalf("send 2s after the restore from a process whose lease is 1s: %v, %d handed over; want not verified yet (the default lease is not over)", err, w.dest.Calls())
	}
	w.clock.Advance(ledger.DefaultLease)
	_, err := w.l.Execute(w.ctx, req, w.dest)
	w.must(err)
	if n := w.dest.Arrivals(a.Key); n != 1 {
		t.Fatalf("%d arrivals, want 1", n)
	}
}

// approvedThenRestored is an approved action of task-7 (with settle bound
// when not nil) on a ledger then backed up and restored from that backup.
func (w *world) approvedThenRestored(settle *time.Duration) ledger.Action {
	w.t.Helper()
	_, err := w.l.Claim(w.ctx, ledger.TaskRef{ID: "task-7"}, "wf-ack")
	w.must(err)
	p := ackProposal("wf-ack")
	p.Settle = settle
	a, err := w.l.Propose(w.ctx, p)
	w.must(err)
	_, err = w.l.Approve(w.ctx, a.Key, "lead", consentYes)
	w.must(err)
	backup := filepath.Join(w.t.TempDir(), "backup.db")
	_, err = w.l.Backup(w.ctx, backup, false)
	w.must(err)
	_, err = w.restoreBackup(backup, false)
	w.must(err)
	return a
}

package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"gatehouse/destination/fake"
	"gatehouse/ledger"
)

// approvalViolations is what ledger check says of approvals.
func approvalViolations(t *testing.T, w *world) []string {
	t.Helper()
	vs, err := w.l.Check(w.ctx)
	w.must(err)
	var out []string
	for _, v := range vs {
		if v.Rule == "approvals" {
			out = append(out, v.Detail)
		} else {
			t.Errorf("ledger check: %s", v)
		}
	}
	return out
}

// lastLine is the newest history line of key of kind.
func (w *world) lastLine(key string, kind ledger.EventKind) string {
	w.t.Helper()
	evs, err := w.l.History(w.ctx, ledger.HistoryFilter{ActionKey: key})
	w.must(err)
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].Kind == kind {
			return evs[i].Message
		}
	}
	return ""
}

// wantStaleAtSend sends key as executor and wants it refused as stale for
// why: nothing sent, the action back awaiting approval, the refusal in
// its history, and ledger check naming the approval before and no longer
// after.
func (w *world) wantStaleAtSend(key, executor string, reread []ledger.MaterialRead, why string) {
	w.t.Helper()
	if vs := approvalViolations(w.t, w); len(vs) != 1 || !strings.Contains(vs[0], key) || !strings.Contains(vs[0], why) {
		w.t.Errorf("ledger check names %q, want the approval of %s: %s", vs, key, why)
	}
	calls := w.dest.Calls()
	_, err := w.execute(key, executor, reread)
	if !errors.Is(err, ledger.ErrApprovalStale) || !strings.Contains(err.Error(), why) {
		w.t.Fatalf("send: %v, want a stale approval saying %q", err, why)
	}
	if w.dest.Calls() != calls {
		w.t.Fatal("sent")
	}
	if st := w.state(key); st != ledger.StateAwaitingApproval {
		w.t.Errorf("state %s, want awaiting_approval", st)
	}
	if line := w.lastLine(key, ledger.EvApprovalStale); !strings.Contains(line, "no longer holds: "+why) {
		w.t.Errorf("history says %q, want the refusal saying %q", line, why)
	}
	if vs := approvalViolations(w.t, w); len(vs) != 0 {
		w.t.Errorf("ledger check after the refusal: %q", vs)
	}
}

// TestAnOpenLedgersApprovalByALaterAgentIsStaleAtSend (issue case 6): an
// approval given on the open ledger under a name later registered as an
// agent, a kind that never approves, carries no send once the ledger is
// registered with tokens required; ledger check names it. Approved again
// by a person, it sends.
func TestAnOpenLedgersApprovalByALaterAgentIsStaleAtSend(t *testing.T) {
	w := newWorld(t)
	_, err := w.l.Claim(w.ctx, ledger.TaskRef{ID: "task-7"}, "wf-ack")
	w.must(err)
	a, err := w.l.Propose(w.ctx, ackProposal("wf-ack"))
	w.must(err)
	_, err = w.l.Approve(w.ctx, a.Key, "bot", consentYes)
	w.must(err)
	leadToken := tokenRequiringLedger(w, ledger.DefaultTokenRoles)
	_, err = w.l.AddActor(ledger.WithToken(w.ctx, leadToken), "lead", ledger.Actor{ID: "bot", Kind: ledger.KindAgent})
	w.must(err)

	w.wantStaleAtSend(a.Key, "wf-ack", consentYes, "bot could not approve it now: bot is an agent, and an approval is a person's or a policy's decision")
	_, err = w.l.Approve(ledger.WithToken(w.ctx, leadToken), a.Key, "lead", consentYes)
	w.must(err)
	if _, err := w.execute(a.Key, "wf-ack", consentYes); err != nil {
		t.Fatalf("send on a person's approval: %v", err)
	}
}

// tokenRequiringLedger registers lead (a person with every role) and
// wf-ack (a workflow) and requires tokens for roles; it returns lead's
// token.
func tokenRequiringLedger(w *world, roles []ledger.Role) string {
	w.t.Helper()
	_, err := w.l.AddActor(w.ctx, "lead", ledger.Actor{ID: "lead", Kind: ledger.KindPerson, Roles: ledger.Roles})
	w.must(err)
	_, err = w.l.AddActor(w.ctx, "lead", ledger.Actor{ID: "wf-ack", Kind: ledger.KindWorkflow})
	w.must(err)
	token, err := w.l.IssueToken(w.ctx, "lead", "lead")
	w.must(err)
	w.must(w.l.Require(ledger.WithToken(w.ctx, token), "lead", roles))
	return token
}

// TestAnApprovalIsJudgedAtSendByTodaysRules: on a registered ledger an
// approval holds at send only while its approver could give it now: a
// name never registered, an approver disabled or whose approve role was
// revoked (a departing approver's pending approvals), a policy approval
// its policy no longer allows, a type made two-person since its proposer
// approved it. Each is refused as stale, saying why, and named by ledger
// check until then.
func TestAnApprovalIsJudgedAtSendByTodaysRules(t *testing.T) {
	cases := []struct {
		name     string
		approver string
		kind     ledger.Kind
		// change is what happens between approval and send.
		change func(w *world)
		why    string
	}{
		{"NeverRegistered", "", "", nil, "ghost could not approve it now: ghost is not a registered actor of this ledger"},
		{"Disabled", "ann", ledger.KindPerson, func(w *world) {
			_, err := w.l.SetEnabled(w.ctx, "root", "ann", false)
			w.must(err)
		}, "ann could not approve it now: ann is disabled"},
		{"ApproveRoleRevoked", "ann", ledger.KindPerson, func(w *world) {
			_, err := w.l.RevokeRoles(w.ctx, "root", "ann", []ledger.Role{ledger.RoleApprove})
			w.must(err)
		}, "ann could not approve it now: ann (person) lacks the approve role"},
		{"PolicyChanged", "policy", ledger.KindPolicy, func(w *world) {
			_, err := w.l.SetPolicy(w.ctx, "root", ledger.ActionPolicy{ActionType: "reply_ack", PolicyApproves: true,
				Requires: map[string]string{"crm.consent": "double-opt-in"}})
			w.must(err)
		}, "policy version 2 approves reply_ack only when crm.consent=double-opt-in (the approval rests on yes)"},
		{"MadeTwoPerson", "wf-ack", ledger.KindPerson, func(w *world) {
			_, err := w.l.SetPolicy(w.ctx, "root", ledger.ActionPolicy{ActionType: "reply_ack", TwoPerson: true})
			w.must(err)
		}, "reply_ack needs two persons (policy version 2), and wf-ack both proposed and approved it"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var w *world
			approver := c.approver
			if approver == "" {
				// Approved on the open ledger, by a name nobody registers.
				w, approver = newWorld(t), "ghost"
			} else {
				w = registered(t)
				for _, a := range []ledger.Actor{{ID: approver, Kind: c.kind}, {ID: "wf-ack", Kind: ledger.KindWorkflow}, {ID: "exec", Kind: ledger.KindWorkflow}} {
					if a.ID != approver || a.Kind == c.kind {
						_, err := w.l.AddActor(w.ctx, "root", a)
						if err != nil && !errors.Is(err, ledger.ErrInvalid) { // wf-ack may be the approver
							t.Fatal(err)
						}
					}
				}
			}
			_, err := w.l.Claim(w.ctx, ledger.TaskRef{ID: "task-7"}, "exec")
			w.must(err)
			a, err := w.l.Propose(w.ctx, ackProposal("wf-ack"))
			w.must(err)
			_, err = w.l.Approve(w.ctx, a.Key, approver, consentYes)
			w.must(err)
			if c.change == nil {
				_, err := w.l.AddActor(w.ctx, "root", ledger.Actor{ID: "root", Kind: ledger.KindPerson, Roles: ledger.Roles})
				w.must(err)
				_, err = w.l.AddActor(w.ctx, "root", ledger.Actor{ID: "exec", Kind: ledger.KindWorkflow})
				w.must(err)
				w.must(w.l.Require(w.ctx, "root", nil))
			} else {
				c.change(w)
			}
			w.wantStaleAtSend(a.Key, "exec", consentYes, c.why)
		})
	}
}

// TestATwoPersonTypeNeedsATokenForEveryAct (issue case 7): once a ledger
// requires tokens, every act on a two-person type (propose, approve, send,
// correct) needs the actor's own token, whatever roles the tokens cover:
// otherwise one person proposes and sends under another's name around
// their own approval. Each refusal is recorded; a type that is not
// two-person needs none.
func TestATwoPersonTypeNeedsATokenForEveryAct(t *testing.T) {
	w := newWorld(t)
	// Tokens only for the admin and stop roles: proposing, approving and
	// sending need none by role.
	lead := tokenRequiringLedger(w, []ledger.Role{ledger.RoleAdmin, ledger.RoleStop})
	asLead := ledger.WithToken(w.ctx, lead)
	_, err := w.l.AddActor(asLead, "lead", ledger.Actor{ID: "p2", Kind: ledger.KindPerson})
	w.must(err)
	p2, err := w.l.IssueToken(asLead, "lead", "p2")
	w.must(err)
	asP2 := ledger.WithToken(w.ctx, p2)
	_, err = w.l.SetPolicy(asLead, "lead", ledger.ActionPolicy{ActionType: "refund", TwoPerson: true})
	w.must(err)
	_, err = w.l.Claim(w.ctx, ledger.TaskRef{ID: "task-7"}, "p2")
	w.must(err)
	refund := ackProposal("p2")
	refund.ActionType = "refund"

	refused := func(what string, err error, whose string) {
		t.Helper()
		if !errors.Is(err, ledger.ErrNotPermitted) || !strings.Contains(err.Error(), "refund needs two persons") ||
			!strings.Contains(err.Error(), whose) {
			t.Fatalf("%s: %v, want refused for want of %s", what, err, whose)
		}
	}
	_, err = w.l.Propose(w.ctx, refund)
	refused("propose without a token", err, "present p2's")
	_, err = w.l.Propose(asLead, refund)
	refused("propose with another's token", err, "the token presented is not p2's")
	a, err := w.l.Propose(asP2, refund)
	w.must(err)
	_, err = w.l.Approve(w.ctx, a.Key, "lead", consentYes)
	refused("approve without a token", err, "present lead's")
	_, err = w.l.Approve(asLead, a.Key, "lead", consentYes)
	w.must(err)
	_, err = w.l.Execute(w.ctx, ledger.ExecuteRequest{Key: a.Key, Executor: "p2", Reread: consentYes}, w.dest)
	refused("send without a token", err, "present p2's")
	_, err = w.l.Execute(asLead, ledger.ExecuteRequest{Key: a.Key, Executor: "p2", Reread: consentYes}, w.dest)
	refused("send with the approver's token", err, "the token presented is not p2's")
	if w.dest.Calls() != 0 || w.state(a.Key) != ledger.StateApproved {
		t.Fatalf("a refused send sent (%d calls) or moved the action (%s)", w.dest.Calls(), w.state(a.Key))
	}
	if _, err := w.l.Execute(asP2, ledger.ExecuteRequest{Key: a.Key, Executor: "p2", Reread: consentYes}, w.dest); err != nil {
		t.Fatalf("send with p2's own token: %v", err)
	}
	_, err = w.l.Correct(w.ctx, ledger.Correction{Original: a.Key, Actor: "p2", Reason: "wrong amount", Subject: "Correction", Body: "The amount is 12."})
	refused("correct without a token", err, "present p2's")

	h, err := w.l.History(w.ctx, ledger.HistoryFilter{ActionKey: a.Key})
	w.must(err)
	n := 0
	for _, e := range h {
		if e.Kind == ledger.EvNotPermitted {
			n++
		}
	}
	if n != 6 {
		t.Errorf("%d not_permitted lines in the history of %s, want 6", n, a.Key)
	}
	// A type that is not two-person takes these acts without a token.
	ack := ackProposal("p2")
	ack.Event = "enquiry-1002"
	b, err := w.l.Propose(w.ctx, ack)
	w.must(err)
	_, err = w.l.Approve(w.ctx, b.Key, "lead", consentYes)
	w.must(err)
	if _, err := w.execute(b.Key, "p2", consentYes); err != nil {
		t.Fatalf("send of a one-person type without a token: %v", err)
	}
}

// TestGroupedSendsJudgeEachApprovalAndTokenAsAlone: sends decided in one
// group commit each get a lone send's answer: a revoked approver's
// approvals are stale, the others send; of two sends of a two-person type
// the one with the executor's own token sends, the one without is refused.
func TestGroupedSendsJudgeEachApprovalAndTokenAsAlone(t *testing.T) {
	const each = 3
	w, sizes := groupedWorld(t, 2*each+2)
	lead := tokenRequiringLedger(w, []ledger.Role{ledger.RoleAdmin, ledger.RoleStop})
	asLead := ledger.WithToken(w.ctx, lead)
	_, err := w.l.AddActor(asLead, "lead", ledger.Actor{ID: "ann", Kind: ledger.KindPerson})
	w.must(err)
	wfToken, err := w.l.IssueToken(asLead, "lead", "wf-ack")
	w.must(err)
	asWF := ledger.WithToken(w.ctx, wfToken)
	_, err = w.l.SetPolicy(asLead, "lead", ledger.ActionPolicy{ActionType: "refund", TwoPerson: true})
	w.must(err)
	_, err = w.l.Claim(w.ctx, ledger.TaskRef{ID: "task-7"}, "wf-ack")
	w.must(err)
	type job struct {
		key  string
		ctx  context.Context
		want func(error) bool
	}
	sent := func(err error) bool { return err == nil }
	var jobs []job
	for i := range 2*each + 2 {
		p := ackProposal("wf-ack")
		p.Event = fmt.Sprint("enquiry-", 3000+i)
		approver, j := "lead", job{ctx: w.ctx, want: sent}
		switch {
		case i%2 == 1 && i < 2*each:
			approver, j.want = "ann", func(err error) bool { return errors.Is(err, ledger.ErrApprovalStale) }
		case i == 2*each:
			p.ActionType, j.ctx = "refund", asWF
		case i == 2*each+1:
			p.ActionType, j.want = "refund", func(err error) bool { return errors.Is(err, ledger.ErrNotPermitted) }
		}
		a, err := w.l.Propose(asWF, p)
		w.must(err)
		_, err = w.l.Approve(asLead, a.Key, approver, consentYes)
		w.must(err)
		j.key = a.Key
		jobs = append(jobs, j)
	}
	_, err = w.l.RevokeRoles(asLead, "lead", "ann", []ledger.Role{ledger.RoleApprove})
	w.must(err)

	errs := make([]error, len(jobs))
	var wg sync.WaitGroup
	for i, j := range jobs {
		wg.Go(func() {
			_, errs[i] = w.l.Execute(j.ctx, ledger.ExecuteRequest{Key: j.key, Executor: "wf-ack", Reread: consentYes}, w.dest)
		})
	}
	wg.Wait()
	if got := sizes(); len(got) < 2 || got[0]+got[1] < len(jobs) || got[0] == 1 && got[1] == 1 {
		t.Fatalf("groups %v: the sends were not decided together", got)
	}
	for i, j := range jobs {
		if !j.want(errs[i]) {
			t.Errorf("send %d (%s): %v", i, j.key, errs[i])
		}
	}
	if got, want := w.dest.Calls(), each+1; got != want {
		t.Errorf("destination called %d times, want %d", got, want)
	}
	for i := 1; i < 2*each; i += 2 {
		if line := w.lastLine(jobs[i].key, ledger.EvApprovalStale); !strings.Contains(line, "ann could not approve it now") {
			t.Errorf("%s: history says %q", jobs[i].key, line)
		}
	}
	if line := w.lastLine(jobs[len(jobs)-1].key, ledger.EvNotPermitted); !strings.Contains(line, "refund needs two persons") {
		t.Errorf("the tokenless refund's history says %q", line)
	}
}

// addActors registers actors on a registered ledger, as root.
func (w *world) addActors(actors ...ledger.Actor) {
	w.t.Helper()
	for _, a := range actors {
		_, err := w.l.AddActor(w.ctx, "root", a)
		w.must(err)
	}
}

// releaseApprovedByAnn is release rel-1 of importMessy, approved by ann, a
// person; ops and the workflow notice-bot are registered too.
func releaseApprovedByAnn(t *testing.T, w *world) {
	t.Helper()
	w.addActors(ledger.Actor{ID: "ann", Kind: ledger.KindPerson}, ledger.Actor{ID: "ops", Kind: ledger.KindPerson},
		ledger.Actor{ID: "notice-bot", Kind: ledger.KindWorkflow})
	importMessy(t, w, "rel-1")
	w.must(w.l.ApproveAudience(w.ctx, "rel-1", "ann", fake.DefaultName, ""))
}

// TestARevokedApproversReleaseIsStaleAtSend: a release's approval is
// judged at send as an action's is: once its approver lost the approve
// role, the send is refused as stale with its history line and nothing is
// sent, ledger check names the release, and a person who may approve it
// now lets it go.
func TestARevokedApproversReleaseIsStaleAtSend(t *testing.T) {
	w := registered(t)
	releaseApprovedByAnn(t, w)
	_, err := w.l.RevokeRoles(w.ctx, "root", "ann", []ledger.Role{ledger.RoleApprove})
	w.must(err)

	why := "ann could not approve it now: ann (person) lacks the approve role"
	if vs := approvalViolations(t, w); len(vs) != 1 || !strings.Contains(vs[0], "release rel-1") || !strings.Contains(vs[0], why) {
		t.Errorf("ledger check names %q, want release rel-1: %s", vs, why)
	}
	send := ledger.AudienceSend{ReleaseID: "rel-1", Actor: "notice-bot"}
	if _, err := w.l.SendAudience(w.ctx, send, w.dest, testCRM()); !errors.Is(err, ledger.ErrApprovalStale) || !strings.Contains(err.Error(), why) {
		t.Fatalf("send of a release whose approver may no longer approve: %v", err)
	}
	if w.dest.Calls() != 0 {
		t.Fatal("sent")
	}
	h, err := w.l.History(w.ctx, ledger.HistoryFilter{})
	w.must(err)
	if last := h[len(h)-1]; last.Kind != ledger.EvApprovalStale || !strings.Contains(last.Message, "release rel-1") || !strings.Contains(last.Message, why) {
		t.Errorf("last history line %s: %q", last.Kind, last.Message)
	}
	w.must(w.l.ApproveAudience(w.ctx, "rel-1", "root", fake.DefaultName, ""))
	s, err := w.l.SendAudience(w.ctx, send, w.dest, testCRM())
	w.must(err)
	if s.Confirmed != 3 || w.dest.Calls() != 3 {
		t.Fatalf("after approval by root: %+v, %d calls", s, w.dest.Calls())
	}
	if vs := approvalViolations(t, w); len(vs) != 0 {
		t.Errorf("ledger check after the send: %q", vs)
	}
}

// TestAReleaseWhoseApproverLeavesMidRunSendsEachRecipientOnce: the
// release's approver loses the approve role while a run sends it: the
// next recipient's approval no longer holds, the run ends there as stale,
// and once a person who may approve it approves the release again the
// next run sends the rest: every eligible recipient exactly once.
func TestAReleaseWhoseApproverLeavesMidRunSendsEachRecipientOnce(t *testing.T) {
	w := registered(t)
	releaseApprovedByAnn(t, w)
	var once sync.Once
	send := ledger.AudienceSend{ReleaseID: "rel-1", Actor: "notice-bot", Concurrency: 1, Batch: 1,
		Progress: func(p ledger.SendProgress) {
			once.Do(func() {
				_, err := w.l.RevokeRoles(w.ctx, "root", "ann", []ledger.Role{ledger.RoleApprove})
				w.must(err)
			})
		}}
	_, err := w.l.SendAudience(w.ctx, send, w.dest, testCRM())
	if !errors.Is(err, ledger.ErrApprovalStale) || !strings.Contains(err.Error(), "ann could not approve it now") {
		t.Fatalf("a run whose approver left: %v", err)
	}
	if n := w.dest.Calls(); n != 1 {
		t.Fatalf("%d sent before the approver left, want 1", n)
	}
	w.must(w.l.ApproveAudience(w.ctx, "rel-1", "root", fake.DefaultName, ""))
	send.Progress = nil
	s, err := w.l.SendAudience(w.ctx, send, w.dest, testCRM())
	w.must(err)
	if s.Confirmed != 3 || w.dest.Calls() != 3 {
		t.Fatalf("after approval by root: %+v, %d calls", s, w.dest.Calls())
	}
	for _, m := range w.dest.Arrived() {
		if w.dest.Arrivals(m.ActionKey) != 1 {
			t.Errorf("%s arrived %d times", m.ActionKey, w.dest.Arrivals(m.ActionKey))
		}
	}
	if vs := approvalViolations(t, w); len(vs) != 0 {
		t.Errorf("ledger check after the send: %q", vs)
	}
}

// TestABackupWithALapsedApprovalStillRestores: a lapsed approval is a fact
// about the actors (a role revoked), which the send refuses, not a fault of
// the file: a backup taken after the revocation restores, and the send on
// the restored ledger is still refused as stale.
func TestABackupWithALapsedApprovalStillRestores(t *testing.T) {
	sqliteOnly(t)
	w := registered(t)
	w.addActors(ledger.Actor{ID: "ann", Kind: ledger.KindPerson}, ledger.Actor{ID: "exec", Kind: ledger.KindWorkflow}, ledger.Actor{ID: "wf-ack", Kind: ledger.KindWorkflow})
	_, err := w.l.Claim(w.ctx, ledger.TaskRef{ID: "task-7"}, "exec")
	w.must(err)
	a, err := w.l.Propose(w.ctx, ackProposal("wf-ack"))
	w.must(err)
	_, err = w.l.Approve(w.ctx, a.Key, "ann", consentYes)
	w.must(err)
	_, err = w.l.RevokeRoles(w.ctx, "root", "ann", []ledger.Role{ledger.RoleApprove})
	w.must(err)
	if vs := approvalViolations(t, w); len(vs) != 1 {
		t.Fatalf("ledger check names %v, want the lapsed approval", vs)
	}
	backup := filepath.Join(t.TempDir(), "backup.db")
	_, err = w.l.Backup(w.ctx, backup, false)
	w.must(err)
	if _, err := w.restoreBackup(backup, false); err != nil {
		t.Fatalf("restore of a backup holding a lapsed approval: %v", err)
	}
	w.clock.Advance(ledger.DefaultLease + time.Second) // nothing the lost history sent can still land
	w.wantStaleAtSend(a.Key, "exec", consentYes, "ann could not approve it now")
}

package ledger_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"gatehouse/destination"
	"gatehouse/ledger"
)

// registered is a world whose ledger is in registered mode, with root (a
// person holding every role) and a policy letting policy actors approve
// reply_ack on consent.
func registered(t *testing.T) *world {
	t.Helper()
	w := newWorld(t)
	_, err := w.l.AddActor(w.ctx, "root", ledger.Actor{ID: "root", Kind: ledger.KindPerson, Roles: ledger.Roles})
	w.must(err)
	_, err = w.l.SetPolicy(w.ctx, "root", ledger.ActionPolicy{ActionType: "reply_ack", PolicyApproves: true,
		Requires: map[string]string{"crm.consent": "yes"}})
	w.must(err)
	w.must(w.l.Require(w.ctx, "root", nil))
	return w
}

// verbCase sets up what a verb acts on (as root) and returns the act, by
// actor, on it. n makes each case's task and action its own.
type verbCase struct {
	verb  ledger.Verb
	setup func(w *world, n string) func(actor string) error
}

func proposalOn(n, actor string) ledger.Proposal {
	p := ackProposal(actor)
	p.Task = ledger.TaskRef{ID: "task-" + n}
	p.Target, p.Event = "task-"+n, "enquiry-"+n
	return p
}

// rootApproved is an approved action of task-n, owned by root.
func rootApproved(w *world, n string) ledger.Action {
	w.t.Helper()
	_, err := w.l.Claim(w.ctx, ledger.TaskRef{ID: "task-" + n}, "root")
	w.must(err)
	a, err := w.l.Propose(w.ctx, proposalOn(n, "root"))
	w.must(err)
	a, err = w.l.Approve(w.ctx, a.Key, "root", consentYes)
	w.must(err)
	return a
}

// rootUnknown is an action of task-n whose attempt's outcome is unknown.
func rootUnknown(w *world, n string) ledger.Action {
	w.t.Helper()
	a := rootApproved(w, n)
	w.dest.Script(destination.OutcomeUnknown)
	if _, err := w.execute(a.Key, "root", consentYes); !errors.Is(err, ledger.ErrUnknownOutcome) {
		w.t.Fatalf("execute: %v, want unknown", err)
	}
	return a
}

var verbCases = []verbCase{
	{ledger.VerbClaim, func(w *world, n string) func(string) error {
		return func(actor string) error {
			_, err := w.l.Claim(w.ctx, ledger.TaskRef{ID: "task-" + n}, actor)
			return err
		}
	}},
	{ledger.VerbView, func(w *world, n string) func(string) error {
		return func(actor string) error {
			return w.l.View(w.ctx, ledger.TaskRef{ID: "task-" + n}, actor, "person", time.Minute)
		}
	}},
	{ledger.VerbLeave, func(w *world, n string) func(string) error {
		return func(actor string) error { return w.l.Leave(w.ctx, "task-"+n, actor) }
	}},
	{ledger.VerbPropose, func(w *world, n string) func(string) error {
		return func(actor string) error { _, err := w.l.Propose(w.ctx, proposalOn(n, actor)); return err }
	}},
	{ledger.VerbSubmit, func(w *world, n string) func(string) error {
		a, err := w.l.Propose(w.ctx, proposalOn(n, "root"))
		w.must(err)
		return func(actor string) error { _, err := w.l.Submit(w.ctx, a.Key, actor); return err }
	}},
	{ledger.VerbApprove, func(w *world, n string) func(string) error {
		_, err := w.l.Claim(w.ctx, ledger.TaskRef{ID: "task-" + n}, "root")
		w.must(err)
		a, err := w.l.Propose(w.ctx, proposalOn(n, "root"))
		w.must(err)
		return func(actor string) error { _, err := w.l.Approve(w.ctx, a.Key, actor, consentYes); return err }
	}},
	{ledger.VerbExecute, func(w *world, n string) func(string) error {
		a := rootApproved(w, n)
		return func(actor string) error { _, err := w.execute(a.Key, actor, consentYes); return err }
	}},
	{ledger.VerbReconcile, func(w *world, n string) func(string) error {
		a := rootUnknown(w, n)
		return func(actor string) error { _, err := w.reconcile(a.Key, actor); return err }
	}},
	{ledger.VerbResolve, func(w *world, n string) func(string) error {
		a := rootUnknown(w, n)
		return func(actor string) error {
			_, err := w.l.ResolveUnknown(w.ctx, a.Key, actor, true, "the mailbox shows it")
			return err
		}
	}},
	{ledger.VerbHold, func(w *world, n string) func(string) error {
		a := rootApproved(w, n)
		return func(actor string) error { _, err := w.l.Hold(w.ctx, a.Key, actor, "wait"); return err }
	}},
	{ledger.VerbReleaseHold, func(w *world, n string) func(string) error {
		a := rootApproved(w, n)
		_, err := w.l.Hold(w.ctx, a.Key, "root", "wait")
		w.must(err)
		return func(actor string) error { _, err := w.l.ReleaseHold(w.ctx, a.Key, actor, "go on"); return err }
	}},
	{ledger.VerbCancel, func(w *world, n string) func(string) error {
		a, err := w.l.Propose(w.ctx, proposalOn(n, "root"))
		w.must(err)
		return func(actor string) error { _, err := w.l.Cancel(w.ctx, a.Key, actor, "not needed"); return err }
	}},
	{ledger.VerbCorrect, func(w *world, n string) func(string) error {
		a := rootApproved(w, n)
		_, err := w.execute(a.Key, "root", consentYes)
		w.must(err)
		return func(actor string) error {
			_, err := w.l.Correct(w.ctx, ledger.Correction{Original: a.Key, Actor: actor, Reason: "wrong date", Subject: "Correction", Body: "The date is Monday."})
			return err
		}
	}},
	{ledger.VerbComplete, func(w *world, n string) func(string) error {
		_, err := w.l.Claim(w.ctx, ledger.TaskRef{ID: "task-" + n}, "root")
		w.must(err)
		return func(actor string) error { return w.l.Complete(w.ctx, "task-"+n, actor) }
	}},
	{ledger.VerbTakeover, func(w *world, n string) func(string) error {
		_, err := w.l.Claim(w.ctx, ledger.TaskRef{ID: "task-" + n}, "root")
		w.must(err)
		return func(actor string) error {
			_, err := w.l.TakeOver(w.ctx, ledger.TaskRef{ID: "task-" + n}, actor, "root is away")
			return err
		}
	}},
	{ledger.VerbRelease, func(w *world, n string) func(string) error {
		_, err := w.l.Claim(w.ctx, ledger.TaskRef{ID: "task-" + n}, "root")
		w.must(err)
		return func(actor string) error { _, err := w.l.Release(w.ctx, "task-"+n, actor, "done"); return err }
	}},
	{ledger.VerbStop, func(w *world, n string) func(string) error {
		return func(actor string) error { return w.l.Stop(w.ctx, actor, "incident") }
	}},
	{ledger.VerbResume, func(w *world, n string) func(string) error {
		w.must(w.l.Stop(w.ctx, "root", "incident"))
		return func(actor string) error { return w.l.Resume(w.ctx, actor, "over") }
	}},
	{ledger.VerbOperate, func(w *world, n string) func(string) error {
		return func(actor string) error { return w.l.RecordOperating(w.ctx, actor, "the incident review") }
	}},
	{ledger.VerbMarkRestored, func(w *world, n string) func(string) error {
		return func(actor string) error { _, err := w.l.MarkRestored(w.ctx, actor, "put back by hand"); return err }
	}},
}

// everyRoleBut is every role except r.
func everyRoleBut(r ledger.Role) []ledger.Role {
	return slices.DeleteFunc(slices.Clone(ledger.Roles), func(x ledger.Role) bool { return x == r })
}

// dumpState is everything a ledger holds but its history and counters, as
// text: a refusal must leave it as it was.
func dumpState(t *testing.T, db *sql.DB) string {
	t.Helper()
	var b strings.Builder
	for _, table := range []string{"actions", "tasks", "approvals", "attempts", "stop_switch", "presence", "notifications",
		"actors", "actor_tokens", "actor_mode", "policies", "ledger_identity", "unverified_actions", "unverified_releases", "material_checks"} {
		rows, err := db.Query(`SELECT * FROM ` + table + ` ORDER BY 1`)
		if err != nil {
			t.Fatalf("dump %s: %v", table, err)
		}
		cols, _ := rows.Columns()
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&b, "%s %v\n", table, vals)
		}
		rows.Close()
	}
	return b.String()
}

func historyLen(t *testing.T, db *sql.DB) (n int, last string) {
	t.Helper()
	if err := db.QueryRow(`SELECT count(*) FROM events`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow(`SELECT kind || ' ' || message FROM events ORDER BY id DESC LIMIT 1`).Scan(&last); err != nil {
		t.Fatal(err)
	}
	return n, last
}

// TestEveryVerbByEveryKind is the permission table, exercised: every verb
// by every kind of actor that has the verb's role, lacks it, or is
// disabled. An act the table allows is not refused for permission; any
// other is refused with ErrNotPermitted, one history line saying so, and
// nothing else written.
func TestEveryVerbByEveryKind(t *testing.T) {
	for _, vc := range verbCases {
		t.Run(strings.ReplaceAll(string(vc.verb), " ", "-"), func(t *testing.T) {
			w := registered(t)
			db := rawLedger(t, w)
			p, ok := ledger.PermitFor(vc.verb)
			if !ok {
				t.Fatalf("no permit for %s", vc.verb)
			}
			for _, kind := range ledger.Kinds {
				for _, cond := range []string{"has", "lacks", "disabled"} {
					if cond == "lacks" && p.Role == "" {
						continue // any enabled actor may
					}
					id := fmt.Sprintf("%s-%s", kind, cond)
					roles := []ledger.Role{p.Role}
					if p.Role == "" {
						roles = nil
					}
					if cond == "lacks" {
						roles = everyRoleBut(p.Role)
					}
					if kind != ledger.KindPerson {
						roles = slices.DeleteFunc(roles, func(r ledger.Role) bool { return r == ledger.RoleAdmin })
					}
					if roles == nil {
						roles = []ledger.Role{}
					}
					_, err := w.l.AddActor(w.ctx, "root", ledger.Actor{ID: id, Kind: kind, Roles: roles})
					w.must(err)
					if cond == "disabled" {
						_, err = w.l.SetEnabled(w.ctx, "root", id, false)
						w.must(err)
					}
					act := vc.setup(w, id)
					before, n := dumpState(t, db), 0
					n, _ = historyLen(t, db)
					m0, err := w.l.Metrics(w.ctx)
					w.must(err)
					err = act(id)
					allowed := cond == "has" && slices.Contains(p.Kinds, kind)
					if allowed {
						if errors.Is(err, ledger.ErrNotPermitted) {
							t.Errorf("%s by %s: refused (%v), the table allows it", vc.verb, id, err)
						}
						continue
					}
					if !errors.Is(err, ledger.ErrNotPermitted) {
						t.Errorf("%s by %s: %v, want not permitted", vc.verb, id, err)
						continue
					}
					if after := dumpState(t, db); after != before {
						t.Errorf("%s by %s: refused, but the ledger changed:\n%s", vc.verb, id, diffLines(before, after))
					}
					n2, last := historyLen(t, db)
					if n2 != n+1 || !strings.HasPrefix(last, "not_permitted "+id+" may not "+string(vc.verb)) {
						t.Errorf("%s by %s: %d new history lines, last %q; want one not_permitted line", vc.verb, id, n2-n, last)
					}
					m1, err := w.l.Metrics(w.ctx)
					w.must(err)
					if m1.NotPermitted != m0.NotPermitted+1 {
						t.Errorf("%s by %s: not permitted counted %d → %d", vc.verb, id, m0.NotPermitted, m1.NotPermitted)
					}
				}
			}
		})
	}
}

func diffLines(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	var out []string
	for _, l := range bl {
		if !slices.Contains(al, l) {
			out = append(out, "+ "+l)
		}
	}
	for _, l := range al {
		if !slices.Contains(bl, l) {
			out = append(out, "- "+l)
		}
	}
	return strings.Join(out, "\n")
}

// TestAnOpenLedgerTakesAnyName: a ledger nobody switched (every ledger
// before schema 16) acts for any --as, as it always did.
func TestAnOpenLedgerTakesAnyName(t *testing.T) {
	w := newWorld(t)
	a := w.approved("wf-ack")
	if _, err := w.execute(a.Key, "wf-ack", consentYes); err != nil {
		t.Fatal(err)
	}
	w.must(w.l.Stop(w.ctx, "anyone", "a drill"))
	m, err := w.l.Mode(w.ctx)
	w.must(err)
	if m.Registered {
		t.Fatal("a new ledger is registered")
	}
}

// TestRequireNeedsAnAdminAndAStopHolder: the switch to registered mode is
// refused until someone can change actors and someone can stop; the last
// of either cannot be revoked or disabled.
func TestRequireNeedsAnAdminAndAStopHolder(t *testing.T) {
	w := newWorld(t)
	_, err := w.l.AddActor(w.ctx, "lead", ledger.Actor{ID: "lead", Kind: ledger.KindPerson, Roles: []ledger.Role{ledger.RoleAdmin}})
	w.must(err)
	if err := w.l.Require(w.ctx, "lead", nil); !errors.Is(err, ledger.ErrInvalid) || !strings.Contains(err.Error(), "stop role") {
		t.Fatalf("require without a stop holder: %v", err)
	}
	_, err = w.l.AddActor(w.ctx, "lead", ledger.Actor{ID: "ops", Kind: ledger.KindPerson, Roles: []ledger.Role{ledger.RoleStop}})
	w.must(err)
	if err := w.l.Require(w.ctx, "ops", nil); !errors.Is(err, ledger.ErrInvalid) {
		t.Fatalf("require by a non-admin: %v", err)
	}
	w.must(w.l.Require(w.ctx, "lead", nil))
	for _, change := range []func() error{
		func() error {
			_, err := w.l.RevokeRoles(w.ctx, "lead", "lead", []ledger.Role{ledger.RoleAdmin})
			return err
		},
		func() error { _, err := w.l.SetEnabled(w.ctx, "lead", "lead", false); return err },
		func() error {
			_, err := w.l.RevokeRoles(w.ctx, "lead", "ops", []ledger.Role{ledger.RoleStop})
			return err
		},
		func() error { _, err := w.l.SetEnabled(w.ctx, "lead", "ops", false); return err },
	} {
		if err := change(); !errors.Is(err, ledger.ErrInvalid) || !strings.Contains(err.Error(), "last enabled actor") {
			t.Errorf("leaving no holder: %v", err)
		}
	}
	// After require, only an admin changes actors.
	if _, err := w.l.AddActor(w.ctx, "ops", ledger.Actor{ID: "wf", Kind: ledger.KindWorkflow}); !errors.Is(err, ledger.ErrNotPermitted) {
		t.Fatalf("a non-admin adds an actor: %v", err)
	}
	// Stop needs the stop role: lead lacks it, ops has it.
	if err := w.l.Stop(w.ctx, "lead", "drill"); !errors.Is(err, ledger.ErrNotPermitted) {
		t.Fatalf("stop by an actor without the stop role: %v", err)
	}
	w.must(w.l.Stop(w.ctx, "ops", "drill"))
}

// TestATokenRequiredLedgerRefusesAPersonsActWithoutTheirToken: with
// tokens required, naming a person is not enough: the act needs that
// person's token, not another actor's, and a workflow holding its own
// token cannot pass as the person.
func TestATokenRequiredLedgerRefusesAPersonsActWithoutTheirToken(t *testing.T) {
	w := newWorld(t)
	_, err := w.l.AddActor(w.ctx, "lead", ledger.Actor{ID: "lead", Kind: ledger.KindPerson, Roles: append(ledger.DefaultRoles(ledger.KindPerson), ledger.RoleAdmin, ledger.RoleStop)})
	w.must(err)
	_, err = w.l.AddActor(w.ctx, "lead", ledger.Actor{ID: "wf-ack", Kind: ledger.KindWorkflow})
	w.must(err)
	leadToken, err := w.l.IssueToken(w.ctx, "lead", "lead")
	w.must(err)
	wfToken, err := w.l.IssueToken(w.ctx, "lead", "wf-ack")
	w.must(err)
	if !strings.HasPrefix(leadToken, ledger.TokenPrefix) || len(leadToken) != len(ledger.TokenPrefix)+43 || leadToken == wfToken {
		t.Fatalf("tokens %q %q", leadToken, wfToken)
	}
	if err := w.l.Require(w.ctx, "lead", ledger.DefaultTokenRoles); !errors.Is(err, ledger.ErrInvalid) {
		t.Fatalf("require tokens for admin without the admin's own: %v", err)
	}
	w.must(w.l.Require(ledger.WithToken(w.ctx, leadToken), "lead", ledger.DefaultTokenRoles))

	_, err = w.l.Claim(w.ctx, ledger.TaskRef{ID: "task-7"}, "wf-ack")
	w.must(err) // execute needs no token
	a, err := w.l.Propose(w.ctx, ackProposal("wf-ack"))
	w.must(err)
	for _, ctx := range []context.Context{w.ctx, ledger.WithToken(w.ctx, wfToken), ledger.WithToken(w.ctx, "ght_forged")} {
		if _, err := w.l.Approve(ctx, a.Key, "lead", consentYes); !errors.Is(err, ledger.ErrNotPermitted) {
			t.Fatalf("approve as lead without lead's token: %v", err)
		}
	}
	if _, err := w.l.Approve(ledger.WithToken(w.ctx, leadToken), a.Key, "lead", consentYes); err != nil {
		t.Fatal(err)
	}
	// The tokens are nowhere in the store, only their hashes: not in the
	// SQLite file and its WAL, not in a pg_dump.
	w.l.Close()
	stored := storedBytes(t, w.path)
	sum := sha256.Sum256([]byte(leadToken))
	if !bytes.Contains(stored, []byte(hex.EncodeToString(sum[:]))) {
		t.Fatal("the dump does not hold the token's hash: it is not the ledger's content")
	}
	for _, tok := range []string{leadToken, wfToken} {
		if bytes.Contains(stored, []byte(tok[len(ledger.TokenPrefix):])) {
			t.Errorf("a token is stored as it is")
		}
	}
}

// storedBytes is everything a ledger's store holds: the SQLite file and
// its WAL, or a pg_dump of the database.
func storedBytes(t *testing.T, loc string) []byte {
	t.Helper()
	if !onPostgres() {
		var out []byte
		for _, f := range []string{loc, loc + "-wal"} {
			b, err := os.ReadFile(f)
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				t.Fatal(err)
			}
			out = append(out, b...)
		}
		return out
	}
	dumps, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pg_dump")
	if len(dumps) == 0 {
		t.Skip("no pg_dump on this machine")
	}
	out, err := exec.Command(dumps[len(dumps)-1], "--data-only", "-d", loc).Output()
	if err != nil {
		t.Fatalf("pg_dump: %v", err)
	}
	return out
}

// TestPolicyApprovalsFollowThePolicy: a policy actor approves only the
// types a policy lets it, on the values it names; an approval it gave
// stays valid at execute only while the current policy version would
// still allow it. A two-person type is neither approved by its proposer
// nor sent by its approver.
func TestPolicyApprovalsFollowThePolicy(t *testing.T) {
	w := registered(t)
	_, err := w.l.AddActor(w.ctx, "root", ledger.Actor{ID: "policy", Kind: ledger.KindPolicy})
	w.must(err)
	_, err = w.l.AddActor(w.ctx, "root", ledger.Actor{ID: "wf-ack", Kind: ledger.KindWorkflow})
	w.must(err)
	_, err = w.l.Claim(w.ctx, ledger.TaskRef{ID: "task-7"}, "wf-ack")
	w.must(err)
	a, err := w.l.Propose(w.ctx, ackProposal("wf-ack"))
	w.must(err)
	if _, err := w.l.Approve(w.ctx, a.Key, "policy", []ledger.MaterialRead{{Source: "crm", Field: "consent", Value: "no"}}); !errors.Is(err, ledger.ErrNotPermitted) {
		t.Fatalf("policy approves on consent=no: %v", err)
	}
	a, err = w.l.Approve(w.ctx, a.Key, "policy", consentYes)
	w.must(err)
	// A later version takes the type from policies: the approval no
	// longer holds.
	_, err = w.l.SetPolicy(w.ctx, "root", ledger.ActionPolicy{ActionType: "reply_ack"})
	w.must(err)
	if _, err := w.execute(a.Key, "wf-ack", consentYes); !errors.Is(err, ledger.ErrApprovalStale) {
		t.Fatalf("execute under a policy that no longer allows its approval: %v", err)
	}
	if w.dest.Calls() != 0 {
		t.Fatal("sent")
	}
	// Two persons: root proposed, so root may not approve; ann approves,
	// and may not send it herself.
	_, err = w.l.SetPolicy(w.ctx, "root", ledger.ActionPolicy{ActionType: "refund", TwoPerson: true})
	w.must(err)
	_, err = w.l.AddActor(w.ctx, "root", ledger.Actor{ID: "ann", Kind: ledger.KindPerson})
	w.must(err)
	p := proposalOn("r1", "root")
	p.ActionType = "refund"
	_, err = w.l.Claim(w.ctx, p.Task, "ann")
	w.must(err)
	r, err := w.l.Propose(w.ctx, p)
	w.must(err)
	if _, err := w.l.Approve(w.ctx, r.Key, "root", consentYes); !errors.Is(err, ledger.ErrNotPermitted) {
		t.Fatalf("the proposer approves a two-person type: %v", err)
	}
	_, err = w.l.Approve(w.ctx, r.Key, "ann", consentYes)
	w.must(err)
	if _, err := w.execute(r.Key, "ann", consentYes); !errors.Is(err, ledger.ErrNotPermitted) {
		t.Fatalf("the approver sends a two-person type: %v", err)
	}
}

// TestAWorkflowCannotReleaseWhatAPersonResolved: a safe-to-retry hold is a
// workflow's to release (execute role) when reconciliation established the
// absence after the settle time, and a person's when a person said so.
func TestAWorkflowCannotReleaseWhatAPersonResolved(t *testing.T) {
	w := registered(t)
	_, err := w.l.AddActor(w.ctx, "root", ledger.Actor{ID: "wf", Kind: ledger.KindWorkflow})
	w.must(err)
	for _, byPerson := range []bool{false, true} {
		n := fmt.Sprint("by-person-", byPerson)
		_, err = w.l.Claim(w.ctx, ledger.TaskRef{ID: "task-" + n}, "wf")
		w.must(err)
		a, err := w.l.Propose(w.ctx, proposalOn(n, "wf"))
		w.must(err)
		_, err = w.l.Approve(w.ctx, a.Key, "root", consentYes)
		w.must(err)
		// The attempt never reached the destination; the executor only
		// knows its outcome is unknown.
		att, _, err := w.l.BeginAttempt(w.ctx, ledger.ExecuteRequest{Key: a.Key, Executor: "wf", Reread: consentYes,
			Endpoint: destination.EndpointOf(w.dest)})
		w.must(err)
		_, err = w.l.RecordOutcome(w.ctx, att.TransportID, destination.OutcomeUnknown, "timeout")
		w.must(err)
		w.settled(a.Key)
		if byPerson {
			_, err = w.l.ResolveUnknown(w.ctx, a.Key, "wf", false, "nothing in the mailbox")
			if !errors.Is(err, ledger.ErrNotPermitted) {
				t.Fatalf("a workflow resolves: %v", err)
			}
			_, err = w.l.ResolveUnknown(w.ctx, a.Key, "root", false, "nothing in the mailbox")
		} else {
			_, err = w.reconcile(a.Key, "wf")
		}
		if err != nil && !errors.Is(err, ledger.ErrHeld) {
			t.Fatal(err)
		}
		if got := w.state(a.Key); got != ledger.StateHeld {
			t.Fatalf("state %s", got)
		}
		_, err = w.l.ReleaseHold(w.ctx, a.Key, "wf", "retry")
		if byPerson != errors.Is(err, ledger.ErrNotPermitted) {
			t.Errorf("by person %v: workflow's release: %v", byPerson, err)
		}
	}
}

// TestCheckKnowsTheActorsInvariants: ledger check names a registered
// ledger left without a stop holder, an agent with the admin role, and a
// token stored as itself — each written behind the gate's back.
func TestCheckKnowsTheActorsInvariants(t *testing.T) {
	w := registered(t)
	if vs := actorViolations(t, w); len(vs) != 0 {
		t.Fatalf("a sound ledger: %v", vs)
	}
	db := rawLedger(t, w)
	q := func(s string) string {
		if onPostgres() {
			return strings.NewReplacer("?", "$1").Replace(s)
		}
		return s
	}
	for _, s := range []string{`UPDATE actors SET roles = 'admin,propose' WHERE id = 'root'`,
		`INSERT INTO actors (id, kind, roles, created_at, updated_at) VALUES ('bot', 'agent', 'admin', 0, 0)`} {
		if _, err := db.Exec(s); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Exec(q(`INSERT INTO actor_tokens (hash, actor, created_at) VALUES (?, 'bot', 0)`), ledger.TokenPrefix+"AAAA"); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(actorViolations(t, w), "\n")
	for _, want := range []string{"no enabled actor holds the stop role", "bot (agent) holds the admin role", "1 stored tokens are not SHA-256"} {
		if !strings.Contains(got, want) {
			t.Errorf("check says %q, lacks %q", got, want)
		}
	}
}

func actorViolations(t *testing.T, w *world) []string {
	t.Helper()
	vs, err := w.l.Check(w.ctx)
	w.must(err)
	var out []string
	for _, v := range vs {
		if v.Rule == "actors" {
			out = append(out, v.Detail)
		}
	}
	return out
}

// TestAPersonResolvesTheirOwnAttemptAndTheHistorySaysSo: a one-person
// team may resolve an attempt its person executed; the line says nobody
// else looked.
func TestAPersonResolvesTheirOwnAttemptAndTheHistorySaysSo(t *testing.T) {
	w := registered(t)
	a := rootUnknown(w, "solo")
	w.settled(a.Key)
	if _, err := w.l.ResolveUnknown(w.ctx, a.Key, "root", true, "I saw it in the outbox"); err != nil {
		t.Fatal(err)
	}
	h, err := w.l.History(w.ctx, ledger.HistoryFilter{ActionKey: a.Key})
	w.must(err)
	for _, e := range h {
		if e.Kind == ledger.EvReconciled && strings.Contains(e.Reason, "root executed attempt 1 themselves") {
			return
		}
	}
	t.Fatalf("no reconciled line says root executed the attempt: %+v", h)
}

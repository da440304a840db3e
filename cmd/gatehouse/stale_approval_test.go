package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// exec runs `gatehouse <family> <args> --ledger L` as its own process,
// with no token in its environment.
func (b *binEnv) exec(family string, args ...string) result {
	b.t.Helper()
	cmd := exec.Command(b.bin, append(append([]string{family}, args...), "--ledger", b.ledger)...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, tokenEnv+"=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	return runCommand(b.t, cmd)
}

func (b *binEnv) mustExec(family string, args ...string) result {
	b.t.Helper()
	r := b.exec(family, args...)
	if r.code != 0 {
		b.t.Fatalf("%s %s: exit %d\nstdout: %s\nstderr: %s", family, strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r
}

// token issues a token for id (by lead, with lead's token when given).
func (b *binEnv) token(id string, lead ...string) string {
	b.t.Helper()
	args := []string{"token", "--as", "lead", "--id", id, "--json"}
	if len(lead) > 0 {
		args = append(args, "--token", lead[0])
	}
	var tok issuedToken
	decodeOne(b.t, b.mustExec("actors", args...).stdout, &tok)
	return tok.Token
}

// propose proposes an action of actionType on task-r1 as actor (extra:
// --token …).
func (b *binEnv) propose(actor, actionType string, extra ...string) result {
	b.t.Helper()
	return b.exec("gate", append([]string{"propose", "--as", actor, "--task", "task-r1", "--customer", "cust-42", "--event", "enq-1",
		"--type", actionType, "--target", "task-r1", "--to", "ada@example.com", "--subject", "Your refund", "--body", "Hello Ada,\nrefunded.",
		"--destination", b.target()}, extra...)...)
}

// TestAnOpenLedgersApprovalByALaterAgentIsStale is issue case 6 through
// the binary: approved on the open ledger under the name bot, which is
// then registered as an agent, and tokens required: ledger check names
// the approval, and the send exits 12 saying why, sending nothing.
func TestAnOpenLedgersApprovalByALaterAgentIsStale(t *testing.T) {
	b := newBinEnv(t)
	b.mustExec("gate", "claim", "--task", "task-r1", "--customer", "cust-42", "--as", "wf-ack")
	r := b.propose("wf-ack", "reply_ack")
	key := strings.TrimSpace(r.stdout)
	wantExit(t, r, 0)
	b.mustExec("gate", "approve", "--key", key, "--as", "bot", "--material", "crm.consent=yes")
	b.mustExec("actors", "add", "--as", "lead", "--id", "lead", "--kind", "person",
		"--roles", "propose,approve,execute,resolve,release,takeover,stop,operate,review,admin")
	b.mustExec("actors", "add", "--as", "lead", "--id", "wf-ack", "--kind", "workflow")
	b.mustExec("actors", "add", "--as", "lead", "--id", "bot", "--kind", "agent")
	b.mustExec("actors", "require", "--as", "lead", "--tokens", "--token", b.token("lead"))

	why := "bot could not approve it now: bot is an agent, and an approval is a person's or a policy's decision"
	r = b.exec("ledger", "check")
	if r.code != exitOther || !strings.Contains(r.stdout, "violation: approvals: "+key) || !strings.Contains(r.stdout, why) {
		t.Fatalf("ledger check: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	wantExit(t, b.exec("gate", "send", "--key", key, "--as", "wf-ack", "--destination", b.target(), "--material", "crm.consent=yes"),
		exitDenied, "no longer holds: "+why)
	if n := len(b.emlFiles()); n != 0 {
		t.Fatalf("%d messages sent on a stale approval", n)
	}
	b.mustExec("ledger", "check")
}

// TestATwoPersonTypeNeedsEveryActorsToken is issue case 7 through the
// binary: with tokens required, one person could propose and send a
// two-person type under another's name around their own approval. Every
// act on it now needs the actor's own token: exit 21 without.
func TestATwoPersonTypeNeedsEveryActorsToken(t *testing.T) {
	b := newBinEnv(t)
	b.mustExec("actors", "add", "--as", "lead", "--id", "lead", "--kind", "person",
		"--roles", "propose,approve,execute,resolve,release,takeover,stop,operate,review,admin")
	b.mustExec("actors", "add", "--as", "lead", "--id", "p2", "--kind", "person")
	lead, p2 := b.token("lead"), b.token("p2")
	b.mustExec("actors", "require", "--as", "lead", "--tokens", "--token", lead)
	b.mustExec("policy", "set", "--as", "lead", "--type", "refund", "--two-person", "--token", lead)
	b.mustExec("gate", "claim", "--task", "task-r1", "--customer", "cust-42", "--as", "p2")

	wantExit(t, b.propose("p2", "refund"), exitNotPermitted, "p2 may not propose: refund needs two persons", "present p2's")
	wantExit(t, b.propose("p2", "refund", "--token", lead), exitNotPermitted, "the token presented is not p2's")
	key := strings.TrimSpace(b.propose("p2", "refund", "--token", p2).stdout)
	b.mustExec("gate", "approve", "--key", key, "--as", "lead", "--material", "crm.consent=yes", "--token", lead)
	send := []string{"send", "--key", key, "--as", "p2", "--destination", b.target(), "--material", "crm.consent=yes"}
	wantExit(t, b.exec("gate", send...), exitNotPermitted, "p2 may not send: refund needs two persons")
	wantExit(t, b.exec("gate", append(send, "--token", lead)...), exitNotPermitted, "the token presented is not p2's")
	if n := len(b.emlFiles()); n != 0 {
		t.Fatalf("%d messages sent without the executor's token", n)
	}
	b.mustExec("gate", append(send, "--token", p2)...)
	if n := len(b.emlFiles()); n != 1 {
		t.Fatalf("%d messages, want 1", n)
	}
}

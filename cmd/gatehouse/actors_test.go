package main

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// family runs `gatehouse <family> <args> --ledger <file>` in-process.
func (e *gateEnv) family(family string, args ...string) result {
	e.t.Helper()
	var out, errOut bytes.Buffer
	full := append([]string{family}, args...)
	full = append(full, "--ledger", e.ledger)
	code := run(full, &out, &errOut)
	return result{code: code, stdout: out.String(), stderr: errOut.String()}
}

func (e *gateEnv) mustFamily(family string, args ...string) result {
	e.t.Helper()
	r := e.family(family, args...)
	if r.code != 0 {
		e.t.Fatalf("%s %s: exit %d\nstdout: %s\nstderr: %s", family, strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r
}

// registeredEnv sets up the README's registered ledger: lead (a person
// with every role), wf-ack (a workflow), tokens required; it returns
// lead's token.
func registeredEnv(t *testing.T) (*gateEnv, string) {
	e := newGateEnv(t)
	r := e.mustFamily("actors", "add", "--as", "lead", "--id", "lead", "--kind", "person",
		"--roles", "propose,approve,execute,resolve,release,takeover,stop,operate,review,admin")
	if !strings.Contains(r.stderr, "this ledger is open") {
		t.Errorf("an open ledger's verb does not say so: %q", r.stderr)
	}
	e.mustFamily("actors", "add", "--as", "lead", "--id", "wf-ack", "--kind", "workflow")
	var tok issuedToken
	decodeOne(t, e.mustFamily("actors", "token", "--as", "lead", "--id", "lead", "--json").stdout, &tok)
	if !strings.HasPrefix(tok.Token, "ght_") {
		t.Fatalf("token %q", tok.Token)
	}
	e.mustFamily("actors", "require", "--as", "lead", "--tokens", "--token", tok.Token)
	return e, tok.Token
}

// TestRegisteredLedgerRefusesWithExit21: on a registered ledger a verb by
// an actor without the role exits 21 with the reason, and is one history
// line; with the role (and the token its role needs) it works. The token
// given is masked in every output.
func TestRegisteredLedgerRefusesWithExit21(t *testing.T) {
	e, lead := registeredEnv(t)
	if r := e.gate("stop", "--as", "wf-ack", "--reason", "drill"); r.code != exitNotPermitted ||
		!strings.Contains(r.stderr, "wf-ack may not stop: the wf-ack (workflow) lacks") && !strings.Contains(r.stderr, "wf-ack may not stop") {
		t.Fatalf("stop by a workflow without the stop role: exit %d, %s", r.code, r.stderr)
	}
	if r := e.gate("stop", "--as", "lead", "--reason", "drill"); r.code != exitNotPermitted || !strings.Contains(r.stderr, "own token") {
		t.Fatalf("stop by lead without a token: exit %d, %s", r.code, r.stderr)
	}
	r := e.gate("stop", "--as", "lead", "--reason", "drill", "--token", lead)
	wantExit(t, r, 0)
	if strings.Contains(r.stdout+r.stderr, lead[4:]) || strings.Contains(r.stderr, "this ledger is open") {
		t.Fatalf("output shows the token or calls the ledger open: %s %s", r.stdout, r.stderr)
	}
	t.Setenv(tokenEnv, lead)
	wantExit(t, e.gate("resume", "--as", "lead", "--reason", "over"), 0)
	os.Unsetenv(tokenEnv)
	// An unregistered name is refused; the history says each refusal.
	wantExit(t, e.gate("claim", "--task", "t1", "--as", "mallory"), exitNotPermitted, "not a registered actor")
	var hist struct {
		Events []struct {
			Kind, Message string
		} `json:"events"`
	}
	decodeOne(t, e.must("history", "--json", "--limit", "100").stdout, &hist)
	var refused []string
	for _, ev := range hist.Events {
		if ev.Kind == "not_permitted" {
			refused = append(refused, ev.Message)
		}
	}
	if len(refused) != 3 {
		t.Fatalf("not_permitted lines %q, want 3", refused)
	}
	var m map[string]any
	decodeOne(t, e.must("metrics", "--json").stdout, &m)
	if m["not_permitted"] != float64(3) {
		t.Errorf("metrics not_permitted = %v", m["not_permitted"])
	}
	raw, _ := json.Marshal(hist)
	if strings.Contains(string(raw), lead[4:]) {
		t.Fatal("the token is in the history")
	}
	// The last admin keeps the role.
	wantExit(t, e.family("actors", "revoke", "--as", "lead", "--id", "lead", "--roles", "admin", "--token", lead), exitUsage, "last enabled actor")
	// actors show says what an actor may do.
	var d actorDetail
	decodeOne(t, e.mustFamily("actors", "show", "--id", "wf-ack", "--json").stdout, &d)
	if !contains(d.May, "send") || contains(d.May, "resolve") || !contains(d.MayNot, "resolve") {
		t.Errorf("wf-ack may %v, may not %v", d.May, d.MayNot)
	}
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// openNotice is the line an open ledger's verb adds to stderr.
func openNotice(actor string) string {
	return "gatehouse: this ledger is open: --as " + actor + " was not checked (gatehouse actors require registers who may do what)\n"
}

// TestLedgerVerbsAreAnAdminsOnARegisteredLedger: backup and restore need
// the admin role (and its token, when required); a workflow is refused
// with exit 21 and nothing is written or replaced.
func TestLedgerVerbsAreAnAdminsOnARegisteredLedger(t *testing.T) {
	e, lead := registeredEnv(t)
	backup := e.ledger + ".bak"
	if r := e.family("ledger", "backup", "--to", backup, "--as", "wf-ack"); r.code != exitNotPermitted || !strings.Contains(r.stderr, "wf-ack may not ledger backup") {
		t.Fatalf("backup by a workflow: exit %d, %s", r.code, r.stderr)
	}
	if _, err := os.Stat(backup); err == nil {
		t.Fatal("a refused backup wrote a file")
	}
	e.mustFamily("ledger", "backup", "--to", backup, "--as", "lead", "--token", lead)
	if r := e.family("ledger", "restore", "--from", backup, "--as", "wf-ack", "--reason", "drill"); r.code != exitNotPermitted {
		t.Fatalf("restore by a workflow: exit %d, %s", r.code, r.stderr)
	}
	// The refusal is a history line past the backup: restoring discards it.
	e.mustFamily("ledger", "restore", "--from", backup, "--as", "lead", "--reason", "drill", "--token", lead, "--discard-newer")
}

package main

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	_ "github.com/mattn/go-sqlite3"
)

// gateEnv is one ledger file and one file:// destination in a temp dir.
type gateEnv struct {
	t      *testing.T
	ledger string
	outbox string
}

func newGateEnv(t *testing.T) *gateEnv {
	t.Helper()
	dir := t.TempDir()
	return &gateEnv{t: t, ledger: filepath.Join(dir, "ledger.db"), outbox: filepath.Join(dir, "outbox")}
}

// result is what one in-process `gatehouse gate …` produced.
type result struct {
	code           int
	stdout, stderr string
}

// gate runs `gatehouse gate <args> --ledger <file>` in-process.
func (e *gateEnv) gate(args ...string) result {
	e.t.Helper()
	var out, errOut bytes.Buffer
	full := append([]string{"gate"}, args...)
	full = append(full, "--ledger", e.ledger)
	code := run(full, &out, &errOut)
	return result{code: code, stdout: out.String(), stderr: errOut.String()}
}

// must runs a verb that has to succeed.
func (e *gateEnv) must(args ...string) result {
	e.t.Helper()
	r := e.gate(args...)
	if r.code != 0 {
		e.t.Fatalf("gate %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r
}

func (e *gateEnv) target() string { return "file://" + e.outbox }

// approved sets up task, proposal and approval for one enquiry, to the
// env's file destination, and returns the action key. owner "" leaves the
// task unowned after approval (it was owned, then released).
func (e *gateEnv) approved(enquiry, owner string, material ...string) string {
	e.t.Helper()
	return e.approvedTo(e.target(), enquiry, owner, material...)
}

// approvedTo is approved with the destination named.
func (e *gateEnv) approvedTo(destination, enquiry, owner string, material ...string) string {
	e.t.Helper()
	task := "task-" + enquiry
	claimer := owner
	if owner == "" {
		claimer = "nobody-yet"
	}
	e.must("claim", "--task", task, "--customer", "cust-42", "--as", claimer)
	key := strings.TrimSpace(e.must("propose", "--as", "ack-workflow", "--task", task,
		"--customer", "cust-42", "--event", enquiry, "--type", "reply_ack", "--target", task,
		"--to", "ada@example.com", "--subject", "We received your enquiry", "--body", "Hello Ada,\nthanks.",
		"--destination", destination).stdout)
	args := []string{"approve", "--key", key, "--as", "bob"}
	for _, m := range material {
		args = append(args, "--material", m)
	}
	e.must(args...)
	if owner == "" {
		e.must("release", "--task", task, "--as", claimer)
	}
	return key
}

func (e *gateEnv) send(key, as string, material ...string) result {
	e.t.Helper()
	args := []string{"send", "--key", key, "--as", as, "--destination", e.target()}
	for _, m := range material {
		args = append(args, "--material", m)
	}
	return e.gate(args...)
}

func (e *gateEnv) emlFiles() []string {
	e.t.Helper()
	files, err := filepath.Glob(filepath.Join(e.outbox, "*.eml"))
	if err != nil {
		e.t.Fatal(err)
	}
	return files
}

func wantExit(t *testing.T, r result, code int, stderrHas ...string) {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", r.code, code, r.stdout, r.stderr)
	}
	for _, s := range stderrHas {
		if !strings.Contains(r.stderr, s) {
			t.Errorf("stderr lacks %q: %s", s, r.stderr)
		}
	}
}

func TestGateSendHappyPathThenDuplicate(t *testing.T) {
	e := newGateEnv(t)
	key := e.approved("enq-1", "alice", "crm.consent=yes")
	if !strings.HasPrefix(key, "gh1:cust-42:enq-1:reply_ack:") {
		t.Fatalf("propose printed %q, want the action key", key)
	}
	wantExit(t, e.send(key, "alice", "crm.consent=yes"), exitOK)
	files := e.emlFiles()
	if len(files) != 1 {
		t.Fatalf("eml files = %v, want one", files)
	}
	raw, _ := os.ReadFile(files[0])
	if !strings.Contains(string(raw), "X-Gatehouse-Action-Key: "+key) {
		t.Errorf("message lacks the action key header:\n%s", raw)
	}
	wantExit(t, e.send(key, "alice", "crm.consent=yes"), exitDuplicate, "already sent")
	if files := e.emlFiles(); len(files) != 1 {
		t.Fatalf("after a duplicate send eml files = %v, want still one", files)
	}
	show := e.must("show", "--key", key)
	for _, want := range []string{"state:", "sent", "attempts (1)", "crm.consent", "matched", "history"} {
		if !strings.Contains(show.stdout, want) {
			t.Errorf("show lacks %q:\n%s", want, show.stdout)
		}
	}
}

func TestGateSendRefusals(t *testing.T) {
	tests := []struct {
		name      string
		owner     string
		setup     func(e *gateEnv)
		reread    string
		code      int
		stderrHas []string
	}{
		{name: "ChangedMaterialIsDenied", owner: "alice", reread: "crm.consent=no",
			code: exitDenied, stderrHas: []string{"crm.consent", `"yes"`, `"no"`}},
		{name: "MissingOwnerIsHeld", owner: "", reread: "crm.consent=yes",
			code: exitHeld, stderrHas: []string{"no owner"}},
		{name: "UnavailableSourceIsHeld", owner: "alice", reread: "crm.consent=?unavailable",
			code: exitHeld, stderrHas: []string{"unavailable"}},
		{name: "NotTheOwnerIsDenied", owner: "carol", reread: "crm.consent=yes",
			code: exitDenied, stderrHas: []string{"owned by carol"}},
		{name: "StoppedIsStopped", owner: "alice", reread: "crm.consent=yes",
			setup: func(e *gateEnv) { e.must("stop", "--as", "ops", "--reason", "incident 12") },
			code:  exitStopped, stderrHas: []string{"stopped", "incident 12"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newGateEnv(t)
			key := e.approved("enq-2", tt.owner, "crm.consent=yes")
			if tt.setup != nil {
				tt.setup(e)
			}
			wantExit(t, e.send(key, "alice", tt.reread), tt.code, tt.stderrHas...)
			if files := e.emlFiles(); len(files) != 0 {
				t.Fatalf("a refused send wrote %v", files)
			}
		})
	}
}

func TestGateSendReportsDestinationOutcome(t *testing.T) {
	tests := []struct {
		target    string
		code      int
		state     string
		stderrHas string
	}{
		{"fake://accept", exitOK, "sent", ""},
		{"fake://not-delivered", exitOther, "approved", "may be retried"},
		{"fake://rejected-temporary", exitOther, "approved", "may be retried"},
		{"fake://rejected-permanent", exitFailed, "failed", "failed permanently"},
		{"fake://unknown", exitUnknown, "unknown", "do not resend"},
	}
	for _, tt := range tests {
		t.Run(strings.TrimPrefix(tt.target, "fake://"), func(t *testing.T) {
			e := newGateEnv(t)
			key := e.approvedTo(tt.target, "enq-fake", "alice")
			r := e.gate("send", "--key", key, "--as", "alice", "--json")
			wantExit(t, r, tt.code, tt.stderrHas)
			var v struct {
				State    string `json:"state"`
				ExitCode int    `json:"exit_code"`
			}
			decodeOne(t, r.stdout, &v)
			if v.State != tt.state || v.ExitCode != tt.code {
				t.Errorf("send --json = %+v, want state %s exit_code %d", v, tt.state, tt.code)
			}
		})
	}
}

func TestGateJSONOutputParses(t *testing.T) {
	e := newGateEnv(t)
	key := e.approved("enq-3", "alice")
	var sent struct {
		Key      string `json:"key"`
		State    string `json:"state"`
		Outcome  string `json:"outcome"`
		Attempt  int    `json:"attempt"`
		ExitCode int    `json:"exit_code"`
	}
	r := e.gate("send", "--key", key, "--as", "alice", "--destination", e.target(), "--json")
	decodeOne(t, r.stdout, &sent)
	if sent.Key != key || sent.State != "sent" || sent.Outcome != "accepted" || sent.Attempt != 1 || sent.ExitCode != 0 {
		t.Fatalf("send --json = %+v", sent)
	}
	var dup struct {
		State    string `json:"state"`
		ExitCode int    `json:"exit_code"`
		Error    string `json:"error"`
	}
	r = e.gate("send", "--key", key, "--as", "alice", "--destination", e.target(), "--json")
	decodeOne(t, r.stdout, &dup)
	if r.code != exitDuplicate || dup.ExitCode != exitDuplicate || dup.State != "sent" || dup.Error == "" {
		t.Fatalf("duplicate send --json = %+v (exit %d)", dup, r.code)
	}
	var show struct {
		Action   struct{ Key, State string } `json:"action"`
		Attempts []struct {
			TransportID string `json:"transport_id"`
		} `json:"attempts"`
		History []struct{ Message string } `json:"history"`
	}
	decodeOne(t, e.must("show", "--key", key, "--json").stdout, &show)
	if show.Action.Key != key || len(show.Attempts) != 1 || show.Attempts[0].TransportID == "" || len(show.History) == 0 {
		t.Fatalf("show --json = %+v", show)
	}
	var list struct {
		Total   int `json:"total"`
		Actions []struct {
			Key string `json:"key"`
		} `json:"actions"`
	}
	decodeOne(t, e.must("list", "--state", "sent", "--json").stdout, &list)
	if list.Total != 1 || len(list.Actions) != 1 || list.Actions[0].Key != key {
		t.Fatalf("list --json = %+v", list)
	}
	var m struct {
		Intended        int `json:"intended"`
		Attempts        int `json:"attempts"`
		Confirmed       int `json:"confirmed"`
		DuplicateBlocks int `json:"duplicate_blocks"`
	}
	decodeOne(t, e.must("metrics", "--json").stdout, &m)
	if m.Intended != 1 || m.Attempts != 1 || m.Confirmed != 1 || m.DuplicateBlocks != 1 {
		t.Fatalf("metrics --json = %+v", m)
	}
}

// decodeOne checks that s is exactly one JSON object and decodes it.
func decodeOne(t *testing.T, s string, v any) {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, s)
	}
	if dec.More() {
		t.Fatalf("more than one JSON value:\n%s", s)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		t.Fatalf("decode: %v\n%s", err, s)
	}
}

func TestGateUsageErrors(t *testing.T) {
	t.Setenv(ledgerEnv, "")
	dir := t.TempDir()
	db := filepath.Join(dir, "ledger.db")
	key := "gh1:cust-42:enq-1:reply_ack:task-1:r0"
	tests := []struct {
		name string
		args []string
	}{
		{"NoVerb", []string{"gate", "--ledger", db}},
		{"UnknownVerb", []string{"gate", "frobnicate", "--ledger", db}},
		{"UnknownFlag", []string{"gate", "show", "--ledger", db, "--key", key, "--colour"}},
		{"MissingLedger", []string{"gate", "show", "--key", key}},
		{"MissingActor", []string{"gate", "send", "--ledger", db, "--key", key, "--destination", "file://" + dir}},
		{"MissingKey", []string{"gate", "approve", "--ledger", db, "--as", "bob"}},
		{"KeyAndFacts", []string{"gate", "approve", "--ledger", db, "--as", "bob", "--key", key, "--customer", "c"}},
		{"BadKey", []string{"gate", "show", "--ledger", db, "--key", "not-a-key"}},
		{"BadMaterialNoEquals", []string{"gate", "approve", "--ledger", db, "--as", "bob", "--key", key, "--material", "consent"}},
		{"BadMaterialNoSource", []string{"gate", "approve", "--ledger", db, "--as", "bob", "--key", key, "--material", "consent=yes"}},
		{"BadRevision", []string{"gate", "propose", "--ledger", db, "--as", "wf", "--revision", "one"}},
		{"NegativeRevision", []string{"gate", "propose", "--ledger", db, "--as", "wf", "--task", "t", "--customer", "c",
			"--event", "e", "--type", "x", "--target", "t", "--to", "a@b", "--revision", "-1"}},
		{"ProposeMissingFacts", []string{"gate", "propose", "--ledger", db, "--as", "wf", "--task", "t", "--to", "a@b"}},
		{"BodyAndBodyFile", []string{"gate", "propose", "--ledger", db, "--as", "wf", "--task", "t", "--customer", "c",
			"--event", "e", "--type", "x", "--target", "t", "--to", "a@b", "--body", "x", "--body-file", "-"}},
		{"ProposeWithoutDestination", []string{"gate", "propose", "--ledger", db, "--as", "wf", "--task", "t", "--customer", "c",
			"--event", "e", "--type", "x", "--target", "t", "--to", "a@example.com"}},
		{"SendBadDestinationScheme", []string{"gate", "send", "--ledger", db, "--as", "alice", "--key", key, "--destination", "ftp://x"}},
		{"ReconcileMovedWithoutDestination", []string{"gate", "reconcile", "--ledger", db, "--as", "ops", "--key", key, "--destination-moved"}},
		{"HoldWithoutReason", []string{"gate", "hold", "--ledger", db, "--as", "ops", "--key", key}},
		{"StopWithoutReason", []string{"gate", "stop", "--ledger", db, "--as", "ops"}},
		{"BadState", []string{"gate", "list", "--ledger", db, "--state", "lost"}},
		{"BadLimit", []string{"gate", "list", "--ledger", db, "--limit", "0"}},
		{"PositionalArgument", []string{"gate", "show", "--ledger", db, key}},
		{"ResolveWithoutOutcome", []string{"gate", "resolve", "--ledger", db, "--as", "ops", "--key", key, "--reason", "checked"}},
		{"ClaimWithoutTask", []string{"gate", "claim", "--ledger", db, "--as", "alice"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := run(tt.args, &out, &errOut)
			if code != exitUsage {
				t.Fatalf("exit %d, want %d; stderr: %s", code, exitUsage, errOut.String())
			}
			msg := errOut.String()
			if !strings.HasPrefix(msg, "gatehouse: ") || strings.Count(msg, "\n") != 1 || !strings.HasSuffix(msg, "\n") {
				t.Fatalf("stderr is not one line `gatehouse: <reason>`: %q", msg)
			}
			if out.Len() != 0 {
				t.Errorf("a usage error printed on stdout: %q", out.String())
			}
			if _, err := os.Stat(db); err == nil {
				t.Fatalf("a usage error created the ledger file")
			}
		})
	}
}

func TestGateRefusesCorruptLedger(t *testing.T) {
	tests := []struct {
		name    string
		content []byte
	}{
		{"NotSQLite", []byte("this is a spreadsheet, not a ledger\n")},
		{"TruncatedHeader", []byte("SQLite fo")},
		{"SQLiteHeaderGarbageBody", append([]byte("SQLite format 3\x00"), bytes.Repeat([]byte{0xAB}, 4096)...)},
		{"AnotherApplicationsDatabase", foreignSQLite(t)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newGateEnv(t)
			if err := os.WriteFile(e.ledger, tt.content, 0o644); err != nil {
				t.Fatal(err)
			}
			for _, args := range [][]string{
				{"show", "--key", "gh1:c:e:t:x:r0"},
				{"claim", "--task", "t-1", "--as", "alice"},
			} {
				r := e.gate(args...)
				wantExit(t, r, exitOther, e.ledger)
				if strings.Count(r.stderr, "\n") != 1 {
					t.Errorf("stderr is not one line: %q", r.stderr)
				}
			}
			got, err := os.ReadFile(e.ledger)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, tt.content) {
				t.Fatalf("the ledger file was modified")
			}
			for _, side := range []string{"-wal", "-shm", "-journal"} {
				if _, err := os.Stat(e.ledger + side); err == nil {
					t.Errorf("%s was created next to the refused file", side)
				}
			}
		})
	}
}

// foreignSQLite returns the bytes of a valid SQLite file that is not a ledger.
func foreignSQLite(t *testing.T) []byte {
	t.Helper()
	path := filepath.Join(t.TempDir(), "crm.db")
	db, err := sql.Open("sqlite3", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE customers (id TEXT PRIMARY KEY, consent TEXT); INSERT INTO customers VALUES ('c1', 'yes')`); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestGateReadVerbsRefuseMissingLedger(t *testing.T) {
	e := newGateEnv(t)
	for _, args := range [][]string{{"metrics"}, {"list"}, {"history"}, {"show", "--key", "gh1:c:e:t:x:r0"}} {
		wantExit(t, e.gate(args...), exitOther, "no ledger at")
	}
	if _, err := os.Stat(e.ledger); err == nil {
		t.Fatal("a read verb created the ledger")
	}
}

func TestGateTakeoverCorrectionAndComplete(t *testing.T) {
	e := newGateEnv(t)
	key := e.approved("enq-5", "alice")
	wantExit(t, e.gate("claim", "--task", "task-enq-5", "--as", "carol"), exitDenied, "owned by alice")
	e.must("view", "--task", "task-enq-5", "--as", "carol")
	var shown struct {
		Task struct{ Owner string } `json:"task"`
	}
	decodeOne(t, e.must("show", "--key", key, "--json").stdout, &shown)
	if shown.Task.Owner != "alice" {
		t.Fatalf("viewing changed the owner to %q", shown.Task.Owner)
	}
	wantExit(t, e.gate("complete", "--task", "task-enq-5", "--as", "alice"), exitOther, "without an outcome")
	e.must("takeover", "--task", "task-enq-5", "--as", "carol", "--reason", "alice is on leave")
	if n := e.must("notifications", "--as", "alice").stdout; !strings.Contains(n, "carol took over task task-enq-5") {
		t.Fatalf("alice was not notified:\n%s", n)
	}
	// Approved under alice, sent by carol: the owner changed since approval.
	wantExit(t, e.send(key, "carol"), exitDenied, "helpdesk.owner")
	e.must("approve", "--key", key, "--as", "bob")
	wantExit(t, e.send(key, "carol"), exitOK)
	fixed := strings.TrimSpace(e.must("correct", "--key", key, "--as", "carol", "--reason", "wrong date",
		"--subject", "Correction", "--body", "The right date is Monday.").stdout)
	if !strings.HasSuffix(fixed, ":r1") {
		t.Fatalf("correction key = %q, want revision r1", fixed)
	}
	wantExit(t, e.gate("approve", "--key", fixed, "--as", "carol"), exitDenied, "someone other than carol")
	e.must("approve", "--key", fixed, "--as", "bob")
	wantExit(t, e.send(fixed, "carol"), exitOK)
	e.must("complete", "--task", "task-enq-5", "--as", "carol")
	if n := len(e.emlFiles()); n != 2 {
		t.Fatalf("%d messages, want the original and its correction", n)
	}
}

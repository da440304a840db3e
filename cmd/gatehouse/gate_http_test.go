package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestProposeARequestAndShowTheWrite: a refund proposed from a request
// file, approved and sent through the CLI; `show` prints the write itself
// (method, path, headers, indented body) and the attempt's exact bytes,
// not prose; the same request given as --method/--path/--header/--body-file
// in another format is the same action with the same digest, so the
// approval holds; and what a request cannot have is refused at the door.
func TestProposeARequestAndShowTheWrite(t *testing.T) {
	p := startPhaseProvider(t, httpPhase{status: 201, body: `{"id": "re_77", "object": "refund"}`})
	dest := "http://" + p.ln.Addr().String() + "?dup=idempotency-key&ref=metadata.gatehouse_key&search=/v1/refunds"
	e := newGateEnv(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "refund.json")
	os.WriteFile(file, []byte(`{"method": "POST", "path": "/v1/refunds", "headers": {"stripe-version": "2026-01-28"},
		"body": {"payment": "pay_1", "amount": 1250, "currency": "eur"}}`), 0o644)
	body := filepath.Join(dir, "body.json")
	os.WriteFile(body, []byte("{\n \"currency\": \"eur\",\n \"amount\": 1250,\n \"payment\": \"pay_1\"\n}\n"), 0o644)
	facts := []string{"--task", "task-9", "--customer", "cust-42", "--event", "return-88", "--type", "refund", "--target", "order-1001"}
	e.must("claim", "--task", "task-9", "--customer", "cust-42", "--as", "wf-refund")
	key := strings.TrimSpace(e.must(append([]string{"propose", "--as", "wf-refund", "--destination", dest, "--request-file", file}, facts...)...).stdout)
	e.must("approve", "--key", key, "--as", "lead", "--material", "payments.payment_state=captured")

	again := e.must(append([]string{"propose", "--as", "wf-refund", "--destination", dest, "--method", "post", "--path", "/v1/refunds",
		"--header", "Stripe-Version: 2026-01-28", "--body-file", body, "--json"}, facts...)...)
	var a struct {
		Key   string `json:"key"`
		State string `json:"state"`
	}
	if err := json.Unmarshal([]byte(again.stdout), &a); err != nil || a.Key != key || a.State != "approved" {
		t.Fatalf("the same request by flags: %s (%v), want %s still approved", again.stdout, err, key)
	}

	if r := e.gate("send", "--key", key, "--as", "wf-refund", "--material", "payments.payment_state=captured"); r.code != exitOK {
		t.Fatalf("send: exit %d: %s", r.code, r.stderr)
	}
	show := e.must("show", "--key", key).stdout
	if !regexp.MustCompile(`request: +POST /v1/refunds`).MatchString(show) {
		t.Errorf("show lacks the request line:\n%s", show)
	}
	for _, want := range []string{"  Stripe-Version: 2026-01-28", `    "amount": 1250,`,
		"duplicate control:", "dup=idempotency-key", "id re_77", "    | POST /v1/refunds HTTP/1.1", "    | Idempotency-Key: gh_",
		`"gatehouse_key":"` + key + `"`} {
		if !strings.Contains(show, want) {
			t.Errorf("show lacks %q:\n%s", want, show)
		}
	}
	if strings.Contains(show, "subject:") {
		t.Errorf("show of a request shows a subject:\n%s", show)
	}

	refused := map[string][]string{
		"a subject":            {"--request-file", file, "--subject", "Refund"},
		"a file and flags":     {"--request-file", file, "--method", "POST"},
		"a message body":       {"--body", "hello"},
		"a gate header":        {"--method", "POST", "--path", "/v1/refunds", "--header", "Idempotency-Key: mine", "--body-file", body},
		"a read":               {"--method", "GET", "--path", "/v1/refunds", "--body-file", body},
		"a message to smtp":    {"--request-file", file, "--destination", "smtp://127.0.0.1:25"},
		"no duplicate control": {"--request-file", file, "--destination", "http://" + p.ln.Addr().String()},
	}
	for what, args := range refused {
		full := append([]string{"propose", "--as", "wf-refund", "--task", "task-9", "--customer", "cust-42", "--event", "e-" + strings.ReplaceAll(what, " ", "-"),
			"--type", "refund", "--target", "order-1001"}, args...)
		if !contains(args, "--destination") {
			full = append(full, "--destination", dest)
		}
		if r := e.gate(full...); r.code != exitUsage {
			t.Errorf("%s: exit %d (%s), want %d", what, r.code, r.stderr, exitUsage)
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"gatehouse/destination/httpdest"
	"gatehouse/fakes"
)

// TestProviderCredentialsComeFromTheEnvironment: a refund to a provider
// that wants an Authorization field gets it from
// $GATEHOUSE_HTTP_AUTHORIZATION on its write and on the reconciling
// search, while nothing the gate records or prints carries it: not the
// attempt's recorded bytes, not the ledger file or its WAL, not any
// verb's output, text or JSON. A value that could smuggle a second field
// onto the wire is refused, unquoted.
func TestProviderCredentialsComeFromTheEnvironment(t *testing.T) {
	const secret = "sk_test_Sekr1tCredential"
	t.Setenv(httpdest.AuthorizationEnv, "Bearer "+secret)
	pay := fakes.NewPayments(nil, fakes.PaymentsOptions{})
	var mu sync.Mutex
	seen := map[string][]string{}
	h := pay.Handler()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.Method] = append(seen[r.Method], r.Header.Get("Authorization"))
		mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { pay.Close(); srv.Close() })
	dest := srv.URL + "?dup=reference&ref=metadata.gatehouse_key&search=/v1/refunds"

	e := newGateEnv(t)
	file := filepath.Join(t.TempDir(), "refund.json")
	os.WriteFile(file, []byte(`{"method": "POST", "path": "/v1/refunds", "body": {"payment": "pay_1", "amount": 1250, "currency": "eur"}}`), 0o644)
	var printed strings.Builder
	do := func(args ...string) result {
		r := e.gate(args...)
		printed.WriteString(r.stdout + r.stderr)
		return r
	}
	do("claim", "--task", "task-9", "--customer", "cust-42", "--as", "wf-refund")
	key := strings.TrimSpace(do("propose", "--as", "wf-refund", "--destination", dest, "--request-file", file, "--task", "task-9",
		"--customer", "cust-42", "--event", "return-88", "--type", "refund", "--target", "order-1001").stdout)
	do("approve", "--key", key, "--as", "lead")
	// The provider makes the refund and drops its answer: the send is
	// unknown, and the reconcile searches the provider's records.
	if err := pay.QueueFault(fakes.PaymentsFault{Kind: fakes.PayCommitThenDrop}); err != nil {
		t.Fatal(err)
	}
	if r := do("send", "--key", key, "--as", "wf-refund"); r.code == exitOK {
		t.Fatalf("send with its answer dropped: exit 0: %s", r.stdout)
	}
	if r := do("reconcile", "--key", key, "--as", "ops"); r.code != exitOK {
		t.Fatalf("reconcile: exit %d: %s", r.code, r.stderr)
	}
	for _, json := range []string{"", "--json"} {
		do("show", "--key", key, json)
		do("history", json)
		do("reconcile", "--key", key, "--as", "ops", json)
	}
	mu.Lock()
	posts, gets := seen[http.MethodPost], seen[http.MethodGet]
	mu.Unlock()
	if len(posts) != 1 || posts[0] != "Bearer "+secret {
		t.Errorf("the provider's writes carried %q, want one with the credential", posts)
	}
	if len(gets) == 0 || gets[0] != "Bearer "+secret {
		t.Errorf("the reconciling searches carried %q, want the credential", gets)
	}
	if out := printed.String(); strings.Contains(out, secret) || strings.Contains(out, "Authorization") {
		t.Errorf("a verb printed the credential or its field:\n%s", out)
	}
	for _, f := range []string{e.ledger, e.ledger + "-wal"} {
		b, err := os.ReadFile(f)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		if strings.Contains(string(b), secret) {
			t.Errorf("%s holds the credential", filepath.Base(f))
		}
	}

	for _, bad := range []string{"Bearer x\r\nX-Refund-Override: 1", " Bearer x", "Bearer x\n", "Bearer x\x1b[2J", "Bearer x\x7f"} {
		t.Setenv(httpdest.AuthorizationEnv, bad)
		if _, err := httpdest.New(dest); err == nil || !strings.Contains(err.Error(), httpdest.AuthorizationEnv) || strings.Contains(err.Error(), "Bearer x") {
			t.Errorf("%q: %v, want a refusal naming the variable and not its value", bad, err)
		}
	}
}

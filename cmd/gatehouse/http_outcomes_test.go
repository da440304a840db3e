package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"gatehouse/destination"
	"gatehouse/destination/httpdest"
	"gatehouse/destination/registry"
	"gatehouse/ledger"
)

// httpPhase is where a loopback provider fails, or what it answers.
type httpPhase struct {
	name   string
	reset  bool // accept and reset before reading anything
	drop   bool // read the whole request, close without a word
	status int
	body   string
}

var httpPhases = []httpPhase{
	{name: "connection refused"},
	{name: "closed before the request is read", reset: true},
	{name: "request written, no response", drop: true},
	{name: "2xx", status: 201, body: `{"id": "re_0123", "object": "refund"}`},
	{name: "409 concurrent request", status: 409, body: `{"error": {"type": "concurrent_request"}}`},
	{name: "422 key reused with another body", status: 422, body: `{"error": {"type": "idempotency_error"}}`},
	{name: "other 4xx", status: 400, body: `{"error": {"type": "invalid_request_error"}}`},
	{name: "429", status: 429, body: `{"error": {"type": "rate_limit_error"}}`},
	{name: "5xx", status: 500, body: `{"error": {"type": "api_error"}}`},
}

var httpProfiles = []struct{ name, query string }{
	{"idempotency-key", "dup=idempotency-key"},
	{"idempotency-key, stores 5xx", "dup=idempotency-key&stores5xx=true&ref=metadata.gatehouse_key&search=/v1/refunds"},
	{"reference", "dup=reference&ref=metadata.gatehouse_key&search=/v1/refunds&lag=30s"},
	{"none", "dup=none"},
}

// phaseProvider fails its writes at one phase; its search finds nothing.
type phaseProvider struct {
	ln    net.Listener
	phase httpPhase
	reset chan struct{}
}

func startPhaseProvider(t *testing.T, ph httpPhase) *phaseProvider {
	p := &phaseProvider{phase: ph, reset: make(chan struct{}, 1)}
	p.ln = serveLoopback(t, p.handle)
	return p
}

// serveLoopback listens on a loopback port and hands each connection to
// handle, until the test ends.
func serveLoopback(t *testing.T, handle func(net.Conn)) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go handle(c)
		}
	}()
	return ln
}

func (p *phaseProvider) handle(c net.Conn) {
	defer c.Close()
	if p.phase.reset {
		c.(*net.TCPConn).SetLinger(0)
		c.Close()
		p.reset <- struct{}{}
		return
	}
	req, err := http.ReadRequest(bufio.NewReader(c))
	if err != nil {
		return
	}
	if _, err := io.ReadAll(req.Body); err != nil {
		return
	}
	status, body := p.phase.status, p.phase.body
	switch {
	case req.Method == http.MethodGet:
		status, body = 200, `{"object": "list", "data": []}`
	case p.phase.drop:
		return
	}
	fmt.Fprintf(c, "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		status, http.StatusText(status), len(body), body)
}

// TestHTTPOutcomeTable drives every cell of the outcome table, profile ×
// phase, against a real loopback provider failing at that phase, through
// the gate: the state a send leaves, its exit code, and what a
// reconciliation right after it does. The table is
// testdata/http_outcomes.md, and docs/destinations.md quotes it whole.
func TestHTTPOutcomeTable(t *testing.T) {
	var out bytes.Buffer
	out.WriteString("| phase |")
	for _, p := range httpProfiles {
		out.WriteString(" " + p.name + " |")
	}
	out.WriteString("\n| --- |" + strings.Repeat(" --- |", len(httpProfiles)) + "\n")
	for _, ph := range httpPhases {
		out.WriteString("| " + ph.name + " |")
		for _, pr := range httpProfiles {
			out.WriteString(" " + outcomeCell(t, ph, pr.query) + " |")
		}
		out.WriteString("\n")
	}
	golden := filepath.Join("testdata", "http_outcomes.md")
	if updating() {
		if err := os.WriteFile(golden, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out.Bytes(), want) {
		t.Fatalf("the outcome table changed (-update to accept):\n%s\nwant:\n%s", out.Bytes(), want)
	}
	doc, err := os.ReadFile("../../docs/destinations.md")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(doc, want) {
		t.Errorf("docs/destinations.md does not quote testdata/http_outcomes.md")
	}
}

// outcomeCell is one cell: "state · exit code", and for an open outcome
// "→ state after reconcile · its exit code".
func outcomeCell(t *testing.T, ph httpPhase, query string) string {
	t.Helper()
	ctx := context.Background()
	p := startPhaseProvider(t, ph)
	addr := "http://" + p.ln.Addr().String()
	if ph.name == "connection refused" {
		p.ln.Close()
	}
	d, err := httpdest.New(addr + "?" + query)
	if err != nil {
		t.Fatal(err)
	}
	if ph.reset {
		d.Pause = func(_ context.Context, at httpdest.Phase) {
			if at == httpdest.PhaseConnected {
				<-p.reset
			}
		}
	}
	l, err := ledger.Open(filepath.Join(t.TempDir(), "ledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	req, _ := destination.ParseRequest([]byte(`{"method": "POST", "path": "/v1/refunds", "body": {"payment": "pay_1", "amount": 1250, "currency": "eur"}}`))
	canon, _ := req.Canonical()
	ep := destination.EndpointOf(d)
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(l.Claim(ctx, ledger.TaskRef{ID: "t1"}, "wf"))
	a, err := l.Propose(ctx, ledger.Proposal{Task: ledger.TaskRef{ID: "t1"}, Customer: "c1", Event: "e1", ActionType: "refund", Target: "o1",
		Destination: ep.Destination, Lookup: ep.Lookup, Request: canon, Actor: "wf"})
	must(a, err)
	must(l.Approve(ctx, a.Key, "lead", nil))
	res, err := l.Execute(ctx, ledger.ExecuteRequest{Key: a.Key, Executor: "wf"}, d)
	cell := stateOf(res.Action) + " · " + fmt.Sprint(codeOf(err))
	if !res.Action.OutcomeOpen() {
		return cell
	}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	after, err := l.Reconcile(rctx, ledger.ReconcileRequest{Key: a.Key, Actor: "wf", Open: registry.Records()})
	return cell + " → " + stateOf(after) + " · " + fmt.Sprint(codeOf(err))
}

func codeOf(err error) int {
	if err == nil {
		return exitOK
	}
	return exitCode(err)
}

func stateOf(a ledger.Action) string {
	if a.HoldCause != "" {
		return fmt.Sprintf("%s (%s)", a.State, a.HoldCause)
	}
	return string(a.State)
}

// earlyProvider makes a refund as soon as it has read a request's header
// fields and the start of its body (where the gate's reference sits),
// answers 201 with the refund and closes, the rest of the body unread: a
// provider that acts before the request's last byte. Its search finds the
// refunds it made.
type earlyProvider struct {
	ln      net.Listener
	mu      sync.Mutex
	refunds []map[string]any
}

func startEarlyProvider(t *testing.T) *earlyProvider {
	t.Helper()
	p := &earlyProvider{}
	p.ln = serveLoopback(t, p.handle)
	return p
}

var earlyRef = regexp.MustCompile(`"gatehouse_key":"([^"]*)","gatehouse_ref":"([^"]*)"`)

func (p *earlyProvider) handle(c net.Conn) {
	defer c.Close() // with the body unread: the connection is reset
	c.(*net.TCPConn).SetReadBuffer(16 << 10)
	br := bufio.NewReader(c)
	req, err := http.ReadRequest(br)
	if err != nil {
		return
	}
	status, body := http.StatusOK, []byte(`{"object": "list", "data": []}`)
	if req.Method == http.MethodGet {
		p.mu.Lock()
		var found []map[string]any
		for _, r := range p.refunds {
			if r["metadata"].(map[string]any)["gatehouse_key"] == req.URL.Query().Get("metadata[gatehouse_key]") {
				found = append(found, r)
			}
		}
		body, _ = json.Marshal(map[string]any{"object": "list", "data": found})
		p.mu.Unlock()
	} else {
		head := make([]byte, 64<<10)
		n, _ := io.ReadFull(req.Body, head)
		m := earlyRef.FindSubmatch(head[:n])
		if m == nil {
			return
		}
		p.mu.Lock()
		refund := map[string]any{"id": fmt.Sprintf("re_%d", len(p.refunds)+1), "object": "refund", "amount": 1250, "currency": "eur",
			"metadata": map[string]any{"gatehouse_key": string(m[1]), "gatehouse_ref": string(m[2])}}
		p.refunds = append(p.refunds, refund)
		p.mu.Unlock()
		status, body = http.StatusCreated, must1(json.Marshal(refund))
	}
	fmt.Fprintf(c, "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		status, http.StatusText(status), len(body), body)
}

func (p *earlyProvider) made() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.refunds)
}

func must1[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestEarlyAnswerIsEvidence: a provider that answers 201 with its refund's
// id after reading only the start of a large request, and closes, has
// acted although the gate never handed over the last byte. The send is
// unknown (exit 14) naming the id, never "not delivered; may be retried":
// a workflow that retries what may be retried sends once, the reconcile
// finds the refund in the provider's records (sent), a later send is
// already sent, and the provider holds one refund.
func TestEarlyAnswerIsEvidence(t *testing.T) {
	p := startEarlyProvider(t)
	dest := "http://" + p.ln.Addr().String() + "?dup=reference&ref=metadata.gatehouse_key&search=/v1/refunds"
	file := filepath.Join(t.TempDir(), "refund.json")
	// 8 MiB of notes: more than the sockets between gate and provider hold.
	os.WriteFile(file, []byte(`{"method": "POST", "path": "/v1/refunds", "body": {"payment": "pay_1", "amount": 1250, "currency": "eur", "notes": "`+
		strings.Repeat("n", 8<<20)+`"}}`), 0o644)
	e := newGateEnv(t)
	e.must("claim", "--task", "task-9", "--customer", "cust-42", "--as", "wf-refund")
	key := strings.TrimSpace(e.must("propose", "--as", "wf-refund", "--destination", dest, "--request-file", file, "--task", "task-9",
		"--customer", "cust-42", "--event", "return-88", "--type", "refund", "--target", "order-1001").stdout)
	e.must("approve", "--key", key, "--as", "lead")
	var sends []result
	for len(sends) < 3 {
		r := e.gate("send", "--key", key, "--as", "wf-refund")
		sends = append(sends, r)
		if r.code == exitUnknown || r.code == exitOK || r.code == exitDuplicate {
			break
		}
	}
	first := sends[0]
	if len(sends) != 1 || first.code != exitUnknown || !strings.Contains(first.stdout+first.stderr, "re_1") {
		t.Fatalf("%d send(s), the first exit %d: %s%s\nwant one send, unknown (exit %d) naming re_1; the provider made %d refund(s)",
			len(sends), first.code, first.stdout, first.stderr, exitUnknown, p.made())
	}
	if r := e.gate("reconcile", "--key", key, "--as", "ops"); r.code != exitOK || !strings.Contains(r.stdout, "sent") {
		t.Fatalf("reconcile: exit %d: %s%s", r.code, r.stdout, r.stderr)
	}
	if r := e.gate("send", "--key", key, "--as", "wf-refund"); r.code != exitDuplicate {
		t.Fatalf("a send after the reconcile: exit %d, want %d (already sent): %s%s", r.code, exitDuplicate, r.stdout, r.stderr)
	}
	if n := p.made(); n != 1 {
		t.Fatalf("the provider made %d refunds, want 1", n)
	}
}

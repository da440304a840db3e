package proof_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// outsideProvider is testdata/provider.py running: a refunds provider
// written with Python's standard library alone, outside the project's
// fakes, with idempotency of its own (see the script's docstring).
type outsideProvider struct {
	URL string
	hc  *http.Client
}

// startOutsideProvider runs the provider and waits for the port it prints.
// Without python3 the test is skipped, except under CI, where it fails.
func startOutsideProvider(t *testing.T, args ...string) *outsideProvider {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("python3 is required under CI for the outside provider")
		}
		t.Skip("python3 not installed")
	}
	cmd := exec.Command(py, append([]string{"testdata/provider.py"}, args...)...)
	cmd.Stderr = &lockedTail{}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	port := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		if sc.Scan() {
			port <- sc.Text()
		}
		close(port)
		io.Copy(io.Discard, out)
	}()
	select {
	case p, ok := <-port:
		if _, err := strconv.Atoi(p); !ok || err != nil {
			t.Fatalf("provider.py printed %q, not a port; stderr: %s", p, cmd.Stderr)
		}
		// A connection per request: Go's transport would otherwise re-send
		// a keyed POST by itself when its response is lost (see
		// docs/payments.md), and the test must see the loss.
		return &outsideProvider{URL: "http://127.0.0.1:" + p,
			hc: &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}}
	case <-time.After(30 * time.Second):
		t.Fatalf("provider.py printed no port; stderr: %s", cmd.Stderr)
	}
	return nil
}

// lockedTail keeps what a process writes, for a failure message, safe to
// read while the process still writes.
type lockedTail struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedTail) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedTail) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (o *outsideProvider) post(t *testing.T, path, key string, body []byte) (*http.Response, []byte, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "POST", o.URL+path, strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := o.hc.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, b, err
}

type outsideRecords struct {
	Records []struct {
		ID, Key, Body string
	} `json:"records"`
	Count        int            `json:"count"`
	ByExternalID map[string]int `json:"by_external_id"`
	Requests     int            `json:"requests"`
}

func (o *outsideProvider) records(t *testing.T) outsideRecords {
	t.Helper()
	resp, err := o.hc.Get(o.URL + "/records")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r outsideRecords
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatal(err)
	}
	return r
}

// TestOutsideProviderOneRefundAfterADroppedResponse: the provider written
// outside the project makes exactly one refund when its response to the
// first request is lost and the same bytes are sent again with the same
// key; the reference lookup finds that one refund, and the same key with
// another body is refused without a second.
func TestOutsideProviderOneRefundAfterADroppedResponse(t *testing.T) {
	p := startOutsideProvider(t)
	body := []byte(`{"amount": 1250, "currency": "eur", "payment": "pay_1", "external_id": "ak-refund-1"}`)
	if resp, b, err := p.post(t, "/control/drop-next", "", []byte(`{"count": 1}`)); err != nil || resp.StatusCode != 200 {
		t.Fatalf("arm the drop: %v %s", err, b)
	}
	if resp, b, err := p.post(t, "/refunds", "idem-1", body); err == nil {
		t.Fatalf("the first request was answered %d %s; the provider drops it after the commit", resp.StatusCode, b)
	}
	if r := p.records(t); r.Count != 1 {
		t.Fatalf("%d refunds after the dropped response, want 1 (it committed)", r.Count)
	}
	resp, b, err := p.post(t, "/refunds", "idem-1", body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 201 || resp.Header.Get("Idempotency-Replayed") != "true" {
		t.Fatalf("the retry: %d replayed=%q %s", resp.StatusCode, resp.Header.Get("Idempotency-Replayed"), b)
	}
	var refund struct{ ID, State string }
	if err := json.Unmarshal(b, &refund); err != nil || refund.State != "accepted" {
		t.Fatalf("the retry's answer %s: %v", b, err)
	}
	resp, b, err = p.post(t, "/refunds", "idem-1", []byte(strings.Replace(string(body), "1250", "1350", 1)))
	if err != nil || resp.StatusCode != 422 {
		t.Fatalf("the key with another amount: %v %s", err, b)
	}
	r := p.records(t)
	if r.Count != 1 || r.Records[0].ID != refund.ID || r.Records[0].Key != "idem-1" || r.ByExternalID["ak-refund-1"] != 1 ||
		r.Requests != 3 {
		t.Fatalf("records = %+v; want the one refund %s, three requests", r, refund.ID)
	}
	lookup, err := p.hc.Get(p.URL + "/refunds?external_id=ak-refund-1")
	if err != nil {
		t.Fatal(err)
	}
	defer lookup.Body.Close()
	var found struct{ Refunds []struct{ ID string } }
	if err := json.NewDecoder(lookup.Body).Decode(&found); err != nil || len(found.Refunds) != 1 || found.Refunds[0].ID != refund.ID {
		t.Fatalf("lookup by reference: %+v %v", found, err)
	}
}

// TestOutsideProviderWithoutKeys: the same dropped response at the
// provider run with --no-keys makes a second refund when the request is
// sent again; this is the incident the first test's key prevents, and why
// a gate never re-sends to a provider without keys.
func TestOutsideProviderWithoutKeys(t *testing.T) {
	p := startOutsideProvider(t, "--no-keys")
	body := []byte(`{"amount": 500, "external_id": "ak-refund-2"}`)
	p.post(t, "/control/drop-next", "", []byte(`{}`))
	if _, _, err := p.post(t, "/refunds", "idem-2", body); err == nil {
		t.Fatal("the first request was answered")
	}
	if resp, b, err := p.post(t, "/refunds", "idem-2", body); err != nil || resp.StatusCode != 201 || resp.Header.Get("Idempotency-Replayed") != "" {
		t.Fatalf("the second request: %v %s", err, b)
	}
	if r := p.records(t); r.Count != 2 || r.ByExternalID["ak-refund-2"] != 2 {
		t.Fatalf("records = %+v; want the duplicate, two refunds", r)
	}
}

// TestOutsideProviderWhileProcessing: a request the provider is still
// processing answers 409 to its key, as the IETF draft says, and the
// finished one is replayed afterwards.
func TestOutsideProviderWhileProcessing(t *testing.T) {
	p := startOutsideProvider(t)
	body := []byte(`{"amount": 900, "external_id": "ak-refund-3"}`)
	p.post(t, "/control/hold-next", "", []byte(`{"seconds": 3}`))
	first := make(chan int, 1)
	go func() {
		resp, _, err := p.post(t, "/refunds", "idem-3", body)
		if err != nil {
			first <- -1
			return
		}
		first <- resp.StatusCode
	}()
	// The provider creates the refund before it holds the answer: once the
	// record shows, the request is being processed.
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for deadline := time.After(10 * time.Second); p.records(t).Count == 0; {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatal("the held request never created its refund")
		}
	}
	if resp, b, err := p.post(t, "/refunds", "idem-3", body); err != nil || resp.StatusCode != 409 {
		t.Fatalf("the key while its request runs: %v %s", err, b)
	}
	if code := <-first; code != 201 {
		t.Fatalf("the held request: %d", code)
	}
	if resp, _, err := p.post(t, "/refunds", "idem-3", body); err != nil || resp.Header.Get("Idempotency-Replayed") != "true" {
		t.Fatalf("after it finished: %v", err)
	}
	if r := p.records(t); r.Count != 1 {
		t.Fatalf("%d refunds, want 1", r.Count)
	}
}

package fakes

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// payServer serves a fresh payments fake on loopback. The fake is closed
// before the server, so a held response never blocks the server's Close.
func payServer(t *testing.T, clk *Clock, opts PaymentsOptions) (*Payments, *payClient) {
	t.Helper()
	p := NewPayments(clk, opts)
	srv := httptest.NewServer(p.Handler())
	t.Cleanup(srv.Close)
	t.Cleanup(p.Close)
	// A new connection per request: Go's transport silently re-sends a
	// request that carries an Idempotency-Key when a reused connection
	// fails, and these tests must see each failure themselves.
	return p, &payClient{t: t, url: srv.URL, hc: &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}}
}

type payClient struct {
	t   *testing.T
	url string
	hc  *http.Client
}

type payResp struct {
	code     int
	body     []byte
	replayed bool
	header   http.Header
	err      error // the connection failed: no response
}

func (r payResp) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("answer is not JSON (%v): %s", err, r.body)
	}
	return m
}

func (r payResp) errType(t *testing.T) string {
	t.Helper()
	e, _ := r.json(t)["error"].(map[string]any)
	s, _ := e["type"].(string)
	return s
}

func (c *payClient) do(method, path, key, body string) payResp {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, c.url+path, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return payResp{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return payResp{err: err}
	}
	return payResp{code: resp.StatusCode, body: b, replayed: resp.Header.Get("Idempotent-Replayed") == "true", header: resp.Header}
}

func (c *payClient) refund(key, body string) payResp {
	c.t.Helper()
	return c.do("POST", "/v1/refunds", key, body)
}

const refundBody = `{"payment": "pay_123", "amount": 1250, "currency": "eur", "reason": "late delivery", "metadata": {"gatehouse_key": "k-1", "order": "o-9"}}`

// TestPaymentsIdempotency drives one request sequence per row against a
// fresh fake and checks every answer and the records left at the provider.
func TestPaymentsIdempotency(t *testing.T) {
	reordered := "{\n  \"metadata\": {\"order\": \"o-9\", \"gatehouse_key\": \"k-1\"},\n  \"currency\": \"eur\", \"reason\": \"late delivery\",\n  \"amount\": 1250, \"payment\": \"pay_123\"\n}"
	other := strings.Replace(refundBody, "1250", "1350", 1)
	type call struct {
		key, body string
		advance   time.Duration   // of the fake clock, before the call
		queue     []PaymentsFault // queued before the call
		code      int             // 0: no response at all
		replayed  bool
		errType   string
	}
	for _, tc := range []struct {
		name    string
		opts    PaymentsOptions
		faults  []PaymentsFault
		calls   []call
		records int
	}{
		{name: "same key, same body: the first answer replayed", calls: []call{
			{key: "K", body: refundBody, code: 201},
			{key: "K", body: refundBody, code: 201, replayed: true},
		}, records: 1},
		{name: "same key, body reformatted and reordered: the same request", calls: []call{
			{key: "K", body: refundBody, code: 201},
			{key: "K", body: reordered, code: 201, replayed: true},
		}, records: 1},
		{name: "same key, another amount: idempotency_error", calls: []call{
			{key: "K", body: refundBody, code: 201},
			{key: "K", body: other, code: 422, errType: "idempotency_error"},
		}, records: 1},
		{name: "no key: every request a new refund", calls: []call{
			{body: refundBody, code: 201},
			{body: refundBody, code: 201},
		}, records: 2},
		{name: "no-keys mode ignores the key", opts: PaymentsOptions{Keys: PaymentsNoKeys}, calls: []call{
			{key: "K", body: refundBody, code: 201},
			{key: "K", body: refundBody, code: 201},
			{key: "K", body: other, code: 201},
		}, records: 3},
		{name: "a key is remembered until the window, forgotten at it", opts: PaymentsOptions{Window: time.Hour}, calls: []call{
			{key: "K", body: refundBody, code: 201},
			{key: "K", body: refundBody, advance: time.Hour - time.Second, code: 201, replayed: true},
			{key: "K", body: other, advance: time.Second, code: 201},
			{key: "K", body: other, code: 201, replayed: true},
		}, records: 2},
		{name: "the default window is 24h", calls: []call{
			{key: "K", body: refundBody, code: 201},
			{key: "K", body: refundBody, advance: 24*time.Hour - time.Second, code: 201, replayed: true},
			{key: "K", body: refundBody, advance: time.Second, code: 201},
		}, records: 2},
		{name: "commit then drop: one refund, the retry replays it", faults: []PaymentsFault{{Kind: PayCommitThenDrop}}, calls: []call{
			{key: "K", body: refundBody, code: 0},
			{key: "K", body: refundBody, code: 201, replayed: true},
		}, records: 1},
		{name: "commit then drop without a key: a retry is a second refund", faults: []PaymentsFault{{Kind: PayCommitThenDrop}}, calls: []call{
			{body: refundBody, code: 0},
			{body: refundBody, code: 201},
		}, records: 2},
		{name: "drop before commit: nothing made, the retry executes", faults: []PaymentsFault{{Kind: PayDropBeforeCommit}}, calls: []call{
			{key: "K", body: refundBody, code: 0},
			{key: "K", body: refundBody, code: 201},
		}, records: 1},
		{name: "a stored 500 is the answer for as long as the window lasts", opts: PaymentsOptions{Store5xx: true, Window: time.Hour},
			faults: []PaymentsFault{{Kind: PayError500}}, calls: []call{
				{key: "K", body: refundBody, code: 500, errType: "api_error"},
				{key: "K", body: refundBody, code: 500, replayed: true, errType: "api_error"},
				{key: "K", body: refundBody, advance: 59 * time.Minute, code: 500, replayed: true, errType: "api_error"},
				{key: "K", body: other, code: 422, errType: "idempotency_error"},
				{key: "K", body: refundBody, advance: time.Minute, code: 201},
			}, records: 1},
		{name: "a 500 not stored: the retry executes", faults: []PaymentsFault{{Kind: PayError500}}, calls: []call{
			{key: "K", body: refundBody, code: 500, errType: "api_error"},
			{key: "K", body: refundBody, code: 201},
		}, records: 1},
		{name: "429 is not stored", opts: PaymentsOptions{Store5xx: true}, faults: []PaymentsFault{{Kind: PayError429, Count: 2}}, calls: []call{
			{key: "K", body: refundBody, code: 429, errType: "rate_limit_error"},
			{key: "K", body: refundBody, code: 429, errType: "rate_limit_error"},
			{key: "K", body: refundBody, code: 201},
		}, records: 1},
		{name: "a replay leaves a fault meant for an execution queued", calls: []call{
			{key: "A", body: refundBody, code: 201},
			{key: "A", body: refundBody, queue: []PaymentsFault{{Kind: PayError500}}, code: 201, replayed: true},
			{key: "B", body: refundBody, code: 500},
			{key: "B", body: refundBody, code: 201},
		}, records: 2},
		{name: "a rate limit comes before the key is looked at", calls: []call{
			{key: "A", body: refundBody, code: 201},
			{key: "A", body: refundBody, queue: []PaymentsFault{{Kind: PayError429}}, code: 429},
			{key: "A", body: refundBody, code: 201, replayed: true},
		}, records: 1},
		{name: "validation errors are not stored under the key", calls: []call{
			{key: "K", body: `{"payment": "pay_123", "currency": "eur"}`, code: 400, errType: "invalid_request_error"},
			{key: "K", body: refundBody, code: 201},
		}, records: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := NewClock(t0)
			p, c := payServer(t, clk, tc.opts)
			for _, f := range tc.faults {
				if err := p.QueueFault(f); err != nil {
					t.Fatal(err)
				}
			}
			stored := map[string][]byte{} // the answer each key's replays must repeat
			for i, cl := range tc.calls {
				clk.Advance(cl.advance)
				for _, f := range cl.queue {
					if err := p.QueueFault(f); err != nil {
						t.Fatal(err)
					}
				}
				r := c.refund(cl.key, cl.body)
				if cl.code == 0 {
					if r.err == nil {
						t.Fatalf("call %d: answered %d %s; want the connection dropped", i, r.code, r.body)
					}
					continue
				}
				if r.err != nil {
					t.Fatalf("call %d: %v", i, r.err)
				}
				if r.code != cl.code || r.replayed != cl.replayed {
					t.Fatalf("call %d: %d replayed=%v %s; want %d replayed=%v", i, r.code, r.replayed, r.body, cl.code, cl.replayed)
				}
				if cl.errType != "" && r.errType(t) != cl.errType {
					t.Fatalf("call %d: error type %q, want %q (%s)", i, r.errType(t), cl.errType, r.body)
				}
				switch {
				case r.replayed && stored[cl.key] != nil && !bytes.Equal(stored[cl.key], r.body):
					t.Fatalf("call %d: the replay differs from the stored answer:\n%s\n%s", i, stored[cl.key], r.body)
				case !r.replayed && (r.code == 201 || r.code == 500):
					stored[cl.key] = r.body
				}
			}
			recs := p.Records()
			if len(recs.Records) != tc.records || recs.PerKey["k-1"] != tc.records {
				t.Fatalf("%d records (per_key %v), want %d", len(recs.Records), recs.PerKey, tc.records)
			}
		})
	}
}

// TestPaymentsReplayIsByteForByte: a replay is the stored answer exactly,
// and a commit_then_drop's refund is the one a retry with its key finds.
func TestPaymentsReplayIsByteForByte(t *testing.T) {
	p, c := payServer(t, NewClock(t0), PaymentsOptions{})
	p.QueueFault(PaymentsFault{Kind: PayCommitThenDrop})
	if r := c.refund("K", refundBody); r.err == nil {
		t.Fatalf("commit_then_drop answered %d", r.code)
	}
	recs := p.Records()
	if len(recs.Records) != 1 || recs.Records[0].IdempotencyKey != "K" {
		t.Fatalf("records after the drop: %+v", recs.Records)
	}
	r1 := c.refund("K", refundBody)
	r2 := c.refund("K", refundBody)
	if !r1.replayed || !bytes.Equal(r1.body, r2.body) {
		t.Fatalf("replays differ or not marked:\n%s\n%s", r1.body, r2.body)
	}
	got := r1.json(t)
	want := recs.Records[0].Refund
	if got["id"] != want.ID || !strings.HasPrefix(want.ID, "re_") || len(want.ID) != 3+24 {
		t.Fatalf("replayed id %v, record %q", got["id"], want.ID)
	}
	if got["created"] != "2026-03-02T09:00:00Z" || got["status"] != "succeeded" || got["amount"] != 1250.0 ||
		got["metadata"].(map[string]any)["order"] != "o-9" {
		t.Fatalf("refund = %v", got)
	}
	if g := c.do("GET", "/v1/refunds/"+want.ID, "", ""); g.code != 200 || g.json(t)["id"] != want.ID {
		t.Fatalf("GET by id: %d %s", g.code, g.body)
	}
	if g := c.do("GET", "/v1/refunds/re_nothing", "", ""); g.code != 404 || g.errType(t) != "resource_missing" {
		t.Fatalf("GET unknown id: %d %s", g.code, g.body)
	}
}

// TestPaymentsConcurrentSameKey: requests racing with one key make one
// refund; each is answered 201 (first or replayed) or 409.
func TestPaymentsConcurrentSameKey(t *testing.T) {
	p, c := payServer(t, nil, PaymentsOptions{})
	const n = 16
	var wg sync.WaitGroup
	resps := make([]payResp, n)
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			resps[i] = c.refund("K", refundBody)
		}()
	}
	close(start)
	wg.Wait()
	firsts, ids := 0, map[any]bool{}
	for i, r := range resps {
		switch {
		case r.err != nil:
			t.Fatalf("request %d: %v", i, r.err)
		case r.code == 201 && !r.replayed:
			firsts++
			ids[r.json(t)["id"]] = true
		case r.code == 201:
			ids[r.json(t)["id"]] = true
		case r.code == 409 && r.errType(t) == "concurrent_request":
		default:
			t.Fatalf("request %d: %d %s", i, r.code, r.body)
		}
	}
	if firsts != 1 || len(ids) != 1 || len(p.Records().Records) != 1 {
		t.Fatalf("%d first answers, %d refund ids, %d records; want 1, 1, 1", firsts, len(ids), len(p.Records().Records))
	}
}

// TestPaymentsWhileBeingProcessed: a request held by a delay is being
// processed: its key answers 409 (and 422 for another body) until the
// response is written, then replays it.
func TestPaymentsWhileBeingProcessed(t *testing.T) {
	p, c := payServer(t, nil, PaymentsOptions{})
	p.QueueFault(PaymentsFault{Kind: PayDelay}) // until released
	first := make(chan payResp, 1)
	go func() { first <- c.refund("K", refundBody) }()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.WaitHeld(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if n := len(p.Records().Records); n != 1 {
		t.Fatalf("%d records while the response is held; the refund is created first", n)
	}
	if r := c.refund("K", refundBody); r.code != 409 || r.errType(t) != "concurrent_request" {
		t.Fatalf("same key while processing: %d %s", r.code, r.body)
	}
	if r := c.refund("K", strings.Replace(refundBody, "1250", "1", 1)); r.code != 422 {
		t.Fatalf("another body while processing: %d %s", r.code, r.body)
	}
	if r := c.refund("other", strings.Replace(refundBody, "k-1", "k-2", 1)); r.code != 201 {
		t.Fatalf("another key while one is held: %d %s", r.code, r.body)
	}
	if got := p.Release(); got != 1 {
		t.Fatalf("released %d, want 1", got)
	}
	r := <-first
	if r.code != 201 || r.replayed {
		t.Fatalf("held request: %d replayed=%v", r.code, r.replayed)
	}
	if again := c.refund("K", refundBody); !again.replayed || !bytes.Equal(again.body, r.body) {
		t.Fatalf("after release: %d %s", again.code, again.body)
	}
	if p.Held() != 0 {
		t.Fatalf("%d still held", p.Held())
	}
	recs := p.Records()
	if len(recs.Records) != 2 || recs.PerKey["k-1"] != 1 || recs.PerKey["k-2"] != 1 || recs.RequestsPerKey["k-1"] != 4 {
		t.Fatalf("records %+v", recs)
	}
}

// TestPaymentsDelayEndsOnItsOwn: a delay with a duration answers once it
// has passed in real time, without a release.
func TestPaymentsDelayEndsOnItsOwn(t *testing.T) {
	p, c := payServer(t, NewClock(t0), PaymentsOptions{})
	p.QueueFault(PaymentsFault{Kind: PayDelay, Delay: 50 * time.Millisecond})
	if r := c.refund("K", refundBody); r.code != 201 {
		t.Fatalf("delayed: %d %v", r.code, r.err)
	}
}

// TestPaymentsSearchLag: the metadata search shows a refund only once it
// is SearchLag old on the fake clock, newest first; GET by id never lags.
func TestPaymentsSearchLag(t *testing.T) {
	clk := NewClock(t0)
	p, c := payServer(t, clk, PaymentsOptions{SearchLag: time.Minute})
	search := func(q string) []any {
		t.Helper()
		r := c.do("GET", "/v1/refunds?"+q, "", "")
		if r.code != 200 {
			t.Fatalf("search %s: %d %s", q, r.code, r.body)
		}
		m := r.json(t)
		if m["object"] != "list" {
			t.Fatalf("search answer %v", m)
		}
		return m["data"].([]any)
	}
	a := c.refund("A", refundBody).json(t)["id"]
	clk.Advance(30 * time.Second)
	b := c.refund("B", strings.Replace(refundBody, "1250", "99", 1)).json(t)["id"]
	if got := search("metadata[gatehouse_key]=k-1"); len(got) != 0 {
		t.Fatalf("visible before the lag: %v", got)
	}
	if r := c.do("GET", "/v1/refunds/"+b.(string), "", ""); r.code != 200 {
		t.Fatalf("GET by id lags: %d", r.code)
	}
	clk.Advance(30*time.Second - time.Nanosecond)
	if got := search("metadata[gatehouse_key]=k-1"); len(got) != 0 {
		t.Fatalf("visible a nanosecond before the lag: %v", got)
	}
	clk.Advance(time.Nanosecond)
	if got := search("metadata[gatehouse_key]=k-1"); len(got) != 1 || got[0].(map[string]any)["id"] != a {
		t.Fatalf("at the lag: %v", got)
	}
	clk.Advance(30 * time.Second)
	got := search("metadata[gatehouse_key]=k-1&metadata[order]=o-9")
	if len(got) != 2 || got[0].(map[string]any)["id"] != b || got[1].(map[string]any)["id"] != a {
		t.Fatalf("newest first: %v", got)
	}
	if got := search("metadata[gatehouse_key]=k-2"); len(got) != 0 {
		t.Fatalf("another key: %v", got)
	}
	if got := search("payment=pay_123"); len(got) != 2 {
		t.Fatalf("by payment: %v", got)
	}
	p.SetSearchLag(time.Hour) // an outage of the index hides them again
	if got := search("metadata[gatehouse_key]=k-1"); len(got) != 0 {
		t.Fatalf("with a longer lag: %v", got)
	}
	for _, q := range []string{"metdata[gatehouse_key]=k-1", "metadata[gatehouse_key]=a&metadata[gatehouse_key]=b", "metadata[]=x"} {
		if r := c.do("GET", "/v1/refunds?"+q, "", ""); r.code != 400 {
			t.Errorf("search %s: %d, want 400", q, r.code)
		}
	}
}

// TestPaymentsRefusesBadRequests: what the provider refuses, with 400
// invalid_request_error, creating nothing.
func TestPaymentsRefusesBadRequests(t *testing.T) {
	p, c := payServer(t, nil, PaymentsOptions{})
	for _, tc := range []struct{ name, key, body string }{
		{"not JSON", "", `{"payment": `},
		{"an array", "", `[1]`},
		{"two values", "", `{"payment": "p", "amount": 1, "currency": "eur"} {}`},
		{"no payment", "", `{"amount": 1, "currency": "eur"}`},
		{"empty payment", "", `{"payment": "", "amount": 1, "currency": "eur"}`},
		{"no currency", "", `{"payment": "p", "amount": 1}`},
		{"no amount", "", `{"payment": "p", "currency": "eur"}`},
		{"amount zero", "", `{"payment": "p", "amount": 0, "currency": "eur"}`},
		{"amount negative", "", `{"payment": "p", "amount": -5, "currency": "eur"}`},
		{"amount not whole", "", `{"payment": "p", "amount": 12.5, "currency": "eur"}`},
		{"amount a string", "", `{"payment": "p", "amount": "12", "currency": "eur"}`},
		{"unknown field", "", `{"payment": "p", "amount": 1, "currency": "eur", "charge": "ch_1"}`},
		{"metadata not strings", "", `{"payment": "p", "amount": 1, "currency": "eur", "metadata": {"n": 1}}`},
		{"key too long", strings.Repeat("k", MaxIdempotencyKey+1), refundBody},
	} {
		if r := c.refund(tc.key, tc.body); r.code != 400 || r.errType(t) != "invalid_request_error" {
			t.Errorf("%s: %d %s", tc.name, r.code, r.body)
		}
	}
	if n := len(p.Records().Records); n != 0 {
		t.Fatalf("%d records from refused requests", n)
	}
	if r := c.refund(strings.Repeat("k", MaxIdempotencyKey), refundBody); r.code != 201 {
		t.Fatalf("a key of %d characters: %d %s", MaxIdempotencyKey, r.code, r.body)
	}
	p.SetKeys(PaymentsNoKeys)
	if r := c.refund(strings.Repeat("k", MaxIdempotencyKey+1), refundBody); r.code != 201 {
		t.Fatalf("no-keys mode looked at the key: %d %s", r.code, r.body)
	}
}

// TestPaymentsDown: the provider API answers 503 while down; the control
// API keeps answering, and up ends it.
func TestPaymentsDown(t *testing.T) {
	p, c := payServer(t, nil, PaymentsOptions{})
	id := c.refund("K", refundBody).json(t)["id"].(string)
	if r := c.do("POST", "/_fake/faults", "", `{"fault": "down"}`); r.code != 200 || r.json(t)["down"] != true {
		t.Fatalf("queue down: %d %s", r.code, r.body)
	}
	for _, r := range []payResp{c.refund("K2", refundBody), c.do("GET", "/v1/refunds/"+id, "", ""),
		c.do("GET", "/v1/refunds?metadata[gatehouse_key]=k-1", "", "")} {
		if r.code != 503 || r.errType(t) != "api_error" {
			t.Fatalf("while down: %d %s", r.code, r.body)
		}
	}
	if r := c.do("GET", "/_fake/records", "", ""); r.code != 200 {
		t.Fatalf("control API while down: %d", r.code)
	}
	if r := c.do("POST", "/_fake/up", "", ""); r.code != 200 || r.json(t)["down"] != false {
		t.Fatalf("up: %d %s", r.code, r.body)
	}
	if r := c.refund("K", refundBody); !r.replayed {
		t.Fatalf("after up: %d %s", r.code, r.body)
	}
	if n := len(p.Records().Records); n != 1 {
		t.Fatalf("%d records", n)
	}
}

// TestPaymentsControlAPI: the control API drives the same fake the Go
// methods do: faults, options, records with counts per key, reset.
func TestPaymentsControlAPI(t *testing.T) {
	clk := NewClock(t0)
	_, c := payServer(t, clk, PaymentsOptions{})
	epoch := c.do("GET", "/_fake/epoch", "", "").json(t)["epoch"].(string)
	if len(epoch) != 16 {
		t.Fatalf("epoch %q", epoch)
	}
	for _, tc := range []struct {
		path, body string
		code       int
	}{
		{"/_fake/faults", `{"fault": "commit_then_drop", "count": 2}`, 200},
		{"/_fake/faults", `{"fault": "delay", "delay": "1s"}`, 200},
		{"/_fake/faults", `{"fault": "explode"}`, 400},
		{"/_fake/faults", `{"fault": "error_429", "delay": "1s"}`, 400},
		{"/_fake/faults", `{"fault": "delay", "delay": "soon"}`, 400},
		{"/_fake/faults", `{"fault": "error_500", "count": -1}`, 400},
		{"/_fake/faults", `{"fault": "error_500", "times": 2}`, 400},
		{"/_fake/options", `{"keys": "sometimes"}`, 400},
		{"/_fake/options", `{"window": "0s"}`, 400},
		{"/_fake/options", `{"search_lag": "-1s", "keys": "none"}`, 400},
		{"/_fake/options", `{"keys": "keys", "window": "2h", "search_lag": "30s", "store_5xx": true}`, 200},
	} {
		if r := c.do("POST", tc.path, "", tc.body); r.code != tc.code {
			t.Errorf("POST %s %s: %d %s, want %d", tc.path, tc.body, r.code, r.body, tc.code)
		}
	}
	opts := c.do("GET", "/_fake/options", "", "").json(t)
	if opts["keys"] != "keys" || opts["window"] != "2h0m0s" || opts["search_lag"] != "30s" || opts["store_5xx"] != true {
		t.Fatalf("options = %v (a refused call must change nothing)", opts)
	}
	q := c.do("GET", "/_fake/faults", "", "").json(t)["queued"].([]any)
	if len(q) != 2 || q[0].(map[string]any)["count"] != 2.0 || q[1].(map[string]any)["delay"] != "1s" {
		t.Fatalf("queued = %v", q)
	}
	if r := c.do("POST", "/_fake/faults", "", `{"fault": "none"}`); len(r.json(t)["queued"].([]any)) != 0 {
		t.Fatalf("none left %s", r.body)
	}
	c.refund("K", refundBody)
	c.refund("K", refundBody)
	c.refund("", strings.Replace(refundBody, "k-1", "k-2", 1))
	c.refund("", `{"payment": "pay_9", "amount": 5, "currency": "eur"}`)
	var recs PaymentsRecords
	if err := json.Unmarshal(c.do("GET", "/_fake/records", "", "").body, &recs); err != nil {
		t.Fatal(err)
	}
	if len(recs.Records) != 3 || recs.Records[0].IdempotencyKey != "K" || recs.Records[1].IdempotencyKey != "" ||
		recs.PerKey["k-1"] != 1 || recs.PerKey["k-2"] != 1 || len(recs.PerKey) != 2 ||
		recs.RequestsPerKey["k-1"] != 2 || recs.Epoch != epoch {
		t.Fatalf("records = %+v", recs)
	}
	fresh := c.do("POST", "/_fake/reset", "", "").json(t)["epoch"]
	if fresh == epoch || c.do("GET", "/_fake/epoch", "", "").json(t)["epoch"] != fresh {
		t.Fatalf("reset: epoch %v after %v", fresh, epoch)
	}
	if r := c.refund("K", refundBody); r.code != 201 || r.replayed {
		t.Fatalf("after reset the key is new: %d replayed=%v", r.code, r.replayed)
	}
	for _, tc := range []struct {
		method, path string
		code         int
	}{{"DELETE", "/v1/refunds", 405}, {"PUT", "/v1/refunds/re_1", 405}, {"GET", "/v2/charges", 404}} {
		if r := c.do(tc.method, tc.path, "", ""); r.code != tc.code || r.errType(t) != "invalid_request_error" {
			t.Errorf("%s %s: %d %s", tc.method, tc.path, r.code, r.body)
		}
	}
}

// TestPaymentsRefusesOtherOrigins: a page of another origin cannot drive
// the fake through a browser.
func TestPaymentsRefusesOtherOrigins(t *testing.T) {
	p, c := payServer(t, nil, PaymentsOptions{})
	req, _ := http.NewRequest("POST", c.url+"/_fake/reset", nil)
	req.Header.Set("Origin", "http://evil.example")
	resp, err := c.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 403 {
		t.Fatalf("cross-origin reset: %d", resp.StatusCode)
	}
	epoch := p.Epoch()
	req, _ = http.NewRequest("POST", c.url+"/_fake/reset", nil)
	req.Header.Set("Origin", c.url)
	if resp, err = c.hc.Do(req); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || p.Epoch() == epoch {
		t.Fatalf("same-origin reset: %d", resp.StatusCode)
	}
}

// TestPaymentsCloseEndsHolds: closing the fake sends held responses, so
// the server serving it can stop.
func TestPaymentsCloseEndsHolds(t *testing.T) {
	p := NewPayments(nil, PaymentsOptions{})
	srv := httptest.NewServer(p.Handler())
	defer srv.Close()
	p.QueueFault(PaymentsFault{Kind: PayDelay})
	done := make(chan int, 1)
	go func() {
		resp, err := http.Post(srv.URL+"/v1/refunds", "application/json", strings.NewReader(refundBody))
		if err != nil {
			done <- -1
			return
		}
		resp.Body.Close()
		done <- resp.StatusCode
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.WaitHeld(ctx, 1); err != nil {
		t.Fatal(err)
	}
	p.Close()
	if code := <-done; code != 201 {
		t.Fatalf("held request after Close: %d", code)
	}
	p.QueueFault(PaymentsFault{Kind: PayDelay, Delay: time.Hour})
	resp, err := http.Post(srv.URL+"/v1/refunds", "application/json", strings.NewReader(refundBody))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 201 {
		t.Fatalf("a delay after Close: %d", resp.StatusCode)
	}
	short, cancelShort := context.WithCancel(ctx)
	cancelShort()
	if err := p.WaitHeld(short, 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("WaitHeld on a cancelled context: %v", err)
	}
}

func TestParsePaymentsFault(t *testing.T) {
	for _, tc := range []struct {
		spec string
		want PaymentsFault
		err  bool
	}{
		{spec: "commit_then_drop", want: PaymentsFault{Kind: PayCommitThenDrop, Count: 1}},
		{spec: "error_500:count=3", want: PaymentsFault{Kind: PayError500, Count: 3}},
		{spec: "delay=5s", want: PaymentsFault{Kind: PayDelay, Count: 1, Delay: 5 * time.Second}},
		{spec: "delay", want: PaymentsFault{Kind: PayDelay, Count: 1}},
		{spec: "delay=1m:count=2", want: PaymentsFault{Kind: PayDelay, Count: 2, Delay: time.Minute}},
		{spec: "down", want: PaymentsFault{Kind: PayDown, Count: 1}},
		{spec: "explode", err: true},
		{spec: "error_429=5s", err: true},
		{spec: "delay=soon", err: true},
		{spec: "delay=-1s", err: true},
		{spec: "error_500:count=0", err: true},
		{spec: "error_500:times=2", err: true},
		{spec: "error_500:", err: true},
	} {
		got, err := ParsePaymentsFault(tc.spec)
		if tc.err {
			if err == nil {
				t.Errorf("%s: parsed as %+v, want an error", tc.spec, got)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s: %+v, %v; want %+v", tc.spec, got, err, tc.want)
			continue
		}
		if again, err := ParsePaymentsFault(got.String()); err != nil || again != got {
			t.Errorf("%s: String %q reads back as %+v, %v", tc.spec, got.String(), again, err)
		}
	}
}

// TestGoTransportResendsKeyedPOST pins down what docs/payments.md warns
// of: on a reused keep-alive connection, Go's transport re-sends by itself
// a POST that carries an Idempotency-Key when the response is lost, so one
// call makes two refunds at a provider that ignores keys; without the
// header the caller sees the failure.
func TestGoTransportResendsKeyedPOST(t *testing.T) {
	for _, tc := range []struct {
		key     string
		records int // after one call to warm the connection and one dropped
		err     bool
	}{{key: "", records: 2, err: true}, {key: "K", records: 3, err: false}} {
		p := NewPayments(nil, PaymentsOptions{Keys: PaymentsNoKeys})
		srv := httptest.NewServer(p.Handler())
		hc := srv.Client() // keep-alive, as a default client is
		post := func() error {
			req, _ := http.NewRequest("POST", srv.URL+"/v1/refunds", strings.NewReader(refundBody))
			if tc.key != "" {
				req.Header.Set("Idempotency-Key", tc.key)
			}
			resp, err := hc.Do(req)
			if err != nil {
				return err
			}
			io.Copy(io.Discard, resp.Body) // read to the end, so the connection is reused
			return resp.Body.Close()
		}
		if err := post(); err != nil {
			t.Fatal(err)
		}
		p.QueueFault(PaymentsFault{Kind: PayCommitThenDrop})
		err := post()
		if got := len(p.Records().Records); got != tc.records || (err != nil) != tc.err {
			t.Errorf("key %q: %d records, call error %v; want %d records, an error: %v", tc.key, got, err, tc.records, tc.err)
		}
		p.Close()
		srv.Close()
	}
}

// TestPaymentsDocsNameEveryFaultAndCall: docs/payments.md has a row for
// every fault kind and names every call the handler serves.
func TestPaymentsDocsNameEveryFaultAndCall(t *testing.T) {
	raw, err := os.ReadFile("../docs/payments.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	i := strings.Index(doc, "### Fault kinds")
	if i < 0 {
		t.Fatal("docs/payments.md has no ### Fault kinds section")
	}
	for _, k := range PaymentsFaultKinds {
		if !strings.Contains(doc[i:], "\n| `"+string(k)+"` |") {
			t.Errorf("docs/payments.md's table of fault kinds has no row for %s", k)
		}
	}
	for _, call := range []string{"POST /v1/refunds", "GET /v1/refunds/{id}", "GET /v1/refunds?metadata[F]=V",
		"GET /_fake/records", "GET /_fake/epoch", "POST /_fake/faults", "GET /_fake/faults", "POST /_fake/up",
		"POST /_fake/release", "POST /_fake/options", "POST /_fake/reset"} {
		if !strings.Contains(doc, call) {
			t.Errorf("docs/payments.md does not name %s", call)
		}
	}
}

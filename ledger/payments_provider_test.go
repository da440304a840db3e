package ledger_test

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"gatehouse/destination"
	"gatehouse/fakes"
)

// payments is a small provider of refunds that follows the payments API
// the fake in fakes/ serves (docs/destinations.md): idempotency keys with
// a window on the rehearsal clock, a 500 stored under the key when told,
// a metadata search that lags, a no-keys mode, and faults queued for the
// next writes. It keeps every record, so a test counts refunds per action
// key at the provider.
type payments struct {
	t     *testing.T
	srv   *httptest.Server
	clock *fakes.Clock
	mu    sync.Mutex
	// keys: honour Idempotency-Key; window: how long a key is kept;
	// lag: how long a refund stays invisible to the search; stores5xx:
	// a 500 fault is stored under the request's key.
	keys      bool
	window    time.Duration
	lag       time.Duration
	stores5xx bool
	faults    []string
	refunds   []refundRecord
	stored    map[string]storedAnswer
	arrivals  int
}

type refundRecord struct {
	obj     map[string]any
	key     string
	created time.Time
}

type storedAnswer struct {
	canon  string
	status int
	body   []byte
	at     time.Time
}

func startPayments(t *testing.T, clk *fakes.Clock) *payments {
	p := &payments{t: t, clock: clk, keys: true, window: 24 * time.Hour, stored: map[string]storedAnswer{}}
	p.srv = httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(p.srv.Close)
	return p
}

// url is the destination URL of the provider under a duplicate control.
func (p *payments) url(query string) string { return p.srv.URL + "?" + query }

// fault queues faults for the next writes: commit_then_drop (create, then
// close without a word), drop_before_commit (read, close, create
// nothing), error_500, error_429.
func (p *payments) fault(f ...string) {
	p.mu.Lock()
	p.faults = append(p.faults, f...)
	p.mu.Unlock()
}

// perKey counts the refunds at the provider by metadata.gatehouse_key.
func (p *payments) perKey() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]int{}
	for _, r := range p.refunds {
		md, _ := r.obj["metadata"].(map[string]any)
		k, _ := md["gatehouse_key"].(string)
		out[k]++
	}
	return out
}

func apiError(status int, typ string) (int, []byte) {
	b, _ := json.Marshal(map[string]any{"error": map[string]string{"type": typ, "message": typ}})
	return status, b
}

func (p *payments) serve(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/v1/refunds":
		p.create(w, r)
	case r.Method == http.MethodGet && r.URL.Path == "/v1/refunds":
		p.search(w, r)
	default:
		status, body := apiError(404, "resource_missing")
		w.WriteHeader(status)
		w.Write(body)
	}
}

func (p *payments) create(w http.ResponseWriter, r *http.Request) {
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.arrivals++
	var fault string
	if len(p.faults) > 0 {
		fault, p.faults = p.faults[0], p.faults[1:]
	}
	canon, err := destination.CanonicalJSON(raw)
	var obj map[string]any
	if err != nil || json.Unmarshal(raw, &obj) != nil || obj["payment"] == nil || obj["amount"] == nil || obj["currency"] == nil {
		status, body := apiError(400, "invalid_request_error")
		w.WriteHeader(status)
		w.Write(body)
		return
	}
	key := ""
	if p.keys {
		key = r.Header.Get("Idempotency-Key")
	}
	now := p.clock.Now()
	if key != "" {
		if st, ok := p.stored[key]; ok && now.Sub(st.at) < p.window {
			if st.canon != string(canon) {
				status, body := apiError(422, "idempotency_error")
				w.WriteHeader(status)
				w.Write(body)
				return
			}
			w.Header().Set("Idempotent-Replayed", "true")
			w.WriteHeader(st.status)
			w.Write(st.body)
			return
		}
	}
	answer := func(status int, body []byte) {
		if key != "" {
			p.stored[key] = storedAnswer{canon: string(canon), status: status, body: body, at: now}
		}
		w.WriteHeader(status)
		w.Write(body)
	}
	switch fault {
	case "error_429":
		status, body := apiError(429, "rate_limit_error")
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(status)
		w.Write(body)
		return
	case "error_500":
		status, body := apiError(500, "api_error")
		if p.stores5xx {
			answer(status, body)
			return
		}
		w.WriteHeader(status)
		w.Write(body)
		return
	case "drop_before_commit":
		hijackClose(w)
		return
	}
	id := make([]byte, 12)
	rand.Read(id)
	obj["id"], obj["object"], obj["status"], obj["created"] = "re_"+hex.EncodeToString(id), "refund", "succeeded", now.Format(time.RFC3339)
	p.refunds = append(p.refunds, refundRecord{obj: obj, key: key, created: now})
	body, _ := json.Marshal(obj)
	if key != "" {
		p.stored[key] = storedAnswer{canon: string(canon), status: 201, body: body, at: now}
	}
	if fault == "commit_then_drop" {
		hijackClose(w)
		return
	}
	w.WriteHeader(201)
	w.Write(body)
}

func hijackClose(w http.ResponseWriter) {
	if c, _, err := w.(http.Hijacker).Hijack(); err == nil {
		c.Close()
	}
}

func (p *payments) search(w http.ResponseWriter, r *http.Request) {
	want := r.URL.Query().Get("metadata[gatehouse_key]")
	p.mu.Lock()
	now := p.clock.Now()
	var data []map[string]any
	for i := len(p.refunds) - 1; i >= 0; i-- {
		rec := p.refunds[i]
		md, _ := rec.obj["metadata"].(map[string]any)
		if k, _ := md["gatehouse_key"].(string); k == want && now.Sub(rec.created) >= p.lag {
			data = append(data, rec.obj)
		}
	}
	p.mu.Unlock()
	if data == nil {
		data = []map[string]any{}
	}
	body, _ := json.Marshal(map[string]any{"object": "list", "data": data, "has_more": false})
	w.Header().Set("Content-Type", "application/json")
	w.Write(body)
}

// post sends a write to the provider directly, as someone other than the
// gate would, and returns its status.
func (p *payments) post(t *testing.T, key string, body []byte) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, p.srv.URL+"/v1/refunds", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

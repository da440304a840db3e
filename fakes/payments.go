package fakes

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"gatehouse/internal/clock"
	"gatehouse/internal/oswait"
)

// Payments is a fictional payment provider's refunds API, shaped on what
// Stripe documents: refunds created with an optional Idempotency-Key whose
// first result (500s included, when Store5xx says so) is kept for a
// window on the rehearsal clock, a metadata search that lags behind
// creation, and a no-keys mode for providers that offer no duplicate
// control at all. It keeps every refund it created, so a rehearsal counts
// records at the destination per action key the way it counts a mailbox's
// arrivals, and it injects the faults a provider shows in production:
// the response dropped after the refund was created, a late response, a
// 5xx, a 429, an API that is down.
//
// It is safe for concurrent use; serve it with Handler on loopback.
type Payments struct {
	clock clock.Clock

	mu       sync.Mutex
	opts     PaymentsOptions
	epoch    string
	refunds  []*storedRefund
	byID     map[string]*storedRefund
	keys     map[string]*keyEntry
	requests map[string]int // POST /v1/refunds per metadata.gatehouse_key
	faults   []PaymentsFault
	down     bool
	closed   bool
	held     int
	release  chan struct{} // closed by Release: every held response goes out
	changed  chan struct{} // closed and replaced whenever held changes
}

// Keys modes of PaymentsOptions.Keys.
const (
	// PaymentsKeys honours the Idempotency-Key header.
	PaymentsKeys = "keys"
	// PaymentsNoKeys ignores it: two identical requests make two refunds.
	PaymentsNoKeys = "none"
)

// GatehouseKeyField is the metadata field the fake counts records by: the
// field a gated refund carries its action key in.
const GatehouseKeyField = "gatehouse_key"

// MaxIdempotencyKey is the longest Idempotency-Key the fake takes (Stripe's
// limit); a longer one is refused with 400.
const MaxIdempotencyKey = 255

// DefaultPaymentsWindow is how long a key is remembered unless told
// otherwise: Stripe prunes keys once they are at least 24 hours old.
const DefaultPaymentsWindow = 24 * time.Hour

// PaymentsOptions configure the fake; each can be changed at run time.
type PaymentsOptions struct {
	// Keys is PaymentsKeys (the default when empty) or PaymentsNoKeys.
	Keys string
	// Window is how long a key is remembered, on the fake's clock, from
	// its first request (DefaultPaymentsWindow when zero). A key at least
	// Window old is forgotten: a request with it is a new request.
	Window time.Duration
	// SearchLag is how long after its creation a refund first shows in
	// the metadata search (GET /v1/refunds?metadata[…]=…).
	SearchLag time.Duration
	// Store5xx stores the 500 of an injected error_500 under the
	// request's key, as Stripe stores every result once the endpoint has
	// started: a retry with that key answers the same 500 until the key is
	// forgotten, and no refund was created.
	Store5xx bool
}

// MarshalJSON writes the options as the control API takes them, the
// durations as text ("24h0m0s").
func (o PaymentsOptions) MarshalJSON() ([]byte, error) {
	return json.Marshal(map[string]any{"keys": o.Keys, "window": o.Window.String(),
		"search_lag": o.SearchLag.String(), "store_5xx": o.Store5xx})
}

// Refund is a refund as the provider answers it.
type Refund struct {
	ID       string            `json:"id"`
	Object   string            `json:"object"`
	Payment  string            `json:"payment"`
	Amount   int64             `json:"amount"`
	Currency string            `json:"currency"`
	Reason   string            `json:"reason"`
	Status   string            `json:"status"`
	Metadata map[string]string `json:"metadata"`
	Created  string            `json:"created"`
}

type storedRefund struct {
	Refund
	key     string // the Idempotency-Key the creating request carried
	created time.Time
}

// keyEntry is what the fake remembers of one idempotency key: the request
// it first came with and, once that request's endpoint finished, its
// answer.
type keyEntry struct {
	canon  []byte // the first request's body as canonical JSON
	at     time.Time
	done   bool
	status int
	body   []byte
}

// PaymentsRecord is one refund the fake created, with the key it came with
// ("" without one; in no-keys mode the key it carried and was ignored).
type PaymentsRecord struct {
	Refund         Refund `json:"refund"`
	IdempotencyKey string `json:"idempotency_key"`
}

// PaymentsRecords is everything the fake created, read at one moment.
type PaymentsRecords struct {
	Records []PaymentsRecord `json:"records"`
	// PerKey counts refunds per metadata.gatehouse_key: more than one is
	// a duplicate at the destination.
	PerKey map[string]int `json:"per_key"`
	// RequestsPerKey counts the well-formed POST /v1/refunds per
	// metadata.gatehouse_key, created or not (replays, 409s, faults).
	RequestsPerKey map[string]int `json:"requests_per_key"`
	// Epoch names the life of these records (see Reset).
	Epoch string `json:"epoch"`
}

// PaymentsFaultKind names a fault of the payments fake.
type PaymentsFaultKind string

// The faults. Each is taken by the next POST /v1/refunds it applies to:
// error_429 and drop_before_commit by the next well-formed request, before
// its key is looked at (a rate limit and a lost request happen before the
// endpoint starts); commit_then_drop, delay and error_500 by the next
// request that executes — not one answered from a stored result, with 409
// or with 422.
const (
	// PayCommitThenDrop creates the refund, stores the answer under the key,
	// then closes the connection without a response.
	PayCommitThenDrop PaymentsFaultKind = "commit_then_drop"
	// PayDelay creates the refund and answers after Delay of real time, or
	// when released (Release), or at once when the fake is closed; until
	// then a request with the same key is answered 409. Delay 0 holds the
	// response until released.
	PayDelay PaymentsFaultKind = "delay"
	// PayError500 answers 500 without creating a refund; stored under the
	// key when Store5xx.
	PayError500 PaymentsFaultKind = "error_500"
	// PayError429 answers 429 with Retry-After, creating nothing.
	PayError429 PaymentsFaultKind = "error_429"
	// PayDropBeforeCommit reads the request and closes the connection
	// without creating anything.
	PayDropBeforeCommit PaymentsFaultKind = "drop_before_commit"
	// PayDown makes the whole provider API answer 503 until SetDown(false)
	// (POST /_fake/up). It is not queued.
	PayDown PaymentsFaultKind = "down"
)

// PaymentsFaultKinds lists every fault, in the order docs name them.
var PaymentsFaultKinds = []PaymentsFaultKind{PayCommitThenDrop, PayDelay, PayError500, PayError429, PayDropBeforeCommit, PayDown}

// PaymentsFault is one queued fault: Count requests (1 when zero) get it.
type PaymentsFault struct {
	Kind  PaymentsFaultKind
	Count int
	// Delay is how late a delay fault answers, in real time: the client
	// measures its timeout in real time whatever clock the rehearsal keeps.
	Delay time.Duration
}

// MarshalJSON writes the fault as the control API takes it.
func (f PaymentsFault) MarshalJSON() ([]byte, error) {
	m := map[string]any{"fault": f.Kind, "count": f.Count}
	if f.Kind == PayDelay {
		m["delay"] = f.Delay.String()
	}
	return json.Marshal(m)
}

// executes reports whether the fault applies only to a request that
// executes (one that is not answered from a stored result).
func (k PaymentsFaultKind) executes() bool {
	return k == PayCommitThenDrop || k == PayDelay || k == PayError500
}

// NewPayments returns an empty provider whose windows, lags and creation
// times follow clk (the real clock when nil).
func NewPayments(clk *Clock, opts PaymentsOptions) *Payments {
	p := &Payments{clock: clock.System{}, release: make(chan struct{}), changed: make(chan struct{})}
	if clk != nil {
		p.clock = clk
	}
	if opts.Keys == "" {
		opts.Keys = PaymentsKeys
	}
	if opts.Window <= 0 {
		opts.Window = DefaultPaymentsWindow
	}
	p.opts = opts
	p.resetLocked()
	return p
}

func (p *Payments) resetLocked() {
	p.epoch = randomHex(8)
	p.refunds = nil
	p.byID = map[string]*storedRefund{}
	p.keys = map[string]*keyEntry{}
	p.requests = map[string]int{}
	p.faults = nil
	p.down = false
}

// Reset forgets every refund, key and fault, releases held responses and
// draws a new epoch: whoever recorded the old one can tell the records were
// lost, not that nothing was ever created.
func (p *Payments) Reset() string {
	p.mu.Lock()
	p.resetLocked()
	p.releaseLocked()
	e := p.epoch
	p.mu.Unlock()
	return e
}

// Epoch names the current life of the records.
func (p *Payments) Epoch() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.epoch
}

// Options returns the options in force.
func (p *Payments) Options() PaymentsOptions {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.opts
}

// SetKeys switches between honouring keys (PaymentsKeys) and ignoring them
// (PaymentsNoKeys). Keys already remembered stay remembered.
func (p *Payments) SetKeys(mode string) error {
	if mode != PaymentsKeys && mode != PaymentsNoKeys {
		return fmt.Errorf("payments: keys mode %q: want %q or %q", mode, PaymentsKeys, PaymentsNoKeys)
	}
	p.mu.Lock()
	p.opts.Keys = mode
	p.mu.Unlock()
	return nil
}

// SetWindow changes how long keys are remembered; it applies to keys
// already remembered too, so shortening it expires them.
func (p *Payments) SetWindow(d time.Duration) error {
	if d <= 0 {
		return fmt.Errorf("payments: window %s: must be positive", d)
	}
	p.mu.Lock()
	p.opts.Window = d
	p.mu.Unlock()
	return nil
}

// SetSearchLag changes the search lag, for refunds already created too.
func (p *Payments) SetSearchLag(d time.Duration) error {
	if d < 0 {
		return fmt.Errorf("payments: search lag %s: must not be negative", d)
	}
	p.mu.Lock()
	p.opts.SearchLag = d
	p.mu.Unlock()
	return nil
}

// SetStore5xx sets whether an injected 500 is stored under the key.
func (p *Payments) SetStore5xx(on bool) {
	p.mu.Lock()
	p.opts.Store5xx = on
	p.mu.Unlock()
}

// SetDown takes the provider API down (every call answers 503) or brings
// it back. The control API stays up.
func (p *Payments) SetDown(down bool) {
	p.mu.Lock()
	p.down = down
	p.mu.Unlock()
}

// QueueFault queues f for the next f.Count requests it applies to; PayDown
// takes the API down at once instead.
func (p *Payments) QueueFault(f PaymentsFault) error {
	if f.Count < 0 {
		return fmt.Errorf("payments: fault %s: count %d must not be negative", f.Kind, f.Count)
	}
	if f.Count == 0 {
		f.Count = 1
	}
	if f.Delay < 0 || f.Delay != 0 && f.Kind != PayDelay {
		return fmt.Errorf("payments: fault %s: a delay is only for %s, and never negative", f.Kind, PayDelay)
	}
	switch f.Kind {
	case PayDown:
		p.SetDown(true)
		return nil
	case PayCommitThenDrop, PayDelay, PayError500, PayError429, PayDropBeforeCommit:
	default:
		return fmt.Errorf("payments: unknown fault %q (want one of %s)", f.Kind, faultKindList())
	}
	p.mu.Lock()
	p.faults = append(p.faults, f)
	p.mu.Unlock()
	return nil
}

func faultKindList() string {
	names := make([]string, len(PaymentsFaultKinds))
	for i, k := range PaymentsFaultKinds {
		names[i] = string(k)
	}
	return strings.Join(names, ", ")
}

// ClearFaults drops every queued fault and brings the API up; responses
// already held stay held (Release ends them).
func (p *Payments) ClearFaults() {
	p.mu.Lock()
	p.faults = nil
	p.down = false
	p.mu.Unlock()
}

// Faults lists the faults still queued.
func (p *Payments) Faults() []PaymentsFault {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]PaymentsFault{}, p.faults...)
}

// takeFaultLocked takes one of the queued fault at the head if a request
// at this stage takes it (see the fault kinds): its kind and delay.
func (p *Payments) takeFaultLocked(executing bool) (PaymentsFaultKind, time.Duration) {
	if len(p.faults) == 0 || p.faults[0].Kind.executes() != executing {
		return "", 0
	}
	f := p.faults[0]
	if p.faults[0].Count--; p.faults[0].Count == 0 {
		p.faults = p.faults[1:]
	}
	return f.Kind, f.Delay
}

// Held is how many responses a delay fault holds right now: requests the
// provider is still processing.
func (p *Payments) Held() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.held
}

// WaitHeld waits until at least n responses are held, or ctx ends: a test
// acts "while the request is being processed" without sleeping.
func (p *Payments) WaitHeld(ctx context.Context, n int) error {
	for {
		p.mu.Lock()
		held, changed := p.held, p.changed
		p.mu.Unlock()
		if held >= n {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("payments: waiting for %d held responses (have %d): %w", n, held, ctx.Err())
		}
	}
}

// Release sends every held response now and reports how many there were.
func (p *Payments) Release() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := p.held
	p.releaseLocked()
	return n
}

func (p *Payments) releaseLocked() {
	close(p.release)
	p.release = make(chan struct{})
}

// Close releases every held response and answers later delays at once, so
// a server serving the fake can shut down without waiting out a delay.
func (p *Payments) Close() {
	p.mu.Lock()
	p.closed = true
	p.releaseLocked()
	p.mu.Unlock()
}

func (p *Payments) heldChangedLocked(d int) {
	p.held += d
	close(p.changed)
	p.changed = make(chan struct{})
}

// Records returns every refund created, in creation order, with the counts
// per action key.
func (p *Payments) Records() PaymentsRecords {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := PaymentsRecords{Records: make([]PaymentsRecord, 0, len(p.refunds)), PerKey: map[string]int{},
		RequestsPerKey: make(map[string]int, len(p.requests)), Epoch: p.epoch}
	for _, r := range p.refunds {
		out.Records = append(out.Records, PaymentsRecord{Refund: r.copy(), IdempotencyKey: r.key})
		if k := r.Metadata[GatehouseKeyField]; k != "" {
			out.PerKey[k]++
		}
	}
	for k, n := range p.requests {
		out.RequestsPerKey[k] = n
	}
	return out
}

func (r *storedRefund) copy() Refund {
	c := r.Refund
	c.Metadata = make(map[string]string, len(r.Metadata))
	for k, v := range r.Metadata {
		c.Metadata[k] = v
	}
	return c
}

// Handler returns the provider's API and the fake's control API.
//
//	POST /v1/refunds                      create (Idempotency-Key honoured in keys mode)
//	GET  /v1/refunds/{id}                 one refund, or 404 resource_missing
//	GET  /v1/refunds?metadata[F]=V        search, newest first, only refunds SearchLag old
//	GET  /_fake/records                   every refund, with counts per action key
//	GET  /_fake/epoch                     {"epoch": …}
//	GET|POST /_fake/faults                the queue / queue one: {"fault", "count", "delay"}
//	POST /_fake/up                        end a down
//	POST /_fake/release                   send every held response
//	GET|POST /_fake/options               {"keys", "window", "search_lag", "store_5xx"}
//	POST /_fake/reset                     forget everything: a new epoch
func (p *Payments) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/refunds", p.create)
	mux.HandleFunc("GET /v1/refunds", p.search)
	mux.HandleFunc("GET /v1/refunds/{id}", p.get)
	mux.HandleFunc("GET /_fake/records", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, http.StatusOK, p.Records()) })
	mux.HandleFunc("GET /_fake/epoch", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"epoch": p.Epoch()})
	})
	mux.HandleFunc("GET /_fake/faults", p.faultsState)
	mux.HandleFunc("POST /_fake/faults", p.queueFault)
	mux.HandleFunc("POST /_fake/up", func(w http.ResponseWriter, r *http.Request) {
		p.SetDown(false)
		p.faultsState(w, r)
	})
	mux.HandleFunc("POST /_fake/release", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]int{"released": p.Release()})
	})
	mux.HandleFunc("GET /_fake/options", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, http.StatusOK, p.Options()) })
	mux.HandleFunc("POST /_fake/options", p.setOptions)
	mux.HandleFunc("POST /_fake/reset", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"epoch": p.Reset()})
	})
	for path, allow := range map[string]string{"/v1/refunds": "GET, POST", "/v1/refunds/{id}": "GET",
		"/_fake/faults": "GET, POST", "/_fake/options": "GET, POST"} {
		mux.HandleFunc(path, methodNotAllowed(allow))
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		payError(w, http.StatusNotFound, "invalid_request_error", "unrecognized request URL ("+r.Method+" "+r.URL.Path+")")
	})
	return sameOrigin(mux)
}

func methodNotAllowed(allow string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", allow)
		payError(w, http.StatusMethodNotAllowed, "invalid_request_error", r.Method+" "+r.URL.Path+" is not allowed; use "+allow)
	}
}

// sameOrigin refuses a request a browser marks as coming from a page of
// another origin: the control API has no token, and a page elsewhere must
// not create refunds or clear records on a developer's loopback.
func sameOrigin(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if o := r.Header.Get("Origin"); o != "" && o != "http://"+r.Host {
			payError(w, http.StatusForbidden, "invalid_request_error", "cross-origin requests are refused")
			return
		}
		h.ServeHTTP(w, r)
	})
}

// payError writes the provider's error shape.
func payError(w http.ResponseWriter, code int, typ, msg string) {
	writeJSON(w, code, errorBody(typ, msg))
}

func errorBody(typ, msg string) map[string]any {
	return map[string]any{"error": map[string]string{"type": typ, "message": msg}}
}

// maxRefundBody bounds a request body; a refund is a few hundred bytes.
const maxRefundBody = 64 << 10

func (p *Payments) unavailable(w http.ResponseWriter) bool {
	p.mu.Lock()
	down := p.down
	p.mu.Unlock()
	if down {
		payError(w, http.StatusServiceUnavailable, "api_error", "the payments API is unavailable")
	}
	return down
}

func (p *Payments) create(w http.ResponseWriter, r *http.Request) {
	if p.unavailable(w) {
		return
	}
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRefundBody))
	if err != nil {
		payError(w, http.StatusBadRequest, "invalid_request_error", "reading the request body: "+err.Error())
		return
	}
	req, canon, err := parseRefundRequest(raw)
	if err != nil {
		payError(w, http.StatusBadRequest, "invalid_request_error", err.Error())
		return
	}
	key := r.Header.Get("Idempotency-Key")

	p.mu.Lock()
	keyed := p.opts.Keys == PaymentsKeys && key != ""
	if keyed && len(key) > MaxIdempotencyKey {
		p.mu.Unlock()
		payError(w, http.StatusBadRequest, "invalid_request_error",
			fmt.Sprintf("Idempotency-Key is %d characters; at most %d are taken", len(key), MaxIdempotencyKey))
		return
	}
	if gk := req.Metadata[GatehouseKeyField]; gk != "" {
		p.requests[gk]++
	}
	switch before, _ := p.takeFaultLocked(false); before {
	case PayError429:
		p.mu.Unlock()
		w.Header().Set("Retry-After", "1")
		payError(w, http.StatusTooManyRequests, "rate_limit_error", "too many requests; retry after 1s")
		return
	case PayDropBeforeCommit:
		p.mu.Unlock()
		dropConnection(w)
		return
	}
	now := p.clock.Now()
	var entry *keyEntry
	if keyed {
		if e := p.keys[key]; e != nil && e.done && now.Sub(e.at) >= p.opts.Window {
			delete(p.keys, key)
		}
		if e := p.keys[key]; e != nil {
			stored := *e
			p.mu.Unlock()
			switch {
			case !bytes.Equal(stored.canon, canon):
				payError(w, http.StatusUnprocessableEntity, "idempotency_error",
					"Keys for idempotent requests can only be used with the same parameters they were first used with")
			case !stored.done:
				payError(w, http.StatusConflict, "concurrent_request",
					"a request with this Idempotency-Key is still being processed; retry later")
			default:
				w.Header().Set("Content-Type", "application/json")
				w.Header().Set("Idempotent-Replayed", "true")
				w.WriteHeader(stored.status)
				w.Write(stored.body)
			}
			return
		}
		entry = &keyEntry{canon: canon, at: now}
		p.keys[key] = entry
	}
	fault, delay := p.takeFaultLocked(true)
	if fault == PayError500 {
		body := mustJSON(errorBody("api_error", "an error occurred on the provider's side"))
		switch {
		case keyed && p.opts.Store5xx:
			entry.done, entry.status, entry.body = true, http.StatusInternalServerError, body
		case keyed:
			delete(p.keys, key)
		}
		p.mu.Unlock()
		writeRaw(w, http.StatusInternalServerError, body)
		return
	}
	ref := &storedRefund{Refund: Refund{ID: "re_" + randomHex(12), Object: "refund", Payment: req.Payment,
		Amount: req.Amount, Currency: req.Currency, Reason: req.Reason, Status: "succeeded", Metadata: req.Metadata,
		Created: now.UTC().Format(time.RFC3339)}, key: key, created: now}
	p.refunds = append(p.refunds, ref)
	p.byID[ref.ID] = ref
	body := mustJSON(ref.copy())
	if fault == PayDelay {
		p.holdLocked(delay)
	}
	if entry != nil {
		entry.done, entry.status, entry.body = true, http.StatusCreated, body
	}
	p.mu.Unlock()
	if fault == PayCommitThenDrop {
		dropConnection(w)
		return
	}
	writeRaw(w, http.StatusCreated, body)
}

// holdLocked keeps the response back until the delay passes in real time
// (never when d is 0), or Release, Close or Reset. It is called and returns
// with the lock held, and lets go of it while it waits: meanwhile the
// request is "being processed", and its key answers 409.
func (p *Payments) holdLocked(d time.Duration) {
	if p.closed {
		return
	}
	release := p.release
	p.heldChangedLocked(1)
	p.mu.Unlock()
	var timeout <-chan time.Time
	if d > 0 {
		t := oswait.NewTimer(d)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-release:
	case <-timeout:
	}
	p.mu.Lock()
	p.heldChangedLocked(-1)
}

// dropConnection closes the connection without a response, as a network
// that loses the answer would.
func dropConnection(w http.ResponseWriter) {
	if hj, ok := w.(http.Hijacker); ok {
		if conn, _, err := hj.Hijack(); err == nil {
			if tc, ok := conn.(*net.TCPConn); ok {
				tc.SetLinger(0) // a reset, not a polite close: nothing more comes
			}
			conn.Close()
			return
		}
	}
	panic(http.ErrAbortHandler) // closes the connection without a response
}

func writeRaw(w http.ResponseWriter, code int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	w.Write(body)
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("payments: encode %T: %v", v, err))
	}
	return append(b, '\n')
}

func (p *Payments) get(w http.ResponseWriter, r *http.Request) {
	if p.unavailable(w) {
		return
	}
	p.mu.Lock()
	ref, ok := p.byID[r.PathValue("id")]
	var out Refund
	if ok {
		out = ref.copy()
	}
	p.mu.Unlock()
	if !ok {
		payError(w, http.StatusNotFound, "resource_missing", "no such refund: "+r.PathValue("id"))
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// search lists refunds matching every metadata[F]=V (and payment=P) given,
// newest first, leaving out those created less than SearchLag ago: the
// provider's search index lags behind its writes. An unknown or repeated
// parameter is refused, so a misspelt filter cannot match everything.
func (p *Payments) search(w http.ResponseWriter, r *http.Request) {
	if p.unavailable(w) {
		return
	}
	meta := map[string]string{}
	payment := ""
	for name, vals := range r.URL.Query() {
		if len(vals) != 1 {
			payError(w, http.StatusBadRequest, "invalid_request_error", "parameter "+name+" is given more than once")
			return
		}
		field, isMeta := strings.CutPrefix(name, "metadata[")
		switch {
		case isMeta && strings.HasSuffix(field, "]") && len(field) > 1:
			meta[strings.TrimSuffix(field, "]")] = vals[0]
		case name == "payment":
			payment = vals[0]
		default:
			payError(w, http.StatusBadRequest, "invalid_request_error",
				"unknown parameter "+name+" (want metadata[FIELD]=VALUE or payment=ID)")
			return
		}
	}
	p.mu.Lock()
	now, lag := p.clock.Now(), p.opts.SearchLag
	data := []Refund{}
	for i := len(p.refunds) - 1; i >= 0; i-- {
		ref := p.refunds[i]
		if now.Sub(ref.created) < lag || payment != "" && ref.Payment != payment {
			continue
		}
		match := true
		for k, v := range meta {
			if got, ok := ref.Metadata[k]; !ok || got != v {
				match = false
				break
			}
		}
		if match {
			data = append(data, ref.copy())
		}
	}
	p.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": data, "has_more": false})
}

func (p *Payments) faultsState(w http.ResponseWriter, _ *http.Request) {
	p.mu.Lock()
	body := map[string]any{"queued": append([]PaymentsFault{}, p.faults...), "held": p.held, "down": p.down}
	p.mu.Unlock()
	writeJSON(w, http.StatusOK, body)
}

// queueFault takes {"fault": F, "count": n, "delay": "5s"}; "none" clears
// the queue and ends a down.
func (p *Payments) queueFault(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Fault string `json:"fault"`
		Count int    `json:"count"`
		Delay string `json:"delay"`
	}
	if err := decodeStrict(r, &in); err != nil {
		payError(w, http.StatusBadRequest, "invalid_request_error", err.Error()+` (want {"fault": "commit_then_drop", "count": 1} or {"fault": "delay", "delay": "5s"})`)
		return
	}
	f := PaymentsFault{Kind: PaymentsFaultKind(in.Fault), Count: in.Count}
	if in.Delay != "" {
		d, err := time.ParseDuration(in.Delay)
		if err != nil {
			payError(w, http.StatusBadRequest, "invalid_request_error", "delay: "+err.Error())
			return
		}
		f.Delay = d
	}
	if in.Fault == "none" {
		p.ClearFaults()
	} else if err := p.QueueFault(f); err != nil {
		payError(w, http.StatusBadRequest, "invalid_request_error", err.Error())
		return
	}
	p.faultsState(w, r)
}

func (p *Payments) setOptions(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Keys      *string `json:"keys"`
		Window    *string `json:"window"`
		SearchLag *string `json:"search_lag"`
		Store5xx  *bool   `json:"store_5xx"`
	}
	fail := func(err error) {
		payError(w, http.StatusBadRequest, "invalid_request_error", err.Error())
	}
	if err := decodeStrict(r, &in); err != nil {
		fail(fmt.Errorf(`%w (want {"keys": "keys"|"none", "window": "24h", "search_lag": "30s", "store_5xx": true}, any of them)`, err))
		return
	}
	// Parsed in full before anything changes, so a refused call changes
	// nothing.
	var window, lag time.Duration
	var err error
	if in.Window != nil {
		if window, err = time.ParseDuration(*in.Window); err == nil && window <= 0 {
			err = errors.New("must be positive")
		}
		if err != nil {
			fail(fmt.Errorf("window: %w", err))
			return
		}
	}
	if in.SearchLag != nil {
		if lag, err = time.ParseDuration(*in.SearchLag); err == nil && lag < 0 {
			err = errors.New("must not be negative")
		}
		if err != nil {
			fail(fmt.Errorf("search_lag: %w", err))
			return
		}
	}
	if in.Keys != nil {
		if err := p.SetKeys(*in.Keys); err != nil {
			fail(err)
			return
		}
	}
	if in.Window != nil {
		p.SetWindow(window)
	}
	if in.SearchLag != nil {
		p.SetSearchLag(lag)
	}
	if in.Store5xx != nil {
		p.SetStore5xx(*in.Store5xx)
	}
	writeJSON(w, http.StatusOK, p.Options())
}

// decodeStrict reads one JSON object, refusing unknown fields.
func decodeStrict(r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(nil, r.Body, 1<<16))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("bad body: %w", err)
	}
	if dec.More() {
		return errors.New("bad body: more than one JSON value")
	}
	return nil
}

// refundRequest is a validated POST /v1/refunds body.
type refundRequest struct {
	Payment, Currency, Reason string
	Amount                    int64
	Metadata                  map[string]string
}

// parseRefundRequest validates a refund body and returns it with its
// canonical form: keys sorted, no insignificant whitespace, numbers as
// written. Two bodies with the same canonical form are the same request,
// however they were formatted.
func parseRefundRequest(raw []byte) (refundRequest, []byte, error) {
	var req refundRequest
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return req, nil, fmt.Errorf("the body is not JSON: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return req, nil, errors.New("the body holds more than one JSON value")
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return req, nil, errors.New("the body must be a JSON object")
	}
	str := func(name string, required bool) (string, error) {
		x, present := obj[name]
		if !present {
			if required {
				return "", fmt.Errorf("missing required parameter: %s", name)
			}
			return "", nil
		}
		s, ok := x.(string)
		if !ok || required && s == "" {
			return "", fmt.Errorf("parameter %s must be a non-empty string", name)
		}
		return s, nil
	}
	var err error
	for name := range obj {
		switch name {
		case "payment", "amount", "currency", "reason", "metadata":
		default:
			return req, nil, fmt.Errorf("received unknown parameter: %s", name)
		}
	}
	if req.Payment, err = str("payment", true); err != nil {
		return req, nil, err
	}
	if req.Currency, err = str("currency", true); err != nil {
		return req, nil, err
	}
	if req.Reason, err = str("reason", false); err != nil {
		return req, nil, err
	}
	n, ok := obj["amount"].(json.Number)
	if !ok {
		return req, nil, errors.New("missing required parameter: amount (an integer in minor units)")
	}
	if req.Amount, err = strconv.ParseInt(n.String(), 10, 64); err != nil || req.Amount <= 0 {
		return req, nil, fmt.Errorf("parameter amount must be a positive integer in minor units, not %s", n)
	}
	req.Metadata = map[string]string{}
	if m, present := obj["metadata"]; present {
		mo, ok := m.(map[string]any)
		if !ok {
			return req, nil, errors.New("parameter metadata must be an object of strings")
		}
		for k, x := range mo {
			s, ok := x.(string)
			if !ok {
				return req, nil, fmt.Errorf("metadata[%s] must be a string", k)
			}
			req.Metadata[k] = s
		}
	}
	canon, err := json.Marshal(v) // maps marshal with sorted keys
	if err != nil {
		return req, nil, fmt.Errorf("canonical form: %w", err)
	}
	return req, canon, nil
}

// randomHex is n random bytes as hex.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on supported platforms
	return hex.EncodeToString(b)
}

// ParsePaymentsFault reads a fault as a command line gives it:
//
//	kind[=DURATION][:count=N]
//
// commit_then_drop, delay=5s (delay alone: held until released),
// error_500, error_429, drop_before_commit, down; count defaults to 1.
func ParsePaymentsFault(spec string) (PaymentsFault, error) {
	head, rest, hasRest := strings.Cut(spec, ":")
	kind, dur, hasDur := strings.Cut(head, "=")
	f := PaymentsFault{Kind: PaymentsFaultKind(kind), Count: 1}
	if !slices.Contains(PaymentsFaultKinds, f.Kind) {
		return f, fmt.Errorf("fault %q: unknown kind %q (want one of %s)", spec, kind, faultKindList())
	}
	if hasDur {
		if f.Kind != PayDelay {
			return f, fmt.Errorf("fault %q: only %s takes a duration", spec, PayDelay)
		}
		d, err := time.ParseDuration(dur)
		if err != nil || d < 0 {
			return f, fmt.Errorf("fault %q: bad duration %q", spec, dur)
		}
		f.Delay = d
	}
	for _, field := range strings.Split(rest, ":") {
		if !hasRest {
			break
		}
		v, ok := strings.CutPrefix(field, "count=")
		n, err := strconv.Atoi(v)
		if !ok || err != nil || n < 1 {
			return f, fmt.Errorf("fault %q: bad field %q (want count=N, N ≥ 1)", spec, field)
		}
		f.Count = n
	}
	return f, nil
}

// String is the fault as ParsePaymentsFault reads it.
func (f PaymentsFault) String() string {
	s := string(f.Kind)
	if f.Kind == PayDelay && f.Delay > 0 {
		s += "=" + f.Delay.String()
	}
	if f.Count > 1 {
		s += ":count=" + strconv.Itoa(f.Count)
	}
	return s
}

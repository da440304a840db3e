// Package httpdest is the HTTP destination: an action that is an HTTP
// request is handed to a provider's API at http(s)://host:port, under the
// duplicate control the destination declares (destination.Profile), and
// the provider's records are searched by reference where it keeps one.
//
// It writes the request itself, so that it knows the phase a failure came
// in: before the request's last byte nothing can have been done (not
// delivered), unless the provider answered all the same, which is
// evidence that it acted (see earlyAnswer); after it, without a complete
// response, anything may have been (unknown). The last byte is the commit point: it is handed over only
// while the attempt's budget lasts, and the socket's deadline is the
// budget's end, so a paused executor cannot land it later. Like every
// backend it knows nothing of the ledger.
//
// A connection whose write was answered completely is kept for the next
// write (see KeepIdle), as every HTTP client keeps its connections: a TLS
// handshake per refund would cost more than the gate. It is not Go's
// transport, which sends a request that carries an Idempotency-Key again by
// itself when a kept connection fails; here nothing is ever sent twice by
// the destination. Where the provider can neither replay a key nor be
// searched (dup=none), every write has a connection of its own: a kept
// connection that the provider closes just as the write goes out leaves
// the outcome unknown, which a key or a reference reconciles and dup=none
// holds for a person.
package httpdest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"gatehouse/destination"
	"gatehouse/internal/clock"
	"gatehouse/internal/oswait"
)

// Destination hands HTTP writes to one provider.
type Destination struct {
	scheme, host string // host is host:port
	identity     string
	// Profile is the duplicate control the destination declared.
	Profile destination.Profile
	// Clock stamps receipts; the system clock when nil.
	Clock clock.Clock
	// TLS is the client configuration for https (nil: the system's roots).
	TLS *tls.Config
	// Pause, when set, is called at each phase of a send (a test's hook to
	// hold the executor still there, as a SIGSTOP or a stalled VM would).
	Pause func(ctx context.Context, p Phase)
	// DialTimeout bounds connecting (10 s when zero); the budget bounds it
	// too.
	DialTimeout time.Duration
	// KeepIdle is how long a connection may wait idle for the next write
	// (DefaultKeepIdle when zero; negative: a connection per write). It is
	// kept well below the idle timeouts servers use (5 s and up), so that a
	// provider rarely closes a connection the gate is about to write on.
	KeepIdle time.Duration

	// authorization is the Authorization field's value from
	// $GATEHOUSE_HTTP_AUTHORIZATION, written on every request at hand-over
	// and never part of what is recorded, approved or printed.
	authorization string

	idle idleConns
}

// AuthorizationEnv names the environment variable holding the value of
// the Authorization field the provider takes ("Bearer sk_live_…", "Basic
// …"). Credentials never belong in a destination URL, a request file or
// the ledger: they come from the environment of the process that hands
// the request over.
const AuthorizationEnv = "GATEHOUSE_HTTP_AUTHORIZATION"

// DefaultKeepIdle is how long a connection waits idle for the next write
// unless KeepIdle says otherwise.
const DefaultKeepIdle = time.Second

// maxIdle bounds the connections kept idle: a worker pool's size.
const maxIdle = 32

// Phase is a point of a send where Pause is called.
type Phase string

// Phases of a send.
const (
	// PhaseConnected: connected, nothing written yet.
	PhaseConnected Phase = "connected"
	// PhaseCommit: everything but the request's last byte written; the
	// budget is checked next, then the last byte is handed over.
	PhaseCommit Phase = "commit"
)

func (d *Destination) pause(ctx context.Context, p Phase) {
	if d.Pause != nil {
		d.Pause(ctx, p)
	}
}

var (
	_ destination.Destination = (*Destination)(nil)
	_ destination.Records     = (*Destination)(nil)
	_ destination.Settler     = (*Destination)(nil)
)

// MaxResponseBytes is how much of a response is read: a provider's answer
// is a small JSON object, and one that is not is no answer the gate can use.
const MaxResponseBytes = 1 << 20

// New opens an http(s):// destination URL: scheme, host and port, and the
// duplicate control in its query (see destination.ParseProfile), e.g.
//
//	http://127.0.0.1:8080?dup=idempotency-key&window=24h&ref=metadata.gatehouse_key&search=/v1/refunds
func New(raw string) (*Destination, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", raw, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("%s: want http:// or https://", raw)
	}
	if u.User != nil {
		return nil, fmt.Errorf("%s://%s: credentials do not belong in a destination URL", u.Scheme, u.Host)
	}
	if u.Host == "" || u.Fragment != "" || (u.Path != "" && u.Path != "/") {
		return nil, fmt.Errorf("%s://%s%s: want scheme://host:port?dup=… (the request names its path)", u.Scheme, u.Host, u.Path)
	}
	p, err := destination.ParseProfile(u.Query())
	if err != nil {
		return nil, fmt.Errorf("%s://%s: %w", u.Scheme, u.Host, err)
	}
	return newDest(u.Scheme, u.Host, p)
}

// Open opens a recorded endpoint again: its identity, and its profile as
// the endpoint's Lookup recorded it.
func Open(ep destination.Endpoint) (*Destination, error) {
	scheme, host, ok := strings.Cut(ep.Destination, "://")
	if !ok || (scheme != "http" && scheme != "https") || host == "" {
		return nil, fmt.Errorf("%s is no HTTP destination", ep.Destination)
	}
	p, err := destination.ParseProfileString(ep.Lookup)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ep.Destination, err)
	}
	return newDest(scheme, host, p)
}

func newDest(scheme, host string, p destination.Profile) (*Destination, error) {
	if !strings.Contains(host, ":") {
		host += map[string]string{"http": ":80", "https": ":443"}[scheme]
	}
	auth := os.Getenv(AuthorizationEnv)
	if strings.ContainsFunc(auth, func(r rune) bool { return r < ' ' && r != '\t' || r == 0x7f }) || strings.TrimSpace(auth) != auth {
		// Never quoted: the value is a credential.
		return nil, fmt.Errorf("$%s holds a line break, another control character or surrounding blanks; set it to the field's value alone (e.g. \"Bearer sk_…\")", AuthorizationEnv)
	}
	return &Destination{scheme: scheme, host: host, identity: scheme + "://" + host, Profile: p, authorization: auth}, nil
}

// handedOver is the write's bytes as they go on the connection: the
// recorded wire with the Authorization field after Host, when the
// environment gives one.
func (d *Destination) handedOver(wire []byte) []byte {
	if d.authorization == "" {
		return wire
	}
	// The request line, then Host: the field goes after the second line.
	first := bytes.Index(wire, []byte("\r\n"))
	if first < 0 {
		return wire
	}
	second := bytes.Index(wire[first+2:], []byte("\r\n"))
	if second < 0 {
		return wire
	}
	at := first + 2 + second + 2
	out := make([]byte, 0, len(wire)+len(d.authorization)+17)
	out = append(out, wire[:at]...)
	out = append(out, "Authorization: "+d.authorization+"\r\n"...)
	return append(out, wire[at:]...)
}

// Identity implements destination.Destination: scheme://host:port.
func (d *Destination) Identity() string { return d.identity }

// Host is the host:port the write's Host field names.
func (d *Destination) Host() string { return d.host }

// LookupEndpoint implements destination.Records: the duplicate control,
// which the approval binds with the identity.
func (d *Destination) LookupEndpoint() string { return d.Profile.String() }

// SettleTime implements destination.Settler: the provider's search lag and
// a margin, unless the URL declared otherwise.
func (d *Destination) SettleTime() time.Duration { return d.Profile.Settle }

func (d *Destination) now() time.Time {
	if d.Clock == nil {
		return clock.System{}.Now()
	}
	return d.Clock.Now()
}

func notDelivered(format string, a ...any) error {
	return &destination.DeliveryError{Outcome: destination.OutcomeNotDelivered, Err: fmt.Errorf(format, a...)}
}

// Send implements destination.Destination: it writes msg.HTTP's bytes and
// classifies the answer by phase (see Classify).
func (d *Destination) Send(ctx context.Context, msg destination.Message) (destination.Receipt, error) {
	if msg.HTTP == nil {
		return destination.Receipt{}, notDelivered("%s takes HTTP requests, and attempt %d of %s is a message; nothing was sent", d.identity, msg.Attempt, msg.ActionKey)
	}
	wire := d.handedOver(msg.HTTP.Wire(d.host))
	conn, err := d.conn(ctx)
	if err != nil {
		return destination.Receipt{}, notDelivered("connect to %s: %v; nothing was written", d.identity, err)
	}
	keep := false
	defer func() { d.release(conn, keep) }()
	// The socket's deadline is the budget's end: the kernel refuses the
	// last byte after it, whatever this goroutine was doing meanwhile.
	if end, ok := ctx.Deadline(); ok {
		conn.SetDeadline(end)
	}
	// Once ctx ends the socket's deadline is put in the past, unless the
	// provider's early answer is being read (see earlyAnswer).
	var fenceMu sync.Mutex
	reading := false
	stop := context.AfterFunc(ctx, func() {
		fenceMu.Lock()
		defer fenceMu.Unlock()
		if !reading {
			conn.SetDeadline(time.Unix(1, 0))
		}
	})
	defer func() {
		if !stop() {
			keep = false // the cancellation's deadline may be on the socket
		}
	}()
	// unwritten is the answer when the request's last byte was not handed
	// over: not delivered, unless the provider answered all the same.
	unwritten := func(cause, failed error) (destination.Receipt, error) {
		fenceMu.Lock()
		reading = true
		conn.SetReadDeadline(oswait.Deadline(EarlyAnswerWait))
		fenceMu.Unlock()
		return d.earlyAnswer(conn, msg.HTTP, cause, failed)
	}
	d.pause(ctx, PhaseConnected)
	if _, err := conn.Write(wire[:len(wire)-1]); err != nil {
		return unwritten(err, notDelivered("write the request to %s: %v; its last byte was not handed over, so the provider cannot act on it", d.identity, err))
	}
	d.pause(ctx, PhaseCommit)
	if err := destination.MayCommit(ctx); err != nil {
		return unwritten(err, &destination.DeliveryError{Outcome: destination.OutcomeNotDelivered, Err: err})
	}
	if n, err := conn.Write(wire[len(wire)-1:]); n == 0 {
		return unwritten(err, notDelivered("write the request's last byte to %s: %v; nothing was committed", d.identity, err))
	}
	resp, err := http.ReadResponse(conn.r, &http.Request{Method: msg.HTTP.Method})
	if err != nil {
		return destination.Receipt{}, unknown("the request was handed over to %s but no response came (%v)", d.identity, err)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBytes+1))
	resp.Body.Close()
	if err != nil || len(body) > MaxResponseBytes {
		return destination.Receipt{Status: resp.StatusCode}, unknown("the request was handed over to %s, which answered %s but not completely (%v)", d.identity, resp.Status, err)
	}
	// Kept only when the answer is final (an interim 1xx is followed by
	// another) and ended where it said it would with nothing after it: a
	// byte more would be read as the next write's answer.
	keep = resp.StatusCode >= 200 && !resp.Close && resp.ProtoAtLeast(1, 1) && conn.r.Buffered() == 0
	rcpt, err := Classify(d.Profile, msg.HTTP.Key != "", resp.StatusCode, resp.Header, body)
	rcpt.At = d.now()
	return rcpt, err
}

// EarlyAnswerWait is how long a send whose request was not written to its
// last byte waits for an answer the provider may have sent. An answer sent
// before the provider closed arrives before the close that failed the
// write, and one sent while the executor stood still at its commit point
// arrived meanwhile, so it is there at once; the wait only covers one
// still on its way, and is kept short because a provider that is simply
// waiting for the last byte answers nothing.
const EarlyAnswerWait = 50 * time.Millisecond

// earlyAnswer reads what the provider answered to a request whose last
// byte the gate did not hand over (cause says why), and failed is the
// send's result when it answered nothing: then, as the commit point promises, it cannot have
// acted. A provider may answer before it has read the whole request (after
// its header fields, say) and act on what it read; the gate then has
// evidence that it did, and "not delivered" would invite a retry that does
// it again. So an answer is recorded as what it says: a refusal as a
// refusal (the provider did nothing, as it would say of a complete
// request), and anything else — a success with its id, an answer the gate
// cannot read — as unknown, for the provider's records to settle.
func (d *Destination) earlyAnswer(conn *keptConn, w *destination.HTTPWrite, cause, failed error) (destination.Receipt, error) {
	if _, err := conn.r.Peek(1); err != nil {
		return destination.Receipt{}, failed // not a byte of an answer: nothing was done
	}
	early := fmt.Sprintf("before the request's last byte was handed over (%v)", cause)
	resp, err := http.ReadResponse(conn.r, &http.Request{Method: w.Method})
	if err != nil {
		return destination.Receipt{}, unknown("%s wrote something %s, and not a response the gate can read (%v); it may have acted on the part it read, so its records must say what it did", d.identity, early, err)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBytes+1))
	resp.Body.Close()
	if err != nil || len(body) > MaxResponseBytes {
		return destination.Receipt{Status: resp.StatusCode}, unknown("%s answered %s %s but not completely (%v); it may have acted on the part it read, so its records must say what it did", d.identity, resp.Status, early, err)
	}
	rcpt, cerr := Classify(d.Profile, w.Key != "", resp.StatusCode, resp.Header, body)
	rcpt.At = d.now()
	switch destination.ClassifyDelivery(cerr) {
	case destination.OutcomeRejectedTemporary, destination.OutcomeRejectedPermanent:
		return rcpt, fmt.Errorf("%w (answered %s)", cerr, early)
	case destination.OutcomeContradiction:
		return rcpt, cerr
	}
	id := ""
	if rcpt.DestinationID != "" {
		id = " as " + rcpt.DestinationID
	}
	return rcpt, unknown("%s answered %s%s %s: it acted on a request the gate did not finish sending, so only its records can say what it did", d.identity, rcpt.Response, id, early)
}

func unknown(format string, a ...any) error {
	return &destination.DeliveryError{Outcome: destination.OutcomeUnknown, Err: fmt.Errorf(format, a...)}
}

// keptConn is a connection to the provider with the reader of its answers.
type keptConn struct {
	net.Conn
	r         *bufio.Reader
	idleSince time.Time // on the OS's monotonic clock
}

// idleConns are the connections waiting for the next write, newest last.
type idleConns struct {
	mu    sync.Mutex
	conns []*keptConn
}

// keeps reports whether connections are kept between writes (see the
// package doc).
func (d *Destination) keeps() bool {
	return d.KeepIdle >= 0 && (d.Profile.HasKey() || d.Profile.HasReference())
}

func (d *Destination) keepIdle() time.Duration {
	if d.KeepIdle == 0 {
		return DefaultKeepIdle
	}
	return d.KeepIdle
}

// conn is a kept connection still open and idle for less than KeepIdle,
// or a new one.
func (d *Destination) conn(ctx context.Context) (*keptConn, error) {
	for d.keeps() {
		d.idle.mu.Lock()
		n := len(d.idle.conns)
		if n == 0 {
			d.idle.mu.Unlock()
			break
		}
		c := d.idle.conns[n-1]
		d.idle.conns = d.idle.conns[:n-1]
		d.idle.mu.Unlock()
		if oswait.Now().Sub(c.idleSince) < d.keepIdle() && stillOpen(c) {
			return c, nil
		}
		c.Close()
	}
	conn, err := d.dial(ctx)
	if err != nil {
		return nil, err
	}
	return &keptConn{Conn: conn, r: bufio.NewReader(conn)}, nil
}

// stillOpen looks, without waiting, whether the provider closed an idle
// connection (or reset it, or wrote on it unasked): in each case it is not
// written on. It peeks at the socket itself: a read through the net.Conn
// with a deadline already past returns before it asks the kernel.
func stillOpen(c *keptConn) bool {
	if c.r.Buffered() > 0 {
		return false
	}
	nc := c.Conn
	if tc, ok := nc.(*tls.Conn); ok {
		nc = tc.NetConn()
	}
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	quiet := false
	err = raw.Read(func(fd uintptr) bool {
		var b [1]byte
		_, _, rerr := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		quiet = errors.Is(rerr, syscall.EAGAIN) // nothing to read, no end of stream
		return true                             // never wait for the socket
	})
	return err == nil && quiet
}

// release keeps a connection for the next write, or closes it.
func (d *Destination) release(c *keptConn, keep bool) {
	if !keep || !d.keeps() || c.SetDeadline(time.Time{}) != nil {
		c.Close()
		return
	}
	c.idleSince = oswait.Now()
	d.idle.mu.Lock()
	if len(d.idle.conns) < maxIdle {
		d.idle.conns = append(d.idle.conns, c)
		c = nil
	}
	d.idle.mu.Unlock()
	if c != nil {
		c.Close()
	}
}

// CloseIdle closes the connections kept for the next write.
func (d *Destination) CloseIdle() {
	d.idle.mu.Lock()
	conns := d.idle.conns
	d.idle.conns = nil
	d.idle.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

func (d *Destination) dial(ctx context.Context) (net.Conn, error) {
	timeout := d.DialTimeout
	if timeout == 0 {
		timeout = 10 * time.Second
	}
	dialer := net.Dialer{Deadline: oswait.Deadline(timeout)}
	conn, err := dialer.DialContext(ctx, "tcp", d.host)
	if err != nil || d.scheme != "https" {
		return conn, err
	}
	cfg := d.TLS.Clone()
	if cfg == nil {
		cfg = &tls.Config{}
	}
	if cfg.ServerName == "" {
		cfg.ServerName, _, _ = net.SplitHostPort(d.host)
	}
	tc := tls.Client(conn, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		conn.Close()
		return nil, err
	}
	return tc, nil
}

// Classify is what a complete response means under a profile (keyed: the
// request carried a provider-facing key):
//   - 2xx → accepted, with the provider's object id;
//   - 409, or an error naming a concurrent request → unknown: the provider
//     is still working on a request under the key;
//   - keyed, and 422 or an error naming a key reused with another body
//     (idempotency_error, …MISMATCH, DUPLICATE_REQUEST_ID) → contradiction;
//   - 429 → temporary;
//   - 5xx → temporary, unless keyed at a provider that stores 5xx under
//     the key: then unknown (the endpoint had started; a retry with the key
//     answers that 5xx again, and only the records can say what happened);
//   - other 4xx → permanent;
//   - anything else (1xx, 3xx) → unknown: the gate follows no redirect, and
//     a 303 after a POST means the provider acted.
func Classify(p destination.Profile, keyed bool, status int, h http.Header, body []byte) (destination.Receipt, error) {
	rcpt := destination.Receipt{Status: status, Response: response(status, body)}
	codes := errorCodes(body)
	has := func(sub string) bool {
		for _, c := range codes {
			if strings.Contains(strings.ToUpper(c), sub) {
				return true
			}
		}
		return false
	}
	keyed = keyed && p.HasKey()
	fail := func(o destination.Outcome, why string) (destination.Receipt, error) {
		return rcpt, &destination.DeliveryError{Outcome: o, Err: fmt.Errorf("%s: %s", rcpt.Response, why)}
	}
	switch {
	case status >= 200 && status < 300:
		var obj map[string]any
		if json.Unmarshal(body, &obj) == nil {
			rcpt.DestinationID = destination.Lookup(body, p.IDField)
		}
		// Stripe's header, and the spelling of providers that follow the
		// IETF draft's vocabulary.
		rcpt.Replayed = strings.EqualFold(h.Get("Idempotent-Replayed"), "true") || strings.EqualFold(h.Get("Idempotency-Replayed"), "true")
		return rcpt, nil
	case status == http.StatusConflict || has("CONCURRENT"):
		return fail(destination.OutcomeUnknown, "a request under this key is still being processed at the provider; reconcile later")
	case keyed && (status == http.StatusUnprocessableEntity || has("IDEMPOTENCY_ERROR") || has("MISMATCH") || has("DUPLICATE_REQUEST_ID")):
		return fail(destination.OutcomeContradiction, "the provider holds another request under this key")
	case status == http.StatusTooManyRequests:
		return fail(destination.OutcomeRejectedTemporary, "rate limited; nothing was done")
	case status >= 500 && keyed && p.Stores5xx:
		return fail(destination.OutcomeUnknown, "the provider stored this answer under the key once its endpoint started; the records must say what it did")
	case status >= 500 && status < 600:
		return fail(destination.OutcomeRejectedTemporary, "the provider failed before acting; may be retried")
	case status >= 400 && status < 500:
		return fail(destination.OutcomeRejectedPermanent, "refused")
	default:
		return fail(destination.OutcomeUnknown, "an answer the gate does not follow; the provider may have acted")
	}
}

// response is the provider's answer in one line for the history.
func response(status int, body []byte) string {
	s := strings.Join(strings.Fields(string(body)), " ")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	line := fmt.Sprintf("HTTP %d %s", status, http.StatusText(status))
	if s != "" {
		line += ": " + s
	}
	return line
}

// errorCodes collects the words providers put in their error bodies:
// Stripe's and the payments fake's error.type and error.code, PayPal's
// name, Shopify's errors[].code and userErrors[].code.
func errorCodes(body []byte) []string {
	var v map[string]any
	if json.Unmarshal(body, &v) != nil {
		return nil
	}
	var out []string
	str := func(m map[string]any, keys ...string) {
		for _, k := range keys {
			if s, ok := m[k].(string); ok {
				out = append(out, s)
			}
		}
	}
	str(v, "name", "code", "type")
	if e, ok := v["error"].(map[string]any); ok {
		str(e, "type", "code")
	}
	for _, k := range []string{"errors", "userErrors"} {
		if list, ok := v[k].([]any); ok {
			for _, x := range list {
				if m, ok := x.(map[string]any); ok {
					str(m, "code", "type")
				}
			}
		}
	}
	return out
}

// Lookup implements destination.Records by the profile's reference: it
// asks the provider's search for records holding the action key at Ref
// (or, when Ref and RefID are one field, the attempt's key), and reports
// each with the key at RefID as its Message-ID. A search the provider
// pages (has_more) is unavailable: a count from one page proves nothing.
func (d *Destination) Lookup(ctx context.Context, q destination.LookupQuery) (destination.LookupResult, error) {
	p := d.Profile
	if !p.HasReference() {
		return destination.LookupResult{}, fmt.Errorf("%w: %s keeps no reference the gate can search", destination.ErrLookupUnavailable, d.identity)
	}
	value := q.ActionKey
	if p.Ref == p.RefID {
		// One field holds the attempt's key: only that key can be asked
		// for, and another generation's write is not found by it.
		if value = q.MessageID; value == "" {
			return destination.LookupResult{}, fmt.Errorf("%w: %s is searched by the attempt's key, and none was given", destination.ErrLookupUnavailable, d.identity)
		}
	}
	u := d.identity + p.Search + "?" + url.QueryEscape(queryName(p.Ref)) + "=" + url.QueryEscape(value)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return destination.LookupResult{}, fmt.Errorf("%w: %v", destination.ErrLookupUnavailable, err)
	}
	if d.authorization != "" {
		req.Header.Set("Authorization", d.authorization)
	}
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: d.TLS},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		return destination.LookupResult{}, fmt.Errorf("%w: search %s: %v", destination.ErrLookupUnavailable, d.identity, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16*MaxResponseBytes))
	if err != nil || resp.StatusCode != http.StatusOK {
		return destination.LookupResult{}, fmt.Errorf("%w: search %s answered %s (%v)", destination.ErrLookupUnavailable, d.identity, resp.Status, err)
	}
	records, err := listOf(body)
	if err != nil {
		return destination.LookupResult{}, fmt.Errorf("%w: search %s: %v", destination.ErrLookupUnavailable, d.identity, err)
	}
	var res destination.LookupResult
	for _, rec := range records {
		res.Messages = append(res.Messages, destination.FoundMessage{
			MessageID: destination.Lookup(rec, p.RefID), ActionKey: destination.Lookup(rec, p.Ref),
			Record: rec, DestinationID: destination.Lookup(rec, p.IDField)})
	}
	return res, nil
}

// listOf reads a search answer: {"data": [...]} (Stripe's list, the
// payments fake's), an object whose one list is the answer ({"refunds":
// [...]}), or a bare array.
func listOf(body []byte) ([]json.RawMessage, error) {
	var list []json.RawMessage
	if json.Unmarshal(body, &list) == nil {
		return list, nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(body, &obj); err != nil {
		return nil, errors.New("the answer is neither a list nor an object holding one")
	}
	if more, ok := obj["has_more"]; ok && string(more) != "false" {
		return nil, errors.New("the answer is paged (has_more); one page proves nothing")
	}
	var lists []string
	for k, v := range obj {
		if json.Unmarshal(v, &list) == nil && list != nil {
			lists = append(lists, k)
		}
	}
	switch {
	case obj["data"] != nil:
		if err := json.Unmarshal(obj["data"], &list); err != nil || list == nil {
			return nil, errors.New("its data is not a list")
		}
		return list, nil
	case len(lists) == 1:
		err := json.Unmarshal(obj[lists[0]], &list)
		return list, err
	}
	return nil, fmt.Errorf("the answer holds %d lists, not one", len(lists))
}

// queryName is a dotted field as a search parameter: metadata.gatehouse_key
// → metadata[gatehouse_key].
func queryName(field string) string {
	parts := strings.Split(field, ".")
	out := parts[0]
	for _, p := range parts[1:] {
		out += "[" + p + "]"
	}
	return out
}

package httpdest_test

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gatehouse/destination"
	"gatehouse/destination/httpdest"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// profiles are the duplicate controls the outcome table covers, as their
// destination URLs declare them.
var profiles = []struct{ name, query string }{
	{"idempotency-key", "dup=idempotency-key"},
	{"idempotency-key, stores 5xx", "dup=idempotency-key&stores5xx=true&ref=metadata.gatehouse_key&search=/v1/refunds"},
	{"reference", "dup=reference&ref=metadata.gatehouse_key&search=/v1/refunds&lag=30s"},
	{"none", "dup=none"},
}

// phases are where a provider fails (or what it answers), in the order of
// a send.
var phases = []mode{
	{name: "connection refused"},
	{name: "reset before the request is read", reset: true},
	{name: "request read, no response", drop: true},
	{name: "response cut short", half: true},
	{name: "201", status: 201, body: `{"id": "re_0123", "object": "refund", "status": "succeeded"}`},
	{name: "201 replayed", status: 201, body: `{"id": "re_0123"}`, header: http.Header{"Idempotent-Replayed": {"true"}}},
	{name: "409 concurrent_request", status: 409, body: errBody("concurrent_request")},
	{name: "400 IDEMPOTENCY_CONCURRENT_REQUEST", status: 400, body: `{"errors": [{"code": "IDEMPOTENCY_CONCURRENT_REQUEST"}]}`},
	{name: "422 idempotency_error", status: 422, body: errBody("idempotency_error")},
	{name: "400 IDEMPOTENCY_KEY_PARAMETER_MISMATCH", status: 400, body: `{"errors": [{"code": "IDEMPOTENCY_KEY_PARAMETER_MISMATCH"}]}`},
	{name: "400 invalid_request_error", status: 400, body: errBody("invalid_request_error")},
	{name: "404", status: 404, body: errBody("resource_missing")},
	{name: "429", status: 429, body: errBody("rate_limit_error"), header: http.Header{"Retry-After": {"1"}}},
	{name: "500", status: 500, body: errBody("api_error")},
	{name: "503", status: 503, body: errBody("api_error")},
	{name: "303", status: 303, body: ""},
	{name: "201 before the last byte", early: true, status: 201, body: `{"id": "re_0123", "object": "refund"}`},
	{name: "400 before the last byte", early: true, status: 400, body: errBody("invalid_request_error")},
	{name: "422 idempotency_error before the last byte", early: true, status: 422, body: errBody("idempotency_error")},
}

func refund() destination.Request {
	return destination.Request{Method: "POST", Path: "/v1/refunds",
		Body: []byte(`{"payment": "pay_1", "amount": 1250, "currency": "eur", "reason": "requested_by_customer"}`)}
}

// bigRefund is a refund whose body no socket buffer holds whole (8 MiB of
// notes), so that a provider that answers after the header fields and
// closes does so while the write is still under way.
func bigRefund() destination.Request {
	r := refund()
	r.Body = []byte(`{"payment": "pay_1", "amount": 1250, "currency": "eur", "notes": "` + strings.Repeat("n", 8<<20) + `"}`)
	return r
}

// TestOutcomeByPhase drives every cell of the outcome table against a real
// loopback provider that fails at that phase, and compares the table with
// testdata/outcomes.golden, which docs/destinations.md quotes. A cell
// whose classification moves (a 5xx taken as delivered, a response cut
// short taken as refused) changes the table and fails.
func TestOutcomeByPhase(t *testing.T) {
	var out bytes.Buffer
	fmt.Fprintf(&out, "| phase |")
	for _, p := range profiles {
		fmt.Fprintf(&out, " %s |", p.name)
	}
	fmt.Fprintf(&out, "\n| --- |%s\n", strings.Repeat(" --- |", len(profiles)))
	for _, ph := range phases {
		fmt.Fprintf(&out, "| %s |", ph.name)
		for _, pr := range profiles {
			o, rcpt, n := sendAt(t, ph, pr.query)
			cell := string(o)
			if rcpt.DestinationID != "" {
				cell += " (id " + rcpt.DestinationID + ")"
			}
			if rcpt.Replayed {
				cell += ", replayed"
			}
			// A refusal before the last byte must leave the provider
			// without a complete request; after it, with exactly one.
			// A provider that answered before the last byte read none,
			// and its answer is never taken for "not delivered".
			switch {
			case ph.early && (n != 0 || o == destination.OutcomeNotDelivered):
				t.Errorf("%s / %s: %s, the provider read %d complete request(s), want an answer's outcome and none", ph.name, pr.name, o, n)
			case ph.early:
			case o == destination.OutcomeNotDelivered && n != 0:
				t.Errorf("%s / %s: not delivered, but the provider read %d complete request(s)", ph.name, pr.name, n)
			case o != destination.OutcomeNotDelivered && n != 1:
				t.Errorf("%s / %s: %s, but the provider read %d complete request(s), want 1", ph.name, pr.name, o, n)
			}
			fmt.Fprintf(&out, " %s |", cell)
		}
		fmt.Fprintln(&out)
	}
	golden := filepath.Join("testdata", "outcomes.golden")
	if *update {
		if err := os.WriteFile(golden, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out.Bytes(), want) {
		t.Errorf("outcome table changed (go test -run TestOutcomeByPhase -update to accept):\n%s\nwant:\n%s", out.Bytes(), want)
	}
}

// sendAt sends one refund to a provider failing at ph under the profile
// query, and returns the outcome, the receipt and how many complete
// requests the provider read.
func sendAt(t *testing.T, ph mode, query string) (destination.Outcome, destination.Receipt, int) {
	t.Helper()
	p := startProvider(t, ph)
	addr := p.url()
	if ph.name == "connection refused" {
		p.ln.Close()
	}
	d, err := httpdest.New(addr + "?" + query)
	if err != nil {
		t.Fatal(err)
	}
	if ph.reset {
		// Hold the executor once connected until the provider has reset
		// the connection, so that nothing is written to it.
		d.Pause = func(_ context.Context, at httpdest.Phase) {
			if at == httpdest.PhaseConnected {
				<-p.resetDone
			}
		}
	}
	req := refund()
	if ph.early {
		req = bigRefund()
	}
	w, err := req.Write(d.Profile, "refund-key", "gh_provider_key")
	if err != nil {
		t.Fatal(err)
	}
	rcpt, err := d.Send(ctxT(t), destination.Message{ActionKey: "refund-key", Attempt: 1, TransportID: "t1", HTTP: &w})
	if ph.early && p.answeredEarly() != 1 {
		t.Fatalf("%s: the provider answered %d request(s) before their last byte, want 1 (%v)", ph.name, p.answeredEarly(), err)
	}
	return destination.ClassifyDelivery(err), rcpt, p.completed()
}

// TestWireIsWhatArrives: the provider receives exactly the bytes the
// attempt records (HTTPWrite.Wire), key header and reference fields
// included, and nothing else; with $GATEHOUSE_HTTP_AUTHORIZATION set, those
// bytes with one Authorization field after Host, which the destination
// writes at hand-over and no attempt records.
func TestWireIsWhatArrives(t *testing.T) {
	for _, auth := range []string{"", "Bearer sk_test_1"} {
		t.Run(fmt.Sprintf("authorization %q", auth), func(t *testing.T) {
			t.Setenv(httpdest.AuthorizationEnv, auth)
			p := startProvider(t, mode{status: 201, body: `{"id": "re_1"}`})
			d, err := httpdest.New(p.url() + "?dup=idempotency-key&ref=metadata.gatehouse_key&search=/v1/refunds")
			if err != nil {
				t.Fatal(err)
			}
			w, err := refund().Write(d.Profile, "refund-key", "gh_k1")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := d.Send(ctxT(t), destination.Message{ActionKey: "refund-key", HTTP: &w}); err != nil {
				t.Fatal(err)
			}
			recorded := w.Wire(d.Host())
			want := string(recorded)
			if auth != "" {
				head := "POST /v1/refunds HTTP/1.1\r\nHost: " + d.Host() + "\r\n"
				want = head + "Authorization: " + auth + "\r\n" + strings.TrimPrefix(want, head)
			}
			if got := string(p.wires[0]); got != want {
				t.Fatalf("the provider received\n%q\nwant\n%q", got, want)
			}
			for _, s := range []string{"Idempotency-Key: gh_k1\r\n", `"metadata":{"gatehouse_key":"refund-key","gatehouse_ref":"gh_k1"}`} {
				if !bytes.Contains(recorded, []byte(s)) {
					t.Errorf("the write lacks %s:\n%s", s, recorded)
				}
			}
			if bytes.Contains(recorded, []byte("Authorization")) {
				t.Errorf("the recorded bytes carry the credential:\n%s", recorded)
			}
		})
	}
}

// stalledCtx is a send's context as a paused process finds it on waking:
// its deadline has passed, but the goroutine that would cancel it has not
// run yet, so only the deadline tells the sender to stop.
type stalledCtx struct {
	context.Context
	end time.Time
}

func (c stalledCtx) Deadline() (time.Time, bool) { return c.end, true }

// TestPausedExecutorNeverHandsOverTheLastByte: an executor held at its
// commit point (everything but the last byte written) until its budget has
// ended, and woken with its context not yet cancelled, does not write the
// last byte: not delivered, and the provider never reads a complete
// request. It fails if the check before the last byte and the socket's
// deadline are both removed.
func TestPausedExecutorNeverHandsOverTheLastByte(t *testing.T) {
	p := startProvider(t, mode{status: 201, body: `{"id": "re_1"}`})
	d, err := httpdest.New(p.url() + "?dup=idempotency-key")
	if err != nil {
		t.Fatal(err)
	}
	end := time.Now().Add(200 * time.Millisecond)
	d.Pause = func(_ context.Context, at httpdest.Phase) {
		if at == httpdest.PhaseCommit {
			<-time.After(time.Until(end) + 50*time.Millisecond)
		}
	}
	w, err := refund().Write(d.Profile, "refund-key", "gh_k1")
	if err != nil {
		t.Fatal(err)
	}
	_, err = d.Send(stalledCtx{Context: context.Background(), end: end}, destination.Message{ActionKey: "refund-key", HTTP: &w})
	if o := destination.ClassifyDelivery(err); o != destination.OutcomeNotDelivered {
		t.Fatalf("paused past its budget at the commit point: %s (%v), want not delivered", o, err)
	}
	// The next send on a fresh budget arrives; the paused one never did.
	d.Pause = nil
	if _, err := d.Send(ctxT(t), destination.Message{ActionKey: "refund-key", HTTP: &w}); err != nil {
		t.Fatal(err)
	}
	if n := p.completed(); n != 1 {
		t.Fatalf("the provider read %d complete requests, want only the second send's", n)
	}
}

// TestEarlyAnswerWhilePausedAtTheCommitPoint: an executor stands still at
// its commit point past its budget while the provider, having read the
// header fields, answers 201 and closes. The last byte is never handed
// over, yet the provider says it acted: unknown, naming its id, never
// "not delivered".
func TestEarlyAnswerWhilePausedAtTheCommitPoint(t *testing.T) {
	p := startProvider(t, mode{early: true, status: 201, body: `{"id": "re_early", "object": "refund"}`})
	d, err := httpdest.New(p.url() + "?dup=idempotency-key")
	if err != nil {
		t.Fatal(err)
	}
	end := time.Now().Add(200 * time.Millisecond)
	d.Pause = func(_ context.Context, at httpdest.Phase) {
		if at == httpdest.PhaseCommit {
			<-p.earlyDone
			<-time.After(time.Until(end) + 50*time.Millisecond)
		}
	}
	w, err := refund().Write(d.Profile, "refund-key", "gh_k1")
	if err != nil {
		t.Fatal(err)
	}
	rcpt, err := d.Send(stalledCtx{Context: context.Background(), end: end}, destination.Message{ActionKey: "refund-key", HTTP: &w})
	if o := destination.ClassifyDelivery(err); o != destination.OutcomeUnknown || rcpt.DestinationID != "re_early" ||
		!strings.Contains(err.Error(), "re_early") || !strings.Contains(err.Error(), destination.ErrBudgetSpent.Error()) {
		t.Fatalf("answered while the executor stood still: %s, id %q (%v); want unknown naming re_early and the budget", o, rcpt.DestinationID, err)
	}
}

// TestLookupByReference: the search finds the records holding the action
// key, reports the gate's key at refid as their Message-ID and the
// provider's id; a paged answer or a failing search is unavailable, never
// "nothing found".
func TestLookupByReference(t *testing.T) {
	cases := []struct {
		name, body string
		status     int
		wantErr    bool
		want       int
	}{
		{"found", `{"object": "list", "data": [{"id": "re_1", "amount": 1250, "metadata": {"gatehouse_key": "k", "gatehouse_ref": "gh_1"}}]}`, 200, false, 1},
		{"nothing", `{"object": "list", "data": []}`, 200, false, 0},
		{"paged", `{"object": "list", "data": [], "has_more": true}`, 200, true, 0},
		{"down", errBody("api_error"), 503, true, 0},
		{"not a list", `{"id": "re_1"}`, 200, true, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var asked string
			srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				asked = r.URL.RawQuery
				w.WriteHeader(c.status)
				w.Write([]byte(c.body))
			})}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			go srv.Serve(ln)
			t.Cleanup(func() { srv.Close() })
			d, err := httpdest.New("http://" + ln.Addr().String() + "?dup=reference&ref=metadata.gatehouse_key&search=/v1/refunds")
			if err != nil {
				t.Fatal(err)
			}
			res, err := d.Lookup(ctxT(t), destination.LookupQuery{ActionKey: "k", MessageID: "gh_1"})
			if c.wantErr {
				if err == nil || !strings.Contains(err.Error(), destination.ErrLookupUnavailable.Error()) {
					t.Fatalf("lookup: %v, want unavailable", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if asked != "metadata%5Bgatehouse_key%5D=k" {
				t.Errorf("searched %q", asked)
			}
			if len(res.Messages) != c.want {
				t.Fatalf("found %d, want %d", len(res.Messages), c.want)
			}
			if c.want == 1 {
				if m := res.Messages[0]; m.MessageID != "gh_1" || m.ActionKey != "k" || m.DestinationID != "re_1" {
					t.Fatalf("found %+v", m)
				}
			}
		})
	}
}

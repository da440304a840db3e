package ledger_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"

	"gatehouse/fakes"
)

// payments is the payments fake (fakes.Payments, docs/payments.md) served
// on loopback, on the world's clock, with what the tests ask of it.
type payments struct {
	*fakes.Payments
	srv *httptest.Server
}

func startPayments(t *testing.T, clk *fakes.Clock) *payments {
	p := &payments{Payments: fakes.NewPayments(clk, fakes.PaymentsOptions{})}
	p.srv = httptest.NewServer(p.Handler())
	// The fake first, so that a held response goes out before the server
	// waits for it.
	t.Cleanup(func() { p.Close(); p.srv.Close() })
	return p
}

// url is the fake's destination URL under a duplicate control.
func (p *payments) url(query string) string { return p.srv.URL + "?" + query }

// fault queues one fault for the next write it applies to.
func (p *payments) fault(t *testing.T, kind fakes.PaymentsFaultKind) {
	t.Helper()
	if err := p.QueueFault(fakes.PaymentsFault{Kind: kind}); err != nil {
		t.Fatal(err)
	}
}

// refunds is how many refunds the fake created, whatever key they carry.
func (p *payments) refunds() int { return len(p.Records().Records) }

// writes is how many well-formed writes reached the fake.
func (p *payments) writes() int {
	n := 0
	for _, c := range p.Records().RequestsPerKey {
		n += c
	}
	return n
}

// post sends a write to the fake directly, as someone other than the gate
// would, and returns its status.
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

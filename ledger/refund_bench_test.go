package ledger_test

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"gatehouse/destination"
	"gatehouse/destination/httpdest"
	"gatehouse/fakes"
	"gatehouse/ledger"
)

// refundConcurrency is how many refunds are in flight at once in both
// halves of the pair: a team's refund worker pool.
const refundConcurrency = 8

// BenchmarkRefund is gated HTTP refunds against a blind HTTP client loop,
// at the same concurrency, against the same payments fake on loopback
// (docs/BENCHMARKS.md). Gated: each refund is an approved action, executed
// through the gate (the deciding transaction, the recorded intent with its
// exact bytes, the write on a connection of its own, the outcome and the
// provider's id recorded). Blind: the same body POSTed with an
// Idempotency-Key by net/http's client, keeping its connections, recording
// nothing. Proposing and approving are outside the timer: they happen
// before a refund is due, not when it is sent.
func BenchmarkRefund(b *testing.B) {
	body := func(i int) []byte {
		return fmt.Appendf(nil, `{"payment": "pay_%d", "amount": 1250, "currency": "eur", "reason": "requested_by_customer"}`, i)
	}
	b.Run("gated", func(b *testing.B) {
		l, ctx, _ := benchLedger(b)
		pay := fakes.NewPayments(nil, fakes.PaymentsOptions{})
		srv := httptest.NewServer(pay.Handler())
		b.Cleanup(func() { pay.Close(); srv.Close() })
		d, err := httpdest.New(srv.URL + "?dup=idempotency-key&ref=metadata.gatehouse_key&search=/v1/refunds")
		if err != nil {
			b.Fatal(err)
		}
		ep := destination.EndpointOf(d)
		if _, err := l.Claim(ctx, ledger.TaskRef{ID: "task-1"}, "wf"); err != nil {
			b.Fatal(err)
		}
		keys := make([]string, b.N)
		for i := range keys {
			req, err := destination.ParseRequest(fmt.Appendf(nil, `{"method": "POST", "path": "/v1/refunds", "body": %s}`, body(i)))
			if err != nil {
				b.Fatal(err)
			}
			canon, err := req.Canonical()
			if err != nil {
				b.Fatal(err)
			}
			a, err := l.Propose(ctx, ledger.Proposal{Task: ledger.TaskRef{ID: "task-1"}, Customer: "c1", Event: fmt.Sprint("return-", i),
				ActionType: "refund", Target: "order-1", Destination: ep.Destination, Lookup: ep.Lookup, Request: canon, Actor: "wf"})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := l.Approve(ctx, a.Key, "lead", nil); err != nil {
				b.Fatal(err)
			}
			keys[i] = a.Key
		}
		var next, failed atomic.Int64
		b.SetParallelism(refundConcurrency)
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				k := keys[next.Add(1)-1]
				if _, err := l.Execute(ctx, ledger.ExecuteRequest{Key: k, Executor: "wf"}, d); err != nil {
					failed.Add(1)
				}
			}
		})
		b.StopTimer()
		if n := len(pay.Records().Records); failed.Load() != 0 || n != b.N {
			b.Fatalf("%d refunds at the provider, %d failed sends, want %d and 0", n, failed.Load(), b.N)
		}
	})
	b.Run("blind", func(b *testing.B) {
		pay := fakes.NewPayments(nil, fakes.PaymentsOptions{})
		srv := httptest.NewServer(pay.Handler())
		b.Cleanup(func() { pay.Close(); srv.Close() })
		client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: refundConcurrency}}
		var next, failed atomic.Int64
		b.SetParallelism(refundConcurrency)
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				i := int(next.Add(1) - 1)
				req, err := http.NewRequest(http.MethodPost, srv.URL+"/v1/refunds", bytes.NewReader(body(i)))
				if err != nil {
					failed.Add(1)
					continue
				}
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Idempotency-Key", fmt.Sprint("blind-", i))
				resp, err := client.Do(req)
				if err != nil {
					failed.Add(1)
					continue
				}
				var buf bytes.Buffer
				buf.ReadFrom(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusCreated {
					failed.Add(1)
				}
			}
		})
		b.StopTimer()
		if n := len(pay.Records().Records); failed.Load() != 0 || n != b.N {
			b.Fatalf("%d refunds at the provider, %d failed posts, want %d and 0", n, failed.Load(), b.N)
		}
	})
}

package ledger_test

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"gatehouse/destination"
	"gatehouse/destination/httpdest"
	"gatehouse/fakes"
	"gatehouse/ledger"
)

// refundConcurrency is how many refunds are in flight at once in both
// halves of the pair: a team's refund worker pool.
const refundConcurrency = 8

// providerLatencies are the provider's service times the refund pair runs
// against: an instant fake (what the gate itself costs shows whole), and
// providers that take a few to tens of milliseconds per refund, as one
// across a network does.
var providerLatencies = []struct {
	name    string
	latency time.Duration
}{{"instant", 0}, {"2ms", 2 * time.Millisecond}, {"10ms", 10 * time.Millisecond}, {"50ms", 50 * time.Millisecond}}

// slowProvider serves h after latency, the provider's own time per request.
func slowProvider(h http.Handler, latency time.Duration) http.Handler {
	if latency == 0 {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(latency) // the provider at work, not a wait for a condition
		h.ServeHTTP(w, r)
	})
}

// BenchmarkRefund is gated HTTP refunds against a blind HTTP client loop,
// at the same concurrency, against the same payments fake on loopback
// (docs/BENCHMARKS.md), for each provider latency. Gated: each refund is
// an approved action, executed through the gate (the deciding
// transaction, the recorded intent with its exact bytes, the write, the
// outcome and the provider's id recorded; concurrent executions share
// their transactions, see groupCommit). Blind: the same body POSTed with
// an Idempotency-Key by net/http's client, recording nothing. Both keep
// their connections. Proposing and approving are outside the timer: they
// happen before a refund is due, not when it is sent.
func BenchmarkRefund(b *testing.B) {
	for _, p := range providerLatencies {
		b.Run("provider="+p.name+"/gated", func(b *testing.B) { benchGatedRefunds(b, p.latency) })
		b.Run("provider="+p.name+"/blind", func(b *testing.B) { benchBlindRefunds(b, p.latency) })
	}
}

func refundBody(i int) []byte {
	return fmt.Appendf(nil, `{"payment": "pay_%d", "amount": 1250, "currency": "eur", "reason": "requested_by_customer"}`, i)
}

func benchGatedRefunds(b *testing.B, latency time.Duration) {
	l, ctx, _ := benchLedger(b)
	pay := fakes.NewPayments(nil, fakes.PaymentsOptions{})
	srv := httptest.NewServer(slowProvider(pay.Handler(), latency))
	b.Cleanup(func() { pay.Close(); srv.Close() })
	d, err := httpdest.New(srv.URL + "?dup=idempotency-key&ref=metadata.gatehouse_key&search=/v1/refunds")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(d.CloseIdle)
	ep := destination.EndpointOf(d)
	if _, err := l.Claim(ctx, ledger.TaskRef{ID: "task-1"}, "wf"); err != nil {
		b.Fatal(err)
	}
	keys := make([]string, b.N)
	for i := range keys {
		req, err := destination.ParseRequest(fmt.Appendf(nil, `{"method": "POST", "path": "/v1/refunds", "body": %s}`, refundBody(i)))
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
	var groups, grouped atomic.Int64
	ledger.OnGroup(l, func(n int) { groups.Add(1); grouped.Add(int64(n)) })
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
	if g := groups.Load(); g > 0 {
		b.ReportMetric(float64(grouped.Load())/float64(g), "writes/tx")
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "refunds/s")
	if n := len(pay.Records().Records); failed.Load() != 0 || n != b.N {
		b.Fatalf("%d refunds at the provider, %d failed sends, want %d and 0", n, failed.Load(), b.N)
	}
}

func benchBlindRefunds(b *testing.B, latency time.Duration) {
	pay := fakes.NewPayments(nil, fakes.PaymentsOptions{})
	srv := httptest.NewServer(slowProvider(pay.Handler(), latency))
	b.Cleanup(func() { pay.Close(); srv.Close() })
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2 * refundConcurrency}}
	b.Cleanup(client.CloseIdleConnections)
	var next, failed atomic.Int64
	b.SetParallelism(refundConcurrency)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := int(next.Add(1) - 1)
			req, err := http.NewRequest(http.MethodPost, srv.URL+"/v1/refunds", bytes.NewReader(refundBody(i)))
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
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "refunds/s")
	if n := len(pay.Records().Records); failed.Load() != 0 || n != b.N {
		b.Fatalf("%d refunds at the provider, %d failed posts, want %d and 0", n, failed.Load(), b.N)
	}
}

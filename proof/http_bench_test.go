package proof_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gatehouse/destination"
	"gatehouse/destination/httpdest"
	"gatehouse/fakes"
	"gatehouse/ledger"
)

// refundBody is refund i's request body.
func refundBody(i int) string {
	return fmt.Sprintf(`{"payment": "pay_%06d", "amount": %d, "currency": "eur", "reason": "requested_by_customer"}`, i, 100+i)
}

// TestGatedRefundsVersusBlindLoop measures, against one payments fake, a
// blind HTTP client loop (no ledger: each refund POSTed once with an
// Idempotency-Key, keeping its connections, as the HTTP destination does)
// and gated refunds (each an approved action executed through the gate:
// the durable intent with its bytes, the hand-over, the outcome) at the
// same concurrency, in interleaved rounds so that the machine's load falls
// on both alike; the medians are compared, for an instant fake and for a
// fake that takes 10 ms per refund (a provider across a network takes
// longer still). Every refund must be at the fake once. 300 refunds in
// make test (the ratios logged); -proof.bench: 3 rounds of 3,000, and the
// ratio at 10 ms asserted ≥ 0.5 (docs/BENCHMARKS.md).
func TestGatedRefundsVersusBlindLoop(t *testing.T) {
	n, rounds := 300, 1
	if fullBench() {
		n, rounds = 3000, 3
	}
	for _, latency := range []time.Duration{0, 10 * time.Millisecond} {
		pay := fakes.NewPayments(nil, fakes.PaymentsOptions{})
		h := pay.Handler()
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			time.Sleep(latency) // the provider at work
			h.ServeHTTP(w, r)
		}))
		t.Cleanup(func() { pay.Close(); srv.Close() })
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
		t.Cleanup(cancel)
		var blindRates, gatedRates []float64
		for round := range rounds {
			blind := blindRefunds(t, ctx, srv.URL, round, n)
			gated := gatedRefunds(t, ctx, srv.URL, round, n)
			br, gr := float64(n)/blind.Seconds(), float64(n)/gated.Seconds()
			t.Logf("refund benchmark, provider latency %v, round %d, %d refunds at concurrency %d: blind loop %.2f s (%.0f refunds/s); gated %.2f s (%.0f refunds/s): gated = %.0f%% of the blind loop",
				latency, round, n, benchConcurrency, blind.Seconds(), br, gated.Seconds(), gr, 100*gr/br)
			blindRates, gatedRates = append(blindRates, br), append(gatedRates, gr)
		}
		rec := pay.Records()
		dups := 0
		for _, c := range rec.PerKey {
			if c > 1 {
				dups++
			}
		}
		if len(rec.Records) != 2*n*rounds || dups != 0 {
			t.Fatalf("the fake holds %d refunds (want %d), %d action keys twice", len(rec.Records), 2*n*rounds, dups)
		}
		b, g := median(blindRates), median(gatedRates)
		t.Logf("refund benchmark, provider latency %v, medians of %d round(s): blind loop %.0f refunds/s, gated %.0f refunds/s: gated = %.0f%% of the blind loop; the fake holds %d refunds, no key twice",
			latency, rounds, b, g, 100*g/b, len(rec.Records))
		if fullBench() && latency > 0 && g < 0.5*b {
			t.Fatalf("provider latency %v: gated %.0f refunds/s is below half the blind loop's %.0f", latency, g, b)
		}
	}
}

// blindRefunds POSTs n refunds with keys, benchConcurrency at a time.
func blindRefunds(t *testing.T, ctx context.Context, base string, round, n int) time.Duration {
	t.Helper()
	tr := &http.Transport{MaxIdleConnsPerHost: benchConcurrency}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	var next atomic.Int64
	var failed atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	for range benchConcurrency {
		wg.Go(func() {
			for {
				i := int(next.Add(1))
				if i > n {
					return
				}
				body := refundBody(i)
				body = body[:len(body)-1] + fmt.Sprintf(`, "metadata": {"gatehouse_key": "blind-%d-%d"}}`, round, i)
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/refunds", bytes.NewReader([]byte(body)))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Idempotency-Key", fmt.Sprintf("blind-%d-%d", round, i))
				resp, err := hc.Do(req)
				if err != nil {
					failed.Add(1)
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusCreated {
					failed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	if f := failed.Load(); f > 0 {
		t.Fatalf("blind loop: %d of %d refunds failed", f, n)
	}
	return took
}

// gatedRefunds approves n refunds in a fresh ledger (not timed), then
// executes them through the gate, benchConcurrency at a time.
func gatedRefunds(t *testing.T, ctx context.Context, base string, round, n int) time.Duration {
	t.Helper()
	d, err := httpdest.New(base + "?dup=idempotency-key&ref=metadata.gatehouse_key&search=/v1/refunds")
	must(t, err)
	defer d.CloseIdle()
	l, err := ledger.Open(filepath.Join(t.TempDir(), "ledger.db"), ledger.WithLease(benchLease))
	must(t, err)
	defer l.Close()
	ep := destination.EndpointOf(d)
	keys := make([]string, n)
	for i := range n {
		task := ledger.TaskRef{ID: fmt.Sprintf("task-%d", i)}
		_, err := l.Claim(ctx, task, "wf-refund")
		must(t, err)
		req, err := destination.ParseRequest([]byte(`{"method": "POST", "path": "/v1/refunds", "body": ` + refundBody(i+1) + `}`))
		must(t, err)
		canon, err := req.Canonical()
		must(t, err)
		a, err := l.Propose(ctx, ledger.Proposal{Task: task, Customer: fmt.Sprintf("cust-%d", i), Event: fmt.Sprintf("return-%d-%d", round, i),
			ActionType: "refund", Target: fmt.Sprintf("order-%d", i), Destination: ep.Destination, Lookup: ep.Lookup, Request: canon, Actor: "wf-refund"})
		must(t, err)
		_, err = l.Approve(ctx, a.Key, "lead", nil)
		must(t, err)
		keys[i] = a.Key
	}
	var next atomic.Int64
	var failed atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	for range benchConcurrency {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if _, err := l.Execute(ctx, ledger.ExecuteRequest{Key: keys[i], Executor: "wf-refund"}, d); err != nil {
					failed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	if f := failed.Load(); f > 0 {
		t.Fatalf("gated: %d of %d refunds failed", f, n)
	}
	return took
}

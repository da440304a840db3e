package review_test

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"gatehouse/ledger"
	"gatehouse/review"
	"gatehouse/review/reviewtest"
)

// benchActions is the size the issue asks the review to stay fast at:
// 100,000 actions with 1,000,000 history lines.
const benchActions = 100_000

var big struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// bigLedger builds the 100,000-action ledger once per test process, or
// reads the one GATEHOUSE_REVIEW_BENCH_LEDGER names (built by
// reviewtest.Fill earlier; it is only read).
func bigLedger(b *testing.B) string {
	if p := os.Getenv("GATEHOUSE_REVIEW_BENCH_LEDGER"); p != "" {
		return p
	}
	big.once.Do(func() {
		if big.dir, big.err = os.MkdirTemp("", "gatehouse-review-bench-"); big.err != nil {
			return
		}
		big.path = filepath.Join(big.dir, "big.db")
		big.err = reviewtest.Fill(big.path, benchActions)
	})
	if big.err != nil {
		b.Fatal(big.err)
	}
	return big.path
}

func TestMain(m *testing.M) {
	code := m.Run()
	if big.dir != "" {
		os.RemoveAll(big.dir)
	}
	os.Exit(code)
}

func openBig(b *testing.B) (*ledger.Ledger, *review.History) {
	l, err := ledger.OpenReadOnly(bigLedger(b))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })
	h, err := review.Load(context.Background(), l)
	if err != nil {
		b.Fatal(err)
	}
	if len(h.Events) != benchActions*reviewtest.LinesPerAction+2 {
		b.Fatalf("%d lines, want %d", len(h.Events), benchActions*reviewtest.LinesPerAction+2)
	}
	return l, h
}

// BenchmarkReviewLoad reads the whole history and its facts once: what
// opening the review costs before its first frame.
func BenchmarkReviewLoad(b *testing.B) {
	l, err := ledger.OpenReadOnly(bigLedger(b))
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	for b.Loop() {
		if _, err := review.Load(context.Background(), l); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/load")
}

// BenchmarkReviewSelect applies a timeline filter over the million lines.
func BenchmarkReviewSelect(b *testing.B) {
	_, h := openBig(b)
	for _, bc := range []struct {
		name string
		f    review.Filter
	}{
		{"All", review.Filter{}},
		{"Denials", review.Filter{Group: 1}},
		{"Customer", review.Filter{Subject: "cust-0042"}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				if len(h.Select(bc.f)) == 0 {
					b.Fatal("nothing selected")
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/select")
		})
	}
}

// BenchmarkReviewRates counts the million lines per day and per hour.
func BenchmarkReviewRates(b *testing.B) {
	_, h := openBig(b)
	for _, bc := range []struct {
		name  string
		width time.Duration
	}{{"PerDay", 24 * time.Hour}, {"PerHour", time.Hour}} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				if len(h.Rates(0, len(h.Events), bc.width)) == 0 {
					b.Fatal("no buckets")
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/rates")
		})
	}
}

// BenchmarkReviewReport builds the report at the stop and writes it as
// Markdown and JSON (every action of the 100,000 listed in its bucket).
func BenchmarkReviewReport(b *testing.B) {
	l, h := openBig(b)
	ctx := context.Background()
	for b.Loop() {
		r, err := review.Build(ctx, l, h, review.Options{})
		if err != nil {
			b.Fatal(err)
		}
		if r.Stop == nil {
			b.Fatal("no stop")
		}
		if err := r.WriteMarkdown(io.Discard); err != nil {
			b.Fatal(err)
		}
		if err := r.WriteJSON(io.Discard); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/report")
}

package tui

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"gatehouse/ledger"
	"gatehouse/review"
	"gatehouse/review/reviewtest"
)

var reviewBig struct {
	once      sync.Once
	dir, path string
	err       error
}

// reviewLedgerBig builds, once per test process, the review's benchmark
// ledger: 100,000 actions with 1,000,000 history lines and one stop.
//
// GATEHOUSE_REVIEW_BENCH_LEDGER names a ledger reviewtest.Fill built
// earlier, to measure again without building it anew (it is only read).
func reviewLedgerBig(b *testing.B) string {
	if p := os.Getenv("GATEHOUSE_REVIEW_BENCH_LEDGER"); p != "" {
		return p
	}
	reviewBig.once.Do(func() {
		dir, err := os.MkdirTemp("", "gatehouse-review-bench-")
		if reviewBig.err = err; err != nil {
			return
		}
		reviewBig.dir = dir
		reviewBig.path = filepath.Join(dir, "review.db")
		reviewBig.err = reviewtest.Fill(reviewBig.path, 100_000)
	})
	if reviewBig.err != nil {
		b.Fatal(reviewBig.err)
	}
	return reviewBig.path
}

// BenchmarkReviewFrame measures one frame of the review over 1,000,000
// history lines once they are loaded: a key (a page of the timeline, a
// filter, a jump, the rates per hour), reading the sentences the new page
// shows, and drawing the screen.
func BenchmarkReviewFrame(b *testing.B) {
	l, err := ledger.OpenReadOnly(reviewLedgerBig(b))
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	rv := NewReview(NewTheme(true), ReviewConfig{Ledger: l, Source: "review.db", Poll: -1})
	a := newDriven(rv, 200, 50)
	if len(rv.timeline.sel) != 1_000_002 {
		b.Fatalf("%d lines", len(rv.timeline.sel))
	}
	// The report at the stop is built off the screen's goroutine; what the
	// screen does when it arrives (lay out 100,000 actions' lines, draw a
	// page) is one frame.
	b.Run("AtAStopReportArrives", func(b *testing.B) {
		r, err := review.Build(context.Background(), l, rv.h, review.Options{})
		if err != nil {
			b.Fatal(err)
		}
		lines, keys, styles := stopBody(&r)
		for b.Loop() {
			rv.Update(reviewReportMsg{stop: rv.atStop.stop, r: r, lines: lines, keys: keys, styles: styles})
			rv.busy++ // onReport counts the build done
			_ = a.Render()
		}
		b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/frame")
	})
	for _, bc := range []struct {
		name  string
		setup []string
		keys  []string // one frame cycles through these
	}{
		{"TimelinePage", nil, []string{"pgup", "pgdown"}},
		{"TimelineNextOfAction", []string{"g"}, []string{"n", "N"}},
		{"TimelineKindFilter", []string{"c"}, []string{"f"}},
		{"TimelineJumpToStop", []string{"c", "g"}, []string{"x", "g"}},
		{"TimelineSpans", []string{"c"}, []string{"v"}},
		{"RatesPage", []string{"c", "tab"}, []string{"pgdown", "pgup"}},
		{"RatesHourDay", nil, []string{"r"}},
		{"AtAStopPage", []string{"tab"}, []string{"pgdown", "pgup"}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			typeKeys(a, bc.setup...)
			i := 0
			for b.Loop() {
				typeKeys(a, bc.keys[i%len(bc.keys)])
				_ = a.Render()
				i++
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/frame")
		})
	}
}

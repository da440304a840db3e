package tui

import (
	"context"
	"strings"
	"testing"
)

// TestHeaderSaysARehearsalsClock: the inspector and the review say, in the
// header, that a ledger a rehearsal created (and kept) runs on the
// rehearsal's clock; a production ledger's header says nothing of clocks.
func TestHeaderSaysARehearsalsClock(t *testing.T) {
	const words = "on a rehearsal's clock"
	production, _ := openLedger(t)
	rehearsed, _ := openLedger(t)
	if err := rehearsed.MarkRehearsal(context.Background(), "stop-for-review"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		Name   string
		Screen func() Screen
		Want   bool
	}{
		{"InspectorRehearsal", func() Screen { return newTestInspector(rehearsed) }, true},
		{"InspectorProduction", func() Screen { return newTestInspector(production) }, false},
		{"ReviewRehearsal", func() Screen {
			return NewReview(NewTheme(true), ReviewConfig{Ledger: rehearsed, Poll: -1, Source: "keep.db"})
		}, true},
		{"ReviewProduction", func() Screen {
			return NewReview(NewTheme(true), ReviewConfig{Ledger: production, Poll: -1, Source: "ledger.db"})
		}, false},
	} {
		t.Run(tc.Name, func(t *testing.T) {
			a := newDriven(tc.Screen(), 120, 24)
			header := strings.SplitN(screenText(a), "\n", 2)[0]
			if strings.Contains(header, words) != tc.Want {
				t.Fatalf("header %q: says %q = %v, want %v", header, words, !tc.Want, tc.Want)
			}
		})
	}
}

package proof_test

import (
	"testing"
)

// TestCheckerCatches proves the checker can fail: the same executor process
// and the same checker as the crash matrix, with a destination double that
// breaks the promise, must be reported.
func TestCheckerCatches(t *testing.T) {
	tests := []struct {
		Name       string
		Double     string
		Duplicates int
		Losses     int
	}{
		{Name: "DestinationThatSendsTwice", Double: "twice", Duplicates: 3},
		{Name: "DestinationThatOnlyClaimsToSend", Double: "claim", Losses: 3},
		{Name: "RealDestination", Double: "", Duplicates: 0, Losses: 0},
	}
	for _, tc := range tests {
		t.Run(tc.Name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t)
			w.approvedActions("wf-ack", 3)
			run(t, proc{Role: "send", Env: w.env("PROOF_ACTOR=wf-ack", "PROOF_DOUBLE="+tc.Double), KillAt: -1})
			v := w.verdict()
			t.Logf("%s: %s", tc.Name, v)
			if len(v.Duplicates) != tc.Duplicates || len(v.Losses) != tc.Losses {
				t.Fatalf("checker found %d duplicates and %d losses, want %d and %d:\n%s",
					len(v.Duplicates), len(v.Losses), tc.Duplicates, tc.Losses, v)
			}
			if v.OK() != (tc.Duplicates == 0 && tc.Losses == 0) {
				t.Fatalf("OK() = %v for %s", v.OK(), v)
			}
		})
	}
}

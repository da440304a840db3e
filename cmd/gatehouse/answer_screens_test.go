package main

import (
	"testing"
)

// TestGateVerbsAnswerAsTheScreensSay runs, on the command line, the
// situations tui's TestOperationsSayTheirResult operates on from the
// inspector, the review's operating mode and an action's detail: each verb
// exits with the code whose number and meaning the screens name there.
func TestGateVerbsAnswerAsTheScreensSay(t *testing.T) {
	tests := []struct {
		name  string
		setup func(e *gateEnv) string // returns the key operated on
		verb  []string
		code  int
	}{
		{"ReconcileSent", sentKey, []string{"reconcile"}, exitNothingToDo},
		{"ReconcileHeldByStopWithoutAttempt", func(e *gateEnv) string {
			key := e.approved("enquiry-2001", "ack-workflow")
			e.must("stop", "--as", "lead", "--reason", "carrier data wrong")
			wantExit(t, e.send(key, "ack-workflow"), exitStopped)
			return key
		}, []string{"reconcile"}, exitNothingToDo},
		{"ReleaseSent", sentKey, []string{"release-hold", "--reason", "ok"}, exitOther},
		{"ResolveArrivedSent", sentKey, []string{"resolve", "--outcome", "delivered", "--reason", "saw it"}, exitNothingToDo},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newGateEnv(t)
			key := tc.setup(e)
			args := append(append([]string{}, tc.verb...), "--key", key, "--as", "olga")
			wantExit(t, e.gate(args...), tc.code)
		})
	}
}

func sentKey(e *gateEnv) string {
	key := e.approved("enquiry-1001", "ack-workflow")
	wantExit(e.t, e.send(key, "ack-workflow"), exitOK)
	return key
}

package ledger_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"gatehouse/destination"
	"gatehouse/destination/fake"
	"gatehouse/ledger"
)

// forgetful is a fake destination whose records have epochs: forget starts
// a new one and drops what was stored, as clearing a test mailbox does.
type forgetful struct {
	*fake.Destination
	mu       sync.Mutex
	epoch    string
	epochErr error
	gone     bool // messages stored before the current epoch are lost
}

var _ destination.EpochReporter = (*forgetful)(nil)

func (f *forgetful) Epoch(context.Context) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.epoch, f.epochErr
}

func (f *forgetful) forget(epoch string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.epoch, f.gone = epoch, true
}

func (f *forgetful) Lookup(ctx context.Context, q destination.LookupQuery) (destination.LookupResult, error) {
	res, err := f.Destination.Lookup(ctx, q)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.gone {
		res.Messages = nil
	}
	res.Epoch = f.epoch
	return res, err
}

// TestReconcileTakesAbsenceOnlyFromTheSameEpoch: "nothing found" is
// absence only in records of the epoch the attempt recorded; its own
// message found is delivery in any epoch.
func TestReconcileTakesAbsenceOnlyFromTheSameEpoch(t *testing.T) {
	tests := []struct {
		Name      string
		Arrived   bool
		EpochErr  error  // reading the epoch at the start of the attempt fails
		Later     string // the epoch at reconcile time ("" keeps e1)
		Forgot    bool   // the records lost what they held
		State     ledger.State
		Cause     ledger.HoldCause
		Establish bool // the reason says the outcome cannot be established
	}{
		{"SameEpochAbsent", false, nil, "", false, ledger.StateHeld, ledger.HoldSafeToRetry, false},
		{"SameEpochFound", true, nil, "", false, ledger.StateSent, "", false},
		{"ClearedAbsent", true, nil, "e2", true, ledger.StateHeld, ledger.HoldUnknownOutcome, true},
		{"NewEpochButOwnMessageFound", true, nil, "e2", false, ledger.StateSent, "", false},
		{"NoEpochRecordedAbsent", false, errors.New("records api down"), "", false, ledger.StateHeld, ledger.HoldUnknownOutcome, true},
	}
	for _, tc := range tests {
		t.Run(tc.Name, func(t *testing.T) {
			w := newWorld(t)
			dest := &forgetful{Destination: w.dest, epoch: "e1", epochErr: tc.EpochErr}
			a := w.approved("wf-ack")
			if tc.Arrived {
				w.dest.Script(destination.OutcomeUnknown) // stored, sender cannot know
			} else {
				w.dest.Script(destination.OutcomeRejectedTemporary)
			}
			att, msg, err := w.l.BeginAttempt(w.ctx, ledger.ExecuteRequest{Key: a.Key, Executor: "wf-ack", Reread: consentYes,
				Endpoint: destination.EndpointAt(w.ctx, dest)})
			w.must(err)
			wantEpoch := "e1"
			if tc.EpochErr != nil {
				wantEpoch = ""
			}
			if att.Epoch != wantEpoch {
				t.Fatalf("attempt recorded epoch %q, want %q", att.Epoch, wantEpoch)
			}
			dest.Send(w.ctx, msg)
			_, err = w.l.RecordOutcome(w.ctx, msg.TransportID, destination.OutcomeUnknown, "timeout after data")
			w.must(err)
			dest.epochErr = nil
			if tc.Later != "" {
				if tc.Forgot {
					dest.forget(tc.Later)
				} else {
					dest.epoch = tc.Later
				}
			}
			w.settled(a.Key)
			got, err := w.l.Reconcile(w.ctx, ledger.ReconcileRequest{Key: a.Key, Actor: "ops", Open: records(dest)})
			if got.State != tc.State || got.HoldCause != tc.Cause {
				t.Fatalf("after reconcile: %s/%s (%v)", got.State, got.HoldCause, err)
			}
			if tc.Establish != strings.Contains(got.Reason, "cannot be established") {
				t.Fatalf("reason %q: want \"cannot be established\" = %v", got.Reason, tc.Establish)
			}
			if tc.Establish {
				if !errors.Is(err, ledger.ErrHeld) {
					t.Fatalf("reconcile error %v, want ErrHeld", err)
				}
				if _, err := w.l.ReleaseHold(w.ctx, a.Key, "ops", "reviewed"); !errors.Is(err, ledger.ErrUnknownOutcome) {
					t.Fatalf("release of a hold that cannot be established: %v", err)
				}
				if h := historyText(t, w, a.Key); !strings.Contains(h, "cannot be established") {
					t.Fatalf("history does not say the outcome cannot be established:\n%s", h)
				}
			}
			if n := w.dest.Calls(); n != 1 {
				t.Fatalf("destination called %d times, want 1", n)
			}
		})
	}
}

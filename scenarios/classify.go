package scenarios

import (
	"errors"
	"fmt"

	"gatehouse/destination"
	"gatehouse/fakes"
	"gatehouse/ledger"
)

// classify turns a gate refusal into the outcome class a scenario expects.
// It returns ok=false for errors that are not refusals (I/O, bugs), which
// abort the run instead of being compared.
func classify(err error) (string, bool) {
	if err == nil {
		return ClassOK, true
	}
	// Order matters: a cancelled proposal is also an ownership conflict, a
	// stopped send is held.
	for _, c := range []struct {
		target error
		class  string
	}{
		{ledger.ErrNotPermitted, ClassNotPermitted},
		{ledger.ErrCancelled, ClassCancelled},
		{ledger.ErrOwnershipConflict, ClassConflict},
		{ledger.ErrDuplicate, ClassDuplicate},
		{ledger.ErrInFlight, ClassInFlight},
		{ledger.ErrDenied, ClassDenied},
		{ledger.ErrHeld, ClassHeld},
		{ledger.ErrStopped, ClassHeld},
		{ledger.ErrUnknownOutcome, ClassUnknown},
		{ledger.ErrFailed, ClassFailed},
		{ledger.ErrNotDelivered, ClassNotDelivered},
		{ledger.ErrApprovalStale, ClassStale},
		{ledger.ErrWrongState, ClassRefused},
		{ledger.ErrIncomplete, ClassRefused},
		{ledger.ErrInvalid, ClassRefused},
		{ledger.ErrNotReviewed, ClassRefused},
		{ledger.ErrNotFound, ClassRefused},
		{ledger.ErrWrongDestination, ClassRefused},
		{fakes.ErrSourceDown, ClassRefused},
	} {
		if errors.Is(err, c.target) {
			return c.class, true
		}
	}
	return "", false
}

// outcomeClass is the class of a destination outcome.
func outcomeClass(o destination.Outcome) string {
	switch o {
	case destination.OutcomeAccepted:
		return ClassSent
	case destination.OutcomeUnknown:
		return ClassUnknown
	case destination.OutcomeRejectedPermanent:
		return ClassFailed
	default:
		return ClassNotDelivered
	}
}

// stateClass is the class of an action's resulting state, for operations
// that succeed but whose effect is a state (reconcile, deliver_event).
func stateClass(s ledger.State) string {
	switch s {
	case ledger.StateSent:
		return ClassSent
	case ledger.StateHeld:
		return ClassHeld
	case ledger.StateUnknown:
		return ClassUnknown
	case ledger.StateDenied:
		return ClassDenied
	case ledger.StateCancelled:
		return ClassCancelled
	case ledger.StateFailed:
		return ClassFailed
	}
	return ClassOK
}

// outcome is what one step did: its class and the words to show for it.
type outcome struct {
	class  string
	detail string
	// runs and verdicts are those of workflow steps: how each process
	// ended and the judgements on its exit code and output.
	runs     []RunResult
	verdicts []Verdict
}

// fromErr makes an outcome from a gate result, or fails for errors that are
// not refusals.
func fromErr(err error, okClass string) (outcome, error) {
	if err == nil {
		return outcome{class: okClass}, nil
	}
	c, ok := classify(err)
	if !ok {
		return outcome{}, fmt.Errorf("unexpected error: %w", err)
	}
	return outcome{class: c, detail: err.Error()}, nil
}

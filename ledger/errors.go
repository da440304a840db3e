package ledger

import (
	"errors"
	"fmt"
)

// Sentinel errors of the gate. Every refusal wraps exactly one of them so
// callers can branch with errors.Is; the richer types below carry details.
var (
	// ErrNotFound: no such task or action.
	ErrNotFound = errors.New("not found")
	// ErrDuplicate: the action was already sent; a second execution or a
	// repeated proposal was blocked.
	ErrDuplicate = errors.New("already sent")
	// ErrInFlight: another executor holds an attempt of this action right now.
	ErrInFlight = errors.New("in flight elsewhere")
	// ErrDenied: a material field (or the owner) changed since approval.
	ErrDenied = errors.New("denied: state changed since approval")
	// ErrHeld: the action waits for a person.
	ErrHeld = errors.New("held for review")
	// ErrStopped: the stop switch is on.
	ErrStopped = errors.New("execution stopped")
	// ErrOwnershipConflict: the actor is not the task's owner, or the task
	// already has another owner.
	ErrOwnershipConflict = errors.New("ownership conflict")
	// ErrApprovalStale: there is no approval matching the current recipient,
	// target and content.
	ErrApprovalStale = errors.New("approval missing or stale")
	// ErrUnknownOutcome: an attempt's outcome is unknown; reconcile first.
	ErrUnknownOutcome = errors.New("outcome unknown")
	// ErrCancelled: the proposal was withdrawn.
	ErrCancelled = errors.New("cancelled")
	// ErrFailed: the destination rejected the action permanently.
	ErrFailed = errors.New("failed permanently")
	// ErrNotDelivered: the attempt did not reach the destination (or was
	// rejected temporarily); the action is approved again and may be retried.
	ErrNotDelivered = errors.New("not delivered")
	// ErrIncomplete: a task still has actions without a recorded outcome.
	ErrIncomplete = errors.New("task has actions without an outcome")
	// ErrNothingToReconcile: the action has no attempt whose outcome is
	// open (none yet, or one whose outcome is known).
	ErrNothingToReconcile = fmt.Errorf("nothing to reconcile (%w)", ErrWrongState)
	// ErrInvalid: the request itself is malformed (empty reason, bad key…).
	ErrInvalid = errors.New("invalid request")
	// ErrNotReviewed: a correction was approved by its own author; it needs
	// a second person.
	ErrNotReviewed = errors.New("a correction needs a reviewer other than its author")
	// ErrWrongState: the operation does not apply in the action's state.
	ErrWrongState = errors.New("not allowed in this state")
	// ErrWrongDestination: the caller named another destination or sender
	// than the one approved (for a send) or recorded (for a reconcile).
	// Nothing changed but the history line saying so.
	ErrWrongDestination = errors.New("not the approved destination")
	// ErrNotRecorded: the ledger could not record the operation (a full
	// disk, an I/O error); nothing of it was written.
	ErrNotRecorded = errors.New("not recorded")
)

// DestinationError says what was approved or recorded and what the caller
// named instead.
type DestinationError struct {
	Key      string
	Field    string // "destination" or "sender"
	Recorded string // what the approval bound or the attempt recorded
	Named    string // what the caller named
	Attempt  int    // for a reconcile: the attempt whose destination it is
}

func (e *DestinationError) Error() string {
	if e.Attempt > 0 {
		return fmt.Sprintf("%s: attempt %d went to %s, not %s; reconcile asks only the attempt's own destination (if it really moved, say so with --destination-moved and a reason)",
			e.Key, e.Attempt, e.Recorded, e.Named)
	}
	return fmt.Sprintf("%s: the approved %s is %s, not %s; to change it, propose again with the new %s and have it approved",
		e.Key, e.Field, e.Recorded, e.Named, e.Field)
}

// Unwrap makes errors.Is(err, ErrWrongDestination) true.
func (e *DestinationError) Unwrap() error { return ErrWrongDestination }

// DeniedError says which re-read material field differed from the approved
// snapshot, and how.
type DeniedError struct {
	Key      string
	Source   string // e.g. "crm"
	Field    string // e.g. "consent"
	Approved string // the value the approval was based on
	Current  string // the value re-read just before execution
	Missing  bool   // the field was not re-read at all
}

func (e *DeniedError) Error() string {
	if e.Missing {
		return fmt.Sprintf("denied %s: material field %s.%s (approved %q) was not re-read before execution", e.Key, e.Source, e.Field, e.Approved)
	}
	return fmt.Sprintf("denied %s: %s.%s changed since approval: %q → %q; re-approve to send", e.Key, e.Source, e.Field, e.Approved, e.Current)
}

// Unwrap makes errors.Is(err, ErrDenied) true.
func (e *DeniedError) Unwrap() error { return ErrDenied }

// OwnershipError says who owns the task and who tried to act.
type OwnershipError struct {
	Task      string
	Owner     string // current owner ("" if none)
	Actor     string // who tried
	Cancelled bool   // the action was cancelled because the owner changed
}

func (e *OwnershipError) Error() string {
	switch {
	case e.Cancelled:
		return fmt.Sprintf("ownership conflict on %s: %s now owns it, not %s; the proposal was cancelled", e.Task, e.Owner, e.Actor)
	case e.Owner == "":
		return fmt.Sprintf("ownership conflict on %s: nobody owns it and %s is not the owner", e.Task, e.Actor)
	default:
		return fmt.Sprintf("ownership conflict on %s: owned by %s, not %s", e.Task, e.Owner, e.Actor)
	}
}

// Is makes errors.Is match ErrOwnershipConflict, and ErrCancelled when the
// action was cancelled.
func (e *OwnershipError) Is(target error) bool {
	return target == ErrOwnershipConflict || (e.Cancelled && target == ErrCancelled)
}

// StateError explains a refusal caused by the action's state, with a hint
// for the operator.
type StateError struct {
	Key   string
	State State
	Err   error  // one of the sentinels
	Hint  string // what a person can do
}

func (e *StateError) Error() string {
	msg := fmt.Sprintf("%s: %v (state %s)", e.Key, e.Err, e.State)
	if e.Hint != "" {
		msg += ": " + e.Hint
	}
	return msg
}

// Unwrap returns the sentinel.
func (e *StateError) Unwrap() error { return e.Err }

func invalidf(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, a...))
}

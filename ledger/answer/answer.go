// Package answer is the gate's answer to an operation as the command line
// gives it, for every front end alike: the exit code a refusal maps to, what
// that code means, and the operations whose answer is more than the
// ledger's error (a reconcile of an action whose outcome nobody asked
// about is not "done"). The terminal app says what the CLI would exit
// with, in the same words.
package answer

import (
	"context"
	"errors"

	"gatehouse/ledger"
)

// The exit codes of the command line (docs/cli.md, "Exit codes").
const (
	OK               = 0
	Other            = 1
	Usage            = 2
	Duplicate        = 10
	InFlight         = 11
	Denied           = 12
	Held             = 13
	Unknown          = 14
	Stopped          = 15
	Failed           = 16
	WrongDestination = 17
	Consent          = 18
	NothingToDo      = 19
	Interrupted      = 20
	NotPermitted     = 21
)

// meanings say each code in the words of the exit-code table.
var meanings = map[int]string{
	OK:               "done",
	Other:            "not done",
	Usage:            "refused at the door; nothing recorded",
	Duplicate:        "duplicate: already sent",
	InFlight:         "in flight elsewhere",
	Denied:           "denied",
	Held:             "held for a person",
	Unknown:          "outcome unknown: reconcile, never send again",
	Stopped:          "stopped",
	Failed:           "failed permanently",
	WrongDestination: "not the recorded destination; nothing changed",
	Consent:          "customers import refused; nothing written",
	NothingToDo:      "nothing to reconcile; nothing changed",
	Interrupted:      "interrupted; nothing recorded",
	NotPermitted:     "not permitted: the actor may not do this (recorded)",
}

// Meaning says what an exit code means.
func Meaning(code int) string {
	if m, ok := meanings[code]; ok {
		return m
	}
	return "not done"
}

// Code maps a refusal to the exit code that names it (OK for nil). Order
// matters: an ownership error that cancelled the action is still a denial,
// and an unknown outcome outranks the hold it may sit in.
func Code(err error) int {
	switch {
	case err == nil:
		return OK
	case errors.Is(err, ledger.ErrNotPermitted):
		return NotPermitted
	case errors.Is(err, ledger.ErrUnknownOutcome) && errors.Is(err, ledger.ErrNotRecorded):
		return Unknown // the destination may have it; the ledger says executing
	case errors.Is(err, ledger.ErrNotRecorded):
		return Other
	case errors.Is(err, ledger.ErrNothingToReconcile):
		return NothingToDo
	case errors.Is(err, ledger.ErrWrongDestination):
		return WrongDestination
	case errors.Is(err, ledger.ErrFailed):
		return Failed
	case errors.Is(err, ledger.ErrDuplicate):
		return Duplicate
	case errors.Is(err, ledger.ErrInFlight):
		return InFlight
	case errors.Is(err, ledger.ErrUnknownOutcome):
		return Unknown
	case errors.Is(err, ledger.ErrStopped):
		return Stopped
	case errors.Is(err, ledger.ErrHeld):
		return Held
	case errors.Is(err, ledger.ErrDenied), errors.Is(err, ledger.ErrOwnershipConflict),
		errors.Is(err, ledger.ErrApprovalStale), errors.Is(err, ledger.ErrCancelled),
		errors.Is(err, ledger.ErrNotReviewed):
		return Denied
	case errors.Is(err, ledger.ErrUnknownConsent), errors.Is(err, ledger.ErrResubscribe):
		return Consent
	case errors.Is(err, ledger.ErrInvalid), errors.Is(err, ledger.ErrBackup):
		return Usage
	}
	return Other
}

// Reconcile is `gate reconcile`: the ledger's reconcile, answered as the
// command line answers it. Exit 0 means "the destination has it,
// established now", so an action whose outcome was not open is never
// answered with nil: nothing to reconcile, in flight (its executor still
// holds the attempt) or, when an earlier attempt's message turned up after
// all, a duplicate. An action the reconcile left held (proven absent,
// contradicted, not checkable) is answered as held: a workflow must not
// read it as done.
func Reconcile(ctx context.Context, l *ledger.Ledger, req ledger.ReconcileRequest) (ledger.Action, error) {
	key := req.Key
	before, err := l.Action(ctx, key)
	if err != nil {
		return before, err
	}
	a, err := l.Reconcile(ctx, req)
	if err == nil && !before.OutcomeOpen() {
		// Its earlier attempts' records were read again all the same; a
		// message found there is said so.
		if a.LateArrivals > before.LateArrivals {
			return a, &ledger.StateError{Key: key, State: a.State, Err: ledger.ErrDuplicate,
				Hint: "nothing was open, but an earlier attempt's message was found after it had been settled as not arrived: it arrived (late evidence, see show)"}
		}
		if a.State == ledger.StateExecuting {
			// Its executor still holds the attempt (alive, stopped or
			// slow, until its lease ends): its outcome is not open yet but
			// will be, so "nothing to reconcile" would be as wrong as
			// "done".
			return a, &ledger.StateError{Key: key, State: a.State, Err: ledger.ErrInFlight,
				Hint: "its attempt is in flight; its executor holds it until its lease ends: reconcile after that"}
		}
		return a, &ledger.StateError{Key: key, State: a.State, Err: ledger.ErrNothingToReconcile,
			Hint: "no attempt of it has an open outcome (" + a.Reason + ")"}
	}
	if err == nil && a.State == ledger.StateHeld {
		err = &ledger.StateError{Key: key, State: a.State, Err: ledger.ErrHeld, Hint: a.Reason}
	}
	return a, err
}

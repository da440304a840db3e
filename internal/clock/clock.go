// Package clock is where domain time comes from. It is a leaf, so that the
// test mailbox and the fakes can share the ledger's clock without linking a
// database driver.
package clock

import (
	"context"
	"time"
)

// Clock is where domain time comes from: leases, presence TTLs, event
// timestamps, the bound on a send, a mailbox's arrival stamps and timed
// faults, the Date a destination writes. Tests and rehearsals pass a
// controllable clock (fakes.Clock) whose timers fire when it is advanced,
// so nothing sleeps to let domain time pass.
//
// Waits on the operating system that must stay real under a fake clock
// (SQLite busy retries, socket deadlines) are not domain time: they go
// through package internal/oswait.
type Clock interface {
	// Now is the current time on this clock.
	Now() time.Time
	// NewTimer returns a timer that sends the clock's time on the channel
	// once d has passed on this clock.
	NewTimer(d time.Duration) (Timer, <-chan time.Time)
	// AfterFunc calls f in its own goroutine once d has passed on this
	// clock.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer controls a timer started by a Clock.
type Timer interface {
	// Stop prevents the timer from firing; it reports whether it stopped
	// it (false when it had already fired or been stopped).
	Stop() bool
}

// System is the wall clock.
type System struct{}

var _ Clock = System{}

// Now returns the current time with its monotonic reading, so that a
// duration between two readings (a send's budget, a lease) is immune to
// steps of the wall clock. Convert it (UTC, Format) only for display and
// storage: t.UTC() and t.In() strip the monotonic reading.
func (System) Now() time.Time { return time.Now() }

// NewTimer is time.NewTimer.
func (System) NewTimer(d time.Duration) (Timer, <-chan time.Time) {
	t := time.NewTimer(d)
	return t, t.C
}

// AfterFunc is time.AfterFunc.
func (System) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

// WithTimeout is context.WithTimeout measured on c: the context is
// cancelled, with cause context.DeadlineExceeded, once d has passed on c.
// On a fake clock that happens when the clock is advanced past it.
func WithTimeout(ctx context.Context, c Clock, d time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
	t := c.AfterFunc(d, func() { cancel(context.DeadlineExceeded) })
	return ctx, func() {
		t.Stop()
		cancel(context.Canceled)
	}
}

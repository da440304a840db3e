// Package oswait is where gatehouse waits on the operating system's clock on
// purpose. Domain time (leases, send bounds, arrival stamps, timed faults)
// comes from clock.Clock and may be a fake that stands still; the waits
// here must stay real under it, because what they wait for is outside the
// program: another process releasing SQLite's write lock, a peer answering
// on a socket whose deadline the kernel measures.
package oswait

import (
	"context"
	"time"
)

// Budget is a wall-clock allowance for retrying an OS-level condition.
type Budget struct{ end time.Time }

// NewBudget starts an allowance of d from now.
func NewBudget(d time.Duration) Budget { return Budget{end: time.Now().Add(d)} }

// Spent reports whether the allowance has run out.
func (b Budget) Spent() bool { return time.Now().After(b.end) }

// Pause waits d of real time, or until ctx ends, when it returns ctx's
// error.
func Pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Deadline is the wall-clock instant d from now, for a socket deadline
// (net.Conn.SetDeadline), which the kernel measures.
func Deadline(d time.Duration) time.Time { return time.Now().Add(d) }

// Now is the operating system's time, for what others measure by it: the
// validity of a certificate a TLS peer checks against its own clock.
func Now() time.Time { return time.Now() }

// NewTimer fires after d of real time: a timeout on another process (a
// workflow command a rehearsal runs), which runs in real time whatever
// clock the rehearsal keeps. Stop it when done.
func NewTimer(d time.Duration) *time.Timer { return time.NewTimer(d) }

// AfterFunc calls f in its own goroutine after d of real time, unless the
// returned timer is stopped first: a notice that a wait on another process
// is taking long.
func AfterFunc(d time.Duration, f func()) *time.Timer { return time.AfterFunc(d, f) }

// Stopwatch measures how long something outside the program took in real
// time (a read of the ledger), so a follower can space its re-reads by the
// cost of the last one whatever clock the ledger keeps.
type Stopwatch struct{ start time.Time }

// StartStopwatch starts measuring now.
func StartStopwatch() Stopwatch { return Stopwatch{start: time.Now()} }

// Elapsed is the real time since the stopwatch started.
func (s Stopwatch) Elapsed() time.Duration { return time.Since(s.start) }

// WithTimeout is context.WithTimeout in real time: the fence on a send's
// socket, which the kernel measures in real time whatever the domain clock
// says. The context's Deadline is the fence's end.
func WithTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, d)
}

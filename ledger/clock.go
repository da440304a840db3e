package ledger

import "time"

// Clock is where the ledger reads the time: leases, presence TTLs and event
// timestamps. Tests and rehearsals pass a controllable clock instead of
// sleeping.
type Clock interface {
	Now() time.Time
}

// SystemClock is the wall clock.
type SystemClock struct{}

// Now returns the current wall-clock time in UTC.
func (SystemClock) Now() time.Time { return time.Now().UTC() }

// ClockFunc adapts a function to Clock.
type ClockFunc func() time.Time

// Now calls f.
func (f ClockFunc) Now() time.Time { return f() }

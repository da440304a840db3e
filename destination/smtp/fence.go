package smtp

import (
	"context"
	"errors"
	"net"
	"sync"
	"time"
)

// fencedConn is the socket under an SMTP session. Every deadline set on it
// — by this package, by crypto/tls above it, or by go-smtp's client, which
// sets its own before each command and around DATA and clears them after —
// is clamped to the end of the current message's budget. The kernel then
// refuses to write anything of the message after that end: a Write called
// once the deadline has passed fails at once and writes nothing, whatever
// the process did in between (a GC pause, a SIGSTOP, a stalled VM). That is
// what makes the budget a fence rather than a hope: a lease another process
// sees run out cannot be followed by this message's final "." arriving.
//
// A process paused inside the very write of the final "." can still finish
// it after the end: that window is the length of one write call, not zero,
// and the gate's settle time and late evidence cover it (docs/RELIABILITY.md).
type fencedConn struct {
	net.Conn
	mu sync.Mutex
	// end is the budget's end for the message in hand; zero between
	// messages (a kept session idles unfenced, with no deadline).
	end time.Time
	// read and write are the deadlines last asked for, so that a fence
	// set later applies to them too.
	read, write time.Time
}

var _ net.Conn = (*fencedConn)(nil)

// clamp is t within the fence: the fence's end when t is later or none.
func (f *fencedConn) clamp(t time.Time) time.Time {
	if f.end.IsZero() || !t.IsZero() && t.Before(f.end) {
		return t
	}
	return f.end
}

// fence sets the end of the budget of the message about to be sent (zero
// lifts it) and applies it to the deadlines in force.
func (f *fencedConn) fence(end time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.end = end
	f.Conn.SetReadDeadline(f.clamp(f.read))
	f.Conn.SetWriteDeadline(f.clamp(f.write))
}

// SetDeadline sets both deadlines, clamped to the fence.
func (f *fencedConn) SetDeadline(t time.Time) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.read, f.write = t, t
	return errors.Join(f.Conn.SetReadDeadline(f.clamp(t)), f.Conn.SetWriteDeadline(f.clamp(t)))
}

// SetReadDeadline sets the read deadline, clamped to the fence.
func (f *fencedConn) SetReadDeadline(t time.Time) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.read = t
	return f.Conn.SetReadDeadline(f.clamp(t))
}

// SetWriteDeadline sets the write deadline, clamped to the fence.
func (f *fencedConn) SetWriteDeadline(t time.Time) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.write = t
	return f.Conn.SetWriteDeadline(f.clamp(t))
}

// budgetEnd is where the gate's budget for this send ends: the deadline of
// ctx (Deliver sets it, in real time), or zero for a send without one.
func budgetEnd(ctx context.Context) time.Time {
	end, _ := ctx.Deadline()
	return end
}

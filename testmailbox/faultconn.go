package testmailbox

import (
	"bytes"
	"crypto/tls"
	"net"
	"sync"
	"time"

	"gatehouse/internal/oswait"
)

// faultListener hands go-smtp every accepted connection wrapped in a
// faultConn, so that hold_354 can hold a reply go-smtp writes itself.
type faultListener struct {
	*switchListener
	m *Mailbox
}

// Accept returns the next connection, wrapped.
func (l faultListener) Accept() (net.Conn, error) {
	c, err := l.switchListener.Accept()
	if err != nil {
		return nil, err
	}
	l.m.sessions.Add(1)
	return &faultConn{Conn: c, m: l.m, closed: make(chan struct{})}, nil
}

// faultConn is the server side of one SMTP connection. go-smtp writes the
// 354 itself before it calls Session.Data, with no hook in between, so
// hold_354 holds that write here.
//
// Which write is the 354: go-smtp sets the write deadline before every
// reply, and the session tells the conn each time go-smtp calls it, with
// the transaction's recipients. A reply that begins while recipients are
// given, with no session call since the previous reply, answers a command
// the session never saw: DATA's 354 for a client that sends DATA after
// RCPT, as every client does. On a plain connection the bytes must also
// begin with "354 ". After STARTTLS this conn sees only ciphertext, so
// there the sequence alone decides: a client that sends NOOP, VRFY or
// another command go-smtp answers itself between RCPT and DATA has that
// reply held instead.
type faultConn struct {
	net.Conn
	m      *Mailbox
	closed chan struct{}
	once   sync.Once

	mu        sync.Mutex
	rcpts     []string // recipients of the open transaction; nil outside one
	plain     bool     // the session runs without TLS: writes are SMTP text
	called    bool     // the session was called since the last reply began
	candidate bool     // the reply now being written may be the 354
}

// faultConnOf finds the faultConn under a session's connection, which is
// a *tls.Conn over it after STARTTLS; nil when there is none.
func faultConnOf(c net.Conn) *faultConn {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	fc, _ := c.(*faultConn)
	return fc
}

// sessionCalled records that go-smtp called the session, and the
// recipients the transaction now has (nil when none is open).
func (c *faultConn) sessionCalled(rcpts []string, plain bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.rcpts = append([]string(nil), rcpts...) // nil when there are none
	c.plain = plain
	c.called = true
}

// SetWriteDeadline marks the start of a reply (go-smtp sets the deadline
// before each one) and notes whether it may be the 354.
func (c *faultConn) SetWriteDeadline(t time.Time) error {
	c.mu.Lock()
	c.candidate = len(c.rcpts) > 0 && !c.called
	c.called = false
	c.mu.Unlock()
	return c.Conn.SetWriteDeadline(t)
}

// Write holds the 354 when hold_354 fires for the transaction, then writes.
func (c *faultConn) Write(p []byte) (int, error) {
	if f, ok := c.hold354(p); ok {
		c.m.wait(f.Duration, c.closed)
		c.renewDeadlines()
	}
	return c.Conn.Write(p)
}

// hold354 decides whether the write p, the first of a reply, is a 354 that
// hold_354 holds.
func (c *faultConn) hold354(p []byte) (Fault, bool) {
	c.mu.Lock()
	candidate, rcpts, plain := c.candidate, c.rcpts, c.plain
	c.candidate = false
	c.mu.Unlock()
	if !candidate || (plain && !bytes.HasPrefix(p, []byte("354 "))) {
		return Fault{}, false
	}
	f := c.m.faults.pick(atDataCommand, rcpts)
	return f, f.Kind == FaultHold354
}

// renewDeadlines gives the held 354 and the message after it the time
// go-smtp would have given them: the deadlines it set before the hold are
// measured on the wall clock and may have passed during it.
func (c *faultConn) renewDeadlines() {
	c.Conn.SetWriteDeadline(oswait.Deadline(c.m.cfg.ReadTimeout))
	c.Conn.SetReadDeadline(oswait.Deadline(c.m.cfg.ReadTimeout))
}

// Close closes the connection, ends a hold on it and counts the session
// as ended.
func (c *faultConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		close(c.closed)
		c.m.sessions.Add(-1)
	})
	return err
}

package smtp

import (
	"sync"
	"time"

	"github.com/emersion/go-smtp"

	"gatehouse/internal/oswait"
)

// Connection reuse. A Destination keeps the sessions of messages the server
// accepted (250 after the final ".") and hands them to later sends, so a
// run of many messages does not pay a connect, greeting and EHLO for each.
// Every message is still its own mail transaction (MAIL, RCPT, DATA) and is
// classified exactly as on a fresh connection. A session is reused only
// after a clean 250: one that saw an unknown outcome, a rejection, a
// timeout or a cancelled send is closed, because a late reply may still be
// in its pipe. The 250 that pooled a session ended its mail transaction, so
// the next message starts with MAIL straight away: no RSET (which would
// also make go-smtp's client greet again, with an EHLO after which some
// servers forget the authentication) and no NOOP probe, which would cost a
// round trip per message. A session the server has closed meanwhile, or
// says it is closing (421), fails at MAIL, before anything of the message
// was sent; that costs one fresh connection and nothing else (Send).
const (
	// DefaultPoolSize is how many idle sessions a Destination keeps.
	DefaultPoolSize = 16
	// DefaultIdleTime is how long an idle session is kept before it is
	// closed rather than reused.
	DefaultIdleTime = 30 * time.Second
)

// WithPoolSize sets how many idle sessions the destination keeps for reuse
// (DefaultPoolSize); 0 opens a new connection for every message and QUITs
// it afterwards.
func WithPoolSize(n int) Option { return func(c *config) { c.poolSize = max(n, 0) } }

// session is one SMTP connection that has greeted the server (and
// authenticated, when the destination has credentials).
type session struct {
	conn *fencedConn
	c    *smtp.Client
	idle time.Time // when it was returned to the pool, in real time: servers close idle sessions by the wall clock
}

// pool holds idle sessions, most recently used last.
type pool struct {
	mu   sync.Mutex
	idle []*session
	done bool
}

// release ends one send's use of a session: kept for the next message when
// keep is true and the pool has room, otherwise closed (with QUIT after an
// accepted message, as a polite client does).
func (d *Destination) release(conn *fencedConn, c *smtp.Client, accepted, keep bool) {
	conn.fence(time.Time{}) // the next message brings its own budget
	if keep && d.pool.put(&session{conn: conn, c: c, idle: oswait.Now()}, d.cfg.poolSize) {
		return
	}
	if accepted {
		_ = c.Quit() // the message is accepted; a failing QUIT changes nothing
	}
	c.Close()
}

func (p *pool) take(now time.Time) *session {
	p.mu.Lock()
	defer p.mu.Unlock()
	for len(p.idle) > 0 {
		s := p.idle[len(p.idle)-1]
		p.idle = p.idle[:len(p.idle)-1]
		if now.Sub(s.idle) <= DefaultIdleTime {
			return s
		}
		go closeSession(s)
	}
	return nil
}

func (p *pool) put(s *session, size int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done || len(p.idle) >= size {
		return false
	}
	p.idle = append(p.idle, s)
	return true
}

// closeTimeout bounds a goodbye: an idle session carries nothing, so a
// server slow to answer QUIT is not waited for.
const closeTimeout = time.Second

func closeSession(s *session) {
	// The client sets each command's deadline from CommandTimeout, which
	// would override a deadline set on the connection here.
	s.c.CommandTimeout = closeTimeout
	s.conn.SetDeadline(oswait.Deadline(closeTimeout))
	_ = s.c.Quit()
	s.c.Close()
}

// Close closes the destination's idle sessions (with QUIT). Sends still
// running finish normally and close their own sessions; the destination
// remains usable, without reuse.
func (d *Destination) Close() error {
	d.pool.mu.Lock()
	idle := d.pool.idle
	d.pool.idle, d.pool.done = nil, true
	d.pool.mu.Unlock()
	for _, s := range idle {
		closeSession(s)
	}
	return nil
}

package testmailbox

import (
	"bytes"
	"errors"
	"io"
	"mime"
	"net/mail"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"gatehouse/internal/mailheader"
	"gatehouse/internal/oswait"
)

// Replies the mailbox gives in its own words. They are *smtp.SMTPError values
// returned unwrapped, because go-smtp finds the code by type assertion.
var (
	replyMalformed = &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 6, 0},
		Message: "Malformed message: the header section does not parse"}
	replyStoreFailed = &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0},
		Message: "Could not store the message, try again later"}
	replyLineTooLong = &smtp.SMTPError{Code: 500, EnhancedCode: smtp.EnhancedCode{5, 4, 0},
		Message: "Line too long"}
	replyReadFailed = &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 4, 2},
		Message: "Message transfer interrupted"}
	replyFaultTemporary = &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0},
		Message: "Temporary failure (injected fault reject_temporary)"}
	replyFaultPermanent = &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 7, 1},
		Message: "Message rejected (injected fault reject_permanent)"}
)

// stallAfter bounds how much of a message stall_body reads before it
// stalls, for a first line longer than that.
const stallAfter = 1 << 10

// errStallAbandoned ends a message whose read stall_body stalled when the
// mailbox closed: it is refused, never half stored.
var errStallAbandoned = errors.New("testmailbox: mailbox closed during stall_body")

// errForeignConn refuses a session on a connection that did not come
// through the mailbox's listener, which cannot happen: faults need it.
var errForeignConn = errors.New("testmailbox: connection not accepted by the mailbox's listener")

type backend struct{ m *Mailbox }

// NewSession runs at EHLO, and again after STARTTLS, on the same faultConn.
func (b backend) NewSession(c *smtp.Conn) (smtp.Session, error) {
	fc := faultConnOf(c.Conn())
	if fc == nil {
		return nil, errForeignConn
	}
	_, isTLS := c.TLSConnectionState()
	fc.sessionCalled(nil, !isTLS)
	return &session{m: b.m, conn: c, fc: fc, plain: !isTLS}, nil
}

// session is one SMTP connection's state. It keeps the *smtp.Conn because
// accept_then_drop must close the connection itself, and tells fc of every
// call go-smtp makes, so that hold_354 can tell the 354 from other replies.
type session struct {
	m      *Mailbox
	conn   *smtp.Conn
	fc     *faultConn
	plain  bool // no TLS: a session after STARTTLS is a new one
	authed bool
	from   string
	to     []string
}

var _ smtp.AuthSession = (*session)(nil)

func (s *session) AuthMechanisms() []string {
	if !s.m.cfg.RequireAuth {
		return nil
	}
	return []string{sasl.Plain}
}

// told tells fc that go-smtp called the session, and which recipients
// the transaction has now.
func (s *session) told() { s.fc.sessionCalled(s.to, s.plain) }

func (s *session) Auth(mech string) (sasl.Server, error) {
	s.told()
	if !s.m.cfg.RequireAuth || mech != sasl.Plain {
		return nil, smtp.ErrAuthUnknownMechanism
	}
	return sasl.NewPlainServer(func(_, user, pass string) error {
		if user != s.m.cfg.AuthUsername || pass != s.m.cfg.AuthPassword {
			return smtp.ErrAuthFailed
		}
		s.authed = true
		return nil
	}), nil
}

func (s *session) Mail(from string, _ *smtp.MailOptions) error {
	defer s.told()
	if _, isTLS := s.conn.TLSConnectionState(); s.m.cfg.TLS == TLSRequire && !isTLS {
		return replyNeedTLS
	}
	if s.m.cfg.RequireAuth && !s.authed {
		return smtp.ErrAuthRequired
	}
	s.from = from
	s.to = nil
	return nil
}

func (s *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	s.to = append(s.to, to)
	s.told()
	return nil
}

func (s *session) Reset() {
	s.from = ""
	s.to = nil
	s.told()
}

// Logout may run on go-smtp's Close, beside Data, so it reads no session
// field that changes.
func (s *session) Logout() error {
	s.fc.sessionCalled(nil, s.plain)
	return nil
}

// Data reads the whole message first, so that an oversize, malformed or
// interrupted message is refused before anything is stored; then it lets a
// fault decide, stores, and replies (or does not).
func (s *session) Data(r io.Reader) error {
	// The 354 has gone out; what is answered next is the message, and
	// this transaction has no 354 left to hold.
	s.fc.sessionCalled(nil, s.plain)
	raw, err := s.readMessage(r, s.m.faults.pick(inBody, s.to))
	if err != nil {
		s.m.refused.Add(1)
		var se *smtp.SMTPError
		if errors.As(err, &se) {
			return se // 552 from the size limit, returned as the server's own value
		}
		if errors.Is(err, smtp.ErrTooLongLine) {
			return replyLineTooLong
		}
		return replyReadFailed
	}
	a, err := parseArrival(raw, s.m.cfg.Clock.Now().UTC())
	if err != nil {
		s.m.refused.Add(1)
		return replyMalformed
	}
	a.from = s.from
	a.to = append([]string(nil), s.to...)

	fault := s.m.faults.pick(atEndOfData, a.to)
	switch fault.Kind {
	case FaultRejectTemporary:
		s.m.refused.Add(1)
		return replyFaultTemporary
	case FaultRejectPermanent:
		s.m.refused.Add(1)
		return replyFaultPermanent
	}

	if fault.Kind == FaultHoldThenStore && s.m.beginHold() {
		defer s.m.holds.Done() // after the store below
		s.holdBack(a, fault.Duration)
	}
	if _, err := s.m.store.add(a); err != nil {
		s.m.refused.Add(1)
		return replyStoreFailed
	}
	s.m.accepted.Add(1)

	switch fault.Kind {
	case FaultAcceptThenDrop:
		// Closing the socket before returning means the 250 go-smtp writes
		// next goes nowhere: stored, but the sender cannot know.
		s.m.dropped.Add(1)
		s.conn.Conn().Close()
	case FaultDelayReply:
		s.m.wait(fault.Duration, nil)
	}
	return nil
}

// holdBack keeps a read message out of the store for d on the mailbox's
// clock, or until the mailbox closes, and stamps it with the time the hold
// ends: the message arrives then. The sender is not watched meanwhile, so
// a sender that went away changes nothing.
func (s *session) holdBack(a *arrival, d time.Duration) {
	s.m.wait(d, nil)
	a.receivedAt = s.m.cfg.Clock.Now().UTC()
}

// readMessage reads the whole message. Under stall_body it reads the
// message's first line (at most stallAfter bytes), then stops reading for
// the fault's duration on the mailbox's clock, then reads the rest. What
// the sender wrote meanwhile waits in go-smtp's buffer and the socket's,
// so a sender whose message is larger than those finds its write blocked.
// When the mailbox closes during the stall the message is abandoned.
func (s *session) readMessage(r io.Reader, stall Fault) ([]byte, error) {
	if stall.Kind != FaultStallBody {
		return io.ReadAll(r)
	}
	head, err := readFirstLine(r, stallAfter)
	if err != nil && !errors.Is(err, io.EOF) {
		return head, err
	}
	if !s.m.wait(stall.Duration, nil) {
		return head, errStallAbandoned
	}
	if err != nil { // the message was one line
		return head, nil
	}
	// go-smtp's read deadline dates from the DATA command and runs on the
	// wall clock; the stall is the mailbox's doing, not the sender's.
	s.conn.Conn().SetReadDeadline(oswait.Deadline(s.m.cfg.ReadTimeout))
	rest, err := io.ReadAll(r)
	return append(head, rest...), err
}

// readFirstLine reads up to and including the first LF, or n bytes when
// no LF comes before. It reads a byte at a time, so nothing beyond the
// line is taken from r.
func readFirstLine(r io.Reader, n int) ([]byte, error) {
	line := make([]byte, 0, n)
	b := make([]byte, 1)
	for len(line) < n {
		k, err := r.Read(b)
		if k == 1 {
			line = append(line, b[0])
			if b[0] == '\n' {
				return line, nil
			}
		}
		if err != nil {
			return line, err
		}
	}
	return line, nil
}

// parseArrival reads the header fields the mailbox indexes. A header section
// that does not parse makes the whole message malformed.
func parseArrival(raw []byte, at time.Time) (*arrival, error) {
	msg, err := mail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	h := msg.Header
	subject := h.Get("Subject")
	var dec mime.WordDecoder
	if d, err := dec.DecodeHeader(subject); err == nil {
		subject = d
	}
	return &arrival{
		raw:        raw,
		subject:    subject,
		messageID:  normMessageID(h.Get(mailheader.MessageID)),
		actionKey:  h.Get(mailheader.ActionKey),
		attempt:    h.Get(mailheader.Attempt),
		receivedAt: at,
	}, nil
}

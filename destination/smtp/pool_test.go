package smtp_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-smtp"

	"gatehouse/destination"
	smtpdest "gatehouse/destination/smtp"
	"gatehouse/testmailbox"
)

// countingServer is a real go-smtp server on loopback that counts sessions
// and stored messages; data, when set, decides each message's reply by its
// number (1-based) and dropAfter closes a session once a message was
// accepted on it (a server that does not keep idle sessions).
type countingServer struct {
	mu        sync.Mutex
	sessions  int
	messages  int
	mails     int
	ended     int
	data      func(n int) error
	mail      func(n int) error // decides each MAIL's reply by its number (1-based)
	dropAfter bool
	idle      time.Duration // the server's read timeout: it closes idle sessions with a 421
	target    string
}

func startCounting(t *testing.T, cs *countingServer) *countingServer {
	t.Helper()
	cs.target = serveSMTP(t, cs.idle, func(c *smtp.Conn) smtp.Session {
		cs.mu.Lock()
		cs.sessions++
		cs.mu.Unlock()
		return &countingSession{cs: cs, conn: c}
	})
	return cs
}

// serveSMTP runs a go-smtp server on a loopback port until the test ends,
// with a session from newSession for each connection and the given read
// timeout (0: none), and returns its target.
func serveSMTP(t *testing.T, readTimeout time.Duration, newSession func(*smtp.Conn) smtp.Session) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := smtp.NewServer(smtp.BackendFunc(func(c *smtp.Conn) (smtp.Session, error) { return newSession(c), nil }))
	s.ErrorLog = nopLogger{}
	s.ReadTimeout = readTimeout
	go s.Serve(l)
	t.Cleanup(func() { s.Close() })
	return "smtp://" + l.Addr().String()
}

func (cs *countingServer) counts() (sessions, messages int) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.sessions, cs.messages
}

type countingSession struct {
	cs       *countingServer
	conn     *smtp.Conn
	accepted bool
}

func (s *countingSession) Mail(string, *smtp.MailOptions) error {
	s.cs.mu.Lock()
	s.cs.mails++
	n := s.cs.mails
	s.cs.mu.Unlock()
	if s.cs.mail != nil {
		return s.cs.mail(n)
	}
	return nil
}
func (s *countingSession) Rcpt(string, *smtp.RcptOptions) error { return nil }
func (s *countingSession) Data(r io.Reader) error {
	if _, err := io.Copy(io.Discard, r); err != nil {
		return err
	}
	s.cs.mu.Lock()
	s.cs.messages++
	n := s.cs.messages
	s.cs.mu.Unlock()
	if s.cs.data != nil {
		if err := s.cs.data(n); err != nil {
			return err
		}
	}
	s.accepted = true
	return nil
}

// Reset runs after every message (and on RSET); a dropping server closes the
// session here, after its 250 was written.
func (s *countingSession) Reset() {
	if s.cs.dropAfter && s.accepted {
		s.conn.Conn().Close()
	}
}
func (s *countingSession) Logout() error {
	s.cs.mu.Lock()
	s.cs.ended++
	s.cs.mu.Unlock()
	return nil
}

// sessionsEnded is how many sessions the server has seen end.
func (cs *countingServer) sessionsEnded() int {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.ended
}

func sendN(t *testing.T, d destination.Destination, event string, n int) []error {
	t.Helper()
	var errs []error
	for i := 1; i <= n; i++ {
		_, err := d.Send(ctxT(t), newMessage(fmt.Sprintf("%s-%d", event, i), 1))
		errs = append(errs, err)
	}
	return errs
}

func newDest(t *testing.T, target string, opts ...smtpdest.Option) *smtpdest.Destination {
	t.Helper()
	d, err := smtpdest.New(target, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func TestPooledSessionCarriesManyMessages(t *testing.T) {
	cs := startCounting(t, &countingServer{})
	for i, err := range sendN(t, newDest(t, cs.target), "pooled", 10) {
		if err != nil {
			t.Fatalf("message %d: %v", i+1, err)
		}
	}
	if s, m := cs.counts(); s != 1 || m != 10 {
		t.Fatalf("%d sessions for %d messages; want 1 for 10", s, m)
	}
}

func TestPoolSizeZeroConnectsPerMessage(t *testing.T) {
	cs := startCounting(t, &countingServer{})
	for i, err := range sendN(t, newDest(t, cs.target, smtpdest.WithPoolSize(0)), "single", 5) {
		if err != nil {
			t.Fatalf("message %d: %v", i+1, err)
		}
	}
	if s, m := cs.counts(); s != 5 || m != 5 {
		t.Fatalf("%d sessions for %d messages; want 5 for 5", s, m)
	}
}

// TestDroppedIdleSessionCostsOnlyAReconnect: the server closes each
// session right after its 250, before it reads another command, so the
// next send's MAIL on the kept session is never answered: it connects
// afresh, and no message is lost or reported as not delivered.
func TestDroppedIdleSessionCostsOnlyAReconnect(t *testing.T) {
	cs := startCounting(t, &countingServer{dropAfter: true})
	d := newDest(t, cs.target)
	for i := 1; i <= 5; i++ {
		if _, err := d.Send(ctxT(t), newMessage(fmt.Sprintf("drop-%d", i), 1)); err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
	}
	if s, m := cs.counts(); s != 5 || m != 5 {
		t.Fatalf("%d sessions for %d messages; want 5 for 5", s, m)
	}
}

// TestSessionWithoutCleanAcceptanceIsNotReused: after an unknown outcome
// (the reply came too late) and after a rejection the session is closed;
// the following message goes over a new one and is accepted.
func TestSessionWithoutCleanAcceptanceIsNotReused(t *testing.T) {
	reject := &smtp.SMTPError{Code: 554, EnhancedCode: smtp.EnhancedCode{5, 6, 0}, Message: "content refused"}
	cs := startCounting(t, &countingServer{data: func(n int) error {
		switch n {
		case 1:
			time.Sleep(400 * time.Millisecond) // past the data timeout: unknown
		case 3:
			return reject
		}
		return nil
	}})
	d := newDest(t, cs.target, smtpdest.WithDataTimeout(150*time.Millisecond))
	errs := sendN(t, d, "mixed", 4)
	want := []destination.Outcome{destination.OutcomeUnknown, destination.OutcomeAccepted, destination.OutcomeRejectedPermanent, destination.OutcomeAccepted}
	for i, err := range errs {
		if got := destination.ClassifyDelivery(err); got != want[i] {
			t.Errorf("message %d: %s (%v), want %s", i+1, got, err, want[i])
		}
	}
	// 1 unknown (closed), 2 accepted on a new session and kept, 3 rejected
	// on it (closed), 4 on a third session.
	if s, m := cs.counts(); s != 3 || m != 4 {
		t.Fatalf("%d sessions for %d messages; want 3 for 4", s, m)
	}
}

func TestPooledSendsInParallel(t *testing.T) {
	cs := startCounting(t, &countingServer{})
	d := newDest(t, cs.target)
	const workers, each = 8, 10
	var wg sync.WaitGroup
	errs := make(chan error, workers*each)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				_, err := d.Send(ctxT(t), newMessage(fmt.Sprintf("par-%d-%d", w, i), 1))
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if s, m := cs.counts(); s > workers || m != workers*each {
		t.Fatalf("%d sessions for %d messages; want at most %d for %d", s, m, workers, workers*each)
	}
	// After Close the destination still sends, on a new session each time.
	d.Close()
	before, _ := cs.counts()
	sendN(t, d, "after-close", 2)
	if s, _ := cs.counts(); s != before+2 {
		t.Fatalf("after Close: %d new sessions, want 2", s-before)
	}
}

// TestPooledSessionOverSTARTTLSAndAuth: a reused session is the one that
// negotiated TLS and authenticated; later messages travel inside it (straight
// to MAIL: no probe, no second EHLO, STARTTLS or AUTH), and every one
// arrives once.
func TestPooledSessionOverSTARTTLSAndAuth(t *testing.T) {
	ctx := ctxT(t)
	var transcript lockedBuffer
	mb, err := testmailbox.Start(ctx, testmailbox.Config{TLS: testmailbox.TLSRequire, RequireAuth: true,
		AuthUsername: tlsUser, AuthPassword: tlsPass, Debug: &transcript})
	if err != nil {
		t.Fatal(err)
	}
	defer mb.Close()
	d := newDest(t, withCredentials(mb.Target()))
	for i, err := range sendN(t, d, "tls-pooled", 5) {
		if err != nil {
			t.Fatalf("message %d: %v", i+1, err)
		}
	}
	if n, err := mb.Count(ctx, testmailbox.Filter{}); err != nil || n != 5 {
		t.Fatalf("arrivals = %d (%v), want 5", n, err)
	}
	text := transcript.String()
	for _, c := range []struct {
		command string
		want    int
	}{{"STARTTLS\r\n220 ", 1}, {"AUTH PLAIN ", 1}, {"EHLO ", 2}, {"NOOP\r\n", 0}, {"RSET\r\n", 0}, {"MAIL FROM:", 5}} {
		if got := strings.Count(text, c.command); got != c.want {
			t.Errorf("%q %d times in the server transcript, want %d", strings.TrimSpace(c.command), got, c.want)
		}
	}
}

// quitSwallower forwards an SMTP conversation to target but never passes on
// (or answers) QUIT: a server that hangs while a session is being closed.
func quitSwallower(t *testing.T, target string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns sync.WaitGroup
	var mu sync.Mutex
	var open []net.Conn
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		for _, c := range open {
			c.Close()
		}
		mu.Unlock()
		conns.Wait()
	})
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", strings.TrimPrefix(target, "smtp://"))
			if err != nil {
				c.Close()
				return
			}
			mu.Lock()
			open = append(open, c, up)
			mu.Unlock()
			conns.Add(1)
			go func() {
				defer conns.Done()
				go io.Copy(c, up)
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil || strings.EqualFold(strings.TrimSpace(line), "QUIT") {
						break
					}
					if _, err := up.Write([]byte(line)); err != nil {
						break
					}
				}
				// Hold the connection open, answering nothing, until the
				// client gives up (or the test ends).
				io.Copy(io.Discard, r)
				c.Close()
				up.Close()
			}()
		}
	}()
	return "smtp://" + l.Addr().String()
}

// TestCloseDoesNotWaitOutTheCommandTimeout: closing an idle session sends
// QUIT under a short deadline of its own; a destination configured to wait
// an hour for replies must not wait that long for a server that never
// answers QUIT.
func TestCloseDoesNotWaitOutTheCommandTimeout(t *testing.T) {
	cs := startCounting(t, &countingServer{})
	d, err := smtpdest.New(quitSwallower(t, cs.target), smtpdest.WithCommandTimeout(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if errs := sendN(t, d, "quit", 1); errs[0] != nil {
		t.Fatal(errs[0])
	}
	closed := make(chan struct{})
	go func() { d.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(30 * time.Second):
		t.Fatal("Close waits for a QUIT reply under the one-hour command timeout")
	}
}

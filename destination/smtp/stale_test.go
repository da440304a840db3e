package smtp_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-smtp"

	"gatehouse/destination"
	smtpdest "gatehouse/destination/smtp"
	"gatehouse/internal/mailheader"
)

// TestKeptSessionAtMail: what a kept session meets at MAIL decides whether
// the message goes over a new one. A session the server has closed or says
// it is closing (421) costs one reconnect and nothing else; any other reply
// is the server's verdict on this message, and no second session is tried.
func TestKeptSessionAtMail(t *testing.T) {
	tempFail := &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "try later"}
	closing := &smtp.SMTPError{Code: 421, EnhancedCode: smtp.EnhancedCode{4, 3, 2}, Message: "shutting down"}
	for _, tc := range []struct {
		name          string
		idle          time.Duration
		drop          bool
		mail          func(n int) error
		cancel        bool // the second send's context is already cancelled
		want          destination.Outcome
		sessions      int // after the second send
		messages      int
		thirdSessions int // after a third, plain send
	}{
		{name: "idle session timed out by the server (421)", idle: 200 * time.Millisecond,
			want: destination.OutcomeAccepted, sessions: 2, messages: 2, thirdSessions: 2},
		{name: "session dropped after the 250", drop: true,
			want: destination.OutcomeAccepted, sessions: 2, messages: 2, thirdSessions: 3},
		{name: "421 at MAIL on the kept session only", mail: func(n int) error {
			if n == 2 {
				return closing
			}
			return nil
		}, want: destination.OutcomeAccepted, sessions: 2, messages: 2, thirdSessions: 2},
		{name: "421 at MAIL on the new session too", mail: func(n int) error {
			if n == 2 || n == 3 {
				return closing
			}
			return nil
		}, want: destination.OutcomeRejectedTemporary, sessions: 2, messages: 1, thirdSessions: 3},
		{name: "451 at MAIL is the server's verdict", mail: func(n int) error {
			if n == 2 {
				return tempFail
			}
			return nil
		}, want: destination.OutcomeRejectedTemporary, sessions: 1, messages: 1, thirdSessions: 2},
		{name: "cancelled send leaves the kept session kept", cancel: true,
			want: destination.OutcomeNotDelivered, sessions: 1, messages: 1, thirdSessions: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := startCounting(t, &countingServer{idle: tc.idle, dropAfter: tc.drop, mail: tc.mail})
			d := newDest(t, cs.target)
			if _, err := d.Send(ctxT(t), newMessage("kept-1", 1)); err != nil {
				t.Fatalf("first message: %v", err)
			}
			if tc.idle > 0 {
				waitUntil(t, "the server closes the idle session", func() bool { return cs.sessionsEnded() == 1 })
			}
			ctx := ctxT(t)
			if tc.cancel {
				c, cancel := context.WithCancel(ctx)
				cancel()
				ctx = c
			}
			_, err := d.Send(ctx, newMessage("kept-2", 1))
			if got := destination.ClassifyDelivery(err); got != tc.want {
				t.Fatalf("second message: %s (%v), want %s", got, err, tc.want)
			}
			if s, m := cs.counts(); s != tc.sessions || m != tc.messages {
				t.Fatalf("after the second message: %d sessions, %d messages; want %d and %d", s, m, tc.sessions, tc.messages)
			}
			if tc.idle > 0 {
				waitUntil(t, "the server closes the idle session", func() bool { return cs.sessionsEnded() == 2 })
				tc.thirdSessions++ // the third send meets another timed-out session
			}
			if _, err := d.Send(ctxT(t), newMessage("kept-3", 1)); err != nil {
				t.Fatalf("third message: %v", err)
			}
			if s, _ := cs.counts(); s != tc.thirdSessions {
				t.Fatalf("after the third message: %d sessions, want %d", s, tc.thirdSessions)
			}
		})
	}
}

// waitUntil polls cond until it holds (the test's deadline bounds it).
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited 10 s for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestKeptSessionsUnderRandomFaults searches: workers send over one pooled
// destination to a server that, drawn from a seed, drops sessions after
// accepting, closes them with 421 or refuses with 451 at MAIL, refuses
// content, or answers too late. Checked for every message: accepted ⇔
// stored exactly once; a rejection or "not delivered" ⇔ not stored; unknown
// only where the server answered late; never stored twice.
// GATEHOUSE_RACE_SEED repeats a run.
func TestKeptSessionsUnderRandomFaults(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("GATEHOUSE_RACE_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("GATEHOUSE_RACE_SEED=%q: %v", s, err)
		}
	}
	t.Logf("GATEHOUSE_RACE_SEED=%d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	srv := &faultyServer{rng: rng, stored: map[string]int{}, late: map[string]bool{}, verdicts: map[destination.Outcome]int{}}
	target := srv.start(t)
	d := newDest(t, target, smtpdest.WithDataTimeout(500*time.Millisecond), smtpdest.WithPoolSize(1+rng.IntN(8)))
	workers, n := 1+rng.IntN(8), 200
	outcomes := make([]destination.Outcome, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	next := make(chan int)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				_, err := d.Send(ctxT(t), newMessage(fmt.Sprintf("fault-%d", i), 1))
				outcomes[i], errs[i] = destination.ClassifyDelivery(err), err
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	srv.mu.Lock()
	defer srv.mu.Unlock()
	tally := map[destination.Outcome]int{}
	for i, o := range outcomes {
		tally[o]++
		id := newMessage(fmt.Sprintf("fault-%d", i), 1).TransportID
		stored := srv.stored[id]
		switch {
		case stored > 1:
			t.Errorf("message %d stored %d times", i, stored)
		case o == destination.OutcomeAccepted && stored != 1:
			t.Errorf("message %d accepted but stored %d times", i, stored)
		case (o == destination.OutcomeNotDelivered || o == destination.OutcomeRejectedTemporary || o == destination.OutcomeRejectedPermanent) && stored != 0:
			t.Errorf("message %d %s (%v) but stored", i, o, errs[i])
		case o == destination.OutcomeUnknown && !srv.late[id]:
			t.Errorf("message %d unknown (%v) though the server answered in time", i, errs[i])
		}
	}
	t.Logf("%d workers: %v; %d sessions", workers, tally, srv.sessions)
	// Exactly: a fault at MAIL on a kept session is retried on a new one
	// and ends as that one ends; on a new session it is the outcome.
	for _, o := range []destination.Outcome{destination.OutcomeAccepted, destination.OutcomeNotDelivered, destination.OutcomeRejectedTemporary,
		destination.OutcomeRejectedPermanent, destination.OutcomeUnknown} {
		if tally[o] != srv.verdicts[o] {
			t.Errorf("%d messages ended %s, the server's faults make %d", tally[o], o, srv.verdicts[o])
		}
	}
	if tally[destination.OutcomeAccepted] == 0 {
		t.Fatal("no message was accepted: the faults drowned the check")
	}
}

// faultyServer is a go-smtp server whose every MAIL and message draws a
// fault from one seeded source.
type faultyServer struct {
	mu       sync.Mutex
	rng      *rand.Rand
	sessions int
	verdicts map[destination.Outcome]int // what the client must have concluded, counted by the server
	stored   map[string]int              // transport ID → times stored
	late     map[string]bool             // transport IDs answered after the client's data timeout
}

func (f *faultyServer) draw() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.rng.IntN(100)
}

func (f *faultyServer) start(t *testing.T) string {
	t.Helper()
	return serveSMTP(t, 0, func(c *smtp.Conn) smtp.Session {
		f.mu.Lock()
		f.sessions++
		f.mu.Unlock()
		return &faultySession{f: f, conn: c}
	})
}

type faultySession struct {
	f        *faultyServer
	conn     *smtp.Conn
	mails    int
	accepted bool
	drop     bool
}

// verdict counts what the client must conclude for a message.
func (f *faultyServer) verdict(o destination.Outcome) {
	f.mu.Lock()
	f.verdicts[o]++
	f.mu.Unlock()
}

func (s *faultySession) Mail(string, *smtp.MailOptions) error {
	s.mails++
	fresh := s.mails == 1 // the client greets and sends MAIL at once; later MAILs come over a kept session
	switch r := s.f.draw(); {
	case r < 8:
		if fresh {
			s.f.verdict(destination.OutcomeNotDelivered)
		}
		s.conn.Conn().Close() // gone before it answers
		return io.ErrUnexpectedEOF
	case r < 14:
		if fresh {
			s.f.verdict(destination.OutcomeRejectedTemporary)
		}
		return &smtp.SMTPError{Code: 421, EnhancedCode: smtp.EnhancedCode{4, 3, 2}, Message: "closing"}
	case r < 18:
		s.f.verdict(destination.OutcomeRejectedTemporary)
		return &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "try later"}
	}
	return nil
}

func (s *faultySession) Rcpt(string, *smtp.RcptOptions) error { return nil }

func (s *faultySession) Data(r io.Reader) error {
	body, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	id := header(body, mailheader.TransportID)
	switch d := s.f.draw(); {
	case d < 5:
		s.f.verdict(destination.OutcomeRejectedPermanent)
		return &smtp.SMTPError{Code: 554, EnhancedCode: smtp.EnhancedCode{5, 6, 0}, Message: "content refused"}
	case d < 7:
		s.f.mu.Lock()
		s.f.stored[id]++
		s.f.late[id] = true
		s.f.verdicts[destination.OutcomeUnknown]++
		s.f.mu.Unlock()
		time.Sleep(700 * time.Millisecond) // past the data timeout: unknown
		return nil
	case d < 25:
		s.drop = true // after its 250
	}
	s.f.mu.Lock()
	s.f.stored[id]++
	s.f.verdicts[destination.OutcomeAccepted]++
	s.f.mu.Unlock()
	s.accepted = true
	return nil
}

// Reset runs after every message; a session drawn to drop closes here,
// after its 250 was written.
func (s *faultySession) Reset() {
	if s.drop && s.accepted {
		s.conn.Conn().Close()
	}
}

func (s *faultySession) Logout() error { return nil }

// header is the value of one header of a raw message.
func header(raw []byte, name string) string {
	for _, line := range bytes.Split(raw, []byte("\r\n")) {
		if len(line) == 0 {
			break
		}
		if k, v, ok := bytes.Cut(line, []byte(":")); ok && string(bytes.ToLower(k)) == strings.ToLower(name) {
			return string(bytes.TrimSpace(v))
		}
	}
	return ""
}

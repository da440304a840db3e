package testmailbox

import (
	"context"
	"errors"
	"fmt"
	"net"
	netsmtp "net/smtp"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"gatehouse/fakes"
)

// start runs a mailbox for one test and closes it afterwards.
func start(t testing.TB, cfg Config) *Mailbox {
	t.Helper()
	m, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatalf("start mailbox: %v", err)
	}
	t.Cleanup(func() {
		if err := m.Close(); err != nil {
			t.Errorf("close mailbox: %v", err)
		}
	})
	return m
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// message builds a small well-formed message carrying an action key.
func message(key, subject string) string {
	var b strings.Builder
	b.WriteString("From: shop@example.com\r\n")
	b.WriteString("To: ann@example.com\r\n")
	b.WriteString("Subject: " + subject + "\r\n")
	b.WriteString("Message-ID: <" + key + "-" + randomHex(4) + "@test>\r\n")
	if key != "" {
		b.WriteString("X-Gatehouse-Action-Key: " + key + "\r\n")
		b.WriteString("X-Gatehouse-Attempt: 1\r\n")
	}
	b.WriteString("\r\nHello.\r\n")
	return b.String()
}

// send delivers one message over its own connection with the go-smtp client
// and returns the error of the final reply.
func send(addr string, to []string, raw string) error {
	c, err := smtp.Dial(addr)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.SendMail("shop@example.com", to, strings.NewReader(raw)); err != nil {
		return err
	}
	return c.Quit()
}

func mustCount(t *testing.T, m *Mailbox, f Filter) int {
	t.Helper()
	n, err := m.Count(ctxT(t), f)
	if err != nil {
		t.Fatalf("count: %v", err)
	}
	return n
}

func replyCode(err error) int {
	var se *smtp.SMTPError
	if errors.As(err, &se) {
		return se.Code
	}
	return 0
}

func TestInteropNetSMTPAndGoSMTP(t *testing.T) {
	m := start(t, Config{})
	ctx := ctxT(t)

	// net/smtp is a client we did not write.
	err := netsmtp.SendMail(m.SMTPAddr(), nil, "shop@example.com", []string{"ann@example.com"},
		[]byte(message("key-netsmtp", "from net/smtp")))
	if err != nil {
		t.Fatalf("net/smtp: %v", err)
	}
	if err := send(m.SMTPAddr(), []string{"ann@example.com"}, message("key-gosmtp", "from go-smtp")); err != nil {
		t.Fatalf("go-smtp: %v", err)
	}

	total, msgs, err := m.List(ctx, Filter{To: "ANN@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	if total != 2 || len(msgs) != 2 {
		t.Fatalf("total %d, %d messages; want 2", total, len(msgs))
	}
	if msgs[0].ActionKey != "key-netsmtp" || msgs[1].ActionKey != "key-gosmtp" {
		t.Errorf("action keys %q, %q", msgs[0].ActionKey, msgs[1].ActionKey)
	}
	if msgs[0].Subject != "from net/smtp" || msgs[0].From != "shop@example.com" || msgs[0].Attempt != "1" {
		t.Errorf("first message %+v", msgs[0])
	}
	st, err := m.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Accepted != 2 || st.Stored != 2 || st.Refused != 0 {
		t.Errorf("stats %+v", st)
	}
}

// TestInteropCurl sends with a standard command-line SMTP client, the way
// the README shows, when curl is installed.
func TestInteropCurl(t *testing.T) {
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("curl not installed")
	}
	m := start(t, Config{})
	eml := filepath.Join(t.TempDir(), "m.eml")
	if err := os.WriteFile(eml, []byte(message("key-curl", "from curl")), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(curl, "-sS", "smtp://"+m.SMTPAddr(), "--mail-from", "shop@example.com",
		"--mail-rcpt", "ann@example.com", "--upload-file", eml).CombinedOutput()
	if err != nil {
		t.Fatalf("curl: %v\n%s", err, out)
	}
	if n := mustCount(t, m, Filter{ActionKey: "key-curl"}); n != 1 {
		t.Errorf("stored %d; want 1", n)
	}
}

func TestAuthPlain(t *testing.T) {
	m := start(t, Config{RequireAuth: true, AllowInsecureAuth: true})

	// Without AUTH, MAIL is refused.
	if err := send(m.SMTPAddr(), []string{"ann@example.com"}, message("k", "s")); replyCode(err) != 502 {
		t.Fatalf("unauthenticated send: %v; want 502", err)
	}
	// Wrong password.
	c, err := smtp.Dial(m.SMTPAddr())
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Auth(sasl.NewPlainClient("", TestUsername, "wrong")); replyCode(err) != 535 {
		t.Errorf("wrong password: %v; want 535", err)
	}
	c.Close()
	// net/smtp allows PLAIN without TLS to 127.0.0.1 only, which is where we are.
	auth := netsmtp.PlainAuth("", TestUsername, TestPassword, "127.0.0.1")
	if err := netsmtp.SendMail(m.SMTPAddr(), auth, "shop@example.com", []string{"ann@example.com"},
		[]byte(message("k", "authenticated"))); err != nil {
		t.Fatalf("authenticated send: %v", err)
	}
	if n := mustCount(t, m, Filter{}); n != 1 {
		t.Errorf("stored %d, want 1", n)
	}
}

func TestDuplicateActionKeyFlagged(t *testing.T) {
	m := start(t, Config{})
	ctx := ctxT(t)
	for _, key := range []string{"gh1:c:e:reply:t:r0", "gh1:c:e:reply:t:r0", "other"} {
		if err := send(m.SMTPAddr(), []string{"ann@example.com"}, message(key, "hi")); err != nil {
			t.Fatal(err)
		}
	}
	total, msgs, err := m.List(ctx, Filter{ActionKey: "gh1:c:e:reply:t:r0"})
	if err != nil {
		t.Fatal(err)
	}
	if total != 2 || msgs[0].Duplicate || !msgs[1].Duplicate {
		t.Fatalf("total %d, duplicate flags %v %v; want 2, false true", total, msgs[0].Duplicate, msgs[1].Duplicate)
	}
	st, err := m.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Duplicates != 1 || st.DuplicateActionKeys != 1 {
		t.Errorf("duplicates %d on %d keys; want 1 on 1", st.Duplicates, st.DuplicateActionKeys)
	}
}

func TestRefusedMessagesLeaveNothingStored(t *testing.T) {
	m := start(t, Config{MaxMessageBytes: 4096, MaxRecipients: 2})
	big := message("big", "big") + strings.Repeat(strings.Repeat("x", 70)+"\r\n", 60)
	long := message("long", "long") + strings.Repeat("y", 2100) + "\r\n" // within size, over the line limit
	tests := []struct {
		name string
		to   []string
		raw  string
		code int
	}{
		{"Oversize", []string{"ann@example.com"}, big, 552},
		{"TooManyRecipients", []string{"a@example.com", "b@example.com", "c@example.com"}, message("k", "s"), 452},
		{"LineTooLong", []string{"ann@example.com"}, long, 500},
		{"NoHeaderSection", []string{"ann@example.com"}, "just a line of text\r\nand another\r\n", 550},
		{"BrokenHeaderLine", []string{"ann@example.com"}, "Subject: ok\r\nnot a header\r\n\r\nbody\r\n", 550},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := send(m.SMTPAddr(), tt.to, tt.raw)
			if got := replyCode(err); got != tt.code {
				t.Fatalf("reply %v (code %d); want %d", err, got, tt.code)
			}
			if n := mustCount(t, m, Filter{}); n != 0 {
				t.Fatalf("stored %d messages; want 0", n)
			}
		})
	}
	st, err := m.Stats(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	// The recipient limit refuses a command, not a message.
	if st.Refused != 4 || st.Accepted != 0 {
		t.Errorf("stats %+v; want 4 refused, 0 accepted", st)
	}
}

func TestUTF8Envelope(t *testing.T) {
	m := start(t, Config{})
	c, err := smtp.Dial(m.SMTPAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if ok, _ := c.Extension("SMTPUTF8"); !ok {
		t.Fatal("SMTPUTF8 not advertised")
	}
	if ok, _ := c.Extension("8BITMIME"); !ok {
		t.Fatal("8BITMIME not advertised")
	}
	raw := "From: jürgen@exämple.com\r\nTo: zoë@exämple.com\r\nSubject: Grüße\r\n\r\nÄ body\r\n"
	if err := c.SendMail("jürgen@exämple.com", []string{"zoë@exämple.com"}, strings.NewReader(raw)); err != nil {
		t.Fatal(err)
	}
	_, msgs, err := m.List(ctxT(t), Filter{To: "zoë@exämple.com"})
	if err != nil || len(msgs) != 1 {
		t.Fatalf("list: %v, %d messages", err, len(msgs))
	}
	if msgs[0].Subject != "Grüße" || msgs[0].From != "jürgen@exämple.com" {
		t.Errorf("message %+v", msgs[0])
	}
}

func TestWaitForWakesOnArrival(t *testing.T) {
	m := start(t, Config{})
	ctx := ctxT(t)
	done := make(chan error, 1)
	go func() {
		_, err := m.WaitFor(ctx, Filter{ActionKey: "w"}, 2)
		done <- err
	}()
	for range 2 {
		if err := send(m.SMTPAddr(), []string{"ann@example.com"}, message("w", "s")); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	if _, err := m.WaitFor(short, Filter{ActionKey: "w"}, 3); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("WaitFor past deadline: %v", err)
	}
}

func TestMessageFaults(t *testing.T) {
	tests := []struct {
		name    string
		fault   Fault
		code    int  // SMTP reply; 0 means no reply at all
		stored  int  // messages in the store afterwards
		timeout bool // the client gives up waiting
	}{
		{"AcceptThenDrop", Fault{Kind: FaultAcceptThenDrop, Count: 1}, 0, 1, false},
		{"DelayReply", Fault{Kind: FaultDelayReply, Duration: 2 * time.Second, Count: 1}, 0, 1, true},
		{"RejectTemporary", Fault{Kind: FaultRejectTemporary, Count: 1}, 451, 0, false},
		{"RejectPermanent", Fault{Kind: FaultRejectPermanent, Count: 1}, 550, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := start(t, Config{Faults: []Fault{tt.fault}})
			c, err := smtp.Dial(m.SMTPAddr())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SubmissionTimeout = 300 * time.Millisecond
			err = c.SendMail("shop@example.com", []string{"ann@example.com"}, strings.NewReader(message("f", "s")))
			if err == nil {
				t.Fatal("send succeeded; want the fault")
			}
			if got := replyCode(err); got != tt.code {
				t.Errorf("reply %v; want code %d", err, tt.code)
			}
			var ne net.Error
			if tt.timeout != (errors.As(err, &ne) && ne.Timeout()) {
				t.Errorf("error %v; timeout want %v", err, tt.timeout)
			}
			if n := mustCount(t, m, Filter{ActionKey: "f"}); n != tt.stored {
				t.Errorf("stored %d; want %d", n, tt.stored)
			}
			st, err := m.Stats(ctxT(t))
			if err != nil {
				t.Fatal(err)
			}
			if st.FaultsFired[tt.fault.Kind] != 1 {
				t.Errorf("fired %v; want 1 %s", st.FaultsFired, tt.fault.Kind)
			}
			// Count=1: the next message goes through untouched.
			if err := send(m.SMTPAddr(), []string{"ann@example.com"}, message("after", "s")); err != nil {
				t.Errorf("send after the fault: %v", err)
			}
			if len(m.Faults()) != 0 {
				t.Errorf("faults left: %v", m.Faults())
			}
		})
	}
}

func TestFaultMatchesRecipient(t *testing.T) {
	m := start(t, Config{Faults: []Fault{{Kind: FaultRejectPermanent, To: "Bob@Example.com"}}})
	if err := send(m.SMTPAddr(), []string{"ann@example.com"}, message("a", "s")); err != nil {
		t.Errorf("ann: %v", err)
	}
	for range 2 {
		if err := send(m.SMTPAddr(), []string{"ann@example.com", "bob@example.com"}, message("b", "s")); replyCode(err) != 550 {
			t.Errorf("bob: %v; want 550", err)
		}
	}
	st, err := m.Stats(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if st.Accepted != 1 || st.Refused != 2 || st.FaultsFired[FaultRejectPermanent] != 2 {
		t.Errorf("stats %+v", st)
	}
}

// firePattern sends n messages one by one and records which were refused.
func firePattern(t *testing.T, spec string, n int) string {
	f, err := ParseFault(spec)
	if err != nil {
		t.Fatal(err)
	}
	m := start(t, Config{Faults: []Fault{f}})
	var b strings.Builder
	for i := range n {
		err := send(m.SMTPAddr(), []string{"ann@example.com"}, message(fmt.Sprint(i), "s"))
		switch replyCode(err) {
		case 0:
			b.WriteByte('.')
		case 451:
			b.WriteByte('x')
		default:
			t.Fatalf("message %d: %v", i, err)
		}
	}
	return b.String()
}

func TestProbabilityFaultReproducibleWithSeed(t *testing.T) {
	a := firePattern(t, "reject_temporary:p=0.5:seed=7", 24)
	b := firePattern(t, "reject_temporary:p=0.5:seed=7", 24)
	c := firePattern(t, "reject_temporary:p=0.5:seed=8", 24)
	if a != b {
		t.Errorf("same seed, different firings:\n%s\n%s", a, b)
	}
	if a == c {
		t.Errorf("different seeds, same firings %s", a)
	}
	if !strings.Contains(a, "x") || !strings.Contains(a, ".") {
		t.Errorf("p=0.5 fired on all or none: %s", a)
	}
}

func dialable(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

func TestDownRefusesThenComesBack(t *testing.T) {
	m := start(t, Config{})
	if err := m.SetFaults([]Fault{{Kind: FaultDown}}); err != nil {
		t.Fatal(err)
	}
	if dialable(m.SMTPAddr()) {
		t.Fatal("connection accepted while down")
	}
	if err := m.ClearFaults(); err != nil {
		t.Fatal(err)
	}
	if err := send(m.SMTPAddr(), []string{"ann@example.com"}, message("up", "s")); err != nil {
		t.Fatalf("send after down: %v", err)
	}
}

// TestTimedDownEndsOnTheMailboxClock: a down fault with a duration ends
// when the mailbox's clock passes it, not after wall-clock time.
func TestTimedDownEndsOnTheMailboxClock(t *testing.T) {
	clk := fakes.NewClock(time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC))
	m := start(t, Config{Clock: clk})
	if err := m.AddFault(Fault{Kind: FaultDown, Duration: 50 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	down := func() bool {
		t.Helper()
		st, err := m.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return st.Down
	}
	if st := m.Faults(); len(st) != 1 || !st[0].Until.Equal(clk.Now().Add(50*time.Millisecond)) {
		t.Errorf("faults %+v; want one down until 50ms on the mailbox clock", st)
	}
	clk.Advance(49 * time.Millisecond)
	if !down() || dialable(m.SMTPAddr()) {
		t.Fatal("up before the mailbox clock reached the end of the down")
	}
	clk.Advance(time.Millisecond)
	if down() {
		t.Fatal("still down once the mailbox clock passed its end")
	}
	st, err := m.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.FaultsFired[FaultDown] != 1 {
		t.Errorf("down fired %d; want 1", st.FaultsFired[FaultDown])
	}
	if err := send(m.SMTPAddr(), []string{"ann@example.com"}, message("up3", "s")); err != nil {
		t.Fatalf("send after timed down: %v", err)
	}
}

// TestDelayedReplyComesWhenTheClockPassesIt: delay_reply stores the
// message, then answers once the mailbox's clock has moved by the delay.
func TestDelayedReplyComesWhenTheClockPassesIt(t *testing.T) {
	clk := fakes.NewClock(time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC))
	m := start(t, Config{Clock: clk, Faults: []Fault{{Kind: FaultDelayReply, Duration: time.Hour, Count: 1}}})
	ctx := ctxT(t)
	replied := make(chan error, 1)
	go func() { replied <- send(m.SMTPAddr(), []string{"ann@example.com"}, message("late", "s")) }()
	if _, err := m.WaitFor(ctx, Filter{ActionKey: "late"}, 1); err != nil {
		t.Fatal(err)
	}
	if err := clk.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Hour - time.Second)
	select {
	case err := <-replied:
		t.Fatalf("reply before the delay passed on the clock: %v", err)
	default:
	}
	clk.Advance(time.Second)
	select {
	case err := <-replied:
		if err != nil {
			t.Fatalf("delayed reply: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("no reply once the clock passed the delay")
	}
	got, err := m.Get(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if !got.ReceivedAt.Equal(time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)) {
		t.Errorf("received at %v; want the mailbox clock's time when it arrived", got.ReceivedAt)
	}
}

func TestFloodOver16Connections(t *testing.T) {
	m := start(t, Config{DBPath: filepath.Join(t.TempDir(), "mbox.db")})
	const total, workers = 1000, 16
	jobs := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failures []error
	for range workers {
		wg.Go(func() {
			for i := range jobs {
				if err := send(m.SMTPAddr(), []string{"ann@example.com"}, message(fmt.Sprint("flood-", i), "flood")); err != nil {
					mu.Lock()
					failures = append(failures, err)
					mu.Unlock()
				}
			}
		})
	}
	for i := range total {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	if len(failures) > 0 {
		t.Fatalf("%d sends failed, first: %v", len(failures), failures[0])
	}
	if n := mustCount(t, m, Filter{}); n != total {
		t.Fatalf("stored %d; sent %d", n, total)
	}
	st, err := m.Stats(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if st.Accepted != total || st.Duplicates != 0 {
		t.Errorf("stats %+v", st)
	}
}

func TestFileStoreKeepsKeysAcrossRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mbox.db")
	for i, wantDup := range []bool{false, true} {
		m, err := Start(context.Background(), Config{DBPath: path})
		if err != nil {
			t.Fatal(err)
		}
		if err := send(m.SMTPAddr(), []string{"ann@example.com"}, message("persist", "s")); err != nil {
			t.Fatal(err)
		}
		_, msgs, err := m.List(ctxT(t), Filter{ActionKey: "persist"})
		m.Close()
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) != i+1 || msgs[i].Duplicate != wantDup {
			t.Fatalf("run %d: %d messages, last duplicate=%v", i, len(msgs), msgs[len(msgs)-1].Duplicate)
		}
	}
}

func TestClearResetsMessagesKeysAndStats(t *testing.T) {
	m := start(t, Config{})
	ctx := ctxT(t)
	for range 2 {
		if err := send(m.SMTPAddr(), []string{"ann@example.com"}, message("c", "s")); err != nil {
			t.Fatal(err)
		}
	}
	n, err := m.Clear(ctx)
	if err != nil || n != 2 {
		t.Fatalf("clear: %d, %v", n, err)
	}
	if err := send(m.SMTPAddr(), []string{"ann@example.com"}, message("c", "s")); err != nil {
		t.Fatal(err)
	}
	_, msgs, err := m.List(ctx, Filter{})
	if err != nil || len(msgs) != 1 || msgs[0].Duplicate {
		t.Fatalf("after clear: %v %+v", err, msgs)
	}
	if _, err := m.Get(ctx, msgs[0].ID-1); !errors.Is(err, ErrNotFound) {
		t.Errorf("get deleted id: %v", err)
	}
	got, err := m.Get(ctx, msgs[0].ID)
	if err != nil || !strings.Contains(string(got.Raw), "X-Gatehouse-Action-Key: c") {
		t.Errorf("get: %v, raw %q", err, got.Raw)
	}
}

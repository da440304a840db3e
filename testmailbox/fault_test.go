package testmailbox

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"io"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-smtp"

	"gatehouse/fakes"
)

// t0 is where the fake clocks of these tests start.
var t0 = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)

// timedFaultMailbox starts a mailbox on a fake clock with one fault.
func timedFaultMailbox(t *testing.T, spec string, cfg Config) (*Mailbox, *fakes.Clock) {
	t.Helper()
	f, err := ParseFault(spec)
	if err != nil {
		t.Fatal(err)
	}
	clk := fakes.NewClock(t0)
	cfg.Clock, cfg.Faults = clk, []Fault{f}
	return start(t, cfg), clk
}

// dialTransaction connects (over STARTTLS when tc is set), gives MAIL and
// RCPT for to, and leaves DATA to the test. The timeouts are long: a test
// that wants the client to give up shortens them.
func dialTransaction(t *testing.T, m *Mailbox, to string, tc *tls.Config) *smtp.Client {
	t.Helper()
	var c *smtp.Client
	var err error
	if tc != nil {
		var conn net.Conn
		if conn, err = net.Dial("tcp", m.SMTPAddr()); err == nil {
			c, err = smtp.NewClientStartTLS(conn, tc)
		}
	} else {
		c, err = smtp.Dial(m.SMTPAddr())
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.CommandTimeout, c.SubmissionTimeout = time.Minute, time.Minute
	if err := c.Mail("shop@example.com", nil); err != nil {
		t.Fatal(err)
	}
	if err := c.Rcpt(to, nil); err != nil {
		t.Fatal(err)
	}
	return c
}

// sendBody writes raw through an open DATA and returns the final reply's error.
func sendBody(w io.WriteCloser, raw string) error {
	if _, err := io.WriteString(w, raw); err != nil {
		w.Close()
		return err
	}
	return w.Close()
}

// sendAsync sends raw on a transaction of its own and reports the final
// reply's error on the channel.
func sendAsync(t *testing.T, m *Mailbox, to, raw string) <-chan error {
	t.Helper()
	c := dialTransaction(t, m, to, nil)
	done := make(chan error, 1)
	go func() {
		w, err := c.Data()
		if err != nil {
			done <- err
			return
		}
		done <- sendBody(w, raw)
	}()
	return done
}

// pending fails the test when ch has already delivered.
func pending[T any](t *testing.T, ch <-chan T, what string) {
	t.Helper()
	select {
	case v := <-ch:
		t.Fatalf("%s before the clock passed the fault's duration: %v", what, v)
	default:
	}
}

// await returns ch's value, or fails once ctx ends.
func await[T any](t *testing.T, ctx context.Context, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-ctx.Done():
		t.Fatalf("no %s once the clock passed the fault's duration", what)
	}
	var zero T
	return zero
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func firedOf(t *testing.T, m *Mailbox, k FaultKind) int64 {
	t.Helper()
	st, err := m.Stats(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	return st.FaultsFired[k]
}

// TestHold354HoldsTheGoAhead: under hold_354 a sender that gave DATA gets
// no 354 until the mailbox's clock passes the hold; one that gives up
// first leaves nothing stored, one that waits delivers exactly one copy.
// Other recipients pass untouched.
func TestHold354HoldsTheGoAhead(t *testing.T) {
	const spec = "hold_354=1h:to=Ben@Example.com"
	t.Run("OtherRecipientPasses", func(t *testing.T) {
		m, _ := timedFaultMailbox(t, spec, Config{})
		c := dialTransaction(t, m, "ann@example.com", nil)
		c.CommandTimeout = 10 * time.Second
		w, err := c.Data()
		if err != nil {
			t.Fatalf("DATA for ann: %v", err)
		}
		if err := sendBody(w, message("ann", "s")); err != nil {
			t.Fatal(err)
		}
		if n := firedOf(t, m, FaultHold354); n != 0 {
			t.Errorf("hold_354 fired %d times for another recipient", n)
		}
	})
	t.Run("SenderGivesUpAtData", func(t *testing.T) {
		m, clk := timedFaultMailbox(t, spec, Config{})
		c := dialTransaction(t, m, "ben@example.com", nil)
		c.CommandTimeout = 300 * time.Millisecond
		if _, err := c.Data(); !isTimeout(err) {
			t.Fatalf("DATA: %v; want the client to time out waiting for 354", err)
		}
		if err := clk.BlockUntil(ctxT(t), 1); err != nil {
			t.Errorf("the hold's timer: %v", err)
		}
		if n := mustCount(t, m, Filter{}); n != 0 {
			t.Errorf("stored %d; want 0", n)
		}
	})
	t.Run("NoopBeforeDataIsNotHeld", func(t *testing.T) {
		// On a plain connection the mailbox reads the reply it would
		// hold, so only the 354 is held.
		m, clk := timedFaultMailbox(t, spec, Config{})
		c := dialTransaction(t, m, "ben@example.com", nil)
		c.CommandTimeout = 10 * time.Second
		if err := c.Noop(); err != nil {
			t.Fatalf("NOOP between RCPT and DATA: %v", err)
		}
		c.CommandTimeout = 300 * time.Millisecond
		if _, err := c.Data(); !isTimeout(err) {
			t.Fatalf("DATA after NOOP: %v; want the 354 held", err)
		}
		if err := clk.BlockUntil(ctxT(t), 1); err != nil {
			t.Errorf("the hold's timer: %v", err)
		}
	})
	for name, tlsMode := range map[string]TLSMode{"Plain": TLSOff, "STARTTLS": TLSRequire} {
		t.Run("SenderWaits/"+name, func(t *testing.T) {
			m, clk := timedFaultMailbox(t, spec, Config{TLS: tlsMode})
			var tc *tls.Config
			if tlsMode != TLSOff {
				tc = trustMailbox(t, m)
			}
			ctx := ctxT(t)
			c := dialTransaction(t, m, "ben@example.com", tc)
			goAhead := make(chan io.WriteCloser, 1)
			failed := make(chan error, 1)
			go func() {
				w, err := c.Data()
				if err != nil {
					failed <- err
					return
				}
				goAhead <- w
			}()
			if err := clk.BlockUntil(ctx, 1); err != nil {
				t.Fatal(err)
			}
			clk.Advance(time.Hour - time.Second)
			pending(t, goAhead, "354")
			pending(t, failed, "DATA failed")
			clk.Advance(time.Second)
			w := await(t, ctx, goAhead, "354")
			if err := sendBody(w, message("ben", "held")); err != nil {
				t.Fatalf("message after the held 354: %v", err)
			}
			if n := mustCount(t, m, Filter{ActionKey: "ben"}); n != 1 {
				t.Errorf("stored %d; want 1", n)
			}
			if n := firedOf(t, m, FaultHold354); n != 1 {
				t.Errorf("hold_354 fired %d times; want 1", n)
			}
		})
	}
}

// TestStallBodyStoresOnlyAfterTheStall: stall_body reads the message's
// first line (at most 1 KiB), stores nothing and answers nothing until the
// mailbox's clock passes the stall, then stores the message whole.
func TestStallBodyStoresOnlyAfterTheStall(t *testing.T) {
	long := "From: shop@example.com\r\nSubject: " + strings.Repeat("s", 1500) + "\r\nX-Gatehouse-Action-Key: stall\r\n\r\nHello.\r\n"
	tests := []struct{ name, raw string }{
		{"ShortFirstLine", message("stall", "stalled")},
		{"FirstLineOver1KiB", long},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, clk := timedFaultMailbox(t, "stall_body=10m:count=1", Config{})
			ctx := ctxT(t)
			done := sendAsync(t, m, "ann@example.com", tt.raw)
			if err := clk.BlockUntil(ctx, 1); err != nil {
				t.Fatal(err)
			}
			clk.Advance(10*time.Minute - time.Second)
			pending(t, done, "reply")
			if n := mustCount(t, m, Filter{ActionKey: "stall"}); n != 0 {
				t.Fatalf("stored %d during the stall; want 0", n)
			}
			clk.Advance(time.Second)
			if err := await(t, ctx, done, "reply"); err != nil {
				t.Fatalf("send after the stall: %v", err)
			}
			_, msgs, err := m.List(ctx, Filter{ActionKey: "stall"})
			if err != nil || len(msgs) != 1 {
				t.Fatalf("list: %v, %d messages; want 1", err, len(msgs))
			}
			got, err := m.Get(ctx, msgs[0].ID)
			if err != nil {
				t.Fatal(err)
			}
			if string(got.Raw) != tt.raw {
				t.Errorf("stored\n%q\nwant\n%q", got.Raw, tt.raw)
			}
			if n := firedOf(t, m, FaultStallBody); n != 1 {
				t.Errorf("stall_body fired %d times; want 1", n)
			}
		})
	}
}

// TestCloseDuringStallStoresNothing: a message whose read stall_body
// stalled when the mailbox closes is refused, never half stored.
func TestCloseDuringStallStoresNothing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mbox.db")
	clk := fakes.NewClock(t0)
	ctx := ctxT(t)
	m, err := Start(ctx, Config{DBPath: path, Clock: clk, NoHTTP: true,
		Faults: []Fault{{Kind: FaultStallBody, Duration: time.Hour}}})
	if err != nil {
		t.Fatal(err)
	}
	done := sendAsync(t, m, "ann@example.com", message("stalled", "s"))
	if err := clk.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if err := await(t, ctx, done, "end of the send"); err == nil {
		t.Error("the send succeeded although the mailbox closed during the stall")
	}
	again := start(t, Config{DBPath: path, NoHTTP: true})
	if n := mustCount(t, again, Filter{}); n != 0 {
		t.Fatalf("after a close during the stall: %d stored; want 0", n)
	}
}

// countEverywhere reads the count of key through every COUNT the mailbox
// offers: the Go method, the HTTP API with limit=0, and the API client.
func countEverywhere(t *testing.T, m *Mailbox, key string) []int {
	t.Helper()
	ctx := ctxT(t)
	direct := mustCount(t, m, Filter{ActionKey: key})
	status, body := httpDo(t, "GET", m.APIURL()+"/api/v1/messages?limit=0&action_key="+key, "")
	var r MessagesResponse
	if err := json.Unmarshal(body, &r); status != 200 || err != nil {
		t.Fatalf("GET messages: %d %s", status, body)
	}
	c, err := NewClient(m.APIURL(), nil)
	if err != nil {
		t.Fatal(err)
	}
	viaClient, err := c.Count(ctx, Filter{ActionKey: key})
	if err != nil {
		t.Fatal(err)
	}
	return []int{direct, r.Total, viaClient}
}

// TestHoldThenStoreIsAbsentDuringTheHold: hold_then_store has the whole
// message but keeps it out of the records until the mailbox's clock passes
// the hold, whether or not the sender still waits; then exactly one copy
// is there, stamped with the time it was stored.
func TestHoldThenStoreIsAbsentDuringTheHold(t *testing.T) {
	t.Run("SenderWaits", func(t *testing.T) {
		m, clk := timedFaultMailbox(t, "hold_then_store=1h:count=1", Config{})
		ctx := ctxT(t)
		done := sendAsync(t, m, "ann@example.com", message("held", "s"))
		if err := clk.BlockUntil(ctx, 1); err != nil {
			t.Fatal(err)
		}
		clk.Advance(time.Hour - time.Second)
		pending(t, done, "reply")
		if got := countEverywhere(t, m, "held"); got[0] != 0 || got[1] != 0 || got[2] != 0 {
			t.Fatalf("counts during the hold (Go, HTTP, client) %v; want all 0", got)
		}
		clk.Advance(time.Second)
		if err := await(t, ctx, done, "reply"); err != nil {
			t.Fatalf("send: %v", err)
		}
		if got := countEverywhere(t, m, "held"); got[0] != 1 || got[1] != 1 || got[2] != 1 {
			t.Fatalf("counts after the hold (Go, HTTP, client) %v; want all 1", got)
		}
		got, err := m.Get(ctx, 1)
		if err != nil {
			t.Fatal(err)
		}
		if want := t0.Add(time.Hour); !got.ReceivedAt.Equal(want) {
			t.Errorf("received at %v; want %v, when the hold ended", got.ReceivedAt, want)
		}
		st, err := m.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.Accepted != 1 || st.FaultsFired[FaultHoldThenStore] != 1 {
			t.Errorf("stats %+v; want 1 accepted, hold_then_store fired once", st)
		}
	})
	t.Run("SenderGone", func(t *testing.T) {
		m, clk := timedFaultMailbox(t, "hold_then_store=1h:count=1", Config{})
		ctx := ctxT(t)
		c := dialTransaction(t, m, "ann@example.com", nil)
		w, err := c.Data()
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- sendBody(w, message("gone", "s")) }()
		if err := clk.BlockUntil(ctx, 1); err != nil {
			t.Fatal(err)
		}
		c.Close() // the sender goes away while the mailbox holds its message
		if err := await(t, ctx, done, "end of the send"); err == nil {
			t.Fatal("the send succeeded on a closed connection")
		}
		if got := countEverywhere(t, m, "gone"); got[0] != 0 || got[1] != 0 || got[2] != 0 {
			t.Fatalf("counts during the hold (Go, HTTP, client) %v; want all 0", got)
		}
		clk.Advance(time.Hour)
		if n, err := m.WaitFor(ctx, Filter{ActionKey: "gone"}, 1); err != nil || n != 1 {
			t.Fatalf("after the hold: %d stored, %v; want 1", n, err)
		}
		if got := countEverywhere(t, m, "gone"); got[0] != 1 || got[1] != 1 || got[2] != 1 {
			t.Fatalf("counts after the hold (Go, HTTP, client) %v; want all 1", got)
		}
	})
	t.Run("CloseStoresTheHeld", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "mbox.db")
		clk := fakes.NewClock(t0)
		ctx := ctxT(t)
		m, err := Start(ctx, Config{DBPath: path, Clock: clk, NoHTTP: true,
			Faults: []Fault{{Kind: FaultHoldThenStore, Duration: time.Hour}}})
		if err != nil {
			t.Fatal(err)
		}
		const senders = 16
		var sends []<-chan error
		for range senders {
			sends = append(sends, sendAsync(t, m, "ann@example.com", message("closing", "s")))
		}
		if err := clk.BlockUntil(ctx, senders); err != nil {
			t.Fatal(err)
		}
		closed := make(chan error, 1)
		go func() { closed <- m.Close() }()
		if err := await(t, ctx, closed, "return from Close"); err != nil {
			t.Fatalf("close: %v", err)
		}
		for _, done := range sends {
			await(t, ctx, done, "end of the send")
		}
		again := start(t, Config{DBPath: path, NoHTTP: true})
		if n := mustCount(t, again, Filter{ActionKey: "closing"}); n != senders {
			t.Fatalf("after a close during the hold: %d stored; want all %d held", n, senders)
		}
	})
}

// TestTimedFaultsOutlastGoSMTPDeadlines: go-smtp measures its read and
// write deadlines on the wall clock from the DATA command, so a hold or a
// stall longer than the session timeout must renew them or the message
// fails. This runs on the system clock, with a short session timeout.
func TestTimedFaultsOutlastGoSMTPDeadlines(t *testing.T) {
	for _, spec := range []string{"hold_354=750ms", "stall_body=750ms"} {
		t.Run(spec, func(t *testing.T) {
			t.Parallel()
			f, err := ParseFault(spec)
			if err != nil {
				t.Fatal(err)
			}
			m := start(t, Config{ReadTimeout: 250 * time.Millisecond, Faults: []Fault{f}})
			c := dialTransaction(t, m, "ann@example.com", nil)
			w, err := c.Data()
			if err != nil {
				t.Fatalf("DATA: %v", err)
			}
			// Larger than go-smtp's read buffer, so that the stalled
			// read goes back to the socket afterwards.
			raw := message("late", "s") + strings.Repeat(strings.Repeat("x", 70)+"\r\n", 1000)
			if err := sendBody(w, raw); err != nil {
				t.Fatalf("send: %v", err)
			}
			if n := mustCount(t, m, Filter{ActionKey: "late"}); n != 1 {
				t.Errorf("stored %d; want 1", n)
			}
		})
	}
}

// TestTimedFaultSpecsAndJSON: the new kinds read and print in the spec
// format and as JSON, and each requires a positive duration.
func TestTimedFaultSpecsAndJSON(t *testing.T) {
	good := []struct {
		spec string
		want Fault
	}{
		{"hold_354=3s:count=1:to=ben@example.com", Fault{Kind: FaultHold354, Duration: 3 * time.Second, Count: 1, To: "ben@example.com"}},
		{"stall_body=500ms:p=0.5:seed=7", Fault{Kind: FaultStallBody, Duration: 500 * time.Millisecond, P: 0.5, Seed: 7}},
		{"hold_then_store=1m", Fault{Kind: FaultHoldThenStore, Duration: time.Minute}},
	}
	for _, tt := range good {
		t.Run(tt.spec, func(t *testing.T) {
			got, err := ParseFault(tt.spec)
			if err != nil || got != tt.want {
				t.Fatalf("ParseFault = %+v, %v; want %+v", got, err, tt.want)
			}
			if again, err := ParseFault(got.String()); err != nil || again != got {
				t.Errorf("spec round trip via %q: %+v, %v", got.String(), again, err)
			}
			b, err := json.Marshal(got)
			if err != nil {
				t.Fatal(err)
			}
			var back Fault
			if err := json.Unmarshal(b, &back); err != nil || back != got {
				t.Errorf("JSON round trip via %s: %+v, %v", b, back, err)
			}
		})
	}
	bad := []struct{ name, spec, json, want string }{
		{"Hold354NoDuration", "hold_354", `{"kind":"hold_354"}`, `fault hold_354: field "duration": required`},
		{"StallBodyNoDuration", "stall_body:count=1", `{"kind":"stall_body","count":1}`, `fault stall_body: field "duration": required`},
		{"HoldThenStoreNoDuration", "hold_then_store:to=a@b", `{"kind":"hold_then_store","to":"a@b"}`, `fault hold_then_store: field "duration": required`},
		{"ZeroDuration", "hold_354=0s", `{"kind":"hold_354","duration":"0s"}`, `field "duration": required`},
		{"NegativeDuration", "stall_body=-2s", `{"kind":"stall_body","duration":"-2s"}`, `field "duration": -2s is negative`},
		{"NotADuration", "hold_then_store=soon", `{"kind":"hold_then_store","duration":"soon"}`, `"soon"`},
		{"UnknownField", "hold_354=3s:colour=red", `{"kind":"hold_354","duration":"3s","colour":"red"}`, `"colour"`},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := ParseFault(tt.spec); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("ParseFault(%q) = %v; want an error containing %s", tt.spec, err, tt.want)
			}
			var f Fault
			err := json.Unmarshal([]byte(tt.json), &f)
			if err == nil {
				err = f.Validate()
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("JSON %s: %v; want an error containing %s", tt.json, err, tt.want)
			}
		})
	}
}

// TestFaultKindsOrderIsStable: stats and the CLI list kinds in this order;
// new kinds are appended, never inserted.
func TestFaultKindsOrderIsStable(t *testing.T) {
	want := []FaultKind{"accept_then_drop", "delay_reply", "reject_temporary", "reject_permanent", "down",
		"hold_354", "stall_body", "hold_then_store"}
	if !slices.Equal(FaultKinds, want) {
		t.Errorf("FaultKinds %v; want %v", FaultKinds, want)
	}
}

// TestSessionsCountsOpenConnections: Stats.Sessions counts a connection
// from its acceptance to its end, and a session whose sender has gone
// stays open while a fault holds it: the message's fate (stored or
// refused) is settled only once the hold ends and the session closes.
func TestSessionsCountsOpenConnections(t *testing.T) {
	m, clk := timedFaultMailbox(t, "hold_354=1h:count=1:to=ben@example.com", Config{})
	ctx := ctxT(t)
	sessions := func() int64 {
		t.Helper()
		st, err := m.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return st.Sessions
	}
	awaitSessions := func(want int64) {
		t.Helper()
		for sessions() != want {
			select {
			case <-ctx.Done():
				t.Fatalf("sessions %d, want %d", sessions(), want)
			case <-time.After(time.Millisecond): // the server closes its side on its own goroutine
			}
		}
	}
	if n := sessions(); n != 0 {
		t.Fatalf("sessions %d before any connection", n)
	}

	// A plain session that ends with QUIT.
	ann := dialTransaction(t, m, "ann@example.com", nil)
	if n := sessions(); n != 1 {
		t.Fatalf("sessions %d with one connection greeted", n)
	}
	w, err := ann.Data()
	if err != nil {
		t.Fatal(err)
	}
	if err := sendBody(w, message("ann", "s")); err != nil {
		t.Fatal(err)
	}
	if err := ann.Quit(); err != nil {
		t.Fatal(err)
	}
	awaitSessions(0)

	// A sender that gives up waiting for a held 354 and hangs up: the
	// mailbox learns it only once the hold ends.
	ben := dialTransaction(t, m, "ben@example.com", nil)
	ben.CommandTimeout = 200 * time.Millisecond
	if _, err := ben.Data(); !isTimeout(err) {
		t.Fatalf("DATA: %v; want the client to time out waiting for 354", err)
	}
	if err := clk.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	ben.Close()
	if n := sessions(); n != 1 {
		t.Fatalf("sessions %d while the 354 is held for a sender that hung up; want 1", n)
	}
	clk.Advance(time.Hour)
	awaitSessions(0)
	st, err := m.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Accepted != 1 || st.Refused != 1 || st.Stored != 1 {
		t.Errorf("accepted %d, refused %d, stored %d; want 1, 1, 1 (ben's message never came)", st.Accepted, st.Refused, st.Stored)
	}
}

// TestEndHoldsEndsEveryHoldNow: with the mailbox's clock standing still,
// EndHolds (and DELETE /api/v1/holds) lets every held message go on as if
// its time had passed — a held 354 is sent and the message stored, a
// stalled body read on and stored, a held message stored, a delayed reply
// given — and Stats.Held counts them while they are held. A hold that
// begins afterwards runs its full time.
func TestEndHoldsEndsEveryHoldNow(t *testing.T) {
	tests := []struct {
		spec string
		via  string // "go" or "http"
	}{
		{"hold_354=1h", "go"},
		{"stall_body=1h", "http"},
		{"hold_then_store=1h", "go"},
		{"delay_reply=1h", "http"},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			m, clk := timedFaultMailbox(t, tt.spec, Config{})
			ctx := ctxT(t)
			held := func() int64 {
				t.Helper()
				st, err := m.Stats(ctx)
				if err != nil {
					t.Fatal(err)
				}
				return st.Held
			}
			first := sendAsync(t, m, "ann@example.com", message("first", "s"))
			second := sendAsync(t, m, "ben@example.com", message("second", "s"))
			if err := clk.BlockUntil(ctx, 2); err != nil {
				t.Fatal(err)
			}
			if n := held(); n != 2 {
				t.Fatalf("held %d with two messages held; want 2", n)
			}
			var ended int
			if tt.via == "go" {
				ended = m.EndHolds()
			} else {
				c, err := NewClient(m.APIURL(), nil)
				if err != nil {
					t.Fatal(err)
				}
				if ended, err = c.EndHolds(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if ended != 2 {
				t.Errorf("EndHolds ended %d; want 2", ended)
			}
			for _, done := range []<-chan error{first, second} {
				if err := await(t, ctx, done, "reply"); err != nil {
					t.Fatalf("send after EndHolds: %v", err)
				}
			}
			if n := mustCount(t, m, Filter{}); n != 2 {
				t.Fatalf("stored %d after EndHolds; want 2", n)
			}
			if n := held(); n != 0 {
				t.Errorf("held %d after EndHolds; want 0", n)
			}
			// A hold that begins afterwards is not ended by the earlier call.
			third := sendAsync(t, m, "cy@example.com", message("third", "s"))
			if err := clk.BlockUntil(ctx, 1); err != nil {
				t.Fatal(err)
			}
			pending(t, third, "reply")
			if n := held(); n != 1 {
				t.Fatalf("held %d with a new hold; want 1", n)
			}
			clk.Advance(time.Hour)
			if err := await(t, ctx, third, "reply"); err != nil {
				t.Fatal(err)
			}
		})
	}
}

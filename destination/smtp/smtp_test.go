package smtp_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/mail"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-smtp"

	"gatehouse/destination"
	smtpdest "gatehouse/destination/smtp"
	"gatehouse/internal/testids"
	"gatehouse/ledger"
	"gatehouse/testmailbox"
)

func startMailbox(t *testing.T, faults ...testmailbox.Fault) *testmailbox.Mailbox {
	t.Helper()
	m, err := testmailbox.Start(context.Background(), testmailbox.Config{Faults: faults})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func newMessage(event string, attempt int) destination.Message {
	key := ledger.Key("cust-42", event, "reply_ack", "task-7", 0)
	return destination.Message{
		ActionKey:   key,
		Attempt:     attempt,
		TransportID: testids.Fixed(key, attempt),
		From:        "Support <support@shop.example>",
		To:          "ann@example.com",
		Subject:     "We received your enquiry",
		Body:        "Hello Ann,\nthank you.\n",
	}
}

func looking(t *testing.T, target string, opts ...smtpdest.Option) *smtpdest.LookingDestination {
	t.Helper()
	d, err := smtpdest.New(target, opts...)
	if err != nil {
		t.Fatal(err)
	}
	ld, ok := d.Looking()
	if !ok {
		t.Fatalf("New(%q).Looking() offers no records", target)
	}
	return ld
}

func TestNewRejectsBadTargets(t *testing.T) {
	tests := []struct{ name, target, want string }{
		{"Empty", "", "scheme must be smtp"},
		{"WrongScheme", "http://127.0.0.1:25", "scheme must be smtp"},
		{"NoScheme", "127.0.0.1:25", "scheme must be smtp"},
		{"NoPort", "smtp://127.0.0.1", "missing port"},
		{"NoHost", "smtp://:25", "missing host"},
		{"Path", "smtp://127.0.0.1:25/inbox", "unexpected path"},
		{"UnknownParam", "smtp://127.0.0.1:25?tsl=require", `unknown parameter "tsl"`},
		{"APIWrongScheme", "smtp://127.0.0.1:25?api=ftp://h:1", "scheme must be http"},
		{"APINoPort", "smtp://127.0.0.1:25?api=http://h", "want http://host:port"},
		{"APIPath", "smtp://127.0.0.1:25?api=http://h:1/x", "want only http://host:port"},
		{"APITwice", "smtp://127.0.0.1:25?api=http://h:1&api=http://h:2", "api given 2 times"},
		{"Garbage", "smtp://[::1", "not a URL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := smtpdest.New(tt.target)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("New(%q) = %v; want error containing %q", tt.target, err, tt.want)
			}
		})
	}
}

func TestLookerOnlyWithAPI(t *testing.T) {
	plain, err := smtpdest.New("smtp://127.0.0.1:2525")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := plain.Looking(); ok {
		t.Error("Looking() offers records without api")
	}
	if _, ok := plain.Gate().(destination.Records); ok {
		t.Errorf("Gate() = %T implements destination.Records without api", plain.Gate())
	}
	withAPI, err := smtpdest.New("smtp://127.0.0.1:2525?api=http://127.0.0.1:8025")
	if err != nil {
		t.Fatal(err)
	}
	ld, ok := withAPI.Looking()
	if !ok || ld.LookupEndpoint() != "http://127.0.0.1:8025" {
		t.Errorf("Looking() = %v, %v; want the records at the api", ld, ok)
	}
	if _, ok := withAPI.Gate().(destination.Records); !ok {
		t.Errorf("Gate() = %T does not implement destination.Records with api", withAPI.Gate())
	}
}

func TestSendArrivesWithHeadersAndUTF8Subject(t *testing.T) {
	m := startMailbox(t)
	ctx := ctxT(t)
	d := looking(t, m.Target())
	msg := newMessage("enquiry-1", 1)
	msg.Subject = "Ihre Anfrage — Grüße aus Köln ✓"
	msg.Body = "Line one\n.\n..two dots\nlast line without newline"
	rcpt, err := d.Send(ctx, msg)
	if err != nil {
		t.Fatalf("send: %v", err)
	}
	if rcpt.TransportID != msg.TransportID || !strings.HasPrefix(rcpt.Response, "250 ") || rcpt.At.IsZero() {
		t.Errorf("receipt %+v", rcpt)
	}
	_, msgs, err := m.List(ctx, testmailbox.Filter{ActionKey: msg.ActionKey})
	if err != nil || len(msgs) != 1 {
		t.Fatalf("list: %v, %d messages", err, len(msgs))
	}
	got, err := m.Get(ctx, msgs[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Subject != msg.Subject {
		t.Errorf("subject %q; want %q", got.Subject, msg.Subject)
	}
	if got.MessageID != msg.TransportID || got.Attempt != "1" || got.From != "support@shop.example" {
		t.Errorf("stored %+v", got)
	}
	raw := string(got.Raw)
	if strings.Contains(strings.ReplaceAll(raw, "\r\n", ""), "\n") {
		t.Errorf("bare LF in message:\n%q", raw)
	}
	parsed, err := mail.ReadMessage(strings.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{"Date", "From", "To", "Subject", "Message-Id", "X-Gatehouse-Transport"} {
		if parsed.Header.Get(h) == "" {
			t.Errorf("header %s missing", h)
		}
	}
	if _, err := parsed.Header.Date(); err != nil {
		t.Errorf("Date: %v", err)
	}
	body, _ := io.ReadAll(parsed.Body)
	if want := "Line one\r\n.\r\n..two dots\r\nlast line without newline\r\n"; string(body) != want {
		t.Errorf("body %q; want %q", body, want)
	}
	res, err := d.Lookup(ctx, destination.LookupQuery{ActionKey: msg.ActionKey, MessageID: msg.MessageID()})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Messages) != 1 || res.Messages[0].MessageID != msg.TransportID || res.Messages[0].ActionKey != msg.ActionKey ||
		len(res.Messages[0].Recipients) != 1 || res.Messages[0].Recipients[0] != msg.To {
		t.Errorf("lookup %+v", res)
	}
}

// TestOutcomeAgainstMailboxFaults checks each fault end to end: the outcome
// the gate is told, and what really arrived.
func TestOutcomeAgainstMailboxFaults(t *testing.T) {
	tests := []struct {
		name    string
		fault   testmailbox.Fault
		outcome destination.Outcome // "" means accepted (nil error)
		arrived int
	}{
		{"NoFault", testmailbox.Fault{}, "", 1},
		{"AcceptThenDrop", testmailbox.Fault{Kind: testmailbox.FaultAcceptThenDrop, Count: 1}, destination.OutcomeUnknown, 1},
		{"DelayReplyPastTimeout", testmailbox.Fault{Kind: testmailbox.FaultDelayReply, Duration: 3 * time.Second, Count: 1}, destination.OutcomeUnknown, 1},
		{"RejectTemporary", testmailbox.Fault{Kind: testmailbox.FaultRejectTemporary, Count: 1}, destination.OutcomeRejectedTemporary, 0},
		{"RejectPermanent", testmailbox.Fault{Kind: testmailbox.FaultRejectPermanent, Count: 1}, destination.OutcomeRejectedPermanent, 0},
		{"Down", testmailbox.Fault{Kind: testmailbox.FaultDown}, destination.OutcomeNotDelivered, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var faults []testmailbox.Fault
			if tt.fault.Kind != "" {
				faults = append(faults, tt.fault)
			}
			m := startMailbox(t, faults...)
			ctx := ctxT(t)
			d := looking(t, m.Target(), smtpdest.WithDataTimeout(300*time.Millisecond))
			msg := newMessage("enquiry-"+tt.name, 1)

			_, err := d.Send(ctx, msg)
			if got := destination.ClassifyDelivery(err); got != tt.outcome && !(tt.outcome == "" && got == destination.OutcomeAccepted) {
				t.Fatalf("outcome %s (%v); want %q", got, err, tt.outcome)
			}
			if err != nil {
				var de *destination.DeliveryError
				if !errors.As(err, &de) {
					t.Errorf("error %T is not a *destination.DeliveryError", err)
				}
			}
			if tt.arrived > 0 {
				if _, err := m.WaitFor(ctx, testmailbox.Filter{ActionKey: msg.ActionKey}, tt.arrived); err != nil {
					t.Fatal(err)
				}
			}
			res, err := d.Lookup(ctx, destination.LookupQuery{ActionKey: msg.ActionKey, MessageID: msg.MessageID()})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Messages) != tt.arrived {
				t.Errorf("lookup %+v; want %d arrivals", res, tt.arrived)
			}
			if tt.fault.Kind != "" {
				st, err := m.Stats(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if st.FaultsFired[tt.fault.Kind] != 1 {
					t.Errorf("faults fired %v", st.FaultsFired)
				}
			}
			// A retryable outcome may be retried: the next attempt arrives.
			if destination.Outcome(tt.outcome).Retryable() {
				if err := m.ClearFaults(); err != nil {
					t.Fatal(err)
				}
				if _, err := d.Send(ctx, newMessage("enquiry-"+tt.name, 2)); err != nil {
					t.Fatalf("retry: %v", err)
				}
				if n, _ := m.Count(ctx, testmailbox.Filter{ActionKey: msg.ActionKey}); n != 1 {
					t.Errorf("after retry %d arrivals; want 1", n)
				}
			}
		})
	}
}

// scriptedSession answers MAIL and RCPT as a test tells it, to reach the
// classification branches the mailbox has no fault for.
type scriptedSession struct {
	conn     *smtp.Conn
	mail     error
	rcpt     error
	dropMail bool
}

func (s *scriptedSession) Mail(string, *smtp.MailOptions) error {
	if s.dropMail {
		s.conn.Conn().Close()
	}
	return s.mail
}
func (s *scriptedSession) Rcpt(string, *smtp.RcptOptions) error { return s.rcpt }
func (s *scriptedSession) Data(r io.Reader) error {
	_, err := io.Copy(io.Discard, r)
	return err
}
func (s *scriptedSession) Reset()        {}
func (s *scriptedSession) Logout() error { return nil }

func scriptedServer(t *testing.T, mk func(c *smtp.Conn) *scriptedSession) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := smtp.NewServer(smtp.BackendFunc(func(c *smtp.Conn) (smtp.Session, error) { return mk(c), nil }))
	s.ErrorLog = nopLogger{}
	go s.Serve(l)
	t.Cleanup(func() { s.Close() })
	return "smtp://" + l.Addr().String()
}

type nopLogger struct{}

func (nopLogger) Printf(string, ...any) {}
func (nopLogger) Println(...any)        {}

func TestOutcomeBeforeData(t *testing.T) {
	temp := &smtp.SMTPError{Code: 450, EnhancedCode: smtp.EnhancedCode{4, 2, 1}, Message: "mailbox busy"}
	perm := &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1}, Message: "no such user"}
	tests := []struct {
		name    string
		session scriptedSession
		want    destination.Outcome
	}{
		{"MailTemporary", scriptedSession{mail: temp}, destination.OutcomeRejectedTemporary},
		{"MailPermanent", scriptedSession{mail: perm}, destination.OutcomeRejectedPermanent},
		{"RcptTemporary", scriptedSession{rcpt: temp}, destination.OutcomeRejectedTemporary},
		{"RcptPermanent", scriptedSession{rcpt: perm}, destination.OutcomeRejectedPermanent},
		{"ConnectionLostAtMail", scriptedSession{dropMail: true}, destination.OutcomeNotDelivered},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			target := scriptedServer(t, func(c *smtp.Conn) *scriptedSession {
				s := tt.session
				s.conn = c
				return &s
			})
			d, err := smtpdest.New(target)
			if err != nil {
				t.Fatal(err)
			}
			_, err = d.Send(ctxT(t), newMessage("e", 1))
			if got := destination.ClassifyDelivery(err); got != tt.want {
				t.Errorf("outcome %s (%v); want %s", got, err, tt.want)
			}
		})
	}
}

func TestNotDeliveredWhenNothingListens(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	d, err := smtpdest.New("smtp://" + addr)
	if err != nil {
		t.Fatal(err)
	}
	_, err = d.Send(ctxT(t), newMessage("e", 1))
	if got := destination.ClassifyDelivery(err); got != destination.OutcomeNotDelivered {
		t.Errorf("outcome %s (%v); want not_delivered", got, err)
	}
}

func TestCancelledContextIsNotDelivered(t *testing.T) {
	m := startMailbox(t)
	d, err := smtpdest.New(m.Target())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = d.Send(ctx, newMessage("e", 1))
	if got := destination.ClassifyDelivery(err); got != destination.OutcomeNotDelivered {
		t.Errorf("outcome %s (%v); want not_delivered", got, err)
	}
}

// TestComposeRefusesBadMessages: a message that cannot be composed fails
// the same way every time, so it is a permanent failure, never "retry".
func TestComposeRefusesBadMessages(t *testing.T) {
	m := startMailbox(t)
	d, err := smtpdest.New(m.Target())
	if err != nil {
		t.Fatal(err)
	}
	bad := []func(*destination.Message){
		func(m *destination.Message) { m.To = "" },
		func(m *destination.Message) { m.From = "not an address" },
		func(m *destination.Message) { m.Subject = "two\r\nBcc: eve@example.com" },
		func(m *destination.Message) { m.ActionKey = "k\nX-Evil: 1" },
	}
	for i, mutate := range bad {
		msg := newMessage("e", 1)
		mutate(&msg)
		_, err := d.Send(ctxT(t), msg)
		if got := destination.ClassifyDelivery(err); got != destination.OutcomeRejectedPermanent {
			t.Errorf("case %d: outcome %s (%v); want rejected_permanent", i, got, err)
		}
	}
	if n, _ := m.Count(ctxT(t), testmailbox.Filter{}); n != 0 {
		t.Errorf("%d messages arrived; want 0", n)
	}
}

func TestEmptyFromUsesDefault(t *testing.T) {
	m := startMailbox(t)
	ctx := ctxT(t)
	for _, tt := range []struct {
		opts []smtpdest.Option
		want string
	}{
		{nil, smtpdest.DefaultFrom},
		{[]smtpdest.Option{smtpdest.WithFrom("desk@shop.example")}, "desk@shop.example"},
	} {
		d, err := smtpdest.New(m.Target(), tt.opts...)
		if err != nil {
			t.Fatal(err)
		}
		msg := newMessage("from-"+tt.want, 1)
		msg.From = ""
		if _, err := d.Send(ctx, msg); err != nil {
			t.Fatal(err)
		}
		_, msgs, err := m.List(ctx, testmailbox.Filter{ActionKey: msg.ActionKey})
		if err != nil || len(msgs) != 1 || msgs[0].From != tt.want {
			t.Errorf("sender %+v, %v; want %s", msgs, err, tt.want)
		}
	}
}

func TestLookupUnavailable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	api := "http://" + l.Addr().String()
	l.Close()
	d := looking(t, "smtp://127.0.0.1:1?api="+api)
	_, err = d.Lookup(ctxT(t), destination.LookupQuery{ActionKey: "k"})
	if !errors.Is(err, destination.ErrLookupUnavailable) {
		t.Errorf("lookup with nothing listening: %v; want ErrLookupUnavailable", err)
	}
}

// TestLookupRefusesWhatIsNotAnAnswer: "absent" may only come from a reply
// that really says how many messages there are. Anything else is
// unavailable, so reconciliation holds instead of allowing a retry.
func TestLookupRefusesWhatIsNotAnAnswer(t *testing.T) {
	tests := []struct {
		Name, Body string
		Status     int
		Absent     bool
	}{
		{"RealEmptyAnswer", `{"total":0,"messages":[]}`, 200, true},
		{"NoTotal", `{"messages":[]}`, 200, false},
		{"NoMessages", `{"total":0}`, 200, false},
		{"EmptyObject", `{}`, 200, false},
		{"NotJSON", `<html>ok</html>`, 200, false},
		{"PagesEndEarly", `{"total":3,"messages":[]}`, 200, false},
		{"MessageWithoutID", `{"total":1,"messages":[{"action_key":"k"}]}`, 200, false},
		{"MessageWithoutRecordID", `{"total":1,"messages":[{"message_id":"m","action_key":"k"}]}`, 200, false},
		{"RawNotThere", `{"total":1,"messages":[{"id":1,"message_id":"m","action_key":"k"}]}`, 200, false},
		{"NegativeTotal", `{"total":-1,"messages":[]}`, 200, false},
		{"ServerError", `{"total":0,"messages":[]}`, 500, false},
	}
	for _, tc := range tests {
		t.Run(tc.Name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.WriteHeader(tc.Status)
				io.WriteString(w, tc.Body)
			}))
			defer srv.Close()
			d := looking(t, "smtp://127.0.0.1:1?api="+srv.URL)
			res, err := d.Lookup(ctxT(t), destination.LookupQuery{ActionKey: "k", MessageID: "m"})
			if tc.Absent {
				if err != nil || len(res.Messages) != 0 {
					t.Fatalf("lookup = %+v, %v; want an answer of nothing", res, err)
				}
				return
			}
			if !errors.Is(err, destination.ErrLookupUnavailable) {
				t.Fatalf("lookup = %+v, %v; want ErrLookupUnavailable", res, err)
			}
		})
	}
}

// TestPasswordNeverShown: a destination URL's password appears in no
// error and no identity.
func TestPasswordNeverShown(t *testing.T) {
	d, err := smtpdest.New("smtp://ops:s3cret@127.0.0.1:2525")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(d.Identity(), "s3cret") || strings.Contains(d.Identity(), "ops") {
		t.Errorf("identity %q shows credentials", d.Identity())
	}
	for _, bad := range []string{"smtp://ops:s3cret@127.0.0.1", "smtp://ops:s3cret@127.0.0.1:2525/path", "smtp://ops:s3cret@127.0.0.1:2525?x=1",
		"smtp://ops:s3cret@[::1"} {
		_, err := smtpdest.New(bad)
		if err == nil || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("New(%q) = %v; want an error without the password", bad, err)
		}
	}
}

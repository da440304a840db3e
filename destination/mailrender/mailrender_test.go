package mailrender_test

import (
	"bytes"
	"context"
	"io"
	"mime"
	"mime/quotedprintable"
	"net/mail"
	"os"
	"strings"
	"testing"
	"time"

	"gatehouse/destination"
	filedest "gatehouse/destination/file"
	"gatehouse/destination/mailrender"
	smtpdest "gatehouse/destination/smtp"
	"gatehouse/internal/mailheader"
	"gatehouse/internal/testids"
	"gatehouse/ledger"
	"gatehouse/testmailbox"
)

var date = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)

func message(body string) destination.Message {
	key := ledger.Key("cust-42", "enquiry-1", "reply_ack", "task-7", 0)
	return destination.Message{ActionKey: key, Attempt: 1, TransportID: testids.Fixed(key, 1),
		From: "support@shop.example", To: "ada@example.com", ToName: "Ada Lovelace",
		Subject: "Ihre Anfrage – erhalten", Body: body}
}

// decoded parses a rendered message and returns its header and its body
// with the transfer encoding undone.
func decoded(t *testing.T, raw []byte) (mail.Header, string) {
	t.Helper()
	m, err := mail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("rendered message does not parse: %v", err)
	}
	r := m.Body
	if m.Header.Get("Content-Transfer-Encoding") == "quoted-printable" {
		r = quotedprintable.NewReader(r)
	}
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return m.Header, string(b)
}

func longestLine(raw []byte) int {
	n := 0
	for _, l := range bytes.Split(raw, []byte("\r\n")) {
		n = max(n, len(l))
	}
	return n
}

func TestRenderBodyEncoding(t *testing.T) {
	long := strings.Repeat("0123456789 =äbc ", 400) // 6,400 octets, one line
	tests := []struct {
		name, body, cte, want string
	}{
		{"ASCIIIs7bit", "Hello Ada,\nthank you.", "7bit", "Hello Ada,\r\nthank you.\r\n"},
		{"UTF8Is8bit", "Grüße\r\naus Köln\n", "8bit", "Grüße\r\naus Köln\r\n"},
		{"LineAt998Stays8bit", strings.Repeat("é", 499), "8bit", strings.Repeat("é", 499) + "\r\n"},
		{"LongLineIsQuotedPrintable", long, "quoted-printable", long},
		{"LongLineAmongShortOnes", "Hi\n" + long + "\nBye\n", "quoted-printable", "Hi\r\n" + long + "\r\nBye\r\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := mailrender.Render(message(tt.body), "x@y.example", date)
			if err != nil {
				t.Fatal(err)
			}
			if n := longestLine(m.Raw); n > mailrender.MaxLineOctets {
				t.Errorf("a line of %d octets, over SMTP's %d", n, mailrender.MaxLineOctets)
			}
			if !bytes.HasSuffix(m.Raw, []byte("\r\n")) {
				t.Error("message does not end in CRLF")
			}
			h, body := decoded(t, m.Raw)
			if got := h.Get("Content-Transfer-Encoding"); got != tt.cte {
				t.Errorf("Content-Transfer-Encoding = %q, want %q", got, tt.cte)
			}
			if got := h.Get("Content-Type"); got != "text/plain; charset=utf-8" {
				t.Errorf("Content-Type = %q", got)
			}
			if body != tt.want {
				t.Errorf("decoded body differs: got %d octets, want %d", len(body), len(tt.want))
			}
		})
	}
}

func TestRenderHeaders(t *testing.T) {
	msg := message("Hello")
	m, err := mailrender.Render(msg, "x@y.example", date)
	if err != nil {
		t.Fatal(err)
	}
	h, _ := decoded(t, m.Raw)
	want := map[string]string{
		"Date":                 "Mon, 02 Mar 2026 09:00:00 +0000",
		"From":                 "support@shop.example",
		"To":                   `"Ada Lovelace" <ada@example.com>`,
		"Subject":              msg.Subject,
		mailheader.MessageID:   "<" + msg.TransportID + ">",
		mailheader.ActionKey:   msg.ActionKey,
		mailheader.Attempt:     "1",
		mailheader.TransportID: msg.TransportID,
	}
	for name, v := range want {
		got := h.Get(name)
		if name == "Subject" {
			if got, err = new(mime.WordDecoder).DecodeHeader(got); err != nil {
				t.Fatalf("Subject: %v", err)
			}
		}
		if got != v {
			t.Errorf("%s = %q, want %q", name, got, v)
		}
	}
	if m.From != "support@shop.example" || m.To != "ada@example.com" {
		t.Errorf("envelope %q → %q", m.From, m.To)
	}
	msg.From = ""
	if m, _ := mailrender.Render(msg, "gatehouse@localhost", date); m.From != "gatehouse@localhost" {
		t.Errorf("default sender: envelope from %q", m.From)
	}
}

// unrenderable are messages no destination may hand over.
var unrenderable = []struct {
	name string
	edit func(*destination.Message)
}{
	{"NoTransportID", func(m *destination.Message) { m.TransportID = "" }},
	{"BadRecipient", func(m *destination.Message) { m.To = "not an address" }},
	{"RecipientInjection", func(m *destination.Message) { m.To = "ada@example.com\r\nBcc: eve@example.com" }},
	{"SubjectInjection", func(m *destination.Message) { m.Subject = "Hi\r\nBcc: eve@example.com" }},
	{"BodyNotUTF8", func(m *destination.Message) { m.Body = "caf\xe9" }},
	{"SubjectNotUTF8", func(m *destination.Message) { m.Subject = "caf\xe9" }},
	{"RecipientNameNotUTF8", func(m *destination.Message) { m.ToName = strings.Repeat("\x80", 2000) }},
}

func TestRenderRefusesPermanently(t *testing.T) {
	for _, tt := range unrenderable {
		t.Run(tt.name, func(t *testing.T) {
			msg := message("Hello")
			tt.edit(&msg)
			_, err := mailrender.Render(msg, "x@y.example", date)
			if got := destination.ClassifyDelivery(err); got != destination.OutcomeRejectedPermanent {
				t.Fatalf("outcome = %s (%v), want rejected_permanent", got, err)
			}
		})
	}
}

// TestDestinationsAgreeOnPermanentErrors sends every unrenderable message
// to both mail destinations: each refuses it as permanent and hands
// nothing over (the file directory stays empty, the real mailbox counts no
// message and no refusal: nothing reached it).
func TestDestinationsAgreeOnPermanentErrors(t *testing.T) {
	dir := t.TempDir()
	file, err := filedest.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	mb, err := testmailbox.Start(context.Background(), testmailbox.Config{NoHTTP: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mb.Close() })
	smtp, err := smtpdest.New(mb.Target())
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range unrenderable {
		for _, d := range []destination.Destination{file, smtp} {
			t.Run(tt.name+"/"+strings.SplitN(d.Identity(), ":", 2)[0], func(t *testing.T) {
				msg := message("Hello")
				tt.edit(&msg)
				_, err := d.Send(context.Background(), msg)
				if got := destination.ClassifyDelivery(err); got != destination.OutcomeRejectedPermanent {
					t.Fatalf("outcome = %s (%v), want rejected_permanent", got, err)
				}
			})
		}
	}
	if files, _ := os.ReadDir(dir); len(files) != 0 {
		t.Errorf("the file destination holds %d files", len(files))
	}
	st, err := mb.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.Stored != 0 || st.Refused != 0 {
		t.Errorf("the mailbox saw %d stored, %d refused; want nothing handed over", st.Stored, st.Refused)
	}
}

// TestRenderFoldsLongHeaders: a long subject is folded at its spaces and a
// word too long for any line becomes encoded words; readers get the
// subject back as approved and no line passes SMTP's limit.
func TestRenderFoldsLongHeaders(t *testing.T) {
	tests := []struct{ name, subject string }{
		{"ManyWords", strings.Repeat("Your order is on its way ", 200)},
		{"OneLongWord", strings.Repeat("x", 3000)},
		{"OneLongUTF8Word", strings.Repeat("ü", 1500)},
		{"NonASCIIWords", strings.Repeat("Grüße aus Köln ", 100)},
		{"Short", "We received your enquiry"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msg := message("Hello")
			msg.Subject = strings.TrimSpace(tt.subject)
			m, err := mailrender.Render(msg, "x@y.example", date)
			if err != nil {
				t.Fatal(err)
			}
			if n := longestLine(m.Raw); n > mailrender.MaxLineOctets {
				t.Errorf("a line of %d octets", n)
			}
			h, _ := decoded(t, m.Raw)
			got, err := new(mime.WordDecoder).DecodeHeader(h.Get("Subject"))
			if err != nil {
				t.Fatal(err)
			}
			if got != msg.Subject {
				t.Errorf("subject read back differs: %d bytes, want %d", len(got), len(msg.Subject))
			}
		})
	}
}

// TestRenderRefusesOverMaxMessageOctets: a message its records could
// not read back (Decode refuses it) is not handed over.
func TestRenderRefusesOverMaxMessageOctets(t *testing.T) {
	// One line, so quoted-printable: each "é" becomes six octets.
	msg := message(strings.Repeat("é", mailrender.MaxMessageOctets/4))
	_, err := mailrender.Render(msg, "x@y.example", date)
	if got := destination.ClassifyDelivery(err); got != destination.OutcomeRejectedPermanent {
		t.Fatalf("outcome = %s (%v), want rejected_permanent", got, err)
	}
}

// TestRenderWritesHeadersReadersAgreeOn: a subject that looks like
// encoded words is encoded, so that no reader takes it for another
// subject, and a display name too long for one line still parses.
func TestRenderWritesHeadersReadersAgreeOn(t *testing.T) {
	msg := message("Hello")
	msg.Subject = "=?utf-8?q?Gr=C3=BC=C3=9Fe?= from us"
	msg.ToName = strings.Repeat("Ada", 400)
	m, err := mailrender.Render(msg, "x@y.example", date)
	if err != nil {
		t.Fatal(err)
	}
	if n := longestLine(m.Raw); n > mailrender.MaxLineOctets {
		t.Errorf("a line of %d octets", n)
	}
	h, _ := decoded(t, m.Raw)
	if got, err := new(mime.WordDecoder).DecodeHeader(h.Get("Subject")); err != nil || got != msg.Subject {
		t.Errorf("subject reads %q (%v), want %q", got, err, msg.Subject)
	}
	to, err := h.AddressList("To")
	if err != nil || len(to) != 1 || to[0].Address != msg.To {
		t.Errorf("To reads %v (%v), want %s", to, err, msg.To)
	}
}

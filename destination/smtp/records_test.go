package smtp_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/emersion/go-smtp"

	"gatehouse/destination"
	"gatehouse/testmailbox"
)

// TestLookupReportsSenderAndDigestFromTheRawMessage: a message sent
// through Send is found with the bare address of its From field and the
// digest of the subject and body it was sent with, read from the raw
// message the mailbox stored (encoded subject, quoted-printable body).
func TestLookupReportsSenderAndDigestFromTheRawMessage(t *testing.T) {
	m := startMailbox(t)
	ctx := ctxT(t)
	d := looking(t, m.Target())
	msg := newMessage("enquiry-raw", 1)
	msg.Subject = "Ihre Anfrage — Grüße aus Köln ✓"
	msg.Body = ".\n..two dots\n" + strings.Repeat("Grüße = ", 200) + "\nlast line"
	if _, err := d.Send(ctx, msg); err != nil {
		t.Fatal(err)
	}
	res, err := d.Lookup(ctx, destination.LookupQuery{ActionKey: msg.ActionKey, MessageID: msg.MessageID()})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Messages) != 1 {
		t.Fatalf("lookup = %+v, want the one message", res)
	}
	got := res.Messages[0]
	if got.Sender != "support@shop.example" {
		t.Errorf("sender %q, want support@shop.example", got.Sender)
	}
	if want := destination.ContentDigest(msg.Subject, msg.Body); got.ContentDigest != want {
		t.Errorf("digest %q, want %q", got.ContentDigest, want)
	}
}

// plainSend hands raw to the mailbox with a plain SMTP client, as anyone
// who can reach it could.
func plainSend(t *testing.T, m *testmailbox.Mailbox, from, to string, raw string) {
	t.Helper()
	c, err := smtp.Dial(m.SMTPAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.SendMail(from, []string{to}, strings.NewReader(raw)); err != nil {
		t.Fatalf("plain send: %v", err)
	}
	if err := c.Quit(); err != nil {
		t.Fatal(err)
	}
}

// forged is a message someone else wrote, carrying a copy of msg's
// Message-ID and action key.
func forged(msg destination.Message, from, contentType, body string) string {
	return strings.Join([]string{
		"From: " + from,
		"To: " + msg.To,
		"Subject: " + msg.Subject,
		"Message-ID: <" + msg.MessageID() + ">",
		destination.HeaderActionKey + ": " + msg.ActionKey,
		destination.HeaderAttempt + ": 1",
		"MIME-Version: 1.0",
		"Content-Type: " + contentType,
		"",
		body,
	}, "\r\n") + "\r\n"
}

// TestLookupTellsACopiedMessageIDApart: messages sent by a plain client
// with a copy of an attempt's Message-ID, action key and recipient are
// each found (two records are two messages, however alike), with their own
// sender and digest; one the destination cannot decode is found with
// neither, and with its other fields.
func TestLookupTellsACopiedMessageIDApart(t *testing.T) {
	m := startMailbox(t)
	ctx := ctxT(t)
	d := looking(t, m.Target())
	msg := newMessage("enquiry-copied", 1)
	if _, err := d.Send(ctx, msg); err != nil {
		t.Fatal(err)
	}
	plainSend(t, m, "support@shop.example", msg.To, forged(msg, "Support <support@shop.example>", "text/plain; charset=utf-8", "Your refund was declined."))
	plainSend(t, m, "support@shop.example", msg.To, forged(msg, "eve@evil.example", "text/plain; charset=utf-8", msg.Body))
	plainSend(t, m, "support@shop.example", msg.To, forged(msg, "support@shop.example", "text/plain; charset=iso-8859-1", msg.Body))

	res, err := d.Lookup(ctx, destination.LookupQuery{ActionKey: msg.ActionKey, MessageID: msg.MessageID()})
	if err != nil {
		t.Fatal(err)
	}
	digest := destination.ContentDigest(msg.Subject, msg.Body)
	want := []struct{ sender, digest string }{
		{"support@shop.example", digest},
		{"support@shop.example", destination.ContentDigest(msg.Subject, "Your refund was declined.")},
		{"eve@evil.example", digest},
		{"", ""},
	}
	if len(res.Messages) != len(want) {
		t.Fatalf("lookup found %d messages, want the attempt's and the three copies: %+v", len(res.Messages), res)
	}
	for i, w := range want {
		got := res.Messages[i]
		if got.Sender != w.sender || got.ContentDigest != w.digest {
			t.Errorf("message %d: sender %q digest %q; want %q, %q", i, got.Sender, got.ContentDigest, w.sender, w.digest)
		}
		if got.MessageID != msg.MessageID() || got.ActionKey != msg.ActionKey || len(got.Recipients) != 1 || got.Recipients[0] != msg.To {
			t.Errorf("message %d: %+v; want the attempt's Message-ID, key and recipient", i, got)
		}
	}
}

// TestLookupUnavailableWhenARawMessageCannotBeRead: a listed message whose
// raw form cannot be fetched in full, or a store cleared while it was
// being read, makes the lookup unavailable: never a message without a
// digest, which would read as another content.
func TestLookupUnavailableWhenARawMessageCannotBeRead(t *testing.T) {
	m := startMailbox(t)
	ctx := ctxT(t)
	tests := []struct {
		name string
		raw  func(w http.ResponseWriter, r *http.Request) // serves GET …/raw
	}{
		{"ServerError", func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, `{"error":"store failed"}`, http.StatusInternalServerError)
		}},
		{"NotFound", func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, `{"error":"message not found"}`, http.StatusNotFound)
		}},
		{"Truncated", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "message/rfc822")
			w.Header().Set("Content-Length", "4096")
			io.WriteString(w, "From: support@shop.example\r\n")
		}},
		{"NotAMessage", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"id":1}`)
		}},
		{"ClearedMeanwhile", func(w http.ResponseWriter, r *http.Request) {
			m.Handler().ServeHTTP(w, r)
			if _, err := m.Clear(context.Background()); err != nil {
				t.Error(err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msg := newMessage("enquiry-raw-fails-"+tt.name, 1)
			if _, err := looking(t, m.Target()).Send(ctx, msg); err != nil {
				t.Fatal(err)
			}
			var raws atomic.Int32
			api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if strings.HasSuffix(r.URL.Path, "/raw") {
					raws.Add(1)
					tt.raw(w, r)
					return
				}
				m.Handler().ServeHTTP(w, r)
			}))
			defer api.Close()
			d := looking(t, fmt.Sprintf("smtp://%s?api=%s", m.SMTPAddr(), api.URL))
			res, err := d.Lookup(ctx, destination.LookupQuery{ActionKey: msg.ActionKey, MessageID: msg.MessageID()})
			if !errors.Is(err, destination.ErrLookupUnavailable) {
				t.Fatalf("lookup = %+v, %v; want ErrLookupUnavailable", res, err)
			}
			t.Log(err)
			if raws.Load() == 0 {
				t.Fatal("the lookup never asked for the raw message")
			}
		})
	}
}

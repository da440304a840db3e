package file

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gatehouse/destination"
	"gatehouse/destination/mailrender"
	"gatehouse/ledger"
)

// TestLookupReportsSenderAndDigestOfWhatWasSent: a message written by Send
// is found with the bare address of its sender and the digest of the
// subject and body it was sent with, whatever encodings the file needed.
func TestLookupReportsSenderAndDigestOfWhatWasSent(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name       string
		edit       func(*destination.Message)
		wantSender string
	}{
		{"Plain", func(*destination.Message) {}, DefaultFrom},
		{"NamedSender", func(m *destination.Message) { m.From = "Support <support@shop.example>" }, "support@shop.example"},
		{"EncodedSubjectQuotedPrintableBody", func(m *destination.Message) {
			m.From = "desk@shop.example"
			m.Subject = "Ihre Anfrage — Grüße aus Köln ✓"
			m.Body = ".\nGrüße, " + strings.Repeat("sehr lang = ", 200) + "\n..Ende"
		}, "desk@shop.example"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := New(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			msg := message(ledger.Key("cust-1", "enq-1", "reply_ack", "task-1", 0), 1)
			tt.edit(&msg)
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
			if want := destination.ContentDigest(msg.Subject, msg.Body); got.ContentDigest != want {
				t.Errorf("digest %q, want %q", got.ContentDigest, want)
			}
			if got.Sender != tt.wantSender {
				t.Errorf("sender %q, want %q", got.Sender, tt.wantSender)
			}
		})
	}
}

// TestLookupTellsCopiesOfAMessageIDApart: files planted next to the
// attempt's own with its Message-ID (and action key) are all found, each
// with its own sender and digest; one that cannot be decoded is found with
// neither, so it can never pass for the attempt's message nor be dropped.
func TestLookupTellsCopiesOfAMessageIDApart(t *testing.T) {
	ctx := context.Background()
	d, err := New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	msg := message(ledger.Key("cust-1", "enq-1", "reply_ack", "task-1", 0), 1)
	msg.From = "support@shop.example"
	if _, err := d.Send(ctx, msg); err != nil {
		t.Fatal(err)
	}
	own, err := os.ReadFile(filepath.Join(d.Dir, FileName(msg.TransportID)))
	if err != nil {
		t.Fatal(err)
	}
	plant := func(name string, raw []byte) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(d.Dir, name), raw, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	render := func(edit func(*destination.Message)) []byte {
		t.Helper()
		m := msg
		edit(&m)
		r, err := mailrender.Render(m, DefaultFrom, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return r.Raw
	}
	plant("other-body.eml", render(func(m *destination.Message) { m.Body = "Your refund was declined." }))
	plant("other-sender.eml", render(func(m *destination.Message) { m.From = "eve@evil.example" }))
	plant("undecodable.eml", []byte(strings.Replace(string(own), "charset=utf-8", "charset=iso-8859-1", 1)))

	res, err := d.Lookup(ctx, destination.LookupQuery{MessageID: msg.MessageID()})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Messages) != 4 {
		t.Fatalf("lookup found %d messages, want the attempt's and the three planted: %+v", len(res.Messages), res)
	}
	wantDigest := destination.ContentDigest(msg.Subject, msg.Body)
	counts := map[string]int{}
	for _, m := range res.Messages {
		if m.MessageID != msg.MessageID() {
			t.Errorf("found Message-ID %q", m.MessageID)
		}
		switch {
		case m.Sender == msg.From && m.ContentDigest == wantDigest:
			counts["own"]++
		case m.Sender == msg.From && m.ContentDigest == destination.ContentDigest(msg.Subject, "Your refund was declined."):
			counts["other body"]++
		case m.Sender == "eve@evil.example" && m.ContentDigest == wantDigest:
			counts["other sender"]++
		case m.Sender == "" && m.ContentDigest == "":
			counts["undecodable"]++
		default:
			t.Errorf("unexpected message %+v", m)
		}
	}
	for _, k := range []string{"own", "other body", "other sender", "undecodable"} {
		if counts[k] != 1 {
			t.Errorf("%d messages of kind %q, want 1 (%v)", counts[k], k, counts)
		}
	}
}

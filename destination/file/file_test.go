package file

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gatehouse/destination"
	"gatehouse/internal/testids"
	"gatehouse/ledger"
)

func message(key string, attempt int) destination.Message {
	return destination.Message{ActionKey: key, Attempt: attempt, TransportID: testids.Fixed(key, attempt),
		To: "ada@example.com", Subject: "We got your enquiry", Body: "Hello\nAda"}
}

func TestSendWritesOneFileAndLookupFindsIt(t *testing.T) {
	ctx := context.Background()
	d, err := New(filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	key := ledger.Key("cust-1", "enq-1", "reply_ack", "task-1", 0)
	for _, attempt := range []int{2, 1} {
		if _, err := d.Send(ctx, message(key, attempt)); err != nil {
			t.Fatalf("send attempt %d: %v", attempt, err)
		}
	}
	if _, err := d.Send(ctx, message(ledger.Key("cust-2", "enq-1", "reply_ack", "task-2", 0), 1)); err != nil {
		t.Fatal(err)
	}
	res, err := d.Lookup(ctx, destination.LookupQuery{ActionKey: key})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range res.Messages {
		got = append(got, m.MessageID)
	}
	want := []string{testids.Fixed(key, 1), testids.Fixed(key, 2)}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("lookup = %+v, want the two attempts oldest first", res)
	}
	// By Message-ID alone: the file of that attempt, with its recipient.
	res, err = d.Lookup(ctx, destination.LookupQuery{MessageID: testids.Fixed(key, 2)})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Messages) != 1 || res.Messages[0].ActionKey != key || len(res.Messages[0].Recipients) != 1 {
		t.Fatalf("lookup by Message-ID = %+v", res)
	}
	raw, err := os.ReadFile(filepath.Join(d.Dir, FileName(testids.Fixed(key, 1))))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Subject: We got your enquiry\r\n", "X-Gatehouse-Action-Key: " + key + "\r\n", "\r\n\r\nHello\r\nAda\r\n"} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("message lacks %q:\n%s", want, raw)
		}
	}
}

func TestLookup(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name        string
		dir         func(t *testing.T) string
		unavailable bool
	}{
		{"EmptyDirectoryIsAbsent", func(t *testing.T) string { return t.TempDir() }, false},
		{"MissingDirectoryIsUnavailable", func(t *testing.T) string { return filepath.Join(t.TempDir(), "gone") }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := &Destination{Dir: tt.dir(t)}
			res, err := d.Lookup(ctx, destination.LookupQuery{ActionKey: "gh1:c:e:t:x:r0", MessageID: "m1"})
			if got := errors.Is(err, destination.ErrLookupUnavailable); got != tt.unavailable {
				t.Fatalf("unavailable = %v (err %v), want %v", got, err, tt.unavailable)
			}
			if len(res.Messages) > 0 {
				t.Fatalf("found %+v in an empty destination", res)
			}
		})
	}
}

func TestSendSameAttemptTwiceKeepsOneFile(t *testing.T) {
	ctx := context.Background()
	d, err := New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	msg := message("gh1:c:e:t:x:r0", 1)
	for i := 0; i < 2; i++ {
		if _, err := d.Send(ctx, msg); err != nil {
			t.Fatal(err)
		}
	}
	files, _ := filepath.Glob(filepath.Join(d.Dir, "*"))
	if len(files) != 1 {
		t.Fatalf("files = %v, want exactly one", files)
	}
}

func TestSendRefusesHeaderInjection(t *testing.T) {
	tests := []struct {
		name string
		edit func(*destination.Message)
	}{
		{"Recipient", func(m *destination.Message) { m.To = "ada@example.com\r\nBcc: eve@example.com" }},
		{"Subject", func(m *destination.Message) { m.Subject = "Hello\r\nBcc: eve@example.com" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := New(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			msg := message("gh1:c:e:t:x:r0", 1)
			tt.edit(&msg)
			_, err = d.Send(context.Background(), msg)
			if got := destination.ClassifyDelivery(err); got != destination.OutcomeRejectedPermanent {
				t.Fatalf("outcome = %s (%v), want rejected_permanent", got, err)
			}
			if files, _ := filepath.Glob(filepath.Join(d.Dir, "*")); len(files) != 0 {
				t.Fatalf("a refused message left %v", files)
			}
		})
	}
}

// TestExistingFileWithOtherContentIsNoAcceptance: a file already named for
// an attempt counts as its delivery only when it holds the attempt's own
// message (a Send retried); anything else under that name is a
// contradiction, reported as unknown, never as accepted.
func TestExistingFileWithOtherContentIsNoAcceptance(t *testing.T) {
	ctx := context.Background()
	d, err := New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	msg := message(ledger.Key("cust-42", "enq-exists", "reply_ack", "task-7", 0), 1)
	if _, err := d.Send(ctx, msg); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Send(ctx, msg); err != nil {
		t.Fatalf("the same attempt written again: %v, want accepted", err)
	}
	other := message(ledger.Key("cust-42", "enq-exists-too", "reply_ack", "task-7", 0), 1)
	other.TransportID = msg.TransportID
	other.Body = "Something else entirely."
	_, err = d.Send(ctx, other)
	if o := destination.ClassifyDelivery(err); o != destination.OutcomeUnknown {
		t.Fatalf("another message under an attempt's name: %s (%v), want unknown", o, err)
	}
}

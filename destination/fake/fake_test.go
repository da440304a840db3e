package fake_test

import (
	"context"
	"testing"

	"gatehouse/destination"
	"gatehouse/destination/fake"
)

func message() destination.Message {
	return destination.Message{ActionKey: "gh1:cust-1:enq-1:reply_ack:task-1:r0", Attempt: 1, TransportID: "gh-0123456789abcdef-a1@gatehouse.invalid",
		From: "Support <support@shop.example>", To: "ada@example.com", Subject: "We received your enquiry", Body: "Hello Ada,\nthank you.\n"}
}

// TestLookupReportsSenderAndDigest: what Send stored is found with its
// bare sender and its content digest; an injected copy of its Message-ID
// with another body or sender is found with its own, so it never passes
// for the attempt's message.
func TestLookupReportsSenderAndDigest(t *testing.T) {
	ctx := context.Background()
	d := fake.New()
	msg := message()
	if _, err := d.Send(ctx, msg); err != nil {
		t.Fatal(err)
	}
	otherBody := msg
	otherBody.Body = "Your refund was declined."
	d.Inject(otherBody)
	otherSender := msg
	otherSender.From = "eve@evil.example"
	d.Inject(otherSender)
	defaultSender := msg
	defaultSender.From = ""
	d.Inject(defaultSender)
	noAddress := msg
	noAddress.From = "not an address"
	d.Inject(noAddress)

	res, err := d.Lookup(ctx, destination.LookupQuery{MessageID: msg.MessageID()})
	if err != nil {
		t.Fatal(err)
	}
	digest := destination.ContentDigest(msg.Subject, msg.Body)
	want := []struct{ sender, digest string }{
		{"support@shop.example", digest},
		{"support@shop.example", destination.ContentDigest(msg.Subject, otherBody.Body)},
		{"eve@evil.example", digest},
		{destination.DefaultSender, digest},
		{"", digest},
	}
	if len(res.Messages) != len(want) {
		t.Fatalf("lookup found %d messages, want %d: %+v", len(res.Messages), len(want), res)
	}
	for i, w := range want {
		if got := res.Messages[i]; got.Sender != w.sender || got.ContentDigest != w.digest || got.MessageID != msg.MessageID() {
			t.Errorf("message %d: %+v; want sender %q, digest %s", i, got, w.sender, w.digest)
		}
	}
	if res.Messages[1].ContentDigest == digest {
		t.Error("another body has the attempt's digest")
	}
}

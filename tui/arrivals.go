package tui

import (
	"context"
	"fmt"
	"time"

	"gatehouse/testmailbox"
)

// Arrival is one message a mailbox stored: the proof of what reached the
// customer, as opposed to what a workflow believes it sent.
type Arrival struct {
	ActionKey string
	MessageID string
	To        string
	Subject   string
	At        time.Time
	Duplicate bool // a second arrival for the same action key
}

// Arrivals reads what a mailbox holds, oldest first.
type Arrivals interface {
	Arrivals(ctx context.Context) ([]Arrival, error)
}

// MailboxArrivals reads an embedded test mailbox.
type MailboxArrivals struct{ Mailbox *testmailbox.Mailbox }

// demoArrivalLimit bounds what the demo reads: a demonstration sends a
// handful of messages, and the column shows no more than fit anyway.
const demoArrivalLimit = 50

// Arrivals implements Arrivals.
func (m MailboxArrivals) Arrivals(ctx context.Context) ([]Arrival, error) {
	_, msgs, err := m.Mailbox.List(ctx, testmailbox.Filter{Limit: demoArrivalLimit})
	if err != nil {
		return nil, fmt.Errorf("read mailbox: %w", err)
	}
	out := make([]Arrival, len(msgs))
	for i, msg := range msgs {
		to := ""
		if len(msg.To) > 0 {
			to = msg.To[0]
		}
		out[i] = Arrival{ActionKey: msg.ActionKey, MessageID: msg.MessageID, To: to,
			Subject: msg.Subject, At: msg.ReceivedAt, Duplicate: msg.Duplicate}
	}
	return out, nil
}

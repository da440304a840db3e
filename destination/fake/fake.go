package fake

import (
	"context"
	"errors"
	"net/mail"
	"strings"
	"sync"
	"time"

	"gatehouse/destination"
	"gatehouse/internal/clock"
)

// Destination is an in-process destination for tests. It stores every message
// it accepts, counts calls, and can be scripted to answer each next call with
// a given outcome. It implements destination.Records unless NoLookup is set at
// construction (see Blind).
type Destination struct {
	mu       sync.Mutex
	calls    int
	arrived  []destination.Message
	script   []destination.Outcome
	lookDown bool
	// Gate, when set, is waited on inside Send (after counting the call and
	// before answering) so a test can hold an attempt in flight.
	Gate chan struct{}
	// Name is the destination's identity (DefaultName when empty): two
	// fakes with different names are two destinations.
	Name string
	// Clock stamps receipts; the system clock when nil.
	Clock clock.Clock
	// Settle is the settle time it declares (destination.Settler): 0, an
	// in-process fake holds nothing once Send has returned, unless a test
	// says otherwise.
	Settle time.Duration
}

// SettleTime implements destination.Settler.
func (d *Destination) SettleTime() time.Duration { return d.Settle }

// DefaultName is the identity of a fake destination that was given none.
const DefaultName = "fake://destination"

// Identity implements destination.Destination.
func (d *Destination) Identity() string {
	if d.Name == "" {
		return DefaultName
	}
	return d.Name
}

// LookupEndpoint implements destination.Records: the records are the fake itself.
func (d *Destination) LookupEndpoint() string { return "" }

// Inject stores a message the gate did not send (another system's, or a
// forgery that carries an action key), as a destination's records would.
func (d *Destination) Inject(msg destination.Message) {
	d.mu.Lock()
	d.arrived = append(d.arrived, msg)
	d.mu.Unlock()
}

var (
	_ destination.Destination = (*Destination)(nil)
	_ destination.Records     = (*Destination)(nil)
	_ destination.Settler     = (*Destination)(nil)
)

// New returns a destination that accepts everything.
func New() *Destination { return &Destination{} }

// Script makes the next calls answer with these outcomes in order. For
// OutcomeUnknown the message is stored (the destination took it, the sender
// cannot know); for the rejections nothing is stored.
func (d *Destination) Script(outcomes ...destination.Outcome) {
	d.mu.Lock()
	d.script = append(d.script, outcomes...)
	d.mu.Unlock()
}

// SetLookupDown makes Lookup fail with ErrLookupUnavailable.
func (d *Destination) SetLookupDown(down bool) {
	d.mu.Lock()
	d.lookDown = down
	d.mu.Unlock()
}

func (d *Destination) now() time.Time {
	if d.Clock == nil {
		return clock.System{}.Now()
	}
	return d.Clock.Now()
}

// Send implements destination.Destination.
func (d *Destination) Send(ctx context.Context, msg destination.Message) (destination.Receipt, error) {
	d.mu.Lock()
	d.calls++
	gate := d.Gate
	d.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return destination.Receipt{}, &destination.DeliveryError{Outcome: destination.OutcomeNotDelivered, Err: ctx.Err()}
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	o := destination.OutcomeAccepted
	if len(d.script) > 0 {
		o, d.script = d.script[0], d.script[1:]
	}
	switch o {
	case destination.OutcomeAccepted:
		d.arrived = append(d.arrived, msg)
		return destination.Receipt{TransportID: msg.TransportID, Response: "250 accepted", At: d.now()}, nil
	case destination.OutcomeUnknown:
		d.arrived = append(d.arrived, msg)
		return destination.Receipt{}, &destination.DeliveryError{Outcome: o, Err: errors.New("connection lost after the message was handed over")}
	default:
		return destination.Receipt{}, &destination.DeliveryError{Outcome: o, Err: errors.New("scripted " + string(o))}
	}
}

// Lookup implements destination.Records over the stored messages: every one that
// carries the query's key or Message-ID, with the bare address of its
// sender and the content digest of its subject and body as stored (Send's
// or Inject's message, nothing to decode).
func (d *Destination) Lookup(_ context.Context, q destination.LookupQuery) (destination.LookupResult, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.lookDown {
		return destination.LookupResult{}, destination.ErrLookupUnavailable
	}
	var res destination.LookupResult
	for _, m := range d.arrived {
		if m.ActionKey == q.ActionKey || (q.MessageID != "" && m.MessageID() == q.MessageID) {
			res.Messages = append(res.Messages, destination.FoundMessage{MessageID: m.MessageID(), ActionKey: m.ActionKey,
				Recipients: []string{m.To}, Sender: senderOf(m), ContentDigest: destination.ContentDigest(m.Subject, m.Body)})
		}
	}
	return res, nil
}

// senderOf is the bare address a stored message is from: its From, which
// may carry a display name, or destination.DefaultSender when it names
// none, as the mail destinations write it; "" when From is no address, as
// records that cannot read a sender report it.
func senderOf(m destination.Message) string {
	if strings.TrimSpace(m.From) == "" {
		return destination.DefaultSender
	}
	a, err := mail.ParseAddress(m.From)
	if err != nil {
		return ""
	}
	return a.Address
}

// Calls is how many times Send was called.
func (d *Destination) Calls() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.calls
}

// Arrived returns the messages the destination holds.
func (d *Destination) Arrived() []destination.Message {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]destination.Message(nil), d.arrived...)
}

// Arrivals counts stored messages for one action key, whether or not
// lookups are failing.
func (d *Destination) Arrivals(key string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, m := range d.arrived {
		if m.ActionKey == key {
			n++
		}
	}
	return n
}

// Blind wraps a Destination but offers no lookup, like an SMTP
// relay without a query API.
type Blind struct{ D *Destination }

var (
	_ destination.Destination = Blind{}
	_ destination.Settler     = Blind{}
)

// SettleTime implements destination.Settler: the wrapped destination's.
func (b Blind) SettleTime() time.Duration { return b.D.SettleTime() }

// Identity implements destination.Destination: the wrapped destination's.
func (b Blind) Identity() string { return b.D.Identity() }

// Send implements destination.Destination.
func (b Blind) Send(ctx context.Context, m destination.Message) (destination.Receipt, error) {
	return b.D.Send(ctx, m)
}

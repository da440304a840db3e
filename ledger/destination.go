package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Message is what the gate hands a Destination for one attempt of one action.
// Everything a destination needs to label the message (Message-ID, headers) is
// derived from the action key and the attempt number, never from the subject.
type Message struct {
	ActionKey   string // the business action's key (see Key)
	Attempt     int    // 1-based attempt number
	TransportID string // unique per attempt; SMTP destinations use it as Message-ID
	From        string
	To          string
	Subject     string
	Body        string
	Target      string // the business target the action acts on (part of the key), not the destination's address
}

// Headers returns the gatehouse headers every destination that supports headers
// must attach, so that the destination's own records can later be searched by
// action key (see Looker).
func (m Message) Headers() map[string]string {
	return map[string]string{
		"Message-ID":            "<" + m.TransportID + ">",
		HeaderActionKey:         m.ActionKey,
		HeaderAttempt:           fmt.Sprint(m.Attempt),
		"X-Gatehouse-Transport": m.TransportID,
	}
}

// Header names attached to every outgoing message.
const (
	HeaderActionKey = "X-Gatehouse-Action-Key"
	HeaderAttempt   = "X-Gatehouse-Attempt"
)

// Receipt is what a destination reports after it accepted a message.
type Receipt struct {
	TransportID string    // the id the destination knows the message by
	Response    string    // the destination's own words, e.g. "250 2.0.0 OK: queued"
	At          time.Time // when the destination answered
}

// Destination delivers one message for one attempt. It knows nothing of the
// ledger: it only reports what happened.
//
// A nil error means the destination confirmed acceptance. Any other error
// should be (or wrap) a *DeliveryError saying which Outcome it was; an error
// that is not is treated as OutcomeUnknown, because the gate must not assume a
// message was not delivered when it cannot tell.
type Destination interface {
	Send(ctx context.Context, msg Message) (Receipt, error)
}

// Looker is the optional capability of a destination to search its own
// records by action key. Reconciliation uses it to establish an unknown
// outcome without re-sending. Destinations without such records do not
// implement it; the gate then keeps the action held for a person.
type Looker interface {
	// Lookup reports every message the destination holds for the key.
	// It returns ErrLookupUnavailable (possibly wrapped) when the records
	// cannot be consulted right now.
	Lookup(ctx context.Context, actionKey string) (LookupResult, error)
}

// LookupResult is what a destination's records say about one action key.
type LookupResult struct {
	Found      bool
	Count      int      // how many messages carry the key
	MessageIDs []string // their Message-IDs / transport ids, oldest first
}

// ErrLookupUnavailable means the destination's records cannot be consulted.
var ErrLookupUnavailable = errors.New("destination lookup unavailable")

// Outcome is what the destination did with one attempt.
type Outcome string

// Outcomes of an attempt.
const (
	// OutcomeAccepted: the destination confirmed it took the message.
	OutcomeAccepted Outcome = "accepted"
	// OutcomeNotDelivered: the attempt failed before the message was handed
	// over (connection refused, connection lost before the body was sent);
	// safe to retry.
	OutcomeNotDelivered Outcome = "not_delivered"
	// OutcomeRejectedTemporary: the destination refused the message with a
	// temporary (4xx) reply, at any stage (MAIL, RCPT or DATA); nothing was
	// accepted; safe to retry.
	OutcomeRejectedTemporary Outcome = "rejected_temporary"
	// OutcomeRejectedPermanent: the destination refused it for good (5xx),
	// e.g. an unknown recipient; retrying cannot help.
	OutcomeRejectedPermanent Outcome = "rejected_permanent"
	// OutcomeUnknown: the message may have been accepted (timeout or
	// connection loss after it was handed over). Never retried blindly.
	OutcomeUnknown Outcome = "unknown"
)

// Retryable reports whether nothing can have been delivered, so a new attempt
// cannot produce a duplicate.
func (o Outcome) Retryable() bool {
	return o == OutcomeNotDelivered || o == OutcomeRejectedTemporary
}

// DeliveryError is the error a Destination returns when it did not confirm
// acceptance. Outcome says what is known.
type DeliveryError struct {
	Outcome Outcome
	Err     error
}

func (e *DeliveryError) Error() string {
	return fmt.Sprintf("delivery %s: %v", e.Outcome, e.Err)
}

func (e *DeliveryError) Unwrap() error { return e.Err }

// ClassifyDelivery turns a Destination.Send error into an Outcome. A nil error
// is acceptance; an error without a *DeliveryError is unknown.
func ClassifyDelivery(err error) Outcome {
	if err == nil {
		return OutcomeAccepted
	}
	var de *DeliveryError
	if errors.As(err, &de) && de.Outcome != "" {
		return de.Outcome
	}
	return OutcomeUnknown
}

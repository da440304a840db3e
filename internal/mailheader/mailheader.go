// Package mailheader names the header fields gatehouse puts on every message
// it sends. It is a leaf: the ledger, the destinations that render messages
// and the test mailbox that indexes them all import these names from here,
// so a sender and the records searched for its message cannot disagree on
// the spelling.
package mailheader

// Header names attached to every outgoing message.
const (
	// ActionKey carries the business action's key, what reconciliation
	// searches a destination's records by.
	ActionKey = "X-Gatehouse-Action-Key"
	// Attempt carries the 1-based attempt number.
	Attempt = "X-Gatehouse-Attempt"
	// TransportID carries the attempt's transport id (also the Message-ID).
	TransportID = "X-Gatehouse-Transport"
	// MessageID is the standard field every attempt's unique id is sent in.
	MessageID = "Message-ID"
)

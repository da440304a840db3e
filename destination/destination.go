// Package destination is the contract between the gate and the systems it
// hands attempts to: the message and its receipt, the outcome of a send,
// the records a destination keeps and reconciliation may consult, and the
// endpoint an attempt records. It is a leaf: it knows nothing of the
// ledger, and each backend lives in a package of its own beside it
// (smtp, file, fake), with the URL registry in package registry.
package destination

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"strings"
	"time"

	"gatehouse/internal/mailaddr"
	"gatehouse/internal/mailheader"
	"gatehouse/internal/oswait"
)

// Message is what the gate hands a Destination for one attempt of one action.
// Everything a destination needs to label the message (Message-ID, headers) is
// derived from the action key and the attempt number, never from the subject.
// From and To are the approved sender and recipient, never the caller's.
type Message struct {
	ActionKey   string // the business action's key
	Attempt     int    // 1-based attempt number
	TransportID string // unique per attempt; SMTP destinations use it as Message-ID
	From        string // bare address
	To          string // bare address
	ToName      string // display name for To ("" for none)
	Subject     string
	Body        string
	Target      string // the business target the action acts on (part of the key), not the destination's address
	// HTTP is the write of an action that is an HTTP request, exactly as
	// its attempt recorded it (nil for a message): an HTTP destination
	// hands over these bytes and no others.
	HTTP *HTTPWrite
}

// MessageID is the Message-ID the message carries, without angle brackets.
func (m Message) MessageID() string { return m.TransportID }

// Headers returns the gatehouse headers every destination that supports headers
// must attach, so that the destination's own records can later be searched by
// action key and Message-ID (see Records).
func (m Message) Headers() map[string]string {
	return map[string]string{
		mailheader.MessageID: "<" + m.MessageID() + ">",
		HeaderActionKey:      m.ActionKey,
		HeaderAttempt:        fmt.Sprint(m.Attempt),
		HeaderTransportID:    m.TransportID,
	}
}

// Header names attached to every outgoing message; package mailheader is
// where they are spelled.
const (
	HeaderActionKey   = mailheader.ActionKey
	HeaderAttempt     = mailheader.Attempt
	HeaderTransportID = mailheader.TransportID
)

// DefaultSender is the From address of actions that name none.
const DefaultSender = "gatehouse@localhost"

// Receipt is what a destination reports after it accepted a message.
type Receipt struct {
	TransportID string    // the id the destination knows the message by
	Response    string    // the destination's own words, e.g. "250 2.0.0 OK: queued"
	At          time.Time // when the destination answered
	// Status is the HTTP status an HTTP destination answered (0 for none
	// and for other destinations); set on a refusal's Receipt too.
	Status int
	// DestinationID is the provider's id of the object the write created
	// (a refund's re_…), "" when it named none.
	DestinationID string
	// Replayed says the provider answered a result it had stored under the
	// write's key (Idempotent-Replayed: true) rather than acting anew.
	Replayed bool
}

// Destination delivers one message for one attempt. It knows nothing of the
// ledger: it only reports what happened.
//
// A nil error means the destination confirmed acceptance. Any other error
// should be (or wrap) a *DeliveryError saying which Outcome it was; an error
// that is not is treated as OutcomeUnknown, because the gate must not assume a
// message was not delivered when it cannot tell.
//
// The deadline of Send's context is the end of the attempt's budget, in real
// time. A destination never begins to hand over its commit point (SMTP's
// final ".", an HTTP request's last bytes, a file's final rename) once that
// deadline has passed, whatever its goroutine was doing meanwhile: it checks
// the deadline immediately before, and holds its own socket deadlines to it,
// so that a process paused past its lease cannot land the message after the
// gate may have called the attempt absent.
type Destination interface {
	// Identity names where messages are handed over, without credentials,
	// lookup parameters or connection settings: "smtp://host:port",
	// "file:///abs/dir", "fake://accept". Approvals bind it and attempts
	// record it, so two values that differ are two destinations.
	Identity() string
	Send(ctx context.Context, msg Message) (Receipt, error)
}

// Records is the optional capability of a destination to search its own
// records. Reconciliation uses it to establish an unknown outcome without
// re-sending. Destinations without such records do not implement it; the
// gate then keeps the action held for a person.
type Records interface {
	// Identity is the destination whose records are searched.
	Identity() string
	// LookupEndpoint names where the records are consulted when that is not
	// implied by the identity (a test mailbox's HTTP API); "" otherwise.
	// Attempts record it next to the identity.
	LookupEndpoint() string
	// Lookup reports every stored message that carries the query's action
	// key or its Message-ID. It returns an error wrapping
	// ErrLookupUnavailable whenever the records could not be consulted or
	// their answer could not be read: only a lookup that really answered
	// may report nothing found.
	Lookup(ctx context.Context, q LookupQuery) (LookupResult, error)
}

// LookupQuery is what reconciliation asks a destination's records about.
type LookupQuery struct {
	ActionKey string
	MessageID string // without angle brackets
}

// LookupResult is what a destination's records hold for one query.
type LookupResult struct {
	Messages []FoundMessage
	// Epoch names the life of the records that answered ("" when the
	// destination has no epochs). Records that were cleared or restarted
	// since an attempt began answer under another epoch than it recorded,
	// and their silence is no evidence of absence.
	Epoch string
}

// EpochReporter is the optional capability of Records that can forget (be
// cleared, or kept only in memory) to name their current life. The epoch
// must change whenever the records lose what they held, and a Lookup must
// report the epoch of the records it read.
type EpochReporter interface {
	Epoch(ctx context.Context) (string, error)
}

// FoundMessage is one stored message as the destination's records describe it.
// Reconciliation counts it as an attempt's own message only when its
// Message-ID, recipient, sender and content digest all match the attempt's:
// a Message-ID alone can be copied by anyone who saw one.
type FoundMessage struct {
	MessageID  string   // without angle brackets
	ActionKey  string   // its HeaderActionKey field ("" when absent)
	Recipients []string // envelope (or To) recipients
	// Sender is the bare address of its From field ("" when the records
	// could not read it).
	Sender string
	// ContentDigest is ContentDigest of its decoded subject and body (""
	// when the records could not read them).
	ContentDigest string
	// Record is the provider's record as JSON, for an HTTP destination's
	// records (nil otherwise): the gate counts it as an attempt's only when
	// it agrees with every field the attempt wrote (RecordAgrees).
	Record []byte
	// DestinationID is the provider's id of the record ("" for none).
	DestinationID string
}

// ContentDigest is how records and the gate compare what a message says:
// a digest of its subject and body as the reader sees them (transfer
// encodings and encoded words decoded), after NormalizeText, so that
// re-wrapping or line endings do not change it and any changed word does.
func ContentDigest(subject, body string) string {
	// A small buffer: the gate digests every attempt's content (an audience
	// send, every recipient's), most of them a few hundred bytes, and a
	// large one only flushes more often.
	h := &normalizingHash{h: sha256.New(), buf: make([]byte, 0, 1<<10)}
	h.writeNormalized(subject)
	h.write("\x00")
	h.writeNormalized(body)
	return "sha256:" + hex.EncodeToString(h.sum())
}

// normalizingHash hashes NormalizeText of its input without building it:
// records read back messages of tens of megabytes that anyone may have
// written, and the slice of words strings.Fields builds for one made of
// one-letter words is ten times its size.
type normalizingHash struct {
	h   hash.Hash
	buf []byte
}

// writeNormalized hashes exactly the bytes of NormalizeText(s): the same
// words (strings.FieldsSeq yields what strings.Fields returns), one space
// between them.
func (n *normalizingHash) writeNormalized(s string) {
	first := true
	for w := range strings.FieldsSeq(s) {
		if !first {
			n.write(" ")
		}
		n.write(w)
		first = false
	}
}

func (n *normalizingHash) write(s string) {
	for s != "" {
		if len(n.buf) == cap(n.buf) {
			n.h.Write(n.buf)
			n.buf = n.buf[:0]
		}
		k := copy(n.buf[len(n.buf):cap(n.buf)], s)
		n.buf, s = n.buf[:len(n.buf)+k], s[k:]
	}
}

func (n *normalizingHash) sum() []byte {
	n.h.Write(n.buf)
	return n.h.Sum(nil)
}

// ErrLookupUnavailable means the destination's records cannot be consulted.
var ErrLookupUnavailable = errors.New("destination lookup unavailable")

// Endpoint is what an approval bound and an attempt recorded about where it
// went: the destination's identity and the lookup endpoint of its records,
// and the connection settings it was reached with.
type Endpoint struct {
	Destination string
	Lookup      string
	// Epoch is the epoch the records reported when the attempt began; it
	// is recorded, never compared when matching endpoints.
	Epoch string
	// Settings are the connection settings the destination was reached
	// with that are neither secrets nor part of its identity (Configured),
	// in the backend's own encoding; "" for none. They are kept with an
	// approved action so a send that names no destination connects the way
	// the approval did, and never compared: an endpoint that differs only
	// in them is the same destination.
	Settings string
	// Settle is how long after an attempt's lease its message may still
	// land here (SettleTimeOf). A proposal states it and its approval binds
	// it: a send through an endpoint declaring another is refused, and
	// every attempt settles on the bound one, so reconciliation concludes
	// absence only once that has passed.
	Settle time.Duration
	// DefaultSettle is the settle time the destination's kind declares
	// when its URL names none (DefaultSettleTimeOf): the least an attempt
	// settles on under an approval recorded before approvals bound one.
	DefaultSettle time.Duration
}

// Configured is the optional capability of a destination reached with
// connection settings beyond its identity (how it uses TLS, the
// certificates it trusts): Settings returns them in a form the backend's
// registry can open again, never holding a secret.
type Configured interface {
	Settings() string
}

// String shows the endpoint as one line.
func (e Endpoint) String() string {
	if e.Lookup == "" {
		return e.Destination
	}
	return e.Destination + " (records at " + e.Lookup + ")"
}

// RecordsOpener reaches the records of a recorded endpoint. It returns nil
// Records (and no error) when that destination keeps no records the gate
// may consult.
type RecordsOpener interface {
	OpenRecords(ep Endpoint) (Records, error)
}

// RecordsOpenerFunc adapts a function to RecordsOpener.
type RecordsOpenerFunc func(ep Endpoint) (Records, error)

// OpenRecords calls f.
func (f RecordsOpenerFunc) OpenRecords(ep Endpoint) (Records, error) { return f(ep) }

// EndpointOf is the endpoint a destination is reached and searched through:
// its identity, when it keeps Records their lookup endpoint, and when it is
// Configured its connection settings.
func EndpointOf(d Destination) Endpoint {
	ep := Endpoint{Destination: d.Identity()}
	if r, ok := d.(Records); ok {
		ep.Lookup = r.LookupEndpoint()
	}
	if c, ok := d.(Configured); ok {
		ep.Settings = c.Settings()
	}
	ep.Settle = SettleTimeOf(d)
	ep.DefaultSettle = DefaultSettleTimeOf(d)
	return ep
}

// EndpointAt is EndpointOf plus the epoch the destination's records report
// right now, when they report one (an EpochReporter). Read just before the
// attempt's intent is recorded, it is the epoch the message is handed to:
// should the records be cleared in between, reconciliation finds another
// epoch and holds rather than concluding absence. An epoch that cannot be
// read is left empty, with the same effect.
func EndpointAt(ctx context.Context, d Destination) Endpoint {
	ep := EndpointOf(d)
	if er, ok := d.(EpochReporter); ok {
		if e, err := er.Epoch(ctx); err == nil {
			ep.Epoch = e
		}
	}
	return ep
}

// Settler is the optional capability of a destination to say how long
// after an attempt's lease ran out its message may still land: a relay
// holding a message it took the final "." for, a queue behind an API. The
// gate concludes an attempt's absence from the records only after that
// settle time too. A destination whose commit point is local and atomic
// (a file's link) declares 0.
type Settler interface {
	SettleTime() time.Duration
}

// DefaultSettleTime is the settle time of a destination that declares none.
const DefaultSettleTime = time.Minute

// SettleTimeOf is d's settle time: what it declares, DefaultSettleTime if
// it declares nothing.
func SettleTimeOf(d Destination) time.Duration {
	if s, ok := d.(Settler); ok {
		return max(s.SettleTime(), 0)
	}
	return DefaultSettleTime
}

// RecordedSettle is the settle time a destination's recorded connection
// settings (Endpoint.Settings) name, 0 when they name none: a backend
// whose URL may name its settle time apart from its identity (an SMTP
// target's settle=) keeps it there under "settle", as a Go duration. An
// approval recorded before approvals bound a settle time of their own
// still carries it this way.
func RecordedSettle(settings string) time.Duration {
	var s struct {
		Settle string `json:"settle"`
	}
	if settings == "" || json.Unmarshal([]byte(settings), &s) != nil || s.Settle == "" {
		return 0
	}
	d, err := time.ParseDuration(s.Settle)
	if err != nil || d < 0 {
		return 0
	}
	return d
}

// DefaultSettler is the optional capability of a destination whose URL
// may name its settle time apart from everything an approval always bound
// (an SMTP target's settle=, which is neither its identity nor its
// records' endpoint): DefaultSettleTime is what it declares when its URL
// names none. A destination whose settle time follows from its identity
// (a file's 0) or from its records' endpoint (an HTTP profile) needs none.
type DefaultSettler interface {
	DefaultSettleTime() time.Duration
}

// DefaultSettleTimeOf is the settle time d's kind declares when its URL
// names none: DefaultSettleTime for a DefaultSettler, SettleTimeOf
// otherwise.
func DefaultSettleTimeOf(d Destination) time.Duration {
	if s, ok := d.(DefaultSettler); ok {
		return max(s.DefaultSettleTime(), 0)
	}
	return SettleTimeOf(d)
}

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
	// OutcomeContradiction: the destination answered that it holds
	// something else under the attempt's key (an idempotency key reused
	// with another body: 422, idempotency_error, …MISMATCH). Something may
	// have been done under it; a person must look, and nothing is retried.
	OutcomeContradiction Outcome = "contradiction"
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

// ErrBudgetSpent is why a destination did not hand over a message's
// commit point: the attempt's budget had ended (see Destination).
var ErrBudgetSpent = errors.New("the attempt's budget ended before its commit point was handed over; nothing was committed")

// MayCommit is what a destination checks immediately before it hands over
// a message's commit point: an error wrapping ErrBudgetSpent once ctx is
// done or its deadline has passed in real time, nil while the budget lasts.
func MayCommit(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w (%v)", ErrBudgetSpent, context.Cause(ctx))
	}
	if end, ok := ctx.Deadline(); ok && !oswait.Now().Before(end) {
		return ErrBudgetSpent
	}
	return nil
}

// NormalizeText is the formatting tolerance of a content digest: runs of
// white space (line endings included) become one space and surrounding
// space goes, so a re-wrapped paragraph compares equal while any changed
// word does not.
func NormalizeText(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// LocalPart says whether the local part of an address keeps its letter
// case when addresses are compared (mailaddr.LocalPart; addresses are
// compared by mailaddr.Identity and mailaddr.Same, the one normaliser the
// ledger, the destinations and the test mailbox share).
type LocalPart = mailaddr.LocalPart

const (
	// FoldLocalPart compares Ada@Example.org and ada@example.org as one
	// address.
	FoldLocalPart = mailaddr.FoldLocalPart
	// CaseSensitiveLocalPart compares them as two; the domain is folded
	// still.
	CaseSensitiveLocalPart = mailaddr.CaseSensitiveLocalPart
)

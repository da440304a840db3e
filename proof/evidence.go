package proof

import (
	"context"
	"fmt"
	"net/mail"
	"sort"
	"strings"

	"gatehouse/destination"
	"gatehouse/destination/mailrender"
	"gatehouse/internal/mailaddr"
	"gatehouse/ledger"
	"gatehouse/testmailbox"
)

// EvidenceVerdict is what CheckByMessageID found: arrivals are attributed to
// an action only through the Message-IDs its attempts recorded, never
// through the action-key header, which anyone can write, and only when the
// stored message is the attempt's in every other respect too.
type EvidenceVerdict struct {
	Actions  int // business actions in the ledger (every revision its own)
	Sent     int // actions the ledger says are sent
	Arrivals int // messages the destination holds, the gate's and others'
	Foreign  int // stored messages whose Message-ID no attempt recorded
	// LookAlikes are stored messages that carry an attempt's Message-ID
	// but another recipient, sender or content: someone who saw the
	// header, never the attempt's message.
	LookAlikes int

	Duplicates     []string // more than one arrival of one action's messages
	Losses         []string // sent in the ledger, none of its messages arrived
	Contradictions []string // the ledger says an attempt delivered nothing, yet its message arrived
}

// OK reports whether the run shows none of the three failure kinds.
func (v EvidenceVerdict) OK() bool {
	return len(v.Duplicates) == 0 && len(v.Losses) == 0 && len(v.Contradictions) == 0
}

func (v EvidenceVerdict) String() string {
	return fmt.Sprintf("actions %d, sent %d, arrivals %d (foreign %d, look-alikes %d): duplicates %d, losses %d, contradictions %d",
		v.Actions, v.Sent, v.Arrivals, v.Foreign, v.LookAlikes, len(v.Duplicates), len(v.Losses), len(v.Contradictions))
}

// IsOwn reports whether the stored message m is attempt at's own: it
// carries the attempt's Message-ID, went to its recipient, and its raw
// form, read as a reader sees it, comes from the attempt's sender and says
// what the attempt handed over (the same four-part match reconciliation
// makes). A Message-ID alone can be copied by anyone who saw one.
func IsOwn(ctx context.Context, mb Store, at ledger.Attempt, m testmailbox.Message) (bool, error) {
	if m.MessageID != at.MessageID || !hasRecipient(m.To, at.Recipient) {
		return false, nil
	}
	full, err := mb.Get(ctx, m.ID)
	if err != nil {
		return false, fmt.Errorf("read stored message %d: %w", m.ID, err)
	}
	dec, err := mailrender.Decode(full.Raw)
	if err != nil {
		return false, nil // not the gate's format: not what the attempt handed over
	}
	return bareAddress(dec.From) == bareAddress(at.Sender) &&
		(at.ContentDigest == "" || mailrender.Digest(dec) == at.ContentDigest), nil
}

// OwnArrivals counts the stored messages that are attempt at's own.
func OwnArrivals(ctx context.Context, mb Store, at ledger.Attempt) (int, error) {
	_, msgs, err := mb.List(ctx, testmailbox.Filter{MessageID: at.MessageID})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, m := range msgs {
		own, err := IsOwn(ctx, mb, at, m)
		if err != nil {
			return n, err
		}
		if own {
			n++
		}
	}
	return n, nil
}

func hasRecipient(to []string, rcpt string) bool {
	for _, r := range to {
		if bareAddress(r) == bareAddress(rcpt) {
			return true
		}
	}
	return false
}

// bareAddress is an address as the gate compares it: without a display
// name, normalized.
func bareAddress(s string) string {
	if a, err := mail.ParseAddress(s); err == nil {
		s = a.Address
	}
	return mailaddr.Key(s)
}

// Store is a test mailbox's records as the checkers read them: a mailbox
// in this process (*testmailbox.Mailbox), or one in another process
// through its API (APIStore).
type Store interface {
	List(ctx context.Context, f testmailbox.Filter) (int, []testmailbox.Message, error)
	Get(ctx context.Context, id int64) (testmailbox.Message, error)
}

// APIStore reads a mailbox in another process through its HTTP API, page
// after page, and fails unless the pages add up to the total the mailbox
// reports: what arrived is never counted from one page.
type APIStore struct{ Client *testmailbox.Client }

// Get returns one stored message with its raw bytes.
func (s APIStore) Get(ctx context.Context, id int64) (testmailbox.Message, error) {
	return s.Client.Get(ctx, id)
}

// List returns every message f matches.
func (s APIStore) List(ctx context.Context, f testmailbox.Filter) (int, []testmailbox.Message, error) {
	const page = 1000 // the API's largest page
	var all []testmailbox.Message
	for {
		q := f
		q.Limit, q.Offset = page, f.Offset+len(all)
		r, err := s.Client.List(ctx, q)
		if err != nil {
			return 0, nil, fmt.Errorf("list the mailbox's messages from %d: %w", q.Offset, err)
		}
		all = append(all, r.Messages...)
		if len(r.Messages) < page {
			if len(all) != r.Total-f.Offset {
				return 0, nil, fmt.Errorf("the mailbox reports %d messages, its pages hold %d", r.Total, len(all))
			}
			return r.Total, all, nil
		}
	}
}

// CheckByMessageID compares every action of the ledger with what the mailbox
// holds, attributing each stored message to the attempt whose recorded
// Message-ID it carries when it also goes to the attempt's recipient,
// from its sender, with its content (IsOwn); the rest of those are
// look-alikes.
func CheckByMessageID(ctx context.Context, l *ledger.Ledger, mb Store) (EvidenceVerdict, error) {
	var v EvidenceVerdict
	_, actions, err := l.ListActions(ctx, ledger.ActionFilter{Limit: 1 << 30})
	if err != nil {
		return v, err
	}
	_, msgs, err := mb.List(ctx, testmailbox.Filter{})
	if err != nil {
		return v, err
	}
	stored := map[string][]testmailbox.Message{}
	for _, m := range msgs {
		stored[m.MessageID] = append(stored[m.MessageID], m)
	}
	v.Arrivals = len(msgs)
	owned := map[string]bool{}
	for _, a := range actions {
		v.Actions++
		atts, err := l.Attempts(ctx, a.Key)
		if err != nil {
			return v, err
		}
		arrived := 0
		for _, at := range atts {
			owned[at.MessageID] = true
			n := 0
			for _, m := range stored[at.MessageID] {
				own, err := IsOwn(ctx, mb, at, m)
				if err != nil {
					return v, err
				}
				if own {
					n++
				} else {
					v.LookAlikes++
				}
			}
			arrived += n
			if n > 0 && (at.Outcome == destination.OutcomeNotDelivered || at.Outcome == destination.OutcomeRejectedTemporary ||
				at.Outcome == destination.OutcomeRejectedPermanent) {
				how := "recorded"
				if at.Reconciled {
					how = "reconciled"
				}
				v.Contradictions = append(v.Contradictions, fmt.Sprintf("%s: attempt %d %s as %s, but its message %s arrived",
					a.Key, at.Number, how, at.Outcome, at.MessageID))
			}
		}
		if arrived > 1 {
			v.Duplicates = append(v.Duplicates, fmt.Sprintf("%s: %d arrivals of its messages", a.Key, arrived))
		}
		if a.State == ledger.StateSent {
			v.Sent++
			if arrived == 0 {
				v.Losses = append(v.Losses, fmt.Sprintf("%s: sent in the ledger (%s), none of its messages arrived", a.Key, a.Reason))
			}
		}
	}
	for id, ms := range stored {
		if !owned[id] {
			v.Foreign += len(ms)
		}
	}
	sort.Strings(v.Duplicates)
	sort.Strings(v.Losses)
	sort.Strings(v.Contradictions)
	return v, nil
}

// Summary is the verdict's problems, one per line, for a failure message.
func (v EvidenceVerdict) Summary() string {
	var b strings.Builder
	for _, group := range []struct {
		name  string
		items []string
	}{{"duplicate", v.Duplicates}, {"loss", v.Losses}, {"contradiction", v.Contradictions}} {
		for _, it := range group.items {
			fmt.Fprintf(&b, "%s: %s\n", group.name, it)
		}
	}
	return b.String()
}

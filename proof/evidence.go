package proof

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"gatehouse/destination"
	"gatehouse/ledger"
	"gatehouse/testmailbox"
)

// EvidenceVerdict is what CheckByMessageID found: arrivals are attributed to
// an action only through the Message-IDs its attempts recorded, never
// through the action-key header, which anyone can write.
type EvidenceVerdict struct {
	Actions  int // business actions in the ledger (every revision its own)
	Sent     int // actions the ledger says are sent
	Arrivals int // messages the destination holds, the gate's and others'
	Foreign  int // stored messages whose Message-ID no attempt recorded

	Duplicates     []string // more than one arrival of one action's messages
	Losses         []string // sent in the ledger, none of its messages arrived
	Contradictions []string // the ledger says an attempt delivered nothing, yet its message arrived
}

// OK reports whether the run shows none of the three failure kinds.
func (v EvidenceVerdict) OK() bool {
	return len(v.Duplicates) == 0 && len(v.Losses) == 0 && len(v.Contradictions) == 0
}

func (v EvidenceVerdict) String() string {
	return fmt.Sprintf("actions %d, sent %d, arrivals %d (foreign %d): duplicates %d, losses %d, contradictions %d",
		v.Actions, v.Sent, v.Arrivals, v.Foreign, len(v.Duplicates), len(v.Losses), len(v.Contradictions))
}

// Store is a test mailbox's records as the checkers read them: a mailbox
// in this process (*testmailbox.Mailbox), or one in another process
// through its API (APIStore).
type Store interface {
	List(ctx context.Context, f testmailbox.Filter) (int, []testmailbox.Message, error)
}

// APIStore reads a mailbox in another process through its HTTP API, page
// after page, and fails unless the pages add up to the total the mailbox
// reports: what arrived is never counted from one page.
type APIStore struct{ Client *testmailbox.Client }

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
// Message-ID it carries.
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
	stored := map[string]int{}
	for _, m := range msgs {
		stored[m.MessageID]++
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
			n := stored[at.MessageID]
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
	for id, n := range stored {
		if !owned[id] {
			v.Foreign += n
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

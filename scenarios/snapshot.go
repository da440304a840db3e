package scenarios

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"gatehouse/ledger"
	"gatehouse/testmailbox"
)

// Snapshot is the state of a run between steps: the three columns joined
// by action key, the counts, the history and the verdicts so far.
type Snapshot struct {
	Clock    time.Time `json:"clock"`
	Step     int       `json:"step"`  // steps run so far
	Steps    int       `json:"steps"` // steps in the scenario
	Rows     []Row     `json:"rows"`
	Counts   Counts    `json:"counts"`
	History  []string  `json:"history"`
	Verdicts []Verdict `json:"verdicts"`
	// Audiences are the audience releases imported so far, with their
	// reconciliation and sending counts and a few sample rows.
	Audiences []AudienceView `json:"audiences,omitempty"`
}

// AudienceView is one audience release between steps: its counts and, for
// each row status, the first few rows (eligible rows carry their action's
// state), so a viewer sees recipients across their lifecycle.
type AudienceView struct {
	Summary ledger.AudienceSummary `json:"summary"`
	Samples []ledger.AudienceRow   `json:"samples"`
}

// Row is one action key across the three columns: the intended action,
// its attempts and what is at the destination for it (the messages that
// arrived, the refunds the payments fake created). A row with an empty
// State holds arrivals the ledger has no action for. Each arrival names the
// attempt whose Message-ID it carries (see Lines), or is Unmatched.
type Row struct {
	Key   string `json:"key"`
	Name  string `json:"name"`
	State string `json:"state"`
	// Owner is the task's owner now, who may have done nothing to the
	// action: ProposedBy proposed it ("" when nobody did: a recipient
	// removed before its notice was drafted) and By says whose act put it
	// in its state ("removed by lead", "cancelled by the gate at wf-ack's
	// send"). ByShort is By for a column beside the state.
	Owner      string        `json:"owner"`
	ProposedBy string        `json:"proposed_by"`
	By         string        `json:"by"`
	ByShort    string        `json:"-"`
	Reason     string        `json:"reason"`
	Attempts   []AttemptCell `json:"attempts"`
	Arrivals   []ArrivalCell `json:"arrivals"`
}

// AttemptCell is one attempt in the attempts column.
type AttemptCell struct {
	Number      int    `json:"number"`
	TransportID string `json:"transport_id"`
	Outcome     string `json:"outcome"` // "in flight" while none is recorded
	// Reconciled says the outcome was established afterwards, from the
	// destination's records or by a person, not by the destination's reply.
	Reconciled bool `json:"reconciled,omitempty"`
	// ProviderKey and DestinationID are an HTTP attempt's key at the
	// provider and the provider's id of what it created.
	ProviderKey   string `json:"provider_key,omitempty"`
	DestinationID string `json:"destination_id,omitempty"`
}

// ArrivalCell is one message the mailbox stored, or one record the
// payments fake created (Record: To is the payment, Subject the refund's
// amount, MessageID the key it came with). At is the fake-clock time
// of the step after which it was first seen. Attempt is the number of the
// attempt of the same action whose Message-ID (<transport id>) the message
// carries; 0 with Unmatched set when it carries none of them, which is a
// contradiction for a person: the ledger recorded no attempt that sent it.
type ArrivalCell struct {
	MessageID string    `json:"message_id"`
	To        string    `json:"to"`
	Subject   string    `json:"subject"`
	At        time.Time `json:"at"`
	Duplicate bool      `json:"duplicate"`
	Attempt   int       `json:"attempt"`
	Unmatched bool      `json:"unmatched,omitempty"`
	// DestinationID is a record's id at the provider ("" for a message).
	DestinationID string `json:"destination_id,omitempty"`
	Record        bool   `json:"record,omitempty"`
}

// Line is one line of a row aligned by attempt: an attempt with one
// message that carries its Message-ID, or either alone (an attempt nothing
// arrived for, a second arrival of the same attempt, an unmatched arrival).
type Line struct {
	Attempt *AttemptCell
	Arrival *ArrivalCell
}

// Lines aligns a row's arrivals with its attempts: each attempt in order
// with the arrivals that carry its Message-ID, then the unmatched arrivals.
// A row always has at least one line.
func (r Row) Lines() []Line {
	var out []Line
	for i := range r.Attempts {
		at := &r.Attempts[i]
		n := 0
		for j := range r.Arrivals {
			if m := &r.Arrivals[j]; !m.Unmatched && m.Attempt == at.Number {
				if n == 0 {
					out = append(out, Line{Attempt: at, Arrival: m})
				} else {
					out = append(out, Line{Arrival: m})
				}
				n++
			}
		}
		if n == 0 {
			out = append(out, Line{Attempt: at})
		}
	}
	for j := range r.Arrivals {
		if m := &r.Arrivals[j]; m.Unmatched {
			out = append(out, Line{Arrival: m})
		}
	}
	if len(out) == 0 {
		out = append(out, Line{})
	}
	return out
}

// matchAttempts sets each arrival's attempt from its Message-ID: an
// attempt's Message-ID is "<" + its transport id + ">" (the mailbox stores
// it without the brackets).
func matchAttempts(row *Row) {
	for i := range row.Arrivals {
		m := &row.Arrivals[i]
		m.Attempt, m.Unmatched = 0, true
		for _, at := range row.Attempts {
			if attemptMade(at, *m) {
				m.Attempt, m.Unmatched = at.Number, false
				break
			}
		}
	}
}

// attemptMade reports whether what is at the destination carries the
// attempt's mark: a message its Message-ID, a record the provider's id the
// attempt recorded or the key the attempt carried (a probe carries the key
// of the attempt it probes: the first of them is named).
func attemptMade(at AttemptCell, m ArrivalCell) bool {
	if m.Record {
		return m.DestinationID != "" && m.DestinationID == at.DestinationID ||
			m.MessageID != "" && m.MessageID == at.ProviderKey
	}
	return at.TransportID != "" && bareMessageID(m.MessageID) == bareMessageID(at.TransportID)
}

func bareMessageID(s string) string {
	s = strings.TrimSpace(s)
	return strings.TrimSuffix(strings.TrimPrefix(s, "<"), ">")
}

// Counts are the figures the design keeps apart. Arrived is what is at the
// destination, from its own store, never from what the workflow believes:
// the messages the mailbox holds and the refunds the payments fake holds.
type Counts struct {
	Intended        int `json:"intended"`
	Attempts        int `json:"attempts"`
	Confirmed       int `json:"confirmed"`
	Arrived         int `json:"arrived"`
	Denials         int `json:"denials"`
	DuplicateBlocks int `json:"duplicate_blocks"`
	Holds           int `json:"holds"`
	Conflicts       int `json:"conflicts"`
	Unknown         int `json:"unknown"`
}

// Snapshot reads the ledger and the mailbox now.
func (r *Run) Snapshot(ctx context.Context) (Snapshot, error) {
	snap := Snapshot{Clock: r.env.clock.Now(), Step: r.next, Steps: len(r.sc.Steps),
		Verdicts: append([]Verdict(nil), r.verdicts...)}
	var err error
	if snap.Rows, err = r.rows(ctx); err != nil {
		return snap, fmt.Errorf("snapshot: %w", err)
	}
	if snap.Counts, err = r.counts(ctx); err != nil {
		return snap, fmt.Errorf("snapshot: %w", err)
	}
	if snap.Audiences, err = r.audienceViews(ctx); err != nil {
		return snap, fmt.Errorf("snapshot: audiences: %w", err)
	}
	events, err := r.env.l.History(ctx, ledger.HistoryFilter{})
	if err != nil {
		return snap, fmt.Errorf("snapshot: history: %w", err)
	}
	for _, e := range events {
		snap.History = append(snap.History, e.At.Format("15:04:05")+"  "+r.env.stable(e.Message))
	}
	return snap, nil
}

func (r *Run) rows(ctx context.Context) ([]Row, error) {
	_, actions, err := r.env.l.ListActions(ctx, ledger.ActionFilter{Limit: 10000})
	if err != nil {
		return nil, fmt.Errorf("actions: %w", err)
	}
	sort.Slice(actions, func(i, j int) bool {
		a, b := actions[i], actions[j]
		return a.CreatedAt.Before(b.CreatedAt) || a.CreatedAt.Equal(b.CreatedAt) && a.Key < b.Key
	})
	names := r.keyNames()
	byKey := map[string]*Row{}
	var rows []*Row
	for _, a := range actions {
		row, err := r.actionRow(ctx, a, names[a.Key])
		if err != nil {
			return nil, err
		}
		rows = append(rows, row)
		byKey[a.Key] = row
	}
	_, msgs, err := r.env.mb.List(ctx, testmailbox.Filter{})
	if err != nil {
		return nil, fmt.Errorf("mailbox: %w", err)
	}
	for _, m := range msgs {
		row := byKey[m.ActionKey]
		if row == nil {
			row = &Row{Key: m.ActionKey, Name: names[m.ActionKey]}
			rows = append(rows, row)
			byKey[m.ActionKey] = row
		}
		row.Arrivals = append(row.Arrivals, ArrivalCell{MessageID: m.MessageID, To: strings.Join(m.To, ","),
			Subject: m.Subject, At: m.ReceivedAt, Duplicate: m.Duplicate})
	}
	recs := r.refundRecords()
	for _, k := range sortedRecordKeys(recs) {
		row := byKey[k]
		if row == nil {
			row = &Row{Key: k, Name: names[k]}
			rows = append(rows, row)
			byKey[k] = row
		}
		for i, rec := range recs[k] {
			row.Arrivals = append(row.Arrivals, recordCell(rec, i))
		}
	}
	out := make([]Row, len(rows))
	for i, row := range rows {
		matchAttempts(row)
		out[i] = *row
	}
	return out, nil
}

func (r *Run) actionRow(ctx context.Context, a ledger.Action, name string) (*Row, error) {
	tk, err := r.env.l.Task(ctx, a.TaskID)
	if err != nil {
		return nil, fmt.Errorf("task of %s: %w", a.Key, err)
	}
	atts, err := r.env.l.Attempts(ctx, a.Key)
	if err != nil {
		return nil, fmt.Errorf("attempts of %s: %w", a.Key, err)
	}
	if name == "" && strings.HasPrefix(a.TaskID, "release:") {
		name = a.Customer // one recipient of an audience release
	}
	evs, err := r.env.l.History(ctx, ledger.HistoryFilter{ActionKey: a.Key})
	if err != nil {
		return nil, fmt.Errorf("history of %s: %w", a.Key, err)
	}
	credit := ledger.CreditOf(a, evs)
	row := &Row{Key: a.Key, Name: name, State: string(a.State), Owner: tk.Owner, ProposedBy: credit.ProposedBy,
		By: credit.Words(), ByShort: credit.Short(), Reason: r.env.stable(a.Reason)}
	for _, at := range atts {
		o := string(at.Outcome)
		if o == "" {
			o = "in flight"
		}
		if at.Reconciled {
			o += " (reconciled)"
		}
		row.Attempts = append(row.Attempts, AttemptCell{Number: at.Number, TransportID: at.TransportID, Outcome: o,
			Reconciled: at.Reconciled, ProviderKey: at.ProviderKey, DestinationID: at.DestinationID})
	}
	return row, nil
}

func (r *Run) counts(ctx context.Context) (Counts, error) {
	m, err := r.env.l.Metrics(ctx)
	if err != nil {
		return Counts{}, fmt.Errorf("metrics: %w", err)
	}
	arrived, err := r.env.mb.Count(ctx, testmailbox.Filter{})
	if err != nil {
		return Counts{}, fmt.Errorf("mailbox count: %w", err)
	}
	arrived += len(r.env.payments.Records().Records)
	return Counts{Intended: m.Intended, Attempts: m.Attempts, Confirmed: m.Confirmed, Arrived: arrived,
		Denials: m.Denials, DuplicateBlocks: m.DuplicateBlocks, Holds: m.Holds,
		Conflicts: m.OwnershipConflicts, Unknown: m.Unknown}, nil
}

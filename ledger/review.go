package ledger

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
)

// ReviewFacts is what an incident review reads beside the history, from the
// same snapshot: who each action is for, what each approval bound, and the
// latest value the ledger read for each material field of each customer
// (Metrics alone is read just before the snapshot).
type ReviewFacts struct {
	// FoldedFrom is the first history id written with to_state and detail;
	// the states of older lines must be inferred from their kinds.
	FoldedFrom int64
	Actions    map[string]ReviewAction // by key
	// Approvals holds every approval, oldest first, its material snapshot
	// still as JSON: a review decodes only the ones it compares.
	Approvals []ReviewApproval
	// LatestReads holds, per customer, the newest re-read of each material
	// field ("source.field") before a send.
	LatestReads map[string]map[string]MaterialCheck
	Stop        Switch
	// Metrics are the ledger's counts (unmatched identities per release
	// among them), read just before the snapshot.
	Metrics Metrics
}

// ReviewApproval is an approval as a review reads it: when, and the
// material snapshot it bound (JSON, see MaterialOf).
type ReviewApproval struct {
	ActionKey string
	At        time.Time
	Material  string
}

// MaterialOf decodes an approval's material snapshot.
func (a ReviewApproval) MaterialOf() ([]MaterialRead, error) {
	var m []MaterialRead
	if err := json.Unmarshal([]byte(a.Material), &m); err != nil {
		return nil, fmt.Errorf("approval of %s: material snapshot: %w", a.ActionKey, err)
	}
	return m, nil
}

// ReviewAction is the part of an action a review groups and filters by.
type ReviewAction struct {
	Key, TaskID, Customer, Recipient string
	State                            State
	HoldCause                        HoldCause
	LateArrivals                     int // see Action.LateArrivals
}

// ArrivedTwice reports whether the customer is known to have the action's
// message more than once (see Action.ArrivedTwice).
func (a ReviewAction) ArrivedTwice() bool {
	return Action{State: a.State, LateArrivals: a.LateArrivals}.ArrivedTwice()
}

// ReviewLine is one history line as ReadReview hands it over: the text
// fields are only valid during the call (they are the driver's buffers, so
// a million lines cost no copies). Message is filled only for lines written
// before lines carried their state (the review infers from it) and Detail
// only for reconciliations (it says who established the outcome).
type ReviewLine struct {
	ID, At                                           int64
	Actor, TaskID, ActionKey, Kind, ToState, Message []byte
	Detail                                           []byte
}

// ReadReview reads, in one snapshot, every history line oldest first
// (handed to each, so a million lines are never held at once) and the facts
// a review needs beside them. It only reads.
func (l *Ledger) ReadReview(ctx context.Context, each func(ReviewLine) error) (ReviewFacts, error) {
	f := ReviewFacts{Actions: map[string]ReviewAction{}, LatestReads: map[string]map[string]MaterialCheck{}}
	m, err := l.Metrics(ctx)
	if err != nil {
		return f, fmt.Errorf("review: %w", err)
	}
	f.Metrics = m
	err = l.read(ctx, func(tx queryTx) error {
		if err := tx.QueryRow(`SELECT folded_from FROM history_format WHERE id = 1`).Scan(&f.FoldedFrom); err != nil {
			return fmt.Errorf("read history format: %w", err)
		}
		var err error
		if f.Stop, err = readSwitch(tx); err != nil {
			return err
		}
		for _, step := range []func(queryTx, *ReviewFacts) error{reviewActions, reviewApprovals, reviewReads} {
			if err := step(tx, &f); err != nil {
				return err
			}
		}
		return eachLine(tx, f.FoldedFrom, each)
	})
	if err != nil {
		return f, fmt.Errorf("review %s: %w", l.path, err)
	}
	return f, nil
}

func eachLine(tx queryTx, foldedFrom int64, each func(ReviewLine) error) error {
	rows, err := tx.Query(`SELECT id, at, actor, task_id, action_key, kind, to_state,
		CASE WHEN id < ? THEN message ELSE '' END, CASE WHEN kind = 'reconciled' THEN detail ELSE '' END
		FROM events ORDER BY id`, foldedFrom)
	if err != nil {
		return fmt.Errorf("read history: %w", err)
	}
	defer rows.Close()
	var ln ReviewLine
	raw := []*sql.RawBytes{(*sql.RawBytes)(&ln.Actor), (*sql.RawBytes)(&ln.TaskID), (*sql.RawBytes)(&ln.ActionKey),
		(*sql.RawBytes)(&ln.Kind), (*sql.RawBytes)(&ln.ToState), (*sql.RawBytes)(&ln.Message), (*sql.RawBytes)(&ln.Detail)}
	for rows.Next() {
		if err := rows.Scan(&ln.ID, &ln.At, raw[0], raw[1], raw[2], raw[3], raw[4], raw[5], raw[6]); err != nil {
			return fmt.Errorf("read history: %w", err)
		}
		if err := each(ln); err != nil {
			return err
		}
	}
	return rows.Err()
}

func reviewActions(tx queryTx, f *ReviewFacts) error {
	rows, err := tx.Query(`SELECT key, task_id, customer, recipient, state, hold_cause, late_arrivals FROM actions`)
	if err != nil {
		return fmt.Errorf("read actions: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var a ReviewAction
		var st, hc string
		if err := rows.Scan(&a.Key, &a.TaskID, &a.Customer, &a.Recipient, &st, &hc, &a.LateArrivals); err != nil {
			return fmt.Errorf("read actions: %w", err)
		}
		a.State, a.HoldCause = State(st), HoldCause(hc)
		f.Actions[a.Key] = a
	}
	return rows.Err()
}

func reviewApprovals(tx queryTx, f *ReviewFacts) error {
	rows, err := tx.Query(`SELECT action_key, at, material FROM approvals ORDER BY id`)
	if err != nil {
		return fmt.Errorf("read approvals: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var ap ReviewApproval
		var at int64
		if err := rows.Scan(&ap.ActionKey, &at, &ap.Material); err != nil {
			return fmt.Errorf("read approvals: %w", err)
		}
		ap.At = fromNS(at)
		f.Approvals = append(f.Approvals, ap)
	}
	return rows.Err()
}

// reviewReads keeps the newest re-read per customer and field: material
// fields (consent, order state) belong to the customer, whichever of their
// actions read them.
func reviewReads(tx queryTx, f *ReviewFacts) error {
	// The actions are already read: their customers need no join.
	rows, err := tx.Query(`SELECT action_key, attempt, at, source, field, approved, read_value, matched, unavailable
		FROM material_checks ORDER BY id`)
	if err != nil {
		return fmt.Errorf("read material checks: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var c MaterialCheck
		var at int64
		var mt, u int
		if err := rows.Scan(&c.ActionKey, &c.Attempt, &at, &c.Source, &c.Field, &c.Approved, &c.Read, &mt, &u); err != nil {
			return fmt.Errorf("read material checks: %w", err)
		}
		cust := f.Actions[c.ActionKey].Customer
		c.At, c.Matched, c.Unavailable = fromNS(at), mt == 1, u == 1
		if f.LatestReads[cust] == nil {
			f.LatestReads[cust] = map[string]MaterialCheck{}
		}
		f.LatestReads[cust][c.Source+"."+c.Field] = c
	}
	return rows.Err()
}

// eventsPerQuery is how many history lines EventsByID asks for at once.
const eventsPerQuery = 1000

// EventsByID reads the given history lines, in id order: a review keeps
// a million lines without their sentences and reads back the ones it shows.
func (l *Ledger) EventsByID(ctx context.Context, ids []int64) ([]Event, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	sorted := slices.Clone(ids)
	slices.Sort(sorted)
	sorted = slices.Compact(sorted) // an id in two chunks would come back twice
	var out []Event
	err := l.read(ctx, func(tx queryTx) error {
		out = out[:0]
		// In chunks: an incident can have tens of thousands of lines to
		// show (a release's hold releases), more than a statement may carry
		// parameters (32,766 on SQLite); one snapshot for all of them.
		for chunk := range slices.Chunk(sorted, eventsPerQuery) {
			args := make([]any, len(chunk))
			for i, id := range chunk {
				args[i] = id
			}
			ph := strings.TrimSuffix(strings.Repeat("?,", len(chunk)), ",")
			rows, err := tx.Query(`SELECT id, at, actor, task_id, action_key, kind, message, reason, to_state, detail
				FROM events WHERE id IN (`+ph+`) ORDER BY id`, args...)
			if err != nil {
				return err
			}
			for rows.Next() {
				var e Event
				var at int64
				var kind string
				if err := rows.Scan(&e.ID, &at, &e.Actor, &e.TaskID, &e.ActionKey, &kind, &e.Message, &e.Reason, &e.ToState, &e.Detail); err != nil {
					rows.Close()
					return err
				}
				e.At, e.Kind = fromNS(at), EventKind(kind)
				out = append(out, e)
			}
			if err := rows.Close(); err != nil {
				return err
			}
			if err := rows.Err(); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read history lines: %w", err)
	}
	return out, nil
}

// RecordOperating records that actor switched a review, which only reads,
// into operating mode, with a mandatory reason: from then on the reviewer
// may act on the ledger, and the history says who chose to and why.
func (l *Ledger) RecordOperating(ctx context.Context, actor, reason string) error {
	if strings.TrimSpace(reason) == "" {
		return invalidf("operating mode: a reason is required")
	}
	return l.writeRelaxed(ctx, func(t *wtx) error {
		if _, err := t.permit(actor, VerbOperate, "", ""); err != nil {
			return err
		}
		return t.event(actor, "", "", EvOperating, reason,
			"%s switched the review of this ledger into operating mode because: %s.", actor, reason)
	})
}

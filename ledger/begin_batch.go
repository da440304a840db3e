package ledger

import (
	"context"
	"errors"
	"fmt"

	"gatehouse/destination"
)

// Begun is what BeginAttempts decided for one request: the recorded attempt
// and the message to hand over, or the refusal (Err) that recorded none.
type Begun struct {
	Attempt Attempt
	Message destination.Message
	Err     error
}

// BeginAttempts is the deciding step of Execute for many actions at once
// (group commit): in one durable BEGIN IMMEDIATE transaction it runs, for
// each request in order, exactly the checks BeginAttempt runs and records
// each attempt that passes them, so one fsync makes many intents durable.
// Each request is decided on its own: a refusal of one (denied, held, a
// duplicate block) commits with its history line and does not affect the
// others, exactly as if BeginAttempt had been called for it.
//
// Two exceptions keep a batch no worse than single calls. A stop refuses
// the first request that meets it (held, as BeginAttempt would) and the
// rest of the batch is not started at all: they stay approved and nothing
// is recorded for them, so resuming sends them. A storage failure records
// nothing of the batch and is returned as the error, wrapping
// ErrNotRecorded.
//
// The returned slice has one entry per request, in order. No message may be
// handed over before BeginAttempts returns: only then are the intents
// durable.
func (l *Ledger) BeginAttempts(ctx context.Context, reqs []ExecuteRequest) ([]Begun, error) {
	return l.beginAttempts(ctx, reqs, nil)
}

// newRecipient is a recipient no run has touched yet: its proposal, and
// the approval to give it (the release's approver, on the consent class
// recorded at reconciliation).
type newRecipient struct {
	proposal Proposal
	approver string
	material []MaterialRead
}

// beginAttempts is BeginAttempts where a request may be a new recipient
// (fresh[i] set): it is proposed and approved, as Propose and Approve
// would, in the same transaction and just before its request is decided,
// which then reads neither back. A refusal of a proposal ends the batch,
// as an infrastructure error does.
func (l *Ledger) beginAttempts(ctx context.Context, reqs []ExecuteRequest, fresh []*newRecipient) ([]Begun, error) {
	out := make([]Begun, len(reqs))
	// Every budget counts from before the transaction that starts the
	// leases (see begin).
	begun := l.clock.Now()
	err := l.writeBatch(ctx, true, func(t *wtx) error {
		// Every request reads the stop switch; nothing in the batch
		// writes it, and no other writer can while this one holds the
		// write lock, so it is read once.
		sw, err := readSwitch(t)
		if err != nil {
			return err
		}
		t.batch.sw = &sw
		// Every executor of the batch may send, or none of it starts.
		checked := map[string]bool{}
		for _, req := range reqs {
			if checked[req.Executor] {
				continue
			}
			checked[req.Executor] = true
			s, err := t.standingOf(req.Executor)
			if err != nil {
				return err
			}
			if err := t.judge(s, req.Executor, VerbExecute, "", ""); err != nil {
				return err
			}
		}
		var stopped error
		for i, req := range reqs {
			if fresh != nil && fresh[i] != nil {
				// Proposed and approved even after a stop: such a
				// recipient stays approved until execution resumes, as
				// one approved by an earlier run does.
				f := fresh[i]
				answer, err := t.savepoint(func() error { return t.proposeAndApprove(f.proposal, f.approver, f.material) })
				if err != nil {
					return err
				}
				if answer != nil {
					return answer
				}
			}
			if err := req.validate(); err != nil {
				out[i] = Begun{Err: err} // a caller's slip records nothing
				continue
			}
			if stopped != nil {
				out[i] = Begun{Err: &StateError{Key: req.Key, Err: ErrStopped,
					Hint: fmt.Sprintf("not started: %v; it stays approved until execution resumes", stopped)}}
				continue
			}
			b, err := t.beginOne(req)
			if err != nil {
				return err
			}
			out[i] = b
			if errors.Is(b.Err, ErrStopped) {
				stopped = b.Err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("begin %d attempts: %w", len(reqs), err)
	}
	for i := range out {
		out[i].Attempt.begun = begun
	}
	return out, nil
}

// beginOne decides one request of a batch (see savepoint).
func (t *wtx) beginOne(req ExecuteRequest) (Begun, error) {
	var b Begun
	answer, err := t.savepoint(func() (err error) {
		b.Attempt, b.Message, _, err = t.beginAttempt(req)
		return err
	})
	b.Err = answer
	return b, err
}

// savepoint runs one request of a batch inside a savepoint, so that what a
// single call would have rolled back (a caller's slip, a refusal that
// records nothing) is rolled back for this request alone, and what it would
// have committed (its change, a refusal with its history line) stays. The
// gate's answer is returned first; a storage failure, returned second, ends
// the batch.
func (t *wtx) savepoint(fn func() error) (answer, failure error) {
	if t.batch != nil && !t.batch.careful {
		// Without savepoints (see writeBatch): an answer that would
		// roll this request back starts the batch over with them.
		err := fn()
		var keep *committedRefusal
		switch {
		case err == nil:
			return nil, nil
		case errors.As(err, &keep):
			return keep.err, nil
		case isStorageFailure(err), errors.Is(err, errNeedsDurable):
			return nil, err
		}
		return nil, errNeedsSavepoints
	}
	if err := t.savepointStep(spBegin); err != nil {
		return nil, fmt.Errorf("savepoint: %w", err)
	}
	// What the next history line will carry is kept in memory beside the
	// rows: a rollback to the savepoint must take it back too, or a
	// rolled-back request's facts would ride on the next request's line.
	movedKey, movedTo, detail, counter := t.movedKey, t.movedTo, t.detail, t.counter
	mark := t.batchMark()
	err := fn()
	var keep *committedRefusal
	switch {
	case err == nil:
	case errors.As(err, &keep):
		err = keep.err
	case isStorageFailure(err), errors.Is(err, errNeedsDurable):
		return nil, err
	default:
		if rerr := t.savepointStep(spRollback); rerr != nil {
			return nil, fmt.Errorf("roll back to savepoint: %w", rerr)
		}
		t.movedKey, t.movedTo, t.detail, t.counter = movedKey, movedTo, detail, counter
		t.batchRollback(mark)
	}
	if rerr := t.savepointStep(spRelease); rerr != nil {
		return nil, fmt.Errorf("release savepoint: %w", rerr)
	}
	return err, nil
}

// The statements of savepoint, by step.
const (
	spBegin = iota
	spRelease
	spRollback
)

var savepointSQL = [...]string{spBegin: `SAVEPOINT one`, spRelease: `RELEASE one`, spRollback: `ROLLBACK TO one`}

// savepointStep runs one of savepoint's statements. On SQLite each is
// prepared once per transaction: the driver runs a statement without
// arguments unprepared, so it would be parsed again at every call, two or
// three times per request of a batch.
func (t *wtx) savepointStep(step int) error {
	if step != spRollback {
		// What waits belongs inside the request's savepoint; a rollback
		// drops it instead (batchRollback).
		if err := t.flushPending(); err != nil {
			return err
		}
	}
	if t.l.dialect.isPostgres() {
		_, err := t.Exec(savepointSQL[step])
		return err
	}
	if t.savepoints[step] == nil {
		st, err := t.tx.Prepare(savepointSQL[step])
		if err != nil {
			return err
		}
		t.savepoints[step] = st // closed with the transaction
	}
	_, err := t.savepoints[step].Exec()
	return err
}

// RecordDeliveries is RecordDelivery for many attempts in one transaction
// (relaxed, as RecordOutcome's): each delivery is recorded exactly as
// RecordDelivery records it and gets the same result and error. When the
// ledger cannot record the batch, every entry's error wraps ErrNotRecorded
// and ErrUnknownOutcome, as RecordDelivery's would.
func (l *Ledger) RecordDeliveries(ctx context.Context, atts []Attempt, ds []Delivery) ([]Result, []error) {
	actions := make([]Action, len(atts))
	answers := make([]error, len(atts))
	err := l.writeBatch(context.WithoutCancel(ctx), false, func(t *wtx) error {
		for i, att := range atts {
			answer, err := t.savepoint(func() (err error) {
				actions[i], err = t.recordOutcome(att.TransportID, ds[i].Outcome, ds[i].response())
				return err
			})
			if err != nil {
				return err
			}
			answers[i] = answer
		}
		return nil
	})
	results := make([]Result, len(atts))
	errs := make([]error, len(atts))
	for i, att := range atts {
		recErr := answers[i]
		if err != nil {
			recErr = err
		}
		results[i], errs[i] = deliveryResult(att, ds[i], actions[i], recErr)
	}
	return results, errs
}

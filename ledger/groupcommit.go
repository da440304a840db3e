package ledger

import (
	"context"
	"errors"
	"slices"
	"sync"
)

// groupCommit lets the concurrent executions of one process share their
// transactions (group commit). SQLite has one writer and every intent is
// made durable before its hand-over, so eight executors each committing
// their own decision wait for eight fsyncs in turn; here the decisions and
// outcomes that arrive while a transaction commits are run, each in a
// savepoint of its own, in the next single transaction, and one fsync makes
// them all durable.
//
// Each write is decided exactly as alone: its own token and permission
// check, its own history lines, and a savepoint that rolls back a request
// whose answer records nothing (a caller's slip) without touching the
// others. A relaxed write that finds it must be durable makes the whole
// group run again durably; every write of a group whose transaction failed
// (nothing of it was committed) runs again by itself, through writeWith, so
// its answer is the one a lone write would have got.
//
// A writer that finds a group under way waits for its answer and does not
// give up on its context: the group may be committing its decision at that
// moment, and an answer of "cancelled" for a decision that committed would
// be untrue. Its context is checked before its write is run.
type groupCommit struct {
	mu      sync.Mutex
	queue   []*groupedWrite
	leading bool
	// formed and queued, when set (a test's hooks), are told the size of
	// each group before its transaction begins, and the queue's length
	// each time a write joins it (under mu).
	formed func(n int)
	queued func(n int)
}

// maxGroup bounds how many writes one transaction carries, and so how long
// it holds the write lock from other processes.
const maxGroup = 64

// groupedWrite is one caller's write waiting for, or run in, a group.
type groupedWrite struct {
	ctx     context.Context
	durable bool
	fn      func(*wtx) error
	signal  chan groupSignal // buffered: the leader never waits on it
}

// groupSignal is what the leader tells a waiting writer.
type groupSignal struct {
	err   error
	lead  bool // lead the next group (this write is still queued)
	alone bool // run the write alone (it was not committed)
}

// writeGrouped is writeWith for a deciding write that may share its
// transaction with other writes of this process (see groupCommit). On
// PostgreSQL every writer has a connection of its own and the server does
// its own group commit, so the write runs alone.
func (l *Ledger) writeGrouped(ctx context.Context, durable bool, fn func(*wtx) error) error {
	if l.dialect.isPostgres() {
		return l.writeWith(ctx, durable, fn)
	}
	w := &groupedWrite{ctx: ctx, durable: durable, fn: fn, signal: make(chan groupSignal, 1)}
	g := &l.group
	g.mu.Lock()
	g.queue = append(g.queue, w)
	if g.queued != nil {
		g.queued(len(g.queue))
	}
	if g.leading {
		g.mu.Unlock()
		s := <-w.signal
		switch {
		case s.alone:
			return l.writeWith(ctx, durable, fn)
		case !s.lead:
			return s.err
		}
	} else {
		g.leading = true
		g.mu.Unlock()
	}
	return l.lead(w)
}

// lead runs groups from the front of the queue until own's is done, then
// hands the lead to the first writer still waiting, if any. A write that
// panics fails its group (see runInGroup); should anything else panic
// here, every other writer of the group is told to run alone and the lead
// is passed on before the panic goes up the leader's stack: no writer may
// wait for ever.
func (l *Ledger) lead(own *groupedWrite) error {
	g := &l.group
	var batch []*groupedWrite
	handOff := func() {
		g.mu.Lock()
		if len(g.queue) > 0 {
			g.queue[0].signal <- groupSignal{lead: true}
		} else {
			g.leading = false
		}
		g.mu.Unlock()
	}
	defer func() {
		if r := recover(); r != nil {
			for _, w := range batch {
				if w != own {
					w.signal <- groupSignal{alone: true}
				}
			}
			// own may still wait in the queue: it must not be handed
			// the lead it can no longer take.
			g.mu.Lock()
			g.queue = slices.DeleteFunc(g.queue, func(w *groupedWrite) bool { return w == own })
			g.mu.Unlock()
			handOff()
			panic(r)
		}
	}()
	for {
		g.mu.Lock()
		n := min(len(g.queue), maxGroup)
		batch = append(batch[:0], g.queue[:n]...)
		g.queue = append(g.queue[:0], g.queue[n:]...)
		g.mu.Unlock()

		answers := l.runGroup(batch)
		var mine *groupSignal
		for i, w := range batch {
			if w == own {
				mine = &answers[i]
				continue
			}
			w.signal <- answers[i]
		}
		batch = batch[:0]
		if mine == nil {
			continue // own is further back in the queue
		}
		handOff()
		if mine.alone {
			return l.writeWith(own.ctx, own.durable, own.fn)
		}
		return mine.err
	}
}

// runGroup runs a group's writes in one transaction, durable when any of
// them is, and returns each one's answer in order.
func (l *Ledger) runGroup(batch []*groupedWrite) []groupSignal {
	answers := make([]groupSignal, len(batch))
	if l.group.formed != nil {
		l.group.formed(len(batch))
	}
	if len(batch) == 1 {
		w := batch[0]
		answers[0].err = l.writeWith(w.ctx, w.durable, w.fn)
		return answers
	}
	durable := false
	for _, w := range batch {
		durable = durable || w.durable
	}
	// The group's transaction waits for the write lock as long as a lone
	// write would, whatever became of the caller who happens to lead it;
	// each write's own context is checked before it runs.
	ctx := context.WithoutCancel(batch[0].ctx)
	err := l.writeWith(ctx, durable, func(t *wtx) error {
		t.standings = map[standingKey]standing{}
		for i, w := range batch {
			a, err := t.runInGroup(w)
			if err != nil {
				return err
			}
			answers[i] = a
		}
		return nil
	})
	if err != nil {
		// Nothing of the group was committed: each write runs again by
		// itself and gets the answer a lone write gets.
		for i := range answers {
			answers[i] = groupSignal{alone: true}
		}
	}
	return answers
}

// runInGroup runs one write of a group in a savepoint of the group's
// transaction (the batch transactions' savepoint): what a lone write would
// have committed stays, what it would have rolled back is rolled back to
// the savepoint. A storage failure, or a relaxed write that must be
// durable, fails the whole group (writeWith then runs it again durably or
// after the lock), and so does a write that panics.
func (t *wtx) runInGroup(w *groupedWrite) (groupSignal, error) {
	if err := w.ctx.Err(); err != nil {
		return groupSignal{err: err}, nil // a lone write checks it before it begins
	}
	// What one write leaves in the transaction's memory must not ride on
	// the next one's rows or history lines.
	t.token, t.who, t.attemptID = tokenFrom(w.ctx), nil, nil
	t.movedKey, t.movedTo, t.detail, t.counter = "", "", nil, ""
	answer, failure := t.savepoint(func() error {
		panicked, err := runCatching(w.fn, t)
		if panicked {
			return errWritePanicked
		}
		return err
	})
	if errors.Is(answer, errWritePanicked) {
		// A bug in one write: the group is not committed, and each write
		// runs alone, this one too, so that its panic comes up its own
		// caller's stack and no other's.
		return groupSignal{}, errWritePanicked
	}
	return groupSignal{err: answer}, failure
}

// errWritePanicked fails a group one of whose writes panicked.
var errWritePanicked = errors.New("a write of the group panicked")

// runCatching runs fn, reporting a panic instead of raising it.
func runCatching(fn func(*wtx) error, t *wtx) (panicked bool, err error) {
	defer func() {
		if recover() != nil {
			panicked = true
		}
	}()
	return false, fn(t)
}

package ledger

import (
	"context"
	"errors"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"gatehouse/internal/oswait"
)

// writeTurn makes the processes writing one SQLite ledger take turns.
// SQLite's write lock is not fair: a process that writes back to back (an
// audience send, whose batches follow each other on its one write
// connection) takes the lock again within microseconds of releasing it,
// while another process waiting for it (the stop switch, from another
// shell) polls every few tens of milliseconds, and could wait for the
// whole run.
//
// So writers take turns through two files beside the ledger, locked with
// flock(2) (never the POSIX locks SQLite holds on the ledger and its
// -shm): a writer holds -turn exclusively from before it asks for SQLite's
// write lock until it is done, and while it waits for -turn it holds -wait
// shared. Before it waits, a writer that has not let the others go first
// for turnBurst does so: it waits until it could lock -wait exclusively,
// that is until every writer already waiting has taken its turn, so a process
// that has been writing back to back goes after the one that waited.
//
// Every wait is bounded (turnWaitMost): a writer stuck in its turn delays
// the others that long at most, and then they ask SQLite as before. Where
// the files cannot be made (a read-only directory), writers take no turns.
type writeTurn struct {
	mu         sync.RWMutex // held shared through a turn; close takes it
	turn, wait *os.File     // nil once closed
	yielded    atomic.Int64 // when this writer last let the waiting go first (ns)
}

// turnWaitMost bounds each of a writer's waits for the others' turns.
const turnWaitMost = 2 * time.Second

// turnBurst is how long a writer may write back to back before it lets
// the writers waiting go first: a process's consecutive transactions keep
// most of their speed, and a waiting writer (the stop) waits this long
// and one transaction at most.
const turnBurst = 20 * time.Millisecond

// turnPoll is how often a waiting writer looks again.
const turnPoll = 200 * time.Microsecond

func openWriteTurn(path string) *writeTurn {
	turn, err := os.OpenFile(path+"-turn", os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil
	}
	wait, err := os.OpenFile(path+"-wait", os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		turn.Close()
		return nil
	}
	return &writeTurn{turn: turn, wait: wait}
}

// lockPolling takes how on f without blocking in the kernel, looking again
// every turnPoll until it can, turnWaitMost passed or ctx ended; it
// reports whether it took the lock.
func lockPolling(ctx context.Context, f *os.File, how int) bool {
	budget := oswait.NewBudget(turnWaitMost)
	for {
		err := syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB)
		if err == nil {
			return true
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) || budget.Spent() || oswait.Pause(ctx, turnPoll) != nil {
			return false
		}
	}
}

// enter lets the writers already waiting go first, then waits for the
// turn and holds it until the returned leave is called.
func (w *writeTurn) enter(ctx context.Context) (leave func()) {
	if w == nil {
		return func() {}
	}
	w.mu.RLock()
	if w.turn == nil { // closed
		w.mu.RUnlock()
		return func() {}
	}
	if now := oswait.Now().UnixNano(); now-w.yielded.Load() > int64(turnBurst) {
		if lockPolling(ctx, w.wait, syscall.LOCK_EX) { // nobody waits (any more)
			_ = syscall.Flock(int(w.wait.Fd()), syscall.LOCK_UN)
		}
		w.yielded.Store(oswait.Now().UnixNano())
	}
	lockPolling(ctx, w.wait, syscall.LOCK_SH) // waiting
	lockPolling(ctx, w.turn, syscall.LOCK_EX)
	_ = syscall.Flock(int(w.wait.Fd()), syscall.LOCK_UN)
	return func() {
		_ = syscall.Flock(int(w.turn.Fd()), syscall.LOCK_UN)
		w.mu.RUnlock()
	}
}

// close ends the turns, once the one under way (if any) is over.
func (w *writeTurn) close() {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.turn != nil {
		w.turn.Close()
		w.wait.Close()
		w.turn, w.wait = nil, nil
	}
}

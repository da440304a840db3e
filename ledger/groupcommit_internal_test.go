package ledger

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
)

// TestPanicInAGroupLeavesNoWriterWaiting: a write that panics (a bug,
// recovered by its caller) takes its group's transaction down with it;
// every write of the group runs again alone, the others commit once each,
// the panic reaches only the caller whose write it was, and later writes
// still find a leader.
func TestPanicInAGroupLeavesNoWriterWaiting(t *testing.T) {
	l, err := Open(filepath.Join(t.TempDir(), "ledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()
	count := func(tx *wtx) error {
		_, err := tx.Exec(`INSERT INTO counters (kind, n) VALUES ('group_test', 1)
			ON CONFLICT(kind) DO UPDATE SET n = counters.n + 1`)
		return err
	}
	const writers = 6
	ready := make(chan struct{})
	joined := 0
	var once, first sync.Once
	l.group.queued = func(int) {
		if joined++; joined >= writers {
			once.Do(func() { close(ready) })
		}
	}
	l.group.formed = func(int) { first.Do(func() { <-ready }) }

	panicked := make([]any, writers)
	errs := make([]error, writers)
	var wg sync.WaitGroup
	for i := range writers {
		wg.Go(func() {
			defer func() { panicked[i] = recover() }()
			fn := count
			if i == writers-1 {
				fn = func(tx *wtx) error {
					if err := count(tx); err != nil {
						return err
					}
					panic("a bug in a write")
				}
			}
			errs[i] = l.writeGrouped(ctx, true, fn)
		})
	}
	wg.Wait()
	for i := range writers - 1 {
		if panicked[i] != nil || errs[i] != nil {
			t.Errorf("writer %d: panic %v, error %v", i, panicked[i], errs[i])
		}
	}
	if panicked[writers-1] == nil {
		t.Error("the panicking write's caller did not get its panic")
	}
	// A later write finds a leader, and the counter holds exactly the
	// writes that did not panic.
	if err := l.writeGrouped(ctx, false, count); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := l.pool().db.QueryRow(`SELECT n FROM counters WHERE kind = 'group_test'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != writers {
		t.Fatalf("counter %d, want %d: the writes of the group that panicked were not each committed once", n, writers)
	}
}

package ledger

import (
	"context"
	"testing"
	"time"
)

// TestPostgresPanicInsideAWriteReleasesTheLock: a deciding transaction
// that panics after it took the ledger's write lock (a bug, recovered by
// a caller such as a server's handler) must not leave its connection in
// the pool with the transaction, and the lock, still open: another host's
// next decision would wait for it until this process happened to use
// that connection again.
func TestPostgresPanicInsideAWriteReleasesTheLock(t *testing.T) {
	l, a := pgLedger(t)
	ctx := context.Background()
	other, err := Open(l.dialect.loc) // another host
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	func() {
		defer func() {
			if r := recover(); r == nil {
				t.Fatal("no panic")
			}
		}()
		_ = l.write(ctx, func(t *wtx) error {
			if _, err := getAction(t, a.Key); err != nil { // BEGIN and the lock go with it
				return err
			}
			panic("a bug inside a decision")
		})
	}()
	var open int
	if err := other.r.QueryRowContext(ctx, `SELECT count(*) FROM pg_stat_activity
		WHERE datname = current_database() AND state LIKE 'idle in transaction%'`).Scan(&open); err != nil {
		t.Fatal(err)
	}
	if open != 0 {
		t.Errorf("%d sessions idle in a transaction after the panic, want 0", open)
	}
	// Another host decides at once.
	cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if _, err := other.Submit(cctx, a.Key, "wf"); err != nil {
		t.Fatalf("another host's decision after the panic: %v", err)
	}
}

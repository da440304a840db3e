package ledger

import (
	"context"
	"database/sql"
	"net"
	"sync/atomic"
	"testing"
	"time"
)

// listeners counts the sessions LISTENing on the ledger's database.
func listeners(t *testing.T, db *sql.DB) int {
	t.Helper()
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM pg_stat_activity
		WHERE datname = current_database() AND query = 'LISTEN ` + changesChannel + `'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// waitListeners waits until n sessions listen, for a while.
func waitListeners(t *testing.T, db *sql.DB, n int) int {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		got := listeners(t, db)
		if got == n || time.Now().After(deadline) {
			return got
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestPostgresCloseEndsTheListener: Close ends the listening connection,
// also for a follower that waits on the closed ledger again (a review
// screen whose next wait races the Close): no connection stays on the
// server for a ledger nobody holds.
func TestPostgresCloseEndsTheListener(t *testing.T) {
	l, _ := pgLedger(t)
	db, err := sql.Open("pgx", l.dialect.loc)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1) // the one session the counts leave out
	ctx := context.Background()
	if err := l.WaitForChange(ctx, time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if n := waitListeners(t, db, 1); n != 1 {
		t.Fatalf("%d listening sessions, want 1", n)
	}
	l.Close()
	if n := waitListeners(t, db, 0); n != 0 {
		t.Fatalf("%d listening sessions after Close, want 0", n)
	}
	// Nor any other session of the closed ledger's.
	var others int
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if err := db.QueryRow(`SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND pid <> pg_backend_pid()`).Scan(&others); err != nil {
			t.Fatal(err)
		}
		if others == 0 || time.Now().After(deadline) {
			break
		}
	}
	if others != 0 {
		t.Fatalf("%d sessions left on the server after Close, want 0", others)
	}
	// A wait on the closed ledger returns, and listens to nothing.
	if err := l.WaitForChange(ctx, 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	if n := listeners(t, db); n != 0 {
		t.Fatalf("%d listening sessions after a wait on the closed ledger, want 0", n)
	}
	// Nor does a ledger closed before it ever listened start listening.
	never, err := Open(l.dialect.loc)
	if err != nil {
		t.Fatal(err)
	}
	never.Close()
	if err := never.WaitForChange(ctx, 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	if n := listeners(t, db); n != 0 {
		t.Fatalf("%d listening sessions after a first wait on a closed ledger, want 0", n)
	}
}

// TestPostgresListenerBacksOffWhileTheServerIsDown: while the server
// cannot be reached, the listener tries again less and less often, not in
// a storm.
func TestPostgresListenerBacksOffWhileTheServerIsDown(t *testing.T) {
	pgLedger(t) // the PostgreSQL run only
	down, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer down.Close()
	var tries atomic.Int64
	go func() {
		for {
			c, err := down.Accept()
			if err != nil {
				return
			}
			tries.Add(1)
			c.Close() // a server that is going away
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	ln := &listener{wake: make(chan struct{}), cancel: cancel}
	done := make(chan struct{})
	go func() {
		defer close(done)
		ln.run(ctx, "postgres://u@"+down.Addr().String()+"/db?sslmode=disable&connect_timeout=1")
	}()
	time.Sleep(3 * time.Second)
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the listener did not stop when its context ended")
	}
	// 250ms, 500ms, 1s, 2s: about 4 tries in 3 seconds.
	if n := tries.Load(); n < 2 || n > 8 {
		t.Fatalf("%d connection attempts in 3s, want a backing-off handful", n)
	}
}

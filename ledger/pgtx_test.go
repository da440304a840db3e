package ledger

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"gatehouse/internal/pgtest"
)

// pgLedger is a new PostgreSQL ledger with one claimed task and one draft,
// in the conformance run (GATEHOUSE_TEST_STORE=postgres) only.
func pgLedger(t *testing.T) (*Ledger, Action) {
	t.Helper()
	if os.Getenv("GATEHOUSE_TEST_STORE") != "postgres" {
		t.Skip("a test of the PostgreSQL store; it runs with GATEHOUSE_TEST_STORE=postgres")
	}
	l, err := Open(pgtest.Database(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	ctx := context.Background()
	if _, err := l.Claim(ctx, TaskRef{ID: "T-1"}, "wf"); err != nil {
		t.Fatal(err)
	}
	a, err := l.Propose(ctx, Proposal{Task: TaskRef{ID: "T-1"}, Customer: "c1", Event: "e1", ActionType: "reply",
		Target: "T-1", Recipient: "a@example.org", Subject: "Hi", Body: "Body", Actor: "wf", Destination: "smtp://d"})
	if err != nil {
		t.Fatal(err)
	}
	return l, a
}

// TestPostgresQueuedCompareAndSwapFails: a state change that waits for
// COMMIT still fails the transaction when the action's version moved, with
// SQLite's error, and nothing of the transaction (its history line) stays.
func TestPostgresQueuedCompareAndSwapFails(t *testing.T) {
	l, a := pgLedger(t)
	ctx := context.Background()
	events := func() int {
		var n int
		if err := l.r.QueryRow(`SELECT count(*) FROM events`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := events()
	err := l.write(ctx, func(t *wtx) error {
		stale := a
		stale.Version-- // another decision moved it since
		if err := t.transition(&stale, StateAwaitingApproval, "submitted", ""); err != nil {
			return err
		}
		return t.event("wf", a.TaskID, a.Key, EvSubmitted, "", "submitted")
	})
	var lost *casError
	if !errors.As(err, &lost) || !strings.Contains(err.Error(), "action changed concurrently") {
		t.Fatalf("write: %v, want the action changed concurrently", err)
	}
	if got, _ := l.Action(ctx, a.Key); got.State != StateDrafting || got.Version != a.Version {
		t.Fatalf("action %s v%d, want drafting v%d", got.State, got.Version, a.Version)
	}
	if n := events(); n != before {
		t.Fatalf("%d history lines after the failed transaction, want %d", n, before)
	}
	// The ledger decides on as before.
	if _, err := l.Submit(ctx, a.Key, "wf"); err != nil {
		t.Fatal(err)
	}
}

// TestPostgresQueuedWriteFailureFailsTheTransaction: a write that waited
// for COMMIT and failed fails the transaction, named by what it was for,
// and rolls back what came before it.
func TestPostgresQueuedWriteFailureFailsTheTransaction(t *testing.T) {
	l, a := pgLedger(t)
	ctx := context.Background()
	err := l.write(ctx, func(t *wtx) error {
		if err := t.transition(&a, StateAwaitingApproval, "submitted", ""); err != nil {
			return err
		}
		return t.later("record the impossible", `INSERT INTO counters (kind, n) VALUES (NULL, ?)`, 1)
	})
	if !errors.Is(err, ErrNotRecorded) || !strings.Contains(err.Error(), "record the impossible") {
		t.Fatalf("write: %v, want ErrNotRecorded naming the write", err)
	}
	if got, _ := l.Action(ctx, a.Key); got.State != StateDrafting {
		t.Fatalf("action %s, want drafting (rolled back)", got.State)
	}
	// A read after a failed queued write reports that failure, also when
	// the server cannot even prepare the write.
	err = l.write(ctx, func(t *wtx) error {
		if err := t.later("record the impossible", `INSERT INTO no_such_table VALUES (?)`, 1); err != nil {
			return err
		}
		_, err := getAction(t, a.Key)
		return err
	})
	if !errors.Is(err, ErrNotRecorded) || !strings.Contains(err.Error(), "record the impossible") {
		t.Fatalf("write: %v, want ErrNotRecorded naming the write", err)
	}
	if _, err := l.Submit(ctx, a.Key, "wf"); err != nil {
		t.Fatal(err)
	}
}

// TestPostgresRelaxedCommitsDoNotWaitForTheFlush: a relaxed transaction
// commits with synchronous_commit off, as SQLite's with synchronous=NORMAL;
// a durable one (an attempt's intent) waits for its flush.
func TestPostgresRelaxedCommitsDoNotWaitForTheFlush(t *testing.T) {
	l, _ := pgLedger(t)
	ctx := context.Background()
	for _, c := range []struct {
		durable bool
		want    string
	}{{false, "off"}, {true, "on"}} {
		var got string
		if err := l.writeWith(ctx, c.durable, func(t *wtx) error {
			return t.QueryRow(`SHOW synchronous_commit`).Scan(&got)
		}); err != nil {
			t.Fatal(err)
		}
		if got != c.want {
			t.Errorf("durable=%v: synchronous_commit %s, want %s", c.durable, got, c.want)
		}
	}
	// Outside a transaction the session keeps the server's setting.
	var got string
	if err := l.r.QueryRow(`SHOW synchronous_commit`).Scan(&got); err != nil || got != "on" {
		t.Errorf("pool: synchronous_commit %s (%v), want on", got, err)
	}
}

// TestAheadKeyNamesEachArgumentList: two reads share an answer only when
// their statements and arguments are the same.
func TestAheadKeyNamesEachArgumentList(t *testing.T) {
	lists := [][]any{nil, {""}, {"ab", "c"}, {"a", "bc"}, {"1"}, {1}, {"a;"}, {"a", ""}, {true}, {"true"}, {[]byte("x")}}
	seen := map[string]int{}
	for i, args := range lists {
		k := aheadKey("SELECT 1", args)
		if j, ok := seen[k]; ok {
			t.Errorf("arguments %#v and %#v share the key %q", lists[j], args, k)
		}
		seen[k] = i
		if k != aheadKey("SELECT 1", args) {
			t.Errorf("arguments %#v: the key changes", args)
		}
		if k == aheadKey("SELECT 2", args) {
			t.Errorf("arguments %#v: two statements share a key", args)
		}
	}
}

package ledger

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestPostgresCancelDuringCommitTellsTheTruth: a caller whose context ends
// while COMMIT is on its way (an operator's Ctrl-C) must not be told
// "not recorded" for a transaction the server committed. A deferred
// constraint trigger makes COMMIT take long enough to be interrupted, and
// lets it finish (as a cancel request that arrives after the commit point
// would).
func TestPostgresCancelDuringCommitTellsTheTruth(t *testing.T) {
	l, a := pgLedger(t)
	ctx := context.Background()
	if _, err := l.w.ExecContext(ctx, `
		CREATE FUNCTION slow_commit() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			BEGIN PERFORM pg_sleep(1);
			EXCEPTION WHEN query_canceled THEN PERFORM pg_sleep(0.2); -- the cancel came too late
			END;
			RETURN NULL;
		END $$;
		CREATE CONSTRAINT TRIGGER slow_commit AFTER INSERT ON events
		DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION slow_commit()`); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	_, err := l.Submit(cctx, a.Key, "wf")
	if _, derr := l.w.ExecContext(ctx, `DROP TRIGGER slow_commit ON events`); derr != nil {
		t.Fatal(derr)
	}
	got, gerr := l.Action(ctx, a.Key)
	if gerr != nil {
		t.Fatal(gerr)
	}
	submitted := got.State == StateAwaitingApproval
	t.Logf("Submit: %v; action %s", err, got.State)
	switch {
	case err == nil && !submitted:
		t.Fatalf("Submit succeeded but the action is %s", got.State)
	case err != nil && submitted:
		t.Fatalf("Submit: %v (not recorded: %v), but the server committed it: the action is %s",
			err, errors.Is(err, ErrNotRecorded), got.State)
	}
	// The ledger decides on.
	if err != nil {
		if _, err := l.Submit(ctx, a.Key, "wf"); err != nil {
			t.Fatal(err)
		}
	}
}

package ledger

import (
	"context"
	"testing"
)

// TestPostgresRetriedDecisionStartsClean: a decision the server fails
// with a serialization failure or a deadlock (40001, 40P01) is run again
// from the start, and the run that commits carries nothing of the failed
// one: no history line twice, no queued write or read sent ahead from
// before, counters and kept counts right. A trigger fails the first
// history line each of two decisions writes (a queued write whose failure
// surfaces at the next statement, and at COMMIT).
func TestPostgresRetriedDecisionStartsClean(t *testing.T) {
	for _, code := range []string{"40001", "40P01"} {
		t.Run(code, func(t *testing.T) {
			l, a := pgLedger(t)
			ctx := context.Background()
			if _, err := l.w.ExecContext(ctx, `
				CREATE SEQUENCE fail_once;
				CREATE FUNCTION fail_once() RETURNS trigger LANGUAGE plpgsql AS $$
				BEGIN
					IF nextval('fail_once') IN (1, 3) THEN
						RAISE EXCEPTION 'made to fail once' USING ERRCODE = '`+code+`';
					END IF;
					RETURN NULL;
				END $$;
				CREATE TRIGGER fail_once AFTER INSERT ON events FOR EACH ROW EXECUTE FUNCTION fail_once()`); err != nil {
				t.Fatal(err)
			}
			if _, err := l.Submit(ctx, a.Key, "wf"); err != nil {
				t.Fatalf("submit: %v", err)
			}
			if _, err := l.Approve(ctx, a.Key, "lead", []MaterialRead{{Source: "crm", Field: "consent", Value: "yes"}}); err != nil {
				t.Fatalf("approve: %v", err)
			}
			var tries int64
			if err := l.r.QueryRowContext(ctx, `SELECT last_value FROM fail_once`).Scan(&tries); err != nil || tries < 4 {
				t.Fatalf("the trigger ran %d times (%v): the failures were not met", tries, err)
			}
			got, err := l.Action(ctx, a.Key)
			if err != nil || got.State != StateApproved {
				t.Fatalf("action %s (%v), want approved", got.State, err)
			}
			lines := map[string]int{}
			rows, err := l.r.QueryContext(ctx, `SELECT kind, count(*) FROM events WHERE action_key = $1 GROUP BY kind`, a.Key)
			if err != nil {
				t.Fatal(err)
			}
			for rows.Next() {
				var k string
				var n int
				if err := rows.Scan(&k, &n); err != nil {
					t.Fatal(err)
				}
				lines[k] = n
			}
			rows.Close()
			if lines[string(EvSubmitted)] != 1 || lines[string(EvApproved)] != 1 {
				t.Fatalf("history lines by kind %v, want one submitted and one approved", lines)
			}
			vs, err := l.Check(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, v := range vs {
				t.Errorf("check: %v", v)
			}
		})
	}
}

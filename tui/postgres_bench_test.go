package tui

import (
	"context"
	"database/sql"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib"

	"gatehouse/internal/pgtest"
	"gatehouse/ledger"
)

// BenchmarkPostgresInspectorFrame is BenchmarkInspectorFrame on a
// PostgreSQL ledger of 100,000 actions: the change check, the reload of the
// visible page and the render, each query a round trip to the server.
func BenchmarkPostgresInspectorFrame(b *testing.B) {
	loc := pgtest.Database(b)
	l, err := ledger.Open(loc, ledger.WithoutRecovery()) // creates the schema
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	if err := fillPostgres(loc, bigActions); err != nil {
		b.Fatal(err)
	}
	benchInspectorFrames(b, l)
}

// fillPostgres writes what fillLedger writes (the same tasks, keys, states
// and history lines) on the server in three statements (a row at a time
// over the network would take minutes), then vacuums.
func fillPostgres(loc string, n int) error {
	db, err := sql.Open("pgx", loc)
	if err != nil {
		return err
	}
	defer db.Close()
	ctx := context.Background()
	start := epoch.UnixNano()
	for _, st := range []struct {
		q    string
		args []any
	}{
		{`INSERT INTO tasks (id, customer, subject, owner, created_at, updated_at)
			SELECT 'T-' || lpad(i::text, 4, '0'), 'cust-' || lpad(i::text, 4, '0'), 'Where is my order?', 'ack-workflow', $1::bigint, $1::bigint + i
			FROM generate_series(0, 999) AS i`, []any{start}},
		// The state of action i is benchState(i).
		{`INSERT INTO actions (key, task_id, customer, event, action_type, target, revision,
			recipient, subject, body, digest, state, reason, hold_cause, proposed_by, created_at, updated_at)
			SELECT 'gh1:' || c || ':enquiry-' || i || ':reply_ack:' || t || ':r0', t, c, 'enquiry-' || i, 'reply_ack', t, 0,
				c || '@example.test', 'We have your enquiry', 'Hello', 'sha256:00', st, 'seeded ' || st,
				CASE WHEN st = 'held' THEN 'operator' ELSE '' END, 'ack-workflow', $1::bigint + i::bigint * 1000000, $1::bigint + i::bigint * 1000000
			FROM (SELECT i, 'T-' || lpad((i % 1000)::text, 4, '0') AS t, 'cust-' || lpad((i % 1000)::text, 4, '0') AS c,
				CASE i % 100 WHEN 0 THEN 'held' WHEN 1 THEN 'unknown' WHEN 2 THEN 'awaiting_approval' WHEN 3 THEN 'awaiting_approval'
					WHEN 4 THEN 'awaiting_approval' WHEN 5 THEN 'approved' WHEN 6 THEN 'approved' WHEN 7 THEN 'denied'
					WHEN 8 THEN 'failed' ELSE 'sent' END AS st
				FROM generate_series(0, $2 - 1) AS i) AS a`, []any{start, n}},
		{`INSERT INTO events (at, actor, task_id, action_key, kind, message)
			SELECT created_at, 'ack-workflow', task_id, key, 'proposed', 'ack-workflow proposed reply_ack' FROM actions ORDER BY created_at`, nil},
		// A long-running ledger's autovacuum has marked the settled rows
		// visible to all (which lets an index answer a count or an offset
		// without reading the table) and gathered statistics; a bulk load
		// measured at once has neither, and autovacuum would start on it at
		// a random moment of the benchmark.
		{`VACUUM ANALYZE`, nil},
	} {
		if _, err := db.ExecContext(ctx, st.q, st.args...); err != nil {
			return err
		}
	}
	return nil
}

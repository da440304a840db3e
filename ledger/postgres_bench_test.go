package ledger_test

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"testing"

	"gatehouse/destination/fake"
	"gatehouse/internal/pgtest"
	"gatehouse/ledger"
)

// BenchmarkPostgresRawInsertCommit is the yardstick on PostgreSQL: one
// INSERT per transaction on the same server the gate benchmark uses.
func BenchmarkPostgresRawInsertCommit(b *testing.B) {
	db, err := sql.Open("pgx", benchDatabase(b))
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`CREATE TABLE t (id BIGSERIAL PRIMARY KEY, k TEXT UNIQUE, v TEXT)`); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		tx, err := db.Begin()
		if err != nil {
			b.Fatal(err)
		}
		if _, err := tx.Exec(`INSERT INTO t (k, v) VALUES ($1, $2)`, fmt.Sprint("k", i), "value"); err != nil {
			b.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tx/s")
}

// BenchmarkPostgresGateDecision is BenchmarkGateDecision on PostgreSQL,
// with 1, 2 and 4 executors (each its own ledger handle and connection
// pool, as separate processes would have) deciding different actions at
// once. On 2 cores, and with every decision serialised by the ledger's
// advisory lock, this shows contention, not scaling.
func BenchmarkPostgresGateDecision(b *testing.B) {
	for _, n := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("executors=%d", n), func(b *testing.B) {
			loc := benchDatabase(b)
			ctx := context.Background()
			var ls []*ledger.Ledger
			for range n {
				l, err := ledger.Open(loc)
				if err != nil {
					b.Fatal(err)
				}
				defer l.Close()
				ls = append(ls, l)
			}
			dest := fake.New()
			if _, err := ls[0].Claim(ctx, ledger.TaskRef{ID: "task-1"}, "wf"); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			var wg sync.WaitGroup
			for e := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := e; i < b.N; i += n {
						decide(b, ctx, ls[e], dest, fmt.Sprint("evt-", i))
					}
				}()
			}
			wg.Wait()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
		})
	}
}

var (
	durableOnce    sync.Once
	durableCluster *pgtest.Cluster
)

// benchDatabase is a new database on a cluster that flushes its commits
// (fsync on), as production runs, shared by the PostgreSQL benchmarks so
// that the raw loop and the gate meet the same server.
func benchDatabase(b *testing.B) string {
	durableOnce.Do(func() { durableCluster = pgtest.StartClusterForProcess(b, pgtest.Options{Durable: true}) })
	return durableCluster.CreateDatabase(b, "127.0.0.1")
}

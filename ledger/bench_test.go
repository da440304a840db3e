package ledger_test

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"gatehouse/fakes"
	"gatehouse/ledger"
)

// BenchmarkRawInsertCommit is the yardstick for the gate: one INSERT per
// BEGIN IMMEDIATE transaction on a file with the ledger's settings (WAL,
// synchronous=FULL, the ledger's page size and checkpoint interval).
func BenchmarkRawInsertCommit(b *testing.B) {
	q := url.Values{"_busy_timeout": {"10000"}, "_journal_mode": {"WAL"}, "_synchronous": {"FULL"}, "_txlock": {"immediate"}}
	// The ledger's own driver, so page size and checkpointing match too.
	db, err := sql.Open("sqlite3_gatehouse", "file:"+filepath.Join(b.TempDir(), "raw.db")+"?"+q.Encode())
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(`CREATE TABLE t (id INTEGER PRIMARY KEY, k TEXT UNIQUE, v TEXT)`); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		tx, err := db.Begin()
		if err != nil {
			b.Fatal(err)
		}
		if _, err := tx.Exec(`INSERT INTO t (k, v) VALUES (?, ?)`, fmt.Sprint("k", i), "value"); err != nil {
			b.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tx/s")
}

// BenchmarkGateDecision is one whole decision: propose, approve and execute
// (attempt recorded, in-process destination, outcome recorded).
func BenchmarkGateDecision(b *testing.B) {
	l, err := ledger.Open(filepath.Join(b.TempDir(), "gate.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()
	dest := fakes.NewDestination()
	if _, err := l.Claim(ctx, ledger.TaskRef{ID: "task-1"}, "wf"); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		decide(b, ctx, l, dest, fmt.Sprint("evt-", i))
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
}

func decide(b *testing.B, ctx context.Context, l *ledger.Ledger, dest ledger.Destination, event string) {
	p := ledger.Proposal{Task: ledger.TaskRef{ID: "task-1"}, Customer: "c1", Event: event, ActionType: "reply",
		Target: "task-1", Recipient: "a@example.org", Subject: "Hello", Body: benchBody, Actor: "wf"}
	a, err := l.Propose(ctx, p)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := l.Approve(ctx, a.Key, "lead", consentYes); err != nil {
		b.Fatal(err)
	}
	if _, err := l.Execute(ctx, ledger.ExecuteRequest{Key: a.Key, Executor: "wf", Reread: consentYes}, dest); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkContendedExecute: g goroutines race to execute each approved
// action; exactly one send per action must happen.
func BenchmarkContendedExecute(b *testing.B) {
	for _, g := range []int{8, 64} {
		b.Run(fmt.Sprintf("goroutines=%d", g), func(b *testing.B) {
			l, err := ledger.Open(filepath.Join(b.TempDir(), "gate.db"))
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			ctx := context.Background()
			dest := fakes.NewDestination()
			l.Claim(ctx, ledger.TaskRef{ID: "task-1"}, "wf")
			var sent atomic.Int64
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				p := ledger.Proposal{Task: ledger.TaskRef{ID: "task-1"}, Customer: "c1", Event: fmt.Sprint("evt-", i), ActionType: "reply",
					Target: "task-1", Recipient: "a@example.org", Subject: "Hello", Body: "Body", Actor: "wf"}
				a, _ := l.Propose(ctx, p)
				l.Approve(ctx, a.Key, "lead", consentYes)
				b.StartTimer()
				var wg sync.WaitGroup
				for j := 0; j < g; j++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						if _, err := l.Execute(ctx, ledger.ExecuteRequest{Key: a.Key, Executor: "wf", Reread: consentYes}, dest); err == nil {
							sent.Add(1)
						}
					}()
				}
				wg.Wait()
			}
			if int(sent.Load()) != b.N || dest.Calls() != b.N {
				b.Fatalf("sent %d, calls %d, want %d", sent.Load(), dest.Calls(), b.N)
			}
		})
	}
}

// benchBody is the size of a short customer email (about 1.5 KB).
var benchBody = strings.Repeat("Thank you for your message about your order. ", 33)

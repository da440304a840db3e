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
	"time"

	"gatehouse/destination"
	"gatehouse/destination/fake"
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
	l, ctx, dest := benchLedger(b)
	if _, err := l.Claim(ctx, ledger.TaskRef{ID: "task-1"}, "wf"); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		decide(b, ctx, l, dest, fmt.Sprint("evt-", i))
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
}

func decide(b testing.TB, ctx context.Context, l *ledger.Ledger, dest destination.Destination, event string) {
	p := ledger.Proposal{Task: ledger.TaskRef{ID: "task-1"}, Customer: "c1", Event: event, ActionType: "reply",
		Target: "task-1", Recipient: "a@example.org", Subject: "Hello", Body: benchBody, Actor: "wf", Destination: dest.Identity()}
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
			l, ctx, dest := benchLedger(b)
			l.Claim(ctx, ledger.TaskRef{ID: "task-1"}, "wf")
			var sent atomic.Int64
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				p := ledger.Proposal{Task: ledger.TaskRef{ID: "task-1"}, Customer: "c1", Event: fmt.Sprint("evt-", i), ActionType: "reply",
					Target: "task-1", Recipient: "a@example.org", Subject: "Hello", Body: "Body", Actor: "wf", Destination: dest.Identity()}
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

// searchActions is how many actions BenchmarkSearch searches.
const searchActions = 100_000

// fillSearchLedger writes n actions straight into a new ledger's schema
// (proposing each through the gate would take minutes): 5,000 customers,
// one of them Ben, each action with a 1.5 KB body as real replies have, so
// a scan meets the row sizes a live ledger has.
func fillSearchLedger(b *testing.B, n int) string {
	b.Helper()
	path := filepath.Join(b.TempDir(), "search.db")
	l, err := ledger.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	l.Close()
	db, err := sql.Open("sqlite3_gatehouse", "file:"+path+"?_journal_mode=WAL")
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	tx, err := db.Begin()
	if err != nil {
		b.Fatal(err)
	}
	defer tx.Rollback()
	body := strings.Repeat("Thank you for your enquiry. ", 55)
	for i := range 1000 {
		if _, err := tx.Exec(`INSERT INTO tasks (id, customer, subject, owner, created_at, updated_at)
			VALUES (?, ?, 'Where is my order?', 'ack-workflow', ?, ?)`, fmt.Sprintf("T-%04d", i), fmt.Sprintf("cust-%04d", i), i, i); err != nil {
			b.Fatal(err)
		}
	}
	ins, err := tx.Prepare(`INSERT INTO actions (key, task_id, customer, event, action_type, target, revision,
		recipient, subject, body, digest, state, proposed_by, created_at, updated_at)
		VALUES (?, ?, ?, ?, 'reply_ack', ?, 0, ?, ?, ?, 'sha256:00', 'sent', 'ack-workflow', ?, ?)`)
	if err != nil {
		b.Fatal(err)
	}
	for i := range n {
		cust, to := fmt.Sprintf("cust-%04d", i%5000), fmt.Sprintf("c%04d@example.test", i%5000)
		if i%5000 == 4242 {
			cust, to = "cust-ben", "Ben@Example.com"
		}
		task, event := fmt.Sprintf("T-%04d", i%1000), fmt.Sprintf("enquiry-%d", i)
		if _, err := ins.Exec(ledger.Key(cust, event, "reply_ack", task, 0), task, cust, event, task, to,
			fmt.Sprintf("Your enquiry %d", i), body, i, i); err != nil {
			b.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		b.Fatal(err)
	}
	if _, err := db.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		b.Fatal(err)
	}
	return path
}

// BenchmarkSearch is one page of `gate list --search` (and of the
// inspector's /) over 100,000 actions: the count of every match and the
// newest 20. The target is under 100 ms. No index can seek to a substring,
// so a search reads every action; Index/ reads the schema's actions_search
// index (four short columns), Table/ the same searches with that index
// dropped, reading the rows whose bodies spill to overflow pages: what the
// index buys (see docs/BENCHMARKS.md).
func BenchmarkSearch(b *testing.B) {
	path := fillSearchLedger(b, searchActions)
	b.Run("Index", func(b *testing.B) { benchSearches(b, path) })
	db, err := sql.Open("sqlite3_gatehouse", "file:"+path)
	if err != nil {
		b.Fatal(err)
	}
	_, err = db.Exec(`DROP INDEX actions_search`)
	db.Close()
	if err != nil {
		b.Fatal(err)
	}
	b.Run("Table", func(b *testing.B) { benchSearches(b, path) })
}

func benchSearches(b *testing.B, path string) {
	l, err := ledger.Open(path, ledger.WithoutRecovery())
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()
	for _, bc := range []struct {
		name, search string
		want         int
	}{
		{"Recipient", "ben@", searchActions / 5000},
		{"Event", "enquiry-77777", 1},
		{"Customer", "CUST-00", searchActions / 50},
		{"Nothing", "no such text", 0},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				total, page, err := l.ListActions(ctx, ledger.ActionFilter{Search: bc.search, Limit: 20})
				if err != nil {
					b.Fatal(err)
				}
				if total != bc.want || len(page) != min(bc.want, 20) {
					b.Fatalf("search %q: %d matches (%d on the page), want %d", bc.search, total, len(page), bc.want)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/search")
		})
	}
}

// BenchmarkAudienceSend is the gate's own share of an audience send: a
// release of 1,000 opted-in recipients sent at the default concurrency to
// an in-memory destination, so the time is the ledger's (proposals,
// consent reads, intents, outcomes), not a network's. cpu-µs/recipient is
// the process's CPU time per recipient, steadier than the rate on a
// shared machine.
func BenchmarkAudienceSend(b *testing.B) {
	const n = 1000
	l, ctx, dest := benchLedger(b)
	dir, ids := optedIn(n)
	var cpu, sys time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		release := fmt.Sprintf("spring-%d", i)
		if _, err := l.ImportAudience(ctx, ledger.AudienceImport{ReleaseID: release, SourceName: release + ".csv",
			Source: strings.NewReader(ids), ActionType: "notice", Subject: "Opening hours change",
			Body: "Our opening hours change on 1 April.", Actor: "ops"}, dir); err != nil {
			b.Fatal(err)
		}
		if err := l.ApproveAudience(ctx, release, "lead", dest.Identity(), ""); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		c0, s0 := cpuNow(), sysNow()
		s, err := l.SendAudience(ctx, ledger.AudienceSend{ReleaseID: release, Actor: "notice-bot", Concurrency: ledger.DefaultConcurrency}, dest, dir)
		cpu, sys = cpu+cpuNow()-c0, sys+sysNow()-s0
		if err != nil || s.Confirmed != n {
			b.Fatalf("confirmed %d of %d: %v", s.Confirmed, n, err)
		}
	}
	b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "recipients/s")
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N*n), "cpu-µs/recipient")
	b.ReportMetric(float64(sys.Microseconds())/float64(b.N*n), "sys-µs/recipient")
}

// benchLedger is a new ledger file for one benchmark, closed when it ends,
// and an in-process destination.
func benchLedger(b *testing.B) (*ledger.Ledger, context.Context, *fake.Destination) {
	b.Helper()
	l, err := ledger.Open(filepath.Join(b.TempDir(), "gate.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })
	return l, context.Background(), fake.New()
}

package tui

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	_ "github.com/mattn/go-sqlite3" // the fast path writes rows straight into the ledger's schema

	"gatehouse/internal/pgtest"
	"gatehouse/ledger"
)

const bigActions = 100_000

var big struct {
	once sync.Once
	dir  string
	path string
	err  error
}

func TestMain(m *testing.M) {
	code := pgtest.Main(m) // stops a PostgreSQL cluster a benchmark started
	if big.dir != "" {
		os.RemoveAll(big.dir)
	}
	if reviewBig.dir != "" {
		os.RemoveAll(reviewBig.dir)
	}
	os.Exit(code)
}

// bigLedger builds, once per test process, a ledger of 100,000 actions on
// 1,000 tasks. Proposing them one by one through the gate would take
// minutes (one durable transaction each), so the rows go straight into the
// ledger's own schema in a single transaction.
func bigLedger(b *testing.B) string {
	big.once.Do(func() {
		if big.dir, big.err = os.MkdirTemp("", "gatehouse-bench-"); big.err != nil {
			return
		}
		big.path = filepath.Join(big.dir, "big.db")
		big.err = fillLedger(big.path, bigActions)
	})
	if big.err != nil {
		b.Fatal(big.err)
	}
	return big.path
}

func fillLedger(path string, n int) error {
	l, err := ledger.Open(path) // creates the schema
	if err != nil {
		return err
	}
	l.Close()
	db, err := sql.Open("sqlite3", path)
	if err != nil {
		return err
	}
	defer db.Close()
	tx, err := db.Begin()
	if err != nil {
		return err
	}
	defer tx.Rollback()
	start := epoch.UnixNano()
	for i := range 1000 {
		if _, err := tx.Exec(`INSERT INTO tasks (id, customer, subject, owner, created_at, updated_at)
			VALUES (?, ?, 'Where is my order?', 'ack-workflow', ?, ?)`,
			fmt.Sprintf("T-%04d", i), fmt.Sprintf("cust-%04d", i), start, start+int64(i)); err != nil {
			return err
		}
	}
	if err := insertActions(tx, n, start); err != nil {
		return err
	}
	// Fold the bulk insert into the main file, as a long-running ledger's
	// checkpoints would have; reading through a 100,000-row WAL is not
	// what an inspector meets.
	_, err = db.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`)
	return err
}

func insertActions(tx *sql.Tx, n int, start int64) error {
	act, err := tx.Prepare(`INSERT INTO actions (key, task_id, customer, event, action_type, target, revision,
		recipient, subject, body, digest, state, reason, hold_cause, proposed_by, created_at, updated_at)
		VALUES (?, ?, ?, ?, 'reply_ack', ?, 0, ?, 'We have your enquiry', 'Hello', 'sha256:00', ?, ?, ?, 'ack-workflow', ?, ?)`)
	if err != nil {
		return err
	}
	ev, err := tx.Prepare(`INSERT INTO events (at, actor, task_id, action_key, kind, message) VALUES (?, 'ack-workflow', ?, ?, 'proposed', ?)`)
	if err != nil {
		return err
	}
	for i := range n {
		task, cust := fmt.Sprintf("T-%04d", i%1000), fmt.Sprintf("cust-%04d", i%1000)
		k := ledger.Key(cust, fmt.Sprintf("enquiry-%d", i), "reply_ack", task, 0)
		st := benchState(i)
		cause := ""
		if st == ledger.StateHeld {
			cause = string(ledger.HoldOperator)
		}
		at := start + int64(i)*1e6
		if _, err := act.Exec(k, task, cust, fmt.Sprintf("enquiry-%d", i), task, cust+"@example.test",
			string(st), "seeded "+string(st), cause, at, at); err != nil {
			return err
		}
		if _, err := ev.Exec(at, task, k, "ack-workflow proposed reply_ack"); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// benchState spreads actions over states as a live ledger does: most are
// sent, a few wait for approval, a percent or two are held or unknown.
func benchState(i int) ledger.State {
	switch i % 100 {
	case 0:
		return ledger.StateHeld
	case 1:
		return ledger.StateUnknown
	case 2, 3, 4:
		return ledger.StateAwaitingApproval
	case 5, 6:
		return ledger.StateApproved
	case 7:
		return ledger.StateDenied
	case 8:
		return ledger.StateFailed
	}
	return ledger.StateSent
}

// BenchmarkInspectorFrame measures one live frame over 100,000 actions: the
// change check, the reload of the visible page and rendering the screen.
func BenchmarkInspectorFrame(b *testing.B) {
	l, err := ledger.Open(bigLedger(b), ledger.WithoutRecovery())
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	benchInspectorFrames(b, l)
}

// benchInspectorFrames runs the frames of BenchmarkInspectorFrame on a
// ledger of bigActions actions in either store.
func benchInspectorFrames(b *testing.B, l *ledger.Ledger) {
	for _, bc := range inspectorFrames {
		b.Run(bc.name, func(b *testing.B) {
			in := newTestInspector(l)
			a := newDriven(in, 120, 40)
			typeKeys(a, bc.keys...)
			benchFrames(b, a, in)
		})
	}
}

// inspectorFrames are the screens an operator pages through.
var inspectorFrames = []struct {
	name string
	keys []string
}{
	{"Actions", []string{"tab"}},
	{"ActionsLastPage", []string{"tab", "G"}},
	{"ActionsByState", []string{"tab", "s", "s", "s"}},
	{"ActionsMiddlePage", append([]string{"tab"}, repeat("pgdown", 1400)...)},
	{"SentMiddlePage", append([]string{"tab", "s", "s", "s", "s", "s"}, repeat("pgdown", 1300)...)},
	{"ActionsSearch", []string{"tab", "/", "c", "u", "s", "t", "-", "0", "4", "2", "enter"}},
	{"Holds", []string{"tab", "tab"}},
	{"Tasks", nil},
}

// BenchmarkInspectorRender measures drawing alone, which is all a frame
// costs while the ledger does not change.
func BenchmarkInspectorRender(b *testing.B) {
	l, err := ledger.Open(bigLedger(b), ledger.WithoutRecovery())
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	a := newDriven(newTestInspector(l), 120, 40)
	typeKeys(a, "tab")
	b.ReportAllocs()
	for b.Loop() {
		_ = a.Render()
	}
}

func benchFrames(b *testing.B, a *App, in *Inspector) {
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := in.cfg.Ledger.Changes(ctx); err != nil {
			b.Fatal(err)
		}
		msg := in.load()().(ioMsg).run(ctx)
		if m := msg.(loadedMsg); m.err != nil {
			b.Fatal(m.err)
		}
		in.Update(msg)
		_ = a.Render()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/frame")
}

func repeat(k string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = k
	}
	return out
}

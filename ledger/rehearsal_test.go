package ledger_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"gatehouse/fakes"
	"gatehouse/ledger"
)

// TestRehearsalClockOpensOnlyAMarkedLedger: a clock offered as a
// rehearsal's is honoured only on a ledger whose own records mark it as a
// rehearsal's. An unmarked ledger, read or written, is refused before
// anything is written or recovered with that clock; a marked one keeps
// its history on the rehearsal's time, on either store.
func TestRehearsalClockOpensOnlyAMarkedLedger(t *testing.T) {
	ctx := context.Background()
	ahead := fakes.NewClock(t0.Add(2 * time.Hour))

	t.Run("Unmarked", func(t *testing.T) {
		w := newWorld(t)
		_, err := w.l.Propose(w.ctx, ackProposal("wf"))
		w.must(err)
		w.l.Close()
		before := historyLines(t, w.path)
		for name, open := range map[string]func(string, ...ledger.Option) (*ledger.Ledger, error){
			"Open": ledger.Open, "OpenReadOnly": ledger.OpenReadOnly,
		} {
			l, err := open(w.path, ledger.WithRehearsalClock(ahead))
			if !errors.Is(err, ledger.ErrNotRehearsal) {
				if l != nil {
					l.Close()
				}
				t.Fatalf("%s on the rehearsal's clock: %v, want ErrNotRehearsal", name, err)
			}
		}
		if after := historyLines(t, w.path); after != before {
			t.Fatalf("the refused opens recorded %d history line(s)", after-before)
		}
	})

	t.Run("NoLedgerYet", func(t *testing.T) {
		loc := ledgerLocation(t)
		l, err := ledger.Open(loc, ledger.WithRehearsalClock(ahead))
		if !errors.Is(err, ledger.ErrNotRehearsal) {
			if l != nil {
				l.Close()
			}
			t.Fatalf("open a new ledger on the rehearsal's clock: %v, want ErrNotRehearsal", err)
		}
		if onPostgres() {
			return
		}
		if _, err := os.Stat(loc); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("the refused open created %s: %v", loc, err)
		}
	})

	t.Run("MarkedByItsRehearsal", func(t *testing.T) {
		loc := ledgerLocation(t)
		l, err := ledger.Open(loc, ledger.WithClock(fakes.NewClock(t0)))
		if err != nil {
			t.Fatal(err)
		}
		if err := l.MarkRehearsal(ctx, "overlapping-reply"); err != nil {
			t.Fatalf("mark a new ledger: %v", err)
		}
		if err := l.MarkRehearsal(ctx, "another"); err != nil || l.Rehearsal() != "overlapping-reply" {
			t.Fatalf("mark it again: %v, %q; want nothing changed", err, l.Rehearsal())
		}
		l.Close()
		l, err = ledger.Open(loc, ledger.WithRehearsalClock(ahead))
		if err != nil {
			t.Fatalf("open a rehearsal's ledger on its clock: %v", err)
		}
		defer l.Close()
		if l.Rehearsal() != "overlapping-reply" {
			t.Fatalf("Rehearsal() = %q", l.Rehearsal())
		}
		if _, err := l.Propose(ctx, ackProposal("wf")); err != nil {
			t.Fatal(err)
		}
		evs, err := l.History(ctx, ledger.HistoryFilter{})
		if err != nil || len(evs) == 0 {
			t.Fatalf("history: %v, %d lines", err, len(evs))
		}
		if at := evs[len(evs)-1].At; !at.Equal(ahead.Now()) {
			t.Fatalf("recorded at %s, want the rehearsal's %s", at, ahead.Now())
		}
		r, err := ledger.OpenReadOnly(loc, ledger.WithRehearsalClock(ahead))
		if err != nil {
			t.Fatalf("read a rehearsal's ledger on its clock: %v", err)
		}
		defer r.Close()
		if r.Rehearsal() != "overlapping-reply" {
			t.Fatalf("read-only Rehearsal() = %q", r.Rehearsal())
		}
	})
}

// TestMarkRehearsalRefusesALedgerWithHistory: only a ledger that holds
// nothing yet becomes a rehearsal's; one that lived on real time stays
// unmarked, whatever asks.
func TestMarkRehearsalRefusesALedgerWithHistory(t *testing.T) {
	w := newWorld(t)
	if err := w.l.MarkRehearsal(w.ctx, " "); !errors.Is(err, ledger.ErrInvalid) {
		t.Fatalf("mark without a scenario: %v, want ErrInvalid", err)
	}
	_, err := w.l.Claim(w.ctx, ledger.TaskRef{ID: "task-7", Customer: "cust-42"}, "alice")
	w.must(err)
	if err := w.l.MarkRehearsal(w.ctx, "drill"); !errors.Is(err, ledger.ErrHasHistory) {
		t.Fatalf("mark a ledger with history: %v, want ErrHasHistory", err)
	}
	w.l.Close()
	w.open()
	if w.l.Rehearsal() != "" {
		t.Fatalf("the refused mark stayed: %q", w.l.Rehearsal())
	}
}

// historyLines counts a ledger's history lines, read as a reviewer would.
func historyLines(t *testing.T, loc string) int {
	t.Helper()
	l, err := ledger.OpenReadOnly(loc)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	evs, err := l.History(context.Background(), ledger.HistoryFilter{})
	if err != nil {
		t.Fatal(err)
	}
	return len(evs)
}

// TestRehearsalMarkOfAnOlderSchema: a ledger of a schema before the mark
// was never a rehearsal's, and a rehearsal's clock does not migrate it.
func TestRehearsalMarkOfAnOlderSchema(t *testing.T) {
	sqliteOnly(t)
	path := filepath.Join(t.TempDir(), "old.db")
	l, err := ledger.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.MarkRehearsal(context.Background(), "drill"); err != nil {
		t.Fatal(err)
	}
	l.Close()
	db, err := sql.Open("sqlite3", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range []string{`ALTER TABLE ledger_identity DROP COLUMN rehearsal`, `PRAGMA user_version = 17`} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if l, err := ledger.Open(path, ledger.WithRehearsalClock(fakes.NewClock(t0))); !errors.Is(err, ledger.ErrNotRehearsal) {
		if l != nil {
			l.Close()
		}
		t.Fatalf("open a schema-17 ledger on a rehearsal's clock: %v, want ErrNotRehearsal", err)
	}
	var version int
	if err := db.QueryRow(`PRAGMA user_version`).Scan(&version); err != nil || version != 17 {
		t.Fatalf("schema version %d (%v) after the refused open, want 17 (not migrated)", version, err)
	}
}

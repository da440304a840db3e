package ledger

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

// TestSQLiteTxEndsWhole: a write transaction begun by hand ends whole on
// every path and leaves its connection ready for the next one. A COMMIT
// that fails (here a deferred foreign key, which SQLite checks at COMMIT
// and then leaves the transaction open) is rolled back; statements after
// the end, and statements prepared inside, are refused.
func TestSQLiteTxEndsWhole(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "tx.db")
	db, err := sql.Open(driverName, "file:"+path+"?_foreign_keys=1&_busy_timeout=50&_journal_mode=WAL")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`CREATE TABLE parent (id INTEGER PRIMARY KEY);
		CREATE TABLE child (id INTEGER PRIMARY KEY, parent INTEGER REFERENCES parent(id) DEFERRABLE INITIALLY DEFERRED)`); err != nil {
		t.Fatal(err)
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rows := func() (n int) {
		t.Helper()
		if err := db.QueryRow(`SELECT count(*) FROM child`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for _, tc := range []struct {
		name      string
		insert    string
		end       func(*sqliteTx) error
		wantErr   string // "" when the end must succeed
		wantChild int    // rows in child afterwards
	}{
		{"commit keeps", `INSERT INTO parent (id) VALUES (1); INSERT INTO child (id, parent) VALUES (1, 1)`, (*sqliteTx).Commit, "", 1},
		{"rollback discards", `INSERT INTO child (id, parent) VALUES (2, 1)`, (*sqliteTx).Rollback, "", 1},
		{"failed commit is rolled back", `INSERT INTO child (id, parent) VALUES (3, 99)`, (*sqliteTx).Commit, "FOREIGN KEY constraint failed", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x, err := beginSQLite(conn)
			if err != nil {
				t.Fatalf("begin: %v", err)
			}
			st, err := x.Prepare(`SELECT count(*) FROM child`)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := x.Exec(tc.insert); err != nil {
				t.Fatal(err)
			}
			// The write lock is taken at BEGIN: another connection cannot
			// write meanwhile.
			if _, err := db.Exec(`INSERT INTO parent (id) VALUES (1000)`); err == nil || !strings.Contains(err.Error(), "locked") {
				t.Fatalf("a second writer during the transaction: %v, want database is locked", err)
			}
			err = tc.end(x)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("end: %v, want %q", err, tc.wantErr)
			}
			if got := rows(); got != tc.wantChild {
				t.Fatalf("child rows %d, want %d", got, tc.wantChild)
			}
			if _, err := x.Exec(`INSERT INTO parent (id) VALUES (2)`); !errors.Is(err, sql.ErrTxDone) {
				t.Fatalf("Exec after the end: %v, want ErrTxDone", err)
			}
			if err := x.Commit(); !errors.Is(err, sql.ErrTxDone) {
				t.Fatalf("second Commit: %v, want ErrTxDone", err)
			}
			var n int
			if err := st.QueryRow().Scan(&n); err == nil {
				t.Fatal("a statement prepared in the transaction still runs after it ended")
			}
			// The connection is out of the transaction: a new one begins.
			next, err := beginSQLite(conn)
			if err != nil {
				t.Fatalf("begin after %s: %v", tc.name, err)
			}
			if err := next.Rollback(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

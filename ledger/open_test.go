package ledger_test

import (
	"bytes"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	_ "github.com/mattn/go-sqlite3"

	"gatehouse/ledger"
)

func TestOpenRefusesWhatIsNotALedger(t *testing.T) {
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.db")
	os.WriteFile(garbage, []byte("this is not a database, just some text that is long enough"), 0o644)

	foreign := filepath.Join(dir, "foreign.db")
	db, err := sql.Open("sqlite3", foreign)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE customers (id TEXT)`); err != nil {
		t.Fatal(err)
	}
	db.Close()

	newer := filepath.Join(dir, "newer.db")
	l, err := ledger.Open(newer)
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	db, _ = sql.Open("sqlite3", newer)
	if _, err := db.Exec(`PRAGMA user_version = 99`); err != nil {
		t.Fatal(err)
	}
	db.Close()

	tests := []struct {
		Name string
		Path string
		Err  error
		Text string
	}{
		{"NotSQLite", garbage, ledger.ErrNotLedger, "not an SQLite database"},
		{"OtherApplication", foreign, ledger.ErrNotLedger, "another application"},
		{"NewerSchema", newer, ledger.ErrTooNew, "schema version 99"},
	}
	for _, tc := range tests {
		t.Run(tc.Name, func(t *testing.T) {
			before, _ := os.ReadFile(tc.Path)
			_, err := ledger.Open(tc.Path)
			if !errors.Is(err, tc.Err) || !strings.Contains(err.Error(), tc.Text) || !strings.Contains(err.Error(), tc.Path) {
				t.Fatalf("err = %v", err)
			}
			after, _ := os.ReadFile(tc.Path)
			if !bytes.Equal(before, after) {
				t.Fatal("the refused file was modified")
			}
		})
	}
}

func TestReopenKeepsEverything(t *testing.T) {
	w := newWorld(t)
	a := w.approved("wf-ack")
	_, err := w.execute(a.Key, "wf-ack", consentYes)
	w.must(err)
	w.l.Close()
	w.open()
	if got := w.state(a.Key); got != ledger.StateSent {
		t.Fatalf("state after reopen = %s", got)
	}
}

func TestKey(t *testing.T) {
	tests := []struct {
		Name     string
		Parts    ledger.KeyParts
		Want     string
		ParseErr bool
	}{
		{"Plain", ledger.KeyParts{"cust-42", "enquiry-1001", "reply_ack", "task-7", 0}, "gh1:cust-42:enquiry-1001:reply_ack:task-7:r0", false},
		{"Correction", ledger.KeyParts{"cust-42", "enquiry-1001", "reply_ack", "task-7", 2}, "gh1:cust-42:enquiry-1001:reply_ack:task-7:r2", false},
		{"ColonsEscaped", ledger.KeyParts{"acme:42", "order:9", "refund", "ord%1", 0}, "gh1:acme%3A42:order%3A9:refund:ord%251:r0", false},
		{"SpaceTrimmed", ledger.KeyParts{" cust-42 ", "e", "t", "x", 0}, "gh1:cust-42:e:t:x:r0", false},
		{"EmptyPart", ledger.KeyParts{"", "e", "t", "x", 0}, "gh1::e:t:x:r0", true},
	}
	for _, tc := range tests {
		t.Run(tc.Name, func(t *testing.T) {
			got := tc.Parts.Key()
			if got != tc.Want {
				t.Fatalf("Key = %s, want %s", got, tc.Want)
			}
			back, err := ledger.ParseKey(got)
			if tc.ParseErr {
				if err == nil {
					t.Fatal("parsed a key with an empty part")
				}
				return
			}
			if err != nil || back.Key() != got {
				t.Fatalf("round trip: %+v %v", back, err)
			}
		})
	}
	for _, bad := range []string{"", "gh1:a:b:c:d", "gh2:a:b:c:d:r0", "gh1:a:b:c:d:0", "gh1:a:b:c:d:r-1"} {
		if _, err := ledger.ParseKey(bad); err == nil {
			t.Errorf("ParseKey(%q) succeeded", bad)
		}
	}
}

// TestPageSizeOfNewAndOlderLedgers: a new ledger is created with 4 KiB
// pages; a ledger created with 1 KiB pages (as gatehouse did before) keeps
// them, opens, decides and checks clean — the page size is fixed when a
// file is created, and nothing converts it behind the operator's back.
func TestPageSizeOfNewAndOlderLedgers(t *testing.T) {
	sqliteOnly(t)
	pageSize := func(path string) int {
		t.Helper()
		db, err := sql.Open("sqlite3", "file:"+path+"?mode=ro")
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		var n int
		if err := db.QueryRow(`PRAGMA page_size`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	w := newWorld(t)
	if n := pageSize(w.path); n != 4096 {
		t.Fatalf("a new ledger has %d-byte pages, want 4096", n)
	}

	older := filepath.Join(t.TempDir(), "older.db")
	db, err := sql.Open("sqlite3", older)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`PRAGMA page_size = 1024; PRAGMA journal_mode = WAL; CREATE TABLE x (y); DROP TABLE x`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	w.path = older
	w.open()
	a := w.approved("wf")
	if _, err := w.execute(a.Key, "wf", consentYes); err != nil {
		t.Fatal(err)
	}
	if vs, err := w.l.Check(w.ctx); err != nil || len(vs) != 0 {
		t.Fatalf("check: %v %v", vs, err)
	}
	if n := pageSize(older); n != 1024 {
		t.Fatalf("the older ledger now has %d-byte pages, want its 1024", n)
	}
}

package main

import (
	"context"
	"database/sql"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib"

	"gatehouse/internal/pgtest"
	"gatehouse/internal/testids"
	"gatehouse/testmailbox"
)

// TestGateOnPostgres drives the gate through the binary against a
// PostgreSQL ledger: the same verbs, the same exit codes, and eight
// processes racing one key send it once.
func TestGateOnPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and starts PostgreSQL")
	}
	loc := pgtest.Database(t)
	mb, err := testmailbox.Start(context.Background(), testmailbox.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer mb.Close()
	e := &gateEnv{t: t, ledger: loc, outbox: filepath.Join(t.TempDir(), "outbox")}
	key := e.approvedTo(mb.Target(), "enq-pg", "alice", "crm.consent=yes")
	exits := raceSend(t, 8, e, key, mb.Target())
	sent := 0
	for i, x := range exits {
		switch x.code {
		case exitOK:
			sent++
		case exitDuplicate, exitInFlight:
		default:
			t.Errorf("process %d: exit %d: %s", i, x.code, x.stderr)
		}
	}
	if sent != 1 {
		t.Fatalf("%d processes sent, want exactly 1", sent)
	}
	if n, _ := mb.Count(context.Background(), testmailbox.Filter{ActionKey: key}); n != 1 {
		t.Fatalf("%d arrivals, want 1", n)
	}
	show := e.must("show", "--key", key).stdout
	if !strings.Contains(show, "state:        sent") {
		t.Fatalf("show on PostgreSQL:\n%s", show)
	}
	var m struct {
		Attempts, Confirmed, DuplicateBlocks int
	}
	decodeOne(t, e.must("metrics", "--json").stdout, &struct {
		Attempts        *int `json:"attempts"`
		Confirmed       *int `json:"confirmed"`
		DuplicateBlocks *int `json:"duplicate_blocks"`
		Intended        int  `json:"intended"`
	}{Attempts: &m.Attempts, Confirmed: &m.Confirmed, DuplicateBlocks: &m.DuplicateBlocks})
	if m.Attempts != 1 || m.Confirmed != 1 || m.DuplicateBlocks != 7 {
		t.Fatalf("metrics on PostgreSQL: %+v", m)
	}
}

// TestRehearseAllOnPostgres: every built-in rehearsal passes on a
// PostgreSQL ledger, each scenario in its own schema of one database.
func TestRehearseAllOnPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL")
	}
	loc := pgtest.Database(t)
	var out, errOut strings.Builder
	code := run([]string{"rehearse", "--all", "--ledger", loc}, &out, &errOut)
	if code != exitOK {
		t.Fatalf("rehearse --all on PostgreSQL: exit %d\n%s\n%s", code, tail(out.String(), 40), errOut.String())
	}
	if !strings.Contains(out.String(), "scenarios passed") {
		t.Fatalf("report:\n%s", tail(out.String(), 10))
	}
	db, err := sql.Open("pgx", loc)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var schemas, actions int
	if err := db.QueryRow(`SELECT count(*) FROM pg_namespace WHERE nspname LIKE 'rehearsal\_%'`).Scan(&schemas); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow(`SELECT count(*) FROM rehearsal_overlapping_reply.actions`).Scan(&actions); err != nil || actions == 0 {
		t.Fatalf("the overlapping-reply rehearsal left %d actions in its schema (%v)", actions, err)
	}
	if schemas < 14 {
		t.Fatalf("%d rehearsal schemas, want one per built-in (at least 14)", schemas)
	}
}

// TestReviewOnPostgres: the same rehearsed stop kept in a PostgreSQL ledger
// and in a SQLite file gives the same report, byte for byte once the
// ledger's name is taken out: the review folds the same history on both.
func TestReviewOnPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL")
	}
	loc := pgtest.Database(t)
	var out, errOut strings.Builder
	if code := run([]string{"rehearse", "stop-for-review", "--ledger", loc}, &out, &errOut); code != exitOK {
		t.Fatalf("rehearse on PostgreSQL: exit %d\n%s\n%s", code, tail(out.String(), 20), errOut.String())
	}
	path := rehearsedStop(t)
	for _, format := range []string{"json", "md"} {
		pg := reviewCmd("--ledger", loc, "--format", format)
		wantExit(t, pg, exitOK)
		lite := reviewCmd("--ledger", path, "--format", format)
		wantExit(t, lite, exitOK)
		if strings.Contains(pg.stdout, "secret") {
			t.Fatalf("the report shows the ledger's password:\n%s", pg.stdout)
		}
		a, b := withoutLedgerName(pg.stdout), withoutLedgerName(lite.stdout)
		if a != b {
			t.Errorf("%s report on PostgreSQL differs from SQLite's:\n--- postgres\n%s\n--- sqlite\n%s", format, a, b)
		}
		if !strings.Contains(a, "committed") {
			t.Fatalf("%s report without its buckets:\n%s", format, a)
		}
	}
}

// withoutLedgerName drops the lines of a report that name its ledger and
// the test mailbox's port, which differ between the two rehearsals.
func withoutLedgerName(report string) string {
	var keep []string
	for _, line := range strings.Split(report, "\n") {
		if strings.Contains(line, `"ledger":`) || strings.HasPrefix(line, "# Incident review:") {
			continue
		}
		keep = append(keep, testids.Mask(mailboxPort.ReplaceAllString(line, "127.0.0.1:PORT")))
	}
	return strings.Join(keep, "\n")
}

var mailboxPort = regexp.MustCompile(`127\.0\.0\.1:[0-9]+`)

package ledger_test

import (
	"database/sql"
	"fmt"
	"strings"
	"testing"

	"gatehouse/ledger"
)

// rawLedger opens the world's ledger underneath the gate, as an operator
// with a SQL shell would.
func rawLedger(t *testing.T, w *world) *sql.DB {
	t.Helper()
	driver := "sqlite3"
	if onPostgres() {
		driver = "pgx"
	}
	db, err := sql.Open(driver, w.path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// countViolations is what ledger check says of the kept action counts.
func countViolations(t *testing.T, l *ledger.Ledger) []string {
	t.Helper()
	vs, err := l.Check(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, v := range vs {
		if v.Rule == "action counts match actions" {
			out = append(out, v.Detail)
		}
	}
	return out
}

// TestActionCountsSurviveBulkUpdatesDriftAndMigration: the counts schema
// 10 keeps stay right when one statement moves many actions at once (an
// operator's UPDATE), ledger check names a count that drifted, and a
// ledger of schema 9 that already holds actions in several states has
// right counts as soon as it is migrated.
func TestActionCountsSurviveBulkUpdatesDriftAndMigration(t *testing.T) {
	w := newWorld(t)
	var drafts []string
	for i := range 8 {
		drafts = append(drafts, w.proposeFor(fmt.Sprintf("cust-%d", i), fmt.Sprintf("e-%d", i), "a@example.com", "Hello").Key)
	}
	for _, k := range drafts[:3] {
		_, err := w.l.Submit(w.ctx, k, "wf-ack")
		w.must(err)
	}
	a := w.approved("wf-ack")
	_, err := w.execute(a.Key, "wf-ack", consentYes)
	w.must(err)
	_, err = w.l.Hold(w.ctx, drafts[3], "lead", "look first")
	w.must(err)
	if v := countViolations(t, w.l); len(v) > 0 {
		t.Fatalf("counts after the gate's writes: %v", v)
	}

	db := rawLedger(t, w)
	// One statement moves every draft, then back.
	for _, q := range []string{
		`UPDATE actions SET state = 'cancelled' WHERE state IN ('drafting', 'awaiting_approval')`,
		`UPDATE actions SET state = 'drafting' WHERE state = 'cancelled'`,
		`UPDATE actions SET version = version + 1`, // no state changes
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
		if v := countViolations(t, w.l); len(v) > 0 {
			t.Fatalf("counts after %q: %v", q, v)
		}
	}
	// A count that drifted is named.
	if _, err := db.Exec(`UPDATE action_counts SET n = n + 2 WHERE state = 'drafting'`); err != nil {
		t.Fatal(err)
	}
	if v := countViolations(t, w.l); len(v) != 1 || !strings.Contains(v[0], "drafting") {
		t.Fatalf("check after a count drifted: %v, want drafting named", v)
	}

	// Back to schema 9, as a ledger written before schema 10 is (and so
	// without what 11, 12 and 13 add), then
	// migrated: the counts are recounted from the actions.
	w.l.Close()
	downgrade := []string{
		`DROP TRIGGER actions_count_insert`, `DROP TRIGGER actions_count_state`, `DROP TRIGGER actions_count_delete`,
		`DROP TABLE action_counts`, `ALTER TABLE actions DROP COLUMN destination_settings`,
		`DROP TABLE unverified_actions`, `DROP TABLE unverified_releases`, `DROP TABLE ledger_identity`, `ALTER TABLE attempts DROP COLUMN content_digest`, `ALTER TABLE attempts DROP COLUMN settles_at`,
		`DROP INDEX actions_late_arrivals`, `ALTER TABLE actions DROP COLUMN late_arrivals`, `ALTER TABLE attempts DROP COLUMN arrived_late`,
		`ALTER TABLE audience_releases DROP COLUMN case_sensitive_local_part`, `DROP INDEX audience_rows_address`,
		`ALTER TABLE audience_rows DROP COLUMN address`, `ALTER TABLE audience_rows DROP COLUMN carrier_line`,
		`ALTER TABLE actions DROP COLUMN request`, `ALTER TABLE attempts DROP COLUMN wire`, `ALTER TABLE attempts DROP COLUMN provider_key`,
		`ALTER TABLE attempts DROP COLUMN key_generation`, `ALTER TABLE attempts DROP COLUMN http_status`,
		`ALTER TABLE attempts DROP COLUMN destination_action_id`, `DROP TABLE policies`, `DROP TABLE actor_mode`, `DROP TABLE actor_tokens`, `DROP TABLE actors`, `ALTER TABLE approvals DROP COLUMN policy_version`, `ALTER TABLE actions DROP COLUMN settle`, `ALTER TABLE approvals DROP COLUMN settle`, `ALTER TABLE audience_releases DROP COLUMN settle`, `PRAGMA user_version = 9`,
	}
	if onPostgres() {
		downgrade = []string{
			`DROP TRIGGER actions_count_insert ON actions`, `DROP TRIGGER actions_count_update ON actions`,
			`DROP TRIGGER actions_count_delete ON actions`, `DROP FUNCTION gatehouse_count_actions()`,
			`DROP TABLE action_counts`, `DROP INDEX IF EXISTS actions_search_trgm`,
			`DROP INDEX actions_state`, `CREATE INDEX actions_state ON actions(state)`,
			`ALTER TABLE actions DROP COLUMN destination_settings`, `DROP TABLE unverified_actions`, `DROP TABLE unverified_releases`, `DROP TABLE ledger_identity`,
			`ALTER TABLE attempts DROP COLUMN content_digest`, `ALTER TABLE attempts DROP COLUMN settles_at`,
			`DROP INDEX actions_late_arrivals`, `ALTER TABLE actions DROP COLUMN late_arrivals`, `ALTER TABLE attempts DROP COLUMN arrived_late`,
			`ALTER TABLE audience_releases DROP COLUMN case_sensitive_local_part`,
			`ALTER TABLE audience_rows DROP COLUMN address`, `ALTER TABLE audience_rows DROP COLUMN carrier_line`,
			`ALTER TABLE actions DROP COLUMN request`, `ALTER TABLE attempts DROP COLUMN wire`, `ALTER TABLE attempts DROP COLUMN provider_key`,
			`ALTER TABLE attempts DROP COLUMN key_generation`, `ALTER TABLE attempts DROP COLUMN http_status`,
			`ALTER TABLE attempts DROP COLUMN destination_action_id`, `DROP TABLE policies`, `DROP TABLE actor_mode`, `DROP TABLE actor_tokens`, `DROP TABLE actors`, `ALTER TABLE approvals DROP COLUMN policy_version`, `ALTER TABLE actions DROP COLUMN settle`, `ALTER TABLE approvals DROP COLUMN settle`, `ALTER TABLE audience_releases DROP COLUMN settle`, `UPDATE gatehouse_schema SET version = 9`,
		}
	}
	for _, q := range downgrade {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	from, to, err := ledger.Migrate(w.ctx, w.path)
	if err != nil || from != 9 || to < 10 {
		t.Fatalf("migrate: %d -> %d, %v", from, to, err)
	}
	w.open()
	if v := countViolations(t, w.l); len(v) > 0 {
		t.Fatalf("counts right after the migration: %v", v)
	}
	total, _, err := w.l.ListActions(w.ctx, ledger.ActionFilter{Limit: 1})
	w.must(err)
	if total != len(drafts)+1 {
		t.Fatalf("total %d after the migration, want %d", total, len(drafts)+1)
	}
	// And the gate keeps them from then on.
	w.proposeFor("cust-new", "e-new", "b@example.com", "Hi")
	if v := countViolations(t, w.l); len(v) > 0 {
		t.Fatalf("counts after a write on the migrated ledger: %v", v)
	}
}

// TestActionCountsAfterBackupAndRestore: a restored backup keeps the
// counts and their triggers: check finds them right, and the restored
// ledger keeps them as the gate writes on.
func TestActionCountsAfterBackupAndRestore(t *testing.T) {
	sqliteOnly(t)
	w := newWorld(t)
	for i := range 5 {
		k := w.proposeFor(fmt.Sprintf("cust-%d", i), fmt.Sprintf("e-%d", i), "a@example.com", "Hello").Key
		if i%2 == 0 {
			_, err := w.l.Submit(w.ctx, k, "wf-ack")
			w.must(err)
		}
	}
	dir := t.TempDir()
	backup := dir + "/backup.db"
	_, err := w.l.Backup(w.ctx, backup, false)
	w.must(err)
	// The ledger moves on after the backup; the restore takes it back.
	w.proposeFor("cust-late", "e-late", "a@example.com", "Late")
	w.l.Close()
	_, err = ledger.RestoreWith(w.ctx, w.path, backup, ledger.RestoreOptions{DiscardNewer: true})
	w.must(err)
	w.open()
	if v := countViolations(t, w.l); len(v) > 0 {
		t.Fatalf("counts after the restore: %v", v)
	}
	total, _, err := w.l.ListActions(w.ctx, ledger.ActionFilter{Limit: 1})
	w.must(err)
	if total != 5 {
		t.Fatalf("total %d after the restore, want 5", total)
	}
	w.proposeFor("cust-after", "e-after", "a@example.com", "After")
	if v := countViolations(t, w.l); len(v) > 0 {
		t.Fatalf("counts after a write on the restored ledger: %v", v)
	}
}

package ledger_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"

	"gatehouse/fakes"
	"gatehouse/internal/pgtest"
	"gatehouse/ledger"
)

// postgresOnly runs a test of the PostgreSQL store itself in the
// conformance run (GATEHOUSE_TEST_STORE=postgres) only.
func postgresOnly(t *testing.T) string {
	t.Helper()
	if !onPostgres() {
		t.Skip("a test of the PostgreSQL store; it runs with " + storeEnv + "=postgres")
	}
	return pgtest.Database(t)
}

func pgExec(t *testing.T, loc, q string) {
	t.Helper()
	db, err := sql.Open("pgx", loc)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(q); err != nil {
		t.Fatal(err)
	}
}

// TestPostgresRefusesANewerSchema: a database written by a newer gatehouse
// is refused by writers and readers alike, and left as it is.
func TestPostgresRefusesANewerSchema(t *testing.T) {
	loc := postgresOnly(t)
	l, err := ledger.Open(loc)
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	pgExec(t, loc, `UPDATE gatehouse_schema SET version = version + 1`)
	if _, err := ledger.Open(loc); !errors.Is(err, ledger.ErrTooNew) {
		t.Fatalf("open: %v, want ErrTooNew", err)
	}
	if _, err := ledger.OpenReadOnly(loc); !errors.Is(err, ledger.ErrTooNew) {
		t.Fatalf("open read-only: %v, want ErrTooNew", err)
	}
}

// TestPostgresHostsStartingAtOnceMigrateOnce: eight processes' worth of
// opens race on an empty database; every one succeeds and the schema is
// applied once.
func TestPostgresHostsStartingAtOnceMigrateOnce(t *testing.T) {
	loc := postgresOnly(t)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := ledger.Open(loc)
			if err == nil {
				err = l.Close()
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("a concurrent open failed: %v", err)
		}
	}
	l, err := ledger.OpenReadOnly(loc)
	if err != nil {
		t.Fatalf("the migrated ledger does not read as current: %v", err)
	}
	l.Close()
}

// TestPostgresRefusesAnotherApplicationsDatabase: a database that holds
// another application's tables and no ledger is refused and not touched.
func TestPostgresRefusesAnotherApplicationsDatabase(t *testing.T) {
	loc := postgresOnly(t)
	pgExec(t, loc, `CREATE TABLE invoices (id int PRIMARY KEY)`)
	if _, err := ledger.Open(loc); !errors.Is(err, ledger.ErrNotLedger) {
		t.Fatalf("open: %v, want ErrNotLedger", err)
	}
	if _, err := ledger.OpenReadOnly(loc); !errors.Is(err, ledger.ErrNoLedger) {
		t.Fatalf("open read-only: %v, want ErrNoLedger", err)
	}
	if _, err := ledger.Open(loc, ledger.RequireExisting()); err == nil {
		t.Fatal("RequireExisting created a ledger in another application's database")
	}
}

// TestPostgresNeverShowsThePassword: a location with a password is shown
// without it, in errors and in Path.
func TestPostgresNeverShowsThePassword(t *testing.T) {
	loc := postgresOnly(t)
	bad := strings.Replace(loc, "postgres://gatehouse@", "postgres://gatehouse:s3cret@", 1)
	bad = strings.Replace(bad, "/gh_", "/nosuchdb_", 1)
	_, err := ledger.Open(bad)
	if err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("open with a password: %v", err)
	}
	good := strings.Replace(loc, "postgres://gatehouse@", "postgres://gatehouse:s3cret@", 1)
	l, err := ledger.Open(good)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if strings.Contains(l.Path(), "s3cret") {
		t.Fatalf("Path shows the password: %s", l.Path())
	}
	if _, err := l.Backup(context.Background(), t.TempDir()+"/b.db", false); !errors.Is(err, ledger.ErrPostgresBackup) {
		t.Fatalf("backup of a PostgreSQL ledger: %v", err)
	}
}

// TestPostgresFollowersWakeOnAnotherHostsWrite: a follower waiting with a
// long poll interval wakes as soon as another handle (another host) commits
// a write: LISTEN/NOTIFY, then it re-reads.
func TestPostgresFollowersWakeOnAnotherHostsWrite(t *testing.T) {
	loc := postgresOnly(t)
	follower, err := ledger.Open(loc)
	if err != nil {
		t.Fatal(err)
	}
	defer follower.Close()
	writer, err := ledger.Open(loc)
	if err != nil {
		t.Fatal(err)
	}
	defer writer.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	before, err := follower.Changes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Start listening, then let the other host write until the follower
	// wakes: it must wake long before its ten-minute poll.
	woke := make(chan error, 1)
	go func() { woke <- follower.WaitForChange(ctx, 10*time.Minute) }()
	for i := 0; ; i++ {
		if _, err := writer.Claim(ctx, ledger.TaskRef{ID: fmt.Sprintf("task-%d", i)}, "wf"); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-woke:
			if err != nil {
				t.Fatalf("the follower was not woken by the writes: %v", err)
			}
			after, err := follower.Changes(ctx)
			if err != nil || after <= before {
				t.Fatalf("woken, but the change counter is %d (was %d): %v", after, before, err)
			}
			return
		case <-time.After(200 * time.Millisecond): // the listener may not be connected yet: write again
		}
	}
}

// TestPostgresDecisionRoundTrips pins how often a decision (propose,
// approve, execute with its outcome) waits for the server: BEGIN and the
// decision lock travel with the first statement, writes nobody reads wait
// for the next statement or COMMIT, and the decision's reads are sent
// together. Before, every statement was its own round trip: 36.
func TestPostgresDecisionRoundTrips(t *testing.T) {
	loc := postgresOnly(t)
	l, err := ledger.Open(loc)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()
	dest := fakes.NewDestination()
	if _, err := l.Claim(ctx, ledger.TaskRef{ID: "task-1"}, "wf"); err != nil {
		t.Fatal(err)
	}
	trips := ledger.CountRoundTrips(l)
	steps := []struct {
		name string
		want int64
		run  func(key string) error
	}{
		{"propose", 2, nil}, {"approve", 2, nil}, {"execute", 3 + 2, nil},
	}
	p := ledger.Proposal{Task: ledger.TaskRef{ID: "task-1"}, Customer: "c1", Event: "evt-1", ActionType: "reply",
		Target: "task-1", Recipient: "a@example.org", Subject: "Hello", Body: "Body", Actor: "wf", Destination: dest.Identity()}
	steps[0].run = func(string) error { _, err := l.Propose(ctx, p); return err }
	steps[1].run = func(key string) error { _, err := l.Approve(ctx, key, "lead", consentYes); return err }
	steps[2].run = func(key string) error {
		_, err := l.Execute(ctx, ledger.ExecuteRequest{Key: key, Executor: "wf", Reread: consentYes}, dest)
		return err
	}
	var total int64
	for _, s := range steps {
		before := trips()
		if err := s.run(p.Key()); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		n := trips() - before
		total += n
		if n != s.want {
			t.Errorf("%s: %d round trips, want %d", s.name, n, s.want)
		}
	}
	if total != 9 {
		t.Errorf("a decision took %d round trips, want 9", total)
	}
	if a, err := l.Action(ctx, p.Key()); err != nil || a.State != ledger.StateSent {
		t.Fatalf("action %v, %v; want sent", a.State, err)
	}
}

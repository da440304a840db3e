package ledger_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"

	"gatehouse/destination/fake"
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

// followerAndWriter opens two handles on one PostgreSQL ledger, as two hosts
// would: one that follows and one that writes, closed at the end of the test.
func followerAndWriter(t *testing.T) (loc string, follower, writer *ledger.Ledger, ctx context.Context) {
	t.Helper()
	loc = postgresOnly(t)
	var err error
	if follower, err = ledger.Open(loc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { follower.Close() })
	if writer, err = ledger.Open(loc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { writer.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return loc, follower, writer, ctx
}

// TestPostgresFollowersWakeOnAnotherHostsWrite: a follower waiting with a
// long poll interval wakes as soon as another handle (another host) commits
// a write: LISTEN/NOTIFY, then it re-reads.
func TestPostgresFollowersWakeOnAnotherHostsWrite(t *testing.T) {
	_, follower, writer, ctx := followerAndWriter(t)
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

// TestPostgresFollowersPollWhenNotificationsAreLost: when the listening
// connection is lost (terminated on the server), a waiting follower is
// woken once, and from then on its waits end at its poll interval, so a
// follower that polls the change counter still sees every write; and once
// the ledger listens again, a notification ends a long wait once more.
func TestPostgresFollowersPollWhenNotificationsAreLost(t *testing.T) {
	loc, follower, writer, ctx := followerAndWriter(t)
	woke := make(chan error, 1)
	go func() { woke <- follower.WaitForChange(ctx, 10*time.Minute) }()
	db, err := sql.Open("pgx", loc)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// Terminate the listening connection once it is there.
	for killed := false; !killed; {
		err := db.QueryRowContext(ctx, `SELECT count(*) > 0 FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity
			WHERE datname = current_database() AND query = 'LISTEN gatehouse_changes') AS k`).Scan(&killed)
		if err != nil {
			t.Fatal(err)
		}
		if !killed {
			time.Sleep(20 * time.Millisecond)
		}
	}
	select {
	case err := <-woke:
		if err != nil {
			t.Fatalf("the lost listener did not wake the follower: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the follower sleeps on after its listener was lost")
	}
	// From now on nothing notifies this follower: its waits last the poll
	// interval, and the counter shows the writer's line.
	before, err := follower.Changes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := writer.Claim(ctx, ledger.TaskRef{ID: "after-the-loss"}, "wf"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := follower.WaitForChange(ctx, 100*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("a 100ms wait lasted %v", d)
	}
	if after, err := follower.Changes(ctx); err != nil || after <= before {
		t.Fatalf("the change counter is %d (was %d) after the write: %v", after, before, err)
	}
	// The listener connects again by itself; then a follower whose poll
	// interval is ten minutes is woken by the next write's notification.
	for !ledger.Listening(follower) {
		if ctx.Err() != nil {
			t.Fatal("the ledger did not listen again after its connection was lost")
		}
		time.Sleep(20 * time.Millisecond)
	}
	go func() { woke <- follower.WaitForChange(ctx, 10*time.Minute) }()
	for i := 0; ; i++ {
		// Each write notifies; the first one may come before the follower
		// waits, so write until it wakes.
		if _, err := writer.Claim(ctx, ledger.TaskRef{ID: fmt.Sprint("relistened-", i)}, "wf"); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-woke:
			if err != nil {
				t.Fatalf("the follower was not woken after listening again: %v", err)
			}
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// TestPostgresSearchIndexIsOptional: schema 10 makes a trigram index for
// searches where pg_trgm can be had; where the ledger's owner may not create
// the extension, or may not use the schema it already lives in, the
// migration still succeeds, without the index, and a search finds the same
// actions by reading the table.
func TestPostgresSearchIndexIsOptional(t *testing.T) {
	owner := postgresOnly(t)
	u, err := url.Parse(owner)
	if err != nil {
		t.Fatal(err)
	}
	role := "plain_" + strings.TrimPrefix(strings.TrimPrefix(u.Path, "/"), "gh_")
	pgExec(t, owner, `CREATE ROLE `+role+` LOGIN`)
	var dbs []string
	t.Cleanup(func() {
		for _, db := range dbs {
			pgExec(t, db, `DROP OWNED BY `+role+` CASCADE`)
		}
		pgExec(t, owner, `DROP ROLE `+role)
	})
	// as gives the plain role a database of its own in which it may create
	// tables in the schema public but not extensions (pg_trgm is trusted:
	// the database's CREATE privilege would be enough), after setup ran
	// there as the owner.
	as := func(setup string) string {
		db := pgtest.Database(t)
		dbs = append(dbs, db)
		pgExec(t, db, `GRANT CREATE, USAGE ON SCHEMA public TO `+role+`; `+setup)
		du, err := url.Parse(db)
		if err != nil {
			t.Fatal(err)
		}
		du.User = url.User(role)
		return du.String()
	}
	for _, tc := range []struct {
		name  string
		loc   func() string
		index bool
	}{
		{"Owner", func() string { return pgtest.Database(t) }, true},
		{"MayNotCreateTheExtension", func() string { return as(`SELECT 1`) }, false},
		{"ExtensionInASchemaItMayNotUse", func() string {
			return as(`CREATE SCHEMA ext; CREATE EXTENSION pg_trgm SCHEMA ext`)
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			loc := tc.loc()
			w := &world{t: t, path: loc, clock: fakes.NewClock(t0), dest: fake.New(), ctx: context.Background()}
			w.open()
			var n int
			db, err := sql.Open("pgx", loc)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if err := db.QueryRow(`SELECT count(*) FROM pg_indexes WHERE schemaname = current_schema() AND indexname = 'actions_search_trgm'`).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if (n == 1) != tc.index {
				t.Fatalf("trigram index present: %v, want %v", n == 1, tc.index)
			}
			ada := w.proposeFor("cust-ada", "enquiry-1", "ada@example.com", "We have your enquiry")
			ben := w.proposeFor("cust-ben", "enquiry-2", "Ben@Example.com", "Refund of 10% approved")
			for search, want := range map[string][]string{
				"BEN@EXAMPLE": {ben.Key}, "example.com": {ben.Key, ada.Key}, "10%": {ben.Key},
				// Across the customer and the recipient, which the index
				// joins: not a match.
				"cust-ada ada@": nil,
			} {
				total, got, err := w.l.ListActions(w.ctx, ledger.ActionFilter{Search: search})
				w.must(err)
				if total != len(want) || !slices.Equal(keysOf(got), want) {
					t.Fatalf("search %q: %d %v, want %v", search, total, keysOf(got), want)
				}
			}
		})
	}
}

// TestPostgresDecisionRoundTrips pins how often a decision (propose,
// approve, execute with its outcome) waits for the server: BEGIN and the
// decision lock travel with the first statement, writes nobody reads wait
// for the next statement or COMMIT, and the decision's reads are sent
// together, and the attempt's INSERT travels with COMMIT (its id is read
// after). Before, every statement was its own round trip: 36.
func TestPostgresDecisionRoundTrips(t *testing.T) {
	loc := postgresOnly(t)
	l, err := ledger.Open(loc)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()
	dest := fake.New()
	if _, err := l.Claim(ctx, ledger.TaskRef{ID: "task-1"}, "wf"); err != nil {
		t.Fatal(err)
	}
	trips := ledger.CountRoundTrips(l)
	steps := []struct {
		name string
		want int64
		run  func(key string) error
	}{
		{"propose", 2, nil}, {"approve", 2, nil}, {"execute", 2 + 2, nil},
	}
	p := ledger.Proposal{Task: ledger.TaskRef{ID: "task-1"}, Customer: "c1", Event: "evt-1", ActionType: "reply",
		Target: "task-1", Recipient: "a@example.org", Subject: "Hello", Body: "Body", Actor: "wf", Destination: dest.Identity()}
	steps[0].run = func(string) error { _, err := l.Propose(ctx, p); return err }
	steps[1].run = func(key string) error { _, err := l.Approve(ctx, key, "lead", consentYes); return err }
	var res ledger.Result
	steps[2].run = func(key string) (err error) {
		res, err = l.Execute(ctx, ledger.ExecuteRequest{Key: key, Executor: "wf", Reread: consentYes}, dest)
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
	if total != 8 {
		t.Errorf("a decision took %d round trips, want 8", total)
	}
	if a, err := l.Action(ctx, p.Key()); err != nil || a.State != ledger.StateSent {
		t.Fatalf("action %v, %v; want sent", a.State, err)
	}
	// The attempt's id, read after COMMIT, is the recorded one.
	atts, err := l.Attempts(ctx, p.Key())
	if err != nil || len(atts) != 1 || atts[0].ID == 0 || atts[0].ID != res.Attempt.ID {
		t.Fatalf("attempts %+v, %v; Execute returned attempt id %d", atts, err, res.Attempt.ID)
	}
}

// TestRelistenBacksOffUnlessAConnectionHeld: losses in a row double the
// pause up to its bound, also when each reconnect's LISTEN succeeded but
// the connection dropped at once; only a connection that held for the
// bound starts the backoff over.
func TestRelistenBacksOffUnlessAConnectionHeld(t *testing.T) {
	pause := 250 * time.Millisecond
	var waits []time.Duration
	for range 9 {
		var wait time.Duration
		wait, pause = ledger.RelistenPause(pause, false)
		waits = append(waits, wait)
	}
	want := []time.Duration{250 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second,
		8 * time.Second, 16 * time.Second, 30 * time.Second, 30 * time.Second}
	if !slices.Equal(waits, want) {
		t.Fatalf("waits %v, want %v", waits, want)
	}
	if wait, next := ledger.RelistenPause(pause, true); wait != 250*time.Millisecond || next != 500*time.Millisecond {
		t.Fatalf("after a connection that held: wait %v, next %v; want 250ms, 500ms", wait, next)
	}
}

// TestPostgresNamesAMissingSchemaGrant: a role that may not use the
// ledger's schema is told so, with the grant it needs, by readers and
// writers alike — not that the database holds no ledger, and nothing is
// created elsewhere.
func TestPostgresNamesAMissingSchemaGrant(t *testing.T) {
	base := postgresOnly(t)
	loc, err := ledger.SchemaLocation(base, "t1")
	if err != nil {
		t.Fatal(err)
	}
	l, err := ledger.Open(loc)
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	role := fmt.Sprintf("gh_nousage_%d", time.Now().UnixNano()%1_000_000)
	pgExec(t, base, "CREATE ROLE "+role+" LOGIN")
	t.Cleanup(func() { pgExec(t, base, "DROP OWNED BY "+role+"; DROP ROLE "+role) })
	u, err := url.Parse(loc)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.User(role)
	as := u.String()
	want := "role " + role + " may not use schema t1: grant USAGE"
	if _, err := ledger.OpenReadOnly(as); !errors.Is(err, ledger.ErrPermission) || !strings.Contains(err.Error(), want) {
		t.Fatalf("read-only open as %s: %v, want %q", role, err, want)
	}
	if _, err := ledger.Open(as); !errors.Is(err, ledger.ErrPermission) || !strings.Contains(err.Error(), want) {
		t.Fatalf("open as %s: %v, want %q", role, err, want)
	}
	pgExec(t, base, "GRANT USAGE ON SCHEMA t1 TO "+role)
	if _, err := ledger.OpenReadOnly(as); !errors.Is(err, ledger.ErrPermission) || !strings.Contains(err.Error(), "role "+role) {
		t.Fatalf("with USAGE but no table privileges: %v, want the role named", err)
	}
}

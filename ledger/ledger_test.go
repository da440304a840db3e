package ledger_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"gatehouse/destination"
	"gatehouse/destination/fake"
	"gatehouse/fakes"
	"gatehouse/internal/pgtest"
	"gatehouse/ledger"
)

var t0 = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)

// world is one ledger on a temporary file with a fake clock and destination.
type world struct {
	t     *testing.T
	path  string
	l     *ledger.Ledger
	clock *fakes.Clock
	dest  *fake.Destination
	ctx   context.Context
}

// storeEnv selects the store every world opens: "postgres" runs the same
// tests on a PostgreSQL database (a throwaway cluster, see internal/pgtest)
// instead of a file, which is the store conformance suite.
const storeEnv = "GATEHOUSE_TEST_STORE"

func onPostgres() bool { return os.Getenv(storeEnv) == "postgres" }

// ledgerLocation is a new, empty ledger of the selected store.
func ledgerLocation(t testing.TB) string {
	t.Helper()
	if onPostgres() {
		return pgtest.Database(t)
	}
	return filepath.Join(t.TempDir(), "ledger.db")
}

// sqliteOnly skips a test of the file store itself when the suite runs on
// PostgreSQL.
func sqliteOnly(t testing.TB) {
	t.Helper()
	if onPostgres() {
		t.Skip("a test of the SQLite file itself")
	}
}

func newWorld(t *testing.T) *world {
	t.Helper()
	w := &world{t: t, path: ledgerLocation(t), clock: fakes.NewClock(t0),
		dest: fake.New(), ctx: context.Background()}
	w.open()
	return w
}

func (w *world) open(opts ...ledger.Option) {
	w.t.Helper()
	l, err := ledger.Open(w.path, append([]ledger.Option{ledger.WithClock(w.clock)}, opts...)...)
	if err != nil {
		w.t.Fatalf("open: %v", err)
	}
	w.l = l
	w.t.Cleanup(func() { l.Close() })
}

func (w *world) must(err error) {
	w.t.Helper()
	if err != nil {
		w.t.Fatal(err)
	}
}

func ackProposal(actor string) ledger.Proposal {
	return ledger.Proposal{
		Task:     ledger.TaskRef{ID: "task-7", Customer: "cust-42", Subject: "Where is my order?"},
		Customer: "cust-42", Event: "enquiry-1001", ActionType: "reply_ack", Target: "task-7",
		Recipient: "ada@example.com", Subject: "We received your enquiry", Destination: fake.DefaultName,
		Body: "Hello Ada,\n\nthank you for writing. We will answer within a day.", Actor: actor,
	}
}

// records reaches the given destinations' records by their identity, as a
// workflow's configuration would.
func records(dests ...destination.Destination) destination.RecordsOpener {
	return destination.RecordsOpenerFunc(func(ep destination.Endpoint) (destination.Records, error) {
		for _, d := range dests {
			if d.Identity() == ep.Destination {
				lk, _ := d.(destination.Records)
				return lk, nil
			}
		}
		return nil, nil
	})
}

// settled moves the world's clock past the moment every attempt of key
// may still land (its lease's end plus its destination's settle time), so
// that a reconciliation finding nothing may conclude absence.
func (w *world) settled(key string) {
	w.t.Helper()
	atts, err := w.l.Attempts(w.ctx, key)
	w.must(err)
	var last time.Time
	for _, at := range atts {
		if at.SettlesAt.After(last) {
			last = at.SettlesAt
		}
	}
	if d := last.Sub(w.clock.Now()); d >= 0 {
		w.clock.Advance(d + time.Second)
	}
}

// reconcile asks the world's destination's records.
func (w *world) reconcile(key, actor string) (ledger.Action, error) {
	return w.l.Reconcile(w.ctx, ledger.ReconcileRequest{Key: key, Actor: actor, Open: records(w.dest)})
}

var consentYes = []ledger.MaterialRead{{Source: "crm", Field: "consent", Value: "yes"}}

// approved sets up task-7 owned by owner with one approved action.
func (w *world) approved(owner string) ledger.Action {
	w.t.Helper()
	_, err := w.l.Claim(w.ctx, ledger.TaskRef{ID: "task-7"}, owner)
	w.must(err)
	a, err := w.l.Propose(w.ctx, ackProposal(owner))
	w.must(err)
	a, err = w.l.Approve(w.ctx, a.Key, "lead", consentYes)
	w.must(err)
	if a.State != ledger.StateApproved {
		w.t.Fatalf("state after approve = %s", a.State)
	}
	return a
}

func (w *world) execute(key, executor string, reread []ledger.MaterialRead) (ledger.Result, error) {
	return w.l.Execute(w.ctx, ledger.ExecuteRequest{Key: key, Executor: executor, Reread: reread}, w.dest)
}

func (w *world) state(key string) ledger.State {
	w.t.Helper()
	a, err := w.l.Action(w.ctx, key)
	w.must(err)
	return a.State
}

func TestHappyPathSendsOnce(t *testing.T) {
	w := newWorld(t)
	a := w.approved("wf-ack")
	res, err := w.execute(a.Key, "wf-ack", consentYes)
	if err != nil {
		t.Fatalf("execute: %v", err)
	}
	if res.Action.State != ledger.StateSent || res.Outcome != destination.OutcomeAccepted {
		t.Fatalf("got %s/%s", res.Action.State, res.Outcome)
	}
	_, err = w.execute(a.Key, "wf-ack", consentYes)
	if !errors.Is(err, ledger.ErrDuplicate) {
		t.Fatalf("second execute: %v, want ErrDuplicate", err)
	}
	if w.dest.Calls() != 1 {
		t.Fatalf("destination called %d times", w.dest.Calls())
	}
	m, err := w.l.Metrics(w.ctx)
	w.must(err)
	if m.Intended != 1 || m.Attempts != 1 || m.Confirmed != 1 || m.DuplicateBlocks != 1 {
		t.Fatalf("metrics %+v", m)
	}
}

// TestExecutorHostNamesWhereAnAttemptRuns: the holder an attempt records
// tells an operator which host and process it waits on.
func TestExecutorHostNamesWhereAnAttemptRuns(t *testing.T) {
	for _, tc := range []struct {
		holder string
		host   string
		pid    int
	}{
		{"db-host-2/8a1f…/pid:[4026531836]:4711", "db-host-2", 4711},
		{"worker/boot/ns:12", "worker", 12},
		{"", "", 0},
		{"garbage", "", 0},
	} {
		host, pid := ledger.Attempt{Holder: tc.holder}.ExecutorHost()
		if host != tc.host || pid != tc.pid {
			t.Errorf("%q: host %q pid %d, want %q %d", tc.holder, host, pid, tc.host, tc.pid)
		}
	}
}

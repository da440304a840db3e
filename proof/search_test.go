package proof_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/http/httptest"
	"net/smtp"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gatehouse/destination"
	filedest "gatehouse/destination/file"
	"gatehouse/destination/httpdest"
	"gatehouse/destination/registry"
	smtpdest "gatehouse/destination/smtp"
	"gatehouse/fakes"
	"gatehouse/internal/pgtest"
	"gatehouse/ledger"
	"gatehouse/proof"
	"gatehouse/testmailbox"
)

var (
	searchSeed = flag.Uint64("proof.seed", 0, "run the operation search with only this seed")
	searchOps  = flag.Int("proof.ops", 0, "steps per seed in the operation search (default 2,000, 40,000 with -proof.long)")
)

// searchLease is the search ledger's lease (the ledger's default), on the
// world's fake clock like everything the ledger times.
const searchLease = 2 * time.Minute

// searchWorld is one run of the randomized operation search: several actors
// issue random gate operations against one real ledger file and one real
// test mailbox that injects faults, foreign messages with colliding key
// headers arrive, executors die mid-send, and a share of sends and
// reconciles go through the built binary. Nemeses (nemesis_test.go) stand
// executors still past their lease, have the relay hold the final dot,
// send look-alikes of the gate's messages and report outcomes late.
//
// The ledger and the mailbox share one fake clock: leases, budgets, settle
// times and the relay's holds all move only when the search advances it,
// so a seed replays the same interleaving.
type searchWorld struct {
	t     *testing.T
	ctx   context.Context
	rng   *rand.Rand
	seed  uint64
	l     *ledger.Ledger
	clock *fakes.Clock
	mb    *testmailbox.Mailbox
	dest  destination.Destination // the destination every action is proposed to
	// relay is the same destination, for sends whose final dot the relay
	// holds: it waits briefly for a reply that cannot come.
	relay destination.Destination
	plain *smtpdest.Destination // the same mailbox outside the gate, for look-alikes
	wrong destination.Endpoint  // an empty directory nobody approved
	// settle is how long after a lease the relay may still land a message:
	// the destination's real settle time, whatever a double declares.
	settle time.Duration
	// records reaches the attempt's recorded destination; a double may
	// stand in for it to show the checker catches the old defects.
	records destination.RecordsOpener
	// recordLate records a report that comes after its attempt was settled; a
	// double may stand in for the ledger's recording.
	recordLate lateRecorder
	bin        string // the built gatehouse, "" for none
	path       string
	dir        string      // the run's directory: the ledger file, the backups
	file       bool        // the ledger is a file (SQLite): it can be backed up and restored
	steps      int         // steps taken so far
	paused     *pausedExec // the executor standing still, if any
	holds      []relayHold // messages the relay holds back

	consent map[string]string   // the CRM: customer → consent now
	keys    []string            // every action key, corrections included
	keyAt   map[string]int      // key → its place in keys
	facts   map[string]fact     // key → what proposes it
	foreign map[string][]string // key → Message-IDs of foreign messages injected with it
	ops     []string            // what happened, for reproduction
	count   map[string]int      // operations by kind
	bad     []string            // problems found while running
	events  int                 // business events so far

	// The restore nemesis (nemesis_test.go): the backups taken so far, and
	// every attempt the ledger recorded before a restore, which the
	// restored ledger may no longer know but whose messages the mailbox
	// kept.
	backups    []searchBackup
	life       int   // restores so far; a backup of an earlier life is older than the ledger
	scanned    int64 // the history line up to which this life's attempts are remembered
	lost       map[string][]ledger.Attempt
	lostIDs    map[string]bool                         // Message-IDs in lost
	restoredAt time.Time                               // when the ledger was last put back (zero: never)
	putBack    func(w *searchWorld, from string) error // a double's, nil for the shipped restore
	forgotten  int                                     // arrivals of attempts only a discarded history knew, found by the checker

	// The nemeses of what the executing process supplies
	// (nemesis_supplied_test.go): the mailbox as the checker reads it,
	// messages a clear removed among them; a forged rehearsal clock; the
	// relay reached with a settle time named at send; what the next
	// binary run adds to its environment.
	arrived     *clearedMailbox
	forged      *httptest.Server
	namedSettle destination.Destination
	binEnv      []string
	// supplying draws for those nemeses alone: the search's other draws
	// stay as they were without them. Nil under a double.
	supplying *rand.Rand
}

// fact is one business action of the search.
type fact struct {
	task, customer, event string
	revision              int
}

var (
	searchTasks    = []string{"t1", "t2", "t3"}
	searchActors   = []string{"wf-1", "wf-2", "ops"}
	searchFaultSet = []testmailbox.FaultKind{testmailbox.FaultAcceptThenDrop, testmailbox.FaultRejectTemporary,
		testmailbox.FaultRejectPermanent}
)

// searchDoubles put old defects back, to show the search finds them; the
// zero value is the gate as shipped.
type searchDoubles struct {
	// Records stands in for the records reconciliation reaches.
	Records func(w *searchWorld) destination.RecordsOpener
	// Dest wraps the destination every in-process send is handed.
	Dest func(d *smtpdest.LookingDestination) destination.Destination
	// Report stands in for the ledger's recording of late reports.
	Report func(w *searchWorld) lateRecorder
	// PutBack stands in for putting a backup back over the ledger with
	// --discard-newer, or by hand followed by mark-restored; the ledger is
	// closed meanwhile and reopened after.
	PutBack func(w *searchWorld, from string) error
	// WithoutRestores is the search as it stood before the restore
	// nemesis: the doubles of the defects it found then run on it, since
	// a restore's lookups (every key it may have forgotten is looked up at
	// its destination before its first send) hide some of what they put
	// back.
	WithoutRestores bool
}

// shipped reports whether no double stands in: the gate as shipped.
func (d searchDoubles) shipped() bool {
	return d.Records == nil && d.Dest == nil && d.Report == nil && d.PutBack == nil && !d.WithoutRestores
}

func newSearchWorld(t *testing.T, seed uint64, bin string, doubles searchDoubles) *searchWorld {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	w := &searchWorld{t: t, ctx: ctx, seed: seed, rng: rand.New(rand.NewPCG(seed, 0x5ea7c4)), bin: bin,
		path: searchLedger(t, dir), dir: dir, clock: fakes.NewClock(time.Now().UTC().Truncate(time.Second)),
		consent: map[string]string{}, facts: map[string]fact{}, foreign: map[string][]string{}, count: map[string]int{},
		keyAt: map[string]int{}, records: registry.Records(), lost: map[string][]ledger.Attempt{}, lostIDs: map[string]bool{},
		putBack: doubles.PutBack}
	w.file = !ledger.IsPostgres(w.path) && !doubles.WithoutRestores
	if doubles.shipped() {
		w.supplying = rand.New(rand.NewPCG(seed, 0x5a991ed))
	}
	var err error
	if w.l, err = w.open(); err != nil {
		t.Fatal(err)
	}
	// w.l, whichever ledger handle a restore left.
	t.Cleanup(func() { w.l.Close() })
	w.recordLate = func(ctx context.Context, transportID string, o destination.Outcome, response string) (ledger.Action, error) {
		return w.l.RecordOutcome(ctx, transportID, o, response)
	}
	if w.mb, err = testmailbox.Start(ctx, testmailbox.Config{Clock: w.clock}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.mb.Close() })
	w.arrived = &clearedMailbox{mb: w.mb}
	// Runs before the closes above: an executor still standing still is
	// let go, so that nothing is left blocked.
	t.Cleanup(func() {
		if w.paused != nil {
			w.paused.letGo()
			<-w.paused.done
		}
	})
	sd, err := smtpdest.New(w.mb.Target(), smtpdest.WithDataTimeout(2*time.Second), smtpdest.WithPause(pauseWhereAsked))
	if err != nil {
		t.Fatal(err)
	}
	relay, err := smtpdest.New(w.mb.Target(), smtpdest.WithDataTimeout(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if w.plain, err = smtpdest.New(w.mb.Target()); err != nil {
		t.Fatal(err)
	}
	wrap := func(d *smtpdest.LookingDestination) destination.Destination { return d }
	if doubles.Dest != nil {
		wrap = doubles.Dest
	}
	looking := func(d *smtpdest.Destination) *smtpdest.LookingDestination {
		ld, ok := d.Looking()
		if !ok {
			t.Fatalf("the mailbox target %s names no records", w.mb.Target())
		}
		return ld
	}
	w.dest, w.relay = wrap(looking(sd)), wrap(looking(relay))
	w.settle = destination.SettleTimeOf(relay)
	if doubles.Records != nil {
		w.records = doubles.Records(w)
	}
	if doubles.Report != nil {
		w.recordLate = doubles.Report(w)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	w.wrong = destination.EndpointOf(&filedest.Destination{Dir: empty})
	for i, task := range searchTasks {
		cust := fmt.Sprintf("c%d", i+1)
		w.consent[cust] = "yes"
		w.newEvent(task)
		w.newEvent(task)
		if _, err := w.l.Claim(ctx, ledger.TaskRef{ID: task, Customer: cust}, "wf-1"); err != nil {
			t.Fatal(err)
		}
	}
	return w
}

// newEvent is a new business event on task (a webhook, a customer's new
// message): a new action key the search may act on.
func (w *searchWorld) newEvent(task string) string {
	i := 0
	for ; i < len(searchTasks) && searchTasks[i] != task; i++ {
	}
	w.events++
	f := fact{task: task, customer: fmt.Sprintf("c%d", i+1), event: fmt.Sprintf("%s-e%d", task, w.events)}
	k := ledger.Key(f.customer, f.event, "reply_ack", f.task, 0)
	w.keyAt[k] = len(w.keys)
	w.keys = append(w.keys, k)
	w.facts[k] = f
	return k
}

// searchLedger is a new ledger of the store GATEHOUSE_TEST_STORE selects:
// a file, or a PostgreSQL database ("postgres").
func searchLedger(t *testing.T, dir string) string {
	if os.Getenv("GATEHOUSE_TEST_STORE") == "postgres" {
		return pgtest.Database(t)
	}
	return filepath.Join(dir, "ledger.db")
}

func (w *searchWorld) pick(list []string) string { return list[w.rng.IntN(len(list))] }

func (w *searchWorld) logf(format string, a ...any) {
	w.ops = append(w.ops, fmt.Sprintf("#%d ", len(w.ops)+1)+fmt.Sprintf(format, a...))
}

func (w *searchWorld) problem(format string, a ...any) {
	w.bad = append(w.bad, fmt.Sprintf("after op #%d: ", len(w.ops))+fmt.Sprintf(format, a...))
}

func (w *searchWorld) action(key string) ledger.Action {
	a, err := w.l.Action(w.ctx, key)
	if err != nil {
		w.t.Fatalf("read %s: %v", key, err)
	}
	return a
}

// reread is the caller's fresh read of the material field, as a workflow
// would do it; now and then it forgets it, which must change nothing.
func (w *searchWorld) reread(key string, forget bool) []ledger.MaterialRead {
	if forget {
		return nil
	}
	return []ledger.MaterialRead{{Source: "crm", Field: "consent", Value: w.consent[w.facts[key].customer]}}
}

// step performs one random operation. Now and then a new business event
// arrives, so the search never runs out of actions that can still happen.
func (w *searchWorld) step() {
	w.steps++
	if w.paused != nil && w.steps >= w.paused.until {
		w.resume()
	}
	if len(w.ops)%20 == 19 {
		k := w.newEvent(w.pick(searchTasks))
		w.logf("new business event %s", k)
	}
	key := w.pick(w.keys)
	if w.rng.IntN(2) == 0 && len(w.keys) > 6 {
		key = w.keys[len(w.keys)-1-w.rng.IntN(6)] // the recent ones, more often
	}
	actor := w.pick(searchActors)
	switch r := w.rng.IntN(114); {
	case r < 12:
		w.opPropose(key, actor)
	case r < 24:
		w.opApprove(key)
	case r < 46:
		w.opSend(key, actor)
	case r < 51:
		w.opCrash(key)
	case r < 54:
		w.opRestart()
	case r < 64:
		w.opReconcile(key)
	case r < 70:
		w.opReleaseHold(key)
	case r < 73:
		w.opHold(key)
	case r < 76:
		w.opResolve(key)
	case r < 81:
		w.opOwnership(actor)
	case r < 85:
		w.opConsent()
	case r < 89:
		w.opForeign(key)
	case r < 93:
		w.opCorrect(key)
	case r < 97:
		w.opStop()
	case r < 100:
		w.opCancel(key)
	case r < 103:
		w.opPause(key)
	case r < 106:
		w.opRelayHold(key)
	case r < 109:
		w.opLookAlike(key)
	case r < 112:
		w.opLateReport(key)
	case r < 113:
		w.opBackup()
	default:
		w.opRestore()
	}
	w.stepSupplied(key)
}

func (w *searchWorld) opPropose(key, actor string) {
	f := w.facts[key]
	if f.revision > 0 {
		return // corrections are proposed through Correct
	}
	body := "Hello, we received your enquiry."
	if w.rng.IntN(4) == 0 {
		body = "Hello, we received your enquiry and answer today." // a revision
	}
	// As `gate propose` does, the proposal states the destination's
	// settle time, which the approval binds.
	ep := destination.EndpointOf(w.dest)
	p := ledger.Proposal{Task: ledger.TaskRef{ID: f.task}, Customer: f.customer, Event: f.event, ActionType: "reply_ack",
		Target: f.task, Recipient: f.customer + "@example.org", Subject: "Your enquiry", Body: body, Actor: actor,
		Destination: ep.Destination, Lookup: ep.Lookup, Settle: &ep.Settle}
	_, err := w.l.Propose(w.ctx, p)
	w.count["propose"]++
	w.logf("propose %s by %s (%d bytes) → %v", key, actor, len(body), errWord(err))
	w.expectRefusalOrNil(err)
}

func (w *searchWorld) opApprove(key string) {
	a, err := w.l.Action(w.ctx, key)
	if errors.Is(err, ledger.ErrNotFound) {
		return
	}
	mat := w.reread(key, false)
	_, err = w.l.Approve(w.ctx, key, "lead", mat)
	w.count["approve"]++
	w.logf("approve %s (%s, consent %s) → %v", key, a.State, mat[0].Value, errWord(err))
	w.expectRefusalOrNil(err)
}

// opSend is a workflow's send. Now and then the caller slips (a forgotten
// field, a wrong destination or sender): the gate must refuse without a
// change of state. A share runs through the built binary.
func (w *searchWorld) opSend(key, actor string) {
	before, err := w.l.Action(w.ctx, key)
	if errors.Is(err, ledger.ErrNotFound) {
		return
	}
	if w.rng.IntN(4) == 0 {
		k := searchFaultSet[w.rng.IntN(len(searchFaultSet))]
		if err := w.mb.AddFault(testmailbox.Fault{Kind: k, Count: 1}); err != nil {
			w.t.Fatal(err)
		}
		w.logf("mailbox fault %s for the next message", k)
	}
	slip := w.rng.IntN(10)
	if w.bin != "" && slip >= 7 && w.rng.IntN(3) == 0 {
		w.binarySend(key, actor, before)
		return
	}
	req := ledger.ExecuteRequest{Key: key, Executor: actor, Reread: w.reread(key, slip == 0)}
	var dest destination.Destination = w.dest
	switch slip {
	case 1:
		dest = &filedest.Destination{Dir: strings.TrimPrefix(w.wrong.Destination, "file://")}
	case 2:
		req.From = "security@bank.example"
	}
	_, err = w.l.Execute(w.ctx, req, dest)
	w.count["send"]++
	after := w.action(key)
	w.logf("send %s by %s (slip %d) %s → %s: %v", key, actor, slip, before.State, after.State, errWord(err))
	switch {
	case slip <= 2 && before.State == ledger.StateApproved && !errors.Is(err, ledger.ErrStopped) &&
		!errors.Is(err, ledger.ErrApprovalStale) && !errors.Is(err, ledger.ErrOwnershipConflict) &&
		!errors.Is(err, ledger.ErrHeld) && !errors.Is(err, ledger.ErrDenied):
		if err == nil || after.State != before.State {
			w.problem("a slip (%d) on %s was not refused without a change: %v, %s → %s", slip, key, err, before.State, after.State)
		}
	default:
		w.checkAgreement("send", key, err, after)
	}
}

// binarySend runs `gatehouse gate send` and checks that its exit code
// agrees with the state it left.
func (w *searchWorld) binarySend(key, actor string, before ledger.Action) {
	mat := w.reread(key, false)
	args := []string{"gate", "send", "--ledger", w.path, "--key", key, "--as", actor, "--material", "crm.consent=" + mat[0].Value}
	code, out := w.runBinary(args...)
	after := w.action(key)
	w.count["send (binary)"]++
	w.logf("binary send %s by %s %s → %s: exit %d", key, actor, before.State, after.State, code)
	// After a restore the key was looked up and not found yet (the binary
	// runs on the system's clock, behind the world's): held back, nothing
	// changed.
	notYet := code == 13 && after.State == ledger.StateApproved && before.State == ledger.StateApproved &&
		strings.Contains(out, "not verified since the restore")
	if notYet {
		w.count["send refused: not verified yet since the restore"]++
	}
	if !notYet && !codeAgrees(code, after) {
		w.problem("binary send of %s exited %d but left %s/%s: %s", key, code, after.State, after.HoldCause, out)
	}
}

func (w *searchWorld) runBinary(args ...string) (int, string) {
	cmd := exec.Command(w.bin, args...)
	cmd.Env = append(os.Environ(), w.binEnv...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return ee.ExitCode(), out.String()
	case err != nil:
		w.t.Fatal(err)
	}
	return 0, out.String()
}

// codeAgrees is the exit-code table of docs/cli.md held against the state
// the command left.
func codeAgrees(code int, a ledger.Action) bool {
	open := a.State == ledger.StateUnknown || a.State == ledger.StateExecuting ||
		a.State == ledger.StateHeld && a.HoldCause.OutcomeOpen()
	switch code {
	case 0:
		return a.State == ledger.StateSent
	case 10:
		return a.State == ledger.StateSent || a.LateArrivals > 0 // sent, or its message arrived after all
	case 11:
		return a.State == ledger.StateExecuting
	case 13, 15:
		return a.State == ledger.StateHeld
	case 14:
		return open
	case 16:
		return a.State == ledger.StateFailed
	case 1:
		return a.State == ledger.StateApproved // not delivered: may be retried
	case 12:
		return a.State != ledger.StateSent && !open
	}
	return true // 2, 17: refused before anything changed (the state is whatever it was)
}

// checkAgreement holds an in-process refusal against the state it left.
func (w *searchWorld) checkAgreement(op, key string, err error, a ledger.Action) {
	code := 0
	switch {
	case err == nil:
	case errors.Is(err, ledger.ErrUnknownOutcome):
		code = 14
	case errors.Is(err, ledger.ErrWrongDestination), errors.Is(err, ledger.ErrInvalid):
		code = 17
	case errors.Is(err, ledger.ErrFailed):
		code = 16
	case errors.Is(err, ledger.ErrDuplicate):
		code = 10
	case errors.Is(err, ledger.ErrInFlight):
		code = 11
	case errors.Is(err, ledger.ErrStopped):
		code = 15
	case errors.Is(err, ledger.ErrNotVerifiedYet):
		// Looked up after a restore and not found, while what the
		// forgotten history sent may still land: nothing changed, exit 13
		// with the action still approved. The drain runs past every
		// restore's settle time, so there it must not happen.
		w.count["send refused: not verified yet since the restore"]++
		if a.State != ledger.StateApproved || strings.HasPrefix(op, "drain") {
			w.problem("%s %s answered %v but left %s/%s", op, key, err, a.State, a.HoldCause)
		}
		return
	case errors.Is(err, ledger.ErrHeld):
		code = 13
		if a.HoldCause == ledger.HoldFoundAfterRestore || a.HoldCause == ledger.HoldUnverified {
			w.count["send held: "+string(a.HoldCause)]++
		}
	case errors.Is(err, ledger.ErrDenied), errors.Is(err, ledger.ErrOwnershipConflict), errors.Is(err, ledger.ErrApprovalStale),
		errors.Is(err, ledger.ErrCancelled):
		code = 12
	case errors.Is(err, ledger.ErrNotDelivered):
		code = 1
	default:
		w.problem("%s %s: not one of the gate's answers: %v", op, key, err)
		return
	}
	if !codeAgrees(code, a) {
		w.problem("%s %s answered %v (exit %d) but left %s/%s", op, key, err, code, a.State, a.HoldCause)
	}
}

func (w *searchWorld) expectRefusalOrNil(err error) {
	if err != nil && errors.Is(err, ledger.ErrNotRecorded) {
		w.problem("the ledger failed: %v", err)
	}
}

// opCrash is an executor that dies mid-send: the attempt is recorded, the
// message maybe handed over (and maybe stored while the reply is lost),
// and nothing more.
func (w *searchWorld) opCrash(key string) {
	a, err := w.l.Action(w.ctx, key)
	if err != nil || a.State != ledger.StateApproved {
		return
	}
	owner := w.owner(a.TaskID)
	req := ledger.ExecuteRequest{Key: key, Executor: owner, Reread: w.reread(key, false), Endpoint: destination.EndpointOf(w.dest)}
	if !w.verifiedFirst(req, w.dest) {
		return
	}
	att, msg, err := w.l.BeginAttempt(w.ctx, req)
	w.count["crash"]++
	if err != nil {
		w.logf("crash %s: refused before the attempt: %v", key, errWord(err))
		return
	}
	handed := w.rng.IntN(3)
	switch handed {
	case 1:
		w.l.Deliver(w.ctx, att, msg, w.dest)
	case 2:
		w.mb.AddFault(testmailbox.Fault{Kind: testmailbox.FaultAcceptThenDrop, Count: 1, To: msg.To})
		w.l.Deliver(w.ctx, att, msg, w.dest)
	}
	w.logf("crash %s during attempt %d (handed over: %d)", key, att.Number, handed)
}

// opRestart is the next process start after a crash: the lease has run out
// and recovery marks what it finds unknown.
func (w *searchWorld) opRestart() {
	w.advance(3 * time.Minute)
	keys, err := w.l.Recover(w.ctx)
	w.count["restart"]++
	w.logf("restart: recovery marked %v (%v)", keys, errWord(err))
	if err != nil {
		w.problem("recover: %v", err)
	}
}

// opReconcile asks the attempt's own destination, or names the wrong one
// (which must be refused without a change).
func (w *searchWorld) opReconcile(key string) {
	before, err := w.l.Action(w.ctx, key)
	if err != nil {
		return
	}
	if w.bin != "" && w.rng.IntN(8) == 0 {
		code, out := w.runBinary("gate", "reconcile", "--ledger", w.path, "--key", key, "--as", "ops")
		after := w.action(key)
		w.count["reconcile (binary)"]++
		w.logf("binary reconcile %s %s → %s: exit %d", key, before.State, after.State, code)
		if code == 0 && !needsReconcile(before) && after.Version == before.Version {
			return // nothing to reconcile: left as it was
		}
		if !codeAgrees(code, after) {
			w.problem("binary reconcile of %s exited %d but left %s/%s: %s", key, code, after.State, after.HoldCause, out)
		}
		w.checkForeignNotProof(key, before, after)
		return
	}
	req := ledger.ReconcileRequest{Key: key, Actor: "ops", Open: w.records}
	wrong := w.rng.IntN(4) == 0
	if wrong {
		req.Named = &w.wrong
	}
	after, err := w.l.Reconcile(w.ctx, req)
	if after.Key == "" {
		after = w.action(key)
	}
	w.count["reconcile"]++
	w.logf("reconcile %s (wrong destination named: %v) %s → %s/%s: %v", key, wrong, before.State, after.State, after.HoldCause, errWord(err))
	if wrong && needsReconcile(before) && (after.State != before.State || !errors.Is(err, ledger.ErrWrongDestination)) {
		w.problem("reconcile of %s against a wrong destination was not refused: %v, %s → %s", key, err, before.State, after.State)
	}
	w.checkForeignNotProof(key, before, after)
}

// checkForeignNotProof: a foreign message carrying the key must end as a
// named contradiction, never as proof of delivery.
func (w *searchWorld) checkForeignNotProof(key string, before, after ledger.Action) {
	ids := w.foreign[key]
	if len(ids) == 0 || !needsReconcile(before) || after.Version == before.Version {
		return
	}
	switch {
	case after.State == ledger.StateSent:
		w.problem("%s was reconciled as sent although foreign message(s) %v carry its key", key, ids)
	case after.State == ledger.StateHeld && after.HoldCause == ledger.HoldContradiction:
		if !strings.Contains(after.Reason, ids[0]) {
			w.problem("%s is held as a contradiction that does not name the foreign message %s: %s", key, ids[0], after.Reason)
		}
	case after.State == ledger.StateHeld && after.HoldCause == ledger.HoldUnknownOutcome:
		// the lookup failed: still held, still not proof
	default:
		w.problem("%s with foreign message(s) %v was reconciled to %s/%s", key, ids, after.State, after.HoldCause)
	}
}

func (w *searchWorld) opReleaseHold(key string) {
	a, err := w.l.Action(w.ctx, key)
	if err != nil || a.State != ledger.StateHeld && a.State != ledger.StateUnknown {
		return
	}
	if restoreHold(a) {
		w.decideRestoreHold(key, a)
		return
	}
	after, err := w.l.ReleaseHold(w.ctx, key, "ops", "reviewed in the search")
	w.count["release-hold"]++
	w.logf("release-hold %s (%s/%s) → %s: %v", key, a.State, a.HoldCause, after.State, errWord(err))
	if needsReconcile(a) && err == nil {
		w.problem("a hold over an open outcome of %s was released", key)
	}
}

func (w *searchWorld) opHold(key string) {
	a, err := w.l.Action(w.ctx, key)
	if err != nil {
		return
	}
	_, err = w.l.Hold(w.ctx, key, "ops", "a person wants to look")
	w.count["hold"]++
	w.logf("hold %s (%s) → %v", key, a.State, errWord(err))
}

// opResolve is a person who checked the destination by hand: truthfully,
// by the attempt's own message (its Message-ID, recipient, sender and
// content: a look-alike is not it). Finding nothing, a careful person says
// "not delivered" only once the attempt can no longer land, as its hold
// tells them; before then they come back later.
func (w *searchWorld) opResolve(key string) {
	a, err := w.l.Action(w.ctx, key)
	if err != nil || !needsReconcile(a) {
		return
	}
	atts, err := w.l.Attempts(w.ctx, key)
	if err != nil || len(atts) == 0 {
		return
	}
	last := atts[len(atts)-1]
	n, err := proof.OwnArrivals(w.ctx, w.arrived, last)
	if err != nil {
		w.t.Fatal(err)
	}
	if n == 0 && w.clock.Now().Before(last.SettlesAt) {
		w.count["resolve (waits)"]++
		w.logf("resolve %s: found nothing, but attempt %d may still land until %s: not yet", key, last.Number, last.SettlesAt.Format(time.TimeOnly))
		return
	}
	after, err := w.l.ResolveUnknown(w.ctx, key, "ops", n > 0, "checked the mailbox for the attempt's own message")
	w.count["resolve"]++
	w.logf("resolve %s: found %d → %s: %v", key, n, after.State, errWord(err))
}

func (w *searchWorld) owner(task string) string {
	tk, err := w.l.Task(w.ctx, task)
	if err != nil {
		w.t.Fatal(err)
	}
	return tk.Owner
}

func (w *searchWorld) opOwnership(actor string) {
	task := w.pick(searchTasks)
	var err error
	var what string
	switch w.rng.IntN(3) {
	case 0:
		what = "claim"
		_, err = w.l.Claim(w.ctx, ledger.TaskRef{ID: task}, actor)
	case 1:
		what = "takeover"
		_, err = w.l.TakeOver(w.ctx, ledger.TaskRef{ID: task}, actor, "the search steps in")
	default:
		what = "release"
		_, err = w.l.Release(w.ctx, task, w.owner(task), "end of shift")
	}
	w.count[what]++
	w.logf("%s %s by %s → %v", what, task, actor, errWord(err))
}

func (w *searchWorld) opConsent() {
	cust := fmt.Sprintf("c%d", 1+w.rng.IntN(len(searchTasks)))
	v := "yes"
	if w.consent[cust] == "yes" {
		v = "no"
	}
	w.consent[cust] = v
	w.count["consent"]++
	w.logf("crm: consent of %s is now %s", cust, v)
}

// opForeign is someone else's message, with its own Message-ID, carrying
// one of our action keys.
func (w *searchWorld) opForeign(key string) {
	// An adversary aims at what is in doubt: an action whose outcome is open.
	if w.rng.IntN(2) == 0 {
		for _, k := range w.keys {
			if a, err := w.l.Action(w.ctx, k); err == nil && needsReconcile(a) {
				key = k
				break
			}
		}
	}
	id := fmt.Sprintf("foreign-%d-%d@elsewhere.example", w.seed, len(w.ops))
	to := w.facts[key].customer + "@example.org"
	msg := "From: other@elsewhere.example\r\nTo: " + to + "\r\nSubject: not ours\r\nMessage-ID: <" + id + ">\r\n" +
		destination.HeaderActionKey + ": " + key + "\r\n\r\nhello\r\n"
	_ = smtp.SendMail(w.mb.SMTPAddr(), nil, "other@elsewhere.example", []string{to}, []byte(msg))
	n, err := w.mb.Count(w.ctx, testmailbox.Filter{MessageID: id})
	if err != nil {
		w.t.Fatal(err)
	}
	w.count["foreign"]++
	w.logf("foreign message %s with key %s stored: %d", id, key, n)
	if n > 0 {
		w.foreign[key] = append(w.foreign[key], id)
	}
}

func (w *searchWorld) opCorrect(key string) {
	a, err := w.l.Action(w.ctx, key)
	if err != nil || a.State != ledger.StateSent || w.rng.IntN(2) == 0 {
		return
	}
	c, err := w.l.Correct(w.ctx, ledger.Correction{Original: key, Actor: "wf-2", Reason: "a wrong date",
		Subject: "Correction", Body: "The right date is Monday."})
	w.count["correct"]++
	w.logf("correct %s → %s: %v", key, c.Key, errWord(err))
	if err == nil {
		f := w.facts[key]
		f.revision = c.Revision
		w.facts[c.Key] = f
		w.keyAt[c.Key] = len(w.keys)
		w.keys = append(w.keys, c.Key)
	}
}

func (w *searchWorld) opStop() {
	sw, err := w.l.StopState(w.ctx)
	if err != nil {
		w.t.Fatal(err)
	}
	if sw.Stopped {
		err = w.l.Resume(w.ctx, "ops", "the search resumes")
		w.logf("resume → %v", errWord(err))
	} else {
		err = w.l.Stop(w.ctx, "ops", "the search stops")
		w.logf("stop → %v", errWord(err))
	}
	w.count["stop/resume"]++
}

func (w *searchWorld) opCancel(key string) {
	a, err := w.l.Action(w.ctx, key)
	if err != nil || w.rng.IntN(3) != 0 {
		return
	}
	_, err = w.l.Cancel(w.ctx, key, "ops", "the customer withdrew")
	w.count["cancel"]++
	w.logf("cancel %s (%s) → %v", key, a.State, errWord(err))
}

// drain settles everything as an operator would after the run: resume,
// reconcile every open outcome at its own destination, have a person settle
// contradictions truthfully, release what reconciliation proved safe,
// re-approve and send the rest, so every action that is still wanted ends
// sent, and the checker can count losses.
func (w *searchWorld) drain() {
	// The executor standing still wakes, and every message the relay holds
	// lands, before the operator looks.
	w.resume()
	w.advance(searchLease + w.settle)
	sw, _ := w.l.StopState(w.ctx)
	if sw.Stopped {
		w.l.Resume(w.ctx, "ops", "end of the search")
	}
	w.mb.ClearFaults()
	w.opRestart()
	for _, key := range w.keys {
		for range 12 {
			a, err := w.l.Action(w.ctx, key)
			if errors.Is(err, ledger.ErrNotFound) {
				break
			}
			if a.State == ledger.StateSent || a.State == ledger.StateCancelled || a.State == ledger.StateFailed {
				break
			}
			tk, _ := w.l.Task(w.ctx, a.TaskID)
			switch {
			case a.State == ledger.StateHeld && a.HoldCause == ledger.HoldContradiction:
				w.opResolve(key)
			case restoreHold(a):
				w.decideRestoreHold(key, a)
			case needsReconcile(a):
				after, err := w.l.Reconcile(w.ctx, ledger.ReconcileRequest{Key: key, Actor: "ops", Open: w.records})
				w.checkForeignNotProof(key, a, after)
				if errors.Is(err, ledger.ErrHeld) && after.HoldCause == ledger.HoldUnknownOutcome {
					w.opResolve(key)
				}
			case a.State == ledger.StateHeld:
				w.l.ReleaseHold(w.ctx, key, "ops", "drained after the search")
			case tk.Owner != "wf-1":
				w.l.TakeOver(w.ctx, ledger.TaskRef{ID: a.TaskID}, "wf-1", "drained after the search")
			case a.State == ledger.StateApproved:
				_, err := w.l.Execute(w.ctx, ledger.ExecuteRequest{Key: key, Executor: "wf-1", Reread: w.reread(key, false)}, w.dest)
				w.checkAgreement("drain send", key, err, w.action(key))
			default:
				w.l.Approve(w.ctx, key, "lead", w.reread(key, false))
			}
		}
	}
}

func errWord(err error) string {
	if err == nil {
		return "ok"
	}
	s := err.Error()
	if len(s) > 120 {
		s = s[:120] + "…"
	}
	return s
}

// runSearch runs ops operations of one seed and checks the result.
func runSearch(t *testing.T, seed uint64, ops int, bin string, doubles searchDoubles) (*searchWorld, proof.EvidenceVerdict) {
	w := newSearchWorld(t, seed, bin, doubles)
	for range ops {
		w.step()
	}
	w.drain()
	v, err := proof.CheckByMessageID(w.ctx, w.l, w.arrived)
	if err != nil {
		t.Fatal(err)
	}
	w.checkForgotten(&v)
	return w, v
}

// report fails the test with everything needed to reproduce a seed.
func (w *searchWorld) report(t *testing.T, v proof.EvidenceVerdict) {
	if v.OK() && len(w.bad) == 0 {
		return
	}
	path := filepath.Join(os.TempDir(), fmt.Sprintf("gatehouse-search-%d.log", w.seed))
	os.WriteFile(path, []byte(strings.Join(w.ops, "\n")+"\n"), 0o644)
	tail := w.ops
	if len(tail) > 40 {
		tail = tail[len(tail)-40:]
	}
	t.Errorf("seed %d: %s\n%s%s\nreproduce: go test ./proof -run TestOperationSearch -proof.seed %d -proof.ops %d\nthe whole sequence: %s\nlast operations:\n%s",
		w.seed, v, v.Summary(), strings.Join(w.bad, "\n"), w.seed, len(w.ops), path, strings.Join(tail, "\n"))
}

func searchSize() (seeds []uint64, ops int) {
	ops = 2000
	seeds = []uint64{1, 2, 3, 4}
	if *long || os.Getenv("PROOF_LONG") != "" {
		ops = 40000
		seeds = []uint64{1, 2, 3, 4, 5, 6, 7, 8}
	}
	if *searchOps > 0 {
		ops = *searchOps
	}
	if *searchSeed != 0 {
		seeds = []uint64{*searchSeed}
	}
	return seeds, ops
}

// TestOperationSearch searches for sequences of ordinary operations that
// break the promise: random proposals, approvals, sends (some through the
// built binary, some with a caller's slip), crashes mid-send and restarts,
// reconciles at the right or a wrong destination, holds and releases,
// takeovers, consent changes, corrections, stops, mailbox faults and
// foreign messages with colliding key headers; and the nemeses: executors
// standing still inside their send past their lease while another process
// recovers, reconciles and sends again, a relay holding the final dot past
// the sender's budget, look-alikes of the gate's messages (its real
// Message-ID with another sender, content or recipient; another ledger's
// copy), reports that come after their attempt was settled, restores of
// older backups (refused over newer history, with --discard-newer, and a
// hand copy, refused until marked restored; SQLite only), and what a process supplies
// (nemesis_supplied_test.go): a forged clock in its environment, a settle
// time named at send, a backup copied into place without mark-restored,
// records cleared before a restore. The checker counts arrivals by
// the Message-IDs of each action's attempts, those a restore made the
// ledger forget among them, and only messages that are the attempt's in
// every other respect too: no duplicate,
// no loss, no contradiction among the gate's own messages; every foreign
// message or look-alike met by a reconcile ends as a named contradiction;
// every late report is kept and changes nothing; every answer agrees with
// the state it left. A failing seed prints the operations that reproduce
// it.
func TestOperationSearch(t *testing.T) {
	checkSuppliedFlag(t)
	seeds, ops := searchSize()
	bin := ""
	if !testing.Short() {
		bin = buildGatehouse(t)
	}
	start := time.Now()
	total := map[string]int{}
	var sum proof.EvidenceVerdict
	forgotten := 0
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("Seed%d", seed), func(t *testing.T) {
			w, v := runSearch(t, seed, ops, bin, searchDoubles{})
			w.report(t, v)
			// The ledger's own invariants hold after any sequence, the
			// history's among them: a review's fold of the history ends in
			// every action's state.
			vs, err := w.l.Check(w.ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, viol := range vs {
				t.Errorf("seed %d: ledger check: %s", seed, viol)
			}
			for k, n := range w.count {
				total[k] += n
			}
			sum.Actions += v.Actions
			sum.Sent += v.Sent
			sum.Arrivals += v.Arrivals
			sum.Foreign += v.Foreign
			sum.LookAlikes += v.LookAlikes
			sum.Duplicates = append(sum.Duplicates, v.Duplicates...)
			sum.Losses = append(sum.Losses, v.Losses...)
			sum.Contradictions = append(sum.Contradictions, v.Contradictions...)
			forgotten += w.forgotten
		})
	}
	n, ordinary, nem := 0, map[string]int{}, map[string]int{}
	for k, c := range total {
		n += c
		if name, ok := strings.CutPrefix(k, nemesisPrefix); ok {
			nem[name] = c
		} else {
			ordinary[k] = c
		}
	}
	t.Logf("operation search: %d seeds × %d steps in %s, %d operations performed %v; nemeses fired %v; %s; "+
		"arrivals of attempts only a discarded history knew: %d",
		len(seeds), ops, time.Since(start).Round(time.Second), n, ordinary, nem, sum, forgotten)
}

// TestOperationSearch's refunds: the same seeds and steps, with HTTP
// refunds to payments fakes under each duplicate control
// (search_refund_test.go).
func TestOperationSearchRefunds(t *testing.T) {
	seeds, ops := searchSize()
	testRefundSearch(t, seeds, ops)
}

// buildGatehouse builds the command once for the search's binary share.
func buildGatehouse(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "gatehouse")
	out, err := exec.Command("go", "build", "-o", bin, "../cmd/gatehouse").CombinedOutput()
	if err != nil {
		t.Fatalf("build gatehouse: %v\n%s", err, out)
	}
	return bin
}

// TestSearchCatchesTheOldDefects runs the same search against old
// behaviours, as test doubles, and requires it to find each within a few
// seeds:
//   - reconciling by the key header (a foreign message counted as proof: a
//     loss) and wherever the caller points (an empty directory proving
//     "absent": a duplicate), which issue 10 removed;
//   - a lease that is not a fence: a destination that ignores the send's
//     budget, so an executor that stood still past its lease still commits
//     after another process sent again (a duplicate);
//   - absence called too early: a destination that declares no settle time,
//     so a reconcile while the relay holds the final dot says "safe to
//     retry" (a duplicate, or a contradiction when the held one lands);
//   - a look-alike counted as the attempt's message: records whose found
//     messages are judged by Message-ID alone (a loss), and computed
//     Message-IDs, under which another ledger's copy of the same action
//     carries the attempt's (a loss);
//   - late reports dropped, as the ledger did with every one but a late
//     acceptance (a report that left no trace);
//   - a backup put back and not marked restored (issue 25), written by a
//     gate that cannot tell it from the live ledger (issue 35: a backup's
//     own mark now refuses every write; the double erases it): the ledger
//     trusts its past and sends again what the lost history sent (a
//     duplicate, seen only by counting the forgotten attempts' arrivals).
//
// The first seven run on the search without restores, as it stood when
// they were found.
func TestSearchCatchesTheOldDefects(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the search")
	}
	duplicateOrContradiction := func(w *searchWorld, v proof.EvidenceVerdict) bool {
		return len(v.Duplicates) > 0 || len(v.Contradictions) > 0
	}
	// A look-alike taken for the attempt's message: sent without its
	// message having arrived, or met by a reconcile and not named.
	lossOrUnnamed := func(w *searchWorld, v proof.EvidenceVerdict) bool {
		return len(v.Losses) > 0 || w.foundProblem("foreign message")
	}
	tests := []struct {
		Name    string
		Doubles searchDoubles
		Found   func(w *searchWorld, v proof.EvidenceVerdict) bool
	}{
		{"KeyHeaderCountsAsProof", searchDoubles{WithoutRestores: true, Records: func(w *searchWorld) destination.RecordsOpener {
			return wrapRecords(func(r destination.Records) destination.Records { return keyHeaderRecords{r} })
		}}, func(w *searchWorld, v proof.EvidenceVerdict) bool { return len(v.Losses) > 0 || len(w.bad) > 0 }},
		{"AnyDestinationProvesAbsence", searchDoubles{WithoutRestores: true, Records: func(w *searchWorld) destination.RecordsOpener {
			return destination.RecordsOpenerFunc(func(ep destination.Endpoint) (destination.Records, error) {
				empty, _ := registry.Records().OpenRecords(w.wrong)
				return wrongRecords{empty, ep.Destination}, nil
			})
		}}, duplicateOrContradiction},
		{"LeaseIsNotAFence", searchDoubles{WithoutRestores: true, Dest: func(d *smtpdest.LookingDestination) destination.Destination {
			return budgetIgnored{d}
		}}, duplicateOrContradiction},
		{"AbsenceBeforeTheRelayCanLand", searchDoubles{WithoutRestores: true, Dest: func(d *smtpdest.LookingDestination) destination.Destination {
			return noSettleTime{d}
		}}, duplicateOrContradiction},
		{"LookAlikeCountsByMessageID", searchDoubles{WithoutRestores: true, Records: func(w *searchWorld) destination.RecordsOpener {
			return wrapRecords(func(r destination.Records) destination.Records { return idOnlyRecords{r, w} })
		}}, lossOrUnnamed},
		{"ComputedMessageIDs", searchDoubles{WithoutRestores: true, Records: func(w *searchWorld) destination.RecordsOpener {
			return wrapRecords(func(r destination.Records) destination.Records { return computedIDRecords{r} })
		}}, lossOrUnnamed},
		{"LateReportsDropped", searchDoubles{WithoutRestores: true, Report: func(w *searchWorld) lateRecorder { return droppingLateReports(w) }},
			func(w *searchWorld, v proof.EvidenceVerdict) bool { return w.foundProblem("left no trace") }},
		{"RestoreNotMarked", searchDoubles{PutBack: copiedUnmarked},
			func(w *searchWorld, v proof.EvidenceVerdict) bool { return len(v.Duplicates) > 0 }},
	}
	// The refund search's (search_refund_test.go): a destination that
	// hands over its request's last byte whatever the budget, and a key
	// generation moved on without absence proven.
	for _, tc := range []struct {
		Name    string
		Doubles refundDoubles
	}{
		{"RefundLastByteIgnoresTheBudget", refundDoubles{Dest: func(d *httpdest.Destination) destination.Destination { return budgetIgnoredHTTP{d} }}},
		{"RefundNewKeyBeforeAbsenceIsProven", refundDoubles{Records: blindOpener}},
	} {
		t.Run(tc.Name, func(t *testing.T) {
			caught := false
			for seed := uint64(1); seed <= 6 && !caught; seed++ {
				w, v := runRefundSearch(t, seed, 1000, tc.Doubles)
				caught = len(v.Duplicates) > 0 || len(w.bad) > 0
				t.Logf("seed %d: %s; %d problems while running", seed, v, len(w.bad))
			}
			if !caught {
				t.Fatal("the refund search did not catch the old defect")
			}
		})
	}
	for _, tc := range tests {
		t.Run(tc.Name, func(t *testing.T) {
			caught := false
			for seed := uint64(1); seed <= 6 && !caught; seed++ {
				w, v := runSearch(t, seed, 1000, "", tc.Doubles)
				caught = tc.Found(w, v)
				t.Logf("seed %d: %s; %d problems while running; nemeses %v", seed, v, len(w.bad), w.nemeses())
			}
			if !caught {
				t.Fatal("the search did not catch the old defect")
			}
		})
	}
}

// wrapRecords is the registry's records, each wrapped by f.
func wrapRecords(f func(destination.Records) destination.Records) destination.RecordsOpener {
	return destination.RecordsOpenerFunc(func(ep destination.Endpoint) (destination.Records, error) {
		r, err := registry.Records().OpenRecords(ep)
		if r == nil || err != nil {
			return r, err
		}
		return f(r), nil
	})
}

// keyHeaderRecords is the reconciliation the gate used to do: it asked any
// records for the key header and took whatever carried it as the attempt's
// message.
type keyHeaderRecords struct{ destination.Records }

func (k keyHeaderRecords) Lookup(ctx context.Context, q destination.LookupQuery) (destination.LookupResult, error) {
	res, err := k.Records.Lookup(ctx, destination.LookupQuery{ActionKey: q.ActionKey})
	if len(res.Messages) > 1 {
		res.Messages = res.Messages[:1]
	}
	for i := range res.Messages {
		res.Messages[i].MessageID = q.MessageID // "found 1 message(s)", whoever's it was
	}
	return res, err
}

// wrongRecords is a caller who points reconciliation at another
// destination's records and is believed.
type wrongRecords struct {
	destination.Records
	identity string
}

func (w wrongRecords) Identity() string { return w.identity }

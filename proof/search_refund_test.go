package proof_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http/httptest"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"gatehouse/destination"
	"gatehouse/destination/httpdest"
	"gatehouse/destination/registry"
	"gatehouse/fakes"
	"gatehouse/ledger"
)

// refundSearch is the operation search's HTTP half: random refunds to
// payments fakes under each duplicate control, through one real ledger
// file, on one fake clock shared with the fakes (key windows and search
// lags move only when the search advances it). The nemeses are the fakes'
// faults — a response dropped after the refund was made, a response
// delayed while reconciles and probes run meanwhile, a 500 (stored under
// the key where the profile says so), a 429, a request dropped before it
// was made, the whole API down — the clock jumping past a key window, an
// executor dying before or after its hand-over, and an executor standing
// still before its request's last byte past its budget while another
// process recovers and sends again. The checker counts the refunds at
// each fake per action key after every step (never more than one) and
// after the drain (exactly one for every refund, unless the profile
// leaves an unknown outcome to a person).
type refundSearch struct {
	t     *testing.T
	ctx   context.Context
	rng   *rand.Rand
	seed  uint64
	l     *ledger.Ledger
	clock *fakes.Clock
	dests []*refundDest
	// wrap stands a double in for each destination (nil: the real one).
	wrap func(*httpdest.Destination) destination.Destination
	// records reaches the providers' records; a double may stand in.
	records destination.RecordsOpener

	actions []refundAction
	steps   int
	count   map[string]int
	ops     []string
	bad     []string
	paused  *refundPause
	stopped bool
}

// refundDest is one payments fake and the profile the gate is told.
type refundDest struct {
	name     string
	pay      *fakes.Payments
	srv      *httptest.Server
	d        *httpdest.Destination
	dest     destination.Destination
	person   bool // an unknown outcome may be left to a person
	stores5x bool
}

type refundAction struct {
	key     string
	dest    *refundDest
	payment string
	amount  int
}

// refundProfiles are the search's providers: each duplicate control,
// with the fake set up to behave as declared.
var refundProfiles = []struct {
	name, query string
	opts        fakes.PaymentsOptions
	person      bool
}{
	{"keys+ref", "dup=idempotency-key&ref=metadata.gatehouse_key&search=/v1/refunds&settle=10s", fakes.PaymentsOptions{}, false},
	{"stripe", "dup=idempotency-key&stores5xx=true&ref=metadata.gatehouse_key&search=/v1/refunds&lag=30s",
		fakes.PaymentsOptions{Store5xx: true, SearchLag: 30 * time.Second}, false},
	{"keys", "dup=idempotency-key&settle=10s", fakes.PaymentsOptions{}, true},
	{"reference", "dup=reference&ref=metadata.gatehouse_key&search=/v1/refunds&lag=30s",
		fakes.PaymentsOptions{Keys: fakes.PaymentsNoKeys, SearchLag: 30 * time.Second}, false},
	{"none", "dup=none&settle=10s", fakes.PaymentsOptions{Keys: fakes.PaymentsNoKeys}, true},
}

// refundDoubles are the old defects the refund search must catch.
type refundDoubles struct {
	Dest    func(*httpdest.Destination) destination.Destination
	Records func(destination.RecordsOpener) destination.RecordsOpener
}

func newRefundSearch(t *testing.T, seed uint64, ops int, doubles refundDoubles) *refundSearch {
	wrap := doubles.Dest
	// Five minutes for make test's 2,000 steps under the race detector on
	// a loaded machine, and as much again for every 2,000 more (make
	// soak's 40,000): a bound on a hang, never on a slow machine.
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(max(1, ops/2000))*5*time.Minute)
	t.Cleanup(cancel)
	w := &refundSearch{t: t, ctx: ctx, rng: rand.New(rand.NewPCG(seed, 0x7e1f0d)), seed: seed,
		clock: fakes.NewClock(time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)), wrap: wrap, count: map[string]int{}, records: registry.Records()}
	if doubles.Records != nil {
		w.records = doubles.Records(w.records)
	}
	l, err := ledger.Open(filepath.Join(t.TempDir(), "ledger.db"), ledger.WithClock(w.clock), ledger.WithLease(searchLease))
	must(t, err)
	w.l = l
	t.Cleanup(func() { l.Close() })
	for _, p := range refundProfiles {
		pay := fakes.NewPayments(w.clock, p.opts)
		srv := httptest.NewServer(pay.Handler())
		t.Cleanup(func() {
			pay.Close()
			srv.Close()
		})
		d, err := httpdest.New(srv.URL + "?" + p.query)
		must(t, err)
		d.Clock = w.clock
		d.Pause = pauseRefundWhereAsked
		rd := &refundDest{name: p.name, pay: pay, srv: srv, d: d, dest: d, person: p.person, stores5x: p.opts.Store5xx}
		if wrap != nil {
			rd.dest = wrap(d)
		}
		w.dests = append(w.dests, rd)
	}
	// A search that ends early wakes the executor standing still, whose
	// request a fake's server would otherwise wait for on Close.
	t.Cleanup(func() {
		if p := w.paused; p != nil {
			p.once.Do(func() { close(p.wake) })
			<-p.done
		}
	})
	_, err = l.Claim(ctx, ledger.TaskRef{ID: "refunds", Customer: "acme"}, "wf-refund")
	must(t, err)
	return w
}

func (w *refundSearch) logf(format string, a ...any) {
	w.ops = append(w.ops, fmt.Sprintf("%5d ", w.steps)+fmt.Sprintf(format, a...))
}

func (w *refundSearch) problem(format string, a ...any) {
	w.bad = append(w.bad, fmt.Sprintf("step %d: ", w.steps)+fmt.Sprintf(format, a...))
}

func (w *refundSearch) nemesis(name string) { w.count[nemesisPrefix+name]++ }

func (w *refundSearch) action(key string) ledger.Action {
	a, err := w.l.Action(w.ctx, key)
	if err != nil {
		w.t.Fatal(err)
	}
	return a
}

func (w *refundSearch) pick() *refundAction {
	if len(w.actions) == 0 {
		return nil
	}
	// The newest are the busiest, as in the mail search.
	n := len(w.actions)
	if n > 6 && w.rng.IntN(3) > 0 {
		return &w.actions[n-1-w.rng.IntN(6)]
	}
	return &w.actions[w.rng.IntN(n)]
}

// request is a refund's HTTP request in canonical form.
func (ra refundAction) request(t *testing.T) string {
	req, err := destination.ParseRequest([]byte(fmt.Sprintf(`{"method": "POST", "path": "/v1/refunds",
		"body": {"payment": %q, "amount": %d, "currency": "eur", "reason": "requested_by_customer"}}`, ra.payment, ra.amount)))
	must(t, err)
	canon, err := req.Canonical()
	must(t, err)
	return canon
}

func (w *refundSearch) propose(ra refundAction) (ledger.Action, error) {
	ep := destination.EndpointOf(ra.dest.d)
	return w.l.Propose(w.ctx, ledger.Proposal{Task: ledger.TaskRef{ID: "refunds"}, Customer: "cust-" + ra.payment, Event: "return-1",
		ActionType: "refund", Target: "order-" + ra.payment, Destination: ep.Destination, Lookup: ep.Lookup,
		Request: ra.request(w.t), Actor: "wf-refund"})
}

var refundMaterial = []ledger.MaterialRead{{Source: "payments", Field: "payment_state", Value: "captured"}}

func (w *refundSearch) step() {
	w.steps++
	if w.paused != nil && w.steps >= w.paused.until {
		w.wakePaused()
	}
	ra := w.pick()
	switch r := w.rng.IntN(100); {
	case r < 10 || ra == nil:
		w.opPropose()
	case r < 30:
		w.opSend(ra)
	case r < 42:
		w.opReconcile(ra)
	case r < 47:
		w.opRelease(ra)
	case r < 55:
		w.opAdvance()
	case r < 63:
		w.opFault()
	case r < 66:
		w.opDown()
	case r < 71:
		w.opCrash(ra)
	case r < 76:
		w.opDelay(ra)
	case r < 80:
		w.opPause(ra)
	case r < 83:
		w.opAmend(ra)
	case r < 85:
		w.opStop()
	case r < 88:
		w.opWindowEnds()
	case r < 94:
		w.opBurst()
	default:
		w.opSend(ra)
	}
	w.checkRecords()
}

func (w *refundSearch) opPropose() {
	n := len(w.actions) + 1
	ra := refundAction{dest: w.dests[w.rng.IntN(len(w.dests))], payment: fmt.Sprintf("pay_%d", n), amount: 100 * (1 + w.rng.IntN(50))}
	a, err := w.propose(ra)
	if err != nil {
		w.problem("propose refund %s: %v", ra.payment, err)
		return
	}
	ra.key = a.Key
	if _, err := w.l.Approve(w.ctx, a.Key, "lead", refundMaterial); err != nil {
		w.problem("approve %s: %v", a.Key, err)
	}
	w.actions = append(w.actions, ra)
	w.count["propose"]++
	w.logf("propose and approve refund %s (%d) to %s: %s", ra.payment, ra.amount, ra.dest.name, a.Key)
}

func (w *refundSearch) send(ra *refundAction, ctx context.Context) (ledger.Result, error) {
	return w.l.Execute(ctx, ledger.ExecuteRequest{Key: ra.key, Executor: "wf-refund", Reread: refundMaterial}, ra.dest.dest)
}

func (w *refundSearch) opSend(ra *refundAction) {
	if w.paused != nil && w.paused.key == ra.key {
		return
	}
	res, err := w.send(ra, w.ctx)
	w.count["send"]++
	w.logf("send %s (%s): %s/%s: %s", ra.key, ra.dest.name, res.Action.State, res.Action.HoldCause, errWord(err))
	if err != nil && !expectedRefusal(err) && !errors.Is(err, ledger.ErrStopped) {
		w.problem("send %s: %v", ra.key, err)
	}
}

// opBurst sends two to six refunds at once through the one ledger handle,
// as a worker pool does: their decisions and outcomes share transactions
// (group commit), with whatever faults the fakes have queued. A refund may
// be drawn twice; then at most one of its executions may send.
func (w *refundSearch) opBurst() {
	var batch []*refundAction
	for range 2 + w.rng.IntN(5) {
		if ra := w.pick(); ra != nil && (w.paused == nil || w.paused.key != ra.key) {
			batch = append(batch, ra)
		}
	}
	if len(batch) < 2 {
		return
	}
	results := make([]ledger.Result, len(batch))
	errs := make([]error, len(batch))
	var wg sync.WaitGroup
	for i, ra := range batch {
		wg.Go(func() { results[i], errs[i] = w.send(ra, w.ctx) })
	}
	wg.Wait()
	w.count["burst"]++
	for i, ra := range batch {
		w.logf("burst send %s (%s): %s/%s: %s", ra.key, ra.dest.name, results[i].Action.State, results[i].Action.HoldCause, errWord(errs[i]))
		if err := errs[i]; err != nil && !expectedRefusal(err) && !errors.Is(err, ledger.ErrStopped) {
			w.problem("burst send %s: %v", ra.key, err)
		}
	}
}

func (w *refundSearch) reconcile(ra *refundAction) (ledger.Action, error) {
	return w.l.Reconcile(w.ctx, ledger.ReconcileRequest{Key: ra.key, Actor: "wf-refund", Open: w.records})
}

func (w *refundSearch) opReconcile(ra *refundAction) {
	a, err := w.reconcile(ra)
	w.count["reconcile"]++
	w.logf("reconcile %s (%s): %s/%s: %s", ra.key, ra.dest.name, a.State, a.HoldCause, errWord(err))
	if err != nil && !expectedRefusal(err) && !errors.Is(err, ledger.ErrInFlight) {
		w.problem("reconcile %s: %v", ra.key, err)
	}
}

func (w *refundSearch) opRelease(ra *refundAction) {
	a := w.action(ra.key)
	if a.State != ledger.StateHeld || (a.HoldCause != ledger.HoldSafeToRetry && a.HoldCause != ledger.HoldStopped) {
		return
	}
	a, err := w.l.ReleaseHold(w.ctx, ra.key, "lead", "the search releases what reconciliation proved safe")
	w.count["release"]++
	w.logf("release %s: %s: %s", ra.key, a.State, errWord(err))
}

func (w *refundSearch) advance(d time.Duration) {
	w.clock.Advance(d)
}

func (w *refundSearch) opAdvance() {
	d := time.Duration(1+w.rng.IntN(150)) * time.Second
	w.advance(d)
	w.count["advance"]++
	w.logf("the clock moves %s", d)
}

// opWindowEnds jumps the clock past the providers' key windows: a probe
// now would be a new request.
func (w *refundSearch) opWindowEnds() {
	w.advance(25 * time.Hour)
	w.nemesis("key window expiry")
	w.logf("the clock moves 25h: every key so far is forgotten")
}

var searchPayFaults = []fakes.PaymentsFaultKind{fakes.PayCommitThenDrop, fakes.PayError500, fakes.PayError429, fakes.PayDropBeforeCommit}

func (w *refundSearch) opFault() {
	rd := w.dests[w.rng.IntN(len(w.dests))]
	k := searchPayFaults[w.rng.IntN(len(searchPayFaults))]
	if err := rd.pay.QueueFault(fakes.PaymentsFault{Kind: k}); err != nil {
		w.t.Fatal(err)
	}
	name := string(k)
	if k == fakes.PayError500 && rd.stores5x {
		name = "error_500 stored under the key"
	}
	w.nemesis(name)
	w.logf("%s: the next refund request meets %s", rd.name, name)
}

func (w *refundSearch) opDown() {
	rd := w.dests[w.rng.IntN(len(w.dests))]
	down := w.rng.IntN(2) == 0
	rd.pay.SetDown(down)
	if down {
		w.nemesis("down")
	}
	w.logf("%s is down: %v", rd.name, down)
}

func (w *refundSearch) opStop() {
	if w.stopped {
		must(w.t, w.l.Resume(w.ctx, "ops", "over"))
	} else {
		must(w.t, w.l.Stop(w.ctx, "ops", "incident"))
	}
	w.stopped = !w.stopped
	w.count["stop/resume"]++
	w.logf("stop switch on: %v", w.stopped)
}

// opAmend changes an approved refund's amount before any attempt: it
// needs a new approval, and the refund made is the new amount.
func (w *refundSearch) opAmend(ra *refundAction) {
	if a := w.action(ra.key); a.State != ledger.StateApproved || len(w.attempts(ra.key)) > 0 {
		return
	}
	ra.amount += 100
	a, err := w.propose(*ra)
	w.count["amend"]++
	w.logf("the amount of %s changes to %d after approval: %s (%s)", ra.key, ra.amount, a.State, errWord(err))
	if err == nil && a.State == ledger.StateApproved {
		w.problem("a changed amount kept the approval of %s", ra.key)
	}
	if _, err := w.l.Approve(w.ctx, ra.key, "lead", refundMaterial); err != nil {
		w.problem("re-approve %s: %v", ra.key, err)
	}
}

func (w *refundSearch) attempts(key string) []ledger.Attempt {
	atts, err := w.l.Attempts(w.ctx, key)
	must(w.t, err)
	return atts
}

// opCrash is an executor dying before its hand-over (after the intent)
// or after it (before the outcome was recorded): recovery finds the
// attempt once its lease has run out.
func (w *refundSearch) opCrash(ra *refundAction) {
	if a := w.action(ra.key); a.State != ledger.StateApproved || w.paused != nil && w.paused.key == ra.key {
		return
	}
	att, msg, err := w.l.BeginAttempt(w.ctx, ledger.ExecuteRequest{Key: ra.key, Executor: "wf-refund", Reread: refundMaterial,
		Endpoint: destination.EndpointAt(w.ctx, ra.dest.dest)})
	if err != nil {
		return
	}
	after := w.rng.IntN(2) == 0
	if after {
		d := w.l.Deliver(w.ctx, att, msg, ra.dest.dest)
		w.logf("executor of %s dies after the hand-over (%s)", ra.key, d.Outcome)
	} else {
		w.logf("executor of %s dies before the hand-over", ra.key)
	}
	w.count["crash"]++
	w.advance(searchLease + time.Second)
	marked, err := w.l.Recover(w.ctx)
	w.logf("recovery marked %v (%v)", marked, errWord(err))
}

// opDelay holds the provider's response past the executor's budget: the
// outcome is unknown, and reconciles and probes meanwhile meet a refund
// still being processed (409 where the provider keeps keys).
func (w *refundSearch) opDelay(ra *refundAction) {
	if a := w.action(ra.key); a.State != ledger.StateApproved && !(a.State == ledger.StateHeld && a.HoldCause == ledger.HoldProbeDue) {
		return
	}
	held := ra.dest.pay.Held()
	must(w.t, ra.dest.pay.QueueFault(fakes.PaymentsFault{Kind: fakes.PayDelay}))
	done := make(chan error, 1)
	go func() {
		_, err := w.send(ra, w.ctx)
		done <- err
	}()
	ctx, cancel := context.WithTimeout(w.ctx, time.Minute)
	defer cancel()
	isHeld := make(chan error, 1)
	go func() { isHeld <- ra.dest.pay.WaitHeld(ctx, held+1) }()
	select {
	case err := <-done:
		// Refused before the provider: the fault went to nobody.
		cancel()
		<-isHeld
		ra.dest.pay.ClearFaults()
		w.logf("delayed send %s ended before the provider held it: %s", ra.key, errWord(err))
		return
	case err := <-isHeld:
		must(w.t, err)
	}
	w.nemesis("delay, reconciles meanwhile")
	w.advance(searchLease)
	w.logf("send %s whose response %s holds: %s", ra.key, ra.dest.name, errWord(<-done))
	for range 1 + w.rng.IntN(3) {
		w.opReconcile(ra)
		w.opSend(ra)
	}
	ra.dest.pay.Release()
	w.awaitReleased(ra.dest)
	w.logf("%s answers the held request", ra.dest.name)
}

// awaitReleased waits until the fake has answered every held request.
func (w *refundSearch) awaitReleased(rd *refundDest) {
	ctx, cancel := context.WithTimeout(w.ctx, 10*time.Second)
	defer cancel()
	for rd.pay.Held() > 0 {
		if ctx.Err() != nil {
			w.t.Fatal("a held response was never answered")
		}
		rd.pay.Release()
		time.Sleep(time.Millisecond) // the fake's handler goroutine finishes writing; no event marks it
	}
}

// refundPause is an executor standing still before its request's last
// byte.
type refundPause struct {
	key   string
	until int
	stood chan struct{}
	wake  chan struct{}
	once  sync.Once
	done  chan error
}

type refundPauseKey struct{}

func pauseRefundWhereAsked(ctx context.Context, ph httpdest.Phase) {
	if p, ok := ctx.Value(refundPauseKey{}).(*refundPause); ok && ph == httpdest.PhaseCommit {
		close(p.stood)
		<-p.wake
	}
}

// opPause stands an executor still before its last byte; another process
// takes over once the lease ran out (recover, reconcile, release, send
// again), then the first wakes, its budget long spent.
func (w *refundSearch) opPause(ra *refundAction) {
	if w.paused != nil {
		return
	}
	if a := w.action(ra.key); a.State != ledger.StateApproved {
		return
	}
	p := &refundPause{key: ra.key, stood: make(chan struct{}), wake: make(chan struct{}), done: make(chan error, 1)}
	go func() {
		_, err := w.send(ra, context.WithValue(w.ctx, refundPauseKey{}, p))
		p.done <- err
	}()
	select {
	case <-p.stood:
	case err := <-p.done:
		w.logf("send %s ended before its last byte: %s", ra.key, errWord(err))
		return
	}
	w.paused = p
	w.nemesis("executor stands still before the last byte past its budget")
	w.logf("executor of %s stands still before its request's last byte; another process takes over", ra.key)
	w.advance(searchLease + time.Second)
	p.until = w.steps + 1 + w.rng.IntN(20)
	w.l.Recover(w.ctx)
	w.finish(ra, 6)
}

func (w *refundSearch) wakePaused() {
	p := w.paused
	p.once.Do(func() { close(p.wake) })
	err := <-p.done
	w.paused = nil
	w.logf("the executor of %s wakes: %s", p.key, errWord(err))
}

// finish is what an operator does with one refund: reconcile what is
// unknown (waiting out a search lag the records may still be within),
// release what reconciliation proved safe, approve again what a refusal
// sent back, send (or probe). It stops where a person must look.
func (w *refundSearch) finish(ra *refundAction, rounds int) {
	var prev ledger.Action
	for range rounds {
		a := w.action(ra.key)
		if a.State == ledger.StateHeld && a.State == prev.State && a.HoldCause == prev.HoldCause && a.Reason == prev.Reason {
			return
		}
		prev = a
		var err error
		switch {
		case a.State == ledger.StateSent:
			return
		case a.State == ledger.StateHeld && a.HoldCause == ledger.HoldNotFoundYet:
			w.advance(time.Minute + 10*time.Second)
			_, err = w.reconcile(ra)
		case needsReconcile(a):
			_, err = w.reconcile(ra)
		case a.State == ledger.StateHeld && (a.HoldCause == ledger.HoldSafeToRetry || a.HoldCause == ledger.HoldStopped ||
			a.HoldCause == ledger.HoldSourceUnavailable):
			_, err = w.l.ReleaseHold(w.ctx, ra.key, "lead", "finishing")
		case a.State == ledger.StateApproved, a.State == ledger.StateHeld && a.HoldCause == ledger.HoldProbeDue:
			_, err = w.send(ra, w.ctx)
		case a.State == ledger.StateDenied, a.State == ledger.StateAwaitingApproval, a.State == ledger.StateDrafting:
			_, err = w.l.Approve(w.ctx, ra.key, "lead", refundMaterial)
		default:
			return
		}
		if errors.Is(err, ledger.ErrInFlight) {
			w.advance(searchLease + time.Second)
			w.l.Recover(w.ctx)
		}
		w.logf("finish %s (%s): %s/%s → %s", ra.key, ra.dest.name, a.State, a.HoldCause, errWord(err))
	}
}

// checkRecords counts the refunds at every fake per action key: never
// more than one.
func (w *refundSearch) checkRecords() {
	for k, n := range w.perKey() {
		if n > 1 {
			w.problem("%d refunds at the provider for %s", n, k)
		}
	}
}

func (w *refundSearch) perKey() map[string]int {
	byPayment := map[string]string{}
	for _, ra := range w.actions {
		byPayment[ra.payment] = ra.key
	}
	out := map[string]int{}
	for _, rd := range w.dests {
		for _, r := range rd.pay.Records().Records {
			out[byPayment[r.Refund.Payment]]++
		}
	}
	return out
}

// drain ends every fault, wakes the executor standing still, lets every
// lease and lag run out and finishes each refund.
func (w *refundSearch) drain() {
	if w.paused != nil {
		w.wakePaused()
	}
	if w.stopped {
		w.opStop()
	}
	for _, rd := range w.dests {
		rd.pay.ClearFaults()
		rd.pay.SetDown(false)
		w.awaitReleased(rd)
	}
	w.advance(searchLease + 2*time.Minute)
	w.l.Recover(w.ctx)
	for i := range w.actions {
		w.finish(&w.actions[i], 12)
	}
}

// refundVerdict is the refund search's count after the drain.
type refundVerdict struct {
	Refunds, Sent, Person, Records int
	Duplicates, Losses             []string
}

func (v refundVerdict) OK() bool { return len(v.Duplicates) == 0 && len(v.Losses) == 0 }

func (v refundVerdict) String() string {
	return fmt.Sprintf("refunds=%d sent=%d held-for-a-person=%d records=%d duplicates=%d losses=%d",
		v.Refunds, v.Sent, v.Person, v.Records, len(v.Duplicates), len(v.Losses))
}

func (w *refundSearch) verdict() refundVerdict {
	per := w.perKey()
	v := refundVerdict{Refunds: len(w.actions)}
	for _, n := range per {
		v.Records += n
	}
	for _, ra := range w.actions {
		a := w.action(ra.key)
		n := per[ra.key]
		switch {
		case n > 1:
			v.Duplicates = append(v.Duplicates, fmt.Sprintf("%s (%s): %d refunds at the provider", ra.key, ra.dest.name, n))
		case a.State == ledger.StateSent && n == 1:
			v.Sent++
		case ra.dest.person && (a.State == ledger.StateHeld || a.State == ledger.StateUnknown):
			v.Person++
		default:
			v.Losses = append(v.Losses, fmt.Sprintf("%s (%s): %s/%s (%s) with %d refunds at the provider",
				ra.key, ra.dest.name, a.State, a.HoldCause, a.Reason, n))
		}
	}
	sort.Strings(v.Losses)
	return v
}

func runRefundSearch(t *testing.T, seed uint64, ops int, doubles refundDoubles) (*refundSearch, refundVerdict) {
	w := newRefundSearch(t, seed, ops, doubles)
	for range ops {
		w.step()
	}
	w.drain()
	return w, w.verdict()
}

func (w *refundSearch) report(t *testing.T, v refundVerdict) {
	if v.OK() && len(w.bad) == 0 {
		return
	}
	tail := w.ops
	if len(tail) > 60 {
		tail = tail[len(tail)-60:]
	}
	t.Errorf("refund seed %d: %s\n%s\n%s\n%s\nreproduce: go test ./proof -run 'TestOperationSearch/Refunds' -proof.seed %d -proof.ops %d\nlast operations:\n%s",
		w.seed, v, strings.Join(v.Duplicates, "\n"), strings.Join(v.Losses, "\n"), strings.Join(w.bad, "\n"), w.seed, len(w.ops), strings.Join(tail, "\n"))
}

// budgetIgnoredHTTP is the defect of a destination that does not check
// the budget before its request's last byte: an executor that stood still
// past its lease commits after another process sent again.
type budgetIgnoredHTTP struct{ *httpdest.Destination }

// Send drops the budget of the send that stands still before its last
// byte, the one send that reaches that byte after its budget ended; the
// others keep theirs, so a response the provider holds still ends them.
func (d budgetIgnoredHTTP) Send(ctx context.Context, m destination.Message) (destination.Receipt, error) {
	if _, ok := ctx.Value(refundPauseKey{}).(*refundPause); ok {
		ctx = context.WithoutCancel(ctx)
	}
	return d.Destination.Send(ctx, m)
}

// blindRecords is the defect of a key generation that moves on before
// absence is proven: the provider's records are taken to hold nothing
// whatever they hold, so an unknown refund is "absent" once the lag is
// over, and the retry goes under a new key.
type blindRecords struct{ destination.Records }

func (blindRecords) Lookup(context.Context, destination.LookupQuery) (destination.LookupResult, error) {
	return destination.LookupResult{}, nil
}

func blindOpener(o destination.RecordsOpener) destination.RecordsOpener {
	return destination.RecordsOpenerFunc(func(ep destination.Endpoint) (destination.Records, error) {
		r, err := o.OpenRecords(ep)
		if err != nil || r == nil {
			return r, err
		}
		return blindRecords{r}, nil
	})
}

// testRefundSearch runs the refund search at the operation search's size
// and logs its figures.
func testRefundSearch(t *testing.T, seeds []uint64, ops int) {
	start := time.Now()
	total := map[string]int{}
	var sum refundVerdict
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("Seed%d", seed), func(t *testing.T) {
			w, v := runRefundSearch(t, seed, ops, refundDoubles{})
			w.report(t, v)
			vs, err := w.l.Check(w.ctx)
			must(t, err)
			for _, viol := range vs {
				t.Errorf("refund seed %d: ledger check: %s", seed, viol)
			}
			for k, n := range w.count {
				total[k] += n
			}
			sum.Refunds += v.Refunds
			sum.Sent += v.Sent
			sum.Person += v.Person
			sum.Records += v.Records
			sum.Duplicates = append(sum.Duplicates, v.Duplicates...)
			sum.Losses = append(sum.Losses, v.Losses...)
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
	t.Logf("refund search: %d seeds × %d steps in %s, %d operations performed %v; nemeses fired %v; %s",
		len(seeds), ops, time.Since(start).Round(time.Second), n, ordinary, nem, sum)
}

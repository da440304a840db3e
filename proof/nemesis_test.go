package proof_test

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"gatehouse/destination"
	smtpdest "gatehouse/destination/smtp"
	"gatehouse/ledger"
	"gatehouse/proof"
	"gatehouse/testmailbox"
)

// The search's nemeses: the ways the world around the gate misbehaves that
// a lease, a lookup or a recorded outcome alone cannot see. Each one counts
// itself in w.count under nemesisPrefix. Every nemesis is driven from the
// search's one goroutine and its random draws: an executor stands still at
// a hook point (not a timing race), the relay's hold and every lease and
// budget end on the shared fake clock, and the search waits for each
// consequence (the paused send's end, the held message stored) before it
// goes on, so a seed replays exactly.

const nemesisPrefix = "nemesis: "

func (w *searchWorld) nemesis(name string) { w.count[nemesisPrefix+name]++ }

// nemeses lists the nemeses fired so far, for a log line.
func (w *searchWorld) nemeses() string {
	var out []string
	for k, n := range w.count {
		if name, ok := strings.CutPrefix(k, nemesisPrefix); ok {
			out = append(out, fmt.Sprintf("%s %d", name, n))
		}
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}

// foundProblem reports whether a problem found while running mentions s.
func (w *searchWorld) foundProblem(s string) bool {
	for _, b := range w.bad {
		if strings.Contains(b, s) {
			return true
		}
	}
	return false
}

// aimed is how many of the newest actions a nemesis looks through for one
// it can act on: enough to find one, few enough that a long run does not
// read every action at every step.
const aimed = 50

// recentKeys are the newest aimed action keys, the newest first.
func (w *searchWorld) recentKeys() []string {
	var out []string
	for i := len(w.keys) - 1; i >= 0 && len(out) < aimed; i-- {
		out = append(out, w.keys[i])
	}
	return out
}

// approvedKey is key when its action is approved, else the newest action
// that is ("" for none): the nemeses that need a send aim at one that can
// start.
func (w *searchWorld) approvedKey(key string) string {
	if a, err := w.l.Action(w.ctx, key); err == nil && a.State == ledger.StateApproved {
		return key
	}
	return w.newest([]ledger.State{ledger.StateApproved}, func(ledger.Action) bool { return true })
}

// newest is the newest action (by when the search made its key) in one of
// states for which ok holds, "" for none. One query, whatever the size of
// the ledger; the order the store lists them in does not matter.
func (w *searchWorld) newest(states []ledger.State, ok func(ledger.Action) bool) string {
	_, as, err := w.l.ListActions(w.ctx, ledger.ActionFilter{States: states, Limit: 1 << 30})
	if err != nil {
		w.t.Fatal(err)
	}
	pick, at := "", -1
	for _, a := range as {
		if i, known := w.keyAt[a.Key]; known && i > at && ok(a) {
			pick, at = a.Key, i
		}
	}
	return pick
}

// advance lets d pass on the world's clock. Leases and budgets due by
// then run out at once; a message the relay held until then is stored by
// the mailbox's own goroutine, and the search waits until it is, so what a
// reconcile finds next never depends on who ran first.
func (w *searchWorld) advance(d time.Duration) {
	w.clock.Advance(d)
	now := w.clock.Now()
	kept := w.holds[:0]
	for _, h := range w.holds {
		if h.until.After(now) {
			kept = append(kept, h)
			continue
		}
		w.awaitOwnArrival(h.att)
		w.logf("the relay stored attempt %d of %s, held since the final dot", h.att.Number, h.att.ActionKey)
	}
	w.holds = kept
}

// awaitOwnArrival waits until attempt at's own message is stored.
func (w *searchWorld) awaitOwnArrival(at ledger.Attempt) {
	ctx, cancel := context.WithTimeout(w.ctx, time.Minute)
	defer cancel()
	for {
		// Counted before the check, so an arrival in between ends the wait.
		n, err := w.mb.Count(ctx, testmailbox.Filter{MessageID: at.MessageID})
		if err != nil {
			w.t.Fatal(err)
		}
		own, err := proof.OwnArrivals(ctx, w.arrived, at)
		if err != nil {
			w.t.Fatal(err)
		}
		if own > 0 {
			return
		}
		if _, err := w.mb.WaitFor(ctx, testmailbox.Filter{MessageID: at.MessageID}, n+1); err != nil {
			w.t.Fatalf("the message of attempt %d of %s held by the relay never landed: %v", at.Number, at.ActionKey, err)
		}
	}
}

// pauseKey marks the context of the one send the search stands still.
type pauseKey struct{}

// pausedExec is an executor standing still inside its send, as a GC
// pause, a SIGSTOP or a stalled VM stands one: at PhaseData (waiting for
// 354) or PhaseCommit (the body written, the final "." not yet).
type pausedExec struct {
	key   string
	att   ledger.Attempt
	phase smtpdest.Phase
	until int           // the step it wakes at, unless woken earlier
	stood chan struct{} // closed once it stands still
	wake  chan struct{} // closed to let it go on
	once  sync.Once
	done  chan ledger.Delivery
}

func (p *pausedExec) letGo() { p.once.Do(func() { close(p.wake) }) }

// pauseWhereAsked is the SMTP destination's pause hook: it stands the send
// whose context carries a pausedExec still at that executor's phase.
func pauseWhereAsked(ctx context.Context, ph smtpdest.Phase) {
	if p, ok := ctx.Value(pauseKey{}).(*pausedExec); ok && ph == p.phase {
		close(p.stood)
		<-p.wake
	}
}

// opPause starts an executor's send and stands it still at a drawn phase.
// Half the time another process takes over at once: the lease runs out,
// recovery marks the attempt unknown, reconciliation waits out the settle
// time and finds nothing, the hold is released and attempt 2 is sent;
// then the first executor wakes. Otherwise it wakes after a drawn number
// of the search's steps, whatever they did meanwhile.
func (w *searchWorld) opPause(key string) {
	if w.paused != nil {
		return // one executor stands still at a time
	}
	if key = w.approvedKey(key); key == "" {
		return
	}
	a := w.action(key)
	phase := smtpdest.PhaseData
	if w.rng.IntN(2) == 0 {
		phase = smtpdest.PhaseCommit
	}
	req := ledger.ExecuteRequest{Key: key, Executor: w.owner(a.TaskID), Reread: w.reread(key, false),
		Endpoint: destination.EndpointAt(w.ctx, w.dest)}
	if !w.verifiedFirst(req, w.dest) {
		return
	}
	att, msg, err := w.l.BeginAttempt(w.ctx, req)
	if err != nil {
		w.count["send"]++
		w.logf("send %s by %s, to stand still at %s: refused before the attempt: %v", key, req.Executor, phase, errWord(err))
		return
	}
	p := &pausedExec{key: key, att: att, phase: phase, stood: make(chan struct{}), wake: make(chan struct{}),
		done: make(chan ledger.Delivery, 1)}
	go func() { p.done <- w.l.Deliver(context.WithValue(w.ctx, pauseKey{}, p), att, msg, w.dest) }()
	select {
	case <-p.stood:
	case d := <-p.done:
		// It ended before the phase (a fault at MAIL or RCPT): a send
		// like any other.
		res, err := w.l.RecordDelivery(w.ctx, att, d)
		w.count["send"]++
		w.logf("send %s by %s ended before %s: %s: %v", key, req.Executor, phase, res.Action.State, errWord(err))
		w.checkAgreement("send", key, err, w.action(key))
		return
	}
	w.paused = p
	w.nemesis("executor stands still at " + string(phase))
	if w.rng.IntN(2) == 0 {
		p.until = w.steps + 1 + w.rng.IntN(40)
		w.logf("executor of %s attempt %d stands still at %s until step %d", key, att.Number, phase, p.until)
		return
	}
	w.logf("executor of %s attempt %d stands still at %s; another process takes over once its lease ran out", key, att.Number, phase)
	w.overtake(key)
	w.resume()
}

// overtake is another process finding an attempt in flight past its lease
// and doing what an operator does: recover, reconcile (waiting out the
// settle time while the attempt may still land), release the hold
// reconciliation proved safe, send again.
func (w *searchWorld) overtake(key string) {
	w.nemesis("executor overtaken past its lease")
	w.advance(searchLease + time.Second)
	marked, err := w.l.Recover(w.ctx)
	w.logf("another process: recovery marked %v (%v)", marked, errWord(err))
	if err != nil {
		w.problem("recover: %v", err)
	}
	for range 6 {
		a := w.action(key)
		switch {
		case a.State == ledger.StateHeld && a.HoldCause == ledger.HoldContradiction:
			// Something else carries the key: a person checks the
			// mailbox, once the attempt can no longer land.
			if at := w.attempt(key, w.lastAttempt(key)); w.clock.Now().Before(at.SettlesAt) {
				w.advance(at.SettlesAt.Sub(w.clock.Now()))
				w.logf("another process waits out the settle time")
			}
			w.opResolve(key)
			if w.action(key).Version == a.Version {
				return
			}
		case needsReconcile(a):
			if a.State == ledger.StateHeld && a.HoldCause == ledger.HoldNotFoundYet {
				w.advance(w.settle)
				w.logf("another process waits out the settle time")
			}
			after, err := w.l.Reconcile(w.ctx, ledger.ReconcileRequest{Key: key, Actor: "ops", Open: w.records})
			if after.Key == "" {
				after = w.action(key)
			}
			w.count["reconcile"]++
			w.logf("another process reconciles %s %s → %s/%s: %v", key, a.State, after.State, after.HoldCause, errWord(err))
			w.checkForeignNotProof(key, a, after)
			if after.Version == a.Version {
				return // nothing more to learn here
			}
		case a.State == ledger.StateHeld && a.HoldCause == ledger.HoldSafeToRetry:
			w.opReleaseHold(key)
		case a.State == ledger.StateApproved:
			owner := w.owner(a.TaskID)
			_, err := w.l.Execute(w.ctx, ledger.ExecuteRequest{Key: key, Executor: owner, Reread: w.reread(key, false)}, w.dest)
			after := w.action(key)
			w.count["send"]++
			w.logf("another process sends %s by %s %s → %s: %v", key, owner, a.State, after.State, errWord(err))
			w.checkAgreement("send", key, err, after)
			return
		default:
			return
		}
	}
}

// resume wakes the executor standing still, if any, and records what its
// send did. When its attempt was settled meanwhile (recovered, reconciled)
// that is a late report: kept, and it changes nothing.
func (w *searchWorld) resume() {
	p := w.paused
	if p == nil {
		return
	}
	w.paused = nil
	before := w.action(p.key)
	at := w.attempt(p.key, p.att.Number)
	lines := w.lateLines(p.key)
	p.letGo()
	d := <-p.done
	w.nemesis("executor resumes")
	if at.Outcome == "" {
		res, err := w.l.RecordDelivery(w.ctx, p.att, d)
		w.logf("executor of %s attempt %d resumes at %s: %s → %s: %v", p.key, p.att.Number, p.phase, d.Outcome, res.Action.State, errWord(err))
		w.checkAgreement("resumed send", p.key, err, w.action(p.key))
		return
	}
	w.logf("executor of %s attempt %d resumes at %s after its attempt was settled as %s: %s", p.key, p.att.Number, p.phase, at.Outcome, d.Outcome)
	w.lateReport(p.key, at, d.Outcome, deliveryWords(d), before, lines)
}

func deliveryWords(d ledger.Delivery) string {
	if d.Err != nil {
		return d.Err.Error()
	}
	return d.Receipt.Response
}

// lastAttempt is the number of key's last attempt (0 for none).
func (w *searchWorld) lastAttempt(key string) int {
	atts, err := w.l.Attempts(w.ctx, key)
	if err != nil {
		w.t.Fatalf("attempts of %s: %v", key, err)
	}
	return len(atts)
}

// attempt is attempt number n of key as the ledger has it now.
func (w *searchWorld) attempt(key string, n int) ledger.Attempt {
	atts, err := w.l.Attempts(w.ctx, key)
	if err != nil {
		w.t.Fatalf("attempts of %s: %v", key, err)
	}
	for _, at := range atts {
		if at.Number == n {
			return at
		}
	}
	w.t.Fatalf("%s has no attempt %d", key, n)
	return ledger.Attempt{}
}

// lateLines counts the history's late-outcome lines of key.
func (w *searchWorld) lateLines(key string) int {
	evs, err := w.l.History(w.ctx, ledger.HistoryFilter{ActionKey: key})
	if err != nil {
		w.t.Fatalf("history of %s: %v", key, err)
	}
	n := 0
	for _, ev := range evs {
		if ev.Kind == ledger.EvLateOutcome {
			n++
		}
	}
	return n
}

// lateRecorder records a destination's report on an attempt; the ledger's
// RecordOutcome, unless a double stands in.
type lateRecorder func(ctx context.Context, transportID string, o destination.Outcome, response string) (ledger.Action, error)

// lateReport records a report that came after attempt at was settled
// (before is the action then, lines its late-outcome lines) and checks
// that it was kept and changed nothing: the action's state, hold and
// version and the attempt's outcome stay; a report other than the settled
// outcome adds one late-outcome line, the same report again none.
func (w *searchWorld) lateReport(key string, at ledger.Attempt, o destination.Outcome, response string, before ledger.Action, lines int) {
	_, err := w.recordLate(w.ctx, at.TransportID, o, response)
	if err != nil {
		w.problem("the late report %s on attempt %d of %s was refused: %v", o, at.Number, key, err)
		return
	}
	after, now := w.action(key), w.attempt(key, at.Number)
	if at.Outcome == destination.OutcomeUnknown && !at.Reconciled && o == destination.OutcomeAccepted {
		// Not late: the answer recovery was waiting for.
		w.logf("report %s on attempt %d of %s (recovered unknown) → %s", o, at.Number, key, after.State)
		w.checkAgreement("report", key, nil, after)
		return
	}
	// A late 250 for an attempt settled as not arrived is an arrival: the
	// attempt is marked, and an action the gate would send next (approved,
	// held as safe to retry or by a stop) is held as arrived, never sent
	// again. Anything else changes nothing.
	arrival := o == destination.OutcomeAccepted && at.Outcome != destination.OutcomeAccepted
	next := before.State == ledger.StateApproved ||
		before.State == ledger.StateHeld && (before.HoldCause == ledger.HoldSafeToRetry || before.HoldCause == ledger.HoldStopped)
	heldAsArrived := arrival && next && after.State == ledger.StateHeld && after.HoldCause == ledger.HoldArrivedLate
	if !heldAsArrived && (after.State != before.State || after.HoldCause != before.HoldCause || after.Version != before.Version) || now.Outcome != at.Outcome {
		w.problem("the late report %s on attempt %d of %s (settled as %s) changed %s/%s v%d into %s/%s v%d (attempt %s)",
			o, at.Number, key, at.Outcome, before.State, before.HoldCause, before.Version, after.State, after.HoldCause, after.Version, now.Outcome)
	}
	if arrival && now.ArrivedLate.IsZero() {
		w.problem("the late 250 on attempt %d of %s (settled as %s) did not mark it as arrived", at.Number, key, at.Outcome)
	}
	if arrival && next && !heldAsArrived {
		w.problem("%s arrived late but was left %s/%s, where the gate would send it again", key, after.State, after.HoldCause)
	}
	want := lines
	if o != at.Outcome && !(arrival && !at.ArrivedLate.IsZero()) { // the same arrival again adds nothing
		want++
	}
	if got := w.lateLines(key); got != want {
		w.problem("the late report %s on attempt %d of %s (settled as %s) left no trace: %d late-outcome lines, want %d",
			o, at.Number, key, at.Outcome, got, want)
	}
	w.logf("late report %s on attempt %d of %s (settled as %s): kept, %s unchanged", o, at.Number, key, at.Outcome, after.State)
}

// lateOutcomes are what a destination may report late: a 250 from a held
// connection, a bounce, a timeout noticed afterwards.
var lateOutcomes = []destination.Outcome{destination.OutcomeAccepted, destination.OutcomeUnknown, destination.OutcomeNotDelivered,
	destination.OutcomeRejectedTemporary, destination.OutcomeRejectedPermanent}

// opLateReport is a destination's report that arrives after the attempt
// it concerns was settled (recorded, recovered as unknown, reconciled).
func (w *searchWorld) opLateReport(key string) {
	var settled []ledger.Attempt
	// key, or the newest recent one with an attempt settled.
	for _, k := range append([]string{key}, w.recentKeys()...) {
		atts, err := w.l.Attempts(w.ctx, k)
		if err != nil {
			continue
		}
		for _, at := range atts {
			if at.Outcome != "" {
				settled = append(settled, at)
			}
		}
		if len(settled) > 0 {
			key = k
			break
		}
	}
	if len(settled) == 0 {
		return
	}
	at := settled[w.rng.IntN(len(settled))]
	o := lateOutcomes[w.rng.IntN(len(lateOutcomes))]
	if at.Outcome == destination.OutcomeUnknown && !at.Reconciled && o == destination.OutcomeAccepted {
		// That would be the answer itself, not a late one; the search
		// does not lie about acceptance.
		o = destination.OutcomeNotDelivered
	}
	w.nemesis("late report")
	w.lateReport(key, at, o, "a report that came late", w.action(key), w.lateLines(key))
}

// relayHold is a message the relay took the final "." for and holds back
// until a time on the world's clock.
type relayHold struct {
	att   ledger.Attempt
	until time.Time
}

// opRelayHold sends an approved action through a relay that reads the
// whole message, keeps it out of its store for a drawn time and only then
// stores it (hold_then_store): longer than the sender's budget, so the
// sender gives up and records an unknown outcome, and never longer than
// the lease and the destination's settle time, the longest a message may
// take to land by the destination's own word. Half the time someone
// reconciles right away, while the relay still holds it (and, if told it
// is safe, releases and sends again).
func (w *searchWorld) opRelayHold(key string) {
	if key = w.approvedKey(key); key == "" {
		return
	}
	budget := searchLease * 3 / 4
	hold := budget + time.Duration(1+w.rng.IntN(int((searchLease+w.settle-budget)/time.Second)))*time.Second
	h, ok, _ := w.sendThroughHoldingRelay(key, w.relay, hold)
	if !ok || hold <= searchLease || w.rng.IntN(2) == 0 {
		return
	}
	// Someone reconciles once the lease is over, while the relay still
	// holds the message.
	w.advance(h.begun.Add(searchLease + time.Duration(w.rng.IntN(int((hold-searchLease)/time.Second)))*time.Second).Sub(w.clock.Now()))
	w.nemesis("reconcile while the relay holds the final dot")
	w.retryWhileHeld(key, "while the relay holds it")
}

// heldSend is an attempt whose final dot the relay holds.
type heldSend struct {
	att   ledger.Attempt
	begun time.Time // when the relay took the final dot
}

// sendThroughHoldingRelay sends approved key through dest, a relay that
// holds the final dot for hold on the world's clock: the sender's budget
// ends first, and its outcome is recorded (unknown). It reports whether
// the relay holds the attempt's message; err is the refusal when the
// attempt did not begin.
func (w *searchWorld) sendThroughHoldingRelay(key string, dest destination.Destination, hold time.Duration) (heldSend, bool, error) {
	a := w.action(key)
	budget := searchLease * 3 / 4
	req := ledger.ExecuteRequest{Key: key, Executor: w.owner(a.TaskID), Reread: w.reread(key, false),
		Endpoint: destination.EndpointAt(w.ctx, dest)}
	if !w.verifiedFirst(req, dest) {
		return heldSend{}, false, nil
	}
	att, msg, err := w.l.BeginAttempt(w.ctx, req)
	if err != nil {
		w.count["send"]++
		w.logf("send %s by %s through a holding relay: refused before the attempt: %v", key, req.Executor, errWord(err))
		return heldSend{}, false, err
	}
	w.armFirst(testmailbox.Fault{Kind: testmailbox.FaultHoldThenStore, Count: 1, To: att.Recipient, Duration: hold})
	fired := w.faultsFired(testmailbox.FaultHoldThenStore)
	pending := w.clock.Pending()
	done := make(chan ledger.Delivery, 1)
	go func() { done <- w.l.Deliver(w.ctx, att, msg, dest) }()
	d, held := w.awaitHold(done, pending, fired)
	if !held {
		w.disarm(testmailbox.FaultHoldThenStore)
		res, err := w.l.RecordDelivery(w.ctx, att, d)
		w.count["send"]++
		w.logf("send %s through a holding relay never reached the final dot: %s: %v", key, res.Action.State, errWord(err))
		w.checkAgreement("send", key, err, w.action(key))
		return heldSend{}, false, nil
	}
	begun := w.clock.Now()
	w.holds = append(w.holds, relayHold{att: att, until: begun.Add(hold)})
	w.nemesis("relay holds the final dot")
	// The budget ends: the sender stops waiting for the reply, if it has
	// not already.
	w.advance(budget)
	if d.Outcome == "" {
		d = <-done
	}
	res, err := w.l.RecordDelivery(w.ctx, att, d)
	w.count["send"]++
	w.logf("send %s by %s: the relay holds attempt %d for %s: %s → %s: %v", key, req.Executor, att.Number, hold, d.Outcome, res.Action.State, errWord(err))
	w.checkAgreement("send", key, err, w.action(key))
	return heldSend{att: att, begun: begun}, true, nil
}

// retryWhileHeld is someone who reconciles key while the relay may still
// hold its message (when, in words) and, told it is safe, releases the
// hold and sends again.
func (w *searchWorld) retryWhileHeld(key, when string) {
	before := w.action(key)
	if !needsReconcile(before) {
		return
	}
	after, err := w.l.Reconcile(w.ctx, ledger.ReconcileRequest{Key: key, Actor: "ops", Open: w.records})
	if after.Key == "" {
		after = w.action(key)
	}
	w.count["reconcile"]++
	w.logf("reconcile %s %s %s → %s/%s: %v", key, when, before.State, after.State, after.HoldCause, errWord(err))
	w.checkForeignNotProof(key, before, after)
	if after.State == ledger.StateHeld && after.HoldCause == ledger.HoldSafeToRetry {
		w.opReleaseHold(key)
		if a := w.action(key); a.State == ledger.StateApproved {
			_, err := w.l.Execute(w.ctx, ledger.ExecuteRequest{Key: key, Executor: w.owner(a.TaskID), Reread: w.reread(key, false)}, w.dest)
			w.count["send"]++
			w.logf("send %s again, told it was safe: %v", key, errWord(err))
			w.checkAgreement("send", key, err, w.action(key))
		}
	}
}

// armFirst arms f ahead of the faults already armed for the next
// messages, so that it is the one the next matching message meets; they
// stay armed behind it.
func (w *searchWorld) armFirst(f testmailbox.Fault) {
	w.setFaults(append([]testmailbox.Fault{f}, w.armed("")...))
}

// disarm removes the faults of kind k that have not fired.
func (w *searchWorld) disarm(k testmailbox.FaultKind) { w.setFaults(w.armed(k)) }

// armed is what is left of the faults in force, without those of kind
// skip.
func (w *searchWorld) armed(skip testmailbox.FaultKind) []testmailbox.Fault {
	var out []testmailbox.Fault
	for _, st := range w.mb.Faults() {
		if st.Kind == skip {
			continue
		}
		f := st.Fault
		if st.Remaining > 0 {
			f.Count = st.Remaining
		}
		out = append(out, f)
	}
	return out
}

func (w *searchWorld) setFaults(fs []testmailbox.Fault) {
	if err := w.mb.SetFaults(fs); err != nil {
		w.t.Fatal(err)
	}
}

// faultsFired is how often faults of kind k fired so far.
func (w *searchWorld) faultsFired(k testmailbox.FaultKind) int64 {
	st, err := w.mb.Stats(w.ctx)
	if err != nil {
		w.t.Fatal(err)
	}
	return st.FaultsFired[k]
}

// awaitHold waits until the relay holds the message Deliver is sending:
// the hold fault fired and its timer runs on the world's clock, so that
// the next advance counts from the hand-over. The sender's own budget is
// a timer too while it waits (pending had neither). It returns the
// delivery when the send ended first, and whether the relay holds it.
func (w *searchWorld) awaitHold(done <-chan ledger.Delivery, pending int, fired int64) (ledger.Delivery, bool) {
	ctx, cancel := context.WithCancel(w.ctx)
	defer cancel()
	both := make(chan error, 1)
	go func() { both <- w.clock.BlockUntil(ctx, pending+2) }()
	select {
	case err := <-both:
		if err != nil {
			w.t.Fatal(err)
		}
		return ledger.Delivery{}, true
	case d := <-done:
		cancel()
		<-both
		if w.faultsFired(testmailbox.FaultHoldThenStore) == fired {
			return d, false
		}
		// The sender gave up before the search looked; the hold's timer
		// is the one left to wait for.
		wctx, wcancel := context.WithTimeout(w.ctx, time.Minute)
		defer wcancel()
		if err := w.clock.BlockUntil(wctx, pending+1); err != nil {
			w.t.Fatal(err)
		}
		return d, true
	}
}

// opLookAlike is a message that looks like one of the gate's: someone who
// saw an attempt's header sends its real Message-ID (read from the
// ledger's attempts) from another sender, with another content, or to
// another recipient; or another ledger sent the very same action, with
// its own Message-ID of the gate's form. None is the attempt's message: a
// reconcile that meets one must hold the action as a contradiction naming
// it, and the checker does not count it as an arrival.
func (w *searchWorld) opLookAlike(key string) {
	if w.rng.IntN(2) == 0 {
		// Aimed at what is in doubt, the newest first.
		if k := w.newest([]ledger.State{ledger.StateUnknown, ledger.StateHeld}, needsReconcile); k != "" {
			key = k
		}
	}
	atts, err := w.l.Attempts(w.ctx, key)
	if err != nil || len(atts) == 0 {
		return
	}
	at := atts[len(atts)-1]
	a := w.action(key)
	msg := destination.Message{ActionKey: key, Attempt: at.Number, TransportID: at.MessageID, From: at.Sender, To: at.Recipient,
		Subject: a.Subject, Body: a.Body, Target: w.facts[key].task}
	var kind string
	switch w.rng.IntN(4) {
	case 0:
		kind, msg.From = "another sender", "security@bank.example"
	case 1:
		kind, msg.Body = "another content", "Your account is locked. Confirm your password at the link below."
	case 2:
		kind, msg.To = "another recipient", "someone-else@example.org"
	default:
		kind, msg.TransportID = "another ledger's copy", ledger.NewTransportID(fmt.Sprintf("%016x", w.rng.Uint64()), at.Number)
	}
	before, err := w.mb.Count(w.ctx, testmailbox.Filter{MessageID: msg.TransportID})
	if err != nil {
		w.t.Fatal(err)
	}
	_, sendErr := w.plain.Send(w.ctx, msg)
	after, err := w.mb.Count(w.ctx, testmailbox.Filter{MessageID: msg.TransportID})
	if err != nil {
		w.t.Fatal(err)
	}
	w.nemesis("look-alike, " + kind)
	w.logf("look-alike of %s attempt %d (%s, Message-ID %s) stored: %d (%v)", key, at.Number, kind, msg.TransportID, after-before, errWord(sendErr))
	if after > before {
		w.foreign[key] = append(w.foreign[key], msg.TransportID)
	}
}

// budgetIgnored is a destination that does not hold its commit point to
// the send's budget: it sends under a context without the deadline or the
// cancellation, so an executor that stood still past its lease still
// writes its final ".".
type budgetIgnored struct{ *smtpdest.LookingDestination }

func (b budgetIgnored) Send(ctx context.Context, msg destination.Message) (destination.Receipt, error) {
	return b.LookingDestination.Send(context.WithoutCancel(ctx), msg)
}

// noSettleTime is a wrapper that declares no settle time, nor does its
// kind: absence is concluded as soon as the lease ran out, while a relay
// may still hold the message.
type noSettleTime struct{ *smtpdest.LookingDestination }

func (noSettleTime) SettleTime() time.Duration { return 0 }

func (noSettleTime) DefaultSettleTime() time.Duration { return 0 }

// idOnlyRecords judges a found message by its Message-ID alone: whatever
// carries the attempt's Message-ID is reported with the attempt's
// recipient, sender and content, as if they had been compared.
type idOnlyRecords struct {
	destination.Records
	w *searchWorld
}

func (r idOnlyRecords) Lookup(ctx context.Context, q destination.LookupQuery) (destination.LookupResult, error) {
	res, err := r.Records.Lookup(ctx, q)
	atts, aerr := r.w.l.Attempts(ctx, q.ActionKey)
	if err != nil || aerr != nil {
		return res, errors.Join(err, aerr)
	}
	for _, at := range atts {
		for i, m := range res.Messages {
			if at.MessageID == q.MessageID && m.MessageID == q.MessageID {
				res.Messages[i].Recipients, res.Messages[i].Sender, res.Messages[i].ContentDigest = []string{at.Recipient}, at.Sender, at.ContentDigest
			}
		}
	}
	return res, nil
}

// attemptPart is the "-a<N>@" of a Message-ID the gate drew.
var attemptPart = regexp.MustCompile(`-a[0-9]+@`)

// computedIDRecords is reconciliation under computed Message-IDs: the id
// was a function of the action key and the attempt number, so every
// ledger's attempt N of a key carried the same one. A found message with
// the key and the attempt number of the query is reported under the
// queried Message-ID.
type computedIDRecords struct{ destination.Records }

func (r computedIDRecords) Lookup(ctx context.Context, q destination.LookupQuery) (destination.LookupResult, error) {
	res, err := r.Records.Lookup(ctx, q)
	want := attemptPart.FindString(q.MessageID)
	for i, m := range res.Messages {
		if want != "" && m.ActionKey == q.ActionKey && attemptPart.FindString(m.MessageID) == want {
			res.Messages[i].MessageID = q.MessageID
		}
	}
	return res, err
}

// droppingLateReports is the ledger's recording as it was: a report for an
// attempt already settled left a trace only when it was an acceptance.
func droppingLateReports(w *searchWorld) lateRecorder {
	return func(ctx context.Context, transportID string, o destination.Outcome, response string) (ledger.Action, error) {
		for _, key := range w.keys {
			atts, err := w.l.Attempts(ctx, key)
			if err != nil {
				continue
			}
			for _, at := range atts {
				if at.TransportID == transportID && at.Outcome != "" && o != destination.OutcomeAccepted {
					return w.l.Action(ctx, key) // already settled: dropped
				}
			}
		}
		return w.l.RecordOutcome(ctx, transportID, o, response)
	}
}

// A restore is a time machine: the ledger forgets what it did after the
// backup, the mailbox keeps it. The restore nemesis takes backups at
// random points and puts one back, three ways an operator does: `ledger
// restore` without --discard-newer over a ledger that moved on (refused,
// nothing changed), with --discard-newer, and a copy put back by hand,
// refused by the workflows' open until `ledger mark-restored`. SQLite only: a PostgreSQL ledger is
// restored with the server's tools, which the search does not drive.

// searchBackup is one backup the search took.
type searchBackup struct {
	path string
	info ledger.BackupInfo
	life int // the world's restores when it was taken
}

// keptBackups is how many backups the search keeps to choose from: old
// enough ones to go back far, few enough that a long run's disk stays
// small.
const keptBackups = 4

// open opens the ledger at w.path as the world does.
func (w *searchWorld) open() (*ledger.Ledger, error) {
	return ledger.Open(w.path, ledger.WithClock(w.clock), ledger.WithLease(searchLease))
}

// opBackup takes a backup with the ledger's own online copy, whatever is in
// flight (an executor standing still holds no lock).
func (w *searchWorld) opBackup() {
	if !w.file {
		return
	}
	dst := filepath.Join(w.dir, fmt.Sprintf("backup-%d.db", w.count[nemesisPrefix+"backup"]))
	info, err := w.l.Backup(w.ctx, dst, false)
	if err != nil {
		w.t.Fatalf("backup to %s: %v", dst, err)
	}
	w.nemesis("backup")
	w.backups = append(w.backups, searchBackup{path: dst, info: info, life: w.life})
	if len(w.backups) > keptBackups {
		os.Remove(w.backups[0].path)
		w.backups = w.backups[1:]
	}
	w.logf("backup %s: history line %d, generation %d, %d actions", filepath.Base(dst), info.Point, info.Generation, info.Actions)
}

// lastLine is the ledger's newest history line.
func (w *searchWorld) lastLine() int64 {
	evs, err := w.l.History(w.ctx, ledger.HistoryFilter{Limit: 1, Newest: true})
	if err != nil {
		w.t.Fatalf("read the history: %v", err)
	}
	if len(evs) == 0 {
		return 0
	}
	return evs[0].ID
}

// remember keeps every attempt recorded in this life of the ledger (since
// the last restore), before a restore may make the ledger forget them: the
// checker counts their arrivals too.
func (w *searchWorld) remember() {
	evs, err := w.l.History(w.ctx, ledger.HistoryFilter{AfterID: w.scanned})
	if err != nil {
		w.t.Fatalf("read the history: %v", err)
	}
	seen := map[string]bool{}
	for _, ev := range evs {
		w.scanned = max(w.scanned, ev.ID)
		if ev.Kind != ledger.EvAttemptStarted || seen[ev.ActionKey] {
			continue
		}
		seen[ev.ActionKey] = true
		atts, err := w.l.Attempts(w.ctx, ev.ActionKey)
		if err != nil {
			w.t.Fatalf("attempts of %s: %v", ev.ActionKey, err)
		}
		for _, at := range atts {
			if !w.lostIDs[at.MessageID] {
				w.lostIDs[at.MessageID] = true
				w.lost[at.ActionKey] = append(w.lost[at.ActionKey], at)
			}
		}
	}
}

// opRestore puts a backup back while no executor stands still and nothing
// is in flight (the search's sends have ended; a relay may still hold a
// message, which is what the restore's settle time is for). The workflows
// are stopped first: the ledger is closed, and opened again after.
func (w *searchWorld) opRestore() {
	if !w.file || w.paused != nil || len(w.backups) == 0 {
		return
	}
	b := w.backups[w.rng.IntN(len(w.backups))]
	if w.rng.IntN(2) == 0 {
		w.sendBeforeRestore()
	}
	// The ledger holds history the backup does not: it moved on since, or
	// it is another life's (a restore since wrote lines the backup lacks).
	last := w.lastLine()
	newer := b.life != w.life || last > b.info.Point
	lin, err := w.l.Lineage(w.ctx)
	if err != nil {
		w.t.Fatal(err)
	}
	w.remember()
	// Putting a copy back takes a moment: two restores never begin a
	// generation at the same instant, which is how the ledger tells two
	// lives of one generation number apart.
	w.advance(time.Second)
	mode := w.rng.IntN(3)
	if err := w.l.Close(); err != nil {
		w.t.Fatalf("close the ledger before the restore: %v", err)
	}
	name := filepath.Base(b.path)
	restored := true
	switch mode {
	case 0:
		w.nemesis("restore without --discard-newer")
		digest := fileDigest(w.t, w.path)
		info, err := ledger.RestoreWith(w.ctx, w.path, b.path, ledger.RestoreOptions{Actor: "ops", Reason: "the search restores", Clock: w.clock})
		switch {
		case newer && !errors.Is(err, ledger.ErrNewerHistory):
			w.problem("restore from %s over a ledger that moved on (line %d, the backup's %d, life %d, the backup's %d) was not refused as newer history: %v",
				name, last, b.info.Point, w.life, b.life, err)
		case newer && fileDigest(w.t, w.path) != digest:
			w.problem("the refused restore from %s changed the ledger file", name)
		case !newer && err != nil:
			w.problem("restore from %s, the ledger as it was, was refused: %v", name, err)
		}
		restored = err == nil
		if restored {
			w.count["restore without --discard-newer: taken, nothing newer"]++
		} else {
			w.count["restore without --discard-newer: refused"]++
		}
		w.logf("restore from %s (newer history: %v) → %v (discarded %s)", name, newer, errWord(err), info.Discarded)
	case 1:
		w.nemesis("restore --discard-newer")
		if w.putBack != nil {
			restored = w.putBackDouble(b.path)
			break
		}
		info, err := ledger.RestoreWith(w.ctx, w.path, b.path, ledger.RestoreOptions{Actor: "ops", Reason: "the search restores",
			DiscardNewer: true, Clock: w.clock})
		w.logf("restore --discard-newer from %s (newer history: %v) → %v (discarded %s; %d unverified)",
			name, newer, errWord(err), info.Discarded, info.Mark.UnverifiedActions)
		if err != nil {
			w.problem("restore --discard-newer from %s: %v", name, err)
			restored = false
		} else if newer != !info.Discarded.Empty() {
			w.problem("restore --discard-newer from %s discarded %s, although the ledger held newer history: %v", name, info.Discarded, newer)
		}
	default:
		w.nemesis("hand copy and mark-restored")
		if w.putBack != nil {
			restored = w.putBackDouble(b.path)
			break
		}
		if err := copyBackupByHand(b.path, w.path); err != nil {
			w.t.Fatalf("copy %s over the ledger: %v", name, err)
		}
	}
	if mode == 2 && w.putBack == nil {
		w.markHandCopy(name, newer)
	}
	if w.l, err = w.open(); err != nil {
		w.t.Fatalf("open the ledger after the restore: %v", err)
	}
	if !restored {
		return
	}
	after, err := w.l.Lineage(w.ctx)
	if err != nil {
		w.t.Fatal(err)
	}
	if mode < 2 && w.putBack == nil && after.Generation <= lin.Generation {
		w.problem("restore from %s left generation %d, the ledger it replaced had %d: generations repeat", name, after.Generation, lin.Generation)
	}
	w.life++
	w.scanned = w.lastLine()
	w.restoredAt = w.clock.Now()
}

// markHandCopy is the operator after a backup was copied over the ledger
// by hand: the copy still carries its backup mark, so the workflows'
// open is refused (every write is) and the file left as it was, until
// mark-restored says what it is.
func (w *searchWorld) markHandCopy(name string, newer bool) {
	digest := fileDigest(w.t, w.path)
	l, err := w.open()
	switch {
	case !errors.Is(err, ledger.ErrBackup):
		w.problem("a backup copied into place (%s) was opened for writing before it was marked restored: %v", name, err)
		if l != nil {
			l.Close()
		}
	case fileDigest(w.t, w.path) != digest:
		w.problem("the refused open of a backup copied into place (%s) changed the file", name)
	default:
		w.count["backup copied into place: refused until marked restored"]++
	}
	if l, err = ledger.Open(w.path, ledger.ToMarkRestored(), ledger.WithClock(w.clock), ledger.WithLease(searchLease)); err != nil {
		w.t.Fatalf("open the copy of %s to mark it restored: %v", name, err)
	}
	m, err := l.MarkRestored(w.ctx, "ops", "a copy put back by hand")
	w.logf("copy %s over the ledger by hand (newer history: %v); refused until marked; mark-restored → generation %d, %d unverified: %v",
		name, newer, m.Generation, m.UnverifiedActions, errWord(err))
	if err != nil {
		w.problem("mark-restored after a hand copy of %s: %v", name, err)
	}
	if err := l.Close(); err != nil {
		w.t.Fatalf("close the ledger marked restored: %v", err)
	}
}

// sendBeforeRestore is the send the restore forgets: the disk dies right
// after the newest approved action was sent, now and then through the relay
// that holds the final dot, so that its message is still on its way when
// the backup is put back.
func (w *searchWorld) sendBeforeRestore() {
	key := w.approvedKey(w.pick(w.keys))
	if key == "" {
		return
	}
	w.nemesis("send just before the restore")
	if w.rng.IntN(3) == 0 {
		w.opRelayHold(key)
		return
	}
	a := w.action(key)
	_, err := w.l.Execute(w.ctx, ledger.ExecuteRequest{Key: key, Executor: w.owner(a.TaskID), Reread: w.reread(key, false)}, w.dest)
	after := w.action(key)
	w.count["send"]++
	w.logf("send %s by %s just before the restore %s → %s: %v", key, w.owner(a.TaskID), a.State, after.State, errWord(err))
	w.checkAgreement("send", key, err, after)
}

// verifiedFirst is an executor that begins its attempt itself looking the
// action up first, as Execute does, when a restore left it unverified; it
// reports whether the attempt may begin.
func (w *searchWorld) verifiedFirst(req ledger.ExecuteRequest, dest destination.Destination) bool {
	_, err := w.l.VerifyRestored(w.ctx, req, dest)
	if err == nil {
		return true
	}
	w.count["send"]++
	after := w.action(req.Key)
	w.logf("send %s by %s: looked up after the restore first: %s/%s: %v", req.Key, req.Executor, after.State, after.HoldCause, errWord(err))
	w.checkAgreement("send", req.Key, err, after)
	return false
}

// putBackDouble puts the backup at from back through a double.
func (w *searchWorld) putBackDouble(from string) bool {
	err := w.putBack(w, from)
	w.logf("put %s back (a double) → %v", filepath.Base(from), errWord(err))
	return err == nil
}

// copiedUnmarked is the old defect: a backup put back and not marked
// restored, written by a gate that cannot tell it from the live ledger,
// so it trusts a past the world has moved on from. The gate now refuses
// every write to a file its backup marked; erasing the mark stands for
// the gate without that refusal (and for a hand copy of the live file,
// which carries no mark).
func copiedUnmarked(w *searchWorld, from string) error {
	if err := copyBackupByHand(from, w.path); err != nil {
		return err
	}
	db, err := sql.Open("sqlite3", "file:"+w.path)
	if err != nil {
		return err
	}
	_, err = db.Exec(`UPDATE ledger_identity SET backup_point = 0, backup_at = 0`)
	return errors.Join(err, db.Close())
}

// copyBackupByHand is an operator's cp of a backup over a stopped ledger:
// the copy's pages, and no WAL or index of the ledger it replaced.
func copyBackupByHand(from, path string) error {
	data, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	for _, suffix := range []string{"-wal", "-shm"} {
		if err := os.Remove(path + suffix); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return os.WriteFile(path, data, 0o600)
}

func fileDigest(t *testing.T, path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%x", sha256.Sum256(data))
}

// restoreHold reports whether a is held by a restore's lookup: found at
// its destination, or not verifiable there.
func restoreHold(a ledger.Action) bool {
	return a.State == ledger.StateHeld && (a.HoldCause == ledger.HoldFoundAfterRestore || a.HoldCause == ledger.HoldUnverified)
}

// decideRestoreHold is a person deciding a restore's hold by looking in the
// mailbox for the action's own messages, of every attempt it made, those
// the restored ledger forgot among them (a person sees what arrived, from
// the gate's sender with its content, whatever the ledger remembers):
// arrived → cancelled; nothing there once what the forgotten history sent
// can no longer land → released; before then they come back later.
func (w *searchWorld) decideRestoreHold(key string, a ledger.Action) {
	if n := w.ownArrivals(key); n > 0 {
		after, err := w.l.Cancel(w.ctx, key, "ops", "its message arrived before the restore")
		w.count["restore hold: cancelled, arrived"]++
		w.logf("%s held %s: %d of its messages arrived → cancel: %s: %v", key, a.HoldCause, n, after.State, errWord(err))
		return
	}
	if until := w.restoredAt.Add(searchLease + w.settle); w.clock.Now().Before(until) {
		w.count["restore hold: waits"]++
		w.logf("%s held %s: nothing of it arrived, but what was sent before the restore may land until %s: not yet",
			key, a.HoldCause, until.Format(time.TimeOnly))
		return
	}
	after, err := w.l.ReleaseHold(w.ctx, key, "ops", "none of its messages arrived")
	w.count["restore hold: released"]++
	w.logf("%s held %s: nothing of it arrived → release-hold: %s: %v", key, a.HoldCause, after.State, errWord(err))
}

// ownArrivals counts the stored messages that are the own of any attempt
// of key, the ledger's and those a restore made it forget.
func (w *searchWorld) ownArrivals(key string) int {
	cur, forgotten := w.arrivalsOf(key)
	return cur + forgotten
}

// arrivalsOf counts key's own arrivals: of the attempts the ledger has,
// and of those only a discarded history had.
func (w *searchWorld) arrivalsOf(key string) (current, forgotten int) {
	atts, err := w.l.Attempts(w.ctx, key)
	if err != nil && !errors.Is(err, ledger.ErrNotFound) {
		w.t.Fatalf("attempts of %s: %v", key, err)
	}
	known := map[string]bool{}
	for _, at := range atts {
		known[at.MessageID] = true
		n, err := proof.OwnArrivals(w.ctx, w.arrived, at)
		if err != nil {
			w.t.Fatal(err)
		}
		current += n
	}
	for _, at := range w.lost[key] {
		if known[at.MessageID] {
			continue
		}
		n, err := proof.OwnArrivals(w.ctx, w.arrived, at)
		if err != nil {
			w.t.Fatal(err)
		}
		forgotten += n
	}
	return current, forgotten
}

// checkForgotten adds to v what proof.CheckByMessageID cannot see after a
// restore: the arrivals of attempts the restored ledger forgot, which it
// counted as foreign. An action whose own messages, remembered or not,
// arrived more than once was sent twice.
func (w *searchWorld) checkForgotten(v *proof.EvidenceVerdict) {
	keys := make([]string, 0, len(w.lost))
	for k := range w.lost {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, key := range keys {
		cur, forgotten := w.arrivalsOf(key)
		w.forgotten += forgotten
		v.Foreign -= forgotten
		if cur+forgotten > 1 && cur <= 1 { // more than one among the current alone is a duplicate already
			v.Duplicates = append(v.Duplicates, fmt.Sprintf("%s: %d arrivals of its messages, %d of them of attempts a restore discarded",
				key, cur+forgotten, forgotten))
		}
	}
	sort.Strings(v.Duplicates)
}

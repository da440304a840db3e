package scenarios

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"gatehouse/destination"
	smtpdest "gatehouse/destination/smtp"
	"gatehouse/ledger"
)

// PausePoints are where a pause_executor step holds an executor still, in
// the words of docs/scenarios.md, and the SMTP phase each names.
var PausePoints = []string{"before_data", "before_final_dot"}

var pausePhases = map[string]smtpdest.Phase{
	"before_data":      smtpdest.PhaseData,
	"before_final_dot": smtpdest.PhaseCommit,
}

// pauseWords say where an executor stands still, for step details.
var pauseWords = map[string]string{
	"before_data":      "as it sends DATA to wait for the mail server's 354",
	"before_final_dot": `with its message written and the final "." (the commit point) not yet sent`,
}

// pausedExecutor is an executor a pause_executor step holds still in the
// middle of its send, as a SIGSTOP, a long garbage-collection pause or a
// stalled virtual machine would. To the gate it is another process: it has
// its own ledger handle and its own connection to the mail server, and it
// records its outcome itself once resume_executor lets it go on.
type pausedExecutor struct {
	actor   string
	point   string
	l       *ledger.Ledger
	dest    *smtpdest.Destination
	att     ledger.Attempt
	reached chan struct{} // closed when the send stands at the point
	resume  chan struct{} // closed to let it go on
	wakeup  sync.Once
	done    chan struct{} // closed once its outcome is recorded
	d       ledger.Delivery
	recErr  error
}

// wake lets the executor go on (once).
func (p *pausedExecutor) wake() { p.wakeup.Do(func() { close(p.resume) }) }

// close frees what the executor holds; its send must have ended.
func (p *pausedExecutor) close() error {
	return errors.Join(p.dest.Close(), p.l.Close())
}

// doPauseExecutor starts the actor's send of the action as an executor of
// its own and returns once that send stands still at the step's point,
// with its attempt recorded and its lease running. The send goes on at
// the action's resume_executor step. A send that ends before it reaches
// the point (refused by the gate, say) is reported as a send would be.
func (r *Run) doPauseExecutor(ctx context.Context, s *Step, _ barrier) (outcome, error) {
	a := r.action(s.Action)
	p := &pausedExecutor{actor: s.Actor, point: s.Point, reached: make(chan struct{}), resume: make(chan struct{}), done: make(chan struct{})}
	phase := pausePhases[s.Point]
	var held sync.Once
	dest, err := smtpdest.New(r.env.mb.Target(), smtpdest.WithDataTimeout(2*time.Second), smtpdest.WithClock(r.env.clock),
		smtpdest.WithPause(func(_ context.Context, at smtpdest.Phase) {
			if at == phase {
				held.Do(func() {
					close(p.reached)
					<-p.resume
				})
			}
		}))
	if err != nil {
		return outcome{}, fmt.Errorf("pause_executor: connect to test mailbox: %w", err)
	}
	lk, ok := dest.Looking()
	if !ok {
		dest.Close()
		return outcome{}, errors.New("pause_executor: the destination offers no lookup")
	}
	p.dest = dest
	// A process that was already running: it recovers nothing.
	if p.l, err = ledger.Open(r.env.path, ledger.WithClock(r.env.clock), ledger.WithLease(Lease), ledger.WithoutRecovery()); err != nil {
		dest.Close()
		return outcome{}, fmt.Errorf("pause_executor: open the executor's ledger: %w", err)
	}
	req := ledger.ExecuteRequest{Key: a.key, Executor: s.Actor, Reread: r.readMaterial(a), Endpoint: destination.EndpointAt(ctx, lk)}
	att, msg, err := p.l.BeginAttempt(ctx, req)
	if err != nil {
		if cerr := p.close(); cerr != nil {
			return outcome{}, cerr
		}
		return fromErr(err, ClassOK)
	}
	p.att = att
	// The send outlives this step: it must not end with the step's context.
	bg := context.WithoutCancel(ctx)
	go func() {
		defer close(p.done)
		p.d = p.l.Deliver(bg, att, msg, lk)
		_, p.recErr = p.l.RecordDelivery(bg, att, p.d)
	}()
	select {
	case <-p.reached:
	case <-p.done:
		if err := p.close(); err != nil {
			return outcome{}, err
		}
		if errors.Is(p.recErr, ledger.ErrNotRecorded) {
			return outcome{}, fmt.Errorf("record outcome of %s: %w", a.key, p.recErr)
		}
		return outcome{class: outcomeClass(p.d.Outcome),
			detail: fmt.Sprintf("attempt %d: %s before it reached %s", att.Number, p.d.Outcome, s.Point)}, nil
	}
	r.paused[s.Action] = p
	return outcome{class: ClassOK, detail: fmt.Sprintf("%s's executor stands still %s, during attempt %d; its lease ends at %s",
		s.Actor, pauseWords[s.Point], att.Number, att.LeaseUntil.Format(time.TimeOnly))}, nil
}

// doResumeExecutor lets the action's paused executor go on, waits until it
// has recorded its outcome and reports what its send did.
func (r *Run) doResumeExecutor(_ context.Context, s *Step, _ barrier) (outcome, error) {
	p := r.paused[s.Action]
	if p == nil {
		// Its pause_executor step was refused by the gate or ended before
		// it reached its point: there is nobody to wake.
		return outcome{class: ClassRefused, detail: "no executor of " + s.Action + " is paused: its pause_executor step ended without standing still"}, nil
	}
	delete(r.paused, s.Action)
	woke := r.env.clock.Now()
	p.wake()
	<-p.done
	if err := p.close(); err != nil {
		return outcome{}, err
	}
	if errors.Is(p.recErr, ledger.ErrNotRecorded) {
		return outcome{}, fmt.Errorf("record outcome of %s: %w", r.action(s.Action).key, p.recErr)
	}
	when := "within its lease"
	if !woke.Before(p.att.LeaseUntil) {
		when = "after its lease had ended at " + p.att.LeaseUntil.Format(time.TimeOnly)
	}
	// The gate gives a send three quarters of its lease (ledger.Deliver).
	budgetEnd := p.att.StartedAt.Add(Lease * 3 / 4)
	what := string(p.d.Outcome)
	switch {
	case p.d.Outcome == destination.OutcomeAccepted:
		what = "the mail server accepted it"
	case p.d.Outcome == destination.OutcomeNotDelivered && !woke.Before(budgetEnd):
		what = fmt.Sprintf("nothing was committed: its budget ended at %s, and the fence refuses a send that late", budgetEnd.Format(time.TimeOnly))
	}
	return outcome{class: outcomeClass(p.d.Outcome),
		detail: fmt.Sprintf("%s's executor woke %s; attempt %d: %s", p.actor, when, p.att.Number, what)}, nil
}

// wakePaused lets every executor still paused go on and waits for each,
// so that none outlives its rehearsal.
func (r *Run) wakePaused() error {
	var errs []error
	for _, name := range sortedKeys(r.paused) {
		p := r.paused[name]
		p.wake()
		<-p.done
		errs = append(errs, p.close())
		delete(r.paused, name)
	}
	return errors.Join(errs...)
}

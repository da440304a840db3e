package scenarios

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"gatehouse/destination"
	"gatehouse/destination/httpdest"
	"gatehouse/fakes"
	"gatehouse/ledger"
	"gatehouse/testmailbox"
)

// actionState is one business action as the run knows it: its definition,
// its key and its current content (revise changes it).
type actionState struct {
	name     string
	taskID   string
	customer string
	event    string
	typ      string
	target   string
	revision int
	material []string
	key      string
	to       string
	subject  string
	body     string
	// refund is set for a refund action: the write to the payments fake.
	refund *refund
}

// destination is where the action goes: the mailbox, or the payments
// fake under the refund's duplicate control.
func (r *Run) destination(a *actionState) (destination.Destination, error) {
	if a.refund == nil {
		return r.env.dest, nil
	}
	return r.env.paymentsDest(a.refund.profile)
}

func (a *actionState) proposal(task Task, actor string, ep destination.Endpoint) ledger.Proposal {
	return ledger.Proposal{
		Task:     ledger.TaskRef{ID: a.taskID, Customer: a.customer, Subject: task.Subject},
		Customer: a.customer, Event: a.event, ActionType: a.typ, Target: a.target, Revision: a.revision,
		Recipient: a.to, Subject: a.subject, Body: a.body, Actor: actor,
		Destination: ep.Destination, Lookup: ep.Lookup, DestinationSettings: ep.Settings, Settle: &ep.Settle, Sender: sender,
	}
}

// barrier is called by a send between deciding and sending; in a parallel
// block it waits until every racing step has decided, so the race is at the
// gate's decision and its result does not depend on network timing.
type barrier func()

func noBarrier() {}

// verbFunc performs one verb.
type verbFunc func(r *Run, ctx context.Context, s *Step, wait barrier) (outcome, error)

var verbFuncs map[string]verbFunc

func init() {
	verbFuncs = map[string]verbFunc{
		"propose": (*Run).doPropose, "revise": (*Run).doPropose, "approve": (*Run).doApprove,
		"send": (*Run).doSend, "deliver_event": (*Run).doDeliver, "cancel": (*Run).doCancel,
		"view": (*Run).doView, "leave": (*Run).doLeave, "claim": (*Run).doClaim,
		"take_over": (*Run).doTakeOver, "release": (*Run).doRelease, "complete_task": (*Run).doComplete,
		"set": (*Run).doSet, "source_down": (*Run).doSource, "source_up": (*Run).doSource,
		"mailbox_fault": (*Run).doFault, "crash": (*Run).doCrash, "restart": (*Run).doRestart,
		"reconcile": (*Run).doReconcile, "hold": (*Run).doHold, "release_hold": (*Run).doReleaseHold,
		"correct": (*Run).doCorrect, "stop": (*Run).doStop, "resume": (*Run).doResume, "wait": (*Run).doWait,
		"import_audience": (*Run).doImportAudience, "remove_recipient": (*Run).doRemoveRecipient,
		"approve_audience": (*Run).doApproveAudience, "send_audience": (*Run).doSendAudience,
		"run_workflow": (*Run).doRunWorkflow, "start_workflow": (*Run).doStartWorkflow, "await_workflow": (*Run).doAwaitWorkflow,
		"await_state":    (*Run).doAwaitState,
		"pause_executor": (*Run).doPauseExecutor, "resume_executor": (*Run).doResumeExecutor,
		"payments_fault": (*Run).doPaymentsFault, "payments_set": (*Run).doPaymentsSet,
	}
}

func (r *Run) doPropose(ctx context.Context, s *Step, _ barrier) (outcome, error) {
	a := r.action(s.Action)
	dest, err := r.destination(a)
	if err != nil {
		return outcome{}, err
	}
	r.mu.Lock()
	a.to, a.subject, a.body = or(s.To, a.to), or(s.Subject, a.subject), or(s.Body, a.body)
	if a.refund != nil && s.Amount > 0 {
		a.refund.amount = s.Amount
	}
	p := a.proposal(r.tasks[a.taskID], s.Actor, destination.EndpointOf(dest))
	if a.refund != nil {
		p.Recipient, p.Subject, p.Body, p.Sender = "", "", "", ""
		if p.Request, err = a.request(dest.(*httpdest.Destination).Profile); err != nil {
			r.mu.Unlock()
			return outcome{}, fmt.Errorf("refund %s: %w", a.name, err)
		}
	}
	r.mu.Unlock()
	_, err = r.env.l.Propose(ctx, p)
	return fromErr(err, ClassOK)
}

func (r *Run) doApprove(ctx context.Context, s *Step, _ barrier) (outcome, error) {
	a := r.action(s.Action)
	_, err := r.env.l.Approve(ctx, a.key, s.Actor, r.readMaterial(a))
	return fromErr(err, ClassOK)
}

// doSend runs the gate's own send path (BeginAttempt, Deliver,
// RecordDelivery, which Execute composes); the only addition is the barrier
// between deciding and delivering.
func (r *Run) doSend(ctx context.Context, s *Step, wait barrier) (outcome, error) {
	a := r.action(s.Action)
	dest, err := r.destination(a)
	if err != nil {
		return outcome{}, err
	}
	req := ledger.ExecuteRequest{Key: a.key, Executor: s.Actor, Reread: r.readMaterial(a),
		Endpoint: destination.EndpointAt(ctx, dest)}
	att, msg, err := r.env.l.BeginAttempt(ctx, req)
	wait()
	if err != nil {
		return fromErr(err, ClassOK)
	}
	d := r.env.l.Deliver(ctx, att, msg, dest)
	res, err := r.env.l.RecordDelivery(ctx, att, d)
	if errors.Is(err, ledger.ErrNotRecorded) {
		return outcome{}, fmt.Errorf("record outcome of %s: %w", a.key, err)
	}
	out := outcome{class: outcomeClass(d.Outcome)}
	if a.refund != nil && d.Outcome != destination.OutcomeAccepted && res.Action.State == ledger.StateHeld {
		// A contradiction, or a probe that did not reach the provider:
		// the state says more than the reply.
		out.class = ClassHeld
	}
	if d.Err != nil {
		out.detail = fmt.Sprintf("attempt %d: %s", msg.Attempt, d.Outcome)
	}
	return out, nil
}

// doDeliver is a workflow receiving the business event (again): it
// proposes the action and, with an approver, approves and sends it at once.
func (r *Run) doDeliver(ctx context.Context, s *Step, wait barrier) (outcome, error) {
	if out, err := r.doPropose(ctx, s, noBarrier); err != nil || out.class != ClassOK || s.Approver == "" {
		return out, err
	}
	approve := *s
	approve.Actor = s.Approver
	if out, err := r.doApprove(ctx, &approve, noBarrier); err != nil || out.class != ClassOK {
		return out, err
	}
	return r.doSend(ctx, s, wait)
}

func (r *Run) doCancel(ctx context.Context, s *Step, _ barrier) (outcome, error) {
	_, err := r.env.l.Cancel(ctx, r.action(s.Action).key, s.Actor, s.Reason)
	return fromErr(err, ClassOK)
}

func (r *Run) taskRef(id string) ledger.TaskRef {
	t := r.tasks[id]
	return ledger.TaskRef{ID: t.ID, Customer: t.Customer, Subject: t.Subject}
}

func (r *Run) doView(ctx context.Context, s *Step, _ barrier) (outcome, error) {
	err := r.env.l.View(ctx, r.taskRef(s.Task), s.Actor, or(s.Kind, "viewer"), 5*time.Minute)
	if err == nil {
		err = r.env.desk.AddViewer(s.Task, s.Actor)
	}
	return fromErr(err, ClassOK)
}

func (r *Run) doLeave(ctx context.Context, s *Step, _ barrier) (outcome, error) {
	err := r.env.l.Leave(ctx, s.Task, s.Actor)
	if err == nil {
		err = r.env.desk.RemoveViewer(s.Task, s.Actor)
	}
	return fromErr(err, ClassOK)
}

// mirrorOwner copies the ledger's owner into the helpdesk after a change.
func (r *Run) mirrorOwner(t ledger.Task, err error) (outcome, error) {
	if err == nil {
		err = r.env.desk.Set(t.ID, fakes.FieldOwner, t.Owner)
	}
	return fromErr(err, ClassOK)
}

func (r *Run) doClaim(ctx context.Context, s *Step, _ barrier) (outcome, error) {
	return r.mirrorOwner(r.env.l.Claim(ctx, r.taskRef(s.Task), s.Actor))
}

func (r *Run) doTakeOver(ctx context.Context, s *Step, _ barrier) (outcome, error) {
	return r.mirrorOwner(r.env.l.TakeOver(ctx, r.taskRef(s.Task), s.Actor, s.Reason))
}

func (r *Run) doRelease(ctx context.Context, s *Step, _ barrier) (outcome, error) {
	return r.mirrorOwner(r.env.l.Release(ctx, s.Task, s.Actor, or(s.Reason, "released in the rehearsal")))
}

func (r *Run) doComplete(ctx context.Context, s *Step, _ barrier) (outcome, error) {
	err := r.env.l.Complete(ctx, s.Task, s.Actor)
	if err == nil {
		err = r.env.desk.Set(s.Task, fakes.FieldStatus, "completed")
	}
	return fromErr(err, ClassOK)
}

func (r *Run) doSet(_ context.Context, s *Step, _ barrier) (outcome, error) {
	var err error
	if s.Customer != "" {
		err = r.env.crm.Set(s.Customer, s.Field, s.Value)
	} else {
		err = r.env.desk.Set(s.Task, s.Field, s.Value)
	}
	return fromErr(err, ClassOK)
}

func (r *Run) doSource(_ context.Context, s *Step, _ barrier) (outcome, error) {
	r.env.setAvailable(s.Source, s.Do == "source_up")
	return outcome{class: ClassOK}, nil
}

func (r *Run) doFault(_ context.Context, s *Step, _ barrier) (outcome, error) {
	if err := r.env.fault(s); err != nil {
		return outcome{}, fmt.Errorf("mailbox fault: %w", err)
	}
	return outcome{class: ClassOK}, nil
}

// doCrash starts an attempt and abandons it at the named point, as an
// executor that dies would: nothing after that point happens, and the
// ledger is left with an attempt in flight.
func (r *Run) doCrash(ctx context.Context, s *Step, wait barrier) (outcome, error) {
	a := r.action(s.Action)
	dest, err := r.destination(a)
	if err != nil {
		return outcome{}, err
	}
	req := ledger.ExecuteRequest{Key: a.key, Executor: s.Actor, Reread: r.readMaterial(a),
		Endpoint: destination.EndpointAt(ctx, dest)}
	att, msg, err := r.env.l.BeginAttempt(ctx, req)
	wait()
	if err != nil {
		return fromErr(err, ClassOK)
	}
	// The executor dies between the gate's own steps: it delivers (or not)
	// and never records.
	switch s.Point {
	case "after_accept":
		if a.refund != nil {
			// The provider creates the refund and the connection drops
			// before its answer.
			if err := r.env.payments.QueueFault(fakes.PaymentsFault{Kind: fakes.PayCommitThenDrop}); err != nil {
				return outcome{}, fmt.Errorf("crash after accept: %w", err)
			}
			r.env.l.Deliver(ctx, att, msg, dest)
			break
		}
		// The mailbox stores the message and drops the connection before
		// its reply: the executor dies without learning the outcome.
		f := testmailbox.Fault{Kind: testmailbox.FaultAcceptThenDrop, Count: 1, To: msg.To}
		if err := r.env.mb.AddFault(f); err != nil {
			return outcome{}, fmt.Errorf("crash after accept: %w", err)
		}
		r.env.l.Deliver(ctx, att, msg, r.env.dest) // the executor is dead; nobody reads the reply
	case "before_record":
		if d := r.env.l.Deliver(ctx, att, msg, dest); d.Err != nil {
			return outcome{}, fmt.Errorf("crash before record: the send itself failed: %w", d.Err)
		}
	}
	return outcome{class: ClassOK, detail: fmt.Sprintf("executor %s died %s during attempt %d", s.Actor, strings.ReplaceAll(s.Point, "_", " "), att.Number)}, nil
}

func (r *Run) doRestart(ctx context.Context, _ *Step, _ barrier) (outcome, error) {
	keys, err := r.env.restart(ctx)
	if err != nil {
		return outcome{}, err
	}
	if len(keys) == 0 {
		return outcome{class: ClassOK, detail: "recovery found no attempt in flight"}, nil
	}
	return outcome{class: ClassOK, detail: "recovery marked unknown: " + strings.Join(r.names(keys), ", ")}, nil
}

func (r *Run) doReconcile(ctx context.Context, s *Step, _ barrier) (outcome, error) {
	a, err := r.env.l.Reconcile(ctx, ledger.ReconcileRequest{Key: r.action(s.Action).key, Actor: s.Actor, Open: r.env.records()})
	if err != nil {
		return fromErr(err, ClassOK)
	}
	return outcome{class: stateClass(a.State), detail: a.Reason}, nil
}

func (r *Run) doHold(ctx context.Context, s *Step, _ barrier) (outcome, error) {
	_, err := r.env.l.Hold(ctx, r.action(s.Action).key, s.Actor, s.Reason)
	return fromErr(err, ClassOK)
}

func (r *Run) doReleaseHold(ctx context.Context, s *Step, _ barrier) (outcome, error) {
	_, err := r.env.l.ReleaseHold(ctx, r.action(s.Action).key, s.Actor, s.Reason)
	return fromErr(err, ClassOK)
}

func (r *Run) doCorrect(ctx context.Context, s *Step, _ barrier) (outcome, error) {
	orig := r.action(s.Action)
	c := ledger.Correction{Original: orig.key, Actor: s.Actor, Reason: s.Reason,
		Recipient: s.To, Subject: or(s.Subject, orig.subject), Body: or(s.Body, orig.body)}
	a, err := r.env.l.Correct(ctx, c)
	if err != nil {
		return fromErr(err, ClassOK)
	}
	corr := *orig
	corr.name, corr.key, corr.revision = s.As, a.Key, a.Revision
	corr.to, corr.subject, corr.body = a.Recipient, a.Subject, a.Body
	r.mu.Lock()
	r.actions[s.As] = &corr
	r.mu.Unlock()
	return outcome{class: ClassOK, detail: "correction " + a.Key + " links to " + orig.key}, nil
}

func (r *Run) doStop(ctx context.Context, s *Step, _ barrier) (outcome, error) {
	return fromErr(r.env.l.Stop(ctx, s.Actor, s.Reason), ClassOK)
}

func (r *Run) doResume(ctx context.Context, s *Step, _ barrier) (outcome, error) {
	return fromErr(r.env.l.Resume(ctx, s.Actor, s.Reason), ClassOK)
}

func (r *Run) doWait(_ context.Context, s *Step, _ barrier) (outcome, error) {
	d, err := time.ParseDuration(s.For)
	if err != nil {
		return outcome{}, fmt.Errorf("wait: %w", err)
	}
	r.env.clock.Advance(d)
	return outcome{class: ClassOK}, nil
}

// readMaterial re-reads the action's material fields from the fakes, as a
// workflow must immediately before approval and before each send. A source
// that is down yields an unavailable read, which the gate holds on.
func (r *Run) readMaterial(a *actionState) []ledger.MaterialRead {
	var out []ledger.MaterialRead
	for _, m := range a.material {
		src, field, _ := strings.Cut(m, ".")
		id := a.customer
		if src == "helpdesk" {
			id = a.taskID
		}
		v, err := r.env.read(src, id, field)
		out = append(out, ledger.MaterialRead{Source: src, Field: field, Value: v,
			Unavailable: errors.Is(err, fakes.ErrSourceDown)})
	}
	return out
}

func or(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

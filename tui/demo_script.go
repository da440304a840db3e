package tui

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gatehouse/destination"
	"gatehouse/ledger"
)

// The demo's cast and task.
const (
	demoWorkflow = "ack-workflow"
	demoBea      = "bea"
	demoCarl     = "carl"
	demoTask     = "T-4711"
	demoCustomer = "cust-ada"
	demoReason   = "customer sent photos of the damage; I will answer personally"
)

var demoRef = ledger.TaskRef{ID: demoTask, Customer: demoCustomer, Subject: "My parcel arrived damaged"}

// presenceTTL keeps a viewer on the task for the length of a demonstration.
const presenceTTL = time.Hour

// demoEnv is what the demo acts on: its ledger and its destination.
type demoEnv struct {
	l    *ledger.Ledger
	dest destination.Destination
}

// demoStep is one scripted beat of the demonstration.
type demoStep struct {
	actor string // whose pane shows the result
	text  string // what happens, in plain words
	run   func(ctx context.Context, e demoEnv) error
}

var demoSteps = []demoStep{
	{demoWorkflow, "The acknowledgement workflow owns task T-4711; its reply is drafted and approved, waiting to be sent.",
		func(ctx context.Context, e demoEnv) error { return e.approvedReply(ctx, demoWorkflow, "reply_ack") }},
	{demoBea, "Bea opens the task. She shows as a viewer: presence is advisory, the workflow still owns the task.",
		func(ctx context.Context, e demoEnv) error { return e.view(ctx, demoBea) }},
	{demoCarl, "Carl opens it too and tries to claim it: refused, because the task already has an owner.",
		func(ctx context.Context, e demoEnv) error {
			if err := e.view(ctx, demoCarl); err != nil {
				return err
			}
			_, err := e.l.Claim(ctx, demoRef, demoCarl)
			return err
		}},
	{demoBea, "Bea takes ownership, with a reason. The workflow, the previous owner, is notified.",
		func(ctx context.Context, e demoEnv) error { return e.takeOver(ctx, demoBea, demoReason) }},
	{demoWorkflow, "The workflow tries to send its acknowledgement: the gate stops it, it no longer owns the task.",
		func(ctx context.Context, e demoEnv) error { return e.send(ctx, demoWorkflow, "reply_ack") }},
	{demoBea, "Bea writes her own answer, approves it and sends it. Exactly one message reaches the customer.",
		func(ctx context.Context, e demoEnv) error {
			if err := e.approvedReply(ctx, demoBea, "reply_personal"); err != nil {
				return err
			}
			return e.send(ctx, demoBea, "reply_personal")
		}},
}

func demoKey(actionType string) string {
	return ledger.Key(demoCustomer, "enquiry-4711", actionType, demoTask, 0)
}

var demoConsent = []ledger.MaterialRead{{Source: "crm", Field: "consent", Value: "yes"}}

// approvedReply claims the task when unowned and records an approved reply.
func (e demoEnv) approvedReply(ctx context.Context, actor, actionType string) error {
	if t, err := e.l.Task(ctx, demoTask); err != nil || t.Owner == "" {
		if _, err := e.l.Claim(ctx, demoRef, actor); err != nil {
			return err
		}
	}
	subject := map[string]string{"reply_ack": "We have received your enquiry",
		"reply_personal": "About your damaged parcel"}[actionType]
	a, err := e.l.Propose(ctx, ledger.Proposal{Task: demoRef, Customer: demoCustomer, Event: "enquiry-4711",
		ActionType: actionType, Target: demoTask, Recipient: "ada@example.com", Subject: subject,
		Body: "Hello Ada,\n\nthank you for writing to us.", Actor: actor,
		Destination: e.dest.Identity(), Lookup: destination.EndpointOf(e.dest).Lookup})
	if err != nil {
		return err
	}
	// The workflow's acknowledgement is approved by policy (a workflow
	// does not approve); Bea approves her own answer.
	approver := actor
	if actor == demoWorkflow {
		approver = demoPolicy
	}
	_, err = e.l.Approve(ctx, a.Key, approver, demoConsent)
	return err
}

// demoPolicy approves the workflow's acknowledgements under a policy.
const demoPolicy = "ack-policy"

// DemoTrainer is the person the demo registers its cast as.
const DemoTrainer = "trainer"

// RegisterDemoCast makes the demo's ledger a registered one: the workflow,
// Bea and Carl, the policy that approves acknowledgements on consent, and
// the trainer who holds admin and stop; so the demo runs under the
// permission table, as a production ledger would.
func RegisterDemoCast(ctx context.Context, l *ledger.Ledger) error {
	cast := []ledger.Actor{
		{ID: DemoTrainer, Kind: ledger.KindPerson, DisplayName: "the trainer", Roles: []ledger.Role{ledger.RoleAdmin, ledger.RoleStop}},
		{ID: demoWorkflow, Kind: ledger.KindWorkflow},
		{ID: demoBea, Kind: ledger.KindPerson, DisplayName: "Bea"},
		{ID: demoCarl, Kind: ledger.KindPerson, DisplayName: "Carl"},
		{ID: demoPolicy, Kind: ledger.KindPolicy},
	}
	for _, a := range cast {
		if _, err := l.ActorByID(ctx, a.ID); err == nil {
			continue
		}
		if _, err := l.AddActor(ctx, DemoTrainer, a); err != nil {
			return fmt.Errorf("register %s: %w", a.ID, err)
		}
	}
	if _, err := l.SetPolicy(ctx, DemoTrainer, ledger.ActionPolicy{ActionType: "reply_ack", PolicyApproves: true,
		Requires: map[string]string{"crm.consent": "yes"}}); err != nil {
		return err
	}
	if m, err := l.Mode(ctx); err != nil || m.Registered {
		return err
	}
	return l.Require(ctx, DemoTrainer, nil)
}

func (e demoEnv) view(ctx context.Context, actor string) error {
	return e.l.View(ctx, demoRef, actor, "viewer", presenceTTL)
}

func (e demoEnv) takeOver(ctx context.Context, actor, reason string) error {
	_, err := e.l.TakeOver(ctx, demoRef, actor, reason)
	return err
}

func (e demoEnv) send(ctx context.Context, actor, actionType string) error {
	_, err := e.l.Execute(ctx, ledger.ExecuteRequest{Key: demoKey(actionType), Executor: actor, Reread: demoConsent}, e.dest)
	return err
}

// demoState is what the panes show, read after every beat.
type demoState struct {
	task     ledger.Task
	viewers  map[string]bool
	notes    map[string][]ledger.Notification
	actions  []ledger.Action
	arrivals []Arrival
}

func readDemoState(ctx context.Context, l *ledger.Ledger, box Arrivals) (demoState, error) {
	st := demoState{viewers: map[string]bool{}, notes: map[string][]ledger.Notification{}}
	var err error
	st.task, err = l.Task(ctx, demoTask)
	if errors.Is(err, ledger.ErrNotFound) {
		st.arrivals, err = box.Arrivals(ctx) // before the first beat
		return st, err
	}
	if err != nil {
		return st, fmt.Errorf("read task: %w", err)
	}
	pres, err := l.Presence(ctx, demoTask)
	if err != nil {
		return st, fmt.Errorf("read presence: %w", err)
	}
	for _, p := range pres {
		st.viewers[p.Actor] = true
	}
	for _, who := range []string{demoWorkflow, demoBea, demoCarl} {
		if st.notes[who], err = l.Notifications(ctx, who); err != nil {
			return st, fmt.Errorf("read notifications: %w", err)
		}
	}
	if _, st.actions, err = l.ListActions(ctx, ledger.ActionFilter{TaskID: demoTask, Limit: 10}); err != nil {
		return st, fmt.Errorf("list actions: %w", err)
	}
	st.arrivals, err = box.Arrivals(ctx)
	return st, err
}

package tui

import (
	"context"
	"errors"
	"fmt"
	"strings"
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

// demoBeat is how far the pretend clock moves for each thing done, so the
// panes, the history and the mailbox tell the acts apart by their times.
const demoBeat = time.Minute

// demoEnv is what the demo acts on: its ledger and its destination.
type demoEnv struct {
	l    *ledger.Ledger
	dest destination.Destination
}

// demoNote is what a pane says one participant did, at the pretend time
// it was done: the act in a few words and, for the newest, the rest (a
// takeover's reason, the gate's refusal in its own words).
type demoNote struct {
	at      time.Time
	did     string
	more    string
	refused bool
}

// demoStep is one scripted beat of the demonstration. Its sentences are
// made from what the ledger shows, so a trainer's own act (a takeover
// before the script's) changes what the script says and does, never leaves
// it telling a story the ledger does not.
type demoStep struct {
	actor string
	// plan says what the beat will do, from the state before it ("next:").
	plan func(st demoState) string
	// run acts through the gate. skip, when not empty, says why nothing
	// was done: the ledger already shows what the beat was for.
	run func(ctx context.Context, e demoEnv, st demoState) (note demoNote, skip string, err error)
	// tell says what happened, from the state before and after and the
	// gate's answer.
	tell func(before, after demoState, err error) string
}

var demoSteps = []demoStep{
	{demoWorkflow,
		func(st demoState) string {
			if o := st.task.Owner; o != "" && o != demoWorkflow {
				return "The acknowledgement workflow drafts its reply and has it approved, although " + who(o) + " owns task " + demoTask + "."
			}
			return "The acknowledgement workflow owns task " + demoTask + "; its reply is drafted and approved, waiting to be sent."
		},
		func(ctx context.Context, e demoEnv, st demoState) (demoNote, string, error) {
			n := demoNote{did: "reply approved", more: "drafted the reply and approved it"}
			if st.task.Owner == "" {
				n.more = "claimed the task, drafted the reply and approved it"
			}
			if err := e.approvedReply(ctx, demoWorkflow, "reply_ack"); err != nil {
				return demoNote{did: "reply refused"}, "", err
			}
			return n, "", nil
		},
		func(_, after demoState, err error) string {
			switch o := after.task.Owner; {
			case err != nil:
				return "The acknowledgement workflow's reply was refused: " + err.Error() + "."
			case o == demoWorkflow:
				return "The acknowledgement workflow owns task " + demoTask + "; its reply is drafted and approved, waiting to be sent."
			default:
				return "The acknowledgement workflow drafted its reply and had it approved, but " + who(o) + " owns task " + demoTask + ": the approval is bound to " + o + " as owner."
			}
		}},
	{demoBea,
		func(st demoState) string {
			return "Bea opens the task. She shows as a viewer: presence is advisory, " + stillOwns(st, demoBea)
		},
		func(ctx context.Context, e demoEnv, _ demoState) (demoNote, string, error) {
			return demoNote{did: "opened the task", more: "a viewer: advisory, ownership does not change"}, "", e.view(ctx, demoBea)
		},
		func(_, after demoState, err error) string {
			if err != nil {
				return "Bea could not open the task: " + err.Error() + "."
			}
			return "Bea opens the task. She shows as a viewer: presence is advisory, " + stillOwns(after, demoBea)
		}},
	{demoCarl,
		func(st demoState) string {
			switch o := st.task.Owner; o {
			case demoCarl:
				return "Carl opens it too and claims it, although he owns it already."
			case "":
				return "Carl opens it too and claims it; nobody owns it."
			default:
				return "Carl opens it too and tries to claim it while " + who(o) + " owns it."
			}
		},
		func(ctx context.Context, e demoEnv, _ demoState) (demoNote, string, error) {
			if err := e.view(ctx, demoCarl); err != nil {
				return demoNote{did: "open refused"}, "", err
			}
			_, err := e.l.Claim(ctx, demoRef, demoCarl)
			if err != nil {
				return demoNote{did: "claim refused"}, "", err
			}
			return demoNote{did: "claimed the task", more: "opened it, then claimed it"}, "", nil
		},
		func(before, after demoState, err error) string {
			var oe *ledger.OwnershipError
			switch {
			case errors.As(err, &oe):
				return "Carl opens it too and tries to claim it: refused, because " + who(oe.Owner) + " already owns the task."
			case err != nil:
				return "Carl could not open the task: " + err.Error() + "."
			case before.task.Owner == demoCarl:
				return "Carl opens it too and claims it: he owns it already, so nothing changes."
			}
			return "Carl opens it too and claims it: nobody owned it, so he owns it now."
		}},
	{demoBea,
		func(st demoState) string {
			switch o := st.task.Owner; o {
			case demoBea:
				return "Bea already owns the task, so the script does not take it over a second time."
			case "":
				return "Bea takes ownership, with a reason; nobody owned the task, so nobody is notified."
			default:
				return "Bea takes ownership, with a reason. " + capital(who(o)) + ", the previous owner, is notified."
			}
		},
		func(ctx context.Context, e demoEnv, st demoState) (demoNote, string, error) {
			if st.task.Owner == demoBea {
				return demoNote{}, "already the owner", nil
			}
			return demoNote{did: "took over", more: demoReason}, "", e.takeOver(ctx, demoBea, demoReason)
		},
		func(before, after demoState, err error) string {
			switch prev := before.task.Owner; {
			case err != nil:
				return "Bea's takeover was refused: " + err.Error() + "."
			case prev == demoBea:
				return "Bea already owns the task: " + takeoverWords(after, demoBea) + ". The script does not take it over a second time."
			case prev == "":
				return "Bea takes ownership, with a reason; nobody owned the task, so nobody is notified."
			default:
				return "Bea takes ownership, with a reason. " + capital(who(prev)) + ", the previous owner, is notified."
			}
		}},
	{demoWorkflow,
		func(st demoState) string {
			if st.task.Owner == demoWorkflow {
				return "The workflow sends its acknowledgement; it still owns the task."
			}
			return "The workflow tries to send its acknowledgement although " + who(st.task.Owner) + " owns the task now."
		},
		func(ctx context.Context, e demoEnv, _ demoState) (demoNote, string, error) {
			if err := e.send(ctx, demoWorkflow, "reply_ack"); err != nil {
				return demoNote{did: "send refused"}, "", err
			}
			return demoNote{did: "sent reply_ack"}, "", nil
		},
		func(_, after demoState, err error) string {
			var oe *ledger.OwnershipError
			switch {
			case errors.As(err, &oe) && oe.Cancelled:
				return "The workflow tries to send its acknowledgement: the gate stops it and cancels the proposal, because " + who(oe.Owner) + " owns the task now."
			case err != nil:
				return "The workflow tries to send its acknowledgement: the gate refuses: " + err.Error() + "."
			}
			return "The workflow sends its acknowledgement: it still owns the task. " + arrivedWords(after)
		}},
	{demoBea,
		func(st demoState) string {
			if st.task.Owner == demoBea {
				return "Bea writes her own answer, approves it and sends it."
			}
			return "Bea writes her own answer and tries to send it although " + who(st.task.Owner) + " owns the task."
		},
		func(ctx context.Context, e demoEnv, _ demoState) (demoNote, string, error) {
			if err := e.approvedReply(ctx, demoBea, "reply_personal"); err != nil {
				return demoNote{did: "answer refused"}, "", err
			}
			if err := e.send(ctx, demoBea, "reply_personal"); err != nil {
				return demoNote{did: "send refused"}, "", err
			}
			return demoNote{did: "answer sent", more: "wrote, approved and sent reply_personal"}, "", nil
		},
		func(_, after demoState, err error) string {
			if err != nil {
				return "Bea writes her own answer, but the gate refuses her send: " + err.Error() + ". " + arrivedWords(after)
			}
			return "Bea writes her own answer, approves it and sends it. " + arrivedWords(after)
		}},
}

// who names a participant as the sentences do.
func who(actor string) string {
	switch actor {
	case demoWorkflow:
		return "the workflow"
	case "":
		return "nobody"
	}
	return capital(actor)
}

func capital(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// stillOwns ends the viewer's sentence with who owns the task, which a
// look never changes.
func stillOwns(st demoState, viewer string) string {
	switch o := st.task.Owner; o {
	case viewer:
		return "and she owns it already: " + takeoverWords(st, viewer) + "."
	case "":
		return "and nobody owns the task."
	default:
		return who(o) + " still owns the task."
	}
}

// takeoverWords says when and why actor took the task over, from the
// ledger's history.
func takeoverWords(st demoState, actor string) string {
	for i := len(st.history) - 1; i >= 0; i-- {
		if e := st.history[i]; e.Kind == ledger.EvTakeover && e.Actor == actor {
			return fmt.Sprintf("%s took it over at %s (“%s”)", capital(actor), e.At.Format(demoClock), e.Reason)
		}
	}
	return capital(actor) + " claimed it"
}

// arrivedWords counts what the mailbox holds for the customer.
func arrivedWords(st demoState) string {
	switch n := len(st.arrivals); n {
	case 0:
		return "Nothing has reached the customer."
	case 1:
		return "Exactly one message reaches the customer."
	default:
		return fmt.Sprintf("%d messages reached the customer.", n)
	}
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
	ep := destination.EndpointOf(e.dest)
	a, err := e.l.Propose(ctx, ledger.Proposal{Task: demoRef, Customer: demoCustomer, Event: "enquiry-4711",
		ActionType: actionType, Target: demoTask, Recipient: "ada@example.com", Subject: subject,
		Body: "Hello Ada,\n\nthank you for writing to us.", Actor: actor,
		Destination: ep.Destination, Lookup: ep.Lookup, Settle: &ep.Settle})
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
	history  []ledger.Event // the task's, oldest first
}

// demoHistoryLimit bounds the history read: a demonstration writes a few
// dozen lines, and the strip shows no more than fit.
const demoHistoryLimit = 200

func readDemoState(ctx context.Context, l *ledger.Ledger, box Arrivals) (demoState, error) {
	st := demoState{viewers: map[string]bool{}, notes: map[string][]ledger.Notification{}}
	var err error
	st.task, err = l.Task(ctx, demoTask)
	if errors.Is(err, ledger.ErrNotFound) {
		st.task = ledger.Task{}
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
	for _, who := range demoCast {
		if st.notes[who], err = l.Notifications(ctx, who); err != nil {
			return st, fmt.Errorf("read notifications: %w", err)
		}
	}
	if _, st.actions, err = l.ListActions(ctx, ledger.ActionFilter{TaskID: demoTask, Limit: 10}); err != nil {
		return st, fmt.Errorf("list actions: %w", err)
	}
	if st.history, err = l.History(ctx, ledger.HistoryFilter{TaskID: demoTask, Limit: demoHistoryLimit, Newest: true}); err != nil {
		return st, fmt.Errorf("read history: %w", err)
	}
	st.arrivals, err = box.Arrivals(ctx)
	return st, err
}

package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/pflag"

	"gatehouse/destination"
	"gatehouse/destination/registry"
	"gatehouse/ledger"
	"gatehouse/ledger/answer"
)

// actionOutput shows the action a ledger operation returned; the ledger
// returns the action also with most refusals, and a workflow wants its state.
func actionOutput(a ledger.Action) output {
	if a.Key == "" {
		return nil
	}
	return newActionView(a)
}

func proposeVerb() verbSpec {
	var (
		task, taskSubject string
		destURL, from     string
		k                 keyFlags
		c                 contentFlags
		r                 requestFlags
	)
	return verbSpec{name: "propose", short: "Record or revise a draft (prints the action key)", actor: true,
		flags: func(fs *pflag.FlagSet) {
			taskFlag(fs, &task)
			fs.StringVar(&taskSubject, "task-subject", "", "the task's subject, when the ledger sees the task first")
			k.registerFacts(fs)
			c.register(fs)
			r.register(fs)
			fs.StringVar(&destURL, "destination", "", destinationUsage+" (approved with the content)")
			fs.StringVar(&from, "from", "", "sender: one bare address (default "+destination.DefaultSender+"; approved with the content)")
		},
		run: func(ctx context.Context, g *gateRun) (output, error) {
			var (
				body string
				p    ledger.Proposal
			)
			// propose builds the key from the facts; it has no --key.
			facts := func() error { _, err := k.requireFacts("propose"); return err }
			build := func() error {
				ep, err := parseDestination("propose", destURL)
				if err != nil {
					return err
				}
				f := k.facts
				p = ledger.Proposal{Task: ledger.TaskRef{ID: task, Customer: f.Customer, Subject: taskSubject},
					Customer: f.Customer, Event: f.Event, ActionType: f.ActionType, Target: f.Target, Revision: f.Revision,
					Recipient: c.to, RecipientName: c.toName, Destination: ep.Destination, Lookup: ep.Lookup, DestinationSettings: ep.Settings, Settle: &ep.Settle, Sender: from,
					Subject: c.subject, Body: body, Actor: g.actor}
				if r.given() {
					// The body read is the request's; the write is the
					// request, and nothing of a message is left.
					if p.Request, err = r.canonical(g.in, c, body); err != nil {
						return err
					}
					p.Body = ""
				}
				// Refused at the door: nothing is opened or written.
				if err := p.Validate(); err != nil {
					return usageErr("gate propose: %v", err)
				}
				return nil
			}
			l, err := g.open(facts, required("propose", "task", task), requiredIf(!r.given(), "propose", "to", c.to),
				required("propose", "destination", destURL), c.readInto("propose", g.in, &body), build)
			if err != nil {
				return nil, err
			}
			a, err := l.Propose(ctx, p)
			if err != nil {
				return nil, err // a refused proposal prints no key
			}
			return keyOutput(a), nil
		}}
}

func keyOutput(a ledger.Action) output {
	if a.Key == "" {
		return nil
	}
	return keyView{newActionView(a)}
}

func approveVerb() verbSpec {
	var (
		k   keyFlags
		mat materialList
	)
	return verbSpec{name: "approve", short: "Approve the current content on the material values you saw", actor: true,
		flags: func(fs *pflag.FlagSet) {
			k.register(fs)
			mat.register(fs, "material value the approval rests on")
		},
		run: func(ctx context.Context, g *gateRun) (output, error) {
			var key string
			l, err := g.open(k.resolveInto("approve", &key))
			if err != nil {
				return nil, err
			}
			a, err := l.Approve(ctx, key, g.actor, mat)
			return actionOutput(a), err
		}}
}

func sendVerb() verbSpec {
	var (
		k             keyFlags
		mat           materialList
		destURL, from string
	)
	return verbSpec{name: "send", short: "Execute an approved action once (exit code names the result)", actor: true,
		flags: func(fs *pflag.FlagSet) {
			k.register(fs)
			mat.register(fs, "material value re-read just now")
			fs.StringVar(&destURL, "destination", "", destinationUsage+" (default: the approved one; another is refused)")
			fs.StringVar(&from, "from", "", "sender address; must be the approved one (an assertion, not a change)")
		},
		run: func(ctx context.Context, g *gateRun) (output, error) {
			var (
				key  string
				dest destination.Destination
			)
			openNamed := func() (err error) {
				if destURL != "" {
					dest, err = openDestination("send", destURL)
				}
				return err
			}
			l, err := g.open(k.resolveInto("send", &key), openNamed)
			if err != nil {
				return nil, err
			}
			if dest == nil {
				if dest, err = approvedDestination(ctx, l, key); err != nil {
					return nil, err
				}
			}
			res, err := l.Execute(ctx, ledger.ExecuteRequest{Key: key, Executor: g.actor, Reread: mat, From: from}, dest)
			return sendOutput(ctx, l, key, res, err), err
		}}
}

// approvedDestination opens the destination the action was approved for,
// with the records API and the connection settings it was proposed with;
// credentials come from the environment.
func approvedDestination(ctx context.Context, l *ledger.Ledger, key string) (destination.Destination, error) {
	a, err := l.Action(ctx, key)
	if err != nil {
		return nil, err
	}
	if a.Destination == "" {
		return nil, usageErr("gate send %s: the action was proposed before approvals named a destination; name it with --destination (the first send binds it)", key)
	}
	d, err := registry.OpenEndpoint(a.Endpoint())
	if err != nil {
		return nil, fmt.Errorf("gate send %s: the approved destination: %w", key, err)
	}
	return d, nil
}

// sendOutput describes the send. A refusal before any attempt returns no
// action, so the state the refusal left is read back; a send whose outcome
// could not be recorded shows the attempt, not a state the ledger lacks.
func sendOutput(ctx context.Context, l *ledger.Ledger, key string, res ledger.Result, err error) output {
	a := res.Action
	if a.Key == "" || errors.Is(err, ledger.ErrNotRecorded) {
		var rerr error
		if a, rerr = l.Action(ctx, key); rerr != nil {
			return nil
		}
	}
	v := sendView{Key: a.Key, State: string(a.State), Reason: a.Reason}
	if res.Attempt.Number > 0 {
		v.Attempt, v.TransportID = res.Attempt.Number, res.Attempt.TransportID
		v.MessageID, v.Destination = res.Attempt.MessageID, res.Attempt.Destination
		v.Outcome, v.Response = string(res.Outcome), res.Receipt.Response
	}
	return v
}

func correctVerb() verbSpec {
	var (
		k      keyFlags
		c      contentFlags
		reason string
	)
	return verbSpec{name: "correct", short: "Draft a deliberate second message for a sent action", actor: true,
		flags: func(fs *pflag.FlagSet) {
			k.register(fs)
			c.register(fs)
			reasonFlag(fs, &reason)
		},
		run: func(ctx context.Context, g *gateRun) (output, error) {
			var key, body string
			checkContent := func() error {
				for _, err := range []error{
					validateIf(c.to != "", func() error { return ledger.ValidateAddress("recipient", c.to) }),
					ledger.ValidateDisplayName("recipient name", c.toName),
					ledger.ValidateHeaderText("subject", c.subject), ledger.ValidateBody("body", body)} {
					if err != nil {
						return usageErr("gate correct: %v", err)
					}
				}
				return nil
			}
			l, err := g.open(k.resolveInto("correct", &key), required("correct", "reason", reason),
				c.readInto("correct", g.in, &body), checkContent)
			if err != nil {
				return nil, err
			}
			a, err := l.Correct(ctx, ledger.Correction{Original: key, Actor: g.actor, Reason: reason,
				Recipient: c.to, RecipientName: c.toName, Subject: c.subject, Body: body})
			if err != nil {
				return nil, err
			}
			return keyOutput(a), nil
		}}
}

// keyedSpec is a verb that addresses one action and returns it: submit,
// cancel, hold, release-hold, reconcile, resolve.
type keyedSpec struct {
	name, short string
	reason      bool // --reason is required
	optReason   bool // --reason is accepted (check says when it is needed)
	extra       func(fs *pflag.FlagSet)
	check       func() error // validates the extra flags before the ledger is opened
	// op takes the ledger first so that method expressions such as
	// (*ledger.Ledger).Hold fit it as they are.
	op func(l *ledger.Ledger, ctx context.Context, key, actor, reason string) (ledger.Action, error)
}

func keyedVerb(s keyedSpec) verbSpec {
	var (
		k      keyFlags
		reason string
	)
	return verbSpec{name: s.name, short: s.short, actor: true,
		flags: func(fs *pflag.FlagSet) {
			k.register(fs)
			if s.reason || s.optReason {
				reasonFlag(fs, &reason)
			}
			if s.extra != nil {
				s.extra(fs)
			}
		},
		run: func(ctx context.Context, g *gateRun) (output, error) {
			var key string
			l, err := g.open(k.resolveInto(s.name, &key), requiredIf(s.reason, s.name, "reason", reason), s.check)
			if err != nil {
				return nil, err
			}
			a, err := s.op(l, ctx, key, g.actor, reason)
			return actionOutput(a), err
		}}
}

func submitVerb() verbSpec {
	return keyedVerb(keyedSpec{name: "submit", short: "Submit a draft for approval",
		op: func(l *ledger.Ledger, ctx context.Context, key, actor, _ string) (ledger.Action, error) {
			return l.Submit(ctx, key, actor)
		}})
}

func cancelVerb() verbSpec {
	return keyedVerb(keyedSpec{name: "cancel", short: "Withdraw a proposal that was not executed", reason: true,
		op: (*ledger.Ledger).Cancel})
}

func holdVerb() verbSpec {
	return keyedVerb(keyedSpec{name: "hold", short: "Put an action on hold for a person", reason: true,
		op: (*ledger.Ledger).Hold})
}

func releaseHoldVerb() verbSpec {
	return keyedVerb(keyedSpec{name: "release-hold", short: "Let a held action continue", reason: true,
		op: (*ledger.Ledger).ReleaseHold})
}

func reconcileVerb() verbSpec {
	var (
		destURL string
		moved   bool
		named   *destination.Endpoint
	)
	return keyedVerb(keyedSpec{name: "reconcile", short: "Establish an unknown outcome from the records of the attempt's own destination",
		optReason: true,
		extra: func(fs *pflag.FlagSet) {
			fs.StringVar(&destURL, "destination", "", "the destination the attempt went to, if you want to name it (another is refused)")
			fs.BoolVar(&moved, "destination-moved", false, "the attempt's destination now answers at --destination (needs --reason; recorded)")
		},
		check: func() error {
			if moved && destURL == "" {
				return usageErr("gate reconcile: --destination-moved needs --destination, where it moved to")
			}
			if destURL == "" {
				return nil
			}
			ep, err := parseDestination("reconcile", destURL)
			named = &ep
			return err
		},
		op: func(l *ledger.Ledger, ctx context.Context, key, actor, reason string) (ledger.Action, error) {
			if moved && strings.TrimSpace(reason) == "" {
				return ledger.Action{}, usageErr("gate reconcile: --destination-moved needs --reason")
			}
			return answer.Reconcile(ctx, l, ledger.ReconcileRequest{Key: key, Actor: actor, Open: registry.Records(),
				Named: named, Moved: moved, Reason: reason})
		}})
}

func resolveVerb() verbSpec {
	var outcome string
	var override bool
	return keyedVerb(keyedSpec{name: "resolve", short: "Record an unknown outcome a person checked by hand", reason: true,
		extra: func(fs *pflag.FlagSet) {
			fs.StringVar(&outcome, "outcome", "", "what you found at the destination: delivered or not-delivered")
			fs.BoolVar(&override, "override-records", false, "take not-delivered although the destination's records hold the attempt's message (recorded and counted as a manual override)")
		},
		check: func() error {
			if outcome != "delivered" && outcome != "not-delivered" {
				return usageErr("gate resolve needs --outcome delivered or --outcome not-delivered")
			}
			return nil
		},
		op: func(l *ledger.Ledger, ctx context.Context, key, actor, reason string) (ledger.Action, error) {
			return l.Resolve(ctx, ledger.ResolveRequest{Key: key, Actor: actor, Delivered: outcome == "delivered", Reason: reason,
				Open: registry.Records(), OverrideRecords: override})
		}})
}

// validateIf runs check only when need holds.
func validateIf(need bool, check func() error) error {
	if !need {
		return nil
	}
	return check()
}

package main

import (
	"context"

	"github.com/spf13/pflag"

	"gatehouse/ledger"
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
		k                 keyFlags
		c                 contentFlags
	)
	return verbSpec{name: "propose", short: "Record or revise a draft (prints the action key)", actor: true,
		flags: func(fs *pflag.FlagSet) {
			taskFlag(fs, &task)
			fs.StringVar(&taskSubject, "task-subject", "", "the task's subject, when the ledger sees the task first")
			k.registerFacts(fs, "target")
			c.register(fs)
		},
		run: func(ctx context.Context, g *gateRun) (output, error) {
			var body string
			// propose builds the key from the facts; it has no --key.
			facts := func() error { _, err := k.requireFacts("propose"); return err }
			l, err := g.open(facts, required("propose", "task", task),
				required("propose", "to", c.to), c.readInto("propose", g.in, &body))
			if err != nil {
				return nil, err
			}
			f := k.facts
			a, err := l.Propose(ctx, ledger.Proposal{Task: ledger.TaskRef{ID: task, Customer: f.Customer, Subject: taskSubject},
				Customer: f.Customer, Event: f.Event, ActionType: f.ActionType, Target: f.Target, Revision: f.Revision,
				Recipient: c.to, Subject: c.subject, Body: body, Actor: g.actor})
			return keyOutput(a), err
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
			k.register(fs, "target")
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
		k            keyFlags
		mat          materialList
		target, from string
	)
	return verbSpec{name: "send", short: "Execute an approved action once (exit code names the result)", actor: true,
		flags: func(fs *pflag.FlagSet) {
			k.register(fs, "action-target")
			mat.register(fs, "material value re-read just now")
			fs.StringVar(&target, "target", "", "destination: file://DIR, smtp://host:port[?api=URL] or fake://OUTCOME")
			fs.StringVar(&from, "from", "", "sender address (the destination's default when empty)")
		},
		run: func(ctx context.Context, g *gateRun) (output, error) {
			var (
				key  string
				dest ledger.Destination
			)
			l, err := g.open(k.resolveInto("send", &key), required("send", "target", target),
				func() (err error) { dest, err = openDestination(target); return err })
			if err != nil {
				return nil, err
			}
			res, err := l.Execute(ctx, ledger.ExecuteRequest{Key: key, Executor: g.actor, Reread: mat, From: from}, dest)
			return sendOutput(ctx, l, key, res), err
		}}
}

// sendOutput describes the send. A refusal before any attempt returns no
// action, so the state the refusal left is read back.
func sendOutput(ctx context.Context, l *ledger.Ledger, key string, res ledger.Result) output {
	a := res.Action
	if a.Key == "" {
		var err error
		if a, err = l.Action(ctx, key); err != nil {
			return nil
		}
	}
	v := sendView{Key: a.Key, State: string(a.State), Reason: a.Reason}
	if res.Attempt.Number > 0 {
		v.Attempt, v.TransportID = res.Attempt.Number, res.Attempt.TransportID
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
			k.register(fs, "target")
			c.register(fs)
			reasonFlag(fs, &reason)
		},
		run: func(ctx context.Context, g *gateRun) (output, error) {
			var key, body string
			l, err := g.open(k.resolveInto("correct", &key), required("correct", "reason", reason),
				c.readInto("correct", g.in, &body))
			if err != nil {
				return nil, err
			}
			a, err := l.Correct(ctx, ledger.Correction{Original: key, Actor: g.actor, Reason: reason,
				Recipient: c.to, Subject: c.subject, Body: body})
			return keyOutput(a), err
		}}
}

// keyedSpec is a verb that addresses one action and returns it: submit,
// cancel, hold, release-hold, reconcile, resolve.
type keyedSpec struct {
	name, short string
	reason      bool   // --reason is required
	factTarget  string // the target fact's flag; "target" unless --target names a destination
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
	if s.factTarget == "" {
		s.factTarget = "target"
	}
	return verbSpec{name: s.name, short: s.short, actor: true,
		flags: func(fs *pflag.FlagSet) {
			k.register(fs, s.factTarget)
			if s.reason {
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
		target string
		looker ledger.Looker
	)
	return keyedVerb(keyedSpec{name: "reconcile", short: "Establish an unknown outcome from the destination's records",
		factTarget: "action-target",
		extra: func(fs *pflag.FlagSet) {
			fs.StringVar(&target, "target", "", "destination whose records to search (none: the action is held)")
		},
		check: func() (err error) {
			looker, err = openLooker(target)
			return err
		},
		op: func(l *ledger.Ledger, ctx context.Context, key, actor, _ string) (ledger.Action, error) {
			a, err := l.Reconcile(ctx, key, actor, looker)
			if err == nil && a.State == ledger.StateHeld {
				// Proven absent: the ledger holds it for a reviewed retry. A
				// workflow must not read exit 0 as "done".
				err = &ledger.StateError{Key: key, State: a.State, Err: ledger.ErrHeld, Hint: a.Reason}
			}
			return a, err
		}})
}

func resolveVerb() verbSpec {
	var outcome string
	return keyedVerb(keyedSpec{name: "resolve", short: "Record an unknown outcome a person checked by hand", reason: true,
		extra: func(fs *pflag.FlagSet) {
			fs.StringVar(&outcome, "outcome", "", "what you found at the destination: delivered or not-delivered")
		},
		check: func() error {
			if outcome != "delivered" && outcome != "not-delivered" {
				return usageErr("gate resolve needs --outcome delivered or --outcome not-delivered")
			}
			return nil
		},
		op: func(l *ledger.Ledger, ctx context.Context, key, actor, reason string) (ledger.Action, error) {
			return l.ResolveUnknown(ctx, key, actor, outcome == "delivered", reason)
		}})
}

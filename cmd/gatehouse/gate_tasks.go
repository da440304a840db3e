package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/pflag"

	"gatehouse/ledger"
)

// taskSpec is a verb that acts on one task: claim, takeover, release,
// complete, view, leave.
type taskSpec struct {
	name, short string
	reason      bool // --reason is required
	optReason   bool // --reason is accepted but optional
	newTask     bool // --customer and --task-subject describe a task the ledger has not seen
	extra       func(fs *pflag.FlagSet)
	check       func() error // validates the extra flags before the ledger is opened
	op          func(ctx context.Context, l *ledger.Ledger, ref ledger.TaskRef, actor, reason string) (output, error)
}

func taskVerb(s taskSpec) verbSpec {
	var (
		ref    ledger.TaskRef
		reason string
	)
	return verbSpec{name: s.name, short: s.short, actor: true,
		flags: func(fs *pflag.FlagSet) {
			taskFlag(fs, &ref.ID)
			if s.newTask {
				fs.StringVar(&ref.Customer, "customer", "", "the task's customer, when the ledger sees the task first")
				fs.StringVar(&ref.Subject, "task-subject", "", "the task's subject, when the ledger sees the task first")
			}
			if s.reason || s.optReason {
				reasonFlag(fs, &reason)
			}
			if s.extra != nil {
				s.extra(fs)
			}
		},
		run: func(ctx context.Context, g *gateRun) (output, error) {
			l, err := g.open(required(s.name, "task", ref.ID), requiredIf(s.reason, s.name, "reason", reason), s.check)
			if err != nil {
				return nil, err
			}
			return s.op(ctx, l, ref, g.actor, reason)
		}}
}

// taskOutput shows the task an ownership operation returned.
func taskOutput(t ledger.Task, err error) (output, error) {
	if t.ID == "" {
		return nil, err
	}
	return newTaskView(t), err
}

func claimVerb() verbSpec {
	return taskVerb(taskSpec{name: "claim", short: "Become the owner of an unowned task", newTask: true,
		op: func(ctx context.Context, l *ledger.Ledger, ref ledger.TaskRef, actor, _ string) (output, error) {
			return taskOutput(l.Claim(ctx, ref, actor))
		}})
}

func takeoverVerb() verbSpec {
	return taskVerb(taskSpec{name: "takeover", short: "Take ownership of a known task explicitly; the previous owner is notified",
		reason: true,
		op: func(ctx context.Context, l *ledger.Ledger, ref ledger.TaskRef, actor, reason string) (output, error) {
			return taskOutput(l.TakeOver(ctx, ref, actor, reason))
		}})
}

func releaseVerb() verbSpec {
	return taskVerb(taskSpec{name: "release", short: "Give up ownership of a task", optReason: true,
		op: func(ctx context.Context, l *ledger.Ledger, ref ledger.TaskRef, actor, reason string) (output, error) {
			return taskOutput(l.Release(ctx, ref.ID, actor, reason))
		}})
}

func completeVerb() verbSpec {
	return taskVerb(taskSpec{name: "complete", short: "Close a task whose actions all have an outcome",
		op: func(ctx context.Context, l *ledger.Ledger, ref ledger.TaskRef, actor, _ string) (output, error) {
			if err := l.Complete(ctx, ref.ID, actor); err != nil {
				return nil, err
			}
			return taskOutput(l.Task(ctx, ref.ID))
		}})
}

func viewVerb() verbSpec {
	var (
		kind string
		ttl  time.Duration
	)
	return taskVerb(taskSpec{name: "view", short: "Say you are looking at a task (advisory; never changes the owner)",
		newTask: true,
		extra: func(fs *pflag.FlagSet) {
			fs.StringVar(&kind, "kind", "viewer", "viewer (a person) or automation (a running workflow)")
			fs.DurationVar(&ttl, "ttl", 5*time.Minute, "how long the presence lasts unless renewed")
		},
		check: func() error {
			if kind != "viewer" && kind != "automation" {
				return usageErr("gate view: --kind %q: want viewer or automation", kind)
			}
			return nil
		},
		op: func(ctx context.Context, l *ledger.Ledger, ref ledger.TaskRef, actor, _ string) (output, error) {
			if err := l.View(ctx, ref, actor, kind, ttl); err != nil {
				return nil, err
			}
			return presenceOutput(ctx, l, ref.ID)
		}})
}

func leaveVerb() verbSpec {
	return taskVerb(taskSpec{name: "leave", short: "Remove your presence from a task",
		op: func(ctx context.Context, l *ledger.Ledger, ref ledger.TaskRef, actor, _ string) (output, error) {
			if err := l.Leave(ctx, ref.ID, actor); err != nil {
				return nil, err
			}
			return presenceOutput(ctx, l, ref.ID)
		}})
}

// presenceView is who is on a task now, next to its owner.
type presenceView struct {
	Task     string         `json:"task"`
	Owner    string         `json:"owner"`
	Presence []presenceItem `json:"presence"`
}

type presenceItem struct {
	Actor     string    `json:"actor"`
	Kind      string    `json:"kind"`
	ExpiresAt time.Time `json:"expires_at"`
}

func (p presenceView) text(w io.Writer) {
	fmt.Fprintf(w, "task:\t%s\nowner:\t%s\n", p.Task, orDash(p.Owner))
	for _, it := range p.Presence {
		fmt.Fprintf(w, "present:\t%s (%s) until %s\n", it.Actor, it.Kind, fmtTime(it.ExpiresAt))
	}
}

func presenceOutput(ctx context.Context, l *ledger.Ledger, taskID string) (output, error) {
	tk, err := l.Task(ctx, taskID)
	if err != nil {
		return nil, err
	}
	ps, err := l.Presence(ctx, taskID)
	if err != nil {
		return nil, err
	}
	v := presenceView{Task: tk.ID, Owner: tk.Owner, Presence: []presenceItem{}}
	for _, p := range ps {
		v.Presence = append(v.Presence, presenceItem{Actor: p.Actor, Kind: p.Kind, ExpiresAt: p.ExpiresAt})
	}
	return v, nil
}

// notificationsView lists what was addressed to one person.
type notificationsView struct {
	Recipient     string             `json:"recipient"`
	Notifications []notificationItem `json:"notifications"`
}

type notificationItem struct {
	At      time.Time `json:"at"`
	Task    string    `json:"task"`
	Message string    `json:"message"`
}

func (n notificationsView) text(w io.Writer) {
	if len(n.Notifications) == 0 {
		fmt.Fprintf(w, "no notifications for %s\n", n.Recipient)
		return
	}
	fmt.Fprintln(w, "TIME\tTASK\tMESSAGE")
	for _, it := range n.Notifications {
		fmt.Fprintf(w, "%s\t%s\t%s\n", fmtTime(it.At), it.Task, it.Message)
	}
}

func notificationsVerb() verbSpec {
	return verbSpec{name: "notifications", short: "List the notifications addressed to --as", actor: true, readOnly: true,
		run: func(ctx context.Context, g *gateRun) (output, error) {
			l, err := g.ledger()
			if err != nil {
				return nil, err
			}
			ns, err := l.Notifications(ctx, g.actor)
			if err != nil {
				return nil, err
			}
			v := notificationsView{Recipient: g.actor, Notifications: []notificationItem{}}
			for _, n := range ns {
				v.Notifications = append(v.Notifications, notificationItem{At: n.At, Task: n.TaskID, Message: n.Message})
			}
			return v, nil
		}}
}

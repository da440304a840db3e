package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"gatehouse/ledger"
)

// showView is everything the ledger knows about one action.
type showView struct {
	Action      actionView     `json:"action"`
	Task        taskView       `json:"task"`
	Approvals   []approvalView `json:"approvals"`
	Attempts    []attemptView  `json:"attempts"`
	Checks      []checkView    `json:"material_checks"`
	History     []eventView    `json:"history"`
	Corrections []string       `json:"corrections"`
}

func newShowView(d ledger.ActionDetail) showView {
	v := showView{Action: newActionView(d.Action), Task: newTaskView(d.Task), Approvals: []approvalView{},
		Attempts: []attemptView{}, Checks: []checkView{}, History: newEventViews(d.Events),
		Corrections: append([]string{}, d.Correction...)}
	for _, ap := range d.Approvals {
		av := approvalView{Approver: ap.Approver, At: ap.At, Recipient: ap.Recipient, Sender: ap.Sender, Destination: ap.Destination, Owner: ap.Owner,
			Valid: ap.Valid, Invalidated: ap.Invalidated, Material: []materialView{}}
		for _, m := range ap.Material {
			av.Material = append(av.Material, materialView{Name: m.Name(), Value: m.Value})
		}
		v.Approvals = append(v.Approvals, av)
	}
	for _, at := range d.Attempts {
		av := attemptView{Number: at.Number, TransportID: at.TransportID, MessageID: at.MessageID,
			Destination: at.Destination, Lookup: at.Lookup, Epoch: at.Epoch, Recipient: at.Recipient, Sender: at.Sender, Executor: at.Executor,
			StartedAt: at.StartedAt, Outcome: string(at.Outcome), Response: at.Response, Reconciled: at.Reconciled,
			ProviderKey: at.ProviderKey, KeyGeneration: at.KeyGeneration, HTTPStatus: at.HTTPStatus, DestinationID: at.DestinationID, Wire: at.Wire}
		if !at.ArrivedLate.IsZero() {
			av.ArrivedLate = &at.ArrivedLate
		}
		v.Attempts = append(v.Attempts, av)
	}
	for _, c := range d.Checks {
		v.Checks = append(v.Checks, checkView{Attempt: c.Attempt, Name: c.Source + "." + c.Field,
			Approved: c.Approved, Read: c.Read, Matched: c.Matched, Unavailable: c.Unavailable})
	}
	return v
}

func (s showView) text(w io.Writer) {
	s.Action.text(w)
	fmt.Fprintf(w, "owner:\t%s\n", orDash(s.Task.Owner))
	if len(s.Corrections) > 0 {
		fmt.Fprintf(w, "corrections:\t%s\n", joinOrDash(s.Corrections))
	}
	fmt.Fprintf(w, "\napprovals (%d):\n", len(s.Approvals))
	for _, ap := range s.Approvals {
		status := "valid"
		if !ap.Valid {
			status = "invalid: " + ap.Invalidated
		}
		var mat []string
		for _, m := range ap.Material {
			mat = append(mat, m.Name+"="+m.Value)
		}
		fmt.Fprintf(w, "  %s\t%s\tto %s from %s via %s\towner %s\t%s\t%s\n", fmtTime(ap.At), ap.Approver, orDash(ap.Recipient),
			orDash(ap.Sender), orDash(ap.Destination), orDash(ap.Owner), joinOrDash(mat), status)
	}
	fmt.Fprintf(w, "\nattempts (%d):\n", len(s.Attempts))
	for _, at := range s.Attempts {
		outcome := orDash(at.Outcome)
		if at.Reconciled {
			outcome += " (reconciled)"
		}
		if at.ArrivedLate != nil {
			outcome += ", but ARRIVED LATE (learned " + fmtTime(*at.ArrivedLate) + ")"
		}
		if at.Wire != "" {
			fmt.Fprintf(w, "  #%d\tkey %s (generation %d)\tvia %s\t%s\t%s\tid %s\t%s\n", at.Number, at.ProviderKey, at.KeyGeneration,
				orDash(at.Destination), at.Executor, outcome, orDash(at.DestinationID), at.Response)
			writeWire(w, at.Wire)
			continue
		}
		fmt.Fprintf(w, "  #%d\t%s\tvia %s\t%s\t%s\t%s\n", at.Number, at.MessageID, orDash(at.Destination), at.Executor, outcome, at.Response)
	}
	fmt.Fprintf(w, "\nmaterial checks (%d):\n", len(s.Checks))
	for _, c := range s.Checks {
		fmt.Fprintf(w, "  attempt %d\t%s\tapproved %q\tread %q\t%s\n", c.Attempt, c.Name, c.Approved, c.Read, checkResult(c))
	}
	fmt.Fprintf(w, "\nhistory (%d):\n", len(s.History))
	writeEvents(w, s.History)
}

func checkResult(c checkView) string {
	switch {
	case c.Unavailable:
		return "unavailable"
	case c.Matched:
		return "matched"
	}
	return "CHANGED"
}

func showVerb() verbSpec {
	var k keyFlags
	return verbSpec{name: "show", short: "Show an action: state, approvals, attempts, material checks, history",
		readOnly: true,
		flags:    func(fs *pflag.FlagSet) { k.register(fs) },
		run: func(ctx context.Context, g *gateRun) (output, error) {
			var key string
			l, err := g.open(k.resolveInto("show", &key))
			if err != nil {
				return nil, err
			}
			d, err := l.Detail(ctx, key)
			if err != nil {
				return nil, fmt.Errorf("show %s: %w", key, err)
			}
			return newShowView(d), nil
		}}
}

// listView is one page of actions and how many match in all.
type listView struct {
	Total   int       `json:"total"`
	Offset  int       `json:"offset"`
	Limit   int       `json:"limit"`
	Actions []listRow `json:"actions"`
}

type listRow struct {
	Key       string    `json:"key"`
	State     string    `json:"state"`
	Task      string    `json:"task"`
	Recipient string    `json:"recipient"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// text lists the actions in the order they were proposed, newest first,
// which is the order of the PROPOSED column.
func (lv listView) text(w io.Writer) {
	fmt.Fprintln(w, "KEY\tSTATE\tTASK\tRECIPIENT\tPROPOSED\tUPDATED")
	for _, r := range lv.Actions {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", r.Key, r.State, r.Task, r.Recipient, fmtTime(r.CreatedAt), fmtTime(r.UpdatedAt))
	}
	if len(lv.Actions) == 0 {
		fmt.Fprintf(w, "no actions on this page; %s in all\n", plural(lv.Total, "action matches", "actions match"))
		return
	}
	fmt.Fprintf(w, "%d–%d of %d\n", lv.Offset+1, lv.Offset+len(lv.Actions), lv.Total)
}

func listVerb() verbSpec {
	var (
		f      ledger.ActionFilter
		states []string
	)
	return verbSpec{name: "list", short: "List actions, newest proposed first, with the total", readOnly: true,
		flags: func(fs *pflag.FlagSet) {
			fs.StringSliceVar(&states, "state", nil, "only these states (repeatable or comma-separated)")
			taskFlag(fs, &f.TaskID)
			fs.StringVar(&f.Search, "search", "", "text anywhere in the key, customer, recipient or subject (any case)")
			fs.IntVar(&f.Limit, "limit", 20, "page size")
			fs.IntVar(&f.Offset, "offset", 0, "how many to skip")
		},
		run: func(ctx context.Context, g *gateRun) (output, error) {
			l, err := g.open(checkPage("list", f.Limit, f.Offset),
				func() (err error) { f.States, err = parseStates(states); return err })
			if err != nil {
				return nil, err
			}
			total, actions, err := l.ListActions(ctx, f)
			if err != nil {
				return nil, err
			}
			v := listView{Total: total, Offset: f.Offset, Limit: f.Limit, Actions: []listRow{}}
			for _, a := range actions {
				v.Actions = append(v.Actions, listRow{Key: a.Key, State: string(a.State), Task: a.TaskID,
					Recipient: a.Recipient, CreatedAt: a.CreatedAt, UpdatedAt: a.UpdatedAt})
			}
			return v, nil
		}}
}

func checkPage(verb string, limit, offset int) func() error {
	return func() error {
		if limit < 1 {
			return usageErr("%s: --limit %d must be at least 1", verbTitle(verb), limit)
		}
		if offset < 0 {
			return usageErr("%s: --offset %d is negative", verbTitle(verb), offset)
		}
		return nil
	}
}

func parseStates(names []string) ([]ledger.State, error) {
	var out []ledger.State
	for _, n := range names {
		s := ledger.State(strings.TrimSpace(n))
		if !knownState(s) {
			return nil, usageErr("--state %q: want one of %s", n, joinStates())
		}
		out = append(out, s)
	}
	return out, nil
}

func knownState(s ledger.State) bool {
	for _, k := range ledger.AllStates {
		if k == s {
			return true
		}
	}
	return false
}

func joinStates() string {
	var names []string
	for _, s := range ledger.AllStates {
		names = append(names, string(s))
	}
	return strings.Join(names, ", ")
}

func historyVerb() verbSpec {
	var (
		f ledger.HistoryFilter
		k keyFlags
	)
	return verbSpec{name: "history", short: "Print the history in plain sentences, oldest first", readOnly: true,
		flags: func(fs *pflag.FlagSet) {
			taskFlag(fs, &f.TaskID)
			k.register(fs)
			fs.IntVar(&f.Limit, "limit", 50, "only the newest N events")
		},
		run: func(ctx context.Context, g *gateRun) (output, error) {
			var byKey func() error
			if k.key != "" || k.anyFact() {
				byKey = k.resolveInto("history", &f.ActionKey)
			}
			l, err := g.open(checkPage("history", f.Limit, 0), byKey)
			if err != nil {
				return nil, err
			}
			f.Newest = true
			es, err := l.History(ctx, f)
			if err != nil {
				return nil, err
			}
			return historyView{Events: newEventViews(es)}, nil
		}}
}

// metricsView keeps the counts apart that must never be merged.
type metricsView struct {
	Intended           int            `json:"intended"`
	Attempts           int            `json:"attempts"`
	Confirmed          int            `json:"confirmed"`
	DuplicateBlocks    int            `json:"duplicate_blocks"`
	Denials            int            `json:"denials"`
	OwnershipConflicts int            `json:"ownership_conflicts"`
	Holds              int            `json:"holds"`
	Unknown            int            `json:"unknown"`
	UnknownOutcomes    int            `json:"unknown_outcomes"`
	ByState            map[string]int `json:"by_state"`
	Stopped            bool           `json:"stopped"`
	StaleProposals     int            `json:"stale_proposals"`
	ManualOverrides    int            `json:"manual_overrides"`
	LateEvidence       int            `json:"late_evidence"`
	ArrivedTwice       int            `json:"arrived_twice"`
	UnmatchedByRelease map[string]int `json:"unmatched_by_release"`
}

func (m metricsView) text(w io.Writer) {
	for _, r := range []struct {
		name string
		n    int
	}{
		{"intended actions", m.Intended}, {"attempts", m.Attempts}, {"confirmed outcomes", m.Confirmed},
		{"duplicate blocks", m.DuplicateBlocks}, {"changed-state denials", m.Denials},
		{"ownership conflicts", m.OwnershipConflicts}, {"held now", m.Holds},
		{"unknown now", m.Unknown}, {"unknown outcomes ever", m.UnknownOutcomes},
		{"stale proposals", m.StaleProposals}, {"manual overrides", m.ManualOverrides},
		{"late evidence", m.LateEvidence}, {"arrived twice", m.ArrivedTwice},
	} {
		fmt.Fprintf(w, "%s:\t%d\n", r.name, r.n)
	}
	var states []string
	for _, s := range ledger.AllStates {
		if n := m.ByState[string(s)]; n > 0 {
			states = append(states, fmt.Sprintf("%s %d", s, n))
		}
	}
	fmt.Fprintf(w, "by state:\t%s\n", joinOrDash(states))
	var unmatched []string
	for _, r := range slices.Sorted(maps.Keys(m.UnmatchedByRelease)) {
		unmatched = append(unmatched, fmt.Sprintf("%s %d", r, m.UnmatchedByRelease[r]))
	}
	fmt.Fprintf(w, "unmatched identities:\t%s\n", joinOrDash(unmatched))
	fmt.Fprintf(w, "stopped:\t%v\n", m.Stopped)
}

func metricsVerb() verbSpec {
	return verbSpec{name: "metrics", short: "Print the counts, kept apart", readOnly: true,
		run: func(ctx context.Context, g *gateRun) (output, error) {
			l, err := g.ledger()
			if err != nil {
				return nil, err
			}
			m, err := l.Metrics(ctx)
			if err != nil {
				return nil, err
			}
			v := metricsView{Intended: m.Intended, Attempts: m.Attempts, Confirmed: m.Confirmed,
				DuplicateBlocks: m.DuplicateBlocks, Denials: m.Denials, OwnershipConflicts: m.OwnershipConflicts,
				Holds: m.Holds, Unknown: m.Unknown, UnknownOutcomes: m.UnknownOutcomes,
				ByState: map[string]int{}, Stopped: m.Stopped, StaleProposals: m.StaleProposals,
				ManualOverrides: m.ManualOverrides, LateEvidence: m.LateEvidence, ArrivedTwice: m.ArrivedTwice,
				UnmatchedByRelease: m.UnmatchedByRelease}
			for s, n := range m.ByState {
				v.ByState[string(s)] = n
			}
			return v, nil
		}}
}

// switchView is the stop switch.
type switchView struct {
	Stopped bool      `json:"stopped"`
	Actor   string    `json:"actor"`
	Reason  string    `json:"reason"`
	At      time.Time `json:"at"`
}

func (s switchView) text(w io.Writer) {
	state := "running"
	if s.Stopped {
		state = "stopped"
	}
	fmt.Fprintf(w, "execution:\t%s\nby:\t%s\nreason:\t%s\nat:\t%s\n", state, s.Actor, s.Reason, fmtTime(s.At))
}

// switchVerb is stop or resume: both flip the switch with a reason.
func switchVerb(name, short string, flip func(l *ledger.Ledger, ctx context.Context, actor, reason string) error) verbSpec {
	var reason string
	return verbSpec{name: name, short: short, actor: true,
		flags: func(fs *pflag.FlagSet) { reasonFlag(fs, &reason) },
		run: func(ctx context.Context, g *gateRun) (output, error) {
			l, err := g.open(required(name, "reason", reason))
			if err != nil {
				return nil, err
			}
			if err := flip(l, ctx, g.actor, reason); err != nil {
				return nil, err
			}
			sw, err := l.StopState(ctx)
			return switchView{Stopped: sw.Stopped, Actor: sw.Actor, Reason: sw.Reason, At: sw.At}, err
		}}
}

func stopVerb() verbSpec {
	return switchVerb("stop", "Halt all execution (attempts in flight finish)", (*ledger.Ledger).Stop)
}

func resumeVerb() verbSpec {
	return switchVerb("resume", "Resume execution and release the holds the stop caused", (*ledger.Ledger).Resume)
}

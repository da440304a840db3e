package scenarios

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"gatehouse/ledger"
	"gatehouse/testmailbox"
)

// checkFinal evaluates the scenario's final expectations against the
// ledger and against the mailbox's own store.
func (r *Run) checkFinal(ctx context.Context, snap Snapshot) ([]Verdict, error) {
	f := r.sc.Expect
	var out []Verdict
	if f.Arrivals != nil {
		vs, err := r.checkArrivals(ctx, f.Arrivals)
		if err != nil {
			return nil, err
		}
		out = append(out, vs...)
	}
	if f.Records != nil {
		out = append(out, r.checkRecords(f.Records)...)
	}
	for _, name := range sortedKeys(f.States) {
		got := "absent"
		a, err := r.env.l.Action(ctx, r.action(name).key)
		switch {
		case err == nil:
			got = string(a.State)
		case !errors.Is(err, ledger.ErrNotFound):
			return nil, err
		}
		out = append(out, Verdict{Name: "states." + name, Pos: f.KeyPos["states"], Expected: f.States[name], Actual: got, Pass: got == f.States[name]})
	}
	if f.Counts != nil {
		out = append(out, checkCounts(f.Counts, snap.Counts)...)
	}
	for _, want := range f.History {
		out = append(out, checkHistory(want, f.KeyPos["history"], snap.History))
	}
	out = append(out, r.checkAudience(snap.Audiences)...)
	return out, nil
}

func intVerdict(name string, pos Pos, want, got int) Verdict {
	return Verdict{Name: name, Pos: pos, Expected: strconv.Itoa(want), Actual: strconv.Itoa(got), Pass: want == got}
}

func (r *Run) checkArrivals(ctx context.Context, a *ArrivalExpect) ([]Verdict, error) {
	var out []Verdict
	count := func(name string, pos Pos, f testmailbox.Filter, want int) error {
		got, err := r.env.mb.Count(ctx, f)
		if err != nil {
			return fmt.Errorf("count arrivals: %w", err)
		}
		out = append(out, intVerdict(name, pos, want, got))
		return nil
	}
	if a.Total != nil {
		if err := count("arrivals.total", a.KeyPos["total"], testmailbox.Filter{}, *a.Total); err != nil {
			return nil, err
		}
	}
	for _, to := range sortedKeys(a.PerRecipient) {
		if err := count("arrivals.per_recipient."+to, a.KeyPos["per_recipient"], testmailbox.Filter{To: to}, a.PerRecipient[to]); err != nil {
			return nil, err
		}
	}
	for _, name := range sortedKeys(a.PerAction) {
		f := testmailbox.Filter{ActionKey: r.action(name).key}
		if err := count("arrivals.per_action."+name, a.KeyPos["per_action"], f, a.PerAction[name]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func checkCounts(c *CountExpect, got Counts) []Verdict {
	return intVerdicts("counts.", c.KeyPos, []intCheck{
		{"intended", c.Intended, got.Intended}, {"attempts", c.Attempts, got.Attempts},
		{"confirmed", c.Confirmed, got.Confirmed}, {"arrived", c.Arrived, got.Arrived},
		{"denials", c.Denials, got.Denials}, {"duplicate_blocks", c.DuplicateBlocks, got.DuplicateBlocks},
		{"holds", c.Holds, got.Holds}, {"conflicts", c.Conflicts, got.Conflicts}, {"unknown", c.Unknown, got.Unknown},
	})
}

// intCheck is one optional whole-number expectation: want is nil when the
// file does not ask for it.
type intCheck struct {
	name string
	want *int
	got  int
}

// intVerdicts judges the checks the file asked for, each at its key's
// position.
func intVerdicts(prefix string, keyPos map[string]Pos, checks []intCheck) []Verdict {
	var out []Verdict
	for _, c := range checks {
		if c.want != nil {
			out = append(out, intVerdict(prefix+c.name, keyPos[c.name], *c.want, c.got))
		}
	}
	return out
}

func checkHistory(want string, pos Pos, lines []string) Verdict {
	v := Verdict{Name: fmt.Sprintf("history contains %q", want), Pos: pos, Expected: "a history line containing it", Actual: "no such line"}
	for _, l := range lines {
		if strings.Contains(l, want) {
			v.Pass, v.Actual = true, "found"
			break
		}
	}
	return v
}

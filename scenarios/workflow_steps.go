package scenarios

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"gatehouse/internal/oswait"
	"gatehouse/ledger"
)

// doRunWorkflow starts the command (all its copies at once) and waits for
// every process to end.
func (r *Run) doRunWorkflow(ctx context.Context, s *Step, _ barrier) (outcome, error) {
	w, err := r.startWorkflow(ctx, s)
	if err != nil {
		return outcome{}, err
	}
	return r.finishWorkflow(w, s)
}

// doStartWorkflow starts the command in the background; a later
// await_workflow step with the same run name waits for it and judges it.
func (r *Run) doStartWorkflow(ctx context.Context, s *Step, _ barrier) (outcome, error) {
	w, err := r.startWorkflow(ctx, s)
	if err != nil {
		return outcome{}, err
	}
	r.workflows[s.Run] = w
	n := len(w.procs)
	what := "1 process"
	if n > 1 {
		what = fmt.Sprintf("%d processes", n)
	}
	return outcome{class: "started", detail: fmt.Sprintf("%s started in the background: %s", what, w.command)}, nil
}

// doAwaitWorkflow waits for a background run, judging it by the await
// step's expectations.
func (r *Run) doAwaitWorkflow(_ context.Context, s *Step, _ barrier) (outcome, error) {
	w := r.workflows[s.Run]
	delete(r.workflows, s.Run)
	return r.finishWorkflow(w, s)
}

// finishWorkflow waits for the run and judges it by the step's
// expect_exit, expect_exits and output_contains.
func (r *Run) finishWorkflow(w *workflowRun, s *Step) (outcome, error) {
	runs, err := r.waitWorkflow(w)
	if err != nil {
		return outcome{}, err
	}
	ends := make([]string, len(runs))
	for i, run := range runs {
		ends[i] = run.End
		if run.ExitCode == -1 {
			ends[i] = run.ExitText()
		}
	}
	out := outcome{class: strings.Join(ends, ", "), runs: runs}
	if len(runs) == 1 && runs[0].ExitCode == -1 {
		out.detail = runs[0].End
	}
	if s.ExpectExit != "" {
		got := runs[0].ExitText()
		out.verdicts = append(out.verdicts, Verdict{Name: "expect_exit", Pos: s.KeyPos["expect_exit"],
			Expected: s.ExpectExit, Actual: describeEnd(runs[0]), Pass: got == s.ExpectExit})
	}
	if len(s.ExpectExits) > 0 {
		want := append([]string(nil), s.ExpectExits...)
		got := make([]string, len(runs))
		for i, run := range runs {
			got[i] = run.ExitText()
		}
		sort.Strings(want)
		sort.Strings(got)
		out.verdicts = append(out.verdicts, Verdict{Name: "expect_exits", Pos: s.KeyPos["expect_exits"],
			Expected: strings.Join(want, ", "), Actual: strings.Join(got, ", "), Pass: strings.Join(want, ",") == strings.Join(got, ",")})
	}
	if s.OutputContains != "" {
		v := Verdict{Name: fmt.Sprintf("output_contains %q", s.OutputContains), Pos: s.KeyPos["output_contains"],
			Expected: "output containing it", Actual: "no run's output contains it"}
		for _, run := range runs {
			if strings.Contains(run.text, s.OutputContains) {
				v.Pass, v.Actual = true, "found"
				break
			}
		}
		out.verdicts = append(out.verdicts, v)
	}
	return out, nil
}

// describeEnd says how a run ended in a verdict: the code, or the kill and
// why.
func describeEnd(run RunResult) string {
	if run.ExitCode == -1 {
		return run.ExitText() + " (" + run.End + ")"
	}
	return run.ExitText()
}

// stateWaitPoll is how often await_state reads the ledger. Another process
// writes it, and SQLite tells no one, so the step looks again.
const stateWaitPoll = 20 * time.Millisecond

// doAwaitState waits, in real time, until a background run has brought an
// action to a state (it proposed its draft, say), so the next steps happen
// in the middle of that run rather than before or after it. Not reaching
// the state within the timeout fails the step's verdict.
func (r *Run) doAwaitState(ctx context.Context, s *Step, _ barrier) (outcome, error) {
	timeout := DefaultTimeout
	if s.Timeout != "" {
		timeout, _ = time.ParseDuration(s.Timeout) // validated
	}
	key := r.action(s.Action).key
	// The state is changed by a command running in real time.
	budget := oswait.NewBudget(timeout)
	got := "absent"
	for {
		a, err := r.env.l.Action(ctx, key)
		switch {
		case err == nil:
			got = string(a.State)
		case !errors.Is(err, ledger.ErrNotFound):
			return outcome{}, fmt.Errorf("await_state: %w", err)
		}
		if got == s.State || budget.Spent() {
			break
		}
		if err := oswait.Pause(ctx, stateWaitPoll); err != nil {
			return outcome{}, err
		}
	}
	v := Verdict{Name: fmt.Sprintf("await_state %s %s", s.Action, s.State), Pos: s.KeyPos["state"],
		Expected: s.State, Actual: got, Pass: got == s.State}
	if !v.Pass {
		v.Actual += " after " + timeout.String()
		return outcome{class: "timeout", detail: fmt.Sprintf("%s is %s, not %s, after %s", s.Action, got, s.State, timeout), verdicts: []Verdict{v}}, nil
	}
	return outcome{class: ClassOK, detail: s.Action + " is " + got, verdicts: []Verdict{v}}, nil
}

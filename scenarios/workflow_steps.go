package scenarios

import (
	"context"
	"fmt"
	"sort"
	"strings"
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

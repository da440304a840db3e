package scenarios

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"gatehouse/ledger"
)

// Run is one rehearsal of one scenario in progress. It owns a fresh ledger
// (or the one named in Options), a real test mailbox and fresh fakes, and
// advances one step per Step call so a viewer can render the state between
// steps. A Run is not safe for concurrent calls; the steps of a parallel
// block run concurrently inside one Step call.
type Run struct {
	sc  *Scenario
	env *env

	mu       sync.Mutex // guards actions while a parallel block runs
	actions  map[string]*actionState
	tasks    map[string]Task
	releases []string // audience releases imported so far

	next     int
	results  []StepResult
	verdicts []Verdict
	final    bool
	// workflows are the background runs started and not yet awaited.
	workflows map[string]*workflowRun
	// paused are the executors pause_executor holds, by action name.
	paused map[string]*pausedExecutor
}

// stepTick is the fake time each step takes.
const stepTick = time.Second

// StepResult is what one step (or one parallel block) did.
type StepResult struct {
	Index    int          `json:"index"` // 1-based
	Label    string       `json:"label"`
	Class    string       `json:"class"`
	Detail   string       `json:"detail,omitempty"`
	Clock    time.Time    `json:"clock"` // fake-clock time after the step
	Parallel []StepResult `json:"parallel,omitempty"`
	// Runs are the processes a workflow step ran: command, how each ended
	// and the last lines of its output.
	Runs     []RunResult `json:"runs,omitempty"`
	Verdicts []Verdict   `json:"verdicts,omitempty"`
}

// Verdict is the result of one expectation.
type Verdict struct {
	Name     string `json:"name"`
	Pos      Pos    `json:"pos"`
	Expected string `json:"expected"`
	Actual   string `json:"actual"`
	Pass     bool   `json:"pass"`
}

// Message explains the verdict in one line.
func (v Verdict) Message() string {
	if v.Pass {
		return fmt.Sprintf("%s: %s", v.Name, v.Actual)
	}
	return fmt.Sprintf("%s: expected %s, got %s", v.Name, v.Expected, v.Actual)
}

// NewRun prepares a rehearsal of sc: it opens the ledger, starts the
// mailbox and seeds the fakes, but runs no step. Close must be called.
func NewRun(ctx context.Context, sc *Scenario, opts Options) (*Run, error) {
	e, err := newEnv(ctx, sc, opts)
	if err != nil {
		return nil, err
	}
	r := &Run{sc: sc, env: e, actions: map[string]*actionState{}, tasks: map[string]Task{},
		workflows: map[string]*workflowRun{}, paused: map[string]*pausedExecutor{}}
	for _, t := range sc.World.Tasks {
		r.tasks[t.ID] = t
	}
	for _, d := range sc.World.Actions {
		r.actions[d.Name] = r.newActionState(d)
	}
	if err := e.seedLedger(ctx, sc.World); err != nil {
		e.close()
		return nil, err
	}
	return r, nil
}

func (r *Run) newActionState(d ActionDef) *actionState {
	t := r.tasks[d.Task]
	a := &actionState{name: d.Name, taskID: d.Task, customer: t.Customer, event: d.Event, typ: d.Type,
		target: or(d.Target, d.Task), material: d.Material, to: d.To, subject: d.Subject, body: d.Body}
	if d.Refund != nil {
		a.refund = &refund{profile: d.Profile, payment: d.Refund.Payment, amount: d.Refund.Amount,
			currency: d.Refund.Currency, reason: d.Refund.Reason}
	} else if a.to == "" {
		c, _ := r.env.crm.Customer(t.Customer)
		a.to = c["email"]
	}
	a.key = ledger.Key(a.customer, a.event, a.typ, a.target, 0)
	return a
}

// Scenario is the scenario being rehearsed.
func (r *Run) Scenario() *Scenario { return r.sc }

// Ledger is the run's ledger (valid until the next restart step or Close).
func (r *Run) Ledger() *ledger.Ledger { return r.env.l }

// Stable is text from the run's ledger as its reports and snapshots show
// it: the mailbox's addresses, which change every run, by their names.
func (r *Run) Stable(s string) string { return r.env.stable(s) }

// Done reports whether every step has run.
func (r *Run) Done() bool { return r.next >= len(r.sc.Steps) }

// Step runs the next step (a parallel block is one step) and records the
// verdicts of its expectations. An error means the rehearsal itself broke
// (not that an expectation failed); the run should then be closed.
func (r *Run) Step(ctx context.Context) (StepResult, error) {
	if r.Done() {
		return StepResult{}, fmt.Errorf("rehearse %s: no steps left", r.sc.Name)
	}
	s := &r.sc.Steps[r.next]
	r.next++
	var res StepResult
	var err error
	if s.Parallel != nil {
		res, err = r.runParallel(ctx, s)
	} else {
		res, err = r.runOne(ctx, s, noBarrier)
	}
	res.Index = r.next
	if err != nil {
		return res, fmt.Errorf("rehearse %s: step %d (%s): %w", r.sc.Name, r.next, res.Label, err)
	}
	res.Clock = r.env.clock.Now()
	// Each step takes one second of fake time, so history and arrivals
	// read in order.
	r.env.clock.Advance(stepTick)
	for i := range res.Verdicts {
		res.Verdicts[i].Name = fmt.Sprintf("step %d %s", r.next, res.Verdicts[i].Name)
	}
	r.verdicts = append(r.verdicts, res.Verdicts...)
	r.results = append(r.results, res)
	return res, nil
}

func (r *Run) runOne(ctx context.Context, s *Step, wait barrier) (StepResult, error) {
	res := StepResult{Label: label(s)}
	if v := ConsentReading(r.sc, s); v != "" {
		res.Label += " (the gate reads " + v + ")"
	}
	out, err := verbFuncs[s.Do](r, ctx, s, wait)
	if err != nil {
		return res, err
	}
	out.detail = r.env.stable(out.detail)
	res.Class, res.Detail, res.Runs = out.class, out.detail, out.runs
	for _, v := range out.verdicts {
		v.Name = "(" + res.Label + ") " + v.Name
		res.Verdicts = append(res.Verdicts, v)
	}
	if s.Expect != "" {
		res.Verdicts = append(res.Verdicts, Verdict{Name: "(" + res.Label + ") expect", Pos: s.KeyPos["expect"],
			Expected: s.Expect, Actual: out.class, Pass: out.class == s.Expect})
	}
	if s.ReasonContains != "" {
		res.Verdicts = append(res.Verdicts, Verdict{Name: fmt.Sprintf("(%s) reason_contains %q", res.Label, s.ReasonContains), Pos: s.KeyPos["reason_contains"],
			Expected: fmt.Sprintf("a reason containing %q", s.ReasonContains), Actual: fmt.Sprintf("%q", out.detail),
			Pass: strings.Contains(out.detail, s.ReasonContains)})
	}
	return res, nil
}

// runParallel runs the block's steps in goroutines at once. The report
// lists the classes that occurred in sorted order, never which goroutine
// won, so the same scenario always gives the same report.
func (r *Run) runParallel(ctx context.Context, s *Step) (StepResult, error) {
	n := len(s.Parallel)
	subs := make([]StepResult, n)
	errs := make([]error, n)
	var decided, done sync.WaitGroup
	decided.Add(n)
	for i := range s.Parallel {
		done.Add(1)
		go func() {
			defer done.Done()
			var once sync.Once
			arrive := func() { once.Do(func() { decided.Done(); decided.Wait() }) }
			defer once.Do(decided.Done) // a step that never reached its barrier
			subs[i], errs[i] = r.runOne(ctx, &s.Parallel[i], arrive)
		}()
	}
	done.Wait()
	res := StepResult{Label: fmt.Sprintf("parallel (%d steps at once)", n)}
	classes := make([]string, n)
	for i, sub := range subs {
		if errs[i] != nil {
			return res, fmt.Errorf("parallel[%d] %s: %w", i+1, sub.Label, errs[i])
		}
		classes[i] = sub.Class
		// Who won a race varies, so the report keeps only the labels of
		// the racing steps and the sorted classes of the block.
		subs[i] = StepResult{Label: sub.Label}
	}
	sort.Strings(classes)
	res.Class = strings.Join(classes, ", ")
	res.Parallel = subs
	if len(s.ExpectAll) > 0 {
		want := append([]string(nil), s.ExpectAll...)
		sort.Strings(want)
		res.Verdicts = append(res.Verdicts, Verdict{Name: "(parallel) expect_all", Pos: s.KeyPos["expect_all"],
			Expected: strings.Join(want, ", "), Actual: res.Class, Pass: strings.Join(want, ", ") == res.Class})
	}
	return res, nil
}

// action returns the run's state of a named action (validated to exist).
func (r *Run) action(name string) *actionState {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.actions[name]
}

// names maps keys back to action names for messages.
func (r *Run) names(keys []string) []string {
	byKey := r.keyNames()
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = or(byKey[k], k)
	}
	return out
}

func (r *Run) keyNames() map[string]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]string{}
	for name, a := range r.actions {
		out[a.key] = name
	}
	return out
}

// label describes a step in a few words, e.g. "send ack by wf-ack".
func label(s *Step) string {
	parts := []string{s.Do}
	for _, p := range []struct{ pre, v string }{
		{"", s.Action}, {"", s.Task}, {"", s.Customer}, {"", s.Source}, {"", s.Fault},
		{"", s.For}, {"at ", s.Point}, {"", s.Field}, {"= ", s.Value}, {"as ", s.As}, {"", s.Run}, {"is ", s.State}, {"by ", s.Actor},
	} {
		if p.v != "" {
			parts = append(parts, p.pre+p.v)
		}
	}
	return strings.Join(parts, " ")
}

// Finish runs any remaining steps, checks the final expectations and
// returns the report. It may be called once.
func (r *Run) Finish(ctx context.Context) (Report, error) {
	for !r.Done() {
		if _, err := r.Step(ctx); err != nil {
			return Report{}, err
		}
	}
	if r.final {
		return Report{}, fmt.Errorf("rehearse %s: already finished", r.sc.Name)
	}
	r.final = true
	snap, err := r.Snapshot(ctx)
	if err != nil {
		return Report{}, err
	}
	final, err := r.checkFinal(ctx, snap)
	if err != nil {
		return Report{}, fmt.Errorf("rehearse %s: final expectations: %w", r.sc.Name, err)
	}
	r.verdicts = append(r.verdicts, final...)
	return r.report(snap), nil
}

// Close kills the process groups of runs still going, lets paused
// executors finish, stops the mailbox and closes (and, if temporary,
// removes) the ledger.
func (r *Run) Close() error {
	// No process a scenario started outlives its rehearsal.
	for _, name := range sortedKeys(r.workflows) {
		w := r.workflows[name]
		for _, p := range w.procs {
			p.kill(EndKilled, "killed: the rehearsal ended before it was awaited")
		}
		<-w.done
	}
	return errors.Join(r.wakePaused(), r.env.close())
}

// RunAll rehearses sc from start to finish and returns its report.
func RunAll(ctx context.Context, sc *Scenario, opts Options) (rep Report, err error) {
	r, err := NewRun(ctx, sc, opts)
	if err != nil {
		return Report{}, err
	}
	defer func() {
		if cerr := r.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("rehearse %s: clean up: %w", sc.Name, cerr)
		}
	}()
	return r.Finish(ctx)
}

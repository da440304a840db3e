package scenarios

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"gatehouse/internal/textenc"
	"gatehouse/ledger"
)

// verbSpec lists the keys a verb needs and the ones it may take.
type verbSpec struct {
	required []string
	optional []string
	// noParallel is set for verbs that change the whole world at once and
	// so cannot race meaningfully (restart, wait).
	noParallel bool
}

// Verbs maps every step verb to its keys. The documentation in
// docs/scenarios.md follows this table.
var verbs = map[string]verbSpec{
	"propose":       {required: []string{"action", "actor"}, optional: []string{"subject", "body", "to", "amount"}},
	"revise":        {required: []string{"action", "actor"}, optional: []string{"subject", "body", "to", "amount"}},
	"approve":       {required: []string{"action", "actor"}},
	"send":          {required: []string{"action", "actor"}},
	"deliver_event": {required: []string{"action", "actor"}, optional: []string{"approver", "subject", "body", "to"}},
	"cancel":        {required: []string{"action", "actor", "reason"}},
	"view":          {required: []string{"task", "actor"}, optional: []string{"kind"}},
	"leave":         {required: []string{"task", "actor"}},
	"claim":         {required: []string{"task", "actor"}},
	"take_over":     {required: []string{"task", "actor", "reason"}},
	"release":       {required: []string{"task", "actor"}, optional: []string{"reason"}},
	"complete_task": {required: []string{"task", "actor"}},
	"set":           {required: []string{"field", "value"}, optional: []string{"customer", "task"}},
	"source_down":   {required: []string{"source"}},
	"source_up":     {required: []string{"source"}},
	"mailbox_fault": {required: []string{"fault"}, optional: []string{"count", "delay", "to"}},
	"crash":         {required: []string{"action", "actor", "at"}},
	"restart":       {noParallel: true},
	"reconcile":     {required: []string{"action", "actor"}},
	"hold":          {required: []string{"action", "actor", "reason"}},
	"release_hold":  {required: []string{"action", "actor", "reason"}},
	"correct":       {required: []string{"action", "actor", "reason", "as"}, optional: []string{"subject", "body", "to"}},
	"stop":          {required: []string{"actor", "reason"}},
	"resume":        {required: []string{"actor", "reason"}},
	"wait":          {required: []string{"for"}, noParallel: true},

	"import_audience":  {required: []string{"release", "csv", "actor", "subject"}, optional: []string{"body"}},
	"remove_recipient": {required: []string{"release", "customer", "actor", "reason"}},
	"approve_audience": {required: []string{"release", "actor"}},
	"send_audience":    {required: []string{"release", "actor"}},

	"run_workflow":   {required: []string{"actor"}, optional: append(workflowKeys, "expect_exit", "expect_exits", "output_contains"), noParallel: true},
	"start_workflow": {required: []string{"actor", "run"}, optional: workflowKeys, noParallel: true},
	"await_workflow": {required: []string{"run"}, optional: []string{"expect_exit", "expect_exits", "output_contains"}, noParallel: true},
	"await_state":    {required: []string{"action", "state"}, optional: []string{"timeout"}, noParallel: true},

	"pause_executor":  {required: []string{"action", "actor", "at"}, noParallel: true},
	"resume_executor": {required: []string{"action"}, noParallel: true},

	"payments_fault": {required: []string{"fault"}, optional: []string{"count", "delay"}},
	"payments_set":   {required: []string{"field", "value"}},
}

// stepCommon are keys every verb step may carry.
var stepCommon = []string{"do", "expect", "reason_contains", "note"}

// Outcome classes a step may expect.
const (
	ClassOK           = "ok"
	ClassSent         = "sent"
	ClassDuplicate    = "duplicate"
	ClassInFlight     = "in_flight"
	ClassDenied       = "denied"
	ClassHeld         = "held"
	ClassUnknown      = "unknown"
	ClassConflict     = "conflict"
	ClassCancelled    = "cancelled"
	ClassFailed       = "failed"
	ClassNotDelivered = "not_delivered"
	ClassStale        = "stale"
	ClassRefused      = "refused"
	// ClassNotPermitted: the actor may not do this (a registered ledger's
	// refusal, exit 21).
	ClassNotPermitted = "not_permitted"
)

// Classes lists every outcome class in documentation order.
var Classes = []string{ClassOK, ClassSent, ClassDuplicate, ClassInFlight, ClassDenied,
	ClassHeld, ClassUnknown, ClassConflict, ClassCancelled, ClassFailed,
	ClassNotDelivered, ClassStale, ClassRefused, ClassNotPermitted}

// Crash points, mailbox faults, sources and actor kinds the format knows.
var (
	CrashPoints  = []string{"before_send", "after_accept", "before_record"}
	FaultNames   = []string{"accept_then_drop", "delay_reply", "reject_temporary", "reject_permanent", "down", "hold_354", "stall_body", "hold_then_store", "none"}
	SourceNames  = []string{"crm", "helpdesk"}
	ActorKinds   = []string{KindStaff, KindPerson, KindWorkflow, KindAgent, KindPolicy}
	PresenceKind = []string{"viewer", "automation"}
)

var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`)

// Parse reads and validates one scenario. Every problem is reported as
// file:line:col with a hint; a scenario with problems is never returned.
//
// The file must be UTF-8; a byte order mark is accepted. Any other encoding
// is one problem that names it.
func Parse(file string, src []byte) (*Scenario, error) {
	if len(src) > MaxFileBytes {
		return nil, Problems{tooLarge(file)}
	}
	var ee *textenc.Error
	if errors.As(textenc.Check(src, true), &ee) {
		pos := Pos{max(ee.Line, 1), max(ee.Col, 1)}
		return nil, Problems{{File: file, Pos: pos, Msg: "not UTF-8 text: " + ee.Problem}}
	}
	root, err := parseYAML(file, textenc.StripBOM(src))
	if err != nil {
		return nil, err
	}
	d := &decoder{file: file}
	sc := &Scenario{File: file}
	d.decode("", root, reflect.ValueOf(sc).Elem())
	if len(d.probs) == 0 {
		v := &validator{decoder: d, sc: sc}
		v.run()
	}
	if len(d.probs) > 0 {
		sort.SliceStable(d.probs, func(i, j int) bool {
			a, b := d.probs[i].Pos, d.probs[j].Pos
			return a.Line < b.Line || (a.Line == b.Line && a.Col < b.Col)
		})
		return nil, d.probs
	}
	return sc, nil
}

// ParseFile reads and validates the scenario in path; a file over
// MaxFileBytes is refused having read no more than the limit (ReadFile).
func ParseFile(path string) (*Scenario, error) {
	src, err := ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(path, src)
}

// validator checks meaning once the shapes are right: required keys,
// known verbs and words, and references to defined actors, tasks,
// customers and actions (an action named by `as` exists from its step on).
type validator struct {
	*decoder
	sc        *Scenario
	actors    map[string]bool
	tasks     map[string]bool
	customers map[string]bool
	actions   map[string]bool
	releases  map[string]bool
	runs      map[string]Pos // background runs started and not yet awaited, where they start
	paused    map[string]Pos // actions whose executor is paused and not yet resumed, where it paused
}

func (v *validator) problem(pos Pos, hint, format string, a ...any) {
	if pos.Line < 1 {
		// The node has no place in the file (a document that is only a
		// tag, say "!0"): the problem is the file's, from its start.
		pos = Pos{1, 1}
	}
	v.probs = append(v.probs, Problem{File: v.file, Pos: pos, Msg: fmt.Sprintf(format, a...), Hint: hint})
}

func (v *validator) run() {
	sc := v.sc
	v.require(sc.Pos, "scenario", map[string]string{"name": sc.Name, "title": sc.Title, "description": sc.Description})
	if sc.Name != "" && !nameRE.MatchString(sc.Name) {
		v.problem(sc.Pos, "use lower-case letters, digits and '-'", "name %q is not a valid scenario name", sc.Name)
	}
	v.world()
	if len(sc.Steps) == 0 {
		v.problem(sc.Pos, "add at least one step", "the scenario has no steps")
	}
	if !v.stepLimit() {
		return
	}
	for i := range sc.Steps {
		v.step(fmt.Sprintf("steps[%d]", i+1), &sc.Steps[i], false)
	}
	v.final()
	for _, run := range sortedKeys(v.runs) {
		v.problem(v.runs[run], "add a step {do: await_workflow, run: "+run+"} to judge how it ended", "run %q is started but never awaited", run)
	}
	for _, act := range sortedKeys(v.paused) {
		v.problem(v.paused[act], "add a step {do: resume_executor, action: "+act+"} to see what its send does when it wakes",
			"the executor of %q is paused but never resumed", act)
	}
}

// require reports each empty required value, naming the key.
func (v *validator) require(pos Pos, what string, vals map[string]string) {
	for _, k := range sortedKeys(vals) {
		if strings.TrimSpace(vals[k]) == "" {
			v.problem(pos, "add "+k+": …", "%s lacks %q", what, k)
		}
	}
}

func (v *validator) world() {
	w := v.sc.World
	v.customers, v.tasks, v.actors, v.actions = map[string]bool{}, map[string]bool{}, map[string]bool{}, map[string]bool{}
	v.releases = map[string]bool{}
	v.runs = map[string]Pos{}
	v.paused = map[string]Pos{}
	for _, a := range w.Actors {
		v.require(a.Pos, "actor", map[string]string{"id": a.ID, "kind": a.Kind})
		v.define(v.actors, "actor", a.ID, a.Pos)
		v.oneOf(a.KeyPos, "kind", a.Kind, ActorKinds)
		var roles []string
		for _, r := range ledger.Roles {
			roles = append(roles, string(r))
		}
		for _, r := range a.Roles {
			v.oneOf(a.KeyPos, "roles", r, roles)
		}
	}
	for _, p := range w.Policies {
		v.require(p.Pos, "policy", map[string]string{"type": p.Type})
	}
	for _, c := range w.Customers {
		v.require(c.Pos, "customer", map[string]string{"id": c.ID, "email": c.Email})
		v.define(v.customers, "customer", c.ID, c.Pos)
	}
	for _, t := range w.Tasks {
		v.require(t.Pos, "task", map[string]string{"id": t.ID, "customer": t.Customer, "subject": t.Subject})
		v.define(v.tasks, "task", t.ID, t.Pos)
		v.ref(t.KeyPos, "customer", t.Customer, v.customers)
		v.ref(t.KeyPos, "owner", t.Owner, v.actors)
	}
	for _, a := range w.Actions {
		req := map[string]string{"name": a.Name, "task": a.Task, "event": a.Event, "type": a.Type, "subject": a.Subject}
		if a.Refund != nil {
			delete(req, "subject") // a refund's content is its refund
		}
		v.require(a.Pos, "action", req)
		v.define(v.actions, "action", a.Name, a.Pos)
		v.ref(a.KeyPos, "task", a.Task, v.tasks)
		for _, m := range a.Material {
			src, field, ok := strings.Cut(m, ".")
			if !ok || field == "" || !slices.Contains(SourceNames, src) {
				v.problem(a.KeyPos["material"], "write source.field, e.g. crm.consent or helpdesk.status", "material field %q is not source.field", m)
			}
		}
	}
	v.refundWorld()
}

func (v *validator) define(set map[string]bool, what, id string, pos Pos) {
	if id == "" {
		return
	}
	if set[id] {
		v.problem(pos, "give each "+what+" its own id", "%s %q is defined twice", what, id)
	}
	set[id] = true
}

// ref checks that a reference names something defined.
func (v *validator) ref(keyPos map[string]Pos, key, val string, defined map[string]bool) {
	if val == "" || defined[val] {
		return
	}
	if key == "release" {
		hint := "import it with an import_audience step first"
		if len(defined) > 0 {
			hint = suggest(val, sortedKeys(defined))
		}
		v.problem(keyPos[key], hint, "release %q is not imported by an earlier import_audience step", val)
		return
	}
	what := key
	if key == "owner" || key == "approver" {
		what = "actor"
	}
	v.problem(keyPos[key], suggest(val, sortedKeys(defined)), "%s %q is not defined in world", what, val)
}

func (v *validator) oneOf(keyPos map[string]Pos, key, val string, allowed []string) {
	if val != "" && !slices.Contains(allowed, val) {
		v.problem(keyPos[key], "one of: "+strings.Join(allowed, ", "), "%s %q is not known", key, val)
	}
}

func (v *validator) duration(keyPos map[string]Pos, key, val string) {
	if val == "" {
		return
	}
	if d, err := time.ParseDuration(val); err != nil || d < 0 {
		v.problem(keyPos[key], "write a duration such as 30s, 5m or 2h", "%s %q is not a duration", key, val)
	}
}

func (v *validator) step(name string, s *Step, inParallel bool) {
	if s.Parallel != nil || s.Do == "" && len(s.ExpectAll) > 0 {
		v.parallel(name, s, inParallel)
		return
	}
	if len(s.ExpectAll) > 0 {
		v.problem(s.KeyPos["expect_all"], "expect_all belongs to a parallel block; use expect", "%s: expect_all on a single step", name)
	}
	if s.Do == "" {
		v.problem(s.Pos, "start the step with do: VERB", "%s has no verb", name)
		return
	}
	spec, ok := verbs[s.Do]
	if !ok {
		v.problem(s.KeyPos["do"], suggest(s.Do, sortedKeys(verbs)), "%s: unknown verb %q", name, s.Do)
		return
	}
	for _, k := range []string{"expect", "reason_contains"} {
		if _, ok := s.KeyPos[k]; ok && inParallel {
			v.problem(s.KeyPos[k], "racing steps have no fixed winner; list the outcomes in the block's expect_all", "%s: %s inside a parallel block", name, k)
		}
	}
	if inParallel && spec.noParallel {
		hint := "put it before or after the parallel block"
		if isWorkflowVerb(s.Do) {
			hint = "to run a command several times at once, give the step copies: N"
		}
		v.problem(s.KeyPos["do"], hint, "%s: %s cannot run in parallel", name, s.Do)
	}
	v.stepKeys(name, s, spec)
	v.stepRefs(s)
	v.stepWords(name, s)
	v.refundStep(name, s)
	if isWorkflowVerb(s.Do) {
		v.workflowStep(name, s)
	}
	if s.Do == "await_state" {
		v.oneOf(s.KeyPos, "state", s.State, stateNames())
		v.positiveDuration(s.KeyPos, "timeout", s.Timeout)
	}
	v.pauseStep(name, s)
}

// pauseStep follows which actions' executors are paused: one at a time per
// action, each resumed later, and only a paused one resumed.
func (v *validator) pauseStep(name string, s *Step) {
	if s.Action == "" || !v.actions[s.Action] {
		return
	}
	switch s.Do {
	case "pause_executor":
		if _, ok := v.paused[s.Action]; ok {
			v.problem(s.KeyPos["action"], "resume it with resume_executor before pausing another",
				"%s: the executor of %q is already paused", name, s.Action)
			return
		}
		v.paused[s.Action] = s.KeyPos["action"]
	case "resume_executor":
		if _, ok := v.paused[s.Action]; !ok {
			v.problem(s.KeyPos["action"], "pause it first with {do: pause_executor, action: "+s.Action+", actor: …, at: before_data}",
				"%s: the executor of %q is not paused", name, s.Action)
			return
		}
		delete(v.paused, s.Action)
	}
}

func (v *validator) parallel(name string, s *Step, inParallel bool) {
	if inParallel {
		v.problem(s.Pos, "flatten the inner block into the outer one", "%s: parallel blocks cannot be nested", name)
		return
	}
	for _, k := range sortedKeys(s.KeyPos) {
		if k != "parallel" && k != "expect_all" && k != "note" {
			v.problem(s.KeyPos[k], "a parallel block takes parallel, expect_all and note", "%s: key %q does not apply to a parallel block", name, k)
		}
	}
	if len(s.Parallel) < 2 {
		v.problem(s.Pos, "list two or more steps under parallel", "%s: a parallel block needs at least two steps", name)
	}
	for i := range s.Parallel {
		v.step(fmt.Sprintf("%s.parallel[%d]", name, i+1), &s.Parallel[i], true)
	}
	if len(s.ExpectAll) > 0 && len(s.ExpectAll) != len(s.Parallel) {
		v.problem(s.KeyPos["expect_all"], "list one class per parallel step, in any order", "%s: expect_all has %d classes for %d steps", name, len(s.ExpectAll), len(s.Parallel))
	}
	for _, c := range s.ExpectAll {
		if !slices.Contains(Classes, c) {
			v.problem(s.KeyPos["expect_all"], suggest(c, Classes), "%s: unknown outcome class %q", name, c)
		}
	}
}

// stepKeys rejects keys the verb does not take and reports missing ones.
func (v *validator) stepKeys(name string, s *Step, spec verbSpec) {
	allowed := append(append(append([]string{}, stepCommon...), spec.required...), spec.optional...)
	for _, k := range sortedKeys(s.KeyPos) {
		if !slices.Contains(allowed, k) {
			v.problem(s.KeyPos[k], s.Do+" takes: "+strings.Join(append(append([]string{}, spec.required...), spec.optional...), ", "),
				"%s: key %q does not apply to %s", name, k, s.Do)
		}
	}
	for _, k := range spec.required {
		if _, ok := s.KeyPos[k]; !ok {
			v.problem(s.Pos, "add "+k+": …", "%s: %s needs %q", name, s.Do, k)
		}
	}
	if s.Do == "set" && (s.Customer == "") == (s.Task == "") {
		v.problem(s.Pos, "set a CRM field with customer: or a helpdesk field with task:", "%s: set needs exactly one of customer or task", name)
	}
	if s.Do == "revise" && s.Subject == "" && s.Body == "" && s.To == "" && s.Amount == 0 {
		v.problem(s.Pos, "give the new subject, body or to (a refund's amount)", "%s: revise changes nothing", name)
	}
}

func (v *validator) stepRefs(s *Step) {
	v.ref(s.KeyPos, "actor", s.Actor, v.actors)
	v.ref(s.KeyPos, "approver", s.Approver, v.actors)
	v.ref(s.KeyPos, "task", s.Task, v.tasks)
	v.ref(s.KeyPos, "customer", s.Customer, v.customers)
	v.ref(s.KeyPos, "action", s.Action, v.actions)
	if s.As != "" {
		v.define(v.actions, "action", s.As, s.KeyPos["as"])
	}
	if s.Do == "import_audience" {
		v.define(v.releases, "release", s.Release, s.KeyPos["release"])
	} else {
		v.ref(s.KeyPos, "release", s.Release, v.releases)
	}
}

func (v *validator) stepWords(name string, s *Step) {
	v.oneOf(s.KeyPos, "source", s.Source, SourceNames)
	if s.Do != "payments_fault" {
		v.oneOf(s.KeyPos, "fault", s.Fault, FaultNames)
	}
	if s.Do == "pause_executor" {
		v.oneOf(s.KeyPos, "at", s.Point, PausePoints)
	} else {
		v.oneOf(s.KeyPos, "at", s.Point, CrashPoints)
	}
	v.oneOf(s.KeyPos, "kind", s.Kind, PresenceKind)
	v.oneOf(s.KeyPos, "expect", s.Expect, Classes)
	v.duration(s.KeyPos, "delay", s.Delay)
	v.duration(s.KeyPos, "for", s.For)
	if s.Do == "set" && s.Task != "" && s.Field == fakeOwnerField {
		v.problem(s.KeyPos["field"], "use claim, take_over or release", "%s: the owner is changed through the gate, not set", name)
	}
	switch s.Fault {
	case "delay_reply", "hold_354", "stall_body", "hold_then_store":
		if s.Delay == "" {
			v.problem(s.Pos, "add delay: e.g. 2s", "%s: %s needs a delay", name, s.Fault)
		}
	}
	if s.Count < 0 {
		v.problem(s.KeyPos["count"], "use a positive count, or leave it out for no end", "%s: count is negative", name)
	}
}

const fakeOwnerField = "owner"

func (v *validator) final() {
	f := v.sc.Expect
	for _, k := range sortedKeys(f.States) {
		if !v.actions[k] {
			v.problem(f.KeyPos["states"], suggest(k, sortedKeys(v.actions)), "states: action %q is not defined", k)
		}
		if !slices.Contains(stateNames(), f.States[k]) {
			v.problem(f.KeyPos["states"], "one of: "+strings.Join(stateNames(), ", "), "states: %s: unknown state %q", k, f.States[k])
		}
	}
	for _, a := range f.Audience {
		v.require(a.Pos, "audience expectation", map[string]string{"release": a.Release})
		v.ref(a.KeyPos, "release", a.Release, v.releases)
	}
	if a := f.Arrivals; a != nil {
		for _, k := range sortedKeys(a.PerAction) {
			if !v.actions[k] {
				v.problem(a.KeyPos["per_action"], suggest(k, sortedKeys(v.actions)), "per_action: action %q is not defined", k)
			}
		}
	}
	if a := f.Records; a != nil {
		for _, k := range sortedKeys(a.PerAction) {
			if !v.actions[k] {
				v.problem(a.KeyPos["per_action"], suggest(k, sortedKeys(v.actions)), "records.per_action: action %q is not defined", k)
			}
		}
	}
}

func stateNames() []string {
	out := make([]string, len(ledger.AllStates))
	for i, s := range ledger.AllStates {
		out[i] = string(s)
	}
	return out
}

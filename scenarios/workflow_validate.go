package scenarios

import (
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// workflowKeys are the keys that describe a command to run.
var workflowKeys = []string{"command", "shell", "dir", "timeout", "stdin", "action", "env", "inherit_env",
	"copies", "kill_at", "kill_after"}

// KillMoments are the moments a scenario may kill a run at.
var KillMoments = []string{"mailbox_accepted"}

// Run ends other than an exit code, as expect_exit names them.
const (
	EndKilled  = "killed"  // the scenario killed it (kill_at, kill_after)
	EndTimeout = "timeout" // it ran past its timeout
)

// DefaultTimeout is how long a run may take when the step names no timeout.
const DefaultTimeout = 30 * time.Second

var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func isWorkflowVerb(do string) bool {
	return do == "run_workflow" || do == "start_workflow" || do == "await_workflow"
}

// workflowStep checks what the key table cannot: one way to name the
// command, words and durations, exit expectations that can be met, and
// background runs started before they are awaited.
func (v *validator) workflowStep(name string, s *Step) {
	if _, ok := s.KeyPos["expect"]; ok {
		v.problem(s.KeyPos["expect"], "a run ends with an exit code: write expect_exit: 0 (or killed, timeout)", "%s: %s takes expect_exit, not expect", name, s.Do)
	}
	if s.Do == "await_workflow" {
		if _, started := v.runs[s.Run]; s.Run != "" && !started {
			v.problem(s.KeyPos["run"], "start it first with start_workflow and run: "+s.Run+" (each run is awaited once)", "%s: run %q is not started by an earlier start_workflow", name, s.Run)
		}
		delete(v.runs, s.Run)
		v.exitExpectations(name, s, 0)
		return
	}
	_, hasCmd := s.KeyPos["command"]
	_, hasShell := s.KeyPos["shell"]
	switch {
	case hasCmd == hasShell:
		v.problem(s.Pos, "give command: [program, arg…], or shell: \"a command line\" to run it with /bin/sh", "%s: %s needs exactly one of command or shell", name, s.Do)
	case hasCmd && (len(s.Command) == 0 || s.Command[0] == ""):
		v.problem(s.KeyPos["command"], "list the program and its arguments, e.g. [./ack.sh, t-1]", "%s: command is empty", name)
	case hasShell && strings.TrimSpace(s.Shell) == "":
		v.problem(s.KeyPos["shell"], "write the command line", "%s: shell is empty", name)
	}
	v.positiveDuration(s.KeyPos, "timeout", s.Timeout)
	v.positiveDuration(s.KeyPos, "kill_after", s.KillAfter)
	v.oneOf(s.KeyPos, "kill_at", s.KillAt, KillMoments)
	if s.KillAt != "" && s.KillAfter != "" {
		v.problem(s.KeyPos["kill_after"], "name one moment", "%s: kill_at and kill_after both given", name)
	}
	if s.Copies < 0 || s.Copies > 16 {
		v.problem(s.KeyPos["copies"], "run between 1 and 16 copies at once", "%s: copies is %d", name, s.Copies)
	}
	for _, k := range sortedKeys(s.Env) {
		switch {
		case !envNameRE.MatchString(k):
			v.problem(s.KeyPos["env"], "use letters, digits and '_'", "%s: env: %q is not a variable name", name, k)
		case slices.Contains(rehearsalEnvNames, k):
			v.problem(s.KeyPos["env"], "the rehearsal sets it; a run points at the rehearsal and nothing else", "%s: env: %s cannot be set", name, k)
		case StartsCode(k):
			v.problem(s.KeyPos["env"], startsCodeHint, "%s: env: %s cannot be set: it makes a program load code before its own", name, k)
		}
	}
	for _, k := range s.InheritEnv {
		switch {
		case !envNameRE.MatchString(k):
			v.problem(s.KeyPos["inherit_env"], "list variable names, e.g. [HOME, LANG]", "%s: inherit_env: %q is not a variable name", name, k)
		case slices.Contains(rehearsalEnvNames, k):
			v.problem(s.KeyPos["inherit_env"], "the rehearsal sets it; a run points at the rehearsal and nothing else", "%s: inherit_env: %s cannot be inherited", name, k)
		case StartsCode(k):
			v.problem(s.KeyPos["inherit_env"], startsCodeHint, "%s: inherit_env: %s cannot be inherited: it makes a program load code before its own", name, k)
		}
	}
	if s.Do == "start_workflow" && s.Run != "" {
		if _, running := v.runs[s.Run]; running {
			v.problem(s.KeyPos["run"], "await it before starting another under the same name", "%s: run %q is already running", name, s.Run)
		}
		v.runs[s.Run] = s.KeyPos["run"]
	}
	v.exitExpectations(name, s, max(s.Copies, 1))
}

// exitExpectations checks expect_exit and expect_exits; copies is 0 when
// the number of processes is not known here (await_workflow).
func (v *validator) exitExpectations(name string, s *Step, copies int) {
	check := func(key, e string) {
		if e == EndKilled || e == EndTimeout {
			return
		}
		if n, err := strconv.Atoi(e); err != nil || n < 0 || n > 255 {
			v.problem(s.KeyPos[key], "write an exit code 0–255, killed or timeout", "%s: %s: %q is not an exit code", name, key, e)
		}
	}
	_, one := s.KeyPos["expect_exit"]
	_, all := s.KeyPos["expect_exits"]
	if one {
		check("expect_exit", s.ExpectExit)
	}
	for _, e := range s.ExpectExits {
		check("expect_exits", e)
	}
	switch {
	case one && all:
		v.problem(s.KeyPos["expect_exits"], "expect_exit for one process, expect_exits for copies", "%s: expect_exit and expect_exits both given", name)
	case one && copies > 1:
		v.problem(s.KeyPos["expect_exit"], "list one exit per copy under expect_exits, in any order, e.g. [0, 10]", "%s: expect_exit with %d copies", name, copies)
	case all && copies > 0 && len(s.ExpectExits) != copies:
		v.problem(s.KeyPos["expect_exits"], "list one exit per copy, in any order", "%s: expect_exits has %d exits for %d copies", name, len(s.ExpectExits), copies)
	}
}

func (v *validator) positiveDuration(keyPos map[string]Pos, key, val string) {
	if val == "" {
		return
	}
	if d, err := time.ParseDuration(val); err != nil || d <= 0 {
		v.problem(keyPos[key], "write a duration such as 500ms, 10s or 2m", "%s %q is not a positive duration", key, val)
	}
}

// RunsCommands reports whether the scenario starts external commands, which
// a reader must know before rehearsing a file from someone else.
func (sc *Scenario) RunsCommands() bool { return len(sc.Commands()) > 0 }

// Commands lists, in step order, each command the scenario would start, as
// the report shows it.
func (sc *Scenario) Commands() []string {
	var out []string
	for _, s := range sc.Steps {
		for _, p := range append([]Step{s}, s.Parallel...) {
			if p.Do == "run_workflow" || p.Do == "start_workflow" {
				out = append(out, commandLine(&p))
			}
		}
	}
	return out
}

// codeStartNames are the environment variables that make a dynamic loader
// or an interpreter run code of the variable's choosing before the
// program's own (a preloaded library's constructor, a startup file, an
// option that adds a module): a scenario file must not be able to do that
// to every program its runs start, the gatehouse binary among them.
// LD_* and DYLD_* are refused as families (see StartsCode).
var codeStartNames = []string{"BASH_ENV", "ENV", "PROMPT_COMMAND", "SHELLOPTS", "IFS",
	"PYTHONPATH", "PYTHONSTARTUP", "PYTHONHOME", "PERL5LIB", "PERL5OPT", "RUBYOPT", "RUBYLIB",
	"NODE_OPTIONS", "NODE_PATH", "JAVA_TOOL_OPTIONS", "GCONV_PATH"}

const startsCodeHint = "loader and interpreter start variables (LD_*, DYLD_*, BASH_ENV, PYTHONPATH, NODE_OPTIONS, … see docs/scenarios.md) are never passed to a run"

// StartsCode reports whether an environment variable of this name makes a
// loader or an interpreter start code of its choosing. Names are compared
// case-insensitively: refusing a spelling no loader reads costs nothing.
func StartsCode(name string) bool {
	up := strings.ToUpper(name)
	return strings.HasPrefix(up, "LD_") || strings.HasPrefix(up, "DYLD_") || slices.Contains(codeStartNames, up)
}

// RunSpec is one command a scenario starts, with everything that shapes
// what it does besides its arguments: where it runs and what it is given
// in its environment.
type RunSpec struct {
	Command    string
	Dir        string            // as written ("" for the folder of the file)
	Env        map[string]string // set by the scenario
	InheritEnv []string          // taken from the caller's environment
}

// Runs lists the commands the scenario starts when rehearsed, in order.
func (sc *Scenario) Runs() []RunSpec {
	var out []RunSpec
	for _, s := range sc.Steps {
		for _, p := range append([]Step{s}, s.Parallel...) {
			if p.Do == "run_workflow" || p.Do == "start_workflow" {
				out = append(out, RunSpec{Command: commandLine(&p), Dir: p.Dir, Env: p.Env, InheritEnv: p.InheritEnv})
			}
		}
	}
	return out
}

// commandLine shows a command as its author would type it.
func commandLine(s *Step) string {
	if s.Shell != "" {
		return "sh -c " + strconv.Quote(s.Shell)
	}
	parts := make([]string, len(s.Command))
	for i, a := range s.Command {
		if a == "" || strings.ContainsAny(a, " \t\"'$\\|&;<>()*?") {
			a = strconv.Quote(a)
		}
		parts[i] = a
	}
	return strings.Join(parts, " ")
}

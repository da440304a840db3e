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
			v.problem(s.KeyPos["env"], startsCodeProblem(k), "%s: env: %s cannot be set: it makes a program load code before its own", name, k)
		}
	}
	for _, k := range s.InheritEnv {
		switch {
		case !envNameRE.MatchString(k):
			v.problem(s.KeyPos["inherit_env"], "list variable names, e.g. [HOME, LANG]", "%s: inherit_env: %q is not a variable name", name, k)
		case slices.Contains(rehearsalEnvNames, k):
			v.problem(s.KeyPos["inherit_env"], "the rehearsal sets it; a run points at the rehearsal and nothing else", "%s: inherit_env: %s cannot be inherited", name, k)
		case StartsCode(k):
			v.problem(s.KeyPos["inherit_env"], startsCodeProblem(k), "%s: inherit_env: %s cannot be inherited: it makes a program load code before its own", name, k)
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

// codeStart is a variable, or a family of variables sharing a prefix,
// that lets whoever sets it run code of their choosing before (or in place
// of) the program a run starts: a library the loader maps first, a file an
// interpreter or shell runs at start-up, an option that adds a module, a
// configuration that names a program to run. A scenario file must not be
// able to do that to every program its runs start, the gatehouse binary
// among them: what a run executes is its command, shown before it runs.
//
// Whole families are refused, not the members known today: an interpreter
// that grows a new start-up variable (PYTHONUSERBASE's usercustomize.py was
// missed while PYTHONPATH was listed) is covered already. A workflow's own
// settings have their own names (ACK_APPROVER, TEAM), and an interpreter's
// harmless switches have command-line flags (python3 -u).
type codeStart struct {
	name   string // the variable, or the family's prefix
	family bool   // every name starting with name
	why    string // what it runs, for the refusal's hint
}

// codeStarts are the refused variables and families; names compare
// case-insensitively (refusing a spelling no program reads costs nothing).
// Allocator tuning (MALLOC_*), locale and certificate locations load no
// code and stay allowed.
var codeStarts = []codeStart{
	{"LD_", true, "the dynamic loader maps LD_PRELOAD, LD_AUDIT and LD_LIBRARY_PATH's libraries first"},
	{"DYLD_", true, "the macOS loader inserts DYLD_INSERT_LIBRARIES first"},
	{"GLIBC_TUNABLES", false, "it configures the dynamic loader"},
	{"GCONV_PATH", false, "iconv loads its modules from there"},
	{"BASH_", true, "bash runs BASH_ENV's file and imports BASH_FUNC_* functions at start-up"},
	{"ENV", false, "sh runs its file at start-up"},
	{"ZDOTDIR", false, "zsh runs .zshenv from there at start-up"},
	{"SHELLOPTS", false, "bash takes shell options from it (xtrace runs PS4)"},
	{"BASHOPTS", false, "bash takes shell options from it"},
	{"PS0", false, "a shell expands (and runs) its prompt strings"},
	{"PS1", false, "a shell expands (and runs) its prompt strings"},
	{"PS2", false, "a shell expands (and runs) its prompt strings"},
	{"PS4", false, "bash expands (and runs) it before each traced command"},
	{"PROMPT_COMMAND", false, "bash runs it before each prompt"},
	{"IFS", false, "it changes how a shell splits every command"},
	{"CDPATH", false, "it changes where a script's cd goes, and so what it runs"},
	{"PYTHON", true, "CPython runs code from PYTHONSTARTUP, PYTHONPATH, PYTHONUSERBASE's usercustomize.py, PYTHONWARNINGS' categories… at start-up"},
	{"PIP_", true, "pip takes its index and configuration from them"},
	{"PERL", true, "perl loads modules and options from PERL5LIB, PERLLIB, PERL5OPT at start-up"},
	{"RUBY", true, "ruby loads libraries and options from RUBYOPT, RUBYLIB at start-up"},
	{"GEM_", true, "Ruby's require loads gems from GEM_PATH and GEM_HOME"},
	{"BUNDLE_", true, "bundler evaluates the Gemfile they name"},
	{"NODE_", true, "node preloads modules from NODE_OPTIONS and NODE_PATH"},
	{"NPM_CONFIG_", true, "npm takes its scripts' shell, node options and registry from them"},
	{"YARN_", true, "yarn runs the release file they name"},
	{"JAVA", true, "the JVM takes agents and options from JAVA_TOOL_OPTIONS; JAVA_HOME chooses the java that runs"},
	{"_JAVA", true, "the JVM takes agents and options from _JAVA_OPTIONS"},
	{"JDK_", true, "the java launcher takes options from JDK_JAVA_OPTIONS"},
	{"CLASSPATH", false, "the JVM loads classes from it"},
	{"LUA_", true, "lua runs LUA_INIT and loads modules from LUA_PATH and LUA_CPATH"},
	{"PHP", true, "php reads its php.ini (auto_prepend_file) from PHPRC and PHP_INI_SCAN_DIR"},
	{"TCL", true, "tclsh loads init.tcl and packages from TCL_LIBRARY and TCLLIBPATH"},
	{"TK_LIBRARY", false, "wish loads its library from it"},
	{"R_PROFILE", true, "R runs the profile it names at start-up"},
	{"R_ENVIRON", true, "R reads the environment file it names at start-up"},
	{"R_LIBS", true, "R loads packages from them"},
	{"GIT_", true, "git runs the programs GIT_SSH_COMMAND, GIT_ASKPASS, GIT_EXTERNAL_DIFF name and takes configuration (hooks, fsmonitor) from GIT_CONFIG_*"},
	{"XDG_", true, "programs read their configuration (git's, pip's…) from XDG_CONFIG_HOME and XDG_CONFIG_DIRS"},
	{"OPENSSL_", true, "OpenSSL loads the engines and providers OPENSSL_CONF names into every program that uses it"},
	{"GOFLAGS", false, "go build runs the -toolexec program it names"},
	{"GOENV", false, "the go command takes GOFLAGS and more from the file it names"},
	{"GOTOOLCHAIN", false, "the go command runs the toolchain it names"},
	{"GOROOT", false, "it chooses the Go toolchain that builds and runs"},
	{"CGO_", true, "cgo passes compiler and linker options from them"},
	{"RUSTC", true, "cargo runs RUSTC and RUSTC_WRAPPER"},
	{"RUSTFLAGS", false, "rustc takes a linker to run from it"},
	{"CARGO_", true, "cargo runs the wrappers and runners they name"},
	{"DOTNET_", true, "the .NET host loads the assemblies DOTNET_STARTUP_HOOKS names and the profiler DOTNET_PROFILER_PATH names"},
	{"CORECLR_", true, "the .NET runtime loads the profiler CORECLR_PROFILER_PATH names"},
	{"COR_", true, "the .NET Framework loads the profiler COR_PROFILER_PATH names"},
	{"ERL_", true, "erl takes start-up flags (-s, -eval) from ERL_AFLAGS, ERL_FLAGS and ERL_ZFLAGS"},
	{"JULIA_", true, "julia loads code from JULIA_LOAD_PATH and JULIA_DEPOT_PATH's startup.jl"},
	{"GUILE_", true, "guile loads modules from GUILE_LOAD_PATH"},
	{"MAKEFLAGS", false, "make takes options (and variables that run commands) from it"},
	{"VIMINIT", false, "vim runs it at start-up"},
	{"EXINIT", false, "vi and ex run it at start-up"},
}

// startsCodeHint is the refusal's hint besides the entry's own why.
const startsCodeHint = "such variables are never passed to a run (docs/scenarios.md lists them); give your workflow a setting of its own, or the interpreter a flag"

// codeStartOf returns the entry that refuses a variable, if any.
func codeStartOf(name string) (codeStart, bool) {
	up := strings.ToUpper(name)
	for _, c := range codeStarts {
		if up == c.name || (c.family && strings.HasPrefix(up, c.name)) {
			return c, true
		}
	}
	return codeStart{}, false
}

// StartsCode reports whether an environment variable of this name lets a
// loader, a shell, an interpreter or a tool start code of its choosing
// (see codeStarts). Names are compared case-insensitively.
func StartsCode(name string) bool {
	_, ok := codeStartOf(name)
	return ok
}

// startsCodeProblem is the hint for a refused name: which entry refused
// it and why.
func startsCodeProblem(name string) string {
	c, _ := codeStartOf(name)
	label := c.name
	if c.family {
		label += "*"
	}
	return label + ": " + c.why + "; " + startsCodeHint
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

package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const envScenario = `name: env-listing
title: A run with an environment
description: what validate shows
world:
  customers: [{id: cust-ada, email: ada@example.com}]
  tasks: [{id: t-1, customer: cust-ada, subject: Hello, owner: wf}]
  actors: [{id: wf, kind: workflow}]
steps:
  - do: run_workflow
    actor: wf
    shell: 'gatehouse gate show --key nothing-here >/dev/null 2>&1; test $? -ne 127 && touch ran'
    dir: .
    env: {TEAM: support, RUN_MODE: "rehearsal $1"}
    inherit_env: [LANG]
    expect_exit: 0
expect:
  arrivals: {total: 0}
`

// TestValidateListsEachRunsEnvironment: what a run is given besides its
// arguments (its folder, what the scenario sets and inherits) is shown
// before anything runs.
func TestValidateListsEachRunsEnvironment(t *testing.T) {
	file := filepath.Join(t.TempDir(), "env.yaml")
	os.WriteFile(file, []byte(envScenario), 0o644)
	var out, errOut bytes.Buffer
	if code := run([]string{"scenarios", "validate", file}, &out, &errOut); code != 0 {
		t.Fatalf("validate: exit %d\n%s%s", code, out.String(), errOut.String())
	}
	for _, want := range []string{"$ sh -c", "dir: .", `env: RUN_MODE="rehearsal $1"`, `env: TEAM="support"`, "inherit_env: LANG"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("validate output lacks %q:\n%s", want, out.String())
		}
	}
}

// TestRehearseRefusesPreloadedCode: a scenario whose run would be given
// LD_PRELOAD (or inherit it) is refused by validate and by rehearse, exit
// 2, and nothing runs.
func TestRehearseRefusesPreloadedCode(t *testing.T) {
	for _, tc := range [][2]string{{`env: {TEAM: support, RUN_MODE: "rehearsal $1"}`, "env: {LD_PRELOAD: ./evil.so}"},
		{"inherit_env: [LANG]", "inherit_env: [BASH_ENV]"}} {
		field := tc[1]
		dir := t.TempDir()
		file := filepath.Join(dir, "preload.yaml")
		src := strings.Replace(envScenario, tc[0], field, 1)
		src = strings.Replace(src, `shell: 'gatehouse gate show --key nothing-here >/dev/null 2>&1; test $? -ne 127 && touch ran'`, "command: [touch, ran]", 1)
		os.WriteFile(file, []byte(src), 0o644)
		for _, verb := range []string{"validate", "rehearse"} {
			args := []string{"rehearse", file}
			if verb == "validate" {
				args = []string{"scenarios", "validate", file}
			}
			var out, errOut bytes.Buffer
			code := run(args, &out, &errOut)
			if code != exitUsage || !strings.Contains(out.String()+errOut.String(), "preload.yaml:") ||
				!strings.Contains(out.String()+errOut.String(), "load code before its own") {
				t.Errorf("%s with %s: exit %d, want 2 naming the file\nstdout: %s\nstderr: %s", verb, field, code, out.String(), errOut.String())
			}
		}
		if _, err := os.Stat(filepath.Join(dir, "ran")); err == nil {
			t.Errorf("%s: the refused scenario ran its command", field)
		}
	}
}

// TestRehearseFindsItsOwnBinary: a gatehouse built into a folder nobody put
// on PATH (as go run does) rehearses a workflow that calls "gatehouse":
// the run finds the rehearsing binary first on its PATH.
func TestRehearseFindsItsOwnBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	src := gatehouseBinary(t)
	hidden := filepath.Join(t.TempDir(), "not-on-path")
	os.Mkdir(hidden, 0o755)
	bin := filepath.Join(hidden, "gatehouse")
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "own.yaml")
	os.WriteFile(file, []byte(envScenario), 0o644)
	cmd := exec.Command(bin, "rehearse", file)
	cmd.Env = append(os.Environ(), "PATH=/usr/bin:/bin")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("rehearse with gatehouse off PATH: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "ran")); err != nil {
		t.Fatalf("the workflow did not find gatehouse (exit 127):\n%s", out)
	}
}

// TestRehearseRefusesPythonUserBase: PYTHONUSERBASE makes every python
// start run the usercustomize.py of a folder of the variable's choosing,
// before the program's own code (shown first, so the test cannot pass for
// want of a working vector). A scenario that sets it, or inherits it, is
// refused by validate and by rehearse, exit 2, naming the file, line,
// field and variable, and neither the workflow nor the customisation
// runs; the scenario's own setting beside it (ACK_APPROVER) is accepted.
func TestRehearseRefusesPythonUserBase(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not installed")
	}
	dir := t.TempDir()
	userBase, marker := filepath.Join(dir, "userbase"), filepath.Join(dir, "customized")
	q := exec.Command(python, "-c", "import site; print(site.getusersitepackages())")
	q.Env = append(os.Environ(), "PYTHONUSERBASE="+userBase)
	site, err := q.Output()
	if err != nil {
		t.Fatal(err)
	}
	siteDir := strings.TrimSpace(string(site))
	if err := os.MkdirAll(siteDir, 0o755); err != nil {
		t.Fatal(err)
	}
	custom := "open(" + strconv.Quote(marker) + ", 'w').close()\n"
	if err := os.WriteFile(filepath.Join(siteDir, "usercustomize.py"), []byte(custom), 0o644); err != nil {
		t.Fatal(err)
	}
	probe := exec.Command(python, "-c", "pass")
	probe.Env = append(os.Environ(), "PYTHONUSERBASE="+userBase)
	if out, err := probe.CombinedOutput(); err != nil {
		t.Fatalf("python3 with PYTHONUSERBASE: %v\n%s", err, out)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Skipf("this python3 does not run usercustomize.py (user site disabled?): %v", err)
	}
	os.Remove(marker)

	t.Setenv("PYTHONUSERBASE", userBase)
	const owner = `env: {TEAM: support, RUN_MODE: "rehearsal $1"}`
	for _, tc := range []struct{ field, want string }{
		{"env: {ACK_APPROVER: lead, PYTHONUSERBASE: " + strconv.Quote(userBase) + "}", "env: PYTHONUSERBASE cannot be set"},
		{"env: {ACK_APPROVER: lead}\n    inherit_env: [LANG, PYTHONUSERBASE]", "inherit_env: PYTHONUSERBASE cannot be inherited"},
	} {
		src := strings.Replace(envScenario, owner, tc.field, 1)
		src = strings.Replace(src, "    inherit_env: [LANG]\n", "", 1)
		src = strings.Replace(src, `shell: 'gatehouse gate show --key nothing-here >/dev/null 2>&1; test $? -ne 127 && touch ran'`,
			`command: [python3, -c, "open('ran', 'w').close()"]`, 1)
		wdir := t.TempDir()
		file := filepath.Join(wdir, "userbase.yaml")
		os.WriteFile(file, []byte(src), 0o644)
		for _, args := range [][]string{{"scenarios", "validate", file}, {"rehearse", file}} {
			var out, errOut bytes.Buffer
			code := run(args, &out, &errOut)
			all := out.String() + errOut.String()
			if code != exitUsage || !strings.Contains(all, "userbase.yaml:") || !strings.Contains(all, tc.want) ||
				!strings.Contains(all, "PYTHON*") || strings.Contains(all, "ACK_APPROVER cannot") {
				t.Errorf("%s with %s: exit %d, want 2 naming the file and %q\n%s", args[0], tc.field, code, tc.want, all)
			}
		}
		for _, f := range []string{marker, filepath.Join(wdir, "ran")} {
			if _, err := os.Stat(f); err == nil {
				t.Errorf("%s: the refused scenario ran code (%s exists)", tc.field, filepath.Base(f))
			}
		}
	}
}

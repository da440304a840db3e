package scenarios

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"gatehouse/internal/testids"
	"gatehouse/ledger"
)

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// withGatehouse builds the gatehouse command once per test run and puts it
// first on PATH, as a team's workflow finds it, so the examples drive real
// gate processes against the rehearsal's ledger.
func withGatehouse(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the gatehouse binary and runs real processes")
	}
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "gatehouse-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binDir = dir
		out, err := exec.Command("go", "build", "-o", filepath.Join(dir, "gatehouse"), "../cmd/gatehouse").CombinedOutput()
		if err != nil {
			buildErr = errors.New(string(out))
		}
	})
	if buildErr != nil {
		t.Fatalf("build gatehouse: %v", buildErr)
	}
	t.Setenv("PATH", binDir+string(os.PathListSeparator)+os.Getenv("PATH"))
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

func parseFile(t *testing.T, path string) *Scenario {
	t.Helper()
	sc, err := ParseFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

func reportText(t *testing.T, rep Report) string {
	t.Helper()
	var b bytes.Buffer
	if err := WriteText(&b, []Report{rep}); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// writeScenario writes a scenario file into a temporary folder, which is
// then its commands' working directory.
func writeScenario(t *testing.T, src string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "s.yaml")
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

// TestExampleWorkflowsPass rehearses the shell and Python example workflows
// in every scenario that ships with them (the careless one aside).
func TestExampleWorkflowsPass(t *testing.T) {
	withGatehouse(t)
	files, err := filepath.Glob("../examples/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 6 {
		t.Fatalf("%d example scenarios, want at least 6", len(files))
	}
	for _, f := range files {
		if strings.Contains(f, "careless") {
			continue
		}
		t.Run(strings.TrimSuffix(filepath.Base(f), ".yaml"), func(t *testing.T) {
			rep := mustRun(t, parseFile(t, f), Options{})
			if !rep.Passed {
				t.Fatalf("failed:\n%s", reportText(t, rep))
			}
		})
	}
}

// TestCarelessWorkflowFails: the workflow that re-sends on "unknown" under
// a new event id delivers twice, and the rehearsal says so.
func TestCarelessWorkflowFails(t *testing.T) {
	withGatehouse(t)
	rep := mustRun(t, parseFile(t, "../examples/careless-accept-then-drop.yaml"), Options{})
	text := reportText(t, rep)
	if rep.Passed || rep.Counts.Arrived != 2 {
		t.Fatalf("passed=%v arrived=%d, want a failure with 2 arrivals:\n%s", rep.Passed, rep.Counts.Arrived, text)
	}
	for _, want := range []string{
		"FAIL  arrivals.total: expected 1, got 2  (../examples/careless-accept-then-drop.yaml:35:12)",
		"FAIL  arrivals.per_recipient.ada@example.com: expected 1, got 2",
		"send timed out (exit 14); sending again under enquiry-3301-retry",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("report lacks %q:\n%s", want, text)
		}
	}
}

// TestKilledAtMailboxAcceptedThenRestarted: the workflow dies with its
// message stored; after the restart, the workflow run again is told 14,
// reconciles and exits 0. One arrival; the attempt is reconciled; every
// history line is on the rehearsal's clock, gate processes included.
func TestKilledAtMailboxAcceptedThenRestarted(t *testing.T) {
	withGatehouse(t)
	kept := filepath.Join(t.TempDir(), "kept.db")
	rep := mustRun(t, parseFile(t, "../examples/ack-crash-after-accept.yaml"), Options{LedgerPath: kept})
	text := reportText(t, rep)
	if !rep.Passed || rep.Counts.Arrived != 1 {
		t.Fatalf("passed=%v arrived=%d:\n%s", rep.Passed, rep.Counts.Arrived, text)
	}
	killed, restarted := rep.Steps[0].Runs, rep.Steps[2].Runs
	if len(killed) != 1 || killed[0].ExitText() != EndKilled || !strings.HasPrefix(killed[0].End, "killed at mailbox_accepted") {
		t.Fatalf("first run = %+v, want killed at mailbox_accepted", killed)
	}
	if len(restarted) != 1 || restarted[0].ExitCode != 0 {
		t.Fatalf("restarted run = %+v, want exit 0", restarted)
	}
	if at := rep.Rows[0].Attempts; len(at) != 1 || !at[0].Reconciled {
		t.Fatalf("attempts = %+v, want one, reconciled", at)
	}
	l, err := ledger.OpenReadOnly(kept)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	// The killed gate process gave its attempt the rehearsal's lease, the
	// one the restart step runs out.
	atts, err := l.Attempts(context.Background(), rep.Rows[0].Key)
	if err != nil || len(atts) != 1 || atts[0].LeaseUntil.Sub(atts[0].StartedAt) != Lease {
		t.Fatalf("attempts %+v (%v), want one with a lease of %s", atts, err, Lease)
	}
	events, err := l.History(context.Background(), ledger.HistoryFilter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range events {
		if e.At.Before(Start) || e.At.After(Start.Add(time.Hour)) {
			t.Errorf("event at %s is not on the rehearsal's clock: %s", e.At, e.Message)
		}
	}
}

// TestWebhookTwiceAtOnce: two copies of the workflow race on one event;
// one sends, the other reports the duplicate by its exit code.
func TestWebhookTwiceAtOnce(t *testing.T) {
	withGatehouse(t)
	rep := mustRun(t, parseFile(t, "../examples/ack-webhook-twice.yaml"), Options{})
	runs := rep.Steps[0].Runs
	if len(runs) != 2 || runs[0].ExitCode != 0 || runs[1].ExitCode != 10 || rep.Counts.Arrived != 1 {
		t.Fatalf("runs %+v, arrived %d; want exits 0 and 10 and one arrival:\n%s", runs, rep.Counts.Arrived, reportText(t, rep))
	}
	var js bytes.Buffer
	if err := WriteJSON(&js, []Report{rep}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"command": "./ack.sh t-5001 cust-ada enquiry-5001 ada@example.com"`, `"exit_code": 10`,
		`"end": "exit 10"`, `"already sent: enquiry-5001 was acknowledged before; nothing sent"`} {
		if !strings.Contains(js.String(), want) {
			t.Errorf("JSON report lacks %s:\n%s", want, js.String())
		}
	}
}

// TestHangingCommandKilledAtTimeout: a background run whose command hangs,
// with a child of its own, is killed at its timeout with its whole process
// group, and the report says so.
func TestHangingCommandKilledAtTimeout(t *testing.T) {
	withGatehouse(t)
	file := writeScenario(t, `name: hangs
title: A command that hangs
description: it never ends by itself
world:
  actors: [{id: wf, kind: workflow}]
steps:
  - do: start_workflow
    run: stuck
    actor: wf
    shell: "sleep 300 & echo $! > child.pid; echo waiting for ever; wait"
    timeout: 1s
  - {do: wait, for: 5s}
  - {do: await_workflow, run: stuck, expect_exit: timeout}
expect:
  arrivals: {total: 0}
`)
	rep := mustRun(t, parseFile(t, file), Options{})
	text := reportText(t, rep)
	if !rep.Passed {
		t.Fatalf("failed:\n%s", text)
	}
	for _, want := range []string{"→ timeout after 1s: the process group was killed", "│ waiting for ever",
		"3. 09:00:07  await_workflow stuck → timeout"} {
		if !strings.Contains(text, want) {
			t.Errorf("report lacks %q:\n%s", want, text)
		}
	}
	b, err := os.ReadFile(filepath.Join(filepath.Dir(file), "child.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	if running(pid) {
		t.Fatalf("the command's child %d is still running", pid)
	}
}

// running reports whether pid is a process that has not exited (a zombie
// has: it only waits for init to reap it).
func running(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i < 0 || i+2 >= len(b) || b[i+2] != 'Z'
}

// TestRunEnvironment: a run sees the rehearsal's addresses, a scratch HOME,
// PATH, what the scenario sets and inherits, and nothing else from the
// caller; the fakes' API answers it with what the steps did to the fakes.
func TestRunEnvironment(t *testing.T) {
	withGatehouse(t)
	t.Setenv("GATEHOUSE_TEST_SECRET", "s3cret")
	t.Setenv("GATEHOUSE_TEST_LISTED", "listed")
	file := writeScenario(t, `name: env
title: What a run sees
description: its environment and the fakes
world:
  customers: [{id: cust-ada, email: ada@example.com, fields: {consent: "yes"}}]
  tasks: [{id: t-1, customer: cust-ada, subject: Hello, owner: wf}]
  actors: [{id: wf, kind: workflow}]
steps:
  - {do: set, customer: cust-ada, field: consent, value: "no"}
  - do: run_workflow
    actor: wf
    shell: 'env | sort | cut -d= -f1 | tr "\n" " "; echo; curl -s "$GATEHOUSE_CRM_URL/customers/cust-ada"; echo; curl -s "$GATEHOUSE_HELPDESK_URL/tasks/t-1"; echo; echo "$GATEHOUSE_DESTINATION $GATEHOUSE_ACTOR $TEAM"'
    env: {TEAM: support}
    inherit_env: [GATEHOUSE_TEST_LISTED]
    expect_exit: 0
    output_contains: '"consent":"no"'
  - {do: source_down, source: crm}
  - do: run_workflow
    actor: wf
    shell: 'curl -s -o /dev/null -w "crm answers %{http_code}" "$GATEHOUSE_CRM_URL/customers/cust-ada"'
    output_contains: crm answers 503
  - do: run_workflow
    actor: wf
    shell: 'for i in 1 2; do curl -s -o /dev/null -H "Idempotency-Key: k" -d "{\"payment\": \"pay_1\", \"amount\": 500, \"currency\": \"eur\", \"metadata\": {\"gatehouse_key\": \"k-1\"}}" "$GATEHOUSE_PAYMENTS_URL/v1/refunds"; done; curl -s "$GATEHOUSE_PAYMENTS_URL/_fake/records"; echo; echo "at $GATEHOUSE_PAYMENTS_URL"'
    expect_exit: 0
    output_contains: '"per_key":{"k-1":1}'
expect:
  arrivals: {total: 0}
`)
	rep := mustRun(t, parseFile(t, file), Options{})
	text := reportText(t, rep)
	if !rep.Passed {
		t.Fatalf("failed:\n%s", text)
	}
	out := strings.Split(rep.Steps[1].Runs[0].text, "\n")
	names := strings.Fields(out[0])
	want := []string{"GATEHOUSE_ACTOR", "GATEHOUSE_CRM_URL", "GATEHOUSE_DESTINATION", "GATEHOUSE_HELPDESK_URL",
		"GATEHOUSE_LEDGER", "GATEHOUSE_MAILBOX_API", "GATEHOUSE_PAYMENTS_URL", "GATEHOUSE_REHEARSAL_CLOCK", "GATEHOUSE_TEST_LISTED", "HOME", "PATH", "TEAM", "TMPDIR"}
	var got []string
	for _, n := range names {
		if n != "PWD" && n != "SHLVL" && n != "_" { // set by the shell itself
			got = append(got, n)
		}
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("environment names:\n got %v\nwant %v", got, want)
	}
	if strings.Contains(text, "s3cret") {
		t.Error("a variable the scenario did not list reached the run")
	}
	if pay := rep.Steps[4].Runs[0].text; !strings.Contains(pay, "at "+PaymentsName) || !strings.Contains(pay, `"created":"2026-03-02T09:00:`) {
		t.Errorf("the payments fake is not the rehearsal's, named and on its clock:\n%s", pay)
	}
	for _, w := range []string{`"owner":"wf"`, "smtp://rehearsal-mailbox?api=http://rehearsal-mailbox-api wf support"} {
		if !strings.Contains(strings.Join(out, "\n"), w) {
			t.Errorf("output lacks %q:\n%s", w, strings.Join(out, "\n"))
		}
	}
}

// TestOutputIsCapped: a chatty command keeps only its last OutputCap bytes
// and the report says how much there was.
func TestOutputIsCapped(t *testing.T) {
	withGatehouse(t)
	file := writeScenario(t, `name: chatty
title: A command that talks a lot
description: 200000 bytes of output
world:
  actors: [{id: wf, kind: workflow}]
steps:
  - {do: run_workflow, actor: wf, shell: "head -c 200000 /dev/zero | tr '\\0' x; echo; echo last line", expect_exit: 0}
  - {do: run_workflow, actor: wf, shell: 'echo "$GATEHOUSE_LEDGER $HOME"', expect_exit: 0}
expect:
  arrivals: {total: 0}
`)
	rep := mustRun(t, parseFile(t, file), Options{})
	run := rep.Steps[0].Runs[0]
	if run.OutputBytes != 200011 || !run.Truncated || len(run.text) != OutputCap || run.Output[len(run.Output)-1] != "last line" {
		t.Fatalf("bytes %d truncated %v kept %d tail %q", run.OutputBytes, run.Truncated, len(run.text), run.Output)
	}
	// Output that names the rehearsal's addresses is shown shorter, by
	// name, and is still whole.
	if env := rep.Steps[1].Runs[0]; env.Truncated || env.Output[0] != "rehearsal-ledger.db $HOME" {
		t.Fatalf("second run: truncated %v, output %q", env.Truncated, env.Output)
	}
	if text := reportText(t, rep); !strings.Contains(text, "(output 200011 bytes; the first 134475 not kept)") {
		t.Fatalf("report does not say the output was cut:\n%s", text)
	}
}

// TestKillAfter: the scenario kills a run after a real duration; a run
// whose command cannot start breaks the rehearsal with its name.
func TestKillAfter(t *testing.T) {
	withGatehouse(t)
	file := writeScenario(t, `name: kill-after
title: Killed after a moment
description: the scenario ends it
world:
  actors: [{id: wf, kind: workflow}]
steps:
  - {do: run_workflow, actor: wf, command: [sleep, "300"], kill_after: 200ms, expect_exit: killed}
  - {do: run_workflow, actor: wf, command: [sh, -c, "exit 3"], expect_exit: 0}
expect:
  arrivals: {total: 0}
`)
	rep := mustRun(t, parseFile(t, file), Options{})
	text := reportText(t, rep)
	for _, want := range []string{"PASS  step 1 (run_workflow by wf) expect_exit: killed (killed after 200ms as the scenario asked: the process group was killed)",
		"FAIL  step 2 (run_workflow by wf) expect_exit: expected 0, got 3"} {
		if !strings.Contains(text, want) {
			t.Errorf("report lacks %q:\n%s", want, text)
		}
	}
	bad := writeScenario(t, strings.Replace(`name: no-program
title: A program that is not there
description: it cannot start
world:
  actors: [{id: wf, kind: workflow}]
steps:
  - {do: run_workflow, actor: wf, command: [./not-there.sh]}
expect:
  arrivals: {total: 0}
`, "\t", "", -1))
	_, err := RunAll(context.Background(), parseFile(t, bad), Options{})
	if err == nil || !strings.Contains(err.Error(), "step 1 (run_workflow by wf): "+bad+":7:5: start ./not-there.sh") {
		t.Fatalf("err = %v, want the step and the command named", err)
	}
	noDir := writeScenario(t, `name: no-dir
title: A working directory that is not there
description: it cannot start
world:
  actors: [{id: wf, kind: workflow}]
steps:
  - {do: run_workflow, actor: wf, command: [true], dir: missing}
expect:
  arrivals: {total: 0}
`)
	_, err = RunAll(context.Background(), parseFile(t, noDir), Options{})
	if err == nil || !strings.Contains(err.Error(), noDir+":7:5: working directory ") || !strings.Contains(err.Error(), "missing is not a directory") {
		t.Fatalf("err = %v, want the folder and the step's place named", err)
	}
}

// TestSameReportTwiceWithRuns: a rehearsal with real processes, a kill and
// a restart still gives the same report twice.
func TestSameReportTwiceWithRuns(t *testing.T) {
	withGatehouse(t)
	sc := parseFile(t, "../examples/ack-crash-after-accept.yaml")
	var out [2]bytes.Buffer
	for i := range out {
		if err := WriteJSON(&out[i], []Report{mustRun(t, sc, Options{})}); err != nil {
			t.Fatal(err)
		}
	}
	// Message-IDs are drawn at random: all else is the same.
	if testids.Mask(out[0].String()) != testids.Mask(out[1].String()) {
		t.Fatalf("reports differ:\n%s\n---\n%s", out[0].String(), out[1].String())
	}
}

// TestBuiltinsRunNoCommands: no built-in scenario starts a program, and a
// scenario that does lists its commands.
func TestBuiltinsRunNoCommands(t *testing.T) {
	all, err := Builtin()
	if err != nil {
		t.Fatal(err)
	}
	for _, sc := range all {
		if sc.RunsCommands() {
			t.Errorf("built-in %s runs %v", sc.Name, sc.Commands())
		}
	}
	sc := parseFile(t, "../examples/ack-crash-after-accept.yaml")
	want := "./ack.sh t-3101 cust-ada enquiry-3101 ada@example.com"
	if got := sc.Commands(); len(got) != 2 || got[0] != want {
		t.Fatalf("commands = %q", got)
	}
}

// TestDocsWorkflowExample rehearses the scenario docs/scenarios.md shows in
// "Rehearse your own workflow", beside a copy of the example it runs.
func TestDocsWorkflowExample(t *testing.T) {
	withGatehouse(t)
	doc, err := os.ReadFile("../docs/scenarios.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "```yaml\nname: my-ack-crash\n")
	block, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatal("docs/scenarios.md has no my-ack-crash example")
	}
	dir := t.TempDir()
	script, err := os.ReadFile("../examples/ack.sh")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ack.sh"), script, 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "my-ack-crash.yaml")
	if err := os.WriteFile(file, []byte("name: my-ack-crash\n"+block), 0o644); err != nil {
		t.Fatal(err)
	}
	if rep := mustRun(t, parseFile(t, file), Options{}); !rep.Passed || rep.Counts.Arrived != 1 {
		t.Fatalf("the documented example fails:\n%s", reportText(t, rep))
	}
}

// TestAwaitStateTimesOut: a state no run brings the action to fails the
// step after its timeout, saying what the state was.
func TestAwaitStateTimesOut(t *testing.T) {
	file := writeScenario(t, `name: never
title: Waiting for a state that never comes
description: nobody proposes
world:
  customers: [{id: cust-ada, email: ada@example.com}]
  tasks: [{id: t-1, customer: cust-ada, subject: Hello}]
  actors: [{id: wf, kind: workflow}]
  actions: [{name: ack, task: t-1, event: e-1, type: reply_ack, subject: Hi}]
steps:
  - {do: await_state, action: ack, state: sent, timeout: 100ms}
expect:
  arrivals: {total: 0}
`)
	rep := mustRun(t, parseFile(t, file), Options{})
	text := reportText(t, rep)
	want := "FAIL  step 1 (await_state ack is sent) await_state ack sent: expected sent, got absent after 100ms"
	if rep.Passed || !strings.Contains(text, want) || rep.Steps[0].Class != "timeout" {
		t.Fatalf("report lacks %q:\n%s", want, text)
	}
}

// TestKeptLedgerRelativePath: a ledger kept under a relative path is the
// one the scenario's commands write, although they work in another folder.
func TestKeptLedgerRelativePath(t *testing.T) {
	withGatehouse(t)
	example, err := filepath.Abs("../examples/ack-consent-withdrawn.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	t.Chdir(dir)
	rep := mustRun(t, parseFile(t, example), Options{LedgerPath: "kept.db"})
	if !rep.Passed || rep.Counts.Denials != 1 {
		t.Fatalf("failed:\n%s", reportText(t, rep))
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(example), "kept.db")); err == nil {
		t.Fatal("the command wrote a ledger beside the scenario file")
	}
	l, err := ledger.OpenReadOnly(filepath.Join(dir, "kept.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if m, err := l.Metrics(context.Background()); err != nil || m.Denials != 1 {
		t.Fatalf("kept ledger: %+v, %v; want the command's denial in it", m, err)
	}
}

// TestCancelledRehearsalKillsItsRuns: a rehearsal that is cancelled (the
// app quits, ^C) kills the process groups of its runs rather than leave
// them to their timeouts.
func TestCancelledRehearsalKillsItsRuns(t *testing.T) {
	file := writeScenario(t, `name: cancelled
title: Cancelled while a command runs
description: the rehearsal stops
world:
  actors: [{id: wf, kind: workflow}]
steps:
  - {do: run_workflow, actor: wf, shell: "echo $$ > leader.pid; sleep 300", timeout: 10m}
expect:
  arrivals: {total: 0}
`)
	ctx, cancel := context.WithCancel(context.Background())
	pidFile := filepath.Join(filepath.Dir(file), "leader.pid")
	go func() {
		// Cancel once the command is running, which its pid file shows.
		for {
			if b, err := os.ReadFile(pidFile); err == nil && len(b) > 0 && b[len(b)-1] == '\n' {
				cancel()
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	start := time.Now()
	_, err := RunAll(ctx, parseFile(t, file), Options{})
	if err == nil || time.Since(start) > time.Minute {
		t.Fatalf("err = %v after %s, want the cancelled rehearsal to end at once", err, time.Since(start))
	}
	b, _ := os.ReadFile(pidFile)
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if pid <= 0 || running(pid) {
		t.Fatalf("the command (pid %d) is still running", pid)
	}
}

// TestStableHidesAGoneExecutor: recovery names the dead process by pid,
// which changes every rehearsal; the report names it by what it was.
func TestStableHidesAGoneExecutor(t *testing.T) {
	got := (&env{}).stable("attempt 1 has no recorded outcome: its executor process box/0b1e/pid:[4026531836]:4242 is gone")
	if want := "attempt 1 has no recorded outcome: its executor process (a command the scenario ran) is gone"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

// TestUnusedReplyHoldIsDropped: kill_at mailbox_accepted holds the reply
// of the next message; a run that sends nothing leaves no hold behind to
// delay a later step's message.
func TestUnusedReplyHoldIsDropped(t *testing.T) {
	file := writeScenario(t, `name: quiet
title: A run that sends nothing
description: its reply hold must go
world:
  customers: [{id: cust-ada, email: ada@example.com, fields: {consent: "yes"}}]
  tasks: [{id: t-1, customer: cust-ada, subject: Hello, owner: wf}]
  actors: [{id: wf, kind: workflow}, {id: lead, kind: staff}]
  actions: [{name: ack, task: t-1, event: e-1, type: reply_ack, subject: Hi}]
steps:
  - {do: mailbox_fault, fault: reject_temporary, count: 2}
  - {do: run_workflow, actor: wf, command: ["true"], kill_at: mailbox_accepted, expect_exit: 0}
  - {do: deliver_event, action: ack, actor: wf, approver: lead, expect: not_delivered}
  - {do: send, action: ack, actor: wf, expect: not_delivered}
  - {do: send, action: ack, actor: wf, expect: sent}
expect:
  arrivals: {total: 1}
`)
	rep := mustRun(t, parseFile(t, file), Options{})
	if !rep.Passed {
		t.Fatalf("failed:\n%s", reportText(t, rep))
	}
}

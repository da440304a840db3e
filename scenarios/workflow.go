package scenarios

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"gatehouse/internal/oswait"
	"gatehouse/testmailbox"
)

// A scenario's run_workflow and start_workflow steps start a team's own
// command (a shell script, a Python job, a webhook handler) against the
// rehearsal: its ledger, its mailbox and its fake sources, reachable over
// loopback. The command is a real process in its own process group, so a
// timeout or a kill the scenario names ends everything it started, as a
// crash of the team's process would.
//
// Real processes run on real time: timeouts and kill_after are wall-clock
// durations. The gate verbs the command runs read the rehearsal's pretend
// clock through $GATEHOUSE_REHEARSAL_CLOCK, so the ledger keeps one time.

// Variables the rehearsal sets for every run; a scenario cannot set or
// inherit them, so a run points at the rehearsal and nothing else.
var rehearsalEnvNames = []string{"GATEHOUSE_LEDGER", "GATEHOUSE_DESTINATION", "GATEHOUSE_ACTOR",
	"GATEHOUSE_CRM_URL", "GATEHOUSE_HELPDESK_URL", "GATEHOUSE_MAILBOX_API", "GATEHOUSE_PAYMENTS_URL",
	"GATEHOUSE_REHEARSAL_CLOCK", "PATH", "HOME", "TMPDIR"}

// OutputCap is how much of a run's output (standard output and error
// together) a rehearsal keeps: the last OutputCap bytes.
const OutputCap = 64 << 10

// OutputTailLines is how many of its last output lines a report shows.
const OutputTailLines = 5

// replyHold is how long the mailbox holds its reply when a run is to be
// killed at mailbox_accepted: long enough that the kill always comes first.
const replyHold = time.Hour

// RunResult is how one process of a run ended, with the end of its output.
type RunResult struct {
	Command string `json:"command"`
	// ExitCode is the process's exit code; -1 when it was killed.
	ExitCode int `json:"exit_code"`
	// End says how it ended: "exit 0", "killed at mailbox_accepted …",
	// "timeout after 2s …".
	End         string   `json:"end"`
	Output      []string `json:"output_tail"`
	OutputBytes int      `json:"output_bytes"`
	// Truncated says only the last OutputCap bytes were kept.
	Truncated bool `json:"output_truncated,omitempty"`

	how  string // an exit code, EndKilled or EndTimeout, as expect_exit names it
	text string // all kept output, for output_contains
}

// ExitText is how expect_exit names the end: the code, killed or timeout.
func (r RunResult) ExitText() string { return r.how }

// tailBuffer keeps the last cap bytes written to it and counts them all.
type tailBuffer struct {
	mu    sync.Mutex
	buf   []byte
	total int
	cap   int
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.total += len(p)
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.cap; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) snapshot() (string, int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf), t.total
}

// proc is one started process of a run.
type proc struct {
	cmd     *exec.Cmd
	out     *tailBuffer
	copied  chan struct{} // the output pipe reached its end
	exited  chan struct{} // the process exited and was reaped
	waitErr error

	mu         sync.Mutex
	leaderDone bool   // the process itself exited (its group may linger)
	killed     string // why the rehearsal killed it, or ""
	how        string // EndKilled or EndTimeout
}

// kill ends the process's whole group, once, and remembers why.
func (p *proc) kill(how, why string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.leaderDone {
		return // it ended by itself; its leftovers are being killed anyway
	}
	if p.killed == "" {
		p.killed, p.how = why, how
	}
	// A negative pid names the process group, so children and
	// grandchildren the command started end with it.
	syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
}

// workflowRun is one run_workflow or start_workflow step in progress: its
// processes (one per copy) and what ends them early.
type workflowRun struct {
	step    *Step
	command string
	procs   []*proc
	stop    context.CancelFunc // ends the watchers
	done    chan struct{}      // every process ended
	hold    *testmailbox.Fault // the reply hold of kill_at mailbox_accepted
}

// startWorkflow starts the step's copies at once and the watchers that end
// them: the timeout, kill_after and kill_at. A failure names the step's
// place in the file.
func (r *Run) startWorkflow(ctx context.Context, s *Step) (*workflowRun, error) {
	w, err := r.startCopies(ctx, s)
	if err != nil {
		return nil, fmt.Errorf("%s:%d:%d: %w", r.sc.File, s.Pos.Line, s.Pos.Col, err)
	}
	return w, nil
}

func (r *Run) startCopies(ctx context.Context, s *Step) (*workflowRun, error) {
	env, err := r.workflowEnv(s)
	if err != nil {
		return nil, err
	}
	stdin, err := r.workflowStdin(s)
	if err != nil {
		return nil, err
	}
	dir, err := r.workflowDir(s)
	if err != nil {
		return nil, err
	}
	wctx, stop := context.WithCancel(ctx)
	w := &workflowRun{step: s, command: commandLine(s), stop: stop, done: make(chan struct{})}
	arrivedBefore := 0
	if s.KillAt == "mailbox_accepted" {
		// The kill must land after the mailbox stored the message and
		// before the process hears its reply, as with a crash after
		// acceptance: the mailbox holds the reply of the next message.
		if arrivedBefore, err = r.env.mb.Count(ctx, testmailbox.Filter{}); err != nil {
			stop()
			return nil, fmt.Errorf("kill_at mailbox_accepted: %w", err)
		}
		w.hold = &testmailbox.Fault{Kind: testmailbox.FaultDelayReply, Count: 1, Duration: replyHold}
		if err := r.env.mb.AddFault(*w.hold); err != nil {
			stop()
			return nil, fmt.Errorf("kill_at mailbox_accepted: %w", err)
		}
	}
	for range max(s.Copies, 1) {
		p, err := startProc(s, dir, env, stdin)
		if err != nil {
			for _, started := range w.procs {
				started.kill(EndKilled, "killed: a copy of the same step could not start")
			}
			stop()
			return nil, err
		}
		w.procs = append(w.procs, p)
	}
	w.watch(ctx, wctx, r.env.mb, arrivedBefore)
	return w, nil
}

func startProc(s *Step, dir string, env []string, stdin []byte) (*proc, error) {
	var cmd *exec.Cmd
	if s.Shell != "" {
		cmd = exec.Command("/bin/sh", "-c", s.Shell)
	} else {
		cmd = exec.Command(s.Command[0], s.Command[1:]...)
		if strings.ContainsRune(s.Command[0], '/') && !filepath.IsAbs(s.Command[0]) {
			cmd.Path = filepath.Join(dir, s.Command[0]) // relative to the working directory, as the author reads it
		}
	}
	cmd.Dir, cmd.Env = dir, env
	cmd.Stdin = bytes.NewReader(stdin)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// The process writes into a pipe of ours rather than one exec copies,
	// so that Wait returns when the process exits even if something it
	// left behind still holds the pipe.
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", commandLine(s), err)
	}
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		pr.Close()
		pw.Close()
		return nil, fmt.Errorf("start %s: %w", commandLine(s), err)
	}
	pw.Close()
	p := &proc{cmd: cmd, out: &tailBuffer{cap: OutputCap}, copied: make(chan struct{}), exited: make(chan struct{})}
	go func() {
		io.Copy(p.out, pr)
		pr.Close()
		close(p.copied)
	}()
	go func() {
		err := cmd.Wait()
		p.mu.Lock()
		p.waitErr, p.leaderDone = err, true
		p.mu.Unlock()
		// Whatever the process left running in its group ends with it.
		pgid := cmd.Process.Pid
		syscall.Kill(-pgid, syscall.SIGKILL)
		awaitGroupGone(pgid)
		close(p.exited)
	}()
	return p, nil
}

// groupGoneWait bounds how long a run waits for the rest of its killed
// process group to be reaped.
const groupGoneWait = 10 * time.Second

// awaitGroupGone waits until no process of the group is left running. A
// killed grandchild (the gatehouse process a script ran) is reaped by init,
// not by us, and until then it still looks alive to the ledger's recovery,
// which would leave its attempt in flight until its lease ran out. No
// signal says when that happens, so the group is polled; where init never
// reaps, only zombies remain, and the wait ends there (the rehearsal's
// restart still recovers their attempts by the lease).
func awaitGroupGone(pgid int) {
	budget := oswait.NewBudget(groupGoneWait)
	for !budget.Spent() {
		if err := syscall.Kill(-pgid, 0); errors.Is(err, syscall.ESRCH) {
			return
		}
		if onlyZombies(pgid) {
			return
		}
		oswait.Pause(context.Background(), 5*time.Millisecond)
	}
}

// onlyZombies reports whether every process left in the group has exited
// and waits only to be reaped, as /proc shows it. Without /proc it says no.
func onlyZombies(pgid int) bool {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return false
	}
	want := strconv.Itoa(pgid)
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // gone meanwhile
		}
		// "pid (comm) state ppid pgrp …"; comm may hold spaces and ')'.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 || i+2 > len(b) {
			continue
		}
		f := strings.Fields(string(b[i+2:]))
		if len(f) >= 3 && f[2] == want && f[0] != "Z" {
			return false
		}
	}
	return true
}

// watch ends the run's processes at the timeout, after kill_after, when
// the mailbox stored a message (kill_at: mailbox_accepted), or when the
// rehearsal itself is cancelled (parent). ctx ends the watchers once every
// process is gone.
func (w *workflowRun) watch(parent, ctx context.Context, mb *testmailbox.Mailbox, arrivedBefore int) {
	timeout := DefaultTimeout
	if w.step.Timeout != "" {
		timeout, _ = time.ParseDuration(w.step.Timeout) // validated
	}
	killAll := func(how, why string) {
		for _, p := range w.procs {
			p.kill(how, why)
		}
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := oswait.NewTimer(timeout) // the command runs in real time
		defer t.Stop()
		select {
		case <-t.C:
			after := w.step.Timeout
			if after == "" {
				after = DefaultTimeout.String() + " (the default)"
			}
			killAll(EndTimeout, "timeout after "+after+": the process group was killed")
		case <-ctx.Done():
			if parent.Err() != nil {
				killAll(EndKilled, "killed: the rehearsal was cancelled")
			}
		}
	}()
	if w.step.KillAfter != "" {
		d, _ := time.ParseDuration(w.step.KillAfter) // validated
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := oswait.NewTimer(d)
			defer t.Stop()
			select {
			case <-t.C:
				killAll(EndKilled, "killed after "+w.step.KillAfter+" as the scenario asked: the process group was killed")
			case <-ctx.Done():
			}
		}()
	}
	if w.step.KillAt == "mailbox_accepted" {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := mb.WaitFor(ctx, testmailbox.Filter{}, arrivedBefore+1); err == nil {
				killAll(EndKilled, "killed at mailbox_accepted: the mailbox had stored its message; the process group was killed before it heard the reply")
			}
		}()
	}
	go func() {
		for _, p := range w.procs {
			<-p.exited
			<-p.copied
		}
		w.stop()
		wg.Wait()
		close(w.done)
	}()
}

// wait waits for every process of the run and returns how each ended,
// sorted so that which copy won a race never changes the report.
func (r *Run) waitWorkflow(w *workflowRun) ([]RunResult, error) {
	<-w.done
	if w.hold != nil {
		if err := r.dropUnusedHold(w.hold); err != nil {
			return nil, err
		}
	}
	out := make([]RunResult, len(w.procs))
	for i, p := range w.procs {
		out[i] = r.result(w.command, p)
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.End != b.End {
			return a.End < b.End
		}
		return strings.Join(a.Output, "\n") < strings.Join(b.Output, "\n")
	})
	return out, nil
}

// dropUnusedHold removes the reply hold of kill_at when no message came to
// use it, so it cannot delay a later step's message.
func (r *Run) dropUnusedHold(hold *testmailbox.Fault) error {
	var keep []testmailbox.Fault
	dropped := false
	for _, st := range r.env.mb.Faults() {
		if !dropped && st.Kind == hold.Kind && st.Duration == hold.Duration && st.Remaining > 0 {
			dropped = true
			continue
		}
		if st.Remaining == 0 {
			continue
		}
		f := st.Fault
		if st.Remaining > 0 {
			f.Count = st.Remaining
		}
		keep = append(keep, f)
	}
	if !dropped {
		return nil
	}
	if err := r.env.mb.SetFaults(keep); err != nil {
		return fmt.Errorf("drop the unused reply hold: %w", err)
	}
	return nil
}

func (r *Run) result(command string, p *proc) RunResult {
	raw, total := p.out.snapshot()
	text := r.env.stable(raw)
	res := RunResult{Command: command, OutputBytes: total, Truncated: total > len(raw), text: text}
	p.mu.Lock()
	killed, how, waitErr := p.killed, p.how, p.waitErr
	p.mu.Unlock()
	var exitErr *exec.ExitError
	switch {
	case killed != "":
		res.ExitCode, res.End, res.how = -1, killed, how
	case waitErr == nil:
		res.End, res.how = "exit 0", "0"
	case errors.As(waitErr, &exitErr) && exitErr.ExitCode() >= 0:
		res.ExitCode = exitErr.ExitCode()
		res.End, res.how = "exit "+strconv.Itoa(res.ExitCode), strconv.Itoa(res.ExitCode)
	default:
		// Killed by a signal nobody in the rehearsal sent.
		res.ExitCode, res.End, res.how = -1, "ended by a signal: "+waitErr.Error(), EndKilled
	}
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	if text == "" {
		lines = nil
	}
	res.Output = lines[max(len(lines)-OutputTailLines, 0):]
	return res
}

// runPath is the caller's PATH with the directory of the running binary
// first, so that a workflow's "gatehouse" is the one rehearsing it, also
// when it was built by go run into a directory nobody put on PATH.
func runPath() string {
	path := os.Getenv("PATH")
	exe, err := os.Executable()
	if err != nil {
		return path
	}
	dir := filepath.Dir(exe)
	if first, _, _ := strings.Cut(path, string(os.PathListSeparator)); first == dir {
		return path
	}
	if path == "" {
		return dir
	}
	return dir + string(os.PathListSeparator) + path
}

// workflowEnv is the run's whole environment: the rehearsal's addresses,
// a scratch HOME, PATH to find programs, and only what the scenario lists.
func (r *Run) workflowEnv(s *Step) ([]string, error) {
	scratch, err := r.env.scratchDir()
	if err != nil {
		return nil, err
	}
	vars := map[string]string{
		"GATEHOUSE_LEDGER":          r.env.path,
		"GATEHOUSE_DESTINATION":     r.env.mb.Target(),
		"GATEHOUSE_MAILBOX_API":     r.env.mb.APIURL(),
		"GATEHOUSE_ACTOR":           s.Actor,
		"GATEHOUSE_CRM_URL":         r.env.apiURL + "/crm",
		"GATEHOUSE_HELPDESK_URL":    r.env.apiURL + "/helpdesk",
		"GATEHOUSE_PAYMENTS_URL":    r.env.paymentsURL,
		"GATEHOUSE_REHEARSAL_CLOCK": r.env.apiURL + "/clock",
		"PATH":                      runPath(),
		"HOME":                      scratch,
		"TMPDIR":                    scratch,
	}
	for _, k := range s.InheritEnv {
		if v, ok := os.LookupEnv(k); ok && !StartsCode(k) {
			vars[k] = v
		}
	}
	for k, v := range s.Env {
		if !StartsCode(k) { // refused by validation already; never passed on
			vars[k] = v
		}
	}
	out := make([]string, 0, len(vars))
	for _, k := range sortedKeys(vars) {
		out = append(out, k+"="+vars[k])
	}
	return out, nil
}

// workflowStdin is the literal stdin, or the action's business event as
// JSON when the step names an action, or nothing.
func (r *Run) workflowStdin(s *Step) ([]byte, error) {
	if s.Stdin != "" || s.Action == "" {
		return []byte(s.Stdin), nil
	}
	a := r.action(s.Action)
	r.mu.Lock()
	ev := map[string]any{"action": a.name, "key": a.key, "task": a.taskID, "customer": a.customer,
		"event": a.event, "type": a.typ, "target": a.target, "to": a.to, "subject": a.subject, "body": a.body,
		"material": append([]string{}, a.material...)}
	r.mu.Unlock()
	b, err := json.Marshal(ev)
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// workflowDir is the working directory: dir relative to the scenario
// file's folder, or that folder.
func (r *Run) workflowDir(s *Step) (string, error) {
	base := filepath.Dir(r.sc.File)
	dir := s.Dir
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(base, dir)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("working directory %s: %w", s.Dir, err)
	}
	if fi, err := os.Stat(abs); err != nil || !fi.IsDir() {
		return "", fmt.Errorf("working directory %s is not a directory", abs)
	}
	return abs, nil
}

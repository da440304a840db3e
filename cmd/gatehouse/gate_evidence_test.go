package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net/smtp"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gatehouse/destination"
	"gatehouse/destination/fake"
	"gatehouse/fakes"
	"gatehouse/ledger"
	"gatehouse/testmailbox"
)

// binEnv runs the built binary against one ledger, as a workflow would.
type binEnv struct {
	*gateEnv
	bin string
}

func newBinEnv(t *testing.T) *binEnv {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the binary")
	}
	return &binEnv{gateEnv: newGateEnv(t), bin: gatehouseBinary(t)}
}

// run executes `gatehouse gate <args> --ledger L` as its own process.
func (b *binEnv) run(args ...string) result {
	b.t.Helper()
	return runCommand(b.t, exec.Command(b.bin, append(append([]string{"gate"}, args...), "--ledger", b.ledger)...))
}

// runCommand runs cmd to its end and returns its exit code and output; a
// command that could not start fails the test.
func runCommand(t *testing.T, cmd *exec.Cmd) result {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return result{code: code, stdout: out.String(), stderr: errOut.String()}
}

func (b *binEnv) mustRun(args ...string) result {
	b.t.Helper()
	r := b.run(args...)
	if r.code != 0 {
		b.t.Fatalf("gate %s: exit %d\n%s%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r
}

// approvedVia proposes and approves one acknowledgement to destination.
func (b *binEnv) approvedVia(destination, enquiry string) string {
	b.t.Helper()
	task := "task-" + enquiry
	b.mustRun("claim", "--task", task, "--customer", "cust-42", "--as", "wf")
	key := strings.TrimSpace(b.mustRun("propose", "--as", "wf", "--task", task, "--customer", "cust-42",
		"--event", enquiry, "--type", "reply_ack", "--target", task, "--to", "ada@example.com",
		"--subject", "We received your enquiry", "--body", "Hello Ada", "--destination", destination).stdout)
	b.mustRun("approve", "--key", key, "--as", "lead", "--material", "crm.consent=yes")
	return key
}

func startMailbox(t *testing.T, faults ...string) *testmailbox.Mailbox {
	t.Helper()
	mb, err := testmailbox.Start(context.Background(), testmailbox.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mb.Close() })
	for _, spec := range faults {
		f, err := testmailbox.ParseFault(spec)
		if err != nil {
			t.Fatal(err)
		}
		if err := mb.AddFault(f); err != nil {
			t.Fatal(err)
		}
	}
	return mb
}

// TestUnknownOutcomeIsNeverProvedAbsentElsewhere is the duplicate that
// used to happen: the mailbox stores the message and hangs up (exit 14); a
// reconcile against an empty directory said "did not arrive, safe to
// retry", a release and a second send followed, and the customer had two
// messages. Now the empty directory is refused, the hold cannot be
// released, a resend is blocked, and the attempt's own destination settles
// it: one arrival.
func TestUnknownOutcomeIsNeverProvedAbsentElsewhere(t *testing.T) {
	b := newBinEnv(t)
	mb := startMailbox(t, "accept_then_drop:count=1")
	key := b.approvedVia(mb.Target(), "enq-dup")
	send := []string{"send", "--key", key, "--as", "wf", "--material", "crm.consent=yes"}
	wantExit(t, b.run(send...), exitUnknown, "reconcile, do not resend")

	empty := t.TempDir()
	wantExit(t, b.run("reconcile", "--key", key, "--as", "ops", "--destination", "file://"+empty),
		exitWrongDestination, "attempt 1 went to "+strings.Split(mb.Target(), "?")[0])
	wantExit(t, b.run("release-hold", "--key", key, "--as", "ops", "--reason", "nothing arrived"), exitUnknown)
	wantExit(t, b.run(send...), exitUnknown)

	wantExit(t, b.run("reconcile", "--key", key, "--as", "ops"), exitOK)
	wantExit(t, b.run(send...), exitDuplicate)
	if n, _ := mb.Count(context.Background(), testmailbox.Filter{ActionKey: key}); n != 1 {
		t.Fatalf("%d arrivals, want exactly 1", n)
	}
	show := b.mustRun("show", "--key", key).stdout
	for _, want := range []string{"destination:  " + strings.Split(mb.Target(), "?")[0], "via " + strings.Split(mb.Target(), "?")[0],
		"refused ops's reconcile"} {
		if !strings.Contains(show, want) && !strings.Contains(strings.ReplaceAll(show, "  ", " "), want) {
			t.Errorf("show lacks %q:\n%s", want, show)
		}
	}
}

// injectForeign delivers a message the gate did not send that carries key
// in its action-key header, as another system (or a forger) might.
func injectForeign(t *testing.T, mb *testmailbox.Mailbox, key, to string) {
	t.Helper()
	msg := "From: other@elsewhere.example\r\nTo: " + to + "\r\nSubject: not ours\r\nMessage-ID: <foreign-1@elsewhere.example>\r\n" +
		destination.HeaderActionKey + ": " + key + "\r\n\r\nhello\r\n"
	if err := smtp.SendMail(mb.SMTPAddr(), nil, "other@elsewhere.example", []string{to}, []byte(msg)); err != nil {
		t.Fatal(err)
	}
}

// TestForeignMessageIsAContradictionNotProof is the loss that used to
// happen: nothing was delivered, someone else's message with the same key
// header arrived, and reconcile called the action sent. Now the attempt's
// own destination (a fake without records) cannot settle it, the mailbox
// may only be asked through a recorded override, and what it holds is not
// this attempt's Message-ID: held, with the contradiction named.
func TestForeignMessageIsAContradictionNotProof(t *testing.T) {
	b := newBinEnv(t)
	mb := startMailbox(t)
	key := b.approvedVia("fake://unknown", "enq-loss")
	wantExit(t, b.run("send", "--key", key, "--as", "wf", "--material", "crm.consent=yes"), exitUnknown)
	injectForeign(t, mb, key, "other@elsewhere.example")

	wantExit(t, b.run("reconcile", "--key", key, "--as", "ops"), exitHeld, "keeps no records")
	wantExit(t, b.run("reconcile", "--key", key, "--as", "ops", "--destination", mb.Target()), exitWrongDestination)
	wantExit(t, b.run("reconcile", "--key", key, "--as", "ops", "--destination", mb.Target(), "--destination-moved",
		"--reason", "checking the shared mailbox"), exitHeld, "contradiction", "foreign-1@elsewhere.example")
	var v struct {
		Action struct {
			State     string `json:"state"`
			HoldCause string `json:"hold_cause"`
			Reason    string `json:"reason"`
		} `json:"action"`
	}
	decodeOne(t, b.mustRun("show", "--key", key, "--json").stdout, &v)
	if v.Action.State != "held" || v.Action.HoldCause != "contradiction" || !strings.Contains(v.Action.Reason, "foreign-1@elsewhere.example") {
		t.Fatalf("after reconcile: %+v", v.Action)
	}
	// A person can settle it; nobody can release it into a resend.
	wantExit(t, b.run("release-hold", "--key", key, "--as", "ops", "--reason", "looks fine"), exitUnknown)
}

// TestApprovalBindsDestinationAndSender: after approval, another
// destination or another sender is refused with a re-approve message, and
// nothing reaches either.
func TestApprovalBindsDestinationAndSender(t *testing.T) {
	b := newBinEnv(t)
	mb := startMailbox(t)
	key := b.approvedVia("file://"+b.outbox, "enq-bind")
	send := []string{"send", "--key", key, "--as", "wf", "--material", "crm.consent=yes"}
	wantExit(t, b.run(append(send, "--destination", mb.Target())...), exitWrongDestination,
		"the approved destination is file://"+b.outbox, "propose again")
	wantExit(t, b.run(append(send, "--from", `security@bank.example`)...), exitWrongDestination,
		"the approved sender is "+destination.DefaultSender)
	if n, _ := mb.Count(context.Background(), testmailbox.Filter{}); n != 0 || len(b.emlFiles()) != 0 {
		t.Fatalf("a refused send delivered something: mailbox %d, files %d", n, len(b.emlFiles()))
	}
	var st struct {
		Action struct{ State string } `json:"action"`
	}
	decodeOne(t, b.mustRun("show", "--key", key, "--json").stdout, &st)
	if st.Action.State != "approved" {
		t.Fatalf("a refused destination changed the state to %s", st.Action.State)
	}
	// Re-proposing with the new destination is a revision: it needs a new
	// approval, and then goes there.
	b.mustRun("propose", "--as", "wf", "--task", "task-enq-bind", "--customer", "cust-42", "--event", "enq-bind",
		"--type", "reply_ack", "--target", "task-enq-bind", "--to", "ada@example.com",
		"--subject", "We received your enquiry", "--body", "Hello Ada", "--destination", mb.Target())
	wantExit(t, b.run(send...), exitDenied, "approve")
	b.mustRun("approve", "--key", key, "--as", "lead", "--material", "crm.consent=yes")
	wantExit(t, b.run(send...), exitOK)
	if n, _ := mb.Count(context.Background(), testmailbox.Filter{ActionKey: key}); n != 1 {
		t.Fatalf("%d arrivals at the re-approved destination", n)
	}
}

// TestApprovalBindsTheRecordsEndpoint: the records a reconcile will ask are
// approved with the destination. A send through the same server but naming
// other records (an empty mailbox's API) is refused: those records would
// prove a sent message "absent".
func TestApprovalBindsTheRecordsEndpoint(t *testing.T) {
	b := newBinEnv(t)
	mb := startMailbox(t)
	empty := startMailbox(t)
	key := b.approvedVia(mb.Target(), "enq-records")
	elsewhere := strings.Split(mb.Target(), "?")[0] + "?api=" + empty.APIURL()
	wantExit(t, b.run("send", "--key", key, "--as", "wf", "--material", "crm.consent=yes", "--destination", elsewhere),
		exitWrongDestination, "the approved records endpoint is "+mb.APIURL())
	// The approved records are what the attempt records, whichever way the
	// destination is named: here without its API.
	wantExit(t, b.run("send", "--key", key, "--as", "wf", "--material", "crm.consent=yes",
		"--destination", strings.Split(mb.Target(), "?")[0]), exitOK)
	var v struct {
		Attempts []struct {
			Lookup string `json:"lookup"`
		} `json:"attempts"`
	}
	decodeOne(t, b.mustRun("show", "--key", key, "--json").stdout, &v)
	if len(v.Attempts) != 1 || v.Attempts[0].Lookup != mb.APIURL() {
		t.Fatalf("attempts %+v, want one recorded with records at %s", v.Attempts, mb.APIURL())
	}
}

// fileSum is the digest of a file's bytes ("" when it does not exist).
func fileSum(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%x", sha256.Sum256(b))
}

// TestBadInputIsRefusedAtTheDoor: each is exit 2, one line naming the
// field, and the ledger's bytes do not change.
func TestBadInputIsRefusedAtTheDoor(t *testing.T) {
	e := newGateEnv(t)
	key := e.approved("enq-door", "alice", "crm.consent=yes", "helpdesk.status=open")
	e.must("propose", "--as", "wf", "--task", "task-unowned", "--customer", "cust-9", "--event", "enq-9",
		"--type", "reply_ack", "--target", "task-unowned", "--to", "ada@example.com", "--subject", "s", "--body", "b",
		"--destination", e.target())
	unowned := ledger.Key("cust-9", "enq-9", "reply_ack", "task-unowned", 0)
	huge := filepath.Join(t.TempDir(), "huge.txt")
	if err := os.WriteFile(huge, bytes.Repeat([]byte("a"), ledger.MaxBodyBytes+1), 0o644); err != nil {
		t.Fatal(err)
	}
	latin1 := filepath.Join(t.TempDir(), "latin1.txt")
	if err := os.WriteFile(latin1, []byte("Gr\xfc\xdfe"), 0o644); err != nil {
		t.Fatal(err)
	}
	propose := func(over ...string) []string {
		flags := map[string]string{"--task": "task-enq-door", "--customer": "cust-42", "--event": "enq-door",
			"--type": "reply_ack", "--target": "task-enq-door", "--to": "ada@example.com",
			"--subject": "We received your enquiry", "--body": "Hello Ada,\nthanks.", "--destination": e.target()}
		for i := 0; i+1 < len(over); i += 2 {
			flags[over[i]] = over[i+1]
		}
		args := []string{"propose", "--as", "ack-workflow"}
		for k, v := range flags {
			if v != "" {
				args = append(args, k, v)
			}
		}
		return args
	}
	tests := []struct {
		Name string
		Args []string
		Says string
	}{
		{"LineBreakInSubject", propose("--subject", "Hello\r\nBcc: eve@example.com"), "subject"},
		{"LineBreakInRecipient", propose("--to", "ada@example.com\r\nBcc: eve@example.com"), "recipient"},
		{"LineBreakInCustomer", propose("--customer", "cust\n42"), "--customer"},
		{"SpaceInCustomer", propose("--customer", "c 9"), "--customer"},
		{"NotAnAddress", propose("--to", "notanemail"), "not one email address"},
		{"DisplayNameSmuggled", propose("--to", `"ada@example.com" <evil@x.test>`), "bare address"},
		{"AngleBrackets", propose("--to", "<ada@example.com>"), "bare address"},
		{"TwoRecipients", propose("--to", "ada@example.com, eve@example.com"), "recipient"},
		{"DisplayNameWithAt", propose("--to-name", "ada@example.com"), "may not contain @"},
		{"SenderWithDisplayName", propose("--from", `"Your Bank" <phish@x.test>`), "sender"},
		{"ControlCharacterInSubject", propose("--subject", "bell\a"), "control character"},
		{"BodyOverLimit", append(propose("--body", ""), "--body-file", huge), "over the limit"},
		{"BodyNotUTF8", append(propose("--body", ""), "--body-file", latin1), "not valid UTF-8"},
		{"ForgottenMaterialField", []string{"send", "--key", key, "--as", "alice", "--material", "crm.consent=yes",
			"--destination", e.target()}, "helpdesk.status"},
		{"ApproveUnownedTask", []string{"approve", "--key", unowned, "--as", "lead"}, "claim the task first"},
		{"TakeoverUnknownTask", []string{"takeover", "--task", "no-such-task", "--as", "carol", "--reason", "typo"}, "no such task"},
	}
	// Leave the file checkpointed, so that what a refusal might write shows
	// in its bytes.
	l, err := ledger.Open(e.ledger)
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	for _, tc := range tests {
		t.Run(tc.Name, func(t *testing.T) {
			before, wal := fileSum(t, e.ledger), fileSum(t, e.ledger+"-wal")
			r := e.gate(tc.Args...)
			wantExit(t, r, exitUsage, tc.Says)
			if strings.Count(r.stderr, "\n") != 1 || r.stdout != "" {
				t.Errorf("want one line on stderr and nothing on stdout:\nstdout %q\nstderr %q", r.stdout, r.stderr)
			}
			if fileSum(t, e.ledger) != before || fileSum(t, e.ledger+"-wal") != wal {
				t.Fatal("the refused command changed the ledger's bytes")
			}
		})
	}
	// The forgotten field left the action approved: the full send goes out.
	wantExit(t, e.send(key, "alice", "crm.consent=yes", "helpdesk.status=open"), exitOK)
	if n := len(e.emlFiles()); n != 1 {
		t.Fatalf("%d messages after the full send", n)
	}
}

// TestJSONErrorsAreJSON: with --json anywhere, every error is one JSON
// object on stdout with its exit code, usage errors included.
func TestJSONErrorsAreJSON(t *testing.T) {
	e := newGateEnv(t)
	for _, args := range [][]string{
		{"cancel", "--as", "wf", "--key", "gh1:c:e:t:x:r0", "--json"},
		{"--json", "frobnicate"},
		{"send", "--json", "--as", "wf", "--key", "gh1:c:e:t:x:r0", "--colour"},
		{"propose", "--as", "wf", "--task", "t", "--customer", "c", "--event", "e", "--type", "x", "--target", "t",
			"--to", "not an address", "--destination", "fake://accept", "--json"},
	} {
		r := e.gate(args...)
		var v struct {
			Error    string `json:"error"`
			ExitCode int    `json:"exit_code"`
		}
		decodeOne(t, r.stdout, &v)
		if r.code != exitUsage || v.ExitCode != exitUsage || v.Error == "" {
			t.Errorf("%v: exit %d, JSON %+v", args, r.code, v)
		}
	}
}

// closingDestination accepts a message and then makes the ledger unable to
// record anything, as a full disk right after the server's 250 would.
type closingDestination struct {
	*fake.Destination
	l *ledger.Ledger
}

func (d closingDestination) Send(ctx context.Context, m destination.Message) (destination.Receipt, error) {
	r, err := d.Destination.Send(ctx, m)
	d.l.Close()
	return r, err
}

// TestFailureToRecordAfterAcceptanceIsUnknown: the destination accepted,
// the ledger could not record it: exit 14, never 1 ("nothing arrived"), and
// the ledger holds the attempt until recovery marks it unknown.
func TestFailureToRecordAfterAcceptanceIsUnknown(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ledger.db")
	clock := fakes.NewClock(time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC))
	l, err := ledger.Open(path, ledger.WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	fd := fake.New()
	if _, err := l.Claim(ctx, ledger.TaskRef{ID: "t-1"}, "wf"); err != nil {
		t.Fatal(err)
	}
	a, err := l.Propose(ctx, ledger.Proposal{Task: ledger.TaskRef{ID: "t-1"}, Customer: "c", Event: "e", ActionType: "ack",
		Target: "t-1", Recipient: "ada@example.com", Subject: "s", Body: "b", Actor: "wf", Destination: fd.Identity()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Approve(ctx, a.Key, "lead", nil); err != nil {
		t.Fatal(err)
	}
	_, err = l.Execute(ctx, ledger.ExecuteRequest{Key: a.Key, Executor: "wf"}, closingDestination{fd, l})
	if code := exitCode(err); code != exitUnknown {
		t.Fatalf("exit code %d for %v, want %d", code, err, exitUnknown)
	}
	if fd.Arrivals(a.Key) != 1 {
		t.Fatal("the destination did not accept")
	}
	clock.Advance(3 * time.Minute) // past the lease
	l, err = ledger.Open(path, ledger.WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	got, err := l.Action(ctx, a.Key)
	if err != nil || got.State != ledger.StateUnknown {
		t.Fatalf("after recovery: %s, %v; want unknown", got.State, err)
	}
}

// TestProposeRefusedPrintsNoKey: a refused proposal never prints a key a
// script would carry on with.
func TestProposeRefusedPrintsNoKey(t *testing.T) {
	e := newGateEnv(t)
	key := e.approved("enq-sent", "alice")
	wantExit(t, e.send(key, "alice"), exitOK)
	r := e.gate("propose", "--as", "ack-workflow", "--task", "task-enq-sent", "--customer", "cust-42", "--event", "enq-sent",
		"--type", "reply_ack", "--target", "task-enq-sent", "--to", "ada@example.com", "--subject", "Other", "--body", "x",
		"--destination", e.target())
	wantExit(t, r, exitDuplicate)
	if r.stdout != "" {
		t.Fatalf("a refused propose printed %q", r.stdout)
	}
}

// TestLedgerFromTheLastReleaseKeepsItsApprovals opens a ledger written by
// the release before destinations were bound (schema 3): its approval stays
// valid, is bound to the destination of its first send, and the history
// says so; its unknown attempt is reconciled where a person names it.
func TestLedgerFromTheLastReleaseKeepsItsApprovals(t *testing.T) {
	e := newGateEnv(t)
	src, err := os.Open(filepath.Join("testdata", "ledger-v3.db"))
	if err != nil {
		t.Fatal(err)
	}
	dst, err := os.Create(e.ledger)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	src.Close()
	dst.Close()
	approved := "gh1:cust-42:enquiry-1001:reply_ack:task-7:r0"
	unknown := "gh1:cust-42:enquiry-1002:reply_ack:task-7:r0"
	send := []string{"send", "--key", approved, "--as", "ack-workflow", "--material", "crm.consent=yes"}
	wantExit(t, e.gate(send...), exitUsage, "name it with --destination")
	wantExit(t, e.gate(append(send, "--destination", e.target())...), exitOK)
	hist := e.must("history", "--key", approved).stdout
	if !strings.Contains(hist, "bound now to the destination of its first send, file://"+e.outbox) {
		t.Fatalf("history does not say the approval was bound:\n%s", hist)
	}
	// Bound: another destination is refused from now on.
	e2 := e.gate("correct", "--key", approved, "--as", "ack-workflow", "--reason", "typo", "--subject", "Fix", "--body", "Fixed")
	wantExit(t, e2, exitOK)
	var shown struct {
		Action struct{ Destination string } `json:"action"`
	}
	decodeOne(t, e.must("show", "--key", strings.TrimSpace(e2.stdout), "--json").stdout, &shown)
	if shown.Action.Destination != "file://"+e.outbox {
		t.Fatalf("the correction goes to %q, not the original's bound destination", shown.Action.Destination)
	}
	// The legacy unknown attempt recorded no destination: reconcile says
	// so, and a named one is asked (and the history says who named it).
	wantExit(t, e.gate("reconcile", "--key", unknown, "--as", "ops"), exitHeld, "name the destination")
	wantExit(t, e.gate("reconcile", "--key", unknown, "--as", "ops", "--destination", e.target()), exitHeld)
	hist = e.must("history", "--key", unknown).stdout
	if !strings.Contains(hist, "which ops named") || !strings.Contains(hist, "a reviewed retry is safe") {
		t.Fatalf("history of the legacy reconcile:\n%s", hist)
	}
}

// TestAudienceSendWithHoldsExits13: recipients left waiting for a person
// are not "done".
func TestAudienceSendWithHoldsExits13(t *testing.T) {
	e := newAudienceEnv(t)
	e.view("reconcile", "--release", "r1", "--file", e.file, "--customers", e.custom, "--as", "ops",
		"--subject", "Opening hours change", "--body", "From 1 April we open at nine.")
	e.view("approve", "--release", "r1", "--as", "lead", "--destination", "fake://unknown")
	wantExit(t, e.run("send", "--release", "r1", "--destination", "fake://unknown", "--as", "notice-bot"), exitHeld, "wait for a person")
}

// countingReader counts what was read from an endless source.
type countingReader struct{ n int64 }

func (c *countingReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'a'
	}
	c.n += int64(len(p))
	return len(p), nil
}

// TestHugeBodyIsRefusedWithoutReadingIt: a body far over the limit (here an
// endless one on stdin, standing for a 270 MB file) is refused after reading
// one byte past the limit, never held whole in memory, and nothing is
// recorded.
func TestHugeBodyIsRefusedWithoutReadingIt(t *testing.T) {
	e := newGateEnv(t)
	src := &countingReader{}
	var out, errOut bytes.Buffer
	root := newRootCmd(&out, &errOut)
	root.SetIn(src)
	root.SetArgs([]string{"gate", "propose", "--ledger", e.ledger, "--as", "wf", "--task", "t-1", "--customer", "c1",
		"--event", "e1", "--type", "notice", "--target", "t-1", "--to", "ada@example.com", "--subject", "s",
		"--destination", "fake://accept", "--body-file", "-"})
	err := root.Execute()
	if code := exitCode(err); code != exitUsage || !strings.Contains(err.Error(), "over the limit") {
		t.Fatalf("exit %d: %v", code, err)
	}
	if src.n > ledger.MaxBodyBytes+64<<10 {
		t.Fatalf("read %d bytes of the body; want at most one read past %d", src.n, ledger.MaxBodyBytes)
	}
	if _, err := os.Stat(e.ledger); err == nil {
		t.Fatal("a refused propose created the ledger")
	}
}

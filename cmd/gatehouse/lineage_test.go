package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gatehouse/internal/oswait"
	"gatehouse/ledger"
	"gatehouse/testmailbox"
)

// TestRestoreThenSendAgainArrivesOnce is the time machine through the
// commands, against a real SMTP mailbox: a backup, a send (1 arrival),
// the backup restored, the same send again. The restored ledger looks the
// key up first and holds it (exit 13): still 1 arrival. An action the
// lost history never sent, to a mailbox the ledger sent to before its
// backup (so it knows the epoch its records must still answer from),
// waits until what was sent before the restore can no longer land.
func TestRestoreThenSendAgainArrivesOnce(t *testing.T) {
	mb := startMailbox(t)
	e := newGateEnv(t)
	target := mb.Target() + "&settle=1h"
	earlier := e.approvedTo(target, "enq-earlier", "alice", "crm.consent=yes")
	sent := e.approvedTo(target, "enq-sent", "alice", "crm.consent=yes")
	later := e.approvedTo(target, "enq-later", "alice", "crm.consent=yes")
	send := func(key string) result {
		return e.gate("send", "--key", key, "--as", "alice", "--destination", target, "--material", "crm.consent=yes")
	}
	wantExit(t, send(earlier), exitOK)
	backup := filepath.Join(t.TempDir(), "monday.db")
	r := ledgerCmd("backup", "--ledger", e.ledger, "--to", backup)
	wantExit(t, r, exitOK)
	if !strings.Contains(r.stdout, "generation 1, taken at history line") {
		t.Errorf("backup output: %s", r.stdout)
	}
	wantExit(t, send(sent), exitOK)
	arrivals := func() int {
		n, err := mb.Count(context.Background(), testmailbox.Filter{ActionKey: sent})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}

	before, _ := os.ReadFile(e.ledger)
	wantExit(t, ledgerCmd("restore", "--ledger", e.ledger, "--from", backup), exitUsage,
		"newer than the backup", "1 send(s) confirmed", "nothing was changed")
	if after, _ := os.ReadFile(e.ledger); string(after) != string(before) {
		t.Fatal("a refused restore changed the ledger")
	}
	r = ledgerCmd("restore", "--ledger", e.ledger, "--from", backup, "--discard-newer", "--as", "ops", "--reason", "the disk died")
	wantExit(t, r, exitOK)
	if !strings.Contains(r.stdout, "unverified: 2 actions") {
		t.Errorf("restore output: %s", r.stdout)
	}

	wantExit(t, send(sent), exitHeld, "found after restore")
	if n := arrivals(); n != 1 {
		t.Fatalf("%d arrivals after the send was repeated on the restored ledger, want 1", n)
	}
	if show := e.must("show", "--key", sent, "--json").stdout; !strings.Contains(show, `"hold_cause":"found_after_restore"`) {
		t.Errorf("show: %s", show)
	}
	wantExit(t, send(later), exitHeld, "may still land until")
	if n := arrivals(); n != 1 {
		t.Fatalf("%d arrivals, want 1", n)
	}
	if n, _ := mb.Count(context.Background(), testmailbox.Filter{ActionKey: later}); n != 0 {
		t.Fatalf("%d arrivals of the action sent after the restore too early, want 0", n)
	}
	hist := e.must("history", "--key", later).stdout
	if !strings.Contains(hist, "may still land until") {
		t.Errorf("the refused send is not in the history:\n%s", hist)
	}
}

// TestMarkRestored: a hand copy is put back and said to be one; the
// command's refusals each name what is missing.
func TestMarkRestored(t *testing.T) {
	e := newGateEnv(t)
	key := e.approved("enq-1", "alice", "crm.consent=yes")
	copied, err := os.ReadFile(e.ledger)
	if err != nil {
		t.Fatal(err)
	}
	wantExit(t, e.send(key, "alice", "crm.consent=yes"), exitOK)
	if err := os.WriteFile(e.ledger, copied, 0o600); err != nil { // the hand copy put back
		t.Fatal(err)
	}
	os.Remove(e.ledger + "-wal")
	os.Remove(e.ledger + "-shm")
	wantExit(t, ledgerCmd("mark-restored", "--ledger", e.ledger, "--reason", "x"), exitUsage, "needs --as")
	wantExit(t, ledgerCmd("mark-restored", "--ledger", e.ledger, "--as", "ops"), exitUsage, "needs --reason")
	wantExit(t, ledgerCmd("mark-restored", "--as", "ops", "--reason", "x"), exitUsage, "needs --ledger")
	stop := startHolder(t, e.ledger)
	wantExit(t, ledgerCmd("mark-restored", "--ledger", e.ledger, "--as", "ops", "--reason", "x"), exitOther, "is open in another process")
	stop()
	r := ledgerCmd("mark-restored", "--ledger", e.ledger, "--as", "ops", "--reason", "put back Monday's copy by hand")
	wantExit(t, r, exitOK)
	if !strings.Contains(r.stdout, "generation 2 begins") || !strings.Contains(r.stdout, "unverified: 1 action") {
		t.Errorf("mark-restored output: %s", r.stdout)
	}
	wantExit(t, e.send(key, "alice", "crm.consent=yes"), exitHeld, "found after restore")
	if files := e.emlFiles(); len(files) != 1 {
		t.Fatalf("%d files in the outbox, want 1", len(files))
	}
}

// copyIntoPlace is an operator's `rm L-wal L-shm; cp FROM L`.
func copyIntoPlace(t *testing.T, from, ledgerPath string) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	for _, suffix := range []string{"-wal", "-shm"} {
		os.Remove(ledgerPath + suffix)
	}
	if err := os.WriteFile(ledgerPath, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestBackupCopiedIntoPlaceRefusesEveryWrite: a backup taken, a send that
// arrives, then the backup copied over the ledger by hand, and the same
// send again. The copy still carries the mark ledger backup gave it, so
// the send is refused at the door (exit 2, naming restore and
// mark-restored) and the file is left as it was: 1 arrival. Every reading
// verb reads it as before, the inspector until the operator acts, and
// ledger restore puts it back as a restored ledger, which holds the send
// it finds at the mailbox.
func TestBackupCopiedIntoPlaceRefusesEveryWrite(t *testing.T) {
	mb := startMailbox(t)
	e := newGateEnv(t)
	target := mb.Target() + "&settle=1h"
	key := e.approvedTo(target, "enq-sent", "alice", "crm.consent=yes")
	backup := filepath.Join(t.TempDir(), "monday.db")
	wantExit(t, ledgerCmd("backup", "--ledger", e.ledger, "--to", backup), exitOK)
	send := func() result {
		return e.gate("send", "--key", key, "--as", "alice", "--destination", target, "--material", "crm.consent=yes")
	}
	wantExit(t, send(), exitOK)
	arrivals := func() int {
		n, err := mb.Count(context.Background(), testmailbox.Filter{})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}

	copyIntoPlace(t, backup, e.ledger)
	copied, err := os.ReadFile(e.ledger)
	if err != nil {
		t.Fatal(err)
	}
	r := send()
	if n := arrivals(); n != 1 {
		t.Fatalf("%d arrivals after the send was repeated on a backup copied into place (exit %d), want 1", n, r.code)
	}
	wantExit(t, r, exitUsage, "is a backup", "ledger restore", "ledger mark-restored")
	for _, write := range []result{
		e.gate("propose", "--as", "ack-workflow", "--task", "task-enq-sent", "--customer", "cust-42", "--event", "enq-2",
			"--type", "reply_ack", "--target", "task-enq-sent", "--to", "ada@example.com", "--subject", "Hi", "--body", "Hello", "--destination", target),
		e.gate("claim", "--task", "task-new", "--as", "alice"),
		ledgerCmd("recover", "--ledger", e.ledger),
		ledgerCmd("migrate", "--ledger", e.ledger),
	} {
		wantExit(t, write, exitUsage, "is a backup")
	}
	for _, args := range readVerbs(key, "none") {
		if args[0] == "audience" {
			continue // the ledger has no release
		}
		var out, errOut bytes.Buffer
		if code := run(append(args, "--ledger", e.ledger), &out, &errOut); code != exitOK {
			t.Errorf("%s on a backup in place: exit %d: %s", strings.Join(args, " "), code, errOut.String())
		}
	}
	l, err := openInspected(e.ledger)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Claim(context.Background(), ledger.TaskRef{ID: "task-ops"}, "operator"); !errors.Is(err, ledger.ErrBackup) {
		t.Errorf("an operation through the inspector on a backup: %v, want ErrBackup", err)
	}
	l.Close()
	if now, _ := os.ReadFile(e.ledger); !bytes.Equal(now, copied) {
		t.Fatal("a refused write changed the backup in place")
	}

	wantExit(t, ledgerCmd("restore", "--ledger", e.ledger, "--from", backup, "--as", "ops", "--reason", "put Monday back properly"), exitOK)
	wantExit(t, send(), exitHeld, "found after restore")
	if n := arrivals(); n != 1 {
		t.Fatalf("%d arrivals, want 1", n)
	}
}

// TestRestoreCheckAfterTheMailboxWasCleared: p0 sent (its attempt records
// the mailbox's epoch), a backup, p1 sent (it arrives), the mailbox
// cleared (a new epoch), the backup restored with --discard-newer. p1's
// first send looks its key up and finds nothing, but in records of
// another epoch than the ledger last handed a message to: that proves
// nothing, and p1 is held "cannot be established" (exit 13) for a person,
// however long after the restore it is tried. The customer has p1 once.
func TestRestoreCheckAfterTheMailboxWasCleared(t *testing.T) {
	t.Setenv(leaseEnv, "1s") // what the lost history sent can land only a moment after the restore
	mb := startMailbox(t)
	e := newGateEnv(t)
	target := mb.Target() + "&settle=1s"
	p0 := e.approvedTo(target, "enq-p0", "alice", "crm.consent=yes")
	p1 := e.approvedTo(target, "enq-p1", "alice", "crm.consent=yes")
	send := func(key string) result {
		return e.gate("send", "--key", key, "--as", "alice", "--destination", target, "--material", "crm.consent=yes")
	}
	arrivals := func(key string) int {
		n, err := mb.Count(context.Background(), testmailbox.Filter{ActionKey: key})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	wantExit(t, send(p0), exitOK)
	backup := filepath.Join(t.TempDir(), "monday.db")
	wantExit(t, ledgerCmd("backup", "--ledger", e.ledger, "--to", backup), exitOK)
	wantExit(t, send(p1), exitOK)
	if n := arrivals(p1); n != 1 {
		t.Fatalf("%d arrivals of p1 before the mailbox was cleared, want 1", n)
	}
	if _, err := mb.Clear(context.Background()); err != nil {
		t.Fatal(err)
	}
	wantExit(t, ledgerCmd("restore", "--ledger", e.ledger, "--from", backup, "--discard-newer", "--as", "ops", "--reason", "the disk died"), exitOK)

	// Until what was sent before the restore can no longer land, a send
	// is refused, "may still land until"; the answer after that is the one
	// that counts.
	r := send(p1)
	for r.code == exitHeld && strings.Contains(r.stderr, "may still land until") {
		if err := oswait.Pause(context.Background(), 100*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		r = send(p1)
	}
	if n := arrivals(p1); n != 0 {
		t.Fatalf("p1 was sent again after the restore (exit %d): the customer has it %d times", r.code, n+1)
	}
	wantExit(t, r, exitHeld, "cannot be established", "epoch")
	if show := e.must("show", "--key", p1, "--json").stdout; !strings.Contains(show, `"hold_cause":"unverified"`) {
		t.Errorf("show: %s", show)
	}
}

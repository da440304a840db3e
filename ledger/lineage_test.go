package ledger_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gatehouse/destination"
	"gatehouse/destination/fake"
	"gatehouse/ledger"
)

// restoreBackup closes the world's ledger, restores backup over it and
// opens the result.
func (w *world) restoreBackup(backup string, discard bool) (ledger.RestoreInfo, error) {
	w.t.Helper()
	w.l.Close()
	info, err := ledger.RestoreWith(w.ctx, w.path, backup, ledger.RestoreOptions{Actor: "ops", Reason: "the disk died", DiscardNewer: discard, Clock: w.clock})
	w.open()
	return info, err
}

func (w *world) history(key string) string {
	w.t.Helper()
	evs, err := w.l.History(w.ctx, ledger.HistoryFilter{ActionKey: key})
	w.must(err)
	var b strings.Builder
	for _, e := range evs {
		b.WriteString(e.Message + "\n")
	}
	return b.String()
}

// TestRestoreNeverResurrectsASend is the time machine: a backup taken
// before a send, restored after it. Restoring over the newer ledger is
// refused with nothing changed; with --discard-newer the ledger is put back
// and the action is approved again, as the backup had it, but the gate
// looks its key up at the destination before its first send and holds it:
// one arrival.
func TestRestoreNeverResurrectsASend(t *testing.T) {
	sqliteOnly(t)
	w := newWorld(t)
	a := w.approved("wf-ack")
	backup := filepath.Join(t.TempDir(), "backup.db")
	info, err := w.l.Backup(w.ctx, backup, false)
	w.must(err)
	if info.Point == 0 || info.Generation != 1 {
		t.Fatalf("backup info %+v: want a point and generation 1", info)
	}
	_, err = w.l.Execute(w.ctx, ledger.ExecuteRequest{Key: a.Key, Executor: "wf-ack", Reread: consentYes}, w.dest)
	w.must(err)

	w.l.Close()
	before, err := os.ReadFile(w.path)
	w.must(err)
	_, err = ledger.RestoreWith(w.ctx, w.path, backup, ledger.RestoreOptions{})
	if !errors.Is(err, ledger.ErrNewerHistory) || !strings.Contains(err.Error(), "1 send(s) confirmed") {
		t.Fatalf("restore over newer history: %v, want ErrNewerHistory naming the send", err)
	}
	after, err := os.ReadFile(w.path)
	w.must(err)
	if string(before) != string(after) {
		t.Fatal("a refused restore changed the ledger file")
	}
	w.open()
	if got, _ := w.l.Action(w.ctx, a.Key); got.State != ledger.StateSent {
		t.Fatalf("a refused restore left %s", got.State)
	}

	info2, err := w.restoreBackup(backup, true)
	w.must(err)
	if info2.Mark.Generation != 2 || info2.Mark.UnverifiedActions != 1 || info2.Discarded.Sends != 1 {
		t.Fatalf("restore info %+v: want generation 2, 1 unverified, 1 send discarded", info2)
	}
	lin, err := w.l.Lineage(w.ctx)
	w.must(err)
	if lin.Generation != 2 || lin.UnverifiedActions != 1 || lin.BackupPoint != 0 || lin.RestoredAt.IsZero() {
		t.Fatalf("lineage after restore %+v", lin)
	}
	got, err := w.l.Action(w.ctx, a.Key)
	w.must(err)
	if got.State != ledger.StateApproved {
		t.Fatalf("restored action is %s, want approved as the backup had it", got.State)
	}
	res, err := w.l.Execute(w.ctx, ledger.ExecuteRequest{Key: a.Key, Executor: "wf-ack", Reread: consentYes}, w.dest)
	if !errors.Is(err, ledger.ErrHeld) || res.Action.State != ledger.StateHeld || res.Action.HoldCause != ledger.HoldFoundAfterRestore {
		t.Fatalf("send after restore: %v, %s/%s; want held found_after_restore", err, res.Action.State, res.Action.HoldCause)
	}
	if n := w.dest.Arrivals(a.Key); n != 1 {
		t.Fatalf("%d arrivals, want 1", n)
	}
	for _, want := range []string{"restored from " + backup, "generation 2 begins", "looked its key up", "found Message-ID"} {
		if h := w.history(a.Key) + w.history(""); !strings.Contains(h, want) {
			t.Errorf("history lacks %q:\n%s", want, h)
		}
	}
	// A person who checked decides: it arrived, so it is cancelled; the
	// gate never sends it again.
	if _, err := w.l.Cancel(w.ctx, a.Key, "ops", "it arrived before the restore"); err != nil {
		t.Fatal(err)
	}
	if lin, _ := w.l.Lineage(w.ctx); lin.UnverifiedActions != 0 {
		t.Fatalf("a cancelled action is still unverified: %+v", lin)
	}
	if vs, err := w.l.Check(w.ctx); err != nil || len(vs) > 0 {
		t.Fatalf("check after restore: %v %v", vs, err)
	}
}

// TestRestoredActionSentOnceNothingCanStillLand: an action the lost
// history never sent is looked up, found nowhere, and sent, but only once
// what was sent before the restore can no longer land (the restore plus a
// lease and the destination's settle time: an attempt begun just before the
// restore); before that the send is refused and nothing changes but a
// history line.
func TestRestoredActionSentOnceNothingCanStillLand(t *testing.T) {
	sqliteOnly(t)
	w := newWorld(t)
	w.dest.Settle = time.Minute
	a := w.approved("wf-ack")
	backup := filepath.Join(t.TempDir(), "backup.db")
	_, err := w.l.Backup(w.ctx, backup, false)
	w.must(err)
	_, err = w.restoreBackup(backup, false) // nothing newer: no --discard-newer needed
	w.must(err)
	req := ledger.ExecuteRequest{Key: a.Key, Executor: "wf-ack", Reread: consentYes}
	res, err := w.l.Execute(w.ctx, req, w.dest)
	if !errors.Is(err, ledger.ErrNotVerifiedYet) || !errors.Is(err, ledger.ErrHeld) || res.Action.State != ledger.StateApproved {
		t.Fatalf("send right after restore: %v, %s; want not verified yet, still approved", err, res.Action.State)
	}
	if !strings.Contains(err.Error(), "may still land until") || w.dest.Calls() != 0 {
		t.Fatalf("refusal %q, %d calls", err, w.dest.Calls())
	}
	// Not yet after the settle time alone: an attempt begun just before the
	// restore holds its lease first.
	w.clock.Advance(time.Minute + time.Second)
	if _, err := w.l.Execute(w.ctx, req, w.dest); !errors.Is(err, ledger.ErrNotVerifiedYet) {
		t.Fatalf("send a settle time after the restore: %v, want not verified yet (the lease comes first)", err)
	}
	w.clock.Advance(2 * time.Minute) // the default lease
	if _, err := w.l.Execute(w.ctx, req, w.dest); err != nil {
		t.Fatalf("send after the settle time: %v", err)
	}
	if n := w.dest.Arrivals(a.Key); n != 1 {
		t.Fatalf("%d arrivals, want 1", n)
	}
	if h := w.history(a.Key); !strings.Contains(h, "verified and may be sent") || !strings.Contains(h, "may still land until") {
		t.Errorf("history does not say what was checked:\n%s", h)
	}
}

// TestRestoredActionWithoutRecordsIsHeldForAPerson: a destination whose
// records cannot be consulted cannot verify anything; a person's release
// is the word that lets it go.
func TestRestoredActionWithoutRecordsIsHeldForAPerson(t *testing.T) {
	sqliteOnly(t)
	w := newWorld(t)
	a := w.approved("wf-ack")
	backup := filepath.Join(t.TempDir(), "backup.db")
	_, err := w.l.Backup(w.ctx, backup, false)
	w.must(err)
	_, err = w.restoreBackup(backup, false)
	w.must(err)
	blind := fake.Blind{D: w.dest}
	req := ledger.ExecuteRequest{Key: a.Key, Executor: "wf-ack", Reread: consentYes}
	res, err := w.l.Execute(w.ctx, req, blind)
	if !errors.Is(err, ledger.ErrHeld) || res.Action.HoldCause != ledger.HoldUnverified {
		t.Fatalf("send to a destination without records: %v, %s/%s", err, res.Action.State, res.Action.HoldCause)
	}
	if _, err := w.l.ReleaseHold(w.ctx, a.Key, "ops", "checked the mailbox by hand: nothing"); err != nil {
		t.Fatal(err)
	}
	if _, err := w.l.Execute(w.ctx, req, blind); err != nil {
		t.Fatalf("send after a person's release: %v", err)
	}
	if n := w.dest.Arrivals(a.Key); n != 1 {
		t.Fatalf("%d arrivals, want 1", n)
	}
}

// TestMarkRestoredActsAsARestore: a ledger put back by hand (a file copy
// here; a snapshot or pg_restore alike) cannot be told from the original,
// so the operator says so; from then on it behaves as a restored one. On
// PostgreSQL the copy is the destination's memory of a message the ledger
// does not know it sent.
func TestMarkRestoredActsAsARestore(t *testing.T) {
	w := newWorld(t)
	a := w.approved("wf-ack")
	var copied []byte
	if !onPostgres() {
		w.l.Close()
		var err error
		copied, err = os.ReadFile(w.path)
		w.must(err)
		w.open()
		_, err = w.l.Execute(w.ctx, ledger.ExecuteRequest{Key: a.Key, Executor: "wf-ack", Reread: consentYes}, w.dest)
		w.must(err)
		w.l.Close()
		for _, suffix := range []string{"-wal", "-shm"} {
			os.Remove(w.path + suffix)
		}
		w.must(os.WriteFile(w.path, copied, 0o600))
		w.open()
	} else {
		w.dest.Inject(destination.Message{ActionKey: a.Key, Attempt: 1, TransportID: "gh-lost-a1@elsewhere.gatehouse.invalid",
			From: "noreply@gatehouse.invalid", To: a.Recipient, Subject: a.Subject, Body: a.Body})
	}
	if _, err := w.l.MarkRestored(w.ctx, "", "a hand copy"); !errors.Is(err, ledger.ErrInvalid) {
		t.Fatalf("mark restored without an actor: %v", err)
	}
	m, err := w.l.MarkRestored(w.ctx, "ops", "put back a copy from Monday")
	w.must(err)
	if m.Generation != 2 || m.UnverifiedActions != 1 {
		t.Fatalf("mark %+v", m)
	}
	res, err := w.l.Execute(w.ctx, ledger.ExecuteRequest{Key: a.Key, Executor: "wf-ack", Reread: consentYes}, w.dest)
	if !errors.Is(err, ledger.ErrHeld) || res.Action.HoldCause != ledger.HoldFoundAfterRestore {
		t.Fatalf("send after mark-restored: %v, %s/%s", err, res.Action.State, res.Action.HoldCause)
	}
	if n := len(w.dest.Arrived()); n != 1 {
		t.Fatalf("%d arrivals, want 1", n)
	}
	// A second handle opened after the mark sees it too.
	w.open()
	if lin, err := w.l.Lineage(w.ctx); err != nil || lin.Generation != 2 {
		t.Fatalf("lineage %+v %v", lin, err)
	}
}

// TestRestoredAudienceSendsEachRecipientOnce: an audience of 50 sent after
// its backup was taken, the backup restored, the send run again: every
// recipient is looked up first and held, none is sent twice; a release
// the lost history never sent is sent in full.
func TestRestoredAudienceSendsEachRecipientOnce(t *testing.T) {
	sqliteOnly(t)
	w := newWorld(t)
	dir := crm{}
	var csv strings.Builder
	csv.WriteString("customer_id,email\n")
	for i := range 50 {
		id := fmt.Sprintf("c%02d", i)
		dir[id] = ledger.Customer{ID: id, Email: id + "@example.org", Consent: "yes"}
		fmt.Fprintf(&csv, "%s,%s@example.org\n", id, id)
	}
	for _, rel := range []string{"rel-sent", "rel-later"} {
		_, err := w.l.ImportAudience(w.ctx, ledger.AudienceImport{ReleaseID: rel, SourceName: "all.csv", Source: strings.NewReader(csv.String()),
			ActionType: "notice", Subject: "Opening hours " + rel, Body: "Our opening hours change.", Actor: "ops"}, dir)
		w.must(err)
		w.must(w.l.ApproveAudience(w.ctx, rel, "lead", fake.DefaultName, ""))
	}
	backup := filepath.Join(t.TempDir(), "backup.db")
	_, err := w.l.Backup(w.ctx, backup, false)
	w.must(err)
	send := ledger.AudienceSend{ReleaseID: "rel-sent", Actor: "notice-bot", Concurrency: 4}
	s, err := w.l.SendAudience(w.ctx, send, w.dest, dir)
	w.must(err)
	if s.Confirmed != 50 {
		t.Fatalf("first send confirmed %d", s.Confirmed)
	}
	_, err = w.restoreBackup(backup, true)
	w.must(err)
	// Refused while a send begun just before the restore could still land
	// (a lease; this destination declares no settle time), then checked.
	if _, err := w.l.SendAudience(w.ctx, send, w.dest, dir); !errors.Is(err, ledger.ErrNotVerifiedYet) {
		t.Fatalf("re-send right after the restore: %v, want not verified yet", err)
	}
	w.clock.Advance(2*time.Minute + time.Second)
	s, err = w.l.SendAudience(w.ctx, send, w.dest, dir)
	w.must(err)
	if s.Restore.Checked != 50 || s.Restore.Found != 50 || s.Confirmed != 0 {
		t.Fatalf("re-send after restore: %+v", s)
	}
	if n := len(w.dest.Arrived()); n != 50 {
		t.Fatalf("%d arrivals after the re-send, want 50", n)
	}
	for _, m := range w.dest.Arrived() {
		if got, _ := w.l.Action(w.ctx, m.ActionKey); got.HoldCause != ledger.HoldFoundAfterRestore {
			t.Fatalf("%s is %s/%s, want held found_after_restore", m.ActionKey, got.State, got.HoldCause)
		}
	}
	if h := w.history(""); !strings.Contains(h, "looked up 50 recipient(s) of release rel-sent") {
		t.Errorf("history does not say what the send checked:\n%s", h)
	}
	// The release the lost history never sent goes out in full, once.
	s, err = w.l.SendAudience(w.ctx, ledger.AudienceSend{ReleaseID: "rel-later", Actor: "notice-bot", Concurrency: 4}, w.dest, dir)
	w.must(err)
	if s.Restore.Checked != 50 || s.Restore.Found != 0 || s.Confirmed != 50 || len(w.dest.Arrived()) != 100 {
		t.Fatalf("unsent release after restore: %+v, %d arrivals", s, len(w.dest.Arrived()))
	}
	if vs, err := w.l.Check(w.ctx); err != nil || len(vs) > 0 {
		t.Fatalf("check: %v %v", vs, err)
	}
}

// TestRestoreRefusedOverAnotherLifeOfTheSameGeneration: a backup copied back
// by hand twice and marked restored each time gives two lives with the same
// generation number. A backup taken in the first, restored over the second,
// would discard the second's history; its lines are fewer than the
// backup's point, so only when the generation began tells the two apart.
func TestRestoreRefusedOverAnotherLifeOfTheSameGeneration(t *testing.T) {
	sqliteOnly(t)
	w := newWorld(t)
	first := w.approved("wf-ack")
	dir := t.TempDir()
	monday := filepath.Join(dir, "monday.db")
	_, err := w.l.Backup(w.ctx, monday, false)
	w.must(err)
	handCopy := func() {
		w.l.Close()
		copied, err := os.ReadFile(monday)
		w.must(err)
		for _, suffix := range []string{"-wal", "-shm"} {
			os.Remove(w.path + suffix)
		}
		w.must(os.WriteFile(w.path, copied, 0o600))
		w.open(ledger.ToMarkRestored()) // a backup put back by hand is written only to be marked
		m, err := w.l.MarkRestored(w.ctx, "ops", "put back Monday's copy")
		w.must(err)
		if m.Generation != 2 {
			t.Fatalf("mark %+v, want generation 2", m)
		}
	}
	handCopy()
	for i := range 3 { // the first life moves on, and is backed up
		p := ackProposal("wf-ack")
		p.Event = fmt.Sprintf("enquiry-%d", 2000+i)
		_, err := w.l.Propose(w.ctx, p)
		w.must(err)
	}
	tuesday := filepath.Join(dir, "tuesday.db")
	info, err := w.l.Backup(w.ctx, tuesday, false)
	w.must(err)
	w.clock.Advance(time.Hour)
	handCopy() // the second life: fewer lines than tuesday's point
	_, err = w.l.Execute(w.ctx, ledger.ExecuteRequest{Key: first.Key, Executor: "wf-ack", Reread: consentYes}, w.dest)
	if !errors.Is(err, ledger.ErrNotVerifiedYet) {
		t.Fatalf("send right after the restore: %v, want not verified yet", err)
	}
	if last, err := w.l.History(w.ctx, ledger.HistoryFilter{Limit: 1, Newest: true}); err != nil || last[0].ID >= info.Point {
		t.Fatalf("the second life's last line %v (%v) is not below tuesday's point %d: the test shows nothing", last, err, info.Point)
	}
	w.l.Close()
	before, err := os.ReadFile(w.path)
	w.must(err)
	_, err = ledger.RestoreWith(w.ctx, w.path, tuesday, ledger.RestoreOptions{Clock: w.clock})
	if !errors.Is(err, ledger.ErrNewerHistory) {
		t.Fatalf("restore of another life's backup: %v, want ErrNewerHistory", err)
	}
	after, err := os.ReadFile(w.path)
	w.must(err)
	if string(before) != string(after) {
		t.Fatal("a refused restore changed the ledger file")
	}
	w.open()
}

// TestRestoredLedgerLooksUpWhatItNeverSaw: the backup was taken before the
// action was proposed; the lost history proposed it, sent it, and the
// message arrived. After the restore the workflow proposes it again (a
// webhook delivered again): the restored ledger has never seen the key,
// yet its first send looks it up and holds it; one arrival. An action the
// lost history never had is looked up too, found nowhere, and sent.
func TestRestoredLedgerLooksUpWhatItNeverSaw(t *testing.T) {
	sqliteOnly(t)
	w := newWorld(t)
	_, err := w.l.Claim(w.ctx, ledger.TaskRef{ID: "task-7", Customer: "cust-42"}, "wf-ack")
	w.must(err)
	backup := filepath.Join(t.TempDir(), "backup.db")
	_, err = w.l.Backup(w.ctx, backup, false)
	w.must(err)
	a := w.approved("wf-ack")
	_, err = w.execute(a.Key, "wf-ack", consentYes)
	w.must(err)
	_, err = w.restoreBackup(backup, true)
	w.must(err)
	if _, err := w.l.Action(w.ctx, a.Key); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("the restored ledger knows %s: %v", a.Key, err)
	}
	w.clock.Advance(time.Hour) // long past anything the lost history sent could still land

	again := w.approved("wf-ack")
	res, err := w.execute(again.Key, "wf-ack", consentYes)
	if !errors.Is(err, ledger.ErrHeld) || res.Action.HoldCause != ledger.HoldFoundAfterRestore {
		t.Fatalf("send of an action proposed again after the restore: %v, %s/%s; want held found_after_restore",
			err, res.Action.State, res.Action.HoldCause)
	}
	if n := w.dest.Arrivals(a.Key); n != 1 {
		t.Fatalf("%d arrivals, want 1", n)
	}

	p := ackProposal("wf-ack")
	p.Event = "enquiry-1002"
	fresh, err := w.l.Propose(w.ctx, p)
	w.must(err)
	_, err = w.l.Approve(w.ctx, fresh.Key, "lead", consentYes)
	w.must(err)
	if _, err := w.execute(fresh.Key, "wf-ack", consentYes); err != nil {
		t.Fatalf("send of an action the lost history never had: %v", err)
	}
	if n := w.dest.Arrivals(fresh.Key); n != 1 {
		t.Fatalf("%d arrivals of %s, want 1", n, fresh.Key)
	}
	if h := w.history(fresh.Key); !strings.Contains(h, "verified and may be sent") {
		t.Errorf("the new action was sent without a look at the destination:\n%s", h)
	}
	if vs, err := w.l.Check(w.ctx); err != nil || len(vs) > 0 {
		t.Fatalf("check: %v %v", vs, err)
	}
}

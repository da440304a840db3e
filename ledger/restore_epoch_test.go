package ledger_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gatehouse/destination"
	"gatehouse/destination/fake"
	"gatehouse/ledger"
)

// approvedFor is one more approved action of task-7, for another event.
func (w *world) approvedFor(event string) ledger.Action {
	w.t.Helper()
	p := ackProposal("wf-ack")
	p.Event = event
	a, err := w.l.Propose(w.ctx, p)
	w.must(err)
	a, err = w.l.Approve(w.ctx, a.Key, "lead", consentYes)
	w.must(err)
	return a
}

// TestRestoreCheckHonoursTheRecordsEpoch: after a restore, nothing found
// at the destination's records says that the lost history sent nothing
// there only if they are still the records the ledger last handed a
// message to: the epoch the newest attempt before the backup point
// recorded. The lost history sent p1 (it arrived), then the records were
// cleared (a new epoch); long after the restore, p1's first send looks
// its key up, finds nothing, and is held "cannot be established" for a
// person: still 1 arrival. Records of the same epoch verify it; records
// that name an epoch where the ledger recorded none before its backup
// point cannot rule out a reset, and hold it too. On SQLite through
// backup and restore --discard-newer, on PostgreSQL through mark-restored
// (its backups are the server's), the lost send standing as a message
// the ledger does not know it sent.
func TestRestoreCheckHonoursTheRecordsEpoch(t *testing.T) {
	tests := []struct {
		Name       string
		SendBefore bool   // p0 is sent, under e1, before the backup point
		Later      string // the records' epoch at the restore check
		LostSend   bool   // the lost history sent p1
		Held       string // "" when p1 is verified and sent
	}{
		{"ClearedSinceTheBackup", true, "e2", true, "cannot be established"},
		{"SameEpoch", true, "e1", false, ""},
		{"NoEpochRecordedBeforeTheBackup", false, "e1", false, "cannot be ruled out"},
	}
	for _, tc := range tests {
		t.Run(tc.Name, func(t *testing.T) {
			w := newWorld(t)
			dest := &forgetful{Destination: w.dest, epoch: "e1"}
			p0 := w.approved("wf-ack")
			if tc.SendBefore {
				res, err := w.l.Execute(w.ctx, ledger.ExecuteRequest{Key: p0.Key, Executor: "wf-ack", Reread: consentYes}, dest)
				w.must(err)
				if at := res.Attempt; at.Epoch != "e1" {
					t.Fatalf("p0's attempt recorded epoch %q, want e1", at.Epoch)
				}
			}
			p1 := w.approvedFor("enquiry-1002")
			p1req := ledger.ExecuteRequest{Key: p1.Key, Executor: "wf-ack", Reread: consentYes}
			w.lostHistory(func() {
				if !tc.LostSend {
					return
				}
				if onPostgres() {
					w.dest.Inject(destination.Message{ActionKey: p1.Key, Attempt: 1, TransportID: "gh-lost-a1@elsewhere.gatehouse.invalid",
						From: "noreply@gatehouse.invalid", To: p1.Recipient, Subject: p1.Subject, Body: p1.Body})
					return
				}
				_, err := w.l.Execute(w.ctx, p1req, dest)
				w.must(err)
			})
			if tc.Later != "e1" {
				dest.forget(tc.Later)
			}
			w.clock.Advance(time.Hour) // long past anything the lost history sent could still land
			calls := w.dest.Calls()

			res, err := w.l.Execute(w.ctx, p1req, dest)
			if tc.Held == "" {
				if err != nil || res.Action.State != ledger.StateSent {
					t.Fatalf("send after the restore: %v, %s; want sent", err, res.Action.State)
				}
				if h := w.history(p1.Key); !strings.Contains(h, "verified and may be sent") {
					t.Errorf("history does not say what was checked:\n%s", h)
				}
				return
			}
			if !errors.Is(err, ledger.ErrHeld) || res.Action.State != ledger.StateHeld || res.Action.HoldCause != ledger.HoldUnverified {
				t.Fatalf("send after the restore: %v, %s/%s; want held unverified", err, res.Action.State, res.Action.HoldCause)
			}
			for _, s := range []string{err.Error(), res.Action.Reason, w.history(p1.Key)} {
				if !strings.Contains(s, tc.Held) {
					t.Errorf("%q does not say %q", s, tc.Held)
				}
			}
			if w.dest.Calls() != calls {
				t.Fatal("the destination was called after the restore")
			}
			if n := w.dest.Arrivals(p1.Key); n != map[bool]int{true: 1}[tc.LostSend] {
				t.Fatalf("%d arrivals of p1", n)
			}
			// A person who checked the destination decides.
			if _, err := w.l.ReleaseHold(w.ctx, p1.Key, "ops", "checked the mailbox by hand"); err != nil {
				t.Fatalf("release: %v", err)
			}
		})
	}
}

// lostHistory is what a restore forgets: on SQLite a backup is taken,
// lost runs, and the backup is restored over it (--discard-newer); on
// PostgreSQL lost runs (leaving the ledger as it was) and the ledger is
// marked restored, as after a pg_restore.
func (w *world) lostHistory(lost func()) {
	w.t.Helper()
	if onPostgres() {
		lost()
		_, err := w.l.MarkRestored(w.ctx, "ops", "pg_restore of Monday's dump")
		w.must(err)
		return
	}
	backup := filepath.Join(w.t.TempDir(), "backup.db")
	_, err := w.l.Backup(w.ctx, backup, false)
	w.must(err)
	lost()
	_, err = w.restoreBackup(backup, true)
	w.must(err)
}

// TestRestoredReleaseHonoursTheRecordsEpoch: an audience release after a
// restore, to records cleared since the ledger last sent there: nothing
// found proves nothing, so the run is refused before its first batch,
// nothing sent, until a person's word (--restore-checked-by).
func TestRestoredReleaseHonoursTheRecordsEpoch(t *testing.T) {
	w := newWorld(t)
	dest := &forgetful{Destination: w.dest, epoch: "e1"}
	p0 := w.approved("wf-ack")
	_, err := w.l.Execute(w.ctx, ledger.ExecuteRequest{Key: p0.Key, Executor: "wf-ack", Reread: consentYes}, dest)
	w.must(err)
	dir := crm{}
	var csv strings.Builder
	csv.WriteString("customer_id,email\n")
	for i := range 5 {
		id := fmt.Sprintf("c%02d", i)
		dir[id] = ledger.Customer{ID: id, Email: id + "@example.org", Consent: "yes"}
		fmt.Fprintf(&csv, "%s,%s@example.org\n", id, id)
	}
	_, err = w.l.ImportAudience(w.ctx, ledger.AudienceImport{ReleaseID: "rel", SourceName: "all.csv", Source: strings.NewReader(csv.String()),
		ActionType: "notice", Subject: "Opening hours", Body: "Our opening hours change.", Actor: "ops"}, dir)
	w.must(err)
	w.must(w.l.ApproveAudience(w.ctx, "rel", "lead", fake.DefaultName, ""))
	w.lostHistory(func() {})
	dest.forget("e2")
	w.clock.Advance(time.Hour)
	calls := w.dest.Calls()
	send := ledger.AudienceSend{ReleaseID: "rel", Actor: "notice-bot", Concurrency: 2}
	_, err = w.l.SendAudience(w.ctx, send, dest, dir)
	if !errors.Is(err, ledger.ErrHeld) || !strings.Contains(err.Error(), "cleared or restarted since") || w.dest.Calls() != calls {
		t.Fatalf("release sent to records cleared since the restore's copy: %v, %d calls; want held, nothing sent", err, w.dest.Calls()-calls)
	}
	send.RestoreCheckedBy = "looked in the mailbox: none of them arrived"
	s, err := w.l.SendAudience(w.ctx, send, dest, dir)
	w.must(err)
	if s.Confirmed != 5 {
		t.Fatalf("send on a person's word: %+v", s)
	}
}

// TestRestoreCheckHonoursEveryRestoresEpoch: a send forgotten by one
// restore is carried, unverified, into a later backup and a later
// restore. The lost history sent p1 (it arrived, under e1); after the
// first restore the records were cleared (e2), p2 was sent there, and a
// second backup and restore followed. The second restore's own reference
// is e2, which the records still answer from, but the message the first
// restore forgot went with e1: p1 is held, still 1 arrival.
func TestRestoreCheckHonoursEveryRestoresEpoch(t *testing.T) {
	w := newWorld(t)
	dest := &forgetful{Destination: w.dest, epoch: "e1"}
	p0 := w.approved("wf-ack")
	_, err := w.l.Execute(w.ctx, ledger.ExecuteRequest{Key: p0.Key, Executor: "wf-ack", Reread: consentYes}, dest)
	w.must(err)
	p1 := w.approvedFor("enquiry-1002")
	p1req := ledger.ExecuteRequest{Key: p1.Key, Executor: "wf-ack", Reread: consentYes}
	w.lostHistory(func() {
		if onPostgres() {
			w.dest.Inject(destination.Message{ActionKey: p1.Key, Attempt: 1, TransportID: "gh-lost-a1@elsewhere.gatehouse.invalid",
				From: "noreply@gatehouse.invalid", To: p1.Recipient, Subject: p1.Subject, Body: p1.Body})
			return
		}
		_, err := w.l.Execute(w.ctx, p1req, dest)
		w.must(err)
	})
	dest.forget("e2")
	w.clock.Advance(time.Hour)
	// p2, born after the first restore, is held too (its key may have been
	// sent by the lost history), and a person sends it under e2.
	p2 := w.approvedFor("enquiry-1003")
	p2req := ledger.ExecuteRequest{Key: p2.Key, Executor: "wf-ack", Reread: consentYes}
	if _, err := w.l.Execute(w.ctx, p2req, dest); !errors.Is(err, ledger.ErrHeld) {
		t.Fatalf("p2 after the records were cleared: %v, want held", err)
	}
	_, err = w.l.ReleaseHold(w.ctx, p2.Key, "ops", "checked the mailbox by hand")
	w.must(err)
	res, err := w.l.Execute(w.ctx, p2req, dest)
	w.must(err)
	if res.Attempt.Epoch != "e2" {
		t.Fatalf("p2's attempt recorded epoch %q, want e2", res.Attempt.Epoch)
	}
	w.lostHistory(func() {})
	w.clock.Advance(time.Hour)
	calls := w.dest.Calls()
	res, err = w.l.Execute(w.ctx, p1req, dest)
	if !errors.Is(err, ledger.ErrHeld) || res.Action.HoldCause != ledger.HoldUnverified || w.dest.Calls() != calls {
		t.Fatalf("p1 after a second restore whose copy carried it unverified: %v, %s/%s, %d calls; want held unverified, nothing sent",
			err, res.Action.State, res.Action.HoldCause, w.dest.Calls()-calls)
	}
	if !strings.Contains(err.Error(), "restore 1 of 2") {
		t.Errorf("the hold does not say which restore's records were cleared: %v", err)
	}
	if n := w.dest.Arrivals(p1.Key); n != 1 {
		t.Fatalf("%d arrivals of p1, want 1", n)
	}
}

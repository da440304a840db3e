package ledger_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"gatehouse/destination"
	"gatehouse/destination/fake"
	"gatehouse/ledger"
)

// crm is a map directory for tests.
type crm map[string]ledger.Customer

func (c crm) CustomerByID(_ context.Context, id string) (ledger.Customer, bool, error) {
	v, ok := c[id]
	return v, ok, nil
}

func (c crm) CustomerByEmail(_ context.Context, email string) (ledger.Customer, bool, error) {
	for _, v := range c {
		if strings.EqualFold(v.Email, email) {
			return v, true, nil
		}
	}
	return ledger.Customer{}, false, nil
}

func testCRM() crm {
	return crm{
		"c1": {ID: "c1", Email: "ada@example.org", Consent: "yes"},
		"c2": {ID: "c2", Email: "bea@example.org", Consent: "yes"},
		"c3": {ID: "c3", Email: "cy@example.org", Consent: "no"},
		"c4": {ID: "c4", Email: "dee@example.org", Consent: "yes", Suppressed: true},
		"c5": {ID: "c5", Email: "eve@example.org", Consent: "yes"},
		"c6": {ID: "c6", Email: "fay@example.org", Consent: "yes"},
	}
}

// messyFile has, counted by hand:
// 10 data rows (lines 2,3,4,5,6,8,9,10,11,12; line 7 is blank)
// errors: line 6 (bad address), line 11 (too many fields)          = 2
// unmatched: line 8 (c99), line 12 (zed@example.org)                = 2
// duplicates: line 5 (c1 again by email), line 10 (c2 again by id)  = 2
// resolved (distinct customers): c1, c2, c3, c5 (line 9, by email)  = 4
// excluded: c3 (no consent)                                          = 1
// eligible: c1, c2, c5                                               = 3
// (c4 is suppressed, but its only row, line 11, is malformed.)
const messyFile = "\uFEFFcustomer_id,email,name\r\n" +
	"c1,ada@example.org,Ada\r\n" + // 2 eligible
	"c2,,Bea\r\n" + // 3 eligible
	"c3,cy@example.org,Cy\r\n" + // 4 excluded: no consent
	",ADA@example.org,\"Ada, again\"\r\n" + // 5 duplicate of c1
	",not-an-address,Bad\r\n" + // 6 error
	"\r\n" + // 7 blank
	"c99,nobody@example.org,Nobody\r\n" + // 8 unmatched
	",eve@example.org,Eve\r\n" + // 9 eligible (c5)
	"c2,bea@example.org,Bea twice\r\n" + // 10 duplicate of c2
	"c4,dee@example.org,Dee,extra\r\n" + // 11 error: 4 fields
	",zed@example.org,Zed\r\n" // 12 unmatched

func importMessy(t *testing.T, w *world, release string) ledger.AudienceSummary {
	t.Helper()
	s, err := w.l.ImportAudience(w.ctx, ledger.AudienceImport{ReleaseID: release, SourceName: "spring.csv",
		Source: strings.NewReader(messyFile), ActionType: "notice", Subject: "Opening hours change",
		Body: "Our opening hours change on 1 April.", Actor: "ops"}, testCRM())
	w.must(err)
	return s
}

func TestAudienceCountsAddUp(t *testing.T) {
	w := newWorld(t)
	s := importMessy(t, w, "rel-1")
	want := ledger.AudienceSummary{SourceRows: 10, ErrorRows: 2, Unmatched: 2, Duplicates: 2, Resolved: 4, Excluded: 1, Removed: 0, Eligible: 3}
	got := ledger.AudienceSummary{SourceRows: s.SourceRows, ErrorRows: s.ErrorRows, Unmatched: s.Unmatched,
		Duplicates: s.Duplicates, Resolved: s.Resolved, Excluded: s.Excluded, Removed: s.Removed, Eligible: s.Eligible}
	if got != want {
		t.Fatalf("counts\n got %+v\nwant %+v", got, want)
	}
	w.must(s.Check())
	rows, err := w.l.AudienceRows(w.ctx, "rel-1", ledger.RowError, 0, 0)
	w.must(err)
	if len(rows) != 2 || rows[0].Line != 6 || rows[1].Line != 11 || !strings.Contains(rows[1].Reason, "4 fields") {
		t.Fatalf("error rows = %+v", rows)
	}
	dups, _ := w.l.AudienceRows(w.ctx, "rel-1", ledger.RowDuplicate, 0, 0)
	if len(dups) != 2 || dups[0].Reason != "same customer as line 2" {
		t.Fatalf("duplicates = %+v", dups)
	}

	// A manual removal moves one eligible recipient and keeps the sum.
	if err := w.l.RemoveRecipient(w.ctx, "rel-1", "c5", "ops", ""); !errors.Is(err, ledger.ErrInvalid) {
		t.Fatalf("removal without reason: %v", err)
	}
	w.must(w.l.RemoveRecipient(w.ctx, "rel-1", "c5", "ops", "asked not to be contacted by phone"))
	s, err = w.l.AudienceSummary(w.ctx, "rel-1")
	w.must(err)
	if s.Removed != 1 || s.Eligible != 2 {
		t.Fatalf("after removal: %+v", s)
	}
	w.must(s.Check())
}

func TestAudienceImportRefusals(t *testing.T) {
	w := newWorld(t)
	importMessy(t, w, "rel-1")
	// Same file again: nothing changes.
	s := importMessy(t, w, "rel-1")
	if s.SourceRows != 10 {
		t.Fatalf("re-import changed counts: %+v", s)
	}
	// Another file under the same id is refused.
	_, err := w.l.ImportAudience(w.ctx, ledger.AudienceImport{ReleaseID: "rel-1", Source: strings.NewReader("email\na@b.c\n"),
		ActionType: "notice", Subject: "x", Actor: "ops"}, testCRM())
	if !errors.Is(err, ledger.ErrReleaseExists) {
		t.Fatalf("err = %v", err)
	}
	// An unusable file records nothing.
	_, err = w.l.ImportAudience(w.ctx, ledger.AudienceImport{ReleaseID: "rel-2", SourceName: "bad.csv", Source: strings.NewReader("name\nAda\n"),
		ActionType: "notice", Subject: "x", Actor: "ops"}, testCRM())
	if err == nil || !strings.Contains(err.Error(), "bad.csv") || !strings.Contains(err.Error(), "line 1") {
		t.Fatalf("err = %v", err)
	}
	if _, err := w.l.AudienceSummary(w.ctx, "rel-2"); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("a refused release was recorded: %v", err)
	}
}

func TestAudienceSendOncePerEligibleRecipient(t *testing.T) {
	w := newWorld(t)
	importMessy(t, w, "rel-1")
	send := ledger.AudienceSend{ReleaseID: "rel-1", Actor: "notice-bot"}
	if _, err := w.l.SendAudience(w.ctx, send, w.dest, testCRM()); !errors.Is(err, ledger.ErrApprovalStale) {
		t.Fatalf("unapproved send: %v", err)
	}
	w.must(w.l.ApproveAudience(w.ctx, "rel-1", "lead", fake.DefaultName, ""))
	s, err := w.l.SendAudience(w.ctx, send, w.dest, testCRM())
	w.must(err)
	if s.Confirmed != 3 || s.Attempted != 3 || len(w.dest.Arrived()) != 3 {
		t.Fatalf("after send: %+v, arrived %d", s, len(w.dest.Arrived()))
	}
	for _, m := range w.dest.Arrived() {
		if w.dest.Arrivals(m.ActionKey) != 1 {
			t.Fatalf("%s arrived %d times", m.ActionKey, w.dest.Arrivals(m.ActionKey))
		}
	}
	// Re-running sends nothing new.
	s, err = w.l.SendAudience(w.ctx, send, w.dest, testCRM())
	w.must(err)
	if w.dest.Calls() != 3 || s.Confirmed != 3 {
		t.Fatalf("re-run sent again: calls %d", w.dest.Calls())
	}
	w.must(s.Check())
	// A new release may send again.
	importMessy(t, w, "rel-2")
	w.must(w.l.ApproveAudience(w.ctx, "rel-2", "lead", fake.DefaultName, ""))
	_, err = w.l.SendAudience(w.ctx, ledger.AudienceSend{ReleaseID: "rel-2", Actor: "notice-bot"}, w.dest, testCRM())
	w.must(err)
	if w.dest.Calls() != 6 {
		t.Fatalf("new release: calls %d", w.dest.Calls())
	}
}

func TestAudienceConsentReReadBeforeEachSend(t *testing.T) {
	w := newWorld(t)
	importMessy(t, w, "rel-1")
	w.must(w.l.ApproveAudience(w.ctx, "rel-1", "lead", fake.DefaultName, ""))
	dir := testCRM()
	c := dir["c2"]
	c.Consent = "withdrawn"
	dir["c2"] = c // unsubscribed between reconciliation and send
	s, err := w.l.SendAudience(w.ctx, ledger.AudienceSend{ReleaseID: "rel-1", Actor: "notice-bot"}, w.dest, dir)
	w.must(err)
	if s.Confirmed != 2 || s.Denied != 1 || w.dest.Calls() != 2 {
		t.Fatalf("summary %+v, calls %d", s, w.dest.Calls())
	}
}

func TestAudienceSendResumesAfterCrashWithoutDuplicate(t *testing.T) {
	w := newWorld(t)
	importMessy(t, w, "rel-1")
	w.must(w.l.ApproveAudience(w.ctx, "rel-1", "lead", fake.DefaultName, ""))
	// The first run dies mid-send: recipient 1 was accepted but not recorded,
	// recipient 2 had its attempt recorded but nothing was handed over.
	w.dest.Gate = nil
	rows, err := w.l.AudienceRows(w.ctx, "rel-1", ledger.RowEligible, 0, 0)
	w.must(err)
	_, err = w.l.Claim(w.ctx, ledger.TaskRef{ID: "release:rel-1"}, "notice-bot")
	w.must(err)
	for i, r := range rows[:2] {
		p := ledger.Proposal{Task: ledger.TaskRef{ID: "release:rel-1"}, Customer: r.CustomerID, Event: "rel-1", ActionType: "notice",
			Target: "audience", Recipient: r.Email, Subject: "Opening hours change", Body: "Our opening hours change on 1 April.", Actor: "notice-bot",
			Destination: fake.DefaultName}
		_, err := w.l.Propose(w.ctx, p)
		w.must(err)
		_, err = w.l.Approve(w.ctx, p.Key(), "lead", []ledger.MaterialRead{{Source: "crm", Field: "consent", Value: "yes"}})
		w.must(err)
		_, msg, err := w.l.BeginAttempt(w.ctx, ledger.ExecuteRequest{Key: p.Key(), Executor: "notice-bot",
			Reread: []ledger.MaterialRead{{Source: "crm", Field: "consent", Value: "yes"}}, Endpoint: destination.EndpointOf(w.dest)})
		w.must(err)
		if i == 0 {
			w.dest.Send(w.ctx, msg)
		}
	}
	// Restart after the executor's lease ran out.
	w.l.Close()
	w.clock.Advance(5 * time.Minute)
	w.open()
	s, err := w.l.SendAudience(w.ctx, ledger.AudienceSend{ReleaseID: "rel-1", Actor: "notice-bot"}, w.dest, testCRM())
	w.must(err)
	if s.Confirmed != 3 {
		t.Fatalf("after re-run: %+v", s)
	}
	for _, r := range rows {
		if n := w.dest.Arrivals(r.ActionKey); n != 1 {
			t.Fatalf("%s arrived %d times", r.ActionKey, n)
		}
	}
	if w.dest.Calls() != 3 {
		t.Fatalf("destination called %d times, want 3", w.dest.Calls())
	}
}

func TestCustomerMirrorAsDirectory(t *testing.T) {
	w := newWorld(t)
	var cs []ledger.Customer
	for _, c := range testCRM() {
		cs = append(cs, c)
	}
	w.must(w.l.UpsertCustomers(w.ctx, cs))
	s, err := w.l.ImportAudience(w.ctx, ledger.AudienceImport{ReleaseID: "rel-m", Source: strings.NewReader(messyFile),
		ActionType: "notice", Subject: "x", Actor: "ops"}, w.l.Customers())
	w.must(err)
	if s.Eligible != 3 || s.Resolved != 4 {
		t.Fatalf("mirror-resolved summary %+v", s)
	}
}

// A batch keeps in memory what single calls write at once (history lines,
// a new action's row until its approval): what it commits must be what the
// single calls would have committed, row for row and line for line.
func TestBatchedSendRecordsWhatSingleCallsRecord(t *testing.T) {
	w := newWorld(t)
	importMessy(t, w, "rel-1")
	w.must(w.l.ApproveAudience(w.ctx, "rel-1", "lead", fake.DefaultName, ""))
	s, err := w.l.SendAudience(w.ctx, ledger.AudienceSend{ReleaseID: "rel-1", Actor: "notice-bot", Concurrency: 2, Batch: 3},
		w.dest, testCRM())
	w.must(err)
	if s.Confirmed != 3 {
		t.Fatalf("confirmed %d of 3", s.Confirmed)
	}
	rows, err := w.l.AudienceRows(w.ctx, "rel-1", "eligible", 0, 0)
	w.must(err)
	var last int64
	for _, r := range rows {
		a, err := w.l.Action(w.ctx, r.ActionKey)
		w.must(err)
		// Inserted (1), approved (2), executing (3), sent (4), as one by one.
		if a.State != ledger.StateSent || a.Version != 4 || a.Reason != "sent by attempt 1: the destination confirmed acceptance" || a.HoldCause != "" {
			t.Fatalf("%s: %s v%d %q %q", a.Key, a.State, a.Version, a.Reason, a.HoldCause)
		}
		evs, err := w.l.History(w.ctx, ledger.HistoryFilter{ActionKey: a.Key})
		w.must(err)
		var got []string
		for _, e := range evs {
			got = append(got, string(e.Kind)+">"+e.ToState)
			if e.ID <= last && e.Kind == ledger.EvProposed {
				t.Fatalf("%s: history out of order (line %d after %d)", a.Key, e.ID, last)
			}
		}
		last = evs[0].ID
		if want := "proposed>drafting approved>approved attempt_started>executing sent>sent"; strings.Join(got, " ") != want {
			t.Fatalf("%s: history %s, want %s", a.Key, strings.Join(got, " "), want)
		}
		if !strings.Contains(evs[1].Detail, `"owner":"notice-bot"`) || !strings.Contains(evs[2].Detail, `"attempt":1`) {
			t.Fatalf("%s: details %s / %s", a.Key, evs[1].Detail, evs[2].Detail)
		}
	}
	vs, err := w.l.Check(w.ctx)
	w.must(err)
	if len(vs) != 0 {
		t.Fatalf("check: %v", vs)
	}
}

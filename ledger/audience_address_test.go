package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"gatehouse/destination"
	"gatehouse/destination/fake"
	"gatehouse/internal/mailaddr"
	"gatehouse/ledger"
)

// sharedCRM holds one person under three customer ids, the address
// written three ways (letter case, a trailing space), and two others.
func sharedCRM() crm {
	return crm{
		"c1": {ID: "c1", Email: "ada@example.org", Consent: "yes"},
		"c2": {ID: "c2", Email: "Ada@Example.org", Consent: "yes"},
		"c3": {ID: "c3", Email: "ada@example.org ", Consent: "yes"},
		"c4": {ID: "c4", Email: "bea@example.org", Consent: "yes"},
		"c5": {ID: "c5", Email: "ADA@example.org", Consent: "no"},
	}
}

// sharedFile names them by id, one per line: line 2 is c1 … line 6 is c5.
const sharedFile = "customer_id\nc1\nc2\nc3\nc4\nc5\n"

func importShared(t *testing.T, w *world, release string, local destination.LocalPart, dir ledger.Directory) ledger.AudienceSummary {
	t.Helper()
	s, err := w.l.ImportAudience(w.ctx, ledger.AudienceImport{ReleaseID: release, SourceName: "shared.csv",
		Source: strings.NewReader(sharedFile), ActionType: "notice", Subject: "Opening hours change",
		Body: "Our opening hours change on 1 April.", Actor: "ops", LocalPart: local}, dir)
	w.must(err)
	w.must(s.Check())
	return s
}

// arrivalsByAddress counts what the destination received per address, as
// the gate compares addresses (local parts folded: one mailbox).
func arrivalsByAddress(d *fake.Destination) map[string]int {
	out := map[string]int{}
	for _, m := range d.Arrived() {
		out[mailaddr.Key(m.To)]++
	}
	return out
}

// rowsByCustomer reads every row of a release by customer id.
func rowsByCustomer(t *testing.T, w *world, release string) map[string]ledger.AudienceRow {
	t.Helper()
	rows, err := w.l.AudienceRows(w.ctx, release, "", 100, 0)
	w.must(err)
	out := map[string]ledger.AudienceRow{}
	for _, r := range rows {
		out[r.CustomerID] = r
	}
	return out
}

// TestOneNoticePerAddress: customers who share an address are duplicates
// by address, counted apart from duplicates by id; the first eligible one
// in source order carries the notice and the others are covered by it, so
// the address receives one notice. A release that keeps local parts
// case-sensitive tells Ada@ from ada@, and its digest says so, while a
// release with the default keeps the digest releases always had.
func TestOneNoticePerAddress(t *testing.T) {
	tests := []struct {
		Name     string
		Local    destination.LocalPart
		Eligible []string          // carriers, in source order
		Covered  map[string]string // covered customer → its carrier
		Arrivals map[string]int    // per folded address
	}{
		{"LocalPartsFolded", destination.FoldLocalPart, []string{"c1", "c4"},
			map[string]string{"c2": "c1", "c3": "c1"}, map[string]int{"ada@example.org": 1, "bea@example.org": 1}},
		{"LocalPartsCaseSensitive", destination.CaseSensitiveLocalPart, []string{"c1", "c2", "c4"},
			map[string]string{"c3": "c1"}, map[string]int{"ada@example.org": 2, "bea@example.org": 1}},
	}
	for _, tt := range tests {
		t.Run(tt.Name, func(t *testing.T) {
			w := newWorld(t)
			s := importShared(t, w, "spring", tt.Local, sharedCRM())
			if s.Duplicates != 0 || s.Covered != len(tt.Covered) || s.Eligible != len(tt.Eligible) || s.Excluded != 1 || s.Resolved != 5 {
				t.Fatalf("counts %+v", s)
			}
			if s.LocalPart != tt.Local {
				t.Fatalf("release compares local parts as %v, want %v", s.LocalPart, tt.Local)
			}
			byID := rowsByCustomer(t, w, "spring")
			for cov, carrier := range tt.Covered {
				r, c := byID[cov], byID[carrier]
				if r.Status != ledger.RowCovered || r.CarrierLine != c.Line || r.ActionKey != "" ||
					r.Reason != fmt.Sprintf("covered by %s (line %d): same address", carrier, c.Line) {
					t.Fatalf("%s: %+v, want covered by %s", cov, r, carrier)
				}
			}
			if r := byID["c3"]; r.Email != "ada@example.org" {
				t.Fatalf("c3's address is recorded as %q, not trimmed", r.Email)
			}
			shared, total, err := w.l.SharedAddresses(w.ctx, "spring", 10)
			w.must(err)
			if total != 1 || len(shared) != 1 || shared[0].Carrier.CustomerID != "c1" || len(shared[0].Covered) != len(tt.Covered) {
				t.Fatalf("shared addresses (%d): %+v", total, shared)
			}

			w.must(w.l.ApproveAudience(w.ctx, "spring", "lead", fake.DefaultName, ""))
			for range 2 { // a re-run sends nothing new
				s, err = w.l.SendAudience(w.ctx, ledger.AudienceSend{ReleaseID: "spring", Actor: "notice-bot"}, w.dest, sharedCRM())
				w.must(err)
			}
			w.must(s.Check())
			if got := arrivalsByAddress(w.dest); !mapsEqual(got, tt.Arrivals) {
				t.Fatalf("arrivals %v, want %v", got, tt.Arrivals)
			}
			if s.Confirmed != len(tt.Eligible) {
				t.Fatalf("after send: %+v", s)
			}
			var carriers []string
			for _, m := range w.dest.Arrived() {
				carriers = append(carriers, strings.Split(m.ActionKey, ":")[1])
			}
			slices.Sort(carriers)
			if !slices.Equal(carriers, tt.Eligible) {
				t.Fatalf("notices went to %v, want %v", carriers, tt.Eligible)
			}
		})
	}
}

// historyOf is the history lines of one kind, oldest first.
func historyOf(t *testing.T, w *world, kind ledger.EventKind) []ledger.Event {
	t.Helper()
	evs, err := w.l.History(w.ctx, ledger.HistoryFilter{})
	w.must(err)
	var out []ledger.Event
	for _, e := range evs {
		if e.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}

func mapsEqual(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestReleaseDigestBindsTheLocalPartFlag: the default release digest is
// the one releases recorded before addresses were compared have, the
// case-sensitive one differs, and the same file reconciled again under the
// same release with the other flag is refused.
func TestReleaseDigestBindsTheLocalPartFlag(t *testing.T) {
	w := newWorld(t)
	importShared(t, w, "folded", destination.FoldLocalPart, sharedCRM())
	importShared(t, w, "kept", destination.CaseSensitiveLocalPart, sharedCRM())
	digest := func(release string) string {
		w.must(w.l.ApproveAudience(w.ctx, release, "lead", fake.DefaultName, ""))
		for _, e := range historyOf(t, w, ledger.EvApproved) {
			if strings.Contains(e.Message, "release "+release+" ") {
				return e.Message[strings.Index(e.Message, "(content ")+9 : len(e.Message)-2]
			}
		}
		t.Fatalf("no approval of %s in the history", release)
		return ""
	}
	if want := ledger.Digest("", "Opening hours change", "Our opening hours change on 1 April.", "audience")[:19]; digest("folded") != want {
		t.Fatalf("default release digest %s, want the digest releases always had, %s", digest("folded"), want)
	}
	if digest("kept") == digest("folded") {
		t.Fatal("the case-sensitive release has the default release's digest")
	}
	_, err := w.l.ImportAudience(w.ctx, ledger.AudienceImport{ReleaseID: "folded", SourceName: "shared.csv",
		Source: strings.NewReader(sharedFile), ActionType: "notice", Subject: "Opening hours change",
		Body: "Our opening hours change on 1 April.", Actor: "ops", LocalPart: destination.CaseSensitiveLocalPart}, sharedCRM())
	if !errors.Is(err, ledger.ErrReleaseExists) || !strings.Contains(err.Error(), "case-insensitively") {
		t.Fatalf("re-reconciled with the other flag: %v", err)
	}
}

// TestCarrierThatCannotReceiveHandsTheAddressOn: when the customer who
// carries an address's notice becomes unable to receive it before it is
// handed over (consent withdrawn at send, removed by a person), the next
// eligible customer with the address carries it, in the same run; the
// others are covered by the new carrier, and the old carrier's denied
// action is withdrawn so that approving it again cannot send a second
// notice. Sequential and pipelined sends alike.
func TestCarrierThatCannotReceiveHandsTheAddressOn(t *testing.T) {
	withdraw := func(ids ...string) func(*world) crm {
		return func(*world) crm {
			dir := sharedCRM()
			for _, id := range ids {
				c := dir[id]
				c.Consent = "withdrawn"
				dir[id] = c
			}
			return dir
		}
	}
	tests := []struct {
		Name        string
		Concurrency int
		Before      func(*world) crm // what happens before the send; the directory the send reads
		Carrier     string           // who the address's notice went to
		OldReason   string           // c1's row afterwards
	}{
		{"DeniedAtSend", 1, withdraw("c1"), "c2", "was denied at send; covered by c2 (line 3), which carries the notice to this address"},
		{"DeniedAtSendPipelined", 4, withdraw("c1"), "c2", "was denied at send; covered by c2 (line 3), which carries the notice to this address"},
		{"TwoDeniedAtSend", 1, withdraw("c1", "c2"), "c3", "was denied at send; covered by c3 (line 4), which carries the notice to this address"},
		{"TwoDeniedAtSendPipelined", 8, withdraw("c1", "c2"), "c3", "was denied at send; covered by c3 (line 4), which carries the notice to this address"},
		{"Removed", 1, func(w *world) crm {
			w.must(w.l.RemoveRecipient(w.ctx, "spring", "c1", "ops", "asked by phone"))
			if r := rowsByCustomer(w.t, w, "spring")["c2"]; r.Status != ledger.RowEligible {
				w.t.Fatalf("after c1's removal c2 is %s, want eligible", r.Status)
			}
			return sharedCRM()
		}, "c2", "removed by ops: asked by phone"},
	}
	for _, tt := range tests {
		t.Run(tt.Name, func(t *testing.T) {
			w := newWorld(t)
			importShared(t, w, "spring", destination.FoldLocalPart, sharedCRM())
			w.must(w.l.ApproveAudience(w.ctx, "spring", "lead", fake.DefaultName, ""))
			dir := tt.Before(w)
			s, err := w.l.SendAudience(w.ctx, ledger.AudienceSend{ReleaseID: "spring", Actor: "notice-bot", Concurrency: tt.Concurrency}, w.dest, dir)
			w.must(err)
			w.must(s.Check())
			if got := arrivalsByAddress(w.dest); got["ada@example.org"] != 1 || got["bea@example.org"] != 1 || len(got) != 2 {
				t.Fatalf("arrivals %v, want one per address", got)
			}
			carrierKey := "gh1:" + tt.Carrier + ":spring:notice:audience:r0"
			if w.dest.Arrivals(carrierKey) != 1 {
				t.Fatalf("the address's notice did not go to %s: %v", tt.Carrier, w.dest.Arrived())
			}
			byID := rowsByCustomer(t, w, "spring")
			if r := byID["c1"]; r.Reason != tt.OldReason {
				t.Fatalf("c1: %s %q, want %q", r.Status, r.Reason, tt.OldReason)
			}
			for id, r := range byID {
				if r.Status == ledger.RowCovered && r.CarrierLine != byID[tt.Carrier].Line {
					t.Fatalf("%s is covered by line %d, not by %s's", id, r.CarrierLine, tt.Carrier)
				}
			}
			if s.Eligible != 2 || s.Confirmed != 2 {
				t.Fatalf("summary %+v", s)
			}
			// Approving a withdrawn carrier again is refused: its action
			// is cancelled.
			if r := byID["c1"]; r.ActionKey != "" {
				a, err := w.l.Action(w.ctx, r.ActionKey)
				w.must(err)
				if a.State != ledger.StateCancelled {
					t.Fatalf("c1's action is %s, want cancelled", a.State)
				}
				if _, err := w.l.Approve(w.ctx, r.ActionKey, "lead", consentYes); err == nil {
					t.Fatal("the withdrawn carrier was approved again")
				}
			}
			// A re-run sends nothing new, and the ledger checks clean.
			s, err = w.l.SendAudience(w.ctx, ledger.AudienceSend{ReleaseID: "spring", Actor: "notice-bot"}, w.dest, dir)
			w.must(err)
			if len(w.dest.Arrived()) != 2 || s.Confirmed != 2 {
				t.Fatalf("re-run: %+v, %d arrivals", s, len(w.dest.Arrived()))
			}
			vs, err := w.l.Check(w.ctx)
			w.must(err)
			if len(vs) != 0 {
				t.Fatalf("check: %v", vs)
			}
		})
	}
}

// TestCarrierWhoseNoticeWentOutKeepsTheAddress: a carrier whose outcome
// is open (it may have arrived) or who was sent keeps the address; nobody
// else with it is sent.
func TestCarrierWhoseNoticeWentOutKeepsTheAddress(t *testing.T) {
	w := newWorld(t)
	importShared(t, w, "spring", destination.FoldLocalPart, sharedCRM())
	w.must(w.l.ApproveAudience(w.ctx, "spring", "lead", fake.DefaultName, ""))
	w.dest.Script(destination.OutcomeUnknown) // c1's send times out after the hand-over
	s, err := w.l.SendAudience(w.ctx, ledger.AudienceSend{ReleaseID: "spring", Actor: "notice-bot"}, w.dest, sharedCRM())
	if err != nil && !errors.Is(err, ledger.ErrUnknownOutcome) {
		t.Fatal(err)
	}
	if s.Eligible != 2 || s.Covered != 2 {
		t.Fatalf("after an open outcome: %+v", s)
	}
	byID := rowsByCustomer(t, w, "spring")
	if byID["c2"].Status != ledger.RowCovered || byID["c3"].Status != ledger.RowCovered || byID["c1"].State != ledger.StateUnknown {
		t.Fatalf("rows: c1 %s/%s, c2 %s, c3 %s", byID["c1"].Status, byID["c1"].State, byID["c2"].Status, byID["c3"].Status)
	}
	if got := arrivalsByAddress(w.dest); got["ada@example.org"] != 1 {
		t.Fatalf("arrivals %v", got)
	}
}

// TestCustomerMissingFromTheLatestExport: a customer of a release whom a
// fresh export lacks is not eligible: "missing from the latest export",
// counted, listed in the report and the history, and not sent; a missing
// carrier hands its address on. With KeepMissing (a partial export) they
// keep their rows and the history says who said so. A reconcile with an
// export decides the same.
func TestCustomerMissingFromTheLatestExport(t *testing.T) {
	export := func(ids ...string) []ledger.CustomerRecord {
		var out []ledger.CustomerRecord
		for i, id := range ids {
			out = append(out, ledger.CustomerRecord{Customer: sharedCRM()[id], File: "fresh.csv", Line: i + 2})
		}
		return out
	}
	tests := []struct {
		Name    string
		Keep    bool
		AtSend  bool     // the export comes with the send (else with the reconcile)
		Missing []string // rows missing afterwards
		Sent    []string // whose notices arrived
	}{
		{"AtSend", false, true, []string{"c1", "c4"}, []string{"c2"}},
		{"AtSendPartialExport", true, true, nil, []string{"c1", "c4"}},
		{"AtReconcile", false, false, []string{"c1", "c4"}, []string{"c2"}},
		{"AtReconcilePartialExport", true, false, nil, []string{"c1", "c4"}},
	}
	for _, tt := range tests {
		t.Run(tt.Name, func(t *testing.T) {
			w := newWorld(t)
			var stale []ledger.Customer
			for _, c := range sharedCRM() {
				stale = append(stale, c)
			}
			w.must(w.l.UpsertCustomers(w.ctx, stale)) // the mirror as an older export left it
			fresh := &ledger.CustomerImport{Source: "fresh.csv", Actor: "ops", Records: export("c2", "c3", "c5"), KeepMissing: tt.Keep}
			in := ledger.AudienceImport{ReleaseID: "spring", SourceName: "shared.csv", Source: strings.NewReader(sharedFile),
				ActionType: "notice", Subject: "Opening hours change", Body: "Our opening hours change on 1 April.", Actor: "ops"}
			var rep ledger.CustomerReport
			if !tt.AtSend {
				in.Customers, in.CustomersReport = fresh, &rep
			}
			_, err := w.l.ImportAudience(w.ctx, in, w.l.Customers())
			w.must(err)
			w.must(w.l.ApproveAudience(w.ctx, "spring", "lead", fake.DefaultName, ""))
			if tt.AtSend {
				fresh.Release = "spring"
				rep, err = w.l.ImportCustomers(w.ctx, *fresh)
				w.must(err)
			}
			var listed []string
			for _, r := range rep.Missing {
				listed = append(listed, r.CustomerID)
			}
			if tt.Keep != rep.KeptMissing || (tt.Keep && !slices.Equal(listed, []string{"c1", "c4"})) || (!tt.Keep && !slices.Equal(listed, tt.Missing)) {
				t.Fatalf("report lists %v (kept %v)", listed, rep.KeptMissing)
			}
			s, err := w.l.SendAudience(w.ctx, ledger.AudienceSend{ReleaseID: "spring", Actor: "notice-bot"}, w.dest, w.l.Customers())
			w.must(err)
			w.must(s.Check())
			if s.Missing != len(tt.Missing) {
				t.Fatalf("summary counts %d missing, want %d: %+v", s.Missing, len(tt.Missing), s)
			}
			missing, err := w.l.AudienceRows(w.ctx, "spring", ledger.RowMissing, 10, 0)
			w.must(err)
			var got []string
			for _, r := range missing {
				got = append(got, r.CustomerID)
				if r.Reason != "missing from the latest export (fresh.csv)" {
					t.Fatalf("%s: reason %q", r.CustomerID, r.Reason)
				}
			}
			if !slices.Equal(got, tt.Missing) {
				t.Fatalf("missing rows %v, want %v", got, tt.Missing)
			}
			var sent []string
			for _, m := range w.dest.Arrived() {
				sent = append(sent, strings.Split(m.ActionKey, ":")[1])
			}
			slices.Sort(sent)
			if !slices.Equal(sent, tt.Sent) {
				t.Fatalf("sent to %v, want %v", sent, tt.Sent)
			}
			// A send's export changes rows the release had: a line each. A
			// reconcile decides its rows once, and its line counts them.
			evs := historyOf(t, w, ledger.EvAudienceMissing)
			want := 0
			if tt.AtSend {
				want = len(tt.Missing)
			}
			if tt.Keep {
				want = 1 // one line: who said the export was partial
				if len(evs) == 1 && !strings.Contains(evs[0].Message, "ops said fresh.csv is a partial export") {
					t.Fatalf("history: %s", evs[0].Message)
				}
			}
			if len(evs) != want {
				t.Fatalf("%d missing lines in the history, want %d", len(evs), want)
			}
			vs, err := w.l.Check(w.ctx)
			w.must(err)
			if len(vs) != 0 {
				t.Fatalf("check: %v", vs)
			}
		})
	}
}

// TestMissingAfterSendKeepsWhatWasSent: an export that lacks a customer
// whose notice was already sent changes nothing for them.
func TestMissingAfterSendKeepsWhatWasSent(t *testing.T) {
	w := newWorld(t)
	importShared(t, w, "spring", destination.FoldLocalPart, sharedCRM())
	w.must(w.l.ApproveAudience(w.ctx, "spring", "lead", fake.DefaultName, ""))
	_, err := w.l.SendAudience(w.ctx, ledger.AudienceSend{ReleaseID: "spring", Actor: "notice-bot"}, w.dest, sharedCRM())
	w.must(err)
	rep, err := w.l.ImportCustomers(w.ctx, ledger.CustomerImport{Source: "fresh.csv", Actor: "ops", Release: "spring",
		Records: []ledger.CustomerRecord{{Customer: sharedCRM()["c4"], File: "fresh.csv", Line: 2}}})
	w.must(err)
	// c1 was sent: too late to stop; c2 and c3 were covered by it.
	var listed []string
	for _, r := range rep.Missing {
		listed = append(listed, r.CustomerID)
	}
	if !slices.Equal(listed, []string{"c2", "c3"}) {
		t.Fatalf("missing %v, want the covered c2 and c3", listed)
	}
	s, err := w.l.AudienceSummary(w.ctx, "spring")
	w.must(err)
	if s.Confirmed != 2 || s.Missing != 2 || s.Eligible != 2 {
		t.Fatalf("summary %+v", s)
	}
	w.must(s.Check())
	if _, err := w.l.ImportCustomers(w.ctx, ledger.CustomerImport{Source: "fresh.csv", Actor: "ops", Release: "nope",
		Records: []ledger.CustomerRecord{{Customer: sharedCRM()["c4"], File: "fresh.csv", Line: 2}}}); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("an export for an unknown release: %v", err)
	}
}

// heldFirstSend is the fake destination whose first Send says it was
// entered and waits to be let go, so that a test can act while a run is
// mid-send.
type heldFirstSend struct {
	*fake.Destination
	once           sync.Once
	entered, letGo chan struct{}
}

func (d *heldFirstSend) Send(ctx context.Context, m destination.Message) (destination.Receipt, error) {
	d.once.Do(func() {
		close(d.entered)
		<-d.letGo
	})
	return d.Destination.Send(ctx, m)
}

// TestRemovalDuringASendHandsTheAddressOnInTheSameRun: a carrier removed
// while a run is mid-send, after the run read its page of recipients (which
// did not hold the covered customer), hands its address to that customer,
// and the same run sends it: the run ends with every eligible address sent.
func TestRemovalDuringASendHandsTheAddressOnInTheSameRun(t *testing.T) {
	w := newWorld(t)
	dir := sharedCRM()
	file := "customer_id\n"
	for i := range 5 {
		id := fmt.Sprintf("o%d", i)
		dir[id] = ledger.Customer{ID: id, Email: id + "@example.org", Consent: "yes"}
		file += id + "\n"
	}
	file += "c1\nc2\n"
	_, err := w.l.ImportAudience(w.ctx, ledger.AudienceImport{ReleaseID: "spring", SourceName: "spring.csv", Source: strings.NewReader(file),
		ActionType: "notice", Subject: "Opening hours change", Body: "Our opening hours change on 1 April.", Actor: "ops"}, dir)
	w.must(err)
	w.must(w.l.ApproveAudience(w.ctx, "spring", "lead", fake.DefaultName, ""))
	dest := &heldFirstSend{Destination: w.dest, entered: make(chan struct{}), letGo: make(chan struct{})}
	done := make(chan error, 1)
	var s ledger.AudienceSummary
	go func() {
		var err error
		s, err = w.l.SendAudience(w.ctx, ledger.AudienceSend{ReleaseID: "spring", Actor: "notice-bot"}, dest, dir)
		done <- err
	}()
	<-dest.entered // o0's message is being handed over; the page is read
	w.must(w.l.RemoveRecipient(w.ctx, "spring", "c1", "ops", "asked by phone"))
	close(dest.letGo)
	w.must(<-done)
	if got := arrivalsByAddress(w.dest); got["ada@example.org"] != 1 || len(got) != 6 {
		t.Fatalf("arrivals %v: want one per address, ada's through c2", got)
	}
	if w.dest.Arrivals("gh1:c2:spring:notice:audience:r0") != 1 || s.Confirmed != 6 || s.Eligible != 6 {
		t.Fatalf("c2 got %d, summary %+v", w.dest.Arrivals("gh1:c2:spring:notice:audience:r0"), s)
	}
}

// spellingFamilies are the ways one mailbox is written that used to
// compare as several addresses: each family's spellings are one mailbox,
// mixed with a spelling of another family so that letter case alone could
// not have folded them.
var spellingFamilies = []struct {
	Name      string
	Spellings []string // in source order: the first carries the notice
}{
	{"ALabelAnyCase", []string{"ada@exämple.org", "ADA@XN--EXMPLE-CUA.ORG", "Ada@xn--EXMPLE-cua.org", "ada@xn--exmple-cua.org"}},
	{"ULabel", []string{"ada@xn--exmple-cua.org", "ada@exämple.org", "ADA@EXÄMPLE.ORG"}},
	{"NFD", []string{"ada@exämple.org", "ada@exa\u0308mple.org", "ADA@EXA\u0308MPLE.ORG"}},
	{"Fullwidth", []string{"ada@example.org", "ada@ｅxample.org", "ADA@ＥＸＡＭＰＬＥ．ＯＲＧ", "ada@example\u3002org"}},
	{"AllAtOnce", []string{"ada@xn--exmple-cua.org", "ada@exämple.org", "ada@exa\u0308mple.org", "ADA@XN--EXMPLE-CUA.ORG", "ada@ｅｘäｍｐｌｅ.org"}},
}

// TestOneNoticePerMailboxAcrossSpellings: customers whose addresses are
// one mailbox in another spelling (an A-label in any case, a U-label, its
// NFD form, fullwidth characters) are duplicates by address: the first in
// source order carries the notice, to the address as its CRM wrote it,
// and the others are covered by it. Bea, at another domain, gets her own;
// Cy, whose domain cannot be mapped, is excluded, saying why.
func TestOneNoticePerMailboxAcrossSpellings(t *testing.T) {
	for _, f := range spellingFamilies {
		t.Run(f.Name, func(t *testing.T) {
			w := newWorld(t)
			dir := crm{"bea": {ID: "bea", Email: "bea@example.net", Consent: "yes"},
				"cy": {ID: "cy", Email: "cy@exa_mple.org", Consent: "yes"}}
			file := "customer_id\n"
			for i, s := range f.Spellings {
				id := fmt.Sprintf("c%d", i+1)
				dir[id] = ledger.Customer{ID: id, Email: s, Consent: "yes"}
				file += id + "\n"
			}
			file += "bea\ncy\n"
			s, err := w.l.ImportAudience(w.ctx, ledger.AudienceImport{ReleaseID: "spring", SourceName: "spellings.csv",
				Source: strings.NewReader(file), ActionType: "notice", Subject: "Opening hours change",
				Body: "Our opening hours change on 1 April.", Actor: "ops"}, dir)
			w.must(err)
			w.must(s.Check())
			w.must(w.l.ApproveAudience(w.ctx, "spring", "lead", fake.DefaultName, ""))
			for range 2 { // a re-run sends nothing new
				s, err = w.l.SendAudience(w.ctx, ledger.AudienceSend{ReleaseID: "spring", Actor: "notice-bot", Concurrency: 4}, w.dest, dir)
				w.must(err)
			}
			w.must(s.Check())
			var to []string
			for _, m := range w.dest.Arrived() {
				to = append(to, m.To)
			}
			slices.Sort(to)
			if want := []string{f.Spellings[0], "bea@example.net"}; !slices.Equal(to, want) {
				t.Fatalf("arrivals to %q, want one notice to %q (as written) and one to Bea", to, want)
			}
			if s.Eligible != 2 || s.Covered != len(f.Spellings)-1 || s.Excluded != 1 || s.Confirmed != 2 {
				t.Fatalf("counts %+v, want 2 eligible and confirmed, %d covered, 1 excluded", s, len(f.Spellings)-1)
			}
			byID := rowsByCustomer(t, w, "spring")
			if r := byID["cy"]; r.Status != ledger.RowExcluded || r.Address != "" ||
				!strings.Contains(r.Reason, `its domain "exa_mple.org" cannot be mapped as an international domain name`) {
				t.Fatalf("cy: %s %q (address %q), want excluded for the domain", r.Status, r.Reason, r.Address)
			}
			for i := range f.Spellings[1:] {
				id := fmt.Sprintf("c%d", i+2)
				if r := byID[id]; r.Status != ledger.RowCovered || r.Reason != "covered by c1 (line 2): same address" {
					t.Fatalf("%s (%q): %s %q, want covered by c1", id, r.Email, r.Status, r.Reason)
				}
			}
		})
	}
}

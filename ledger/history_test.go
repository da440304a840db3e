package ledger_test

import (
	"database/sql"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"gatehouse/destination"
	"gatehouse/ledger"
)

// TestHistoryCarriesWhatAFoldNeeds: every transition's line names the state
// it led to, an approval's line its material values and destination, an
// attempt's line its destination and Message-ID.
func TestHistoryCarriesWhatAFoldNeeds(t *testing.T) {
	w := newWorld(t)
	a := w.approved("wf-ack")
	w.dest.Script(destination.OutcomeUnknown)
	if _, err := w.execute(a.Key, "wf-ack", consentYes); !errors.Is(err, ledger.ErrUnknownOutcome) {
		t.Fatalf("execute: %v", err)
	}
	_, err := w.l.Hold(w.ctx, a.Key, "ops", "looking into it")
	w.must(err)
	evs, err := w.l.History(w.ctx, ledger.HistoryFilter{ActionKey: a.Key})
	w.must(err)
	var got []string
	details := map[ledger.EventKind]map[string]any{}
	for _, e := range evs {
		got = append(got, string(e.Kind)+"→"+e.ToState)
		if e.Detail != "" {
			d := map[string]any{}
			w.must(json.Unmarshal([]byte(e.Detail), &d))
			details[e.Kind] = d
		}
	}
	want := []string{"proposed→drafting", "approved→approved", "attempt_started→executing", "unknown→unknown", "held→held:unknown_outcome"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("history:\n got %v\nwant %v", got, want)
	}
	if m, _ := details[ledger.EvApproved]["material"].(map[string]any); m["crm.consent"] != "yes" || details[ledger.EvApproved]["destination"] != w.dest.Identity() {
		t.Errorf("approval detail: %v", details[ledger.EvApproved])
	}
	if d := details[ledger.EvAttemptStarted]; d["destination"] != w.dest.Identity() || !strings.HasSuffix(d["message_id"].(string), ".gatehouse.invalid") {
		t.Errorf("attempt detail: %v", d)
	}
	if vs, err := w.l.Check(w.ctx); err != nil || len(vs) != 0 {
		t.Fatalf("check: %v %v", vs, err)
	}
}

// TestReviewMetricsCountedByHand: stale proposals, manual overrides and
// unmatched identities per release, each counted by hand below.
func TestReviewMetricsCountedByHand(t *testing.T) {
	w := newWorld(t)
	// Manual overrides: a hold released (1) and an outcome resolved by hand
	// (2). A hold alone and a reconciliation by the gate are not overrides.
	a := w.approved("wf-ack")
	_, err := w.l.Hold(w.ctx, a.Key, "ops", "legal review")
	w.must(err)
	_, err = w.l.ReleaseHold(w.ctx, a.Key, "ops", "cleared")
	w.must(err)
	w.dest.Script(destination.OutcomeUnknown)
	w.execute(a.Key, "wf-ack", consentYes)
	_, err = w.l.ResolveUnknown(w.ctx, a.Key, "ops", true, "seen in the mailbox")
	w.must(err)
	// Stale proposals: two drafts; one is changed again after 20 hours, so
	// 25 hours after both were proposed only the other is stale (1).
	p1, p2 := ackProposal("wf-ack"), ackProposal("wf-ack")
	p1.Event, p2.Event = "enquiry-2001", "enquiry-2002"
	_, err = w.l.Propose(w.ctx, p1)
	w.must(err)
	k2, err := w.l.Propose(w.ctx, p2)
	w.must(err)
	w.clock.Advance(20 * time.Hour)
	_, err = w.l.Submit(w.ctx, k2.Key, "wf-ack")
	w.must(err)
	w.clock.Advance(5 * time.Hour)
	// Unmatched identities: the messy file has 2 rows matching no customer.
	importMessy(t, w, "rel-1")

	m, err := w.l.Metrics(w.ctx)
	w.must(err)
	if m.ManualOverrides != 2 || m.StaleProposals != 1 || m.UnmatchedByRelease["rel-1"] != 2 || len(m.UnmatchedByRelease) != 1 {
		t.Fatalf("overrides %d (want 2), stale %d (want 1), unmatched %v (want rel-1: 2)", m.ManualOverrides, m.StaleProposals, m.UnmatchedByRelease)
	}
	if vs, err := w.l.Check(w.ctx); err != nil || len(vs) != 0 {
		t.Fatalf("check: %v %v", vs, err)
	}
}

// TestCheckNamesBrokenHistory: check finds a history whose last state is not
// the action's, a transition line without a state, and an override counter
// that disagrees with the history.
func TestCheckNamesBrokenHistory(t *testing.T) {
	w := newWorld(t)
	a := w.approved("wf-ack")
	_, err := w.l.ResolveUnknown(w.ctx, a.Key, "ops", true, "x") // refused: not unknown; records nothing
	if err == nil {
		t.Fatal("resolving an approved action was accepted")
	}
	w.must(w.l.Close())
	driver := "sqlite3"
	if onPostgres() {
		driver = "pgx"
	}
	db, err := sql.Open(driver, w.path)
	w.must(err)
	for _, q := range []string{
		`UPDATE actions SET state = 'sent' WHERE key = '` + a.Key + `'`,
		`UPDATE events SET to_state = '' WHERE kind = 'proposed'`,
		`INSERT INTO counters (kind, n) VALUES ('resolved_by_person', 3)`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	w.open()
	vs, err := w.l.Check(w.ctx)
	w.must(err)
	var got []string
	for _, v := range vs {
		got = append(got, v.String())
	}
	all := strings.Join(got, "\n")
	for _, want := range []string{
		"history leads to the state: " + a.Key + " is sent, but its history last led to approved",
		"history lines carry their facts: " + a.Key + ": proposed (event",
		"counters match history: counter resolved_by_person = 3, the history has 0",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("check lacks %q; got:\n%s", want, all)
		}
	}
}

// TestEventsByIDReadsMoreLinesThanAStatementCarries: a review of a large
// incident reads back more history lines than one statement may carry
// parameters (32,766 on SQLite); every one comes back, once, in order.
func TestEventsByIDReadsMoreLinesThanAStatementCarries(t *testing.T) {
	w := newWorld(t)
	a := w.approved("wf-ack")
	evs, err := w.l.History(w.ctx, ledger.HistoryFilter{ActionKey: a.Key})
	w.must(err)
	if len(evs) == 0 {
		t.Fatal("no history")
	}
	// 40,000 ids: the real lines, many times over, and ids that do not exist.
	var ids []int64
	for i := 0; len(ids) < 40_000; i++ {
		ids = append(ids, evs[i%len(evs)].ID, int64(1_000_000+i))
	}
	got, err := w.l.EventsByID(w.ctx, ids)
	w.must(err)
	if len(got) != len(evs) {
		t.Fatalf("%d lines back, want the %d that exist, once each", len(got), len(evs))
	}
	for i := 1; i < len(got); i++ {
		if got[i].ID <= got[i-1].ID {
			t.Fatalf("lines out of order at %d: %d after %d", i, got[i].ID, got[i-1].ID)
		}
	}
}

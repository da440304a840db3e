package ledger_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gatehouse/destination/fake"
	"gatehouse/fakes"
	"gatehouse/ledger"
)

// TestOpenUpgradesVersion3Ledger opens testdata/ledger-v3.db, written by
// gatehouse before consent classes (schema version 3): customers c1, c2
// with consent "yes", c3 "no", c4 suppressed; release "spring" approved,
// c2 sent, c1 approved with crm.consent = "yes" after a temporary
// rejection. The upgrade reads the old values as classes and c1's old
// approval still sends, once.
func TestOpenUpgradesVersion3Ledger(t *testing.T) {
	w := &world{t: t, path: filepath.Join(t.TempDir(), "ledger.db"), clock: fakes.NewClock(t0.AddDate(1, 0, 0)),
		dest: fake.New(), ctx: context.Background()}
	old, err := os.ReadFile("testdata/ledger-v3.db")
	w.must(err)
	w.must(os.WriteFile(w.path, old, 0o644))
	w.open()

	want := map[string]ledger.ConsentClass{"c1": ledger.ConsentOptedIn, "c2": ledger.ConsentOptedIn,
		"c3": ledger.ConsentUnsubscribed, "c4": ledger.ConsentSuppressed}
	for id, class := range want {
		c, ok, err := w.l.Customers().CustomerByID(w.ctx, id)
		if err != nil || !ok || c.Class() != class {
			t.Fatalf("%s: class %q (found %v, %v), want %s", id, c.Class(), ok, err, class)
		}
	}
	s, err := w.l.SendAudience(w.ctx, ledger.AudienceSend{ReleaseID: "spring", Actor: "notice-bot"}, w.dest, w.l.Customers())
	w.must(err)
	if s.Confirmed != 2 || s.Denied != 0 || w.dest.Calls() != 1 || w.dest.Arrivals("gh1:c1:spring:notice:audience:r0") != 1 {
		t.Fatalf("after the upgrade: %+v, destination called %d times", s, w.dest.Calls())
	}
	w.l.Close()
	db, err := sql.Open("sqlite3", w.path)
	w.must(err)
	defer db.Close()
	var version int
	w.must(db.QueryRow("PRAGMA user_version").Scan(&version))
	// At least 5, where consent classes arrived; later files raise it further.
	if version < 5 {
		t.Fatalf("schema version %d after the upgrade, want at least 5", version)
	}
}

func rec(id, email string, class ledger.ConsentClass, consent string, line int) ledger.CustomerRecord {
	return ledger.CustomerRecord{Customer: ledger.Customer{ID: id, Email: email, ConsentClass: class, Consent: consent},
		File: "crm.csv", Line: line}
}

func TestImportCustomersRefusesUnknownConsent(t *testing.T) {
	w := newWorld(t)
	in := ledger.CustomerImport{Source: "crm.csv", Actor: "ops", Records: []ledger.CustomerRecord{
		rec("c1", "ada@example.org", ledger.ConsentOptedIn, "consent=yes", 2),
		rec("c2", "bea@example.org", ledger.ConsentUnknown, "consent=ja", 3),
		rec("c3", "cy@example.org", ledger.ConsentUnknown, "consent=ja", 4),
		rec("c4", "dee@example.org", ledger.ConsentUnknown, "consent=maybe", 5),
	}}
	rep, err := w.l.ImportCustomers(w.ctx, in)
	if !errors.Is(err, ledger.ErrUnknownConsent) || !strings.Contains(err.Error(), `3 rows ("consent=ja" ×2, "consent=maybe" ×1), the first at crm.csv:3`) {
		t.Fatalf("err = %v", err)
	}
	if rep.Written || len(rep.Unknown) != 3 {
		t.Fatalf("report %+v", rep)
	}
	if _, ok, _ := w.l.Customers().CustomerByID(w.ctx, "c1"); ok {
		t.Fatal("a refused import wrote a customer")
	}
	in.ExcludeUnknown = true
	rep, err = w.l.ImportCustomers(w.ctx, in)
	w.must(err)
	if !rep.Written || rep.ByClass[ledger.ConsentUnknown] != 3 || rep.UnknownValues[0] != (ledger.ValueCount{Value: "consent=ja", Rows: 2}) {
		t.Fatalf("report %+v", rep)
	}
	c, _, _ := w.l.Customers().CustomerByID(w.ctx, "c4")
	if ok, why := c.Eligible(); ok || why != "consent unknown (consent=maybe)" {
		t.Fatalf("c4 eligible %v: %s", ok, why)
	}
}

func TestImportCustomersNeverSilentlyResubscribes(t *testing.T) {
	w := newWorld(t)
	_, err := w.l.ImportCustomers(w.ctx, ledger.CustomerImport{Source: "first.csv", Actor: "ops", Records: []ledger.CustomerRecord{
		rec("c1", "ada@example.org", ledger.ConsentUnsubscribed, "unsubscribed=true", 2),
		rec("c2", "bea@example.org", ledger.ConsentSuppressed, "status=cleaned", 3),
		rec("c3", "cy@example.org", ledger.ConsentOptedIn, "unsubscribed=false", 4),
	}})
	w.must(err)
	// An export with only addresses: matched to the ledger's ids.
	second := ledger.CustomerImport{Source: "second.csv", Actor: "ops", ExcludeUnknown: true, Records: []ledger.CustomerRecord{
		rec("", "ADA@example.org", ledger.ConsentOptedIn, "status=subscribed", 2),
		rec("", "bea@example.org", ledger.ConsentUnknown, "status=archived", 3),
		rec("", "cy@example.org", ledger.ConsentUnsubscribed, "status=unsubscribed", 4),
		rec("", "new@example.org", ledger.ConsentOptedIn, "status=subscribed", 5),
	}}
	rep, err := w.l.ImportCustomers(w.ctx, second)
	if !errors.Is(err, ledger.ErrResubscribe) || !strings.Contains(err.Error(), "c1 unsubscribed → opted_in at crm.csv:2") {
		t.Fatalf("err = %v", err)
	}
	if rep.Written || len(rep.Resubscribes) != 1 {
		t.Fatalf("report %+v", rep)
	}
	if c, _, _ := w.l.Customers().CustomerByID(w.ctx, "c3"); c.Class() != ledger.ConsentOptedIn {
		t.Fatalf("a refused import changed c3 to %s", c.Class())
	}
	second.AcceptResubscribes = true
	rep, err = w.l.ImportCustomers(w.ctx, second)
	w.must(err)
	if len(rep.Resubscribes) != 1 || rep.Resubscribes[0].ID != "c1" || len(rep.KeptWithdrawn) != 1 || rep.KeptWithdrawn[0].ID != "c2" {
		t.Fatalf("report %+v", rep)
	}
	want := map[string]ledger.ConsentClass{"c1": ledger.ConsentOptedIn, "c2": ledger.ConsentSuppressed,
		"c3": ledger.ConsentUnsubscribed, "new@example.org": ledger.ConsentOptedIn}
	for id, class := range want {
		if c, ok, _ := w.l.Customers().CustomerByID(w.ctx, id); !ok || c.Class() != class {
			t.Fatalf("%s: %s (found %v), want %s", id, c.Class(), ok, class)
		}
	}
	events, err := w.l.History(w.ctx, ledger.HistoryFilter{})
	w.must(err)
	var resub, imported []string
	for _, e := range events {
		switch e.Kind {
		case ledger.EvResubscribed:
			resub = append(resub, e.Message)
		case ledger.EvCustomersImported:
			imported = append(imported, e.Message)
		}
	}
	if len(resub) != 1 || resub[0] != "ops accepted that c1, held as unsubscribed, is now opted_in (status=subscribed, crm.csv:2)." {
		t.Fatalf("resubscribe events %q", resub)
	}
	if len(imported) != 2 || !strings.Contains(imported[1], "1 resubscribes accepted: c1 unsubscribed → opted_in") ||
		!strings.Contains(imported[1], "1 of them kept as unsubscribed or suppressed") {
		t.Fatalf("import events %q", imported)
	}
}

func TestConsentClassEligibility(t *testing.T) {
	tests := []struct {
		Name          string
		Customer      ledger.Customer
		AllowImplicit bool
		Eligible      bool
		Why           string
	}{
		{"LegacyYes", ledger.Customer{Consent: "yes"}, false, true, ""},
		{"LegacyNo", ledger.Customer{Consent: "no"}, false, false, "no consent (no)"},
		{"LegacySuppressed", ledger.Customer{Consent: "yes", Suppressed: true}, false, false, "suppressed"},
		{"LegacyUnset", ledger.Customer{}, false, false, "consent unknown (unset)"},
		{"ImplicitRefused", ledger.Customer{ConsentClass: ledger.ConsentImplicit, Consent: "email_subscribe=subscribed"}, false, false,
			"implicit consent only (email_subscribe=subscribed); the release takes opted-in customers"},
		{"ImplicitTaken", ledger.Customer{ConsentClass: ledger.ConsentImplicit}, true, true, ""},
		{"Pending", ledger.Customer{ConsentClass: ledger.ConsentPending, Consent: "status=pending"}, true, false, "consent pending (status=pending)"},
		{"Cleaned", ledger.Customer{ConsentClass: ledger.ConsentSuppressed, Consent: "status=cleaned"}, true, false, "suppressed (status=cleaned)"},
	}
	for _, tc := range tests {
		t.Run(tc.Name, func(t *testing.T) {
			ok, why := tc.Customer.EligibleFor(tc.AllowImplicit)
			if ok != tc.Eligible || why != tc.Why {
				t.Fatalf("eligible %v %q, want %v %q", ok, why, tc.Eligible, tc.Why)
			}
		})
	}
	if ledger.ConsentOptedIn.MaterialValue() != "yes" || ledger.ConsentImplicit.MaterialValue() != "implicit" {
		t.Fatal("material values changed: approvals recorded before would be denied")
	}
}

// TestImportCustomersKeepsWhatAnExportLacks: an export without addresses or
// lifecycle stages (columns it does not have) leaves the ledger's own.
func TestImportCustomersKeepsWhatAnExportLacks(t *testing.T) {
	w := newWorld(t)
	first := rec("101", "ada@example.org", ledger.ConsentOptedIn, "hs_email_optout=false", 2)
	first.Lifecycle = "Lead"
	_, err := w.l.ImportCustomers(w.ctx, ledger.CustomerImport{Source: "hubspot.csv", Actor: "ops", Records: []ledger.CustomerRecord{first}})
	w.must(err)
	_, err = w.l.ImportCustomers(w.ctx, ledger.CustomerImport{Source: "ids.csv", Actor: "ops", Records: []ledger.CustomerRecord{
		rec("101", "", ledger.ConsentOptedIn, "consent=yes", 2)}})
	w.must(err)
	c, _, _ := w.l.Customers().CustomerByID(w.ctx, "101")
	if c.Email != "ada@example.org" || c.Lifecycle != "Lead" || c.Consent != "consent=yes" {
		t.Fatalf("customer after an id-only export: %+v", c)
	}
}

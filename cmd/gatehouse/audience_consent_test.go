package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/mail"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gatehouse/ledger"
)

// crmExport names a fixture shared with ledger/crmfile: small exports in the
// shape each tool writes, all naming the same six people (ada, bea, cy, dee,
// eve, fay @example.org), and audience.csv listing those six by address.
func crmExport(name string) string {
	return filepath.Join("..", "..", "ledger", "crmfile", "testdata", name)
}

func newConsentEnv(t *testing.T) *audienceEnv {
	dir := t.TempDir()
	return &audienceEnv{t: t, ledger: filepath.Join(dir, "ledger.db"), file: crmExport("audience.csv")}
}

func customersFlags(files ...string) []string {
	var args []string
	for _, f := range files {
		args = append(args, "--customers", crmExport(f))
	}
	return args
}

func (e *audienceEnv) reconcile(release string, extra ...string) result {
	args := append([]string{"reconcile", "--release", release, "--file", e.file, "--as", "ops",
		"--subject", "Opening hours change", "--body", "From 1 April we open at nine."}, extra...)
	return e.run(args...)
}

func decodeView(t *testing.T, r result) releaseView {
	t.Helper()
	var v releaseView
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
		t.Fatalf("%v\n%s\n%s", err, r.stdout, r.stderr)
	}
	return v
}

// TestAudienceConsentVocabularies reconciles audience.csv (6 addresses)
// against each tool's export. Eligible counts, by hand:
//
//	Customer.io  unsubscribed=false: ada, eve, fay                                = 3
//	Mailchimp    status subscribed: ada, eve, fay (bea unsubscribed, cy cleaned,
//	             dee pending)                                                     = 3
//	Mailchimp    subscribed export: ada, eve, fay (unsubscribed: bea, dee;
//	             cleaned: cy)                                                     = 3
//	HubSpot      Unsubscribed from all email=false: ada, cy, dee, eve            = 4
//	Intercom     no flag set: ada, eve (bea unsubscribed; cy spam, dee bounced,
//	             fay unsubscribed and spam: suppressed)                           = 2
//	Braze        opted_in: ada, eve; subscribed (implicit): bea, dee             = 2,
//	             or 4 when the release takes implicit consent
//	newsletter   ja→opted_in, nein→unsubscribed mapped: ada, cy (yes), dee;
//	             vielleicht excluded as unknown                                  = 3
func TestAudienceConsentVocabularies(t *testing.T) {
	tests := []struct {
		Name     string
		Args     []string
		ByClass  map[string]int
		Eligible int
	}{
		{"CustomerIO", customersFlags("customerio.csv"), map[string]int{"opted_in": 3, "unsubscribed": 3}, 3},
		{"MailchimpStatus", customersFlags("mailchimp-members.csv"),
			map[string]int{"opted_in": 3, "unsubscribed": 1, "suppressed": 1, "pending": 1}, 3},
		{"MailchimpSeparateExports", customersFlags("subscribed_members_export_1a2b3c4d5e.csv",
			"unsubscribed_members_export_1a2b3c4d5e.csv", "cleaned_members_export_1a2b3c4d5e.csv"),
			map[string]int{"opted_in": 3, "unsubscribed": 2, "suppressed": 1}, 3},
		{"HubSpot", customersFlags("hubspot.csv"), map[string]int{"opted_in": 4, "unsubscribed": 2}, 4},
		{"HubSpotInternalNames", customersFlags("hubspot-properties.csv"), map[string]int{"opted_in": 4, "unsubscribed": 2}, 4},
		{"Intercom", customersFlags("intercom.csv"), map[string]int{"opted_in": 2, "unsubscribed": 1, "suppressed": 3}, 2},
		{"Braze", customersFlags("braze.csv"), map[string]int{"opted_in": 2, "implicit": 2, "unsubscribed": 2}, 2},
		{"BrazeImplicitAllowed", append(customersFlags("braze.csv"), "--allow-implicit"),
			map[string]int{"opted_in": 2, "implicit": 2, "unsubscribed": 2}, 4},
		{"ConsentColumnAndValues", append(customersFlags("newsletter-de.csv"), "--consent-column", "newsletter",
			"--consent-value", "ja=opted_in", "--consent-value", "NEIN=unsubscribed", "--unknown-consent=exclude"),
			map[string]int{"opted_in": 3, "unsubscribed": 2, "unknown": 1}, 3},
	}
	for _, tc := range tests {
		t.Run(tc.Name, func(t *testing.T) {
			e := newConsentEnv(t)
			r := e.reconcile("spring", append(tc.Args, "--json")...)
			wantExit(t, r, exitOK)
			v := decodeView(t, r)
			if v.Customers == nil || v.Customers.Customers != 6 || !sameCounts(v.Customers.ByClass, tc.ByClass) {
				t.Fatalf("customers %+v, want classes %v", v.Customers, tc.ByClass)
			}
			if v.Resolved != 6 || v.Eligible != tc.Eligible || v.Excluded != 6-tc.Eligible || v.Unmatched != 0 {
				t.Fatalf("resolved %d, eligible %d, excluded %d, unmatched %d; want 6, %d, %d, 0",
					v.Resolved, v.Eligible, v.Excluded, v.Unmatched, tc.Eligible, 6-tc.Eligible)
			}
		})
	}
}

func sameCounts(got, want map[string]int) bool {
	for k, n := range got {
		if want[k] != n {
			return false
		}
	}
	return len(got) == len(want)
}

// TestAudienceUnknownConsent: newsletter-de.csv read by its newsletter
// column has 4 rows whose words the importer does not know (ja ×2 on lines
// 2 and 5, nein on 3, vielleicht on 6). Without --unknown-consent=exclude
// the command refuses with exit 18 and the ledger file is not touched;
// with it they are counted, listed and never eligible: 1 eligible (cy, yes).
func TestAudienceUnknownConsent(t *testing.T) {
	e := newConsentEnv(t)
	args := append(customersFlags("newsletter-de.csv"), "--consent-column", "newsletter")

	r := e.reconcile("spring", args...)
	wantExit(t, r, exitConsent, "consent not understood: 4 rows (\"newsletter=ja\" ×2, \"newsletter=nein\" ×1, \"newsletter=vielleicht\" ×1), the first at ", "newsletter-de.csv:2;",
		"--unknown-consent=exclude", "nothing was written")
	for _, want := range []string{"consent not understood", "newsletter-de.csv:2", "newsletter-de.csv:6", "newsletter=vielleicht", "nothing was written"} {
		if !strings.Contains(r.stdout, want) {
			t.Fatalf("refusal lacks %q:\n%s", want, r.stdout)
		}
	}
	if _, err := os.Stat(e.ledger); !os.IsNotExist(err) {
		t.Fatalf("a refused import created the ledger (%v)", err)
	}

	// With a ledger that exists: byte for byte unchanged.
	wantExit(t, e.reconcile("earlier", customersFlags("customerio.csv")...), exitOK)
	before, _ := os.ReadFile(e.ledger)
	r = e.reconcile("spring", append(args, "--json")...)
	wantExit(t, r, exitConsent)
	var refused struct {
		Customers customersView `json:"customers"`
		ExitCode  int           `json:"exit_code"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &refused); err != nil || refused.ExitCode != exitConsent ||
		refused.Customers.Unknown != 4 || len(refused.Customers.UnknownRows) != 4 || refused.Customers.Written {
		t.Fatalf("refusal %+v (%v)\n%s", refused, err, r.stdout)
	}
	if after, _ := os.ReadFile(e.ledger); !bytes.Equal(before, after) {
		t.Fatal("a refused import changed the ledger file")
	}
	wantExit(t, e.run("show", "--release", "spring"), exitOther, "release spring: not found")

	// A fresh ledger, so only this export's customers hold these addresses.
	e.ledger = filepath.Join(t.TempDir(), "ledger.db")
	r = e.reconcile("spring", append(args, "--unknown-consent=exclude", "--json")...)
	wantExit(t, r, exitOK)
	v := decodeView(t, r)
	if c := v.Customers; c.Unknown != 4 || len(c.UnknownValues) != 3 || c.UnknownValues[0] != (ledger.ValueCount{Value: "newsletter=ja", Rows: 2}) || !c.Written {
		t.Fatalf("customers %+v", c)
	}
	if v.Eligible != 1 || v.Excluded != 5 {
		t.Fatalf("eligible %d, excluded %d; want 1, 5", v.Eligible, v.Excluded)
	}
	rows := e.view("show", "--release", "spring", "--rows", "excluded").Rows
	unknown := 0
	for _, row := range rows {
		if row.Consent == "unknown" && strings.HasPrefix(row.Reason, "consent unknown (newsletter=") {
			unknown++
		}
	}
	if unknown != 4 {
		t.Fatalf("%d excluded rows show unknown consent, want 4: %+v", unknown, rows)
	}
}

// arrivals counts the messages a file:// destination holds per recipient.
func arrivals(t *testing.T, dir string) map[string]int {
	t.Helper()
	out := map[string]int{}
	files, _ := filepath.Glob(filepath.Join(dir, "*.eml"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		m, err := mail.ReadMessage(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out[m.Header.Get("To")]++
	}
	return out
}

// TestAudienceReimportInAnotherVocabularyKeepsReleaseSendable: a release
// reconciled against a Customer.io export (eligible by hand: ada, eve, fay)
// and approved still sends after the CRM is re-imported as Mailchimp's
// separate exports, which name the same customers by address only and say
// "subscribed" where Customer.io said unsubscribed=false. The send runs
// through audience send to a file:// destination: each arrives once.
func TestAudienceReimportInAnotherVocabularyKeepsReleaseSendable(t *testing.T) {
	e := newConsentEnv(t)
	outbox := t.TempDir()
	v := decodeView(t, e.reconcile("spring", append(customersFlags("customerio.csv"), "--json")...))
	if v.Eligible != 3 {
		t.Fatalf("eligible %d, want 3", v.Eligible)
	}
	e.view("approve", "--release", "spring", "--as", "lead", "--destination", "file://"+outbox)

	r := e.run(append([]string{"send", "--release", "spring", "--destination", "file://" + outbox, "--as", "notice-bot", "--json"},
		customersFlags("subscribed_members_export_1a2b3c4d5e.csv", "unsubscribed_members_export_1a2b3c4d5e.csv",
			"cleaned_members_export_1a2b3c4d5e.csv")...)...)
	wantExit(t, r, exitOK)
	v = decodeView(t, r)
	if v.Customers == nil || len(v.Customers.Resubscribes) != 0 || v.Confirmed != 3 || v.Denied != 0 {
		t.Fatalf("after re-import and send: confirmed %d, denied %d, customers %+v", v.Confirmed, v.Denied, v.Customers)
	}
	want := map[string]int{"ada@example.org": 1, "eve@example.org": 1, "fay@example.org": 1}
	if got := arrivals(t, outbox); !sameCounts(got, want) {
		t.Fatalf("arrivals %v, want %v", got, want)
	}
	v = e.view("send", "--release", "spring", "--destination", "file://"+outbox, "--as", "notice-bot")
	if v.SentThisRun == nil || *v.SentThisRun != 0 || !sameCounts(arrivals(t, outbox), want) {
		t.Fatalf("a re-run sent %v", v.SentThisRun)
	}
}

// TestAudienceResubscribeNeedsAcceptance: Customer.io says dee is
// unsubscribed; the Mailchimp status export says pending. Without
// --accept-resubscribes the send is refused (exit 18), nothing is written
// and nothing sent; with it dee is listed in the summary and the history.
func TestAudienceResubscribeNeedsAcceptance(t *testing.T) {
	e := newConsentEnv(t)
	outbox := t.TempDir()
	wantExit(t, e.reconcile("spring", customersFlags("customerio.csv")...), exitOK)
	e.view("approve", "--release", "spring", "--as", "lead", "--destination", "file://"+outbox)
	send := append([]string{"send", "--release", "spring", "--destination", "file://" + outbox, "--as", "notice-bot"},
		customersFlags("mailchimp-members.csv")...)

	r := e.run(send...)
	wantExit(t, r, exitConsent, "import would resubscribe customers: 1 the ledger holds as unsubscribed or suppressed (cust-4 unsubscribed → pending at",
		"--accept-resubscribes", "nothing was written")
	if !strings.Contains(r.stdout, "resubscribes not accepted") || !strings.Contains(r.stdout, "mailchimp-members.csv:5") ||
		!strings.Contains(r.stdout, "unsubscribed → pending") {
		t.Fatalf("refusal does not list the resubscribe:\n%s", r.stdout)
	}
	if n := len(arrivals(t, outbox)); n != 0 {
		t.Fatalf("a refused send delivered to %d recipients", n)
	}
	l, err := ledger.Open(e.ledger, ledger.WithoutRecovery())
	if err != nil {
		t.Fatal(err)
	}
	c, _, _ := l.Customers().CustomerByID(context.Background(), "cust-4")
	l.Close()
	if c.Class() != ledger.ConsentUnsubscribed {
		t.Fatalf("a refused import changed cust-4 to %s", c.Class())
	}

	r = e.run(append(send, "--accept-resubscribes", "--json")...)
	wantExit(t, r, exitOK)
	v := decodeView(t, r)
	if rs := v.Customers.Resubscribes; len(rs) != 1 || rs[0].Customer != "cust-4" || rs[0].From != "unsubscribed" || rs[0].To != "pending" {
		t.Fatalf("resubscribes %+v", rs)
	}
	// cy moved from unsubscribed to cleaned: no resubscribe. The release's
	// three recipients are still opted in and receive it once.
	if v.Confirmed != 3 || len(arrivals(t, outbox)) != 3 {
		t.Fatalf("confirmed %d, arrivals %v", v.Confirmed, arrivals(t, outbox))
	}
	var out, errOut bytes.Buffer
	run([]string{"gate", "history", "--ledger", e.ledger, "--limit", "200"}, &out, &errOut)
	for _, want := range []string{"notice-bot accepted that cust-4, held as unsubscribed, is now pending (status=pending, ",
		"1 resubscribes accepted: cust-4 unsubscribed → pending"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("history lacks %q:\n%s", want, out.String())
		}
	}
}

// TestAudienceSendOnLedgerFromPreviousVersion: ledger/testdata/ledger-v3.db
// was written before consent classes; its release "spring" has c2 sent and
// c1 approved with crm.consent = "yes" after a temporary rejection. After
// the upgrade audience send delivers c1 once and nothing else.
func TestAudienceSendOnLedgerFromPreviousVersion(t *testing.T) {
	e := newConsentEnv(t)
	old, err := os.ReadFile(filepath.Join("..", "..", "ledger", "testdata", "ledger-v3.db"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(e.ledger, old, 0o644); err != nil {
		t.Fatal(err)
	}
	outbox := t.TempDir()
	v := e.view("send", "--release", "spring", "--destination", "file://"+outbox, "--as", "notice-bot")
	if v.SentThisRun == nil || *v.SentThisRun != 1 || v.Confirmed != 2 || v.Denied != 0 {
		t.Fatalf("after the upgrade: sent %v, confirmed %d, denied %d", v.SentThisRun, v.Confirmed, v.Denied)
	}
	if got := arrivals(t, outbox); !sameCounts(got, map[string]int{"ada@example.org": 1}) {
		t.Fatalf("arrivals %v", got)
	}
}

// TestAudienceShowSample reconciles audience.csv against hubspot.csv, whose
// six contacts have five lifecycle stages (Customer twice: bea, eve).
// --sample 5 draws one of each stage; a sixth is a second Customer. Every
// drawn identity is the same key in the stored file and in the CRM, until
// the CRM resolves ada's address to another customer.
func TestAudienceShowSample(t *testing.T) {
	e := newConsentEnv(t)
	wantExit(t, e.reconcile("spring", customersFlags("hubspot.csv")...), exitOK)
	stages := func(v releaseView) []string {
		var out []string
		for _, s := range v.Samples {
			if !s.Same || s.SourceKey == "" || s.SourceKey != s.CRMKey {
				t.Fatalf("sample %+v: source and CRM disagree", s)
			}
			out = append(out, s.Lifecycle)
		}
		return out
	}
	v := e.view("show", "--release", "spring", "--sample", "5")
	if got := strings.Join(stages(v), ","); got != "Customer,Lead,Marketing Qualified Lead,Opportunity,Subscriber" {
		t.Fatalf("--sample 5 drew stages %s", got)
	}
	v = e.view("show", "--release", "spring", "--sample", "6")
	if got := stages(v); len(got) != 6 || got[5] != "Customer" {
		t.Fatalf("--sample 6 drew stages %v", got)
	}
	text := e.run("show", "--release", "spring", "--sample", "2")
	for _, want := range []string{"sample across lifecycle stages:", "LIFECYCLE", "SOURCE KEY", "CRM KEY", "email:ada@example.org"} {
		if !strings.Contains(text.stdout, want) {
			t.Fatalf("show --sample lacks %q:\n%s", want, text.stdout)
		}
	}

	// Another export gives ada's address to customer 001: the sample says so.
	other := filepath.Join(t.TempDir(), "other.csv")
	os.WriteFile(other, []byte("customer_id,email,consent\n001,ada@example.org,yes\n"), 0o644)
	wantExit(t, e.reconcile("later", "--customers", other), exitOK)
	v = e.view("show", "--release", "spring", "--sample", "5")
	for _, s := range v.Samples {
		if (s.Lifecycle == "Lead") == s.Same || (s.Lifecycle == "Lead" && (s.CRMKey != "email:ada@example.org" || s.Customer != "101")) {
			t.Fatalf("sample %+v", s)
		}
	}
}

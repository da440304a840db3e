package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gatehouse/ledger/audiencefile"
	"gatehouse/testmailbox"
)

const testCustomers = "customer_id,email,consent,suppressed\n" +
	"c1,ada@example.org,yes,no\n" +
	"c2,bea@example.org,yes,no\n" +
	"c3,cy@example.org,no,no\n" +
	"c4,dee@example.org,yes,yes\n" +
	"c5,eve@example.org,yes,no\n"

// testAudience, counted by hand: 8 data rows.
//
//	line 2 c1 eligible · 3 c2 eligible · 4 c3 excluded (no consent)
//	line 5 c4 excluded (suppressed) · 6 duplicate of c1 (by email)
//	line 7 error (bad address) · 8 unmatched (c99) · 9 eve → c5 eligible
//
// errors 1 + unmatched 1 + duplicates 1 + resolved 5 = 8;
// resolved 5 = excluded 2 + removed 0 + eligible 3.
const testAudience = "customer_id,email\n" +
	"c1,\n" + "c2,\n" + "c3,\n" + "c4,\n" +
	",ADA@example.org\n" + ",nope\n" + "c99,\n" + ",eve@example.org\n"

type audienceEnv struct {
	t                    *testing.T
	ledger, file, custom string
}

func newAudienceEnv(t *testing.T) *audienceEnv {
	dir := t.TempDir()
	e := &audienceEnv{t: t, ledger: filepath.Join(dir, "ledger.db"), file: filepath.Join(dir, "spring.csv"),
		custom: filepath.Join(dir, "customers.csv")}
	os.WriteFile(e.file, []byte(testAudience), 0o644)
	os.WriteFile(e.custom, []byte(testCustomers), 0o644)
	return e
}

func (e *audienceEnv) run(args ...string) result {
	var out, errOut bytes.Buffer
	code := run(append(append([]string{"audience"}, args...), "--ledger", e.ledger), &out, &errOut)
	return result{code: code, stdout: out.String(), stderr: errOut.String()}
}

func (e *audienceEnv) view(args ...string) releaseView {
	e.t.Helper()
	r := e.run(append(args, "--json")...)
	if r.code != 0 {
		e.t.Fatalf("audience %v: exit %d: %s", args, r.code, r.stderr)
	}
	var v releaseView
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
		e.t.Fatalf("audience %v: %v\n%s", args, err, r.stdout)
	}
	return v
}

func TestAudienceReconcileSendOnceAndRerun(t *testing.T) {
	ctx := context.Background()
	mb, err := testmailbox.Start(ctx, testmailbox.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer mb.Close()
	e := newAudienceEnv(t)

	v := e.view("reconcile", "--release", "spring", "--file", e.file, "--customers", e.custom, "--as", "ops",
		"--subject", "Opening hours change", "--body", "From 1 April we open at nine.")
	counts := []int{v.SourceRows, v.ErrorRows, v.Unmatched, v.Duplicates, v.Resolved, v.Excluded, v.Removed, v.Eligible}
	if want := []int{8, 1, 1, 1, 5, 2, 0, 3}; !slices.Equal(counts, want) {
		t.Fatalf("counts %v, want %v", counts, want)
	}
	if len(v.Rows) != 1 || v.Rows[0].Line != 7 || !strings.Contains(v.Rows[0].Reason, "not an address") {
		t.Fatalf("error rows = %+v", v.Rows)
	}
	wantExit(t, e.run("send", "--release", "spring", "--destination", mb.Target(), "--as", "notice-bot"), exitDenied, "no send approval")
	e.view("approve", "--release", "spring", "--as", "lead", "--destination", mb.Target())
	v = e.view("send", "--release", "spring", "--destination", mb.Target(), "--as", "notice-bot")
	if v.Confirmed != 3 || v.Attempted != 3 {
		t.Fatalf("after send: %+v", v)
	}
	v = e.view("send", "--release", "spring", "--destination", mb.Target(), "--as", "notice-bot")
	if v.SentThisRun == nil || *v.SentThisRun != 0 {
		t.Fatalf("a re-run reports %v sent by this run, want 0", v.SentThisRun)
	}
	// A re-run against another destination is refused before anyone is
	// touched: the release was approved for the mailbox.
	other, err := testmailbox.Start(ctx, testmailbox.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	wantExit(t, e.run("send", "--release", "spring", "--destination", other.Target(), "--as", "notice-bot"),
		exitWrongDestination, "the approved destination is "+strings.Split(mb.Target(), "?")[0])
	if n, _ := other.Count(ctx, testmailbox.Filter{}); n != 0 {
		t.Fatalf("the other destination received %d messages", n)
	}
	// So is another sender.
	wantExit(t, e.run("send", "--release", "spring", "--destination", mb.Target(), "--from", "security@bank.example", "--as", "notice-bot"),
		exitWrongDestination, "the approved sender is gatehouse@localhost")
	v = e.view("show", "--release", "spring", "--api", mb.APIURL(), "--rows", "eligible")
	if v.Arrived == nil || *v.Arrived != 3 || v.Confirmed != v.Eligible {
		t.Fatalf("delivered %v, confirmed %d, eligible %d", v.Arrived, v.Confirmed, v.Eligible)
	}
	for _, r := range v.Rows {
		n, err := mb.Count(ctx, testmailbox.Filter{To: r.Email})
		if err != nil || n != 1 || r.State != "sent" {
			t.Fatalf("%s: %d arrivals, state %s (%v)", r.Email, n, r.State, err)
		}
	}
	if n, _ := mb.Count(ctx, testmailbox.Filter{}); n != 3 {
		t.Fatalf("mailbox holds %d messages after a re-run, want 3", n)
	}
	text := e.run("show", "--release", "spring")
	for _, want := range []string{"source rows", "= errors + unmatched + duplicates + resolved", "final eligible", "email:nope", "is not an address"} {
		if !strings.Contains(text.stdout, want) {
			t.Fatalf("show lacks %q:\n%s", want, text.stdout)
		}
	}
}

func TestAudienceErrors(t *testing.T) {
	e := newAudienceEnv(t)
	bad := filepath.Join(t.TempDir(), "bad.csv")
	os.WriteFile(bad, []byte("name\nAda\n"), 0o644)
	badCustomers := filepath.Join(t.TempDir(), "crm.csv")
	os.WriteFile(badCustomers, []byte("customer_id,email,suppressed\nc1,a@x.org,no\n"), 0o644)
	// Over the limits: 80 MB (sparse, so it costs no disk) and one row
	// more than an audience file may have.
	huge := filepath.Join(t.TempDir(), "huge.csv")
	if f, err := os.Create(huge); err == nil {
		f.Truncate(80 << 20)
		f.Close()
	}
	long := filepath.Join(t.TempDir(), "long.csv")
	var rows strings.Builder
	rows.WriteString("customer_id\n")
	for i := range audiencefile.MaxRows + 1 {
		fmt.Fprintf(&rows, "c%d\n", i)
	}
	os.WriteFile(long, []byte(rows.String()), 0o644)
	tests := []struct {
		Name string
		Args []string
		Code int
		Err  string
	}{
		{"MissingFile", []string{"reconcile", "--release", "r", "--as", "ops", "--subject", "s"}, exitUsage, "audience reconcile needs --file"},
		{"MissingActor", []string{"reconcile", "--release", "r", "--file", e.file, "--subject", "s"}, exitUsage, "audience reconcile needs --as"},
		{"UnusableFile", []string{"reconcile", "--release", "r", "--file", bad, "--as", "ops", "--subject", "s"}, exitOther, "bad.csv"},
		{"FileOverTheByteLimit", []string{"reconcile", "--release", "r", "--file", huge, "--as", "ops", "--subject", "s"}, exitUsage,
			fmt.Sprintf("audience file %s is over the limit of %d bytes (64 MiB)", huge, audiencefile.MaxBytes)},
		{"FileOverTheRowLimit", []string{"reconcile", "--release", "r", "--file", long, "--as", "ops", "--subject", "s"}, exitUsage,
			fmt.Sprintf("audience file %s has more than %d rows", long, audiencefile.MaxRows)},
		{"CustomersWithoutConsent", []string{"reconcile", "--release", "r", "--file", e.file, "--customers", badCustomers, "--as", "ops", "--subject", "s"}, exitOther, "crm.csv:1: no consent column (have customer_id, email, suppressed)"},
		{"BadConsentValueFlag", []string{"reconcile", "--release", "r", "--file", e.file, "--customers", e.custom, "--consent-value", "ja", "--as", "ops", "--subject", "s"}, exitUsage, "--consent-value \"ja\": want WORD=CLASS"},
		{"ConsentValueUnknownClass", []string{"reconcile", "--release", "r", "--file", e.file, "--customers", e.custom, "--consent-value", "ja=maybe", "--as", "ops", "--subject", "s"}, exitUsage, "CLASS one of opted_in"},
		{"BadUnknownConsentFlag", []string{"reconcile", "--release", "r", "--file", e.file, "--unknown-consent", "ignore", "--as", "ops", "--subject", "s"}, exitUsage, "--unknown-consent \"ignore\": want refuse or exclude"},
		{"ConsentFlagsWithoutCustomers", []string{"send", "--release", "r", "--destination", "file:///tmp/x", "--accept-resubscribes", "--as", "bot"}, exitUsage, "apply to --customers files"},
		{"BadSample", []string{"show", "--release", "r", "--sample", "-1"}, exitUsage, "--sample -1"},
		{"BadRowStatus", []string{"show", "--release", "r", "--rows", "lost"}, exitUsage, "not a row status (want error,"},
		{"UnknownRelease", []string{"send", "--release", "nope", "--destination", "file:///tmp/x", "--as", "bot"}, exitOther, "release nope: not found"},
		{"ConcurrencyZero", []string{"send", "--release", "r", "--destination", "file:///tmp/x", "--concurrency", "0", "--as", "bot"}, exitUsage, "--concurrency 0: want 1 to 64"},
		{"ConcurrencyTooHigh", []string{"send", "--release", "r", "--destination", "file:///tmp/x", "--concurrency", "65", "--as", "bot"}, exitUsage, "--concurrency 65: want 1 to 64"},
		{"UnknownVerb", []string{"publish"}, exitUsage, "unknown verb \"publish\" for audience"},
	}
	for _, tc := range tests {
		t.Run(tc.Name, func(t *testing.T) {
			r := e.run(tc.Args...)
			wantExit(t, r, tc.Code, tc.Err)
			if lines := strings.Count(strings.TrimSpace(r.stderr), "\n"); lines != 0 {
				t.Fatalf("stderr has %d lines:\n%s", lines+1, r.stderr)
			}
		})
	}
	if r := e.run("show", "--release", "r"); r.code == 0 {
		t.Fatal("a release from a refused file was recorded")
	}
}

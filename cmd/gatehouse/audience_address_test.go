package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gatehouse/testmailbox"
)

// updating reports whether the test runs with -update, the flag a test
// dependency of this package already defines (charmbracelet's golden
// files), which rewrites goldens here too.
func updating() bool {
	f := flag.Lookup("update")
	return f != nil && f.Value.String() == "true"
}

// sharedCustomers is one person under three customer ids (the address in
// other letter case, and with a trailing space), Bea, and Cy, whom a later
// export no longer has.
const sharedCustomers = "customer_id,email,consent\n" +
	"c1,ada@example.org,yes\n" +
	"c2,Ada@Example.org,yes\n" +
	"c3,\"ada@example.org \",yes\n" +
	"c4,bea@example.org,yes\n" +
	"c9,cy@example.org,yes\n"

// freshCustomers is the CRM's export a day later: Cy was deleted.
const freshCustomers = "customer_id,email,consent\n" +
	"c1,ada@example.org,yes\n" +
	"c2,Ada@Example.org,yes\n" +
	"c3,ada@example.org,yes\n" +
	"c4,bea@example.org,yes\n"

const sharedAudience = "customer_id\nc1\nc2\nc3\nc4\nc9\n"

// addressEnv is an audience environment with the shared-address files,
// run from their directory so that the output names them as a person
// would type them.
func addressEnv(t *testing.T) (*audienceEnv, string) {
	e := newAudienceEnv(t)
	t.Chdir(filepath.Dir(e.file))
	e.file, e.custom = filepath.Base(e.file), filepath.Base(e.custom)
	fresh := "fresh.csv"
	for path, text := range map[string]string{e.file: sharedAudience, e.custom: sharedCustomers, fresh: freshCustomers} {
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return e, fresh
}

// TestAudienceOneNoticePerAddress: one address under three customer ids
// is one notice at a real SMTP mailbox; the reconciliation counts and lists
// the duplicates by address apart from duplicates by id, and `audience
// show` names the customer who carries it (golden). A customer missing
// from the fresh export given to the send is not sent, counted and listed.
func TestAudienceOneNoticePerAddress(t *testing.T) {
	ctx := context.Background()
	mb, err := testmailbox.Start(ctx, testmailbox.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer mb.Close()
	e, fresh := addressEnv(t)

	v := e.view("reconcile", "--release", "spring", "--file", e.file, "--customers", e.custom, "--as", "ops",
		"--subject", "Opening hours change", "--body", "From 1 April we open at nine.")
	if v.Duplicates != 0 || v.DuplicatesByAddress != 2 || v.Eligible != 3 || v.Resolved != 5 || v.CaseSensitiveLocalPart {
		t.Fatalf("reconciled: %+v", v)
	}
	if len(v.SharedAddresses) != 1 {
		t.Fatalf("shared addresses %+v", v.SharedAddresses)
	}
	sa := v.SharedAddresses[0]
	if sa.Address != "ada@example.org" || sa.CarriedBy == nil || sa.CarriedBy.Customer != "c1" || len(sa.Covered) != 2 ||
		sa.Covered[0].Customer != "c2" || sa.Covered[1].Reason != "covered by c1 (line 2): same address" {
		t.Fatalf("shared address %+v (carried by %+v)", sa, sa.CarriedBy)
	}
	e.view("approve", "--release", "spring", "--as", "lead", "--destination", mb.Target())
	v = e.view("send", "--release", "spring", "--destination", mb.Target(), "--as", "notice-bot", "--customers", fresh)
	if v.Customers == nil || v.Customers.Missing != 1 || len(v.Customers.MissingRows) != 1 || v.Customers.MissingRows[0].Customer != "c9" ||
		v.Customers.MissingRows[0].Status != "missing" || v.Customers.KeptMissing {
		t.Fatalf("the send's import: %+v", v.Customers)
	}
	if v.Missing != 1 || v.Confirmed != 2 || v.Eligible != 2 {
		t.Fatalf("after the send: %+v", v)
	}
	for addr, want := range map[string]int{"ada@example.org": 1, "bea@example.org": 1, "cy@example.org": 0} {
		if n, err := mb.Count(ctx, testmailbox.Filter{To: addr}); err != nil || n != want {
			t.Fatalf("%s: %d arrivals (%v), want %d", addr, n, err, want)
		}
	}
	if n, _ := mb.Count(ctx, testmailbox.Filter{}); n != 2 {
		t.Fatalf("the mailbox holds %d messages, want 2", n)
	}
	text := e.run("show", "--release", "spring", "--rows", "missing")
	if text.code != 0 {
		t.Fatalf("show: exit %d: %s", text.code, text.stderr)
	}
	golden(t, "audience-shared-address.golden", text.stdout)
}

// TestAudienceKeepMissing: --keep-missing says the export was partial: the
// customer it lacks is listed and sent; without --customers it is a usage
// error.
func TestAudienceKeepMissing(t *testing.T) {
	ctx := context.Background()
	mb, err := testmailbox.Start(ctx, testmailbox.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer mb.Close()
	e, fresh := addressEnv(t)
	e.view("reconcile", "--release", "spring", "--file", e.file, "--customers", e.custom, "--as", "ops",
		"--subject", "Opening hours change", "--body", "From 1 April we open at nine.", "--case-sensitive-local-part")
	e.view("approve", "--release", "spring", "--as", "lead", "--destination", mb.Target())
	wantExit(t, e.run("send", "--release", "spring", "--destination", mb.Target(), "--as", "notice-bot", "--keep-missing"),
		exitUsage, "--keep-missing apply to --customers files")
	r := e.run("send", "--release", "spring", "--destination", mb.Target(), "--as", "notice-bot", "--customers", fresh, "--keep-missing")
	if r.code != 0 || !strings.Contains(r.stdout, "absent from the exports, kept (--keep-missing: a partial export)") ||
		!strings.Contains(r.stdout, "local parts compared case-sensitively") {
		t.Fatalf("exit %d:\n%s%s", r.code, r.stdout, r.stderr)
	}
	// Case-sensitive: Ada@Example.org is another address than ada@.
	for addr, want := range map[string]int{"ada@example.org": 2, "cy@example.org": 1} {
		if n, err := mb.Count(ctx, testmailbox.Filter{To: addr}); err != nil || n != want {
			t.Fatalf("%s: %d arrivals (%v), want %d", addr, n, err, want)
		}
	}
}

// testdataDir is the package's testdata, found before a test changes
// directory.
var testdataDir, _ = filepath.Abs("testdata")

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join(testdataDir, name)
	if updating() {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to write it)", err)
	}
	if got != string(want) {
		t.Fatalf("output differs from %s (go test -run %s -update rewrites it):\n%s", path, t.Name(), got)
	}
}

// TestAudienceOneNoticePerMailboxAcrossSpellings: through the audience
// verbs and a real SMTP mailbox, customers whose addresses are one mailbox
// in other spellings (an A-label in any case, a U-label, its NFD form,
// fullwidth characters) receive one notice, addressed as the first one's
// CRM record wrote it; the mailbox counts it once under every spelling.
// Cy, whose domain cannot be mapped, is excluded, saying why.
func TestAudienceOneNoticePerMailboxAcrossSpellings(t *testing.T) {
	families := []struct {
		Name      string
		Spellings []string // the first carries the notice
	}{
		{"ALabelAnyCase", []string{"ada@exämple.org", "ADA@XN--EXMPLE-CUA.ORG", "Ada@xn--EXMPLE-cua.org"}},
		{"ULabel", []string{"ada@xn--exmple-cua.org", "ada@exämple.org", "ADA@EXÄMPLE.ORG"}},
		{"NFD", []string{"ada@exämple.org", "ada@exa\u0308mple.org"}},
		{"Fullwidth", []string{"ada@example.org", "ada@ｅxample.org", "ADA@ＥＸＡＭＰＬＥ．ＯＲＧ"}},
		{"AllAtOnce", []string{"ada@xn--exmple-cua.org", "ada@exämple.org", "ada@exa\u0308mple.org", "ADA@XN--EXMPLE-CUA.ORG", "ada@ｅｘäｍｐｌｅ.org"}},
	}
	for _, f := range families {
		t.Run(f.Name, func(t *testing.T) {
			ctx := context.Background()
			mb, err := testmailbox.Start(ctx, testmailbox.Config{})
			if err != nil {
				t.Fatal(err)
			}
			defer mb.Close()
			e, _ := addressEnv(t)
			customers, audience := "customer_id,email,consent\n", "customer_id\n"
			for i, s := range f.Spellings {
				customers += fmt.Sprintf("c%d,%s,yes\n", i+1, s)
				audience += fmt.Sprintf("c%d\n", i+1)
			}
			customers += "bea,bea@example.net,yes\ncy,cy@exa_mple.org,yes\n"
			audience += "bea\ncy\n"
			for path, text := range map[string]string{e.file: audience, e.custom: customers} {
				if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			v := e.view("reconcile", "--release", "spring", "--file", e.file, "--customers", e.custom, "--as", "ops",
				"--subject", "Opening hours change", "--body", "From 1 April we open at nine.")
			e.view("approve", "--release", "spring", "--as", "lead", "--destination", mb.Target())
			sent := e.view("send", "--release", "spring", "--destination", mb.Target(), "--as", "notice-bot")
			_, msgs, err := mb.List(ctx, testmailbox.Filter{})
			if err != nil {
				t.Fatal(err)
			}
			var to []string
			for _, m := range msgs {
				to = append(to, strings.Join(m.To, ","))
			}
			slices.Sort(to)
			if want := []string{f.Spellings[0], "bea@example.net"}; !slices.Equal(to, want) {
				t.Fatalf("the mailbox holds messages to %q, want one to %q (as its CRM wrote it) and one to Bea", to, want)
			}
			if v.DuplicatesByAddress != len(f.Spellings)-1 || v.Eligible != 2 || v.Excluded != 1 || sent.Confirmed != 2 {
				t.Fatalf("reconciled: %d covered, %d eligible, %d excluded, then %d confirmed; want %d, 2, 1, 2",
					v.DuplicatesByAddress, v.Eligible, v.Excluded, sent.Confirmed, len(f.Spellings)-1)
			}
			for _, s := range f.Spellings {
				if n, err := mb.Count(ctx, testmailbox.Filter{To: s}); err != nil || n != 1 {
					t.Fatalf("the mailbox counts %d message(s) to %q (%v), want 1", n, s, err)
				}
			}
			rows := e.view("show", "--release", "spring", "--rows", "excluded").Rows
			if len(rows) != 1 || rows[0].Customer != "cy" ||
				!strings.Contains(rows[0].Reason, `its domain "exa_mple.org" cannot be mapped as an international domain name`) {
				t.Fatalf("excluded rows %+v, want cy, excluded for its domain", rows)
			}
		})
	}
}

package main

import (
	"bytes"
	"context"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gatehouse/internal/pgtest"
	"gatehouse/ledger"
	"gatehouse/testmailbox"
)

// TestNoSecretIsPrinted sweeps every output path a verb has (text, --json,
// errors, ledger check, backup and restore messages, review reports,
// recovery, history, metrics) for a password given in each form a location
// can carry it, on both stores: in a PostgreSQL ledger URL as userinfo,
// password=, sslpassword= and passfile=, and in an SMTP destination's
// userinfo and GATEHOUSE_SMTP_PASSWORD. None may appear anywhere.
func TestNoSecretIsPrinted(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL")
	}
	mb, err := testmailbox.Start(context.Background(), testmailbox.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer mb.Close()
	type form struct {
		name, secret string
		ledger       func(t *testing.T, secret string) string
		dest         func(secret string) string
	}
	sqlite := func(t *testing.T, _ string) string { return filepath.Join(t.TempDir(), "ledger.db") }
	plainDest := func(string) string { return mb.Target() }
	pg := func(edit func(u *url.URL, secret string)) func(t *testing.T, secret string) string {
		return func(t *testing.T, secret string) string {
			u, err := url.Parse(pgtest.Database(t))
			if err != nil {
				t.Fatal(err)
			}
			edit(u, secret)
			return u.String()
		}
	}
	param := func(name string) func(u *url.URL, secret string) {
		return func(u *url.URL, secret string) {
			q := u.Query()
			q.Set(name, secret)
			u.RawQuery = q.Encode()
		}
	}
	passfile := filepath.Join(t.TempDir(), "pgpass-Sekr1tPassfile")
	os.WriteFile(passfile, []byte("*:*:*:*:Sekr1tPassfile\n"), 0o600)
	forms := []form{
		{"PostgresUserinfo", "Sekr1tUserinfo", pg(func(u *url.URL, s string) { u.User = url.UserPassword(u.User.Username(), s) }), plainDest},
		{"PostgresPasswordParam", "Sekr1tParam", pg(param("password")), plainDest},
		{"PostgresSSLPassword", "Sekr1tSSL", pg(param("sslpassword")), plainDest},
		{"PostgresPassfile", "Sekr1tPassfile", pg(func(u *url.URL, _ string) { param("passfile")(u, passfile) }), plainDest},
		{"SMTPUserinfo", "Sekr1tSMTP", sqlite, func(s string) string {
			return strings.Replace(mb.Target(), "smtp://", "smtp://relay-user:"+s+"@", 1)
		}},
		{"SMTPPasswordEnv", "Sekr1tSMTPEnv", sqlite, plainDest},
	}
	for _, f := range forms {
		t.Run(f.name, func(t *testing.T) {
			if f.name == "SMTPPasswordEnv" {
				t.Setenv("GATEHOUSE_SMTP_PASSWORD", f.secret)
				t.Setenv("GATEHOUSE_SMTP_USER", "relay-user")
			}
			loc := f.ledger(t, f.secret)
			dest := f.dest(f.secret)
			var printed bytes.Buffer
			do := func(args ...string) result {
				var out, errOut bytes.Buffer
				code := run(args, &out, &errOut)
				printed.WriteString(out.String() + errOut.String())
				return result{code: code, stdout: out.String(), stderr: errOut.String()}
			}
			do("gate", "claim", "--task", "task-1", "--customer", "cust-42", "--as", "alice", "--ledger", loc)
			r := do("gate", "propose", "--as", "wf", "--task", "task-1", "--customer", "cust-42", "--event", "e1", "--type", "reply_ack",
				"--target", "task-1", "--to", "ada@example.com", "--subject", "Hello", "--body", "Hi", "--destination", dest, "--ledger", loc)
			key := strings.TrimSpace(r.stdout)
			do("gate", "approve", "--key", key, "--as", "bob", "--material", "crm.consent=yes", "--ledger", loc)
			for _, json := range []string{"", "--json"} {
				args := func(a ...string) []string {
					a = append(a, "--ledger", loc)
					if json != "" {
						a = append(a, json)
					}
					return a
				}
				do(args("gate", "send", "--key", key, "--as", "alice", "--material", "crm.consent=yes", "--destination", dest)...)
				do(args("gate", "send", "--key", key, "--as", "alice", "--material", "crm.consent=yes", "--destination", dest+"&x=1")...)
				do(args("gate", "show", "--key", key)...)
				do(args("gate", "show", "--key", "gh1:no:such:key:here:r0")...)
				do(args("gate", "reconcile", "--key", key, "--as", "ops")...)
				do(args("gate", "metrics")...)
				do(args("gate", "list")...)
				do(args("ledger", "check")...)
			}
			do("gate", "history", "--ledger", loc)
			do("ledger", "recover", "--ledger", loc)
			do("ledger", "backup", "--ledger", loc, "--to", filepath.Join(t.TempDir(), "b.db"))
			do("ledger", "restore", "--ledger", loc, "--from", filepath.Join(t.TempDir(), "missing.db"))
			do("ledger", "migrate", "--ledger", loc)
			for _, format := range []string{"md", "json", "text"} {
				do("review", "--ledger", loc, "--format", format)
			}
			report := filepath.Join(t.TempDir(), "report.md")
			do("review", "--ledger", loc, "--format", "md", "-o", report)
			if b, err := os.ReadFile(report); err == nil {
				printed.Write(b)
			}
			if l, err := ledger.OpenReadOnly(loc); err == nil { // what the screens' headers show
				printed.WriteString(l.Path())
				l.Close()
			}
			if strings.Contains(printed.String(), f.secret) {
				i := strings.Index(printed.String(), f.secret)
				t.Fatalf("the secret was printed: …%s…", printed.String()[max(0, i-200):min(len(printed.String()), i+100)])
			}
			if !strings.Contains(printed.String(), "xxxxx") && strings.HasPrefix(f.name, "Postgres") && f.name != "PostgresPassfile" {
				t.Errorf("no location was shown at all (masked): the sweep printed nothing to check?\n%s", printed.String())
			}
		})
	}
}

// TestKeyValueDSNIsRefused: a PostgreSQL connection string in key=value
// form is not taken for an SQLite file name; it is refused, saying the URL
// form, without quoting the password, and nothing is created.
func TestKeyValueDSNIsRefused(t *testing.T) {
	dir := t.TempDir()
	wd, _ := os.Getwd()
	os.Chdir(dir)
	defer os.Chdir(wd)
	dsn := "host=/tmp dbname=gatehouse user=gh password=Sekr1tDSN"
	for _, args := range [][]string{{"gate", "show", "--key", "gh1:c:e:t:x:r0", "--ledger", dsn}, {"ledger", "check", "--ledger", dsn}, {"gate", "claim", "--task", "t", "--as", "a", "--ledger", dsn}} {
		var out, errOut bytes.Buffer
		code := run(args, &out, &errOut)
		all := out.String() + errOut.String()
		if code != exitUsage || !strings.Contains(all, "postgres://USER@HOST") || strings.Contains(all, "Sekr1tDSN") {
			t.Errorf("%v: exit %d, want 2 with the URL form and no password\n%s", args[:2], code, all)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) > 0 {
		t.Errorf("a refused DSN created %v", ents[0].Name())
	}
}

package main

import (
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	smtpdest "gatehouse/destination/smtp"
)

// printed waits for the line `mailbox serve` prints under name ("target",
// "token", …) and returns its value.
func printed(t *testing.T, lines <-chan string, name string) string {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatalf("mailbox serve ended before printing %s", name)
			}
			if v, ok := strings.CutPrefix(line, name+" "); ok {
				return strings.TrimSpace(v)
			}
		case <-timeout:
			t.Fatalf("mailbox serve printed no %s line", name)
		}
	}
}

// TestMailboxTargetCopiedIntoTheGateOverTLS: the target `mailbox serve`
// prints, copied as is into propose and send, reaches the mailbox over
// STARTTLS verified against the certificate it names, with AUTH from the
// environment; the password shows up nowhere in the output.
func TestMailboxTargetCopiedIntoTheGateOverTLS(t *testing.T) {
	_, _, api, lines := startMailboxProcess(t, "--tls", "require", "--auth")
	target := printed(t, lines, "target")
	if !strings.Contains(target, "tls=require") || !strings.Contains(target, "ca=") {
		t.Fatalf("printed target %q does not say how to verify the mailbox", target)
	}
	t.Setenv(smtpdest.UserEnv, "gatehouse")
	t.Setenv(smtpdest.PasswordEnv, "gatehouse")
	e := newGateEnv(t)
	key := e.approvedTo(target, "enquiry-tls", "ack-workflow")
	r := e.must("send", "--key", key, "--as", "ack-workflow", "--destination", target)
	if r.stdout == "" {
		t.Fatal("send printed nothing")
	}
	code, out, errOut := runMailboxCLI("mailbox", "count", "--api", api, "--action-key", key)
	if code != 0 || strings.TrimSpace(out) != "1" {
		t.Fatalf("count: exit %d, %q, %q", code, out, errOut)
	}
	show := e.must("show", "--key", key, "--json")
	if strings.Contains(show.stdout, "ca=") || strings.Contains(show.stdout, "tls=") {
		t.Fatalf("the recorded destination carries TLS options:\n%s", show.stdout)
	}

	// Without the printed ca, the system's roots do not know the mailbox:
	// nothing is delivered, and the action may be retried.
	key = e.approvedTo(target, "enquiry-untrusted", "ack-workflow")
	bare := target[:strings.Index(target, "?")]
	r = e.gate("send", "--key", key, "--as", "ack-workflow", "--destination", bare)
	wantExit(t, r, exitOther, "certificate signed by unknown authority")

	// A send that names no destination connects the way the approval did:
	// over STARTTLS, verified against the mailbox's own certificate, which
	// the ledger kept itself (the file it was read from is gone by then).
	key = e.approvedTo(target, "enquiry-approved-way", "ack-workflow")
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	ca := u.Query().Get("ca")
	if err := os.Rename(ca, ca+".away"); err != nil {
		t.Fatal(err)
	}
	e.must("send", "--key", key, "--as", "ack-workflow")
	if code, out, _ := runMailboxCLI("mailbox", "count", "--api", api, "--action-key", key); code != 0 || strings.TrimSpace(out) != "1" {
		t.Fatalf("count after a send to the approved destination: exit %d, %q", code, out)
	}
	if err := os.Rename(ca+".away", ca); err != nil {
		t.Fatal(err)
	}

	// Connection settings are not the destination: naming the approved one
	// with other settings (no verification at all, given explicitly) is the
	// same destination, not a wrong one.
	key = e.approvedTo(target, "enquiry-other-settings", "ack-workflow")
	e.must("send", "--key", key, "--as", "ack-workflow", "--destination", bare+"?insecure=true&api="+url.QueryEscape(u.Query().Get("api")))
	if code, out, _ := runMailboxCLI("mailbox", "count", "--api", api, "--action-key", key); code != 0 || strings.TrimSpace(out) != "1" {
		t.Fatalf("count after a send with other settings: exit %d, %q", code, out)
	}
}

func TestMailboxServeRefusals(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"HTTPOnEveryInterface", []string{"--http", "0.0.0.0:0"}, "--allow-remote"},
		{"SMTPOnEveryInterface", []string{"--smtp", ":0"}, "--allow-remote"},
		{"BadTLSMode", []string{"--tls", "sometimes"}, "want off, offer or require"},
		{"CertWithoutKey", []string{"--tls-cert", "cert.pem"}, "--tls-key"},
		{"AuthInClearWithoutAllowance", []string{"--tls", "off", "--auth"}, "--allow-insecure-auth"},
		{"HTTPNameWithPort", []string{"--http-name", "mailbox.lan:8025"}, "--http-name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"mailbox", "serve", "--smtp", "127.0.0.1:0", "--http", "127.0.0.1:0"}, tc.args...)
			code, _, errOut := runMailboxCLI(args...)
			if code != exitUsage || !strings.Contains(errOut, tc.want) {
				t.Fatalf("exit %d, stderr %q; want %d saying %q", code, errOut, exitUsage, tc.want)
			}
		})
	}
}

// TestMailboxTokenVerbs: an exposed mailbox prints the token it generated;
// the verbs that change it need --token or $GATEHOUSE_MAILBOX_TOKEN, the
// ones that read do not.
func TestMailboxTokenVerbs(t *testing.T) {
	_, _, api, lines := startMailboxProcess(t, "--allow-remote", "--smtp", "127.0.0.2:0", "--http", "127.0.0.2:0")
	line := printed(t, lines, "token")
	token, _, _ := strings.Cut(line, " ")
	if len(token) < 32 {
		t.Fatalf("token line %q", line)
	}
	code, _, errOut := runMailboxCLI("mailbox", "clear", "--api", api)
	if code != exitOther || !strings.Contains(errOut, "401") || !strings.Contains(errOut, "API token") {
		t.Fatalf("clear without token: exit %d, %q", code, errOut)
	}
	if code, _, errOut := runMailboxCLI("mailbox", "fault", "--api", api, "down"); code != exitOther || !strings.Contains(errOut, "401") {
		t.Fatalf("fault without token: exit %d, %q", code, errOut)
	}
	if code, out, errOut := runMailboxCLI("mailbox", "stats", "--api", api); code != 0 || !strings.Contains(out, "stored") || !strings.Contains(out, "epoch ") {
		t.Fatalf("stats without token: exit %d, %q", code, errOut)
	}
	if code, out, errOut := runMailboxCLI("mailbox", "clear", "--api", api, "--token", token); code != 0 || !strings.Contains(out, "deleted 0") {
		t.Fatalf("clear with --token: exit %d, %q %q", code, out, errOut)
	}
	t.Setenv(mailboxTokenEnv, token)
	if code, out, errOut := runMailboxCLI("mailbox", "fault", "--api", api, "--clear"); code != 0 || !strings.Contains(out, "no faults") {
		t.Fatalf("fault --clear with $%s: exit %d, %q %q", mailboxTokenEnv, code, out, errOut)
	}
}

// TestGateReconcileAfterMailboxClear: through the CLI and a real mailbox
// process, an attempt whose reply was dropped is reconciled after `mailbox
// clear`: held, "cannot be established" (exit 13), and never sent again.
func TestGateReconcileAfterMailboxClear(t *testing.T) {
	_, _, api, lines := startMailboxProcess(t, "--fault", "accept_then_drop:count=1")
	target := printed(t, lines, "target")
	e := newGateEnv(t)
	key := e.approvedTo(target, "enquiry-forgotten", "ack-workflow")
	send := []string{"send", "--key", key, "--as", "ack-workflow", "--destination", target}
	wantExit(t, e.gate(send...), exitUnknown, "reconcile")
	if show := e.must("show", "--key", key, "--json"); !strings.Contains(show.stdout, `"epoch":`) {
		t.Fatalf("show does not give the epoch the attempt recorded:\n%s", show.stdout)
	}
	if code, out, errOut := runMailboxCLI("mailbox", "clear", "--api", api); code != 0 || !strings.Contains(out, "deleted 1") {
		t.Fatalf("clear: exit %d, %q %q", code, out, errOut)
	}
	wantExit(t, e.gate("reconcile", "--key", key, "--as", "ops"), exitHeld, "cannot be established")
	if r := e.gate(send...); r.code == exitOK {
		t.Fatalf("sent again after a reconcile that could not establish the outcome:\n%s", r.stdout)
	}
	code, out, _ := runMailboxCLI("mailbox", "stats", "--api", api, "--json")
	if code != 0 || !strings.Contains(out, `"accepted": 0`) || !strings.Contains(out, `"stored": 0`) {
		t.Fatalf("after the reconcile the mailbox got something: exit %d\n%s", code, out)
	}
}

// TestMailboxServeAnswersOnlyItsNames: the serving process answers a
// request by its own address and by a name given with --http-name, and
// refuses one whose Host is any other name (421), as a page that rebound
// its name to the mailbox's address would send.
func TestMailboxServeAnswersOnlyItsNames(t *testing.T) {
	_, _, api, _ := startMailboxProcess(t, "--http-name", "mailbox.lan")
	for host, want := range map[string]int{"": http.StatusOK, "mailbox.lan": http.StatusOK,
		"rebind.attacker.example": http.StatusMisdirectedRequest} {
		req, err := http.NewRequest(http.MethodGet, api+"/api/v1/messages", nil)
		if err != nil {
			t.Fatal(err)
		}
		if host != "" {
			req.Host = host
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET /api/v1/messages with Host %q: %d, want %d", host, resp.StatusCode, want)
		}
	}
}

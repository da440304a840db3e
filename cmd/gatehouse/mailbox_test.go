package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/smtp"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"gatehouse/testmailbox"
)

// runMailboxCLI runs the CLI in-process and returns exit code and output.
func runMailboxCLI(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return code, out.String(), errb.String()
}

// startMailboxProcess builds the binary and runs `mailbox serve` as a real
// process, returning the API URL and SMTP address it printed.
func startMailboxProcess(t *testing.T, extra ...string) (cmd *exec.Cmd, smtpAddr, api string, lines <-chan string) {
	t.Helper()
	dir := t.TempDir()
	bin := gatehouseBinary(t)
	args := append([]string{"mailbox", "serve", "--smtp", "127.0.0.1:0", "--http", "127.0.0.1:0",
		"--db", filepath.Join(dir, "mailbox.db")}, extra...)
	cmd = exec.Command(bin, args...)
	// The process is killed at the end, so it cannot remove the directory
	// of the certificate it made: keep that inside the test's own.
	cmd.Env = append(os.Environ(), "TMPDIR="+dir)
	ch, stderr := startServing(t, cmd)
	timeout := time.After(30 * time.Second)
	for smtpAddr == "" || api == "" {
		select {
		case line, ok := <-ch:
			if !ok {
				t.Fatalf("mailbox serve ended before printing its addresses; stderr: %s", stderr.String())
			}
			if v, ok := strings.CutPrefix(line, "smtp "); ok {
				smtpAddr = strings.TrimSpace(v)
			}
			if v, ok := strings.CutPrefix(line, "http "); ok {
				api = strings.TrimSpace(v)
			}
		case <-timeout:
			t.Fatal("mailbox serve printed no addresses")
		}
	}
	return cmd, smtpAddr, api, ch
}

func TestMailboxServeQueryAndStopOnSIGTERM(t *testing.T) {
	// net/smtp.SendMail upgrades whenever STARTTLS is offered and would
	// verify the mailbox against the system's roots; TLS has its own test.
	cmd, smtpAddr, api, lines := startMailboxProcess(t, "--fault", "reject_permanent:to=eve@example.com", "--tls", "off")

	msg := "From: shop@example.com\r\nTo: ann@example.com\r\nSubject: Hello\r\n" +
		"X-Gatehouse-Action-Key: gh1:c:e:ack:t:r0\r\n\r\nHi.\r\n"
	for range 2 {
		if err := smtp.SendMail(smtpAddr, nil, "shop@example.com", []string{"ann@example.com"}, []byte(msg)); err != nil {
			t.Fatalf("send: %v", err)
		}
	}
	if err := smtp.SendMail(smtpAddr, nil, "shop@example.com", []string{"eve@example.com"}, []byte(msg)); err == nil {
		t.Error("the --fault given to serve did not reject eve's message")
	}

	code, out, errOut := runMailboxCLI("mailbox", "count", "--api", api, "--action-key", "gh1:c:e:ack:t:r0")
	if code != 0 || strings.TrimSpace(out) != "2" {
		t.Errorf("count: exit %d, out %q, err %q", code, out, errOut)
	}
	code, out, _ = runMailboxCLI("mailbox", "list", "--api", api, "--to", "ann@example.com")
	if code != 0 || !strings.Contains(out, "ACTION KEY") || !strings.Contains(out, "duplicate") ||
		!strings.Contains(out, "2 of 2 messages") {
		t.Errorf("list: exit %d\n%s", code, out)
	}
	code, out, _ = runMailboxCLI("mailbox", "list", "--api", api, "--json", "--limit", "1")
	var page testmailbox.MessagesResponse
	if err := json.Unmarshal([]byte(out), &page); code != 0 || err != nil || page.Total != 2 || len(page.Messages) != 1 {
		t.Errorf("list --json: exit %d, %v\n%s", code, err, out)
	}
	// The web page at the same address shows them, the second marked.
	resp, err := http.Get(api + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || strings.Count(string(body), `<span class="duplicate">duplicate</span>`) != 2 {
		t.Errorf("web page: %d, want the legend and one duplicate mark:\n%s", resp.StatusCode, body)
	}
	code, out, _ = runMailboxCLI("mailbox", "fault", "--api", api, "accept_then_drop:count=1", "down=1h")
	if code != 0 || !strings.Contains(out, "accept_then_drop:count=1  (fired 0, 1 left)") || !strings.Contains(out, "down") {
		t.Errorf("fault: exit %d\n%s", code, out)
	}
	if c, err := net.DialTimeout("tcp", smtpAddr, time.Second); err == nil {
		c.Close()
		t.Error("SMTP reachable after fault down")
	}
	code, out, _ = runMailboxCLI("mailbox", "fault", "--api", api, "--clear")
	if code != 0 || !strings.Contains(out, "no faults") {
		t.Errorf("fault --clear: exit %d\n%s", code, out)
	}
	code, out, _ = runMailboxCLI("mailbox", "stats", "--api", api)
	if code != 0 || !strings.Contains(out, "duplicates") || !strings.Contains(out, "fired reject_permanent") {
		t.Errorf("stats: exit %d\n%s", code, out)
	}
	code, out, _ = runMailboxCLI("mailbox", "clear", "--api", api)
	if code != 0 || strings.TrimSpace(out) != "deleted 2 messages" {
		t.Errorf("clear: exit %d, %q", code, out)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("mailbox serve after SIGTERM: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("mailbox serve did not stop on SIGTERM")
	}
	var rest []string
	for l := range lines {
		rest = append(rest, l)
	}
	if !strings.Contains(strings.Join(rest, "\n"), "stopping") {
		t.Errorf("no shutdown line in %q", rest)
	}
	if !slices.ContainsFunc(rest, func(l string) bool { return strings.HasPrefix(l, "web     "+api+"/ ") }) {
		t.Errorf("no web line naming %s/ in %q", api, rest)
	}
}

func TestMailboxServeInProcessStopsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- serveMailbox(ctx, io.Discard, testmailbox.Config{SMTPAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0",
			MaxMessageBytes: 1 << 20, MaxRecipients: 10})
	}()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not return after its context ended")
	}
}

func TestMailboxUsageErrors(t *testing.T) {
	t.Setenv(mailboxAPIEnv, "")
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"NoVerb", []string{"mailbox"}, "missing verb"},
		{"UnknownVerb", []string{"mailbox", "explode"}, `unknown verb "explode"`},
		{"CountWithoutAPI", []string{"mailbox", "count"}, "--api URL is required"},
		{"BadAPI", []string{"mailbox", "list", "--api", "ftp://x:1"}, "scheme must be http"},
		{"BadLimit", []string{"mailbox", "list", "--api", "http://127.0.0.1:1", "--limit", "-1"}, "--limit -1"},
		{"LimitNotANumber", []string{"mailbox", "list", "--api", "http://127.0.0.1:1", "--limit", "abc"}, "invalid argument"},
		{"BadFaultSpec", []string{"mailbox", "fault", "--api", "http://127.0.0.1:1", "delay_reply"}, `"duration"`},
		{"SpecsAndClear", []string{"mailbox", "fault", "--api", "http://127.0.0.1:1", "--clear", "down"}, "not both"},
		{"ServeBadFault", []string{"mailbox", "serve", "--fault", "reject_temporary:p=7"}, `"p"`},
		{"ServeExtraArg", []string{"mailbox", "serve", "now"}, "unknown command"},
		{"UnknownFlag", []string{"mailbox", "count", "--colour"}, "unknown flag"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, errOut := runMailboxCLI(tt.args...)
			if code != exitUsage {
				t.Errorf("exit %d; want %d (stderr %q)", code, exitUsage, errOut)
			}
			if !strings.Contains(errOut, tt.want) || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
				t.Errorf("stderr %q; want one line mentioning %q", errOut, tt.want)
			}
		})
	}
}

func TestMailboxQueryUnreachableAPI(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	api := "http://" + l.Addr().String()
	l.Close()
	code, _, errOut := runMailboxCLI("mailbox", "count", "--api", api)
	if code != exitOther || !strings.Contains(errOut, "mailbox api") {
		t.Errorf("exit %d, stderr %q; want %d and the API named", code, errOut, exitOther)
	}
}

// startServing starts a serving command (mailbox serve, payments serve),
// kills it at the end of the test unless it already ended, and hands back
// its stdout line by line and its stderr.
func startServing(t *testing.T, cmd *exec.Cmd) (<-chan string, *bytes.Buffer) {
	t.Helper()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := new(bytes.Buffer)
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	lines := make(chan string, 16)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	return lines, stderr
}

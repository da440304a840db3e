package main

import (
	"net/smtp"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"gatehouse/testmailbox"
)

// TestMailboxFaultSaysWhenItEnds: a timed down fault prints its end, a
// counted one what is left, any other "until cleared" (never "no end").
func TestMailboxFaultSaysWhenItEnds(t *testing.T) {
	now := time.Date(2026, 3, 2, 9, 0, 0, 0, time.Local)
	down, err := testmailbox.ParseFault("down=5s")
	if err != nil {
		t.Fatal(err)
	}
	drop, err := testmailbox.ParseFault("accept_then_drop:count=2")
	if err != nil {
		t.Fatal(err)
	}
	reject, err := testmailbox.ParseFault("reject_temporary")
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	err = printMailboxFaults(&b, testmailbox.FaultsResponse{Down: true, Faults: []testmailbox.FaultStatus{
		{Fault: down, Fired: 1, Remaining: -1, Until: now.Add(5 * time.Second)},
		{Fault: drop, Remaining: 2},
		{Fault: reject, Remaining: -1},
	}}, now.Add(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	want := "down=5s  (fired 1, ends 09:00:05, in 3s)\n" +
		"accept_then_drop:count=2  (fired 0, 2 left)\n" +
		"reject_temporary  (fired 0, until cleared)\n" +
		"smtp listener is down\n"
	if b.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", b.String(), want)
	}
}

// TestMailboxHelpNamesEveryFaultKind: the usage of `mailbox fault` and
// `mailbox serve` lists every kind the mailbox knows, so a new kind cannot
// be left out of the help.
func TestMailboxHelpNamesEveryFaultKind(t *testing.T) {
	for _, verb := range []string{"fault", "serve"} {
		t.Run(verb, func(t *testing.T) {
			code, out, errOut := runMailboxCLI("mailbox", verb, "--help")
			if code != 0 {
				t.Fatalf("exit %d, stderr %q", code, errOut)
			}
			for _, k := range testmailbox.FaultKinds {
				if !strings.Contains(out, string(k)) {
					t.Errorf("mailbox %s --help does not name %s:\n%s", verb, k, out)
				}
			}
		})
	}
}

// TestMailboxDocsTableEveryFaultKind: docs/mailbox.md has a row for every
// kind in its table of kinds, saying what a sender sees and what the
// records hold.
func TestMailboxDocsTableEveryFaultKind(t *testing.T) {
	raw, err := os.ReadFile("../../docs/mailbox.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(raw), "### Fault kinds\n")
	if !ok {
		t.Fatal("docs/mailbox.md has no ### Fault kinds section")
	}
	for _, k := range testmailbox.FaultKinds {
		row := "| `" + string(k)
		if !strings.Contains(table, row+"`") && !strings.Contains(table, row+"=") && !strings.Contains(table, row+"[") {
			t.Errorf("docs/mailbox.md's table of kinds has no row for %s", k)
		}
	}
}

// TestMailboxEndHolds: `mailbox end-holds` lets a sender held by a long
// hold_354 go on at once, and stats show it held before and not after.
func TestMailboxEndHolds(t *testing.T) {
	ctx := t.Context()
	mb, err := testmailbox.Start(ctx, testmailbox.Config{Faults: []testmailbox.Fault{{Kind: testmailbox.FaultHold354, Duration: time.Hour}}})
	if err != nil {
		t.Fatal(err)
	}
	defer mb.Close()
	api := mb.APIURL()
	msg := "From: shop@example.com\r\nTo: ann@example.com\r\nSubject: held\r\nMessage-ID: <held@example.com>\r\n\r\nHi.\r\n"
	sent := make(chan error, 1)
	go func() {
		sent <- smtp.SendMail(mb.SMTPAddr(), nil, "shop@example.com", []string{"ann@example.com"}, []byte(msg))
	}()
	for {
		st, err := mb.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.Held == 1 {
			break
		}
		select {
		case err := <-sent:
			t.Fatalf("the send ended (%v) while hold_354=1h was in force", err)
		case <-time.After(2 * time.Millisecond): // the mailbox's state, polled through its API
		}
	}
	if code, out, errOut := runMailboxCLI("mailbox", "stats", "--api", api); code != 0 || !regexp.MustCompile(`(?m)^held now +1$`).MatchString(out) {
		t.Errorf("stats while held: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut := runMailboxCLI("mailbox", "end-holds", "--api", api)
	if code != 0 || out != "ended 1 hold(s)\n" {
		t.Fatalf("end-holds: exit %d, out %q, err %q", code, out, errOut)
	}
	select {
	case err := <-sent:
		if err != nil {
			t.Fatalf("the send after end-holds: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the send did not go on after end-holds")
	}
	if n, err := mb.Count(ctx, testmailbox.Filter{MessageID: "held@example.com"}); err != nil || n != 1 {
		t.Errorf("stored %d (%v); want 1", n, err)
	}
	if code, out, _ := runMailboxCLI("mailbox", "end-holds", "--api", api); code != 0 || out != "ended 0 hold(s)\n" {
		t.Errorf("end-holds with nothing held: exit %d, out %q", code, out)
	}
	if code, _, errOut := runMailboxCLI("mailbox", "end-holds"); code != exitUsage {
		t.Errorf("end-holds without --api: exit %d (%s), want %d", code, errOut, exitUsage)
	}
}

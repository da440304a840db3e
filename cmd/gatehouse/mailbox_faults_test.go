package main

import (
	"os"
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

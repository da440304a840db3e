package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"gatehouse/ledger"
	"gatehouse/testmailbox"
)

// TestAudienceSendConcurrentWithProgress sends 300 recipients with
// --concurrency 6 to a real mailbox: each arrives once, a progress line is
// printed for each batch (the interval is set to every batch) and the last
// one says done; a re-run sends nothing and --json prints no progress.
func TestAudienceSendConcurrentWithProgress(t *testing.T) {
	ctx := context.Background()
	mb, err := testmailbox.Start(ctx, testmailbox.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer mb.Close()
	old := progressEvery
	progressEvery = time.Nanosecond
	t.Cleanup(func() { progressEvery = old })

	e := newAudienceEnv(t)
	const n = 300
	var crm, file strings.Builder
	crm.WriteString("customer_id,email,consent\n")
	file.WriteString("customer_id\n")
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&crm, "r%d,r%d@example.org,yes\n", i, i)
		fmt.Fprintf(&file, "r%d\n", i)
	}
	dir := t.TempDir()
	custom, audience := filepath.Join(dir, "crm.csv"), filepath.Join(dir, "big.csv")
	os.WriteFile(custom, []byte(crm.String()), 0o644)
	os.WriteFile(audience, []byte(file.String()), 0o644)
	e.view("reconcile", "--release", "big", "--file", audience, "--customers", custom, "--as", "ops", "--subject", "Opening hours change")
	e.view("approve", "--release", "big", "--as", "lead", "--destination", mb.Target())

	r := e.run("send", "--release", "big", "--destination", mb.Target(), "--concurrency", "6", "--as", "notice-bot")
	if r.code != 0 {
		t.Fatalf("send: exit %d: %s", r.code, r.stderr)
	}
	lines := strings.Split(strings.TrimSpace(strings.ReplaceAll(r.stderr, openNotice("notice-bot"), "")), "\n")
	line := regexp.MustCompile(`^audience send: \d+/300 recipients, sent \d+, held 0, denied 0, \d+/s, ETA \S+$`)
	for _, l := range lines {
		if !line.MatchString(l) {
			t.Fatalf("progress line %q", l)
		}
	}
	if batches := (n + 4*6 - 1) / (4 * 6); len(lines) < batches || !strings.HasPrefix(lines[len(lines)-1], "audience send: 300/300 recipients, sent 300,") ||
		!strings.HasSuffix(lines[len(lines)-1], "ETA done") {
		t.Fatalf("%d progress lines, want one per batch (%d) ending with the total:\n%s", len(lines), batches, r.stderr)
	}
	st, err := mb.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := mb.Count(ctx, testmailbox.Filter{}); got != n || st.DuplicateActionKeys != 0 {
		t.Fatalf("mailbox holds %d messages (%d duplicate keys), want %d once each", got, st.DuplicateActionKeys, n)
	}
	r = e.run("send", "--release", "big", "--destination", mb.Target(), "--concurrency", "6", "--as", "notice-bot", "--json")
	if r.code != 0 || r.stderr != "" || !strings.Contains(r.stdout, `"sent_this_run":0`) {
		t.Fatalf("re-run: exit %d, stderr %q, stdout %s", r.code, r.stderr, r.stdout)
	}
}

func TestProgressLineAndBar(t *testing.T) {
	s := ledger.SendProgress{Eligible: 1000, Done: 250, Sent: 240, Held: 6, Denied: 4, Elapsed: 500 * time.Millisecond}
	if got, want := progressLine(s), "250/1000 recipients, sent 240, held 6, denied 4, 500/s, ETA 2s"; got != want {
		t.Errorf("line %q, want %q", got, want)
	}
	if got := progressBar(s); !strings.HasPrefix(got, "[######..................] 250/1000") {
		t.Errorf("bar %q", got)
	}
	s.Done, s.Final = 1000, true
	if got := progressBar(s); !strings.HasPrefix(got, "[########################] 1000/1000") || !strings.HasSuffix(got, "ETA done") {
		t.Errorf("final bar %q", got)
	}
}

// TestAudienceSendWhileStoppedExits15: a concurrent send during a stop
// sends nothing and exits 15; after resume a send delivers each eligible
// recipient once.
func TestAudienceSendWhileStoppedExits15(t *testing.T) {
	ctx := context.Background()
	mb, err := testmailbox.Start(ctx, testmailbox.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer mb.Close()
	e := newAudienceEnv(t)
	e.view("reconcile", "--release", "spring", "--file", e.file, "--customers", e.custom, "--as", "ops", "--subject", "Opening hours change")
	e.view("approve", "--release", "spring", "--as", "lead", "--destination", mb.Target())
	gate := func(args ...string) result {
		var out, errOut bytes.Buffer
		code := run(append(append([]string{"gate"}, args...), "--ledger", e.ledger), &out, &errOut)
		return result{code: code, stdout: out.String(), stderr: errOut.String()}
	}
	if r := gate("stop", "--as", "ops", "--reason", "wrong opening hours"); r.code != 0 {
		t.Fatalf("stop: exit %d: %s", r.code, r.stderr)
	}
	wantExit(t, e.run("send", "--release", "spring", "--destination", mb.Target(), "--concurrency", "4", "--as", "notice-bot"),
		exitStopped, "execution stopped", "wrong opening hours")
	if n, _ := mb.Count(ctx, testmailbox.Filter{}); n != 0 {
		t.Fatalf("%d messages arrived during a stop", n)
	}
	if r := gate("resume", "--as", "ops", "--reason", "notice corrected"); r.code != 0 {
		t.Fatalf("resume: exit %d: %s", r.code, r.stderr)
	}
	v := e.view("send", "--release", "spring", "--destination", mb.Target(), "--concurrency", "4", "--as", "notice-bot")
	if n, _ := mb.Count(ctx, testmailbox.Filter{}); n != 3 || v.Confirmed != 3 {
		t.Fatalf("after resume: %d arrivals, %d confirmed; want 3", n, v.Confirmed)
	}
}

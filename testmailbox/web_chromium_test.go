package testmailbox

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// chromiumPath finds Debian's chromium. Without it the browser tests
// skip, saying so; under CI=true they fail instead, so a CI machine that
// lacks it cannot pass by skipping them (as the PostgreSQL tests decide,
// internal/pgtest). .ci/run installs it.
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("the headless Chromium tests cannot run: no chromium on PATH (apt-get install chromium)")
	}
	t.Skip("SKIPPING the headless Chromium tests: no chromium on PATH (install Debian's chromium package)")
	return ""
}

// chromiumArgs are the flags of a headless run as root in a container,
// which reaches nothing but the page it is given.
func chromiumArgs(t *testing.T, more ...string) []string {
	return append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir=" + t.TempDir()}, more...)
}

// domText is text as Chromium serializes a text node: &, < and > escaped.
func domText(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// TestWebPageInChromium: the list page as a browser builds it holds the
// hostile subject and action key as text, creates no element from them,
// and marks the duplicate.
func TestWebPageInChromium(t *testing.T) {
	bin := chromiumPath(t)
	m := start(t, Config{})
	mustSend(t, m, "ann@example.com", hostileMessage())
	mustSend(t, m, "ann@example.com", hostileMessage())

	// A loaded machine starts a browser slowly; this bounds a hung one.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, chromiumArgs(t, "--dump-dom", m.APIURL()+"/")...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium --dump-dom: %v\n%s", err, stderr.String())
	}
	dom := stdout.String()
	if !strings.Contains(dom, `<table id="messages"`) {
		t.Fatalf("the dumped DOM is not the list page:\n%s\nstderr: %s", dom, stderr.String())
	}
	for _, text := range []string{hostileSubject, hostileKey} {
		if !strings.Contains(dom, domText(text)) {
			t.Errorf("the DOM lacks %q as text", text)
		}
	}
	if n := strings.Count(dom, "<script"); n != 1 || !strings.Contains(dom, `<script src="/static/live.js"></script>`) {
		t.Errorf("the DOM has %d script elements; want only the page's own", n)
	}
	for _, tag := range []string{"<svg", "<img", "<b>"} {
		if strings.Contains(dom, tag) {
			t.Errorf("the DOM has a %s element made from message content", tag)
		}
	}
	if !strings.Contains(dom, `<tr id="m2" data-key=`) || !strings.Contains(dom, `class="dup"`) ||
		!strings.Contains(dom, `<td class="mark"><span class="duplicate">duplicate</span></td>`) {
		t.Errorf("the DOM does not mark message 2 as a duplicate:\n%s", dom)
	}
	if !strings.Contains(dom, "×2") {
		t.Errorf("the DOM does not count the key's 2 arrivals:\n%s", dom)
	}
}

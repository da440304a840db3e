package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"gatehouse/testmailbox"
)

// docBlock is one shell block of a markdown file.
type docBlock struct {
	file string
	line int // of the opening fence
	text string
	skip string // why it must not run ("" runs it)
}

// skipMarker, on the line before a block's fence, says why the block must
// not run in the docs test: `<!-- docs-test: skip REASON -->`.
var skipMarker = regexp.MustCompile(`^<!-- docs-test: skip (.+) -->$`)

// shellBlocks reads every ```sh block of a markdown file, in order.
func shellBlocks(t *testing.T, path string) []docBlock {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []docBlock
	var cur *docBlock
	prev := ""
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case cur == nil && (line == "```sh" || line == "```bash"):
			cur = &docBlock{file: path, line: n}
			if m := skipMarker.FindStringSubmatch(strings.TrimSpace(prev)); m != nil {
				cur.skip = m[1]
			}
		case cur != nil && line == "```":
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			cur.text += line + "\n"
		}
		prev = line
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// commands turns a block into what runs: a block written as a transcript
// ("$ command" then its output) runs only its commands.
func (b docBlock) commands() string {
	if !strings.Contains(b.text, "\n$ ") && !strings.HasPrefix(b.text, "$ ") {
		return b.text
	}
	var cmds []string
	for _, l := range strings.Split(b.text, "\n") {
		if c, ok := strings.CutPrefix(l, "$ "); ok {
			cmds = append(cmds, c)
		}
	}
	return strings.Join(cmds, "\n") + "\n"
}

// TestDocsCommandsRun runs every shell block of README.md and docs/*.md, in
// order, one shell per file, against a fresh directory, a built gatehouse on
// PATH and a test mailbox started for the file (the documented addresses
// 127.0.0.1:2525 and :8025 are rewritten to the mailbox's own, so no fixed
// port is used; so is the CA file the docs show as a placeholder). A block
// that must not run (the app, make test itself, a
// download) is marked on the line before its fence with
// `<!-- docs-test: skip REASON -->`. So the docs cannot drift from the
// binary.
func TestDocsCommandsRun(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs the docs")
	}
	bin := gatehouseBinary(t)
	files, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append([]string{"../../README.md"}, files...)
	sort.Strings(files[1:])
	ran := 0
	for _, file := range files {
		blocks := shellBlocks(t, file)
		var script strings.Builder
		var skipped []string
		for _, b := range blocks {
			if b.skip != "" {
				skipped = append(skipped, fmt.Sprintf("%s:%d (%s)", filepath.Base(file), b.line, b.skip))
				continue
			}
			fmt.Fprintf(&script, "echo '>>> %s:%d' >&2\n%s", filepath.Base(file), b.line, b.commands())
			ran++
		}
		if script.Len() == 0 {
			continue
		}
		t.Run(filepath.Base(file), func(t *testing.T) {
			runDocScript(t, bin, script.String())
			for _, s := range skipped {
				t.Logf("not run: %s", s)
			}
		})
	}
	if ran == 0 {
		t.Fatal("no documented command ran")
	}
}

func runDocScript(t *testing.T, bin, script string) {
	t.Helper()
	// As `gatehouse mailbox serve` runs it: STARTTLS offered with a
	// certificate made at start, whose CA file the docs show as a
	// placeholder path.
	mb, err := testmailbox.Start(context.Background(), testmailbox.Config{TLS: testmailbox.TLSOffer})
	if err != nil {
		t.Fatal(err)
	}
	defer mb.Close()
	script = strings.NewReplacer(
		"127.0.0.1:2525", mb.SMTPAddr(),
		"--port 2525", "--port "+mb.SMTPAddr()[strings.LastIndex(mb.SMTPAddr(), ":")+1:],
		"127.0.0.1:8025", strings.TrimPrefix(mb.APIURL(), "http://"),
		"/tmp/gatehouse-mailbox-…/mailbox-ca.pem", mb.CAFile(),
		"/tmp/gatehouse-mailbox-1234/mailbox-ca.pem", mb.CAFile(),
		"go run ./cmd/gatehouse", "gatehouse",
		"./gatehouse ", "gatehouse ",
	).Replace(script)
	dir := t.TempDir()
	binDir := filepath.Dir(bin)
	cmd := exec.Command("bash", "-e", "-o", "pipefail", "-c", script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PATH="+binDir+string(os.PathListSeparator)+os.Getenv("PATH"), "HOME="+dir,
		"GATEHOUSE_LEDGER=", "GATEHOUSE_MAILBOX_API=")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("documented commands failed: %v\n%s", err, tail(out.String(), 60))
	}
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

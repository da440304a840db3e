package testmailbox

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
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

// devtools drives one Chromium over --remote-debugging-pipe: commands go
// to its fd 3, replies and events come from its fd 4, each a JSON object
// ended by a NUL byte.
type devtools struct {
	w       io.Writer
	mu      sync.Mutex
	next    int
	waiting map[int]chan devtoolsMsg
	events  chan devtoolsMsg
}

type devtoolsMsg struct {
	ID        int             `json:"id"`
	Method    string          `json:"method"`
	SessionID string          `json:"sessionId"`
	Params    json.RawMessage `json:"params"`
	Result    json.RawMessage `json:"result"`
	Error     *struct {
		Message string `json:"message"`
	} `json:"error"`
}

// startDevtools runs headless Chromium with a pipe to drive it; it ends
// with the test.
func startDevtools(t *testing.T, ctx context.Context, bin string) *devtools {
	t.Helper()
	toChrome, commands, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	replies, fromChrome, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, chromiumArgs(t, "--remote-debugging-pipe", "about:blank")...)
	cmd.ExtraFiles = []*os.File{toChrome, fromChrome} // fd 3 and fd 4
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	toChrome.Close()
	fromChrome.Close()
	d := &devtools{w: commands, waiting: map[int]chan devtoolsMsg{}, events: make(chan devtoolsMsg, 256)}
	go d.read(replies)
	t.Cleanup(func() {
		commands.Close() // Chromium exits when its command pipe closes
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-ctx.Done():
			_ = cmd.Process.Kill()
			<-done
		}
		replies.Close()
		if t.Failed() {
			t.Logf("chromium stderr:\n%s", stderr.String())
		}
	})
	return d
}

func (d *devtools) read(r io.Reader) {
	br := bufio.NewReader(r)
	for {
		b, err := br.ReadBytes(0)
		if err != nil {
			close(d.events)
			return
		}
		var msg devtoolsMsg
		if json.Unmarshal(b[:len(b)-1], &msg) != nil {
			continue
		}
		if msg.ID == 0 {
			select {
			case d.events <- msg:
			default: // nobody waits for this many; drop
			}
			continue
		}
		d.mu.Lock()
		ch := d.waiting[msg.ID]
		delete(d.waiting, msg.ID)
		d.mu.Unlock()
		if ch != nil {
			ch <- msg
		}
	}
}

// call sends one command (to a page's session when session is not "")
// and waits for its reply.
func (d *devtools) call(ctx context.Context, session, method string, params any, result any) error {
	d.mu.Lock()
	d.next++
	id := d.next
	ch := make(chan devtoolsMsg, 1)
	d.waiting[id] = ch
	d.mu.Unlock()
	req := map[string]any{"id": id, "method": method, "params": params}
	if session != "" {
		req["sessionId"] = session
	}
	b, err := json.Marshal(req)
	if err != nil {
		return err
	}
	if _, err := d.w.Write(append(b, 0)); err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	select {
	case msg := <-ch:
		if msg.Error != nil {
			return fmt.Errorf("%s: %s", method, msg.Error.Message)
		}
		if result != nil {
			return json.Unmarshal(msg.Result, result)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%s: no reply: %w", method, ctx.Err())
	}
}

// event waits for an event of a session.
func (d *devtools) event(ctx context.Context, session, method string) error {
	for {
		select {
		case msg, ok := <-d.events:
			if !ok {
				return fmt.Errorf("chromium ended before %s", method)
			}
			if msg.Method == method && msg.SessionID == session {
				return nil
			}
		case <-ctx.Done():
			return fmt.Errorf("no %s: %w", method, ctx.Err())
		}
	}
}

// until evaluates a JavaScript condition in the page each time the DOM
// changes, and returns the JSON of result once the condition holds.
func (d *devtools) until(ctx context.Context, session, cond, result string) (string, error) {
	expr := `new Promise(resolve => {
		const done = () => { if (` + cond + `) { resolve(JSON.stringify(` + result + `)); return true; } return false; };
		if (!done()) new MutationObserver(done).observe(document, {subtree: true, childList: true, characterData: true});
	})`
	var reply struct {
		Result struct {
			Value string `json:"value"`
		} `json:"result"`
		ExceptionDetails *struct {
			Text string `json:"text"`
		} `json:"exceptionDetails"`
	}
	err := d.call(ctx, session, "Runtime.evaluate", map[string]any{"expression": expr, "awaitPromise": true, "returnByValue": true}, &reply)
	if err == nil && reply.ExceptionDetails != nil {
		err = fmt.Errorf("page script: %s", reply.ExceptionDetails.Text)
	}
	return reply.Result.Value, err
}

// TestWebPageFollowsArrivalsInChromium: with the list page open, a
// message stored later appears in it without a reload, its hostile
// subject as text, marked duplicate, the first arrival of its key counted
// again, and no element made from it.
func TestWebPageFollowsArrivalsInChromium(t *testing.T) {
	bin := chromiumPath(t)
	m := start(t, Config{})
	mustSend(t, m, "ann@example.com", hostileMessage())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	d := startDevtools(t, ctx, bin)

	var target struct {
		TargetID string `json:"targetId"`
	}
	if err := d.call(ctx, "", "Target.createTarget", map[string]any{"url": "about:blank"}, &target); err != nil {
		t.Fatal(err)
	}
	var attached struct {
		SessionID string `json:"sessionId"`
	}
	if err := d.call(ctx, "", "Target.attachToTarget", map[string]any{"targetId": target.TargetID, "flatten": true}, &attached); err != nil {
		t.Fatal(err)
	}
	s := attached.SessionID
	if err := d.call(ctx, s, "Page.enable", map[string]any{}, nil); err != nil {
		t.Fatal(err)
	}
	if err := d.call(ctx, s, "Page.navigate", map[string]any{"url": m.APIURL() + "/"}, nil); err != nil {
		t.Fatal(err)
	}
	if err := d.event(ctx, s, "Page.loadEventFired"); err != nil {
		t.Fatal(err)
	}
	if _, err := d.until(ctx, s, `document.getElementById("live").textContent.startsWith("Following")`, `true`); err != nil {
		t.Fatalf("the page's script never followed the stream: %v", err)
	}

	mustSend(t, m, "bea@example.com", hostileMessage())
	// The stream delivers within 2 s (TestEventsFollowNewArrivals); this
	// leaves a loaded machine's browser room to draw it.
	soon, cancelSoon := context.WithTimeout(ctx, 20*time.Second)
	defer cancelSoon()
	arrived, err := d.until(soon, s, `document.getElementById("m2") !== null`, `{
		first: document.querySelector("#messages tbody tr").id,
		subject: document.querySelector("#m2 td.subject").textContent,
		key: document.querySelector("#m2 td.key a").textContent,
		to: document.querySelector("#m2 td.to").textContent,
		duplicate: document.querySelector("#m2 td.mark").textContent,
		counts: [...document.querySelectorAll("#messages .count")].map(e => e.textContent),
		shown: document.getElementById("shown").textContent,
		total: document.getElementById("total").textContent,
		scripts: document.scripts.length,
		made: document.querySelectorAll("svg, img, b").length,
	}`)
	if err != nil {
		t.Fatalf("the new arrival never appeared: %v", err)
	}
	var got struct {
		First, Subject, Key, To, Duplicate, Shown, Total string
		Counts                                           []string
		Scripts, Made                                    int
	}
	if err := json.Unmarshal([]byte(arrived), &got); err != nil {
		t.Fatalf("%v: %s", err, arrived)
	}
	want := struct {
		First, Subject, Key, To, Duplicate, Shown, Total string
		Counts                                           []string
		Scripts, Made                                    int
	}{"m2", hostileSubject, hostileKey, "bea@example.com", "duplicate", "2", "2", []string{"×2", "×2"}, 1, 0}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("after the arrival the page shows\n%+v\nwant\n%+v", got, want)
	}
}

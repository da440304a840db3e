package testmailbox

import (
	"bufio"
	"context"
	"fmt"
	"html"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// Hostile content: every one would run or add an element if it reached
// the page as markup.
const (
	hostileSubject = `<script>alert("subject")</script>`
	hostileHeader  = `<img src=x onerror=alert("header")>`
	hostileBody    = `</pre><script>alert("body")</script><b>bold</b>`
	hostileKey     = `gh1:cust-ada:"><svg onload=alert("key")>`
)

// hostileMessage carries hostile text in its subject, an extra header
// field, its action key and its body.
func hostileMessage() string {
	return "From: shop@example.com\r\nTo: ann@example.com\r\nSubject: " + hostileSubject + "\r\n" +
		"X-Note: " + hostileHeader + "\r\nX-Gatehouse-Action-Key: " + hostileKey + "\r\n" +
		"Content-Type: text/html; charset=utf-8\r\n\r\n" + hostileBody + "\r\n"
}

func mustSend(t *testing.T, m *Mailbox, to, raw string) {
	t.Helper()
	if err := send(m.SMTPAddr(), []string{to}, raw); err != nil {
		t.Fatalf("send: %v", err)
	}
}

func getPage(t *testing.T, url string) (int, string, http.Header) {
	t.Helper()
	status, b, h := httpDoHeader(t, "GET", url, "")
	return status, string(b), h
}

// TestWebPageShowsHostileContentAsText: subjects, header fields, bodies
// and action keys are text on both pages, escaped, never markup.
func TestWebPageShowsHostileContentAsText(t *testing.T) {
	m := start(t, Config{})
	mustSend(t, m, "ann@example.com", hostileMessage())
	_, list, _ := getPage(t, m.APIURL()+"/")
	_, one, _ := getPage(t, m.APIURL()+"/messages/1")
	tests := []struct {
		name, page, text string
	}{
		{"ListSubject", list, hostileSubject},
		{"ListKey", list, hostileKey},
		{"MessageSubject", one, hostileSubject},
		{"MessageHeader", one, hostileHeader},
		{"MessageBody", one, hostileBody},
		{"MessageKey", one, hostileKey},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !strings.Contains(tt.page, html.EscapeString(tt.text)) {
				t.Errorf("the page lacks %q as escaped text:\n%s", tt.text, tt.page)
			}
			if strings.Contains(tt.page, tt.text) {
				t.Errorf("the page holds %q as markup", tt.text)
			}
		})
	}
	for name, page := range map[string]string{"list": list, "message": one} {
		if n := strings.Count(page, "<script"); n > 1 || (name == "message" && n > 0) {
			t.Errorf("the %s page has %d script elements; want only the page's own", name, n)
		}
		for _, tag := range []string{"<img", "<svg", "<b>"} {
			if strings.Contains(page, tag) {
				t.Errorf("the %s page has a %s element from the message", name, tag)
			}
		}
	}
	if !strings.Contains(one, "shown as its source, never rendered") {
		t.Errorf("the message page does not say its HTML body is shown as source:\n%s", one)
	}
}

// TestWebSecurityHeaders: the pages forbid every script but their own
// file; every other reply, the raw message included, is inert in a browser.
func TestWebSecurityHeaders(t *testing.T) {
	m := start(t, Config{})
	mustSend(t, m, "ann@example.com", hostileMessage())
	tests := []struct {
		path, csp, ctype string
	}{
		{"/", webCSP, "text/html"},
		{"/?action_key=nope", webCSP, "text/html"},
		{"/messages/1", webCSP, "text/html"},
		{"/messages/99", webCSP, "text/html"},
		{"/static/live.js", apiCSP, "text/javascript"},
		{"/static/mailbox.css", apiCSP, "text/css"},
		{"/api/v1/messages", apiCSP, "application/json"},
		{"/api/v1/messages/1/raw", apiCSP, "message/rfc822"},
		{"/nothing", apiCSP, "application/json"},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			_, _, h := getPage(t, m.APIURL()+tt.path)
			if got := h.Get("Content-Security-Policy"); got != tt.csp {
				t.Errorf("Content-Security-Policy %q, want %q", got, tt.csp)
			}
			if got := h.Get("X-Content-Type-Options"); got != "nosniff" {
				t.Errorf("X-Content-Type-Options %q, want nosniff", got)
			}
			if got := h.Get("Content-Type"); !strings.HasPrefix(got, tt.ctype) {
				t.Errorf("Content-Type %q, want %s", got, tt.ctype)
			}
		})
	}
	for _, must := range []string{"default-src 'none'", "script-src 'self'", "require-trusted-types-for 'script'"} {
		if !strings.Contains(webCSP, must) {
			t.Errorf("the pages' policy lacks %s: %s", must, webCSP)
		}
	}
	if strings.Contains(webCSP, "unsafe-inline") {
		t.Errorf("the pages' policy allows inline script or style: %s", webCSP)
	}
}

var rowRE = regexp.MustCompile(`(?s)<tr id="m(\d+)"[^>]*>(.*?)</tr>`)

// rows reads the list page's rows: id → the row's markup, and the ids in
// the order shown.
func rows(page string) (map[string]string, []string) {
	out := map[string]string{}
	var order []string
	for _, r := range rowRE.FindAllStringSubmatch(page, -1) {
		out[r[1]] = r[0]
		order = append(order, r[1])
	}
	return out, order
}

// TestWebListNewestFirstWithDuplicatesMarked: the newest arrival is first;
// a second arrival of an action key is marked duplicate, and every
// arrival of that key says how many there are; the filter is the API's.
func TestWebListNewestFirstWithDuplicatesMarked(t *testing.T) {
	m := start(t, Config{})
	mustSend(t, m, "ann@example.com", message("gh1:cust-ada:enq-1:reply", "first"))
	mustSend(t, m, "ben@example.com", message("gh1:cust-ben:enq-2:reply", "other"))
	mustSend(t, m, "ann@example.com", message("gh1:cust-ada:enq-1:reply", "again"))
	mustSend(t, m, "ann@example.com", message("", "no key"))
	_, page, _ := getPage(t, m.APIURL()+"/")
	byID, order := rows(page)
	if got := strings.Join(order, ","); got != "4,3,2,1" {
		t.Fatalf("rows in order %s, want 4,3,2,1 (newest first):\n%s", got, page)
	}
	tests := []struct {
		id        string
		duplicate bool
		count     string // "" for none
		has       []string
	}{
		{"1", false, "×2", []string{"first", "ann@example.com", "gh1:cust-ada:enq-1:reply"}},
		{"2", false, "", []string{"other", "ben@example.com"}},
		{"3", true, "×2", []string{"again"}},
		{"4", false, "", []string{"no key", "no action key"}},
	}
	for _, tt := range tests {
		t.Run("Row"+tt.id, func(t *testing.T) {
			row := byID[tt.id]
			if got := strings.Contains(row, `<span class="duplicate">duplicate</span>`); got != tt.duplicate {
				t.Errorf("duplicate mark %v, want %v:\n%s", got, tt.duplicate, row)
			}
			if tt.count != "" && !strings.Contains(row, tt.count) {
				t.Errorf("lacks %s:\n%s", tt.count, row)
			}
			if tt.count == "" && strings.Contains(row, `class="count"`) {
				t.Errorf("has an arrival count:\n%s", row)
			}
			for _, s := range tt.has {
				if !strings.Contains(row, s) {
					t.Errorf("lacks %q:\n%s", s, row)
				}
			}
		})
	}
	if !strings.Contains(page, `<span id="shown">4</span> shown of <span id="total">4</span>`) {
		t.Errorf("the page does not count 4 of 4:\n%s", page)
	}

	_, filtered, _ := getPage(t, m.APIURL()+"/?action_key=gh1:cust-ada:enq-1:reply&limit=1")
	_, order = rows(filtered)
	if got := strings.Join(order, ","); got != "3" {
		t.Errorf("filtered to the key, limit 1: rows %s, want the newest of its two, 3", got)
	}
	if !strings.Contains(filtered, `<span id="shown">1</span> shown of <span id="total">2</span> matching`) {
		t.Errorf("the filtered page does not count 1 of 2 matching:\n%s", filtered)
	}
}

// TestWebMessagePage: one message's envelope, header fields in order and
// its text, decoded from whatever form it came in.
func TestWebMessagePage(t *testing.T) {
	m := start(t, Config{})
	raw := "From: Shop <shop@example.com>\r\nTo: ann@example.com\r\nSubject: =?utf-8?q?Caf=C3=A9_refund?=\r\n" +
		"Message-ID: <abc@test>\r\nX-Gatehouse-Action-Key: gh1:cust-ada:refund-1:notice\r\nX-Gatehouse-Attempt: 2\r\n" +
		"MIME-Version: 1.0\r\nContent-Type: multipart/alternative; boundary=BB\r\n\r\n" +
		"--BB\r\nContent-Type: text/html\r\n\r\n<p>html part</p>\r\n" +
		"--BB\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\nYour caf=C3=A9 refund=\r\n is on its way.\r\n" +
		"--BB--\r\n"
	mustSend(t, m, "ann@example.com", raw)
	status, page, _ := getPage(t, m.APIURL()+"/messages/1")
	if status != http.StatusOK {
		t.Fatalf("status %d:\n%s", status, page)
	}
	for _, want := range []string{
		`<h1 class="subject">Café refund</h1>`,
		"<dt>action key</dt><dd>gh1:cust-ada:refund-1:notice</dd>",
		"<dt>attempt</dt><dd>2</dd>",
		"<dt>Message-ID</dt><dd>abc@test</dd>",
		"<dt>envelope to</dt><dd>ann@example.com</dd>",
		"<tr><th>From</th><td>Shop &lt;shop@example.com&gt;</td></tr>",
		"<tr><th>Subject</th><td>Café refund</td></tr>",
		"Your café refund is on its way.",
		"part 2 of a multipart/alternative body",
		`href="/api/v1/messages/1/raw"`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the message page lacks %q", want)
		}
	}
	if strings.Contains(page, "html part") {
		t.Error("the message page shows the HTML part, not the plain one")
	}
	if i, j := strings.Index(page, "<th>From</th>"), strings.Index(page, "<th>MIME-Version</th>"); i < 0 || j < i {
		t.Error("header fields are not in the order they came")
	}
}

// TestReadableMessage: the text a reader would read, from each form a
// body may take, with a note for what is not shown as it is.
func TestReadableMessage(t *testing.T) {
	tests := []struct {
		name, raw, text, note string
	}{
		{"Plain", "Subject: s\r\n\r\nhello\r\nthere\r\n", "hello\nthere\n", ""},
		{"Base64", "Content-Transfer-Encoding: base64\r\n\r\naGVsbG8g\r\nd29ybGQ=\r\n", "hello world", ""},
		{"QuotedPrintable", "Content-Transfer-Encoding: quoted-printable\r\n\r\na=3Db=\r\nc\r\n", "a=bc\n", ""},
		{"HTMLOnly", "Content-Type: text/html\r\n\r\n<p>x</p>", "<p>x</p>", "never rendered"},
		{"NestedMultipart", "Content-Type: multipart/mixed; boundary=A\r\n\r\n--A\r\nContent-Type: multipart/alternative; boundary=B\r\n\r\n" +
			"--B\r\nContent-Type: text/plain\r\n\r\ninner\r\n--B--\r\n--A--\r\n", "inner", "part 1 of a multipart/alternative body"},
		{"MultipartHTMLOnly", "Content-Type: multipart/alternative; boundary=B\r\n\r\n--B\r\nContent-Type: text/html\r\n\r\n<i>h</i>\r\n--B--\r\n", "<i>h</i>", "never rendered"},
		{"NotText", "Content-Type: image/png\r\n\r\n\x89PNG", "", "not text"},
		{"BadBase64", "Content-Transfer-Encoding: base64\r\n\r\n!!!\r\n", "!!!\n", "does not decode"},
		{"NoBody", "Subject: s\r\n", "", "no blank line"},
		{"OtherCharset", "Content-Type: text/plain; charset=iso-8859-1\r\n\r\ncaf\xe9", "caf\uFFFD", "charset iso-8859-1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, text, notes := readableMessage([]byte(tt.raw))
			if text != tt.text {
				t.Errorf("text %q, want %q", text, tt.text)
			}
			joined := strings.Join(notes, "; ")
			if tt.note == "" && joined != "" || !strings.Contains(joined, tt.note) {
				t.Errorf("notes %q, want %q", joined, tt.note)
			}
		})
	}
	fields, _, _ := readableMessage([]byte("Subject: a\r\n  folded\r\nX-B: =?utf-8?b?w6k=?=\r\nnot a field\r\n\r\n"))
	want := []headerField{{"Subject", "a  folded"}, {"X-B", "é"}, {"(not a field)", "not a field"}}
	if fmt.Sprint(fields) != fmt.Sprint(want) {
		t.Errorf("fields %v, want %v", fields, want)
	}
}

// TestWebPageErrors: a bad request to a page is answered with a page, in
// the API's words; nothing in web/ but the linked files is served.
func TestWebPageErrors(t *testing.T) {
	m := start(t, Config{})
	tests := []struct {
		method, path string
		status       int
		want         string
	}{
		{"GET", "/messages/abc", 400, "not a positive integer"},
		{"GET", "/messages/7", 404, "not found"},
		{"GET", "/?offset=3", 400, "the page shows the newest matches"},
		{"GET", "/?colour=red", 400, `parameter &#34;colour&#34;: unknown`},
		{"GET", "/?limit=5000", 400, `parameter &#34;limit&#34;`},
		{"GET", "/static/list.html", 404, "no such endpoint"},
		{"GET", "/static/", 404, "no such endpoint"},
		{"POST", "/", 405, "takes GET, HEAD"},
		{"GET", "/api/v1/events?limit=3", 400, "has no page"},
		{"GET", "/api/v1/events?colour=red", 400, "unknown"},
	}
	for _, tt := range tests {
		t.Run(tt.method+tt.path, func(t *testing.T) {
			status, b, _ := httpDoHeader(t, tt.method, m.APIURL()+tt.path, "")
			if status != tt.status || !strings.Contains(string(b), tt.want) {
				t.Errorf("%d %s, want %d and %q", status, b, tt.status, tt.want)
			}
		})
	}
}

// sseEvent is one Server-Sent Event as a client reads it.
type sseEvent struct{ id, event, data string }

// openEvents connects to the event stream and delivers its events on a
// channel until the test ends.
func openEvents(t *testing.T, url, lastEventID string) <-chan sseEvent {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("events: %d %s %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	ch := make(chan sseEvent, 64)
	go func() {
		defer resp.Body.Close()
		defer close(ch)
		sc := bufio.NewScanner(resp.Body)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev.event != "" {
					ch <- ev
				}
				ev = sseEvent{}
			case strings.HasPrefix(line, "id: "):
				ev.id = strings.TrimPrefix(line, "id: ")
			case strings.HasPrefix(line, "event: "):
				ev.event = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				ev.data = strings.TrimPrefix(line, "data: ")
			}
		}
	}()
	return ch
}

// nextEvent waits for the stream's next event, at most within.
func nextEvent(t *testing.T, ch <-chan sseEvent, within time.Duration) sseEvent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	select {
	case ev, ok := <-ch:
		if !ok {
			t.Fatal("the event stream ended")
		}
		return ev
	case <-ctx.Done():
		t.Fatalf("no event within %s", within)
	}
	return sseEvent{}
}

var eventsRE = regexp.MustCompile(`data-events="([^"]+)"`)

// TestEventsFollowNewArrivals: the stream the list page names delivers a
// message stored after the page was read within 2 s, and nothing the page
// already showed; a reconnect from its Last-Event-ID repeats nothing; a
// clear is said and the new epoch's arrivals follow.
func TestEventsFollowNewArrivals(t *testing.T) {
	m := start(t, Config{})
	mustSend(t, m, "ann@example.com", message("gh1:cust-ada:enq-1:reply", "before the page"))
	_, page, _ := getPage(t, m.APIURL()+"/")
	found := eventsRE.FindStringSubmatch(page)
	if found == nil {
		t.Fatalf("the page names no event stream:\n%s", page)
	}
	stream := m.APIURL() + html.UnescapeString(found[1])
	ch := openEvents(t, stream, "")

	mustSend(t, m, "ann@example.com", message("gh1:cust-ada:enq-1:reply", "after "+hostileSubject))
	ev := nextEvent(t, ch, 2*time.Second)
	if ev.event != "arrival" || !strings.HasSuffix(ev.id, "/2") {
		t.Fatalf("first event %+v, want the arrival of message 2 (id EPOCH/2)", ev)
	}
	for _, want := range []string{`"id":2`, `"duplicate":true`, `"key_arrivals":2`, `"subject":"after \u003cscript\u003e`} {
		if !strings.Contains(ev.data, want) {
			t.Errorf("arrival data lacks %s: %s", want, ev.data)
		}
	}

	// A client that reconnects with the last id it saw gets what came after.
	mustSend(t, m, "ben@example.com", message("gh1:cust-ben:enq-2:reply", "third"))
	if ev3 := nextEvent(t, ch, 2*time.Second); !strings.Contains(ev3.data, `"id":3`) {
		t.Fatalf("next event %+v, want message 3", ev3)
	}
	again := openEvents(t, stream, ev.id)
	if ev3 := nextEvent(t, again, 2*time.Second); !strings.Contains(ev3.data, `"id":3`) {
		t.Fatalf("after reconnecting from %s: %+v, want message 3 only", ev.id, ev3)
	}

	if _, err := m.Clear(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if c := nextEvent(t, ch, 2*time.Second); c.event != "cleared" {
		t.Fatalf("after a clear: %+v, want cleared", c)
	}
	mustSend(t, m, "ann@example.com", message("gh1:cust-ada:enq-1:reply", "new epoch"))
	ev = nextEvent(t, ch, 2*time.Second)
	if ev.event != "arrival" || !strings.HasSuffix(ev.id, "/1") || !strings.Contains(ev.data, `"duplicate":false`) {
		t.Fatalf("after the clear: %+v, want the new epoch's first arrival, not a duplicate", ev)
	}
}

// TestEventsEndWhenTheMailboxCloses: an open stream does not hold Close.
func TestEventsEndWhenTheMailboxCloses(t *testing.T) {
	m, err := Start(context.Background(), Config{})
	if err != nil {
		t.Fatal(err)
	}
	ch := openEvents(t, m.APIURL()+"/api/v1/events", "")
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-ctx.Done():
			t.Fatal("the stream outlived the mailbox")
		}
	}
}

// FuzzReadableMessage: whatever a sender wrote, the message page's reading
// of it ends, and every field and the text are valid UTF-8 for the
// template to escape.
func FuzzReadableMessage(f *testing.F) {
	f.Add([]byte(hostileMessage()))
	f.Add([]byte("Content-Type: multipart/mixed; boundary=A\r\n\r\n--A\r\nContent-Type: multipart/alternative; boundary=A\r\n\r\n--A--\r\n"))
	f.Add([]byte("Content-Transfer-Encoding: quoted-printable\r\n\r\n=ZZ=\r\n"))
	f.Add([]byte("Subject: =?utf-8?b?////?=\r\n\r\n\xff\xfe"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		fields, text, notes := readableMessage(raw)
		for _, fl := range fields {
			if !utf8.ValidString(fl.Name) || !utf8.ValidString(fl.Value) {
				t.Fatalf("field %q: %q is not valid UTF-8", fl.Name, fl.Value)
			}
		}
		if !utf8.ValidString(text) {
			t.Fatalf("text %q is not valid UTF-8", text)
		}
		for _, n := range notes {
			if !utf8.ValidString(n) {
				t.Fatalf("note %q is not valid UTF-8", n)
			}
		}
	})
}

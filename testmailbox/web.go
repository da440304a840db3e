package testmailbox

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The web page: a read-only view of what arrived, for people, next to the
// JSON API for programs. It reads through the API's own queries (the
// store's snapshot, Get and count), so the page and the API cannot
// disagree about what arrived or which arrival is a duplicate.
//
//	GET /                 the newest messages, with the API's filters (to, action_key, message_id, limit)
//	GET /messages/{id}    one message: envelope, header fields and text
//	GET /static/{file}    the page's style sheet and its one script
//	GET /api/v1/events    Server-Sent Events: each new arrival as it is stored

//go:embed web
var webFiles embed.FS

// webStatic serves the files the pages link; nothing else in web/ is
// reachable, the templates included.
var webStatic = map[string]string{
	"mailbox.css": "text/css; charset=utf-8",
	"live.js":     "text/javascript; charset=utf-8",
}

var webTemplates = template.Must(template.New("").Funcs(template.FuncMap{
	"join": strings.Join,
}).ParseFS(webFiles, "web/*.html"))

// webCSP is the pages' Content-Security-Policy: the mailbox's own style
// sheet and script and nothing else (no inline script, so markup smuggled
// into a subject could not run even if it escaped; no HTML sinks in
// script, by Trusted Types), its own event stream, no frames, no forms but
// the filter's.
const webCSP = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; " +
	"form-action 'self'; base-uri 'none'; frame-ancestors 'none'; require-trusted-types-for 'script'"

// apiCSP is every other reply's: a JSON answer or a raw message opened in
// a browser is inert.
const apiCSP = "default-src 'none'; frame-ancestors 'none'; sandbox"

// securityHeaders go on every reply before the handler runs; the pages
// replace the Content-Security-Policy with webCSP.
func securityHeaders(h http.Header) {
	h.Set("Content-Security-Policy", apiCSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
}

// Arrival is one message as the page and the event stream show it: the
// API's Message and how many stored messages carry its action key now (0
// without a key), so the first arrival of a key sent twice is marked too.
type Arrival struct {
	Message
	KeyArrivals int `json:"key_arrivals"`
}

// webRow is an Arrival with its time written for a reader, on the
// mailbox's local clock.
type webRow struct {
	Arrival
	Clock, Stamp, ISO string
}

func newWebRow(a Arrival) webRow {
	at := a.ReceivedAt.Local()
	return webRow{Arrival: a, Clock: at.Format("15:04:05.000"), Stamp: at.Format("2006-01-02 15:04:05.000 -0700"),
		ISO: a.ReceivedAt.Format(time.RFC3339Nano)}
}

// arrivals adds each message's count of its action key, counted once per key.
func (m *Mailbox) arrivals(r *http.Request, msgs []Message) ([]Arrival, error) {
	counts := map[string]int{}
	out := make([]Arrival, 0, len(msgs))
	for _, msg := range msgs {
		a := Arrival{Message: msg}
		if msg.ActionKey != "" {
			n, ok := counts[msg.ActionKey]
			if !ok {
				var err error
				if n, err = m.store.count(r.Context(), Filter{ActionKey: msg.ActionKey}); err != nil {
					return nil, err
				}
				counts[msg.ActionKey] = n
			}
			a.KeyArrivals = n
		}
		out = append(out, a)
	}
	return out, nil
}

type listPage struct {
	Filter   Filter
	Filtered string // the filter in words, "" for every message
	Rows     []webRow
	Total    int
	Events   string // the event stream that continues this page
}

func (m *Mailbox) handlePage(w http.ResponseWriter, r *http.Request) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		webError(w, http.StatusBadRequest, "query: "+err.Error())
		return
	}
	if q.Has("offset") {
		webError(w, http.StatusBadRequest, `parameter "offset": the page shows the newest matches; page through older ones with the API (GET /api/v1/messages, oldest first)`)
		return
	}
	// Empty fields of the filter form mean "any".
	for name, vals := range q {
		if len(vals) == 1 && vals[0] == "" {
			q.Del(name)
		}
	}
	f, err := parseFilter(q)
	if err != nil {
		webError(w, http.StatusBadRequest, err.Error())
		return
	}
	epoch, total, msgs, seen, err := m.newest(r, f)
	if err != nil {
		webError(w, http.StatusInternalServerError, err.Error())
		return
	}
	arr, err := m.arrivals(r, msgs)
	if err != nil {
		webError(w, http.StatusInternalServerError, err.Error())
		return
	}
	page := listPage{Filter: f, Filtered: filterWords(f), Total: total}
	for _, a := range arr {
		page.Rows = append(page.Rows, newWebRow(a))
	}
	ev := url.Values{"epoch": {epoch}, "offset": {strconv.Itoa(seen)}}
	for name, v := range map[string]string{"to": f.To, "action_key": f.ActionKey, "message_id": f.MessageID} {
		if v != "" {
			ev.Set(name, v)
		}
	}
	page.Events = "/api/v1/events?" + ev.Encode()
	renderPage(w, http.StatusOK, "list", page)
}

// newest reads the f.Limit newest matches of f, newest first, with the
// epoch and total they were read under, and seen: how many of the oldest
// matches the page accounts for, which is where its event stream goes on.
// The API lists oldest first, so this counts, then reads the last page;
// when an arrival slips between the two, seen stops short of it and the
// stream delivers it; when a clear does, it reads again.
func (m *Mailbox) newest(r *http.Request, f Filter) (epoch string, total int, msgs []Message, seen int, err error) {
	for range 3 {
		var before string
		if before, total, _, err = m.store.snapshot(r.Context(), f, true); err != nil {
			return "", 0, nil, 0, err
		}
		page := f
		page.Offset = max(total-f.Limit, 0)
		if epoch, total, msgs, err = m.store.snapshot(r.Context(), page, f.Limit == 0); err != nil {
			return "", 0, nil, 0, err
		}
		if epoch == before {
			slices.Reverse(msgs)
			return epoch, total, msgs, page.Offset + len(msgs), nil
		}
	}
	return "", 0, nil, 0, errors.New("the mailbox was cleared three times while the page was read; reload")
}

// filterWords says what a filter selects, for the page's heading.
func filterWords(f Filter) string {
	var parts []string
	if f.ActionKey != "" {
		parts = append(parts, "action key "+f.ActionKey)
	}
	if f.To != "" {
		parts = append(parts, "to "+f.To)
	}
	if f.MessageID != "" {
		parts = append(parts, "Message-ID "+f.MessageID)
	}
	return strings.Join(parts, ", ")
}

type messagePage struct {
	webRow
	Headers []headerField
	Text    string
	Notes   []string
}

func (m *Mailbox) handleMessagePage(w http.ResponseWriter, r *http.Request) {
	idText := r.PathValue("id")
	id, err := strconv.ParseInt(idText, 10, 64)
	if err != nil || id <= 0 {
		webError(w, http.StatusBadRequest, fmt.Sprintf("message id %q is not a positive integer", idText))
		return
	}
	msg, err := m.Get(r.Context(), id)
	if errors.Is(err, ErrNotFound) {
		webError(w, http.StatusNotFound, err.Error())
		return
	}
	if err != nil {
		webError(w, http.StatusInternalServerError, err.Error())
		return
	}
	arr, err := m.arrivals(r, []Message{msg})
	if err != nil {
		webError(w, http.StatusInternalServerError, err.Error())
		return
	}
	page := messagePage{webRow: newWebRow(arr[0])}
	page.Headers, page.Text, page.Notes = readableMessage(msg.Raw)
	renderPage(w, http.StatusOK, "message", page)
}

func handleStatic(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("file")
	ctype, ok := webStatic[name]
	if !ok {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no such endpoint: %s %s", r.Method, r.URL.Path))
		return
	}
	b, err := fs.ReadFile(webFiles, "web/"+name)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	w.Header().Set("Content-Type", ctype)
	w.Header().Set("Cache-Control", "no-cache")
	_, _ = w.Write(b)
}

// renderPage executes a template into memory first, so a template error
// is a clean 500 rather than half a page.
func renderPage(w http.ResponseWriter, status int, name string, data any) {
	var b bytes.Buffer
	if err := webTemplates.ExecuteTemplate(&b, name, data); err != nil {
		writeError(w, http.StatusInternalServerError, "render "+name+": "+err.Error())
		return
	}
	w.Header().Set("Content-Security-Policy", webCSP)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes())
}

func webError(w http.ResponseWriter, status int, msg string) {
	renderPage(w, status, "error", struct {
		Status string
		Error  string
	}{fmt.Sprintf("%d %s", status, http.StatusText(status)), msg})
}

// handleEvents streams arrivals as Server-Sent Events: one "arrival" event
// per stored message matching the filter (the Arrival as JSON), from the
// offset-th oldest match on, then each new one as it is stored. An event's
// id is EPOCH/OFFSET, OFFSET counting the matches up to it, so a client
// that reconnects (Last-Event-ID) misses nothing and repeats nothing. When
// the store's epoch is not the one the client knew (the mailbox was
// cleared, or restarted in memory), a "cleared" event says so and the
// stream starts again from the new epoch's first message.
func (m *Mailbox) handleEvents(w http.ResponseWriter, r *http.Request) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		writeError(w, http.StatusBadRequest, "query: "+err.Error())
		return
	}
	epoch := q.Get("epoch")
	q.Del("epoch")
	if q.Has("limit") {
		writeError(w, http.StatusBadRequest, `parameter "limit": the event stream has no page; give offset, to, action_key, message_id, epoch`)
		return
	}
	f, err := parseFilter(q)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error()+" or epoch")
		return
	}
	if last := r.Header.Get("Last-Event-ID"); last != "" {
		ep, off, ok := strings.Cut(last, "/")
		n, err := strconv.Atoi(off)
		if !ok || err != nil || n < 0 {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("Last-Event-ID %q is not EPOCH/OFFSET", last))
			return
		}
		epoch, f.Offset = ep, n
	}
	f.Limit = MaxPageLimit // one read's worth; the loop reads on
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	// A first line, so the client knows the stream is open before anything arrives.
	if _, err := fmt.Fprint(w, ": following arrivals\n\n"); err != nil || rc.Flush() != nil {
		return
	}
	for {
		changed := m.store.changes()
		ep, _, msgs, err := m.store.snapshot(r.Context(), f, false)
		if err == nil && epoch != "" && ep != epoch {
			f.Offset, epoch = 0, ep
			err = writeEvent(w, "", "cleared", map[string]string{"epoch": ep})
			if err == nil {
				err = rc.Flush()
			}
			if err != nil {
				return
			}
			continue
		}
		var arr []Arrival
		if err == nil {
			arr, err = m.arrivals(r, msgs)
		}
		if err != nil {
			if r.Context().Err() == nil {
				_ = writeEvent(w, "", "error", ErrorResponse{Error: err.Error()})
			}
			return
		}
		epoch = ep
		for _, a := range arr {
			f.Offset++
			if err := writeEvent(w, fmt.Sprintf("%s/%d", epoch, f.Offset), "arrival", a); err != nil {
				return
			}
		}
		if err := rc.Flush(); err != nil {
			return
		}
		if len(msgs) == f.Limit {
			continue // more were stored than one read takes
		}
		select {
		case <-changed:
		case <-r.Context().Done():
			return
		case <-m.closing:
			return
		}
	}
}

// writeEvent writes one Server-Sent Event; JSON has no raw line breaks,
// so data is one line.
func writeEvent(w http.ResponseWriter, id, event string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if id != "" {
		if _, err := fmt.Fprintf(w, "id: %s\n", id); err != nil {
			return err
		}
	}
	_, err = fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, data)
	return err
}

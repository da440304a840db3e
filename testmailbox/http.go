package testmailbox

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"strconv"
	"strings"
)

// HTTP API paging bounds.
const (
	DefaultPageLimit = 50
	MaxPageLimit     = 1000
)

// MessagesResponse is the body of GET /api/v1/messages. Total counts every
// match regardless of limit and offset. Epoch names the life of the store
// the answer was read from (see Mailbox.Epoch): an answer under another
// epoch than the one a sender recorded says nothing about its message.
type MessagesResponse struct {
	Epoch    string    `json:"epoch"`
	Total    int       `json:"total"`
	Messages []Message `json:"messages"`
}

// FaultsRequest is the body of PUT /api/v1/faults: the new set of faults,
// given as objects, as spec strings (see ParseFault), or both (objects first).
type FaultsRequest struct {
	Faults []Fault  `json:"faults"`
	Specs  []string `json:"specs,omitempty"`
}

// FaultsResponse is the body of GET and PUT /api/v1/faults.
type FaultsResponse struct {
	Faults []FaultStatus `json:"faults"`
	Down   bool          `json:"down"`
}

// ErrorResponse is the body of every error reply.
type ErrorResponse struct {
	Error string `json:"error"`
}

// Handler serves the JSON HTTP API:
//
//	GET    /api/v1/messages?to=&action_key=&message_id=&limit=&offset=  → MessagesResponse
//	DELETE /api/v1/messages                                              → {"deleted":N}
//	GET    /api/v1/messages/{id}                                         → Message
//	GET    /api/v1/messages/{id}/raw                                     → message/rfc822
//	GET    /api/v1/stats                                                 → Stats
//	GET    /api/v1/faults                                                → FaultsResponse
//	PUT    /api/v1/faults   (FaultsRequest)                              → FaultsResponse
//	DELETE /api/v1/faults                                                → FaultsResponse
//	DELETE /api/v1/holds                                                 → {"ended":N}
//	GET    /api/v1/events?to=&action_key=&message_id=&offset=&epoch=     → text/event-stream of Arrival
//	GET    /  and  /messages/{id}                                        → the read-only web page (web.go)
//
// Bad parameters and bodies get 400, unknown ids and paths 404, a method a
// path does not take 405 with an Allow header, each with an ErrorResponse
// body in the API's own words (the web page's are pages). Before anything
// else, a request whose Host is not one of the mailbox's names gets 421
// (see hostnames.go: DNS rebinding). When the mailbox has an API token, a PUT or
// DELETE without it gets 401 before anything else is looked at. CORS is
// closed: no reply carries Access-Control-Allow-* headers, so a browser
// page elsewhere can neither read replies nor pass a preflight, and a
// request a browser marks as coming from another origin gets 403. Unknown query parameters and body fields are
// refused rather than ignored, so a misspelt filter cannot silently count
// everything. docs/mailbox.md documents every request with examples.
func (m *Mailbox) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v1/messages", m.handleList)
	mux.HandleFunc("DELETE /api/v1/messages", m.handleClear)
	mux.HandleFunc("GET /api/v1/messages/{id}", m.handleGet)
	mux.HandleFunc("GET /api/v1/messages/{id}/raw", m.handleRaw)
	mux.HandleFunc("GET /api/v1/stats", m.handleStats)
	mux.HandleFunc("GET /api/v1/faults", m.handleFaults)
	mux.HandleFunc("PUT /api/v1/faults", m.handleSetFaults)
	mux.HandleFunc("DELETE /api/v1/faults", m.handleClearFaults)
	mux.HandleFunc("DELETE /api/v1/holds", m.handleEndHolds)
	mux.HandleFunc("GET /api/v1/events", m.handleEvents)
	mux.HandleFunc("GET /{$}", m.handlePage)
	mux.HandleFunc("GET /messages/{id}", m.handleMessagePage)
	mux.HandleFunc("GET /static/{file}", handleStatic)
	names := m.ownNames()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		securityHeaders(w.Header())
		if !names.allows(r.Host) {
			misdirected(w, r, names)
			return
		}
		if origin := r.Header.Get("Origin"); origin != "" && !sameOrigin(origin, r.Host) {
			writeError(w, http.StatusForbidden, fmt.Sprintf("requests from web pages of another origin (%s) are refused", origin))
			return
		}
		if !m.authorized(r) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="gatehouse mailbox"`)
			writeError(w, http.StatusUnauthorized, fmt.Sprintf("%s %s changes the mailbox and needs its API token: Authorization: Bearer TOKEN", r.Method, r.URL.Path))
			return
		}
		if _, pattern := mux.Handler(r); pattern != "" {
			mux.ServeHTTP(w, r)
			return
		}
		if allow := allowed(mux, r); len(allow) > 0 {
			w.Header().Set("Allow", strings.Join(allow, ", "))
			writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("%s takes %s, not %s", r.URL.Path, strings.Join(allow, ", "), r.Method))
			return
		}
		writeError(w, http.StatusNotFound, fmt.Sprintf("no such endpoint: %s %s", r.Method, r.URL.Path))
	})
}

// authorized reports whether r may proceed: reads always, anything else
// only with the token when the mailbox has one. The comparison takes the
// same time whatever the guess.
func (m *Mailbox) authorized(r *http.Request) bool {
	if m.cfg.APIToken == "" || r.Method == http.MethodGet || r.Method == http.MethodHead {
		return true
	}
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return ok && subtle.ConstantTimeCompare([]byte(strings.TrimSpace(got)), []byte(m.cfg.APIToken)) == 1
}

// misdirected answers a request addressed to a name that is not the
// mailbox's (421, RFC 9110 §15.5.20): a page that rebound its own name to
// this address, or a proxy that forwards a name nobody told the mailbox.
// The web page's routes get a page, the rest the API's JSON.
func misdirected(w http.ResponseWriter, r *http.Request, names hostNames) {
	msg := fmt.Sprintf("this mailbox answers only to its own names (%s), not Host %q; a name it is reached by legitimately is given with --http-name", names, r.Host)
	if strings.HasPrefix(r.URL.Path, "/api/") {
		writeError(w, http.StatusMisdirectedRequest, msg)
		return
	}
	webError(w, http.StatusMisdirectedRequest, msg)
}

// sameOrigin reports whether a browser's Origin header names the host the
// request was sent to (the mailbox's own web page).
func sameOrigin(origin, host string) bool {
	u, err := url.Parse(origin)
	return err == nil && u.Host != "" && strings.EqualFold(u.Host, host)
}

// allowed lists the methods mux serves r's path with.
func allowed(mux *http.ServeMux, r *http.Request) []string {
	var out []string
	for _, method := range []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		probe := r.Clone(r.Context())
		probe.Method = method
		if _, pattern := mux.Handler(probe); pattern != "" {
			out = append(out, method)
		}
	}
	return out
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v) // the client may have gone; nothing to do
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, ErrorResponse{Error: msg})
}

// parseFilter reads the query of GET /api/v1/messages.
func parseFilter(q url.Values) (Filter, error) {
	f := Filter{Limit: DefaultPageLimit}
	for name, vals := range q {
		if len(vals) != 1 {
			return Filter{}, fmt.Errorf("parameter %q: given %d times", name, len(vals))
		}
		v := vals[0]
		switch name {
		case "to":
			f.To = v
		case "action_key":
			f.ActionKey = v
		case "message_id":
			f.MessageID = v
		case "limit":
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 || n > MaxPageLimit {
				return Filter{}, fmt.Errorf("parameter \"limit\": %q is not an integer from 0 to %d", v, MaxPageLimit)
			}
			f.Limit = n
		case "offset":
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return Filter{}, fmt.Errorf("parameter \"offset\": %q is not a non-negative integer", v)
			}
			f.Offset = n
		default:
			return Filter{}, fmt.Errorf("parameter %q: unknown (want to, action_key, message_id, limit, offset)", name)
		}
	}
	return f, nil
}

func (m *Mailbox) handleList(w http.ResponseWriter, r *http.Request) {
	// url.Values from r.URL.Query() silently drops a pair it cannot decode,
	// which would turn "messages with key K" into "all messages".
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		writeError(w, http.StatusBadRequest, "query: "+err.Error())
		return
	}
	f, err := parseFilter(q)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	var resp MessagesResponse
	// limit=0 asks for the count alone.
	resp.Epoch, resp.Total, resp.Messages, err = m.store.snapshot(r.Context(), f, f.Limit == 0)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, resp)
}

func (m *Mailbox) handleClear(w http.ResponseWriter, r *http.Request) {
	n, err := m.Clear(r.Context())
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, map[string]int{"deleted": n})
}

// lookup resolves the {id} path value to a message, answering errors itself.
func (m *Mailbox) lookup(w http.ResponseWriter, r *http.Request) (Message, bool) {
	idText := r.PathValue("id")
	id, err := strconv.ParseInt(idText, 10, 64)
	if err != nil || id <= 0 {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("message id %q is not a positive integer", idText))
		return Message{}, false
	}
	msg, err := m.Get(r.Context(), id)
	if errors.Is(err, ErrNotFound) {
		writeError(w, http.StatusNotFound, err.Error())
		return Message{}, false
	}
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return Message{}, false
	}
	return msg, true
}

func (m *Mailbox) handleGet(w http.ResponseWriter, r *http.Request) {
	if msg, ok := m.lookup(w, r); ok {
		writeJSON(w, http.StatusOK, msg)
	}
}

func (m *Mailbox) handleRaw(w http.ResponseWriter, r *http.Request) {
	msg, ok := m.lookup(w, r)
	if !ok {
		return
	}
	w.Header().Set("Content-Type", "message/rfc822")
	w.Header().Set("Content-Length", strconv.Itoa(len(msg.Raw)))
	_, _ = w.Write(msg.Raw)
}

func (m *Mailbox) handleStats(w http.ResponseWriter, r *http.Request) {
	st, err := m.Stats(r.Context())
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, st)
}

func (m *Mailbox) faultsResponse() FaultsResponse {
	return FaultsResponse{Faults: m.Faults(), Down: !m.ln.isUp()}
}

func (m *Mailbox) handleFaults(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, m.faultsResponse())
}

func (m *Mailbox) handleSetFaults(w http.ResponseWriter, r *http.Request) {
	var req FaultsRequest
	dec := json.NewDecoder(io.LimitReader(r.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "fault request: "+bodyProblem(err))
		return
	}
	if dec.More() {
		writeError(w, http.StatusBadRequest, "fault request: "+faultsBodyHint+"; send one object, nothing after it")
		return
	}
	faults := req.Faults
	for _, s := range req.Specs {
		f, err := ParseFault(s)
		if err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		faults = append(faults, f)
	}
	for _, f := range faults {
		if err := f.Validate(); err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
	}
	if err := m.SetFaults(faults); err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, m.faultsResponse())
}

// faultsBodyHint is the shape of a PUT /api/v1/faults body.
const faultsBodyHint = `want {"specs": ["down=5s"]} or {"faults": [{"kind": "delay_reply", "duration": "3s"}]}`

// bodyProblem words a JSON decoding error in the API's terms: where the
// body is wrong and what it should hold, never a Go type name.
func bodyProblem(err error) string {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.Is(err, io.EOF):
		return "the body is empty; " + faultsBodyHint
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "the body ends before its JSON does; " + faultsBodyHint
	case errors.As(err, &syn):
		return fmt.Sprintf("the body is not JSON (at byte %d); %s", syn.Offset, faultsBodyHint)
	case errors.As(err, &typ):
		where := "the body"
		if typ.Field != "" {
			where = fmt.Sprintf("field %q", typ.Field)
		}
		return fmt.Sprintf("%s must be %s, not a JSON %s; %s", where, jsonKind(typ.Type), typ.Value, faultsBodyHint)
	}
	msg := err.Error()
	if f, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
		return "unknown field " + f + " (want faults, specs); " + faultsBodyHint
	}
	if i := strings.Index(msg, "json: unknown field "); i >= 0 { // inside a fault object
		return strings.Replace(msg[:i], "fault: ", "", 1) + "unknown field " + strings.TrimPrefix(msg[i:], "json: unknown field ") +
			" in a fault (want kind, duration, count, to, p, seed)"
	}
	return strings.ReplaceAll(msg, "json: ", "")
}

// jsonKind names the JSON a Go type is read from.
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	}
	return "another kind of value"
}

func (m *Mailbox) handleEndHolds(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]int{"ended": m.EndHolds()})
}

func (m *Mailbox) handleClearFaults(w http.ResponseWriter, _ *http.Request) {
	if err := m.ClearFaults(); err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, m.faultsResponse())
}

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"gatehouse/destination"
	"gatehouse/ledger"
)

// requestFlags are what makes a proposal an HTTP request: a request file
// of the documented shape, or --method and --path with the body from
// --body-file (and --header for the headers that carry meaning).
type requestFlags struct {
	file, method, path string
	headers            []string
}

func (r *requestFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&r.file, "request-file", "", `the action is this HTTP request: {"method", "path", "headers", "body"} (PATH, or - for stdin)`)
	fs.StringVar(&r.method, "method", "", "the action is an HTTP request with this method (POST, PUT, PATCH, DELETE); its JSON body from --body-file")
	fs.StringVar(&r.path, "path", "", "the HTTP request's path at the destination, e.g. /v1/refunds (with --method)")
	fs.StringArrayVar(&r.headers, "header", nil, "a header of the HTTP request that carries meaning, Name: value (repeatable; with --method)")
}

// given reports whether the proposal is an HTTP request.
func (r *requestFlags) given() bool { return r.file != "" || r.method != "" }

// canonical reads the request the flags name and returns its canonical
// form; body is what --body or --body-file read (the request's body with
// --method). A request file leaves no room for --body, --subject or --to's
// message meaning.
func (r *requestFlags) canonical(stdin io.Reader, c contentFlags, body string) (string, error) {
	var req destination.Request
	switch {
	case r.file != "" && (r.method != "" || r.path != "" || len(r.headers) > 0 || body != ""):
		return "", usageErr("gate propose: --request-file holds method, path, headers and body; give it alone")
	case r.file != "":
		src := stdin
		if r.file != "-" {
			f, err := os.Open(r.file)
			if err != nil {
				return "", usageErr("gate propose: --request-file: %v", err)
			}
			defer f.Close()
			src = f
		}
		data, err := io.ReadAll(io.LimitReader(src, ledger.MaxBodyBytes+1))
		if err != nil {
			return "", fmt.Errorf("read request: %w", err)
		}
		if len(data) > ledger.MaxBodyBytes {
			return "", usageErr("gate propose: --request-file %s is over the limit of %d bytes", r.file, ledger.MaxBodyBytes)
		}
		if req, err = destination.ParseRequest(data); err != nil {
			return "", usageErr("gate propose: %v", err)
		}
	default:
		req = destination.Request{Method: r.method, Path: r.path, Body: json.RawMessage(body)}
		for _, h := range r.headers {
			name, value, ok := strings.Cut(h, ":")
			if !ok {
				return "", usageErr("gate propose: --header %q: want Name: value", h)
			}
			if req.Headers == nil {
				req.Headers = map[string]string{}
			}
			req.Headers[strings.TrimSpace(name)] = strings.TrimSpace(value)
		}
	}
	if c.subject != "" {
		return "", usageErr("gate propose: an HTTP request has no --subject")
	}
	canon, err := req.Canonical()
	if err != nil {
		return "", usageErr("gate propose: %v", err)
	}
	return canon, nil
}

// requestView is an action's HTTP request as the provider will receive
// it, for the approval surface: not prose, the write.
type requestView struct {
	Method  string            `json:"method"`
	Path    string            `json:"path"`
	Headers map[string]string `json:"headers,omitempty"`
	Body    json.RawMessage   `json:"body,omitempty"`
}

func newRequestView(canonical string) *requestView {
	if canonical == "" {
		return nil
	}
	r, err := destination.ParseCanonical(canonical)
	if err != nil {
		return &requestView{Method: "?", Path: canonical}
	}
	return &requestView{Method: r.Method, Path: r.Path, Headers: r.Headers, Body: r.Body}
}

// text shows the write: its request line, headers and body, indented
// JSON, a line each, under the action's other rows.
func (r *requestView) text(w io.Writer) {
	fmt.Fprintf(w, "request:\t%s %s\n", r.Method, r.Path)
	for _, name := range slices.Sorted(maps.Keys(r.Headers)) {
		fmt.Fprintf(w, "  %s: %s\n", name, r.Headers[name])
	}
	var pretty bytes.Buffer
	if json.Indent(&pretty, r.Body, "  ", "  ") == nil {
		fmt.Fprintf(w, "  %s\n", pretty.String())
	} else if len(r.Body) > 0 {
		fmt.Fprintf(w, "  %s\n", r.Body)
	}
}

// writeWire shows the bytes an HTTP attempt handed over, indented under
// its attempt line.
func writeWire(w io.Writer, wire string) {
	for _, line := range strings.Split(strings.ReplaceAll(wire, "\r\n", "\n"), "\n") {
		fmt.Fprintf(w, "    | %s\n", line)
	}
}

package destination

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/textproto"
	"slices"
	"strconv"
	"strings"
)

// Request is an action that is an HTTP request: the write a provider will
// receive, as a person approves it. Path is relative to the destination's
// identity (https://host:port); Headers are only those that carry meaning
// to the provider (an API version, an account), never the ones the gate
// sets itself (Host, Content-Length, Content-Type, the duplicate control's
// key header); Body is JSON.
//
// The documented request file of `gate propose --request-file` has this
// shape: {"method": "POST", "path": "/v1/refunds", "headers": {…}, "body": {…}}.
type Request struct {
	Method  string            `json:"method"`
	Path    string            `json:"path"`
	Headers map[string]string `json:"headers,omitempty"`
	Body    json.RawMessage   `json:"body,omitempty"`
}

// gateHeaders are the header fields the gate writes itself: a request file
// naming one is refused, since what it would mean is decided elsewhere.
var gateHeaders = map[string]bool{"Host": true, "Content-Length": true, "Content-Type": true, "Connection": true,
	"Transfer-Encoding": true, "Te": true, "Trailer": true, "Upgrade": true, "Expect": true, "Keep-Alive": true}

// ParseRequest reads a request file. Unknown fields are refused: a typo in
// "heaers" must not send a request without the headers a person meant.
func ParseRequest(data []byte) (Request, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var r Request
	if err := dec.Decode(&r); err != nil {
		return Request{}, fmt.Errorf("request file: %w", err)
	}
	if dec.More() {
		return Request{}, errors.New("request file: more than one JSON value")
	}
	return r.Normalize()
}

// Normalize checks r and returns it in canonical form: the method upper
// case, header names canonical and values trimmed, the body canonical JSON.
// Two requests that differ only in JSON formatting or key order normalize
// to the same value.
func (r Request) Normalize() (Request, error) {
	out := Request{Method: strings.ToUpper(strings.TrimSpace(r.Method)), Path: strings.TrimSpace(r.Path)}
	switch out.Method {
	case "POST", "PUT", "PATCH", "DELETE":
	case "":
		return Request{}, errors.New("request: method is empty")
	default:
		// A GET writes nothing: it is no business action.
		return Request{}, fmt.Errorf("request: method %q does not write (want POST, PUT, PATCH or DELETE)", r.Method)
	}
	if !strings.HasPrefix(out.Path, "/") || strings.ContainsAny(out.Path, " \t\r\n#") {
		return Request{}, fmt.Errorf("request: path %q must start with / and hold no space or fragment", r.Path)
	}
	for name, v := range r.Headers {
		canon := textproto.CanonicalMIMEHeaderKey(strings.TrimSpace(name))
		if canon == "" || strings.ContainsAny(canon, " \t\r\n:") || strings.ContainsAny(v, "\r\n") {
			return Request{}, fmt.Errorf("request: header %q is not one header field", name)
		}
		if gateHeaders[canon] || strings.HasPrefix(canon, "Idempotency-") {
			return Request{}, fmt.Errorf("request: header %s is the gate's to write, not the request's", canon)
		}
		if out.Headers == nil {
			out.Headers = map[string]string{}
		}
		if _, dup := out.Headers[canon]; dup {
			return Request{}, fmt.Errorf("request: header %s given twice", canon)
		}
		out.Headers[canon] = strings.TrimSpace(v)
	}
	if len(bytes.TrimSpace(r.Body)) == 0 {
		if out.Method != "DELETE" {
			return Request{}, errors.New("request: body is empty")
		}
		return out, nil
	}
	body, err := CanonicalJSON(r.Body)
	if err != nil {
		return Request{}, fmt.Errorf("request body: %w", err)
	}
	out.Body = body
	return out, nil
}

// Canonical is the request as the approval digest binds it: canonical JSON
// of method, path, headers and body, keys sorted, no white space.
func (r Request) Canonical() (string, error) {
	n, err := r.Normalize()
	if err != nil {
		return "", err
	}
	b, err := marshalCanonical(n)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// ParseCanonical reads back what Canonical wrote.
func ParseCanonical(s string) (Request, error) {
	var r Request
	if err := json.Unmarshal([]byte(s), &r); err != nil {
		return Request{}, fmt.Errorf("recorded request: %w", err)
	}
	return r, nil
}

// CanonicalJSON is raw with object keys sorted and no insignificant white
// space; numbers keep their literal text. It refuses duplicate keys, which
// providers resolve differently (first wins, last wins), so an approval
// could not say which amount it bound.
func CanonicalJSON(raw []byte) ([]byte, error) {
	v, err := decodeStrict(raw)
	if err != nil {
		return nil, err
	}
	return marshalCanonical(v)
}

func marshalCanonical(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// decodeStrict decodes one JSON value with numbers kept as written,
// refusing duplicate object keys and trailing data.
func decodeStrict(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	v, err := decodeValue(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err == nil {
		return nil, errors.New("more than one JSON value")
	}
	return v, nil
}

func decodeValue(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			obj := map[string]any{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k := kt.(string)
				if _, dup := obj[k]; dup {
					return nil, fmt.Errorf("key %q appears twice", k)
				}
				if obj[k], err = decodeValue(dec); err != nil {
					return nil, err
				}
			}
			_, err := dec.Token()
			return obj, err
		case '[':
			arr := []any{}
			for dec.More() {
				v, err := decodeValue(dec)
				if err != nil {
					return nil, err
				}
				arr = append(arr, v)
			}
			_, err := dec.Token()
			return arr, err
		}
		return nil, fmt.Errorf("unexpected %v", t)
	default:
		return t, nil
	}
}

// RequestDigest is how a request's content enters an approval digest: the
// digest of its canonical form.
func RequestDigest(canonical string) string {
	h := sha256.Sum256([]byte(canonical))
	return "sha256:" + hex.EncodeToString(h[:])
}

// HeaderField is one header field of a write, in the order it is written.
type HeaderField struct{ Name, Value string }

// HTTPWrite is exactly what an HTTP attempt hands over: the approved
// request with the duplicate control's key header and reference fields
// filled in. The gate computes it before the attempt's intent is recorded
// and records Wire's bytes; the destination writes those bytes and no
// others, so a probe that repeats an attempt repeats it byte for byte.
type HTTPWrite struct {
	Method string
	Path   string
	Header []HeaderField
	Body   []byte
	// Key is the provider-facing key it carries ("" for none): in the
	// duplicate control's header, and at its reference-id field.
	Key string
}

// Write is the write the request makes under profile p for one attempt:
// the provider-facing key in p's key header, the action key at p's
// reference field and the provider-facing key at its reference-id field
// (a provider with one field for both, ref=refid, keeps the
// provider-facing key there: the action key alone can be computed by
// anyone).
// A body that already holds a value at either field is refused: the gate's
// own evidence must not be the caller's to set.
func (r Request) Write(p Profile, actionKey, providerKey string) (HTTPWrite, error) {
	n, err := r.Normalize()
	if err != nil {
		return HTTPWrite{}, err
	}
	w := HTTPWrite{Method: n.Method, Path: n.Path, Key: providerKey}
	if _, ok := n.Headers[p.KeyHeader]; ok && p.KeyHeader != "" {
		return HTTPWrite{}, fmt.Errorf("request: header %s carries the gate's key at this destination, and is the gate's to write", p.KeyHeader)
	}
	w.Header = append(w.Header, HeaderField{"Content-Type", "application/json"})
	if p.KeyHeader != "" {
		w.Header = append(w.Header, HeaderField{p.KeyHeader, providerKey})
	}
	names := make([]string, 0, len(n.Headers))
	for name := range n.Headers {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		w.Header = append(w.Header, HeaderField{name, n.Headers[name]})
	}
	body := []byte(n.Body)
	if p.Ref != "" {
		v, err := decodeStrict(body)
		if err != nil {
			return HTTPWrite{}, fmt.Errorf("request body: %w", err)
		}
		obj, ok := v.(map[string]any)
		if !ok {
			return HTTPWrite{}, fmt.Errorf("request body: the reference %s needs a JSON object", p.Ref)
		}
		if p.RefID != p.Ref {
			if err := setPath(obj, p.Ref, actionKey); err != nil {
				return HTTPWrite{}, err
			}
		}
		if err := setPath(obj, p.RefID, providerKey); err != nil {
			return HTTPWrite{}, err
		}
		if body, err = marshalCanonical(obj); err != nil {
			return HTTPWrite{}, err
		}
	}
	w.Body = body
	return w, nil
}

// setPath sets obj's dotted path to v, creating objects on the way, and
// refuses a path the body already fills.
func setPath(obj map[string]any, path, v string) error {
	parts := strings.Split(path, ".")
	for i, p := range parts {
		if i == len(parts)-1 {
			if _, ok := obj[p]; ok {
				return fmt.Errorf("request body already holds %s, where the gate records its key", path)
			}
			obj[p] = v
			return nil
		}
		next, ok := obj[p]
		if !ok {
			m := map[string]any{}
			obj[p], obj = m, m
			continue
		}
		if obj, ok = next.(map[string]any); !ok {
			return fmt.Errorf("request body: %s is not an object, so %s cannot be set", strings.Join(parts[:i+1], "."), path)
		}
	}
	return nil
}

// Wire is the write as it goes on the connection to host: request line,
// Host, the header fields in order, Content-Length, a blank line and the
// body (HTTP/1.1 keeps the connection open, see destination/httpdest).
// Attempts record these bytes.
func (w HTTPWrite) Wire(host string) []byte {
	var b bytes.Buffer
	b.WriteString(w.Method + " " + w.Path + " HTTP/1.1\r\nHost: " + host + "\r\n")
	for _, f := range w.Header {
		b.WriteString(f.Name + ": " + f.Value + "\r\n")
	}
	b.WriteString("Content-Length: " + strconv.Itoa(len(w.Body)) + "\r\n\r\n")
	b.Write(w.Body)
	return b.Bytes()
}

// Lookup reads the string at obj's dotted path ("" when absent or not a
// string): what records report at a reference field.
func Lookup(record []byte, path string) string {
	var v any
	if json.Unmarshal(record, &v) != nil {
		return ""
	}
	for _, p := range strings.Split(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return ""
		}
		v = m[p]
	}
	s, _ := v.(string)
	return s
}

// RecordAgrees reports whether a provider's record agrees with the body
// that wrote it: every field of the body the record holds has the same
// value. The provider adds fields of its own (id, status, created) and
// need not echo every one it was given; but a record whose amount or
// account differs is not the write's, whatever key it carries.
func RecordAgrees(record, body []byte) bool {
	r, err1 := decodeStrict(record)
	b, err2 := decodeStrict(body)
	return err1 == nil && err2 == nil && agrees(r, b)
}

func agrees(r, b any) bool {
	switch bv := b.(type) {
	case map[string]any:
		rv, ok := r.(map[string]any)
		if !ok {
			return false
		}
		for k, v := range bv {
			if got, ok := rv[k]; ok && !agrees(got, v) {
				return false
			}
		}
		return true
	case []any:
		rv, ok := r.([]any)
		if !ok || len(rv) != len(bv) {
			return false
		}
		for i := range bv {
			if !agrees(rv[i], bv[i]) {
				return false
			}
		}
		return true
	case json.Number:
		rn, ok := r.(json.Number)
		if !ok {
			return false
		}
		if rn == bv {
			return true
		}
		x, e1 := strconv.ParseFloat(string(rn), 64)
		y, e2 := strconv.ParseFloat(string(bv), 64)
		return e1 == nil && e2 == nil && x == y
	default:
		return r == b
	}
}

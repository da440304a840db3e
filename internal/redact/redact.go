// Package redact keeps credentials out of what gatehouse prints. A
// location (a ledger's PostgreSQL URL, a destination's SMTP URL) can carry a
// credential in several places: the URL's userinfo, a password= or
// sslpassword= parameter, a passfile= naming the file that holds one.
// Location shows a location with each of them replaced; Secrets lists the
// values themselves, so that a Writer can scrub them from any text — an
// error a library wrapped, a report, a log line — on the way out.
package redact

import (
	"bytes"
	"io"
	"net/url"
	"slices"
	"strings"
	"sync"
)

// Mask replaces a credential.
const Mask = "xxxxx"

// secretParams are the query parameters whose value is a credential, or
// names where one is kept.
var secretParams = []string{"password", "sslpassword", "passfile", "pass", "secret", "token", "api_key", "apikey"}

func secretParam(name string) bool { return slices.Contains(secretParams, strings.ToLower(name)) }

// Location shows loc with every credential it carries masked. Text that is
// not a URL with a scheme is returned as it is, except that what looks
// like a userinfo password ("scheme://user:pass@") is masked even when the
// rest does not parse.
func Location(loc string) string {
	i := strings.Index(loc, "://")
	if i <= 0 {
		return loc
	}
	u, err := url.Parse(loc)
	if err != nil {
		return maskRawUserinfo(loc)
	}
	if _, has := u.User.Password(); has {
		u.User = url.UserPassword(u.User.Username(), Mask)
	}
	if u.RawQuery != "" {
		q := u.Query()
		changed := false
		for k, vs := range q {
			if secretParam(k) {
				for j := range vs {
					vs[j] = Mask
				}
				changed = true
			}
		}
		if changed {
			u.RawQuery = q.Encode()
		}
	}
	return u.String()
}

// maskRawUserinfo masks "user:pass@" after the scheme in text that does not
// parse as a URL.
func maskRawUserinfo(loc string) string {
	i := strings.Index(loc, "://")
	rest := loc[i+3:]
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	at := strings.LastIndex(rest[:end], "@")
	if at < 0 {
		return loc
	}
	user, _, hasPass := strings.Cut(rest[:at], ":")
	if !hasPass {
		return loc
	}
	return loc[:i+3] + user + ":" + Mask + rest[at:]
}

// Secrets lists the credential values loc carries, as they may appear in
// text: decoded and as written. Values shorter than 3 bytes are left out
// (scrubbing them would mangle ordinary words).
func Secrets(loc string) []string {
	if !strings.Contains(loc, "://") {
		return nil
	}
	var out []string
	add := func(vs ...string) {
		for _, v := range vs {
			if len(v) >= 3 && !slices.Contains(out, v) {
				out = append(out, v)
			}
		}
	}
	u, err := url.Parse(loc)
	if err != nil {
		rest := loc[strings.Index(loc, "://")+3:]
		if at := strings.LastIndex(rest, "@"); at >= 0 {
			if _, p, ok := strings.Cut(rest[:at], ":"); ok {
				add(p)
			}
		}
		return out
	}
	if p, ok := u.User.Password(); ok {
		add(p, url.PathEscape(p), url.QueryEscape(p))
	}
	for _, kv := range strings.Split(u.RawQuery, "&") {
		k, raw, _ := strings.Cut(kv, "=")
		if !secretParam(k) {
			continue
		}
		v, err := url.QueryUnescape(raw)
		if err != nil {
			v = raw
		}
		add(v, raw)
	}
	return out
}

// Writer scrubs secrets from everything written through it. Each write is
// scrubbed whole; a caller that writes a secret in pieces defeats it, which
// is why Location comes first wherever a location is shown.
type Writer struct {
	mu      sync.Mutex
	w       io.Writer
	secrets [][]byte
}

// NewWriter wraps w; with no secrets it still works (and copies nothing).
func NewWriter(w io.Writer, secrets ...string) *Writer {
	rw := &Writer{w: w}
	rw.Add(secrets...)
	return rw
}

// Add scrubs these secrets too, from now on.
func (rw *Writer) Add(secrets ...string) {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	for _, s := range secrets {
		if len(s) >= 3 {
			rw.secrets = append(rw.secrets, []byte(s))
		}
	}
	// Longest first, so a secret that contains another is masked whole.
	slices.SortFunc(rw.secrets, func(a, b []byte) int { return len(b) - len(a) })
}

// Write writes p with every secret masked; it reports len(p) on success.
func (rw *Writer) Write(p []byte) (int, error) {
	rw.mu.Lock()
	out := p
	for _, s := range rw.secrets {
		if bytes.Contains(out, s) {
			out = bytes.ReplaceAll(out, s, []byte(Mask))
		}
	}
	rw.mu.Unlock()
	if _, err := rw.w.Write(out); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Unwrap is the writer underneath (whether it is a terminal, say).
func (rw *Writer) Unwrap() io.Writer { return rw.w }

// String scrubs secrets from s.
func String(s string, secrets ...string) string {
	for _, sec := range secrets {
		if len(sec) >= 3 {
			s = strings.ReplaceAll(s, sec, Mask)
		}
	}
	return s
}

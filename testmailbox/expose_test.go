package testmailbox

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptrace"
	"path/filepath"
	"strings"
	"testing"
)

func TestNonLoopbackBindRefused(t *testing.T) {
	for _, tc := range []struct {
		name       string
		smtp, http string
	}{
		{"SMTPOnEveryInterface", "0.0.0.0:0", "127.0.0.1:0"},
		{"SMTPEmptyHost", ":0", "127.0.0.1:0"},
		{"HTTPOnEveryInterface", "127.0.0.1:0", "0.0.0.0:0"},
		{"HTTPOnAnotherAddress", "127.0.0.1:0", "192.0.2.1:0"},
		{"IPv6Unspecified", "[::]:0", "127.0.0.1:0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Start(context.Background(), Config{SMTPAddr: tc.smtp, HTTPAddr: tc.http})
			if err == nil {
				m.Close()
				t.Fatalf("Start(%s, %s) succeeded without AllowRemote", tc.smtp, tc.http)
			}
			if !errors.Is(err, ErrNotLoopback) || !strings.Contains(err.Error(), "--allow-remote") {
				t.Fatalf("error = %v; want ErrNotLoopback naming --allow-remote", err)
			}
		})
	}
	t.Run("LoopbackNamesAccepted", func(t *testing.T) {
		m := start(t, Config{SMTPAddr: "localhost:0", HTTPAddr: "127.0.0.2:0"})
		if m.APIToken() != "" {
			t.Fatalf("a loopback mailbox got token %q it was not asked for", m.APIToken())
		}
	})
}

// fromAddress returns an HTTP client whose connections leave from local
// (another loopback address than the mailbox's), and a check that they did.
func fromAddress(t *testing.T, local string) (*http.Client, func(*http.Request) *http.Request) {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
	hc := &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
	t.Cleanup(hc.CloseIdleConnections)
	trace := func(r *http.Request) *http.Request {
		return r.WithContext(httptrace.WithClientTrace(r.Context(), &httptrace.ClientTrace{
			GotConn: func(info httptrace.GotConnInfo) {
				if host, _, _ := net.SplitHostPort(info.Conn.LocalAddr().String()); host != local {
					t.Errorf("request left from %s, not %s", host, local)
				}
			},
		}))
	}
	return hc, trace
}

func TestExposedAPINeedsTokenFromAnotherAddress(t *testing.T) {
	m := start(t, Config{SMTPAddr: "127.0.0.2:0", HTTPAddr: "127.0.0.2:0", AllowRemote: true})
	token := m.APIToken()
	if len(token) < 32 {
		t.Fatalf("generated token %q is too short", token)
	}
	if err := send(m.SMTPAddr(), []string{"ann@example.com"}, message("k1", "hi")); err != nil {
		t.Fatalf("send: %v", err)
	}
	hc, trace := fromAddress(t, "127.0.0.3")
	do := func(method, path, auth, body string) int {
		t.Helper()
		req, err := http.NewRequestWithContext(ctxT(t), method, m.APIURL()+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := hc.Do(trace(req))
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusUnauthorized && resp.Header.Get("WWW-Authenticate") == "" {
			t.Errorf("%s %s: 401 without WWW-Authenticate", method, path)
		}
		return resp.StatusCode
	}
	changes := []struct{ method, path, body string }{
		{http.MethodPut, "/api/v1/faults", `{"specs":["down"]}`},
		{http.MethodDelete, "/api/v1/faults", ""},
		{http.MethodDelete, "/api/v1/messages", ""},
		{http.MethodPost, "/api/v1/messages", ""}, // not even a 405 without the token
	}
	for _, c := range changes {
		for _, auth := range []string{"", "Bearer wrong", "Basic " + token, token} {
			if got := do(c.method, c.path, auth, c.body); got != http.StatusUnauthorized {
				t.Errorf("%s %s with Authorization %q: %d, want 401", c.method, c.path, auth, got)
			}
		}
	}
	if n := mustCount(t, m, Filter{}); n != 1 {
		t.Fatalf("after refused calls the mailbox holds %d messages, want 1", n)
	}
	if fs := m.Faults(); len(fs) != 0 {
		t.Fatalf("after refused calls faults are %v, want none", fs)
	}
	for _, path := range []string{"/api/v1/messages", "/api/v1/stats", "/api/v1/faults"} {
		if got := do(http.MethodGet, path, "", ""); got != http.StatusOK {
			t.Errorf("GET %s without token: %d, want 200 (reads stay open)", path, got)
		}
	}
	for _, c := range changes[:3] {
		if got := do(c.method, c.path, "Bearer "+token, c.body); got != http.StatusOK {
			t.Errorf("%s %s with the token: %d, want 200", c.method, c.path, got)
		}
	}
	if n := mustCount(t, m, Filter{}); n != 0 {
		t.Fatalf("after an authorised DELETE the mailbox holds %d messages", n)
	}

	// The Go client carries the token when given one.
	c, err := NewClient(m.APIURL(), hc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Clear(ctxT(t)); err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("client without token: %v, want a 401", err)
	}
	if _, err := c.WithToken(token).Clear(ctxT(t)); err != nil {
		t.Fatalf("client with token: %v", err)
	}
}

func TestGivenTokenIsKept(t *testing.T) {
	m := start(t, Config{APIToken: "s3cret-token-of-the-operator"})
	if m.APIToken() != "s3cret-token-of-the-operator" {
		t.Fatalf("token = %q", m.APIToken())
	}
	code, _ := httpDo(t, http.MethodDelete, m.APIURL()+"/api/v1/messages", "")
	if code != http.StatusUnauthorized {
		t.Fatalf("DELETE without the given token on loopback: %d, want 401", code)
	}
}

func TestCORSClosed(t *testing.T) {
	m := start(t, Config{})
	if err := send(m.SMTPAddr(), []string{"ann@example.com"}, message("k1", "hi")); err != nil {
		t.Fatalf("send: %v", err)
	}
	req, _ := http.NewRequest(http.MethodOptions, m.APIURL()+"/api/v1/messages", nil)
	req.Header.Set("Origin", "http://"+m.HTTPAddr())
	req.Header.Set("Access-Control-Request-Method", "DELETE")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	for name := range resp.Header {
		if strings.HasPrefix(name, "Access-Control-") {
			t.Errorf("preflight reply carries %s: %v", name, resp.Header[name])
		}
	}
	if resp.StatusCode/100 == 2 {
		t.Errorf("preflight answered %d, want a refusal", resp.StatusCode)
	}
	for _, method := range []string{http.MethodGet, http.MethodDelete} {
		req, _ := http.NewRequest(method, m.APIURL()+"/api/v1/messages", nil)
		req.Header.Set("Origin", "http://evil.example")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s from another origin: %d, want 403", method, resp.StatusCode)
		}
	}
	if n := mustCount(t, m, Filter{}); n != 1 {
		t.Fatalf("a cross-origin DELETE removed messages: %d left", n)
	}
}

func TestEpochChangesWhenTheStoreForgets(t *testing.T) {
	t.Run("InMemoryEveryStartAndClear", func(t *testing.T) {
		a, b := start(t, Config{}), start(t, Config{})
		ea, eb := epochOf(t, a), epochOf(t, b)
		if ea == "" || ea == eb {
			t.Fatalf("two in-memory starts: epochs %q and %q", ea, eb)
		}
		if _, err := a.Clear(ctxT(t)); err != nil {
			t.Fatal(err)
		}
		if e := epochOf(t, a); e == ea {
			t.Fatalf("Clear kept epoch %q", e)
		}
	})
	t.Run("FileKeptAcrossRestartNewOnDelete", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "mb.db")
		m, err := Start(context.Background(), Config{DBPath: path})
		if err != nil {
			t.Fatal(err)
		}
		first := epochOf(t, m)
		m.Close()
		m = start(t, Config{DBPath: path})
		if e := epochOf(t, m); e != first {
			t.Fatalf("file store restarted with epoch %q, had %q", e, first)
		}
		code, _ := httpDo(t, http.MethodDelete, m.APIURL()+"/api/v1/messages", "")
		if code != http.StatusOK {
			t.Fatalf("DELETE: %d", code)
		}
		after := epochOf(t, m)
		if after == first {
			t.Fatalf("DELETE /api/v1/messages kept epoch %q", after)
		}
		st, err := m.Stats(ctxT(t))
		if err != nil || st.Epoch != after {
			t.Fatalf("stats epoch %q (%v), want %q", st.Epoch, err, after)
		}
	})
}

// epochOf reads the epoch as a lookup sees it, through the HTTP API, and
// checks the Go API agrees.
func epochOf(t *testing.T, m *Mailbox) string {
	t.Helper()
	c, err := NewClient(m.APIURL(), nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.List(ctxT(t), Filter{})
	if err != nil {
		t.Fatal(err)
	}
	e, err := m.Epoch(ctxT(t))
	if err != nil || e != r.Epoch {
		t.Fatalf("Go epoch %q (%v), API epoch %q", e, err, r.Epoch)
	}
	return e
}

package testmailbox

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"testing"
)

// everyRoute is one request for every route the HTTP server has (the
// API, the event stream, the web page and its files) and a path it does
// not have, so a refusal that runs before the router is seen on all.
var everyRoute = []struct{ method, path, body string }{
	{http.MethodGet, "/api/v1/messages", ""},
	{http.MethodDelete, "/api/v1/messages", ""},
	{http.MethodGet, "/api/v1/messages/1", ""},
	{http.MethodGet, "/api/v1/messages/1/raw", ""},
	{http.MethodGet, "/api/v1/stats", ""},
	{http.MethodGet, "/api/v1/faults", ""},
	{http.MethodPut, "/api/v1/faults", `{"specs":["down"]}`},
	{http.MethodDelete, "/api/v1/faults", ""},
	{http.MethodDelete, "/api/v1/holds", ""},
	{http.MethodGet, "/api/v1/events", ""},
	{http.MethodGet, "/", ""},
	{http.MethodGet, "/messages/1", ""},
	{http.MethodGet, "/static/mailbox.css", ""},
	{http.MethodGet, "/no/such/path", ""},
	{http.MethodPost, "/api/v1/messages", ""},
}

// hostStatus sends one request to m's HTTP address carrying host as its
// Host header (and Origin, as a browser on that name would) and returns the
// status. The event stream's headers are enough: the body is not read.
func hostStatus(t *testing.T, m *Mailbox, method, path, body, host string) int {
	t.Helper()
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, m.APIURL()+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	req.Header.Set("Origin", "http://"+host)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s (Host %s): %v", method, path, host, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestForeignHostRefusedOnEveryRoute: a page that rebinds its own name to
// the mailbox's loopback address sends that name as Host and Origin; every
// route answers 421 and nothing changes. The mailbox's own names (the
// loopback literals and localhost, on any port) are answered as before.
func TestForeignHostRefusedOnEveryRoute(t *testing.T) {
	m := start(t, Config{})
	if err := send(m.SMTPAddr(), []string{"ann@example.com"}, message("k1", "hi")); err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(m.HTTPAddr())
	for _, host := range []string{"rebind.attacker.example", "rebind.attacker.example:" + port,
		"localhost.attacker.example:" + port, "127.0.0.1.nip.io:" + port, "localhost.:" + port} {
		for _, rt := range everyRoute {
			if got := hostStatus(t, m, rt.method, rt.path, rt.body, host); got != http.StatusMisdirectedRequest {
				t.Errorf("%s %s with Host %s: %d, want 421", rt.method, rt.path, host, got)
			}
		}
	}
	if n := mustCount(t, m, Filter{}); n != 1 {
		t.Fatalf("after refused requests the mailbox holds %d messages, want 1", n)
	}
	if fs := m.Faults(); len(fs) != 0 {
		t.Fatalf("after refused requests faults are %v, want none", fs)
	}

	for _, host := range []string{m.HTTPAddr(), "localhost:" + port, "LOCALHOST:" + port, "[::1]:" + port, "127.0.0.1", "localhost:9025"} {
		for _, rt := range everyRoute {
			if got := hostStatus(t, m, rt.method, rt.path, rt.body, host); got == http.StatusMisdirectedRequest {
				t.Errorf("%s %s with its own Host %s: 421", rt.method, rt.path, host)
			}
		}
	}
	if fs := m.Faults(); len(fs) != 0 {
		t.Fatalf("DELETE /api/v1/faults with its own Host left %v", fs)
	}
}

// TestForeignHostRefusedToCurl: curl, a client outside Go, resolves the
// attacker's name to the mailbox's address as a rebound DNS answer would
// (--resolve), and forges the Host header outright; both get 421 and the
// fault is not set. The same calls by the mailbox's own name succeed.
func TestForeignHostRefusedToCurl(t *testing.T) {
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("curl not installed")
	}
	m := start(t, Config{})
	_, port, _ := net.SplitHostPort(m.HTTPAddr())
	status := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(curl, append([]string{"-sS", "-o", "/dev/null", "-w", "%{http_code}"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("curl %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	put := []string{"-X", "PUT", "-H", "Content-Type: application/json", "--data", `{"specs":["down"]}`}
	rebound := "http://rebind.attacker.example:" + port
	for _, args := range [][]string{
		append([]string{"--resolve", "rebind.attacker.example:" + port + ":127.0.0.1",
			"-H", "Origin: " + rebound, rebound + "/api/v1/faults"}, put...),
		{"--resolve", "rebind.attacker.example:" + port + ":127.0.0.1", "-H", "Origin: " + rebound, rebound + "/api/v1/messages"},
		append([]string{"-H", "Host: rebind.attacker.example", m.APIURL() + "/api/v1/faults"}, put...),
		{"-H", "Host: rebind.attacker.example", m.APIURL() + "/"},
	} {
		if got := status(args...); got != "421" {
			t.Errorf("curl %v: %s, want 421", args, got)
		}
	}
	if fs := m.Faults(); len(fs) != 0 {
		t.Fatalf("a rebound PUT set faults %v", fs)
	}
	if got := status(append([]string{"http://localhost:" + port + "/api/v1/faults"}, put...)...); got != "200" {
		t.Fatalf("curl PUT by the name localhost: %s, want 200", got)
	}
	if got := status(m.APIURL() + "/api/v1/messages"); got != "200" {
		t.Fatalf("curl GET by its address: %s, want 200", got)
	}
}

// TestHTTPNamesAndCertificateNames: a name given in Config.HTTPNames and a
// name in the TLS certificate (here the greeting domain of the one made at
// start) are answered; a name in neither is not; a name that could not be a
// Host is refused at start.
func TestHTTPNamesAndCertificateNames(t *testing.T) {
	m := start(t, Config{TLS: TLSOffer, Domain: "mailbox.lan", HTTPNames: []string{"Mailbox.Example.NET", "192.0.2.7"}})
	for host, want := range map[string]bool{
		"mailbox.example.net:443": true, "mailbox.example.net": true, "mailbox.lan:8025": true,
		"192.0.2.7:80": true, "192.0.2.8": false, "other.example.net": false, "example.net": false,
	} {
		got := hostStatus(t, m, http.MethodGet, "/api/v1/stats", "", host)
		if (got != http.StatusMisdirectedRequest) != want {
			t.Errorf("Host %s: %d, want answered = %v", host, got, want)
		}
	}
	for _, bad := range []string{"", "http://mailbox.example.net", "mailbox.example.net:8025", "a b", "mailbox/x"} {
		_, err := Start(context.Background(), Config{HTTPNames: []string{bad}})
		if !errors.Is(err, ErrBadConfig) {
			t.Errorf("HTTPNames %q: %v, want ErrBadConfig", bad, err)
		}
	}
}

// TestHostNames pins the rule the handler applies, for listen addresses a
// test cannot bind: an exposed mailbox answers its bound address, its
// certificate's names and the given ones, and the loopback names only when
// it can be reached over loopback.
func TestHostNames(t *testing.T) {
	for _, tc := range []struct {
		name, bound, configured string
		extra                   []string
		allowed, refused        []string
	}{
		{"Loopback", "127.0.0.1:8025", "127.0.0.1:8025", nil,
			[]string{"127.0.0.1:8025", "127.0.0.1", "localhost:8025", "[::1]:8025", "127.0.0.2:1", "[::ffff:127.0.0.1]:8025"},
			[]string{"", ":8025", "evil.example:8025", "localhost.:8025", "10.0.0.5:8025", "[fe80::1%25eth0]:8025"}},
		{"AnotherAddress", "10.0.0.5:8025", "10.0.0.5:8025", []string{"mailbox.corp"},
			[]string{"10.0.0.5:8025", "mailbox.corp", "MAILBOX.CORP:80"},
			[]string{"localhost:8025", "127.0.0.1:8025", "evil.example", "10.0.0.6:8025"}},
		{"NameChosenByTheOperator", "10.0.0.5:8025", "mailbox.lan:8025", nil,
			[]string{"mailbox.lan:8025", "10.0.0.5"}, []string{"localhost", "evil.example"}},
		{"EveryInterface", "[::]:8025", "0.0.0.0:8025", nil,
			[]string{"localhost:8025", "127.0.0.1:8025"}, []string{"0.0.0.0:8025", "evil.example"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := ownNames(tc.bound, tc.configured, nil, tc.extra)
			for _, host := range tc.allowed {
				if !h.allows(host) {
					t.Errorf("Host %q refused; names %s", host, h)
				}
			}
			for _, host := range tc.refused {
				if h.allows(host) {
					t.Errorf("Host %q answered; names %s", host, h)
				}
			}
		})
	}
}

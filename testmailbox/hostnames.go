package testmailbox

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
)

// The HTTP API and the web page answer only requests addressed to one of
// the mailbox's own names. A web page on a name its owner controls can
// re-point that name at 127.0.0.1 (DNS rebinding): the browser then sends the
// page's own name as Host and Origin, the Origin check sees them agree, and
// the page reads and changes the mailbox as if it were its own. The Host
// header is what betrays it, so every route checks it first.
//
// The port of a Host is not compared: rebinding forges the name, not the
// port, and a forwarded port (ssh -L 9025:127.0.0.1:8025) legitimately
// arrives with another one. The Origin check still compares Origin with
// Host in full, so a page on another local port is refused by it.

// hostNames is the set of names the HTTP API answers to.
type hostNames struct {
	loopback bool            // any loopback address literal and "localhost"
	names    map[string]bool // lower-case names and canonical address literals
}

// ownNames gathers the mailbox's names: the loopback literals and
// localhost when the API can be reached over loopback (bound is a loopback
// address, or every interface's), the address it is bound to, every
// interface's address when that is all of them, the host of the configured
// listen address (a name there is one the operator chose), the names and
// addresses in its TLS certificate, and the names given in
// Config.HTTPNames.
func ownNames(bound, configured string, cert *tls.Certificate, extra []string) hostNames {
	h := hostNames{names: map[string]bool{}}
	if host, _, err := net.SplitHostPort(configured); err == nil {
		if ip, err := netip.ParseAddr(host); err != nil || !ip.IsUnspecified() {
			h.add(host)
		}
	}
	if host, _, err := net.SplitHostPort(bound); err == nil {
		if ip, err := netip.ParseAddr(host); err == nil {
			switch {
			case ip.IsLoopback():
				h.loopback = true
			case ip.IsUnspecified():
				h.loopback = true
				addrs, _ := net.InterfaceAddrs() // best effort: a missing address is refused, visibly
				for _, a := range addrs {
					if n, ok := a.(*net.IPNet); ok {
						h.add(n.IP.String())
					}
				}
			default:
				h.add(host)
			}
		}
	}
	if cert != nil && cert.Leaf != nil {
		for _, n := range cert.Leaf.DNSNames {
			h.add(n)
		}
		for _, ip := range cert.Leaf.IPAddresses {
			h.add(ip.String())
		}
	}
	for _, n := range extra {
		h.add(n)
	}
	return h
}

// add records a name, an address literal in its canonical form.
func (h hostNames) add(name string) {
	if name = canonicalHost(name); name != "" {
		h.names[name] = true
	}
}

// allows reports whether a request's Host (with or without a port) names
// the mailbox.
func (h hostNames) allows(hostport string) bool {
	host := hostport
	if hp, _, err := net.SplitHostPort(hostport); err == nil {
		host = hp
	}
	host = canonicalHost(host)
	return host != "" && ((h.loopback && isLoopbackName(host)) || h.names[host])
}

// canonicalHost lower-cases a name and writes an address literal one way
// (no brackets, no zone, IPv4 not mapped into IPv6), so that one address
// has one spelling.
func canonicalHost(name string) string {
	name = strings.ToLower(strings.TrimSuffix(strings.TrimPrefix(name, "["), "]"))
	if ip, err := netip.ParseAddr(name); err == nil {
		return ip.Unmap().WithZone("").String()
	}
	return name
}

// isLoopbackName reports whether a canonical host is one the loopback rule
// covers: localhost or a loopback address literal.
func isLoopbackName(name string) bool {
	ip, err := netip.ParseAddr(name)
	return name == "localhost" || (err == nil && ip.IsLoopback())
}

// String lists the names for an error message.
func (h hostNames) String() string {
	var out []string
	for n := range h.names {
		if !h.loopback || !isLoopbackName(n) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	if h.loopback {
		out = append([]string{"localhost", "a loopback address (127.0.0.1, [::1])"}, out...)
	}
	return strings.Join(out, ", ")
}

// checkHTTPNames refuses a name in Config.HTTPNames that could not be a
// Host: empty, with a scheme, a path, a port or spaces.
func checkHTTPNames(names []string) error {
	for _, n := range names {
		bare := strings.Trim(n, "[]")
		if _, err := netip.ParseAddr(bare); err == nil {
			continue
		}
		if n == "" || strings.ContainsAny(n, ":/@ \t\r\n?#") {
			return fmt.Errorf("%w: HTTP name %q: want a host name or an address, without a scheme, port or path (--http-name mailbox.example.net)", ErrBadConfig, n)
		}
	}
	return nil
}

// ownNames is this mailbox's hostNames (see ownNames).
func (m *Mailbox) ownNames() hostNames {
	bound := m.cfg.HTTPAddr
	if m.httpLn != nil {
		bound = m.httpLn.Addr().String()
	}
	return ownNames(bound, m.cfg.HTTPAddr, m.cert, m.cfg.HTTPNames)
}

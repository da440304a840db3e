package smtp

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/textproto"
	"os"
	"strings"
	"time"

	"gatehouse/internal/oswait"
)

// Environment variables that supply TLS options when the destination URL
// names none, and when an endpoint kept none (one recorded before endpoints
// kept their Settings).
const (
	TLSEnv = "GATEHOUSE_SMTP_TLS" // auto or require
	CAEnv  = "GATEHOUSE_SMTP_CA"  // PEM file of the certificates to trust
)

// tlsPolicy is how a destination uses STARTTLS.
type tlsPolicy struct {
	require bool        // refuse to send without TLS
	config  *tls.Config // verification: system roots, a CA, or none (insecure)
}

// Settings are a destination's connection settings that are not secrets
// and not part of its identity: how it uses STARTTLS and which
// certificates it trusts. An endpoint keeps them (Destination.Settings),
// so a send that names no destination reaches the server the way it was
// approved to. The CA is kept as the certificates themselves, never as a
// path: a path names a file on one host, and hosts that share a ledger on
// PostgreSQL do not share files.
type Settings struct {
	TLS      string `json:"tls,omitempty"`      // "require", or "" for auto
	CA       string `json:"ca,omitempty"`       // PEM certificates to trust instead of the system's
	Insecure bool   `json:"insecure,omitempty"` // verify no certificate at all (explicitly)
	// Settle is the settle time the target named (a Go duration), "" for
	// the default: how long after a lease a relay may still deliver. The
	// gate binds it at approval through destination.Endpoint.Settle.
	Settle string `json:"settle,omitempty"`
}

// resolveSettings reads the tls, ca and insecure parameters of a target,
// falling back to the environment for tls and ca, and reads the CA file.
func resolveSettings(q map[string]string) (Settings, error) {
	var st Settings
	mode, ok := q["tls"]
	if !ok {
		mode = os.Getenv(TLSEnv)
	}
	switch mode {
	case "", "auto":
	case "require":
		st.TLS = "require"
	default:
		return st, fmt.Errorf("tls=%s: want auto (STARTTLS when offered, the default) or require", mode)
	}
	ca, ok := q["ca"]
	if !ok {
		ca = os.Getenv(CAEnv)
	}
	if raw, ok := q["settle"]; ok {
		d, err := time.ParseDuration(raw)
		if err != nil || d < 0 {
			return st, fmt.Errorf("settle=%s: want a duration such as 90s: how long after a lease a relay may still deliver", raw)
		}
		st.Settle = d.String()
	}
	insecure, hasInsecure := q["insecure"]
	switch {
	case hasInsecure && insecure != "true":
		return st, fmt.Errorf("insecure=%s: the only value is true (certificates are verified unless it is given)", insecure)
	case hasInsecure && ca != "":
		return st, errors.New("ca and insecure=true exclude each other: verify against the CA, or not at all")
	case hasInsecure:
		st.Insecure = true
	case ca != "":
		pem, err := os.ReadFile(ca)
		if err != nil {
			return st, fmt.Errorf("ca: %w", err)
		}
		st.CA = string(pem)
	}
	return st, nil
}

// policy is how these settings verify the server host: against the
// system's roots unless a CA is named, or not at all when insecure.
func (st Settings) policy(host string) (tlsPolicy, error) {
	p := tlsPolicy{require: st.TLS == "require", config: &tls.Config{ServerName: host, MinVersion: tls.VersionTLS12}}
	switch {
	case st.Insecure && st.CA != "":
		return p, errors.New("ca and insecure=true exclude each other: verify against the CA, or not at all")
	case st.Insecure:
		p.config.InsecureSkipVerify = true
	case st.CA != "":
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM([]byte(st.CA)) {
			return p, errors.New("ca holds no PEM certificate")
		}
		p.config.RootCAs = pool
	}
	return p, nil
}

// encode is the settings as an endpoint keeps them: canonical JSON, ""
// for the defaults.
func (st Settings) encode() string {
	if st == (Settings{}) {
		return ""
	}
	b, _ := json.Marshal(st) // a struct of strings and a bool always encodes
	return string(b)
}

// decodeSettings reads settings an endpoint kept; "" is the defaults, to
// which the environment still applies (an endpoint recorded before
// settings were kept).
func decodeSettings(raw string) (Settings, error) {
	if raw == "" {
		return resolveSettings(nil)
	}
	var st Settings
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&st); err != nil {
		return st, fmt.Errorf("recorded connection settings: %w", err)
	}
	if st.TLS != "" && st.TLS != "require" {
		return st, fmt.Errorf("recorded connection settings: tls %q", st.TLS)
	}
	if d, err := time.ParseDuration(st.Settle); st.Settle != "" && (err != nil || d < 0) {
		return st, fmt.Errorf("recorded connection settings: settle %q", st.Settle)
	}
	return st, nil
}

// negotiate opens the session by hand — greeting, EHLO, STARTTLS when the
// server offers it or the target requires it — and returns the connection
// the session goes on with: a verified *tls.Conn, or conn itself when TLS
// is neither offered nor required. It is done here because go-smtp's client
// upgrades only inside NewClientStartTLS, with its own hello name and
// timeouts and no way to go on without TLS. The connection returned replays
// a greeting for go-smtp's client, which then says EHLO again (over TLS, as
// RFC 3207 requires).
//
// A server that offers no STARTTLS gets no credentials: with a user set,
// TLS is required whatever the target says.
func (d *Destination) negotiate(conn net.Conn) (net.Conn, error) {
	conn.SetDeadline(oswait.Deadline(d.cfg.commandTimeout))
	defer conn.SetDeadline(time.Time{})
	tp := textproto.NewConn(conn)
	if _, _, err := tp.ReadResponse(220); err != nil {
		return nil, fmt.Errorf("greeting: %w", err)
	}
	id, err := tp.Cmd("EHLO %s", d.cfg.helloName)
	if err != nil {
		return nil, fmt.Errorf("EHLO: %w", err)
	}
	tp.StartResponse(id)
	_, ext, ehloErr := tp.ReadResponse(250)
	tp.EndResponse(id)
	offered := ehloErr == nil && hasExtension(ext, "STARTTLS")
	needTLS := d.tls.require || d.user != ""
	if !offered {
		var te *textproto.Error
		if ehloErr != nil && !errors.As(ehloErr, &te) {
			return nil, fmt.Errorf("EHLO: %w", ehloErr) // lost, not refused
		}
		switch {
		case d.tls.require:
			return nil, errors.New("STARTTLS: the server does not offer it, and the target says tls=require")
		case needTLS:
			return nil, errors.New("STARTTLS: the server does not offer it, and credentials are never sent in clear text")
		}
		return &greeted{Conn: conn}, nil
	}
	id, err = tp.Cmd("STARTTLS")
	if err != nil {
		return nil, fmt.Errorf("STARTTLS: %w", err)
	}
	tp.StartResponse(id)
	_, _, err = tp.ReadResponse(220)
	tp.EndResponse(id)
	if err != nil {
		return nil, fmt.Errorf("STARTTLS: %w", err)
	}
	if tp.R.Buffered() > 0 {
		// Bytes before the handshake were not sent by whoever answers
		// after it: read as part of the TLS session they could inject
		// commands (the STARTTLS injection flaw).
		return nil, errors.New("STARTTLS: the server sent data before the TLS handshake")
	}
	tc := tls.Client(conn, d.tls.config)
	if err := tc.Handshake(); err != nil {
		return nil, fmt.Errorf("STARTTLS handshake: %w", err)
	}
	return &greeted{Conn: tc}, nil
}

// hasExtension reports whether an EHLO reply (its lines after the first)
// names ext.
func hasExtension(reply, ext string) bool {
	lines := strings.Split(reply, "\n")
	for _, l := range lines[1:] {
		if name, _, _ := strings.Cut(strings.TrimSpace(l), " "); strings.EqualFold(name, ext) {
			return true
		}
	}
	return false
}

// greeted is a connection whose greeting was already read; it replays one
// for go-smtp's client, which expects to read it itself.
type greeted struct {
	net.Conn
	replayed bool
	pending  []byte
}

func (g *greeted) Read(p []byte) (int, error) {
	if !g.replayed {
		g.replayed = true
		g.pending = []byte("220 greeting read before\r\n")
	}
	if len(g.pending) > 0 {
		n := copy(p, g.pending)
		g.pending = g.pending[n:]
		return n, nil
	}
	return g.Conn.Read(p)
}

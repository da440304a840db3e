package smtp

import (
	"crypto/tls"
	"crypto/x509"
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
// names none: a send that names no destination opens the recorded identity,
// which never holds them (as it never holds credentials).
const (
	TLSEnv = "GATEHOUSE_SMTP_TLS" // auto or require
	CAEnv  = "GATEHOUSE_SMTP_CA"  // PEM file of the certificates to trust
)

// tlsPolicy is how a destination uses STARTTLS.
type tlsPolicy struct {
	require bool        // refuse to send without TLS
	config  *tls.Config // verification: system roots, a CA file, or none (insecure)
}

// parseTLS reads the tls, ca and insecure parameters of a target (falling
// back to the environment for tls and ca). Certificates are verified
// against the system's roots unless ca names the ones to trust, or
// insecure=true explicitly turns verification off.
func parseTLS(host string, q map[string]string) (tlsPolicy, error) {
	p := tlsPolicy{config: &tls.Config{ServerName: host, MinVersion: tls.VersionTLS12}}
	mode, ok := q["tls"]
	if !ok {
		mode = os.Getenv(TLSEnv)
	}
	switch mode {
	case "", "auto":
	case "require":
		p.require = true
	default:
		return p, fmt.Errorf("tls=%s: want auto (STARTTLS when offered, the default) or require", mode)
	}
	ca, ok := q["ca"]
	if !ok {
		ca = os.Getenv(CAEnv)
	}
	insecure, hasInsecure := q["insecure"]
	switch {
	case hasInsecure && insecure != "true":
		return p, fmt.Errorf("insecure=%s: the only value is true (certificates are verified unless it is given)", insecure)
	case hasInsecure && ca != "":
		return p, errors.New("ca and insecure=true exclude each other: verify against the CA, or not at all")
	case hasInsecure:
		p.config.InsecureSkipVerify = true
	case ca != "":
		pem, err := os.ReadFile(ca)
		if err != nil {
			return p, fmt.Errorf("ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return p, fmt.Errorf("ca %s holds no PEM certificate", ca)
		}
		p.config.RootCAs = pool
	}
	return p, nil
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

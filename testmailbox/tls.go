package testmailbox

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/emersion/go-smtp"

	"gatehouse/internal/oswait"
)

// TLSMode says whether the mailbox offers STARTTLS and whether it insists.
type TLSMode string

// TLS modes. The zero value is TLSOff, so that a mailbox made in Go code
// behaves as before unless asked; `gatehouse mailbox serve` offers TLS by
// default.
const (
	TLSOff     TLSMode = ""        // no STARTTLS
	TLSOffer   TLSMode = "offer"   // STARTTLS offered; plain sessions still work
	TLSRequire TLSMode = "require" // MAIL is refused until STARTTLS
)

// ParseTLSMode reads off, offer or require.
func ParseTLSMode(s string) (TLSMode, error) {
	switch s {
	case "off":
		return TLSOff, nil
	case string(TLSOffer), string(TLSRequire):
		return TLSMode(s), nil
	}
	return TLSOff, fmt.Errorf("tls mode %q: want off, offer or require", s)
}

// replyNeedTLS is the answer to MAIL before STARTTLS when TLS is required
// (RFC 3207's own words).
var replyNeedTLS = &smtp.SMTPError{Code: 530, EnhancedCode: smtp.EnhancedCode{5, 7, 0},
	Message: "Must issue a STARTTLS command first"}

// ErrBadConfig is returned (wrapped) by Start for TLS and AUTH settings
// that cannot work together.
var ErrBadConfig = errors.New("mailbox settings")

// checkTLSConfig refuses combinations that cannot work, before anything is
// bound.
func checkTLSConfig(cfg Config) error {
	bad := func(msg string) error { return fmt.Errorf("%w: %s", ErrBadConfig, msg) }
	switch cfg.TLS {
	case TLSOff, TLSOffer, TLSRequire:
	default:
		return bad(fmt.Sprintf("tls mode %q: want off, offer or require", cfg.TLS))
	}
	if (cfg.TLSCertFile == "") != (cfg.TLSKeyFile == "") {
		return bad("a TLS certificate needs its key and a key its certificate (--tls-cert and --tls-key together)")
	}
	if cfg.TLS == TLSOff && cfg.TLSCertFile != "" {
		return bad("a TLS certificate was given but TLS is off")
	}
	if cfg.RequireAuth && cfg.TLS == TLSOff && !cfg.AllowInsecureAuth {
		return bad("AUTH is required but TLS is off, and AUTH is only taken after STARTTLS; turn TLS on or allow AUTH in clear text (--allow-insecure-auth)")
	}
	return nil
}

// setUpTLS gives the server its certificate: the configured one, or a
// self-signed one made now for the names and addresses a client may dial,
// written as PEM to a private directory so that clients can trust exactly it.
func (m *Mailbox) setUpTLS() (*tls.Config, error) {
	if m.cfg.TLSCertFile != "" {
		cert, err := tls.LoadX509KeyPair(m.cfg.TLSCertFile, m.cfg.TLSKeyFile)
		if err != nil {
			return nil, fmt.Errorf("load TLS certificate: %w", err)
		}
		if m.caFile, err = filepath.Abs(m.cfg.TLSCertFile); err != nil {
			return nil, fmt.Errorf("TLS certificate path: %w", err)
		}
		return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
	}
	certPEM, keyPEM, err := selfSigned(m.cfg.Domain, m.ln.addr)
	if err != nil {
		return nil, err
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("generated TLS certificate: %w", err)
	}
	if m.tmpDir, err = os.MkdirTemp("", "gatehouse-mailbox-"); err != nil {
		return nil, fmt.Errorf("directory for the mailbox certificate: %w", err)
	}
	m.caFile = filepath.Join(m.tmpDir, "mailbox-ca.pem")
	if err := os.WriteFile(m.caFile, certPEM, 0o644); err != nil {
		return nil, fmt.Errorf("write the mailbox certificate: %w", err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}

// selfSigned makes a certificate that is its own authority, valid for
// localhost, the greeting's domain, the loopback addresses and the address
// the SMTP server listens on (every interface's, when it listens on all).
func selfSigned(domain, listenAddr string) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generate TLS key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, nil, fmt.Errorf("certificate serial: %w", err)
	}
	ips := []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	if host, _, err := net.SplitHostPort(listenAddr); err == nil {
		if ip := net.ParseIP(host); ip != nil && !ip.IsUnspecified() {
			ips = append(ips, ip)
		} else if ip != nil {
			addrs, _ := net.InterfaceAddrs() // best effort: a name missing here fails verification, visibly
			for _, a := range addrs {
				if n, ok := a.(*net.IPNet); ok {
					ips = append(ips, n.IP)
				}
			}
		}
	}
	now := oswait.Now() // TLS clients check validity against their own clock
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "gatehouse test mailbox " + domain},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.AddDate(1, 0, 0),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		DNSNames:              []string{"localhost", domain},
		IPAddresses:           ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, fmt.Errorf("create TLS certificate: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("encode TLS key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
}

// CAFile is the PEM file a client verifies the mailbox's certificate
// against (the generated self-signed certificate, or the configured one),
// or "" when TLS is off. A generated file is removed by Close.
func (m *Mailbox) CAFile() string { return m.caFile }

// TLS is the mailbox's TLS mode.
func (m *Mailbox) TLS() TLSMode { return m.cfg.TLS }

package testmailbox

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
)

// syncBuffer is a transcript written by many sessions.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// trustMailbox is a TLS config that trusts exactly the mailbox's CA file.
func trustMailbox(t *testing.T, m *Mailbox) *tls.Config {
	t.Helper()
	pem, err := os.ReadFile(m.CAFile())
	if err != nil {
		t.Fatalf("read the mailbox CA: %v", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		t.Fatalf("%s holds no certificate", m.CAFile())
	}
	host, _, _ := net.SplitHostPort(m.SMTPAddr())
	return &tls.Config{RootCAs: pool, ServerName: host}
}

var credentials = base64.StdEncoding.EncodeToString([]byte("\x00" + TestUsername + "\x00" + TestPassword))

func TestSTARTTLSRequiredAndAuthOnlyAfterIt(t *testing.T) {
	var transcript syncBuffer
	m := start(t, Config{TLS: TLSRequire, RequireAuth: true, Debug: &transcript})

	// In clear text: STARTTLS offered, AUTH neither offered nor taken, MAIL refused.
	c, err := smtp.Dial(m.SMTPAddr())
	if err != nil {
		t.Fatal(err)
	}
	if ok, _ := c.Extension("STARTTLS"); !ok {
		t.Fatal("STARTTLS not offered")
	}
	if ok, _ := c.Extension("AUTH"); ok {
		t.Fatal("AUTH offered before STARTTLS")
	}
	// Other credentials than the real ones, so that the transcript check
	// below is about what the server asks for, not what this test sent.
	if err := c.Auth(sasl.NewPlainClient("", "someone", "else")); replyCode(err) != 523 {
		t.Fatalf("AUTH before STARTTLS: %v, want 523 TLS is required", err)
	}
	if err := c.Mail("shop@example.com", nil); replyCode(err) != 530 {
		t.Fatalf("MAIL before STARTTLS: %v, want 530", err)
	}
	c.Close()

	// Over TLS, verified against the mailbox's own CA file.
	conn, err := net.Dial("tcp", m.SMTPAddr())
	if err != nil {
		t.Fatal(err)
	}
	c, err = smtp.NewClientStartTLS(conn, trustMailbox(t, m))
	if err != nil {
		t.Fatalf("STARTTLS verified against %s: %v", m.CAFile(), err)
	}
	defer c.Close()
	if ok, _ := c.Extension("AUTH"); !ok {
		t.Fatal("AUTH not offered after STARTTLS")
	}
	if err := c.Auth(sasl.NewPlainClient("", TestUsername, TestPassword)); err != nil {
		t.Fatalf("AUTH after STARTTLS: %v", err)
	}
	if err := c.SendMail("shop@example.com", []string{"ann@example.com"}, strings.NewReader(message("k-tls", "over tls"))); err != nil {
		t.Fatalf("send over TLS: %v", err)
	}
	c.Quit()
	if n := mustCount(t, m, Filter{ActionKey: "k-tls"}); n != 1 {
		t.Fatalf("stored %d, want 1", n)
	}

	text := transcript.String()
	first := strings.Index(text, "STARTTLS\r\n220 ")
	if first < 0 || !strings.Contains(text, credentials) {
		t.Fatalf("the transcript lacks the STARTTLS reply or the (decrypted) AUTH:\n%s", text)
	}
	if before := text[:first]; strings.Contains(before, credentials) {
		t.Fatalf("credentials in the transcript before TLS:\n%s", before)
	}
}

func TestSTARTTLSRefusesAnUntrustedCertificate(t *testing.T) {
	m := start(t, Config{TLS: TLSOffer})
	conn, err := net.Dial("tcp", m.SMTPAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// System roots do not know a certificate made at start. The handshake
	// runs at the first exchange after STARTTLS.
	c, err := smtp.NewClientStartTLS(conn, &tls.Config{ServerName: "127.0.0.1"})
	if err == nil {
		err = c.Hello("localhost")
	}
	var unknown x509.UnknownAuthorityError
	if !errors.As(err, &unknown) {
		t.Fatalf("STARTTLS trusting system roots: %v, want an unknown authority", err)
	}
}

func TestTLSOfferKeepsPlainSessions(t *testing.T) {
	m := start(t, Config{TLS: TLSOffer})
	if err := send(m.SMTPAddr(), []string{"ann@example.com"}, message("k-plain", "plain")); err != nil {
		t.Fatalf("plain send to a mailbox that only offers TLS: %v", err)
	}
	if !strings.Contains(m.Target(), "tls=require") || !strings.Contains(m.Target(), "ca=") {
		t.Fatalf("target %q does not carry what a client needs to verify", m.Target())
	}
}

func TestTLSConfigRefused(t *testing.T) {
	dir := t.TempDir()
	certPEM, keyPEM, err := selfSigned("x", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile := filepath.Join(dir, "c.pem"), filepath.Join(dir, "k.pem")
	os.WriteFile(certFile, certPEM, 0o600)
	os.WriteFile(keyFile, keyPEM, 0o600)
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"AuthInClearNotAllowed", Config{RequireAuth: true}, "--allow-insecure-auth"},
		{"CertWithoutKey", Config{TLS: TLSOffer, TLSCertFile: certFile}, "--tls-key"},
		{"CertWithTLSOff", Config{TLSCertFile: certFile, TLSKeyFile: keyFile}, "TLS is off"},
		{"UnknownMode", Config{TLS: "sometimes"}, "want off, offer or require"},
		{"KeyIsNotAKey", Config{TLS: TLSOffer, TLSCertFile: certFile, TLSKeyFile: certFile}, "load TLS certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Start(context.Background(), tc.cfg)
			if err == nil {
				m.Close()
				t.Fatal("started")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not say %q", err, tc.want)
			}
		})
	}
	t.Run("GivenCertificateIsTheCA", func(t *testing.T) {
		m := start(t, Config{TLS: TLSRequire, TLSCertFile: certFile, TLSKeyFile: keyFile})
		if m.CAFile() != certFile {
			t.Fatalf("CAFile = %q, want %q", m.CAFile(), certFile)
		}
		conn, err := net.Dial("tcp", m.SMTPAddr())
		if err != nil {
			t.Fatal(err)
		}
		c, err := smtp.NewClientStartTLS(conn, trustMailbox(t, m))
		if err != nil {
			t.Fatalf("STARTTLS with the given certificate: %v", err)
		}
		c.Close()
	})
	t.Run("GeneratedCAFileRemovedByClose", func(t *testing.T) {
		m, err := Start(context.Background(), Config{TLS: TLSOffer})
		if err != nil {
			t.Fatal(err)
		}
		ca := m.CAFile()
		if _, err := os.Stat(ca); err != nil {
			t.Fatal(err)
		}
		m.Close()
		if _, err := os.Stat(ca); !os.IsNotExist(err) {
			t.Fatalf("after Close %s: %v, want gone", ca, err)
		}
	})
}

// TestInteropSwaksTLS sends with swaks, a client we did not write, over
// STARTTLS with certificate verification and AUTH PLAIN.
func TestInteropSwaksTLS(t *testing.T) {
	swaks, err := exec.LookPath("swaks")
	if err != nil {
		t.Skip("swaks not installed (.ci/run installs it)")
	}
	m := start(t, Config{TLS: TLSRequire, RequireAuth: true})
	host, port, _ := net.SplitHostPort(m.SMTPAddr())
	run := func(extra ...string) (string, error) {
		args := append([]string{"--server", host, "--port", port, "--from", "shop@example.com", "--to", "ann@example.com",
			"--header", "X-Gatehouse-Action-Key: k-swaks", "--tls", "--auth", "PLAIN",
			"--auth-user", TestUsername, "--auth-password", TestPassword, "--timeout", "10"}, extra...)
		out, err := exec.CommandContext(ctxT(t), swaks, args...).CombinedOutput()
		return string(out), err
	}
	if out, err := run("--tls-verify", "--tls-ca-path", m.CAFile()); err != nil {
		t.Fatalf("swaks --tls with the mailbox CA: %v\n%s", err, out)
	}
	if n := mustCount(t, m, Filter{ActionKey: "k-swaks"}); n != 1 {
		t.Fatalf("stored %d from swaks, want 1", n)
	}
	// Without the mailbox's CA, verification fails and nothing is sent.
	other, _, err := selfSigned("other", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	otherCA := filepath.Join(t.TempDir(), "other.pem")
	os.WriteFile(otherCA, other, 0o600)
	if out, err := run("--tls-verify", "--tls-ca-path", otherCA); err == nil {
		t.Fatalf("swaks verified the mailbox against another CA:\n%s", out)
	}
	if n := mustCount(t, m, Filter{ActionKey: "k-swaks"}); n != 1 {
		t.Fatalf("stored %d after a failed verification, want still 1", n)
	}
}

// TestInteropPythonSTARTTLS sends with Python's smtplib: starttls with a
// context that trusts only the mailbox's CA, then login.
func TestInteropPythonSTARTTLS(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not installed")
	}
	m := start(t, Config{TLS: TLSRequire, RequireAuth: true})
	host, port, _ := net.SplitHostPort(m.SMTPAddr())
	script := `
import smtplib, ssl, sys
host, port, ca, key = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
ctx = ssl.create_default_context(cafile=ca if ca else None)
s = smtplib.SMTP(host, port, timeout=10)
s.starttls(context=ctx)
s.login("` + TestUsername + `", "` + TestPassword + `")
msg = "From: shop@example.com\r\nTo: ann@example.com\r\nSubject: py\r\nMessage-ID: <py-" + key + "@test>\r\nX-Gatehouse-Action-Key: " + key + "\r\n\r\nHello.\r\n"
s.sendmail("shop@example.com", ["ann@example.com"], msg)
s.quit()
`
	run := func(ca, key string) (string, error) {
		out, err := exec.CommandContext(ctxT(t), py, "-c", script, host, port, ca, key).CombinedOutput()
		return string(out), err
	}
	if out, err := run(m.CAFile(), "k-py"); err != nil {
		t.Fatalf("python starttls + login: %v\n%s", err, out)
	}
	if n := mustCount(t, m, Filter{ActionKey: "k-py"}); n != 1 {
		t.Fatalf("stored %d from python, want 1", n)
	}
	out, err := run("", "k-py-untrusted")
	if err == nil || !strings.Contains(out, "CERTIFICATE_VERIFY_FAILED") {
		t.Fatalf("python trusting system roots: %v\n%s", err, out)
	}
	if n := mustCount(t, m, Filter{ActionKey: "k-py-untrusted"}); n != 0 {
		t.Fatalf("stored %d after a failed verification", n)
	}
}

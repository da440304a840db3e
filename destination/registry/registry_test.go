package registry_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gatehouse/destination"
	"gatehouse/destination/registry"
)

// writeCA writes a self-signed CA certificate in PEM, as the test mailbox
// makes one, and returns its path.
func writeCA(t *testing.T) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "gatehouse test CA"},
		NotBefore: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), NotAfter: time.Date(2036, 1, 1, 0, 0, 0, 0, time.UTC), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestSettingsAreNotTheIdentity: URLs that differ only in how the server
// is reached name one destination (identity and records compare equal),
// while the endpoint keeps what a send needs to connect that way — the
// certificates themselves, not the path they were read from — and never a
// credential.
func TestSettingsAreNotTheIdentity(t *testing.T) {
	ca := writeCA(t)
	t.Setenv("GATEHOUSE_SMTP_TLS", "")
	t.Setenv("GATEHOUSE_SMTP_CA", "")
	const api = "&api=http://127.0.0.1:8025"
	urls := []string{
		"smtp://127.0.0.1:2525?tls=auto" + api,
		"smtp://ops:s3cret@127.0.0.1:2525?tls=require" + api,
		"smtp://127.0.0.1:2525?tls=require&ca=" + ca + api,
		"smtp://127.0.0.1:2525?insecure=true" + api,
	}
	var first destination.Endpoint
	settings := map[string]bool{}
	for i, raw := range urls {
		ep, err := registry.Parse(raw)
		if err != nil {
			t.Fatalf("Parse(%s): %v", raw, err)
		}
		if i == 0 {
			first = ep
		}
		if ep.Destination != first.Destination || ep.Lookup != first.Lookup {
			t.Errorf("%s names %s (records %s), want %s (records %s)", raw, ep.Destination, ep.Lookup, first.Destination, first.Lookup)
		}
		if strings.Contains(ep.Settings, "s3cret") || strings.Contains(ep.Settings, "ops") {
			t.Errorf("%s: settings %q hold a credential", raw, ep.Settings)
		}
		if strings.Contains(ep.Settings, ca) {
			t.Errorf("%s: settings %q hold the CA's path, which another host cannot read", raw, ep.Settings)
		}
		settings[ep.Settings] = true
	}
	if len(settings) != len(urls) {
		t.Errorf("settings %v: want auto, require, require with a CA and insecure told apart", settings)
	}
}

// TestEndpointOpensAsItWasParsed: the endpoint a URL names opens back into
// a destination with the same endpoint, without the URL, and the CA file
// may be gone by then.
func TestEndpointOpensAsItWasParsed(t *testing.T) {
	dir := t.TempDir()
	ca := writeCA(t)
	tests := []struct{ Name, URL string }{
		{"File", "file://" + filepath.Join(dir, "outbox")},
		{"SMTP", "smtp://127.0.0.1:2525"},
		{"SMTPWithRecords", "smtp://127.0.0.1:2525?api=http://127.0.0.1:8025"},
		{"SMTPWithOwnCA", "smtp://Mail.Example.test:587?tls=require&ca=" + ca + "&api=http://127.0.0.1:8025"},
		{"Fake", "fake://unknown"},
	}
	for _, tc := range tests {
		t.Run(tc.Name, func(t *testing.T) {
			ep, err := registry.Parse(tc.URL)
			if err != nil {
				t.Fatal(err)
			}
			renamed := ca + ".gone"
			if err := os.Rename(ca, renamed); err != nil {
				t.Fatal(err)
			}
			defer os.Rename(renamed, ca)
			d, err := registry.OpenEndpoint(ep)
			if err != nil {
				t.Fatalf("OpenEndpoint(%+v): %v", ep, err)
			}
			if got := destination.EndpointOf(d); got != ep {
				t.Errorf("opened endpoint %+v, want %+v", got, ep)
			}
		})
	}
}

// TestRecordedSettingsThatCannotBeRead: an endpoint whose kept settings
// are not what the backend wrote is refused with a bad-destination error
// that says so, rather than sent some other way.
func TestRecordedSettingsThatCannotBeRead(t *testing.T) {
	for _, settings := range []string{`{"tls":"sometimes"}`, `{"port":25}`, `not json`, `{"ca":"not a certificate"}`} {
		_, err := registry.OpenEndpoint(destination.Endpoint{Destination: "smtp://127.0.0.1:2525", Settings: settings})
		if !errors.Is(err, registry.ErrBadURL) {
			t.Errorf("settings %s: %v, want ErrBadURL", settings, err)
		}
	}
}

package smtp_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"gatehouse/destination"
	"gatehouse/destination/registry"
	smtpdest "gatehouse/destination/smtp"
	"gatehouse/ledger"
	"gatehouse/testmailbox"
)

// A password that appears nowhere else, so that finding it means a leak.
const (
	tlsUser = "ops-sender"
	tlsPass = "Pa55-w0rd-only-here"
)

// lockedBuffer collects a transcript written by the server's sessions.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// wireTap relays connections to addr and records every byte the client
// sends, as someone on the path would see it.
func wireTap(t *testing.T, addr string) (string, *lockedBuffer) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wire lockedBuffer
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", addr)
			if err != nil {
				c.Close()
				continue
			}
			wg.Add(2)
			go func() { defer wg.Done(); io.Copy(io.MultiWriter(s, &wire), c); s.Close() }()
			go func() { defer wg.Done(); io.Copy(c, s); c.Close() }()
		}
	}()
	return ln.Addr().String(), &wire
}

func withCredentials(target string) string {
	return strings.Replace(target, "smtp://", "smtp://"+tlsUser+":"+tlsPass+"@", 1)
}

// TestSTARTTLSAndAuthThroughTheGate: the gate sends through smtpdest to a
// mailbox that requires STARTTLS and AUTH, verifying the mailbox against
// the CA its target names. Neither the server's transcript before STARTTLS
// nor the bytes on the wire carry the credentials, and no history line,
// identity or JSON of the ledger shows the password.
func TestSTARTTLSAndAuthThroughTheGate(t *testing.T) {
	ctx := ctxT(t)
	var transcript lockedBuffer
	mb, err := testmailbox.Start(ctx, testmailbox.Config{TLS: testmailbox.TLSRequire, RequireAuth: true,
		AuthUsername: tlsUser, AuthPassword: tlsPass, Debug: &transcript})
	if err != nil {
		t.Fatal(err)
	}
	defer mb.Close()
	tap, wire := wireTap(t, mb.SMTPAddr())
	target := withCredentials(strings.Replace(mb.Target(), mb.SMTPAddr(), tap, 1))
	sd, err := smtpdest.New(target)
	if err != nil {
		t.Fatal(err)
	}
	dest := sd.Gate()
	if dest.Identity() != "smtp://"+tap {
		t.Fatalf("identity %q carries more than scheme, host and port", dest.Identity())
	}
	l, err := ledger.Open(filepath.Join(t.TempDir(), "ledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	key := approvedAction(t, l, destination.EndpointOf(dest))
	res, err := l.Execute(ctx, ledger.ExecuteRequest{Key: key, Executor: "wf-ack",
		Reread: []ledger.MaterialRead{{Source: "crm", Field: "consent", Value: "yes"}}}, dest)
	if err != nil || res.Action.State != ledger.StateSent {
		t.Fatalf("execute over STARTTLS + AUTH: %s, %v", res.Action.State, err)
	}
	if n, err := mb.Count(ctx, testmailbox.Filter{ActionKey: key}); err != nil || n != 1 {
		t.Fatalf("arrivals = %d (%v), want 1", n, err)
	}

	creds := base64.StdEncoding.EncodeToString([]byte("\x00" + tlsUser + "\x00" + tlsPass))
	text := transcript.String()
	tlsAt := strings.Index(text, "STARTTLS\r\n220 ")
	if tlsAt < 0 {
		t.Fatalf("no STARTTLS in the server transcript:\n%s", text)
	}
	if !strings.Contains(text[tlsAt:], "AUTH PLAIN "+creds) {
		t.Fatalf("AUTH did not happen inside TLS:\n%s", text)
	}
	if before := text[:tlsAt]; strings.Contains(before, creds) || strings.Contains(before, "AUTH") || strings.Contains(before, tlsPass) {
		t.Fatalf("credentials before TLS in the server transcript:\n%s", before)
	}
	if w := wire.String(); strings.Contains(w, creds) || strings.Contains(w, tlsPass) || strings.Contains(w, "AUTH") {
		t.Fatal("credentials on the wire")
	}

	var everything strings.Builder
	evs, err := l.History(ctx, ledger.HistoryFilter{ActionKey: key})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		everything.WriteString(e.Message + "\n")
	}
	a, err := l.Action(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	atts, err := l.Attempts(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	js, _ := json.Marshal(struct {
		A ledger.Action
		T []ledger.Attempt
	}{a, atts})
	everything.Write(js)
	if s := everything.String(); strings.Contains(s, tlsPass) || strings.Contains(s, tlsUser) {
		t.Fatalf("the ledger shows credentials:\n%s", s)
	}
}

// TestTLSPolicy: each way TLS can fail is not delivered (nothing handed
// over, safe to retry), names the reason and never shows the password.
func TestTLSPolicy(t *testing.T) {
	plain := startMailbox(t)
	clearAuth, err := testmailbox.Start(context.Background(), testmailbox.Config{RequireAuth: true, AllowInsecureAuth: true,
		AuthUsername: tlsUser, AuthPassword: tlsPass})
	if err != nil {
		t.Fatal(err)
	}
	defer clearAuth.Close()
	offer, err := testmailbox.Start(context.Background(), testmailbox.Config{TLS: testmailbox.TLSOffer})
	if err != nil {
		t.Fatal(err)
	}
	defer offer.Close()
	other, err := testmailbox.Start(context.Background(), testmailbox.Config{TLS: testmailbox.TLSOffer})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	smtpURL := func(m *testmailbox.Mailbox, query string) string { return "smtp://" + m.SMTPAddr() + query }

	tests := []struct {
		Name    string
		Target  string
		Mailbox *testmailbox.Mailbox
		Want    string // "" for delivered
	}{
		{"RequireWithoutOffer", smtpURL(plain, "?tls=require"), plain, "does not offer it, and the target says tls=require"},
		{"CredentialsNeverInClear", withCredentials(smtpURL(clearAuth, "")), clearAuth, "credentials are never sent in clear text"},
		{"SystemRootsDoNotKnowTheMailbox", smtpURL(offer, ""), offer, "certificate signed by unknown authority"},
		{"AnotherMailboxCA", smtpURL(offer, "?ca="+other.CAFile()), offer, "certificate signed by unknown authority"},
		{"InsecureExplicitly", smtpURL(offer, "?insecure=true"), offer, ""},
		{"AutoVerifiesAgainstTheMailboxCA", smtpURL(offer, "?ca="+offer.CAFile()), offer, ""},
		{"TargetAsTheMailboxPrintsIt", offer.Target(), offer, ""},
		{"AutoWithoutOfferSendsPlain", smtpURL(plain, ""), plain, ""},
	}
	for i, tc := range tests {
		t.Run(tc.Name, func(t *testing.T) {
			d, err := smtpdest.New(tc.Target)
			if err != nil {
				t.Fatal(err)
			}
			msg := newMessage("tls-"+tc.Name, i+1)
			_, err = d.Send(ctxT(t), msg)
			n, cerr := tc.Mailbox.Count(ctxT(t), testmailbox.Filter{MessageID: msg.MessageID()})
			if cerr != nil {
				t.Fatal(cerr)
			}
			if tc.Want == "" {
				if err != nil || n != 1 {
					t.Fatalf("send: %v, %d stored; want delivered once", err, n)
				}
				return
			}
			if destination.ClassifyDelivery(err) != destination.OutcomeNotDelivered || !strings.Contains(err.Error(), tc.Want) {
				t.Fatalf("send: %v; want not delivered saying %q", err, tc.Want)
			}
			if strings.Contains(err.Error(), tlsPass) {
				t.Fatalf("error shows the password: %v", err)
			}
			if n != 0 {
				t.Fatalf("%d stored after a TLS failure", n)
			}
		})
	}
}

func TestTLSParametersRefused(t *testing.T) {
	notPEM := filepath.Join(t.TempDir(), "not.pem")
	os.WriteFile(notPEM, []byte("hello"), 0o600)
	for _, tc := range []struct{ Name, Target, Want string }{
		{"UnknownMode", "smtp://u:" + tlsPass + "@127.0.0.1:25?tls=maybe", "tls=maybe: want auto"},
		{"InsecureNotTrue", "smtp://u:" + tlsPass + "@127.0.0.1:25?insecure=yes", "insecure=yes: the only value is true"},
		{"CAAndInsecure", "smtp://u:" + tlsPass + "@127.0.0.1:25?ca=" + notPEM + "&insecure=true", "exclude each other"},
		{"CAMissing", "smtp://u:" + tlsPass + "@127.0.0.1:25?ca=/nonexistent/ca.pem", "no such file"},
		{"CANotPEM", "smtp://u:" + tlsPass + "@127.0.0.1:25?ca=" + notPEM, "holds no PEM certificate"},
		{"TLSTwice", "smtp://u:" + tlsPass + "@127.0.0.1:25?tls=require&tls=auto", "tls given 2 times"},
	} {
		t.Run(tc.Name, func(t *testing.T) {
			_, err := smtpdest.New(tc.Target)
			if err == nil || !strings.Contains(err.Error(), tc.Want) {
				t.Fatalf("New(%q) = %v; want %q", tc.Target, err, tc.Want)
			}
			if strings.Contains(err.Error(), tlsPass) {
				t.Fatalf("error shows the password: %v", err)
			}
		})
	}
}

// TestTLSFromEnvironment: a URL without TLS options takes them from the
// environment, as credentials do.
func TestTLSFromEnvironment(t *testing.T) {
	mb, err := testmailbox.Start(context.Background(), testmailbox.Config{TLS: testmailbox.TLSRequire})
	if err != nil {
		t.Fatal(err)
	}
	defer mb.Close()
	t.Setenv(smtpdest.TLSEnv, "require")
	t.Setenv(smtpdest.CAEnv, mb.CAFile())
	d, err := smtpdest.New("smtp://" + mb.SMTPAddr())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Send(ctxT(t), newMessage("tls-env", 1)); err != nil {
		t.Fatalf("send with TLS options from the environment: %v", err)
	}
	t.Setenv(smtpdest.TLSEnv, "sometimes")
	if _, err := smtpdest.New("smtp://" + mb.SMTPAddr()); err == nil || !strings.Contains(err.Error(), "tls=sometimes") {
		t.Fatalf("a bad $%s: %v", smtpdest.TLSEnv, err)
	}
}

// TestAcceptThenDropOverTLSIsUnknown: a reply lost after the final "."
// inside TLS is as unknown as in clear text, and reconciliation through the
// mailbox's records settles it without a re-send.
func TestAcceptThenDropOverTLSIsUnknown(t *testing.T) {
	ctx := ctxT(t)
	drop, _ := testmailbox.ParseFault("accept_then_drop:count=1")
	mb, err := testmailbox.Start(ctx, testmailbox.Config{TLS: testmailbox.TLSRequire, Faults: []testmailbox.Fault{drop}})
	if err != nil {
		t.Fatal(err)
	}
	defer mb.Close()
	sd, err := smtpdest.New(mb.Target())
	if err != nil {
		t.Fatal(err)
	}
	dest := sd.Gate()
	l, err := ledger.Open(filepath.Join(t.TempDir(), "ledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	key := approvedAction(t, l, destination.EndpointOf(dest))
	req := ledger.ExecuteRequest{Key: key, Executor: "wf-ack", Reread: []ledger.MaterialRead{{Source: "crm", Field: "consent", Value: "yes"}}}
	if res, err := l.Execute(ctx, req, dest); !errors.Is(err, ledger.ErrUnknownOutcome) {
		t.Fatalf("execute over TLS with the reply dropped: %s, %v", res.Action.State, err)
	}
	a, err := l.Reconcile(ctx, ledger.ReconcileRequest{Key: key, Actor: "ops", Open: registry.Records()})
	if err != nil || a.State != ledger.StateSent {
		t.Fatalf("reconcile: %s, %v", a.State, err)
	}
	if st, err := mb.Stats(ctx); err != nil || st.Accepted != 1 {
		t.Fatalf("accepted %d (%v), want 1", st.Accepted, err)
	}
}

// rawServer answers one SMTP connection from a script: the greeting, then
// for each command line read, the reply script gives for its verb (written
// as one piece, so a reply can carry more than it should).
func rawServer(t *testing.T, replies map[string]string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { ln.Close(); <-done })
	go func() {
		defer close(done)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		io.WriteString(c, "220 scripted ESMTP\r\n")
		buf := make([]byte, 512)
		for {
			n, err := c.Read(buf)
			if err != nil {
				return
			}
			verb, _, _ := strings.Cut(strings.TrimSpace(string(buf[:n])), " ")
			reply, ok := replies[strings.ToUpper(verb)]
			if !ok {
				reply = "502 5.5.1 not scripted\r\n"
			}
			io.WriteString(c, reply)
		}
	}()
	return ln.Addr().String()
}

// TestSTARTTLSRefusedOrTampered: a server that offers STARTTLS and then
// refuses it, or slips bytes in before the handshake (the STARTTLS
// injection flaw), gets nothing: not delivered, and no fallback to clear
// text.
func TestSTARTTLSRefusedOrTampered(t *testing.T) {
	ehlo := "250-scripted\r\n250 STARTTLS\r\n"
	for _, tc := range []struct{ Name, StartTLS, Want string }{
		{"Refused", "454 4.7.0 TLS not available now\r\n", "TLS not available now"},
		{"DataBeforeHandshake", "220 2.0.0 go ahead\r\n250 2.0.0 injected\r\n", "sent data before the TLS handshake"},
	} {
		t.Run(tc.Name, func(t *testing.T) {
			addr := rawServer(t, map[string]string{"EHLO": ehlo, "STARTTLS": tc.StartTLS, "QUIT": "221 bye\r\n"})
			d, err := smtpdest.New("smtp://" + addr + "?insecure=true")
			if err != nil {
				t.Fatal(err)
			}
			_, err = d.Send(ctxT(t), newMessage("tls-raw-"+tc.Name, 1))
			if destination.ClassifyDelivery(err) != destination.OutcomeNotDelivered || !strings.Contains(err.Error(), tc.Want) {
				t.Fatalf("send: %v; want not delivered saying %q", err, tc.Want)
			}
		})
	}
}

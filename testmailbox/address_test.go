package testmailbox

import (
	"context"
	"database/sql"
	"errors"
	"net/http"
	"net/url"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/emersion/go-smtp"
)

// sendUTF8 delivers raw to one recipient, announcing SMTPUTF8 so that an
// international address may travel as it is written.
func sendUTF8(t *testing.T, m *Mailbox, to, raw string) {
	t.Helper()
	c, err := smtp.Dial(m.SMTPAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Mail("shop@example.com", &smtp.MailOptions{UTF8: true}); err != nil {
		t.Fatal(err)
	}
	if err := c.Rcpt(to, nil); err != nil {
		t.Fatal(err)
	}
	w, err := c.Data()
	if err != nil {
		t.Fatal(err)
	}
	if err := sendBody(w, raw); err != nil {
		t.Fatalf("send to %q: %v", to, err)
	}
}

// adaSpellings are one mailbox: U-label, NFD, A-label in upper case,
// fullwidth letters.
var adaSpellings = []string{"ada@exämple.org", "ada@exa\u0308mple.org", "ADA@XN--EXMPLE-CUA.ORG", "ada@ｅｘäｍｐｌｅ.org"}

// TestRecipientsCountedByIdentity: the mailbox files a message under its
// recipient's identity, so a message to one spelling of a mailbox is
// counted, listed and matched by a fault under every other spelling, over
// the Go API and the HTTP API alike; another mailbox is not.
func TestRecipientsCountedByIdentity(t *testing.T) {
	m := start(t, Config{})
	ctx := ctxT(t)
	// The fault names the mailbox in another spelling than the message.
	if err := m.AddFault(Fault{Kind: FaultRejectPermanent, Count: 1, To: "ADA@XN--EXMPLE-CUA.ORG"}); err != nil {
		t.Fatal(err)
	}
	c, err := smtp.Dial(m.SMTPAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Mail("shop@example.com", &smtp.MailOptions{UTF8: true}); err != nil {
		t.Fatal(err)
	}
	var dataErr error
	rcptErr := c.Rcpt("ada@ｅｘäｍｐｌｅ.org", nil)
	if rcptErr == nil {
		w, err := c.Data()
		if dataErr = err; err == nil {
			dataErr = sendBody(w, message("k-rejected", "rejected"))
		}
	}
	if replyCode(rcptErr) != 550 && replyCode(dataErr) != 550 {
		t.Fatalf("the fault for ADA@XN--EXMPLE-CUA.ORG did not fire on ada@ｅｘäｍｐｌｅ.org: rcpt %v, data %v", rcptErr, dataErr)
	}
	c.Close()

	sendUTF8(t, m, "ada@exämple.org", message("k1", "one"))
	sendUTF8(t, m, "ada@example.org", message("k2", "another mailbox"))
	for _, s := range adaSpellings {
		if n := mustCount(t, m, Filter{To: s}); n != 1 {
			t.Errorf("Count(To: %q) = %d, want 1", s, n)
		}
		code, body := httpDo(t, http.MethodGet, m.APIURL()+"/api/v1/messages?to="+url.QueryEscape(s), "")
		if code != http.StatusOK || !strings.Contains(string(body), `"total":1`) {
			t.Errorf("GET ?to=%s: %d %s", s, code, body)
		}
	}
	if n := mustCount(t, m, Filter{To: "ADA@EXAMPLE.ORG"}); n != 1 {
		t.Errorf("ada@example.org: %d, want 1", n)
	}
	if _, msgs, err := m.List(ctx, Filter{To: "ada@xn--exmple-cua.org"}); err != nil || len(msgs) != 1 || msgs[0].To[0] != "ada@exämple.org" {
		t.Fatalf("listed %+v (%v), want the message as it was addressed", msgs, err)
	}
}

// TestOlderMailboxFileRefiled: a mailbox file written before recipients
// were filed by identity (schema 2, recipients trimmed and lower-cased) has
// them filed again when it is opened, so a query in another spelling finds
// what it held.
func TestOlderMailboxFileRefiled(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mb.db")
	m := start(t, Config{DBPath: path})
	sendUTF8(t, m, "Ada@Exämple.org", message("k1", "before the upgrade"))
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite3", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{`UPDATE recipients SET addr = 'ada@exämple.org'`, `PRAGMA user_version = 2`} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	again := start(t, Config{DBPath: path})
	for _, s := range adaSpellings {
		if n := mustCount(t, again, Filter{To: s}); n != 1 {
			t.Errorf("after reopening: Count(To: %q) = %d, want 1", s, n)
		}
	}
	var v int
	if err := again.store.read.QueryRowContext(context.Background(), `PRAGMA user_version`).Scan(&v); err != nil || v != schemaVersion {
		t.Fatalf("schema version %d (%v), want %d", v, err, schemaVersion)
	}
}

// TestInMemoryMailboxSurvivesAGivenUpRead: a reader whose context ends in
// the middle of its read transaction (a client that gave up) makes
// database/sql discard the connection; the in-memory mailbox keeps what it
// holds all the same.
func TestInMemoryMailboxSurvivesAGivenUpRead(t *testing.T) {
	m := start(t, Config{})
	sendUTF8(t, m, "ada@example.org", message("k1", "kept"))
	ctx, cancel := context.WithCancel(context.Background())
	tx, err := m.store.read.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := tx.QueryRow(`SELECT count(*) FROM messages`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("count %d (%v)", n, err)
	}
	cancel()
	// database/sql ends the transaction itself, discarding its
	// connection; wait until it has.
	for !errors.Is(tx.QueryRow(`SELECT 1`).Scan(&n), sql.ErrTxDone) {
		runtime.Gosched()
	}
	if n := mustCount(t, m, Filter{}); n != 1 {
		t.Fatalf("after a reader gave up the mailbox holds %d messages, want 1", n)
	}
}

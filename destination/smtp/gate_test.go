package smtp_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"mime/quotedprintable"
	"net/mail"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gatehouse/destination"
	"gatehouse/destination/registry"
	smtpdest "gatehouse/destination/smtp"
	"gatehouse/ledger"
	"gatehouse/testmailbox"
)

// TestGateAgainstMailboxFaults runs the whole gate — ledger, SMTP
// destination, real test mailbox — through each fault, counting what
// arrived at the mailbox rather than what the sender believes.
func TestGateAgainstMailboxFaults(t *testing.T) {
	tests := []struct {
		Name      string
		Fault     string
		Err       error
		State     ledger.State // after the first execution
		Arrivals  int          // after the first execution
		Reconcile ledger.State // after reconcile ("" = not applicable)
		Retry     bool         // a retry is allowed and delivers once
	}{
		{"AcceptThenDrop", "accept_then_drop:count=1", ledger.ErrUnknownOutcome, ledger.StateUnknown, 1, ledger.StateSent, false},
		{"DelayReplyPastTimeout", "delay_reply=2s:count=1", ledger.ErrUnknownOutcome, ledger.StateUnknown, 1, ledger.StateSent, false},
		{"RejectTemporary", "reject_temporary:count=1", ledger.ErrNotDelivered, ledger.StateApproved, 0, "", true},
		{"RejectPermanent", "reject_permanent:count=1", ledger.ErrFailed, ledger.StateFailed, 0, "", false},
		{"Down", "down", ledger.ErrNotDelivered, ledger.StateApproved, 0, "", true},
	}
	for _, tc := range tests {
		t.Run(tc.Name, func(t *testing.T) {
			ctx := context.Background()
			mb, err := testmailbox.Start(ctx, testmailbox.Config{})
			if err != nil {
				t.Fatal(err)
			}
			defer mb.Close()
			f, err := testmailbox.ParseFault(tc.Fault)
			if err != nil {
				t.Fatal(err)
			}
			if err := mb.AddFault(f); err != nil {
				t.Fatal(err)
			}
			sd, err := smtpdest.New(mb.Target(), smtpdest.WithDataTimeout(500*time.Millisecond),
				smtpdest.WithCommandTimeout(500*time.Millisecond), smtpdest.WithConnectTimeout(500*time.Millisecond))
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
			count := func() int {
				n, err := mb.Count(ctx, testmailbox.Filter{ActionKey: key})
				if err != nil {
					t.Fatal(err)
				}
				return n
			}
			material := []ledger.MaterialRead{{Source: "crm", Field: "consent", Value: "yes"}}
			req := ledger.ExecuteRequest{Key: key, Executor: "wf-ack", Reread: material}

			res, err := l.Execute(ctx, req, dest)
			if !errors.Is(err, tc.Err) || res.Action.State != tc.State {
				t.Fatalf("execute: state %s, err %v", res.Action.State, err)
			}
			if tc.Arrivals > 0 {
				if _, err := mb.WaitFor(ctx, testmailbox.Filter{ActionKey: key}, tc.Arrivals); err != nil {
					t.Fatal(err)
				}
			}
			if n := count(); n != tc.Arrivals {
				t.Fatalf("arrivals after first execution = %d, want %d", n, tc.Arrivals)
			}
			// A second executor never re-sends an unknown outcome.
			if tc.State == ledger.StateUnknown {
				if _, err := l.Execute(ctx, req, dest); !errors.Is(err, ledger.ErrUnknownOutcome) {
					t.Fatalf("second execute: %v", err)
				}
			}
			if tc.Reconcile != "" {
				if _, ok := dest.(destination.Records); !ok {
					t.Fatal("the mailbox target offers no lookup")
				}
				a, err := l.Reconcile(ctx, ledger.ReconcileRequest{Key: key, Actor: "ops", Open: registry.Records()})
				if err != nil || a.State != tc.Reconcile {
					t.Fatalf("reconcile: %s, %v", a.State, err)
				}
			}
			if tc.Retry {
				mb.ClearFaults()
				if _, err := l.Execute(ctx, req, dest); err != nil {
					t.Fatalf("retry: %v", err)
				}
				if _, err := mb.WaitFor(ctx, testmailbox.Filter{ActionKey: key}, 1); err != nil {
					t.Fatal(err)
				}
			}
			// Whatever happened, at most one message ever arrives.
			if _, err := l.Execute(ctx, req, dest); err == nil {
				t.Fatal("a further execution was allowed")
			}
			if n := count(); n > 1 {
				t.Fatalf("%d arrivals for one action", n)
			}
			st, err := mb.Stats(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if st.DuplicateActionKeys != 0 {
				t.Fatalf("mailbox flagged %d duplicates", st.DuplicateActionKeys)
			}
		})
	}
}

func approvedAction(t *testing.T, l *ledger.Ledger, ep destination.Endpoint) string {
	t.Helper()
	return approvedActionWithBody(t, l, ep, "Hello Ada, thank you for writing.")
}

func approvedActionWithBody(t *testing.T, l *ledger.Ledger, ep destination.Endpoint, body string) string {
	t.Helper()
	ctx := context.Background()
	if _, err := l.Claim(ctx, ledger.TaskRef{ID: "task-7"}, "wf-ack"); err != nil {
		t.Fatal(err)
	}
	a, err := l.Propose(ctx, ledger.Proposal{Task: ledger.TaskRef{ID: "task-7"}, Customer: "cust-42", Event: "enquiry-1001",
		ActionType: "reply_ack", Target: "task-7", Destination: ep.Destination, Lookup: ep.Lookup, Settle: &ep.Settle, Recipient: "ada@example.com", Subject: "We received your enquiry",
		Body: body, Actor: "wf-ack"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Approve(ctx, a.Key, "lead", []ledger.MaterialRead{{Source: "crm", Field: "consent", Value: "yes"}}); err != nil {
		t.Fatal(err)
	}
	return a.Key
}

// TestReconcileAfterTheMailboxForgot: an attempt whose reply was lost is
// reconciled against a mailbox that has since forgotten what it held — its
// messages deleted through the API, or an in-memory mailbox restarted on
// the same addresses. Finding nothing there is no evidence of absence: the
// action is held ("cannot be established") and nothing is re-sent.
func TestReconcileAfterTheMailboxForgot(t *testing.T) {
	for _, forget := range []string{"DeleteMessages", "Restart"} {
		t.Run(forget, func(t *testing.T) {
			ctx := ctxT(t)
			mb, err := testmailbox.Start(ctx, testmailbox.Config{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { mb.Close() })
			drop, _ := testmailbox.ParseFault("accept_then_drop:count=1")
			if err := mb.AddFault(drop); err != nil {
				t.Fatal(err)
			}
			sd, err := smtpdest.New(mb.Target(), smtpdest.WithDataTimeout(2*time.Second))
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
			res, err := l.Execute(ctx, req, dest)
			if !errors.Is(err, ledger.ErrUnknownOutcome) {
				t.Fatalf("execute: %s, %v; want an unknown outcome", res.Action.State, err)
			}
			epoch, err := mb.Epoch(ctx)
			if err != nil || res.Attempt.Epoch != epoch {
				t.Fatalf("attempt recorded epoch %q, mailbox has %q (%v)", res.Attempt.Epoch, epoch, err)
			}
			if _, err := mb.WaitFor(ctx, testmailbox.Filter{ActionKey: key}, 1); err != nil {
				t.Fatal(err)
			}

			switch forget {
			case "DeleteMessages":
				c, err := testmailbox.NewClient(mb.APIURL(), nil)
				if err != nil {
					t.Fatal(err)
				}
				if n, err := c.Clear(ctx); err != nil || n != 1 {
					t.Fatalf("DELETE /api/v1/messages: %d, %v", n, err)
				}
			case "Restart":
				smtpAddr, httpAddr := mb.SMTPAddr(), mb.HTTPAddr()
				mb.Close()
				mb, err = testmailbox.Start(ctx, testmailbox.Config{SMTPAddr: smtpAddr, HTTPAddr: httpAddr})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { mb.Close() })
			}

			for range 2 { // a second reconcile changes nothing either
				a, err := l.Reconcile(ctx, ledger.ReconcileRequest{Key: key, Actor: "ops", Open: registry.Records()})
				if !errors.Is(err, ledger.ErrHeld) || a.State != ledger.StateHeld || a.HoldCause != ledger.HoldUnknownOutcome {
					t.Fatalf("reconcile: %s (%s), %v; want held for an unknown outcome", a.State, a.HoldCause, err)
				}
				if !strings.Contains(a.Reason, "cannot be established") || !strings.Contains(a.Reason, epoch) {
					t.Fatalf("reason %q does not say the outcome cannot be established under epoch %s", a.Reason, epoch)
				}
			}
			if _, err := l.Execute(ctx, req, dest); err == nil {
				t.Fatal("a held unknown outcome was executed again")
			}
			if _, err := l.ReleaseHold(ctx, key, "ops", "looks absent"); !errors.Is(err, ledger.ErrUnknownOutcome) {
				t.Fatalf("release of the hold: %v; want refused while the outcome is open", err)
			}
			st, err := mb.Stats(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if st.Accepted != 0 || st.Stored != 0 {
				t.Fatalf("the forgetful mailbox got %d messages (%d stored) after it forgot: a re-send", st.Accepted, st.Stored)
			}
		})
	}
}

// TestReconcileAcrossAFileMailboxRestart: a mailbox kept in a file keeps
// its epoch across a restart, so its records still count.
func TestReconcileAcrossAFileMailboxRestart(t *testing.T) {
	ctx := ctxT(t)
	db := filepath.Join(t.TempDir(), "mailbox.db")
	drop, _ := testmailbox.ParseFault("accept_then_drop:count=1")
	mb, err := testmailbox.Start(ctx, testmailbox.Config{DBPath: db, Faults: []testmailbox.Fault{drop}})
	if err != nil {
		t.Fatal(err)
	}
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
	if _, err := l.Execute(ctx, req, dest); !errors.Is(err, ledger.ErrUnknownOutcome) {
		t.Fatalf("execute: %v", err)
	}
	smtpAddr, httpAddr := mb.SMTPAddr(), mb.HTTPAddr()
	mb.Close()
	mb, err = testmailbox.Start(ctx, testmailbox.Config{DBPath: db, SMTPAddr: smtpAddr, HTTPAddr: httpAddr})
	if err != nil {
		t.Fatal(err)
	}
	defer mb.Close()
	a, err := l.Reconcile(ctx, ledger.ReconcileRequest{Key: key, Actor: "ops", Open: registry.Records()})
	if err != nil || a.State != ledger.StateSent {
		t.Fatalf("reconcile after a file mailbox restart: %s, %v; want sent", a.State, err)
	}
}

// TestGateDeliversTenMegabyteSingleLineBodyIntact sends a 10 MB body
// without a single line break through the gate to the real test mailbox:
// SMTP allows lines of 998 octets at most, so the body must be encoded
// (quoted-printable) and must decode to exactly what was approved.
func TestGateDeliversTenMegabyteSingleLineBodyIntact(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	mb := startMailbox(t)
	// Generous timeouts: this test is about encoding, and 10 MB under the
	// race detector on a busy machine is slow to write and to store.
	sd, err := smtpdest.New(mb.Target(), smtpdest.WithCommandTimeout(time.Minute), smtpdest.WithDataTimeout(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	l, err := ledger.Open(filepath.Join(t.TempDir(), "ledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var b strings.Builder
	for b.Len() < 10_000_000-64 {
		b.WriteString("Dear Ada, your order 1234567 is on its way. ")
	}
	// Quoted-printable grows non-ASCII threefold; the mailbox's 10 MiB
	// limit leaves room for a little of it.
	body := b.String() + "Grüße, 100% sicher"
	key := approvedActionWithBody(t, l, destination.EndpointOf(sd.Gate()), body)
	material := []ledger.MaterialRead{{Source: "crm", Field: "consent", Value: "yes"}}
	if _, err := l.Execute(ctx, ledger.ExecuteRequest{Key: key, Executor: "wf-ack", Reread: material}, sd.Gate()); err != nil {
		t.Fatalf("execute: %v", err)
	}
	_, msgs, err := mb.List(ctx, testmailbox.Filter{ActionKey: key})
	if err != nil || len(msgs) != 1 {
		t.Fatalf("arrivals = %d (%v), want 1", len(msgs), err)
	}
	got, err := mb.Get(ctx, msgs[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	m, err := mail.ReadMessage(bytes.NewReader(got.Raw))
	if err != nil {
		t.Fatal(err)
	}
	if cte := m.Header.Get("Content-Transfer-Encoding"); cte != "quoted-printable" {
		t.Errorf("Content-Transfer-Encoding = %q, want quoted-printable", cte)
	}
	for i, line := range bytes.Split(got.Raw, []byte("\r\n")) {
		if len(line) > 998 {
			t.Fatalf("line %d is %d octets, over SMTP's 998", i+1, len(line))
		}
	}
	decoded, err := io.ReadAll(quotedprintable.NewReader(m.Body))
	if err != nil {
		t.Fatal(err)
	}
	if string(decoded) != body {
		t.Fatalf("decoded body is %d octets, want the original %d", len(decoded), len(body))
	}
}

package scenarios

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"gatehouse/fakes"
	"gatehouse/ledger"
	"gatehouse/ledger/smtpdest"
	"gatehouse/testmailbox"
)

// Start is the fake-clock time every rehearsal begins at, so reports never
// depend on when they were run.
var Start = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)

// Lease is the attempt lease rehearsals open the ledger with; restart moves
// the fake clock past it so a dead executor's attempt is recovered.
const Lease = 30 * time.Second

// sender is the From address of every rehearsal message.
const sender = "support@shop.example"

// Options configure a run.
type Options struct {
	// LedgerPath keeps the ledger in this file instead of a temporary one.
	// The file must not exist yet or be an empty ledger.
	LedgerPath string
}

// env is the world one run acts on: the ledger, the fake sources, the real
// mailbox and the SMTP destination that reaches it.
type env struct {
	clock   *fakes.Clock
	crm     *fakes.CRM
	desk    *fakes.Helpdesk
	mb      *testmailbox.Mailbox
	dest    ledger.Destination
	looker  ledger.Looker
	names   *strings.Replacer // the mailbox's addresses → stable names
	l       *ledger.Ledger
	path    string
	tmpDir  string
	ownsDir bool
}

func newEnv(ctx context.Context, sc *Scenario, opts Options) (*env, error) {
	e := &env{clock: fakes.NewClock(Start), crm: fakes.NewCRM(), desk: fakes.NewHelpdesk(), path: opts.LedgerPath}
	if e.path == "" {
		dir, err := os.MkdirTemp("", "gatehouse-rehearse-*")
		if err != nil {
			return nil, fmt.Errorf("rehearse %s: temporary ledger: %w", sc.Name, err)
		}
		e.tmpDir, e.ownsDir, e.path = dir, true, filepath.Join(dir, "ledger.db")
	}
	if err := e.openLedger(); err != nil {
		e.close()
		return nil, err
	}
	if err := e.startMailbox(ctx); err != nil {
		e.close()
		return nil, err
	}
	e.seed(sc.World)
	return e, nil
}

func (e *env) openLedger() error {
	l, err := ledger.Open(e.path, ledger.WithClock(e.clock), ledger.WithLease(Lease))
	if err != nil {
		return fmt.Errorf("open rehearsal ledger: %w", err)
	}
	e.l = l
	return nil
}

func (e *env) startMailbox(ctx context.Context) error {
	// The mailbox stamps arrivals and times its faults on the rehearsal
	// clock, so reports never depend on the wall clock.
	mb, err := testmailbox.Start(ctx, testmailbox.Config{Clock: e.clock})
	if err != nil {
		return fmt.Errorf("start test mailbox: %w", err)
	}
	e.mb = mb
	dest, err := smtpdest.New(mb.Target(), smtpdest.WithDataTimeout(2*time.Second), smtpdest.WithClock(e.clock))
	if err != nil {
		return fmt.Errorf("connect to test mailbox: %w", err)
	}
	lk, ok := dest.Looking()
	if !ok {
		return errors.New("connect to test mailbox: the destination offers no lookup")
	}
	e.dest, e.looker = lk, lk
	// Reports must read the same on every run, but the mailbox listens on
	// a new port each time: its addresses are shown by name.
	e.names = strings.NewReplacer(dest.Identity(), MailboxName, lk.LookupEndpoint(), MailboxAPIName)
	return nil
}

// Names under which reports show the rehearsal mailbox's addresses.
const (
	MailboxName    = "smtp://rehearsal-mailbox"
	MailboxAPIName = "http://rehearsal-mailbox-api"
)

// stable replaces the run's changing addresses in text for a report.
func (e *env) stable(s string) string {
	if e.names == nil {
		return s
	}
	return e.names.Replace(s)
}

// records reaches the rehearsal mailbox's records, and nothing else: the
// only destination a rehearsal sends to.
func (e *env) records() ledger.LookerOpener {
	return ledger.LookerOpenerFunc(func(ep ledger.Endpoint) (ledger.Looker, error) {
		if ep.Destination != e.dest.Identity() {
			return nil, nil
		}
		return e.looker, nil
	})
}

// seed fills the fake sources and mirrors task ownership into the ledger.
func (e *env) seed(w World) {
	for _, c := range w.Customers {
		e.crm.AddCustomer(c.ID, c.Email, c.Fields)
	}
	for _, t := range w.Tasks {
		e.desk.AddTask(t.ID, t.Customer, t.Subject, t.Status, t.Owner)
	}
}

// seedLedger records initial task owners through the gate itself.
func (e *env) seedLedger(ctx context.Context, w World) error {
	for _, t := range w.Tasks {
		if t.Owner == "" {
			continue // the ledger mirrors an unowned task when it is first used
		}
		ref := ledger.TaskRef{ID: t.ID, Customer: t.Customer, Subject: t.Subject}
		if _, err := e.l.Claim(ctx, ref, t.Owner); err != nil {
			return fmt.Errorf("seed task %s: %w", t.ID, err)
		}
	}
	return nil
}

// restart closes the ledger as a dying process would and opens it again
// after the attempt lease ran out, so recovery finds the dead executor's
// attempts. It returns the keys recovery marked unknown.
func (e *env) restart(ctx context.Context) ([]string, error) {
	if err := e.l.Close(); err != nil {
		return nil, fmt.Errorf("restart: close ledger: %w", err)
	}
	e.clock.Advance(Lease + time.Second)
	l, err := ledger.Open(e.path, ledger.WithClock(e.clock), ledger.WithLease(Lease), ledger.WithoutRecovery())
	if err != nil {
		return nil, fmt.Errorf("restart: reopen ledger: %w", err)
	}
	e.l = l
	// Recovery is called explicitly (Open would do it too) to learn which
	// attempts it marked.
	return l.Recover(ctx)
}

// read reads one field from the named fake source.
func (e *env) read(src, id, field string) (string, error) {
	if src == "crm" {
		return e.crm.Read(id, field)
	}
	return e.desk.Read(id, field)
}

func (e *env) setAvailable(src string, up bool) {
	if src == "crm" {
		e.crm.SetAvailable(up)
		return
	}
	e.desk.SetAvailable(up)
}

func (e *env) fault(s *Step) error {
	if s.Fault == "none" {
		return e.mb.ClearFaults()
	}
	f := testmailbox.Fault{Kind: testmailbox.FaultKind(s.Fault), Count: s.Count, To: strings.ToLower(s.To)}
	if s.Delay != "" {
		d, err := time.ParseDuration(s.Delay)
		if err != nil {
			return err
		}
		f.Duration = d
	}
	return e.mb.AddFault(f)
}

func (e *env) close() error {
	var errs []error
	if e.l != nil {
		errs = append(errs, e.l.Close())
	}
	if e.mb != nil {
		errs = append(errs, e.mb.Close())
	}
	if e.ownsDir {
		errs = append(errs, os.RemoveAll(e.tmpDir))
	}
	return errors.Join(errs...)
}

package scenarios

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"gatehouse/destination"
	"gatehouse/destination/httpdest"
	smtpdest "gatehouse/destination/smtp"
	"gatehouse/fakes"
	"gatehouse/ledger"
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
	// The file must not exist yet or be an empty ledger (or a ledger
	// already marked as a rehearsal's): the rehearsal marks it as its own,
	// and a ledger that holds history is refused (ledger.ErrHasHistory).
	LedgerPath string
}

// env is the world one run acts on: the ledger, the fake sources, the real
// mailbox and the SMTP destination that reaches it.
type env struct {
	clock   *fakes.Clock
	crm     *fakes.CRM
	desk    *fakes.Helpdesk
	mb      *testmailbox.Mailbox
	dest    destination.Destination
	looker  destination.Records
	names   *strings.Replacer // the mailbox's addresses → stable names
	renames []string          // the pairs names is built from
	api     *http.Server      // the fakes' JSON API, when the scenario runs commands
	apiURL  string
	// The payments provider a refund is handed to, on its own loopback
	// port so its API sits at the root as a provider's does.
	payments    *fakes.Payments
	paymentsSrv *http.Server
	paymentsURL string
	// httpDests are the HTTP destinations at the fake, one per duplicate
	// control a refund action declares.
	httpDests map[string]*httpdest.Destination
	scratch   string // HOME and TMPDIR of the commands a scenario runs
	l         *ledger.Ledger
	path      string
	tmpDir    string
	ownsDir   bool
}

func newEnv(ctx context.Context, sc *Scenario, opts Options) (*env, error) {
	e := &env{clock: fakes.NewClock(Start), crm: fakes.NewCRM(), desk: fakes.NewHelpdesk(), path: opts.LedgerPath}
	if e.path != "" && !ledger.IsPostgres(e.path) {
		// Commands the scenario runs work in another folder and must find
		// the same file.
		abs, err := filepath.Abs(e.path)
		if err != nil {
			return nil, fmt.Errorf("rehearse %s: ledger %s: %w", sc.Name, e.path, err)
		}
		e.path = abs
	}
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
	// Before anything else is written: the commands the scenario runs
	// read the rehearsal's clock, and the ledger opens on it only if its
	// records say it is a rehearsal's.
	if err := e.l.MarkRehearsal(ctx, sc.Name); err != nil {
		e.close()
		return nil, fmt.Errorf("rehearse %s: %w", sc.Name, err)
	}
	if err := e.register(ctx, sc.World); err != nil {
		e.close()
		return nil, fmt.Errorf("rehearse %s: %w", sc.Name, err)
	}
	if err := e.startMailbox(ctx); err != nil {
		e.close()
		return nil, err
	}
	if err := e.startPayments(); err != nil {
		e.close()
		return nil, err
	}
	if err := e.setPayments(sc.World.Payments); err != nil {
		e.close()
		return nil, fmt.Errorf("rehearse %s: %w", sc.Name, err)
	}
	e.seed(sc.World)
	if sc.RunsCommands() {
		// Both before the first step: the names reports replace never
		// change while a viewer may be reading a snapshot.
		if err := e.startAPI(); err != nil {
			e.close()
			return nil, err
		}
		if _, err := e.scratchDir(); err != nil {
			e.close()
			return nil, err
		}
	}
	return e, nil
}

// startAPI serves the fakes over loopback on a port of the system's
// choosing, for the commands the scenario runs.
func (e *env) startAPI() error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("serve the fakes' API: %w", err)
	}
	e.api = &http.Server{Handler: (&fakes.API{CRM: e.crm, Helpdesk: e.desk, Clock: e.clock, Lease: Lease, Ledger: e.path}).Handler(),
		ReadHeaderTimeout: 10 * time.Second}
	e.apiURL = "http://" + ln.Addr().String()
	go e.api.Serve(ln)
	e.rename(e.apiURL, FakesAPIName)
	return nil
}

// startPayments serves the payments fake on loopback, its windows and
// lags on the rehearsal clock.
func (e *env) startPayments() error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("serve the payments fake: %w", err)
	}
	e.payments = fakes.NewPayments(e.clock, fakes.PaymentsOptions{})
	e.paymentsSrv = &http.Server{Handler: e.payments.Handler(), ReadHeaderTimeout: 10 * time.Second}
	e.paymentsURL = "http://" + ln.Addr().String()
	go e.paymentsSrv.Serve(ln)
	e.rename(e.paymentsURL, PaymentsName)
	return nil
}

// scratchDir is the HOME and TMPDIR of the commands a scenario runs: empty,
// so nothing of the caller's home (credentials, configuration) reaches
// them, and removed with the run.
func (e *env) scratchDir() (string, error) {
	if e.scratch != "" {
		return e.scratch, nil
	}
	dir, err := os.MkdirTemp("", "gatehouse-run-home-*")
	if err != nil {
		return "", fmt.Errorf("scratch directory for commands: %w", err)
	}
	e.scratch = dir
	e.rename(dir, "$HOME")
	return dir, nil
}

// rename adds one address → stable name pair to what reports replace.
func (e *env) rename(from, to string) {
	e.renames = append(e.renames, from, to)
	e.names = strings.NewReplacer(e.renames...)
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
	e.rename(dest.Identity(), MailboxName)
	e.rename(lk.LookupEndpoint(), MailboxAPIName)
	// A command's output may name the ledger file, which lives in a new
	// temporary folder each time.
	e.rename(e.path, "rehearsal-ledger.db")
	return nil
}

// Names under which reports show the rehearsal mailbox's addresses.
const (
	MailboxName    = "smtp://rehearsal-mailbox"
	MailboxAPIName = "http://rehearsal-mailbox-api"
	FakesAPIName   = "http://rehearsal-fakes-api"
	PaymentsName   = "http://rehearsal-payments"
)

// goneExecutorRE finds the process a recovery names (host, boot, pid
// namespace and pid). In a rehearsal only a command the scenario ran can be
// gone, and its pid changes every time.
var goneExecutorRE = regexp.MustCompile(`executor process \S+ is gone`)

// stable replaces the run's changing addresses in text for a report.
func (e *env) stable(s string) string {
	s = goneExecutorRE.ReplaceAllLiteralString(s, "executor process (a command the scenario ran) is gone")
	if e.names == nil {
		return s
	}
	return e.names.Replace(s)
}

// records reaches the rehearsal mailbox's records and the payments
// fake's, and nothing else: the only destinations a rehearsal sends to.
func (e *env) records() destination.RecordsOpener {
	return destination.RecordsOpenerFunc(func(ep destination.Endpoint) (destination.Records, error) {
		switch ep.Destination {
		case e.dest.Identity():
			return e.looker, nil
		case e.paymentsURL:
			return e.paymentsRecords(ep)
		}
		return nil, nil
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
	f := testmailbox.Fault{Kind: testmailbox.FaultKind(s.Fault), Count: s.Count, To: s.To} // the mailbox compares recipients by their identity
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
	if e.api != nil {
		errs = append(errs, e.api.Close())
	}
	if e.paymentsSrv != nil {
		e.payments.Close() // held responses go out, so nothing waits on them
		errs = append(errs, e.paymentsSrv.Close())
	}
	if e.scratch != "" {
		errs = append(errs, os.RemoveAll(e.scratch))
	}
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

// RehearsalAdmin is the person a rehearsal registers its actors and
// policies as, and who holds the admin and stop roles no scenario actor
// needs to (a scenario may give them to its own).
const RehearsalAdmin = "rehearsal"

// rehearsalRoles are the roles an actor of a scenario gets when it names
// none: its kind's defaults (ledger.DefaultRoles), and for a person also
// stop, which a scenario's lead uses.
func rehearsalRoles(a Actor) []ledger.Role {
	if len(a.Roles) > 0 {
		out := make([]ledger.Role, 0, len(a.Roles))
		for _, r := range a.Roles {
			out = append(out, ledger.Role(r))
		}
		return out
	}
	roles := ledger.DefaultRoles(a.LedgerKind())
	if a.LedgerKind() == ledger.KindPerson {
		roles = append(roles, ledger.RoleStop)
	}
	return roles
}

// register makes the rehearsal's ledger a registered one: every actor of
// the world with its roles, the world's policies, and the rehearsal's own
// admin; so every step of every rehearsal passes the permission table, as
// it would on a registered ledger in production. No token is required:
// the rehearsal proves the roles, and a scenario's own workflow command
// acts by --as alone. A ledger the caller named that a rehearsal already
// registered keeps its actors.
func (e *env) register(ctx context.Context, w World) error {
	add := func(a ledger.Actor) error {
		if _, err := e.l.ActorByID(ctx, a.ID); err == nil {
			return nil
		} else if !errors.Is(err, ledger.ErrNotFound) {
			return err
		}
		_, err := e.l.AddActor(ctx, RehearsalAdmin, a)
		return err
	}
	if err := add(ledger.Actor{ID: RehearsalAdmin, Kind: ledger.KindPerson, DisplayName: "the rehearsal",
		Roles: []ledger.Role{ledger.RoleAdmin, ledger.RoleStop}}); err != nil {
		return fmt.Errorf("register the rehearsal's admin: %w", err)
	}
	for _, a := range w.Actors {
		if err := add(ledger.Actor{ID: a.ID, Kind: a.LedgerKind(), Roles: rehearsalRoles(a)}); err != nil {
			return fmt.Errorf("register actor %s: %w", a.ID, err)
		}
	}
	for _, p := range w.Policies {
		if _, err := e.l.SetPolicy(ctx, RehearsalAdmin, ledger.ActionPolicy{ActionType: p.Type, PolicyApproves: true,
			Requires: p.Requires, TwoPerson: p.TwoPerson}); err != nil {
			return fmt.Errorf("set the policy of %s: %w", p.Type, err)
		}
	}
	if m, err := e.l.Mode(ctx); err != nil || m.Registered {
		return err
	}
	return e.l.Require(ctx, RehearsalAdmin, nil)
}

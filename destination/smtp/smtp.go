// Package smtp is the gate's SMTP destination: it delivers one message
// per attempt with go-smtp's client and reports honestly what is known about
// the outcome.
//
// Classification (the phase decides, not the error text):
//
//	a message package mailrender cannot render   → OutcomeRejectedPermanent (nothing dialled)
//	before MAIL is accepted: dial refused, timeout, greeting/EHLO/AUTH
//	failure, lost connection                     → OutcomeNotDelivered
//	4xx reply to MAIL, RCPT or DATA (the 354 stage) → OutcomeRejectedTemporary
//	5xx reply to MAIL, RCPT or DATA (the 354 stage) → OutcomeRejectedPermanent
//	other failure before the final "." was sent     → OutcomeNotDelivered
//	the budget (ctx's deadline) over before the "."  → OutcomeNotDelivered (the "." is never written; fence.go)
//	4xx / 5xx reply after the final "."             → OutcomeRejectedTemporary / OutcomeRejectedPermanent
//	timeout or lost connection after the final "."  → OutcomeUnknown
//	250 after the final "."                         → nil error and a Receipt
//
// On a session kept from an earlier message (pool.go), a lost connection or
// a 421 at MAIL means the server dropped the session, not the message: the
// message goes over a new connection instead, once, and is classified there.
//
// A reply at MAIL or RCPT is reported as a rejection rather than as not
// delivered: nothing was handed over in either case (both are safe), but a
// 5xx there (e.g. unknown recipient) will not change by retrying, and the
// server's own verdict is the more useful record.
package smtp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"gatehouse/destination"
	"gatehouse/destination/mailrender"
	"gatehouse/internal/clock"
	"gatehouse/internal/oswait"
	"gatehouse/internal/redact"
)

// Default timeouts; go-smtp's own defaults are minutes, far too long for a
// gate that holds an attempt in flight meanwhile.
const (
	DefaultConnectTimeout = 5 * time.Second
	DefaultCommandTimeout = 5 * time.Second
	DefaultDataTimeout    = 10 * time.Second
	DefaultLookupTimeout  = 5 * time.Second
)

// DefaultFrom is the sender used when a message names none (the gate leaves
// From empty to mean "the destination's default").
const DefaultFrom = "gatehouse@localhost"

// Compile-time checks: only LookingDestination offers Lookup.
var (
	_ destination.Destination    = (*Destination)(nil)
	_ destination.Destination    = (*LookingDestination)(nil)
	_ destination.Records        = (*LookingDestination)(nil)
	_ destination.EpochReporter  = (*LookingDestination)(nil)
	_ destination.Configured     = (*Destination)(nil)
	_ destination.Configured     = (*LookingDestination)(nil)
	_ destination.Settler        = (*Destination)(nil)
	_ destination.Settler        = (*LookingDestination)(nil)
	_ destination.DefaultSettler = (*Destination)(nil)
	_ destination.DefaultSettler = (*LookingDestination)(nil)
)

type config struct {
	connectTimeout time.Duration
	commandTimeout time.Duration
	dataTimeout    time.Duration
	helloName      string
	from           string
	clock          clock.Clock
	httpClient     *http.Client
	poolSize       int
	pauseAt        func(ctx context.Context, p Phase)
	settle         time.Duration
}

// DefaultSettleTime is how long after an attempt's lease an SMTP message
// may still land by default: a relay that took the final "." may hold the
// message, and a sender that timed out waiting for its reply cannot know.
// The default is never below the send's own timeouts (connect, command,
// data) either.
const DefaultSettleTime = time.Minute

// WithSettleTime sets the settle time the destination declares (see
// destination.Settler) instead of the default; the target's settle
// parameter sets it too.
func WithSettleTime(d time.Duration) Option { return func(c *config) { c.settle = d } }

// SettleTime implements destination.Settler.
func (d *Destination) SettleTime() time.Duration {
	if d.cfg.settle >= 0 {
		return d.cfg.settle
	}
	return d.DefaultSettleTime()
}

// DefaultSettleTime implements destination.DefaultSettler: the settle
// time when neither the target (settle=) nor an option names one.
func (d *Destination) DefaultSettleTime() time.Duration {
	return max(DefaultSettleTime, d.cfg.connectTimeout+2*d.cfg.commandTimeout+d.cfg.dataTimeout)
}

// Option adjusts a destination made by New.
type Option func(*config)

// Phase names a point of a send where a test may hold the sender, as a
// scheduler, a GC or a SIGSTOP can: the proof that the commit point is
// fenced pauses executors here past their lease.
type Phase string

// Phases of one message's mail transaction.
const (
	// PhaseData is before the DATA command: the sender then waits for the
	// server's 354.
	PhaseData Phase = "data"
	// PhaseCommit is after the body was handed to the connection and
	// before its final ".", the message's commit point.
	PhaseCommit Phase = "commit"
)

// WithPause calls f at each Phase of every send, in the sending goroutine;
// the send goes on when f returns. For tests that pause an executor at a
// known point.
func WithPause(f func(ctx context.Context, p Phase)) Option {
	return func(c *config) { c.pauseAt = f }
}

// pause holds the send at p when a test asked for it.
func (c *config) pause(ctx context.Context, p Phase) {
	if c.pauseAt != nil {
		c.pauseAt(ctx, p)
	}
}

// WithConnectTimeout bounds the TCP connect.
func WithConnectTimeout(d time.Duration) Option { return func(c *config) { c.connectTimeout = d } }

// WithCommandTimeout bounds each command's reply (greeting, EHLO, MAIL,
// RCPT, the 354 to DATA) and writing the message body.
func WithCommandTimeout(d time.Duration) Option { return func(c *config) { c.commandTimeout = d } }

// WithDataTimeout bounds the wait for the reply after the final ".". When it
// expires the outcome is unknown.
func WithDataTimeout(d time.Duration) Option { return func(c *config) { c.dataTimeout = d } }

// WithHelloName sets the name given in EHLO (default "localhost").
func WithHelloName(name string) Option { return func(c *config) { c.helloName = name } }

// WithFrom sets the sender used when a message names none (default
// DefaultFrom).
func WithFrom(addr string) Option { return func(c *config) { c.from = addr } }

// WithClock sets the clock that stamps the Date header and the receipt
// (default clock.System). Socket timeouts stay on the wall clock:
// the kernel measures them.
func WithClock(clock clock.Clock) Option { return func(c *config) { c.clock = clock } }

// WithHTTPClient sets the client used by Lookup (its timeout is kept if set,
// otherwise DefaultLookupTimeout applies).
func WithHTTPClient(hc *http.Client) Option { return func(c *config) { c.httpClient = hc } }

// Environment variables that supply credentials when the destination URL
// carries none.
const (
	UserEnv     = "GATEHOUSE_SMTP_USER"
	PasswordEnv = "GATEHOUSE_SMTP_PASSWORD"
)

// Destination sends over SMTP to one server. It does not implement
// destination.Records: its server offers no records to consult.
type Destination struct {
	target   string // as given, password redacted
	identity string // smtp://host:port
	addr     string // host:port
	user     string // AUTH PLAIN when set (and then only over TLS)
	pass     string
	tls      tlsPolicy
	settings Settings // tls above as the endpoint keeps it
	api      *url.URL // the test mailbox API the target named, or nil
	cfg      config
	pool     pool // idle sessions for reuse (pool.go)
}

// Identity implements destination.Destination: smtp://host:port, without
// credentials, the lookup API or the connection settings.
func (d *Destination) Identity() string { return d.identity }

// Settings implements destination.Configured: the TLS mode and the
// certificates trusted, as an endpoint keeps them ("" for the defaults).
func (d *Destination) Settings() string { return d.settings.encode() }

// LookupEndpoint implements destination.Records: the test mailbox API.
func (d *LookingDestination) LookupEndpoint() string { return d.api.String() }

// LookingDestination is a Destination whose server is a gatehouse test
// mailbox with a query API; it implements destination.Records through that API.
type LookingDestination struct {
	*Destination
	api *url.URL
}

// New parses a target and returns the destination for it:
//
//	smtp://host:port                       sends there
//	smtp://user:pass@host:port             the same, using AUTH PLAIN
//	smtp://host:port?api=http://host:port  the same; Looking also offers the records at api
//
// and these TLS parameters, none of them part of the identity:
//
//	tls=auto        STARTTLS whenever the server offers it (the default)
//	tls=require     never send without STARTTLS
//	ca=PATH         verify the server against these PEM certificates
//	                (the test mailbox prints its own) instead of the system's
//	insecure=true   do not verify the certificate at all (explicitly)
//
// tls and ca fall back to $GATEHOUSE_SMTP_TLS and $GATEHOUSE_SMTP_CA.
// Credentials are only ever sent after STARTTLS. The port is required;
// nothing else (path, other query parameters) is accepted, so a mistyped
// target fails here rather than at send time.
func New(target string, opts ...Option) (*Destination, error) {
	d, err := parse(target, opts)
	if err != nil {
		return nil, err
	}
	return d, nil
}

// Looking returns the destination together with the records of the test
// mailbox API its target named, and false when it named none. Hand the
// gate the LookingDestination when there is one: attempts then record the
// lookup endpoint that reconciliation will ask.
func (d *Destination) Looking() (*LookingDestination, bool) {
	if d.api == nil {
		return nil, false
	}
	return &LookingDestination{Destination: d, api: d.api}, true
}

// Gate returns what the gate should be handed for this target: the
// LookingDestination when the target named an API, the plain destination
// otherwise.
func (d *Destination) Gate() destination.Destination {
	if ld, ok := d.Looking(); ok {
		return ld
	}
	return d
}

func parse(target string, opts []Option) (*Destination, error) {
	shown := redact.Location(target)
	bad := func(format string, a ...any) error {
		return fmt.Errorf("smtp destination %q: %s", shown, fmt.Sprintf(format, a...))
	}
	if !strings.Contains(target, "://") {
		return nil, bad("scheme must be smtp, as in smtp://host:port")
	}
	u, err := url.Parse(target)
	if err != nil {
		// url's own error quotes the whole URL, password included.
		return nil, bad("not a URL")
	}
	if u.Scheme != "smtp" {
		return nil, bad("scheme must be smtp, as in smtp://host:port")
	}
	if u.Opaque != "" || u.Host == "" {
		return nil, bad("missing host, want smtp://host:port")
	}
	if u.Port() == "" {
		return nil, bad("missing port, want smtp://host:port")
	}
	if u.Hostname() == "" {
		return nil, bad("missing host, want smtp://host:port")
	}
	if u.Path != "" && u.Path != "/" {
		return nil, bad("unexpected path %q", u.Path)
	}
	if u.Fragment != "" {
		return nil, bad("unexpected fragment %q", u.Fragment)
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return nil, bad("query: %v", err)
	}
	var api *url.URL
	tlsParams := map[string]string{}
	for name, vals := range q {
		if len(vals) != 1 {
			return nil, bad("%s given %d times", name, len(vals))
		}
		switch name {
		case "api":
			api, err = parseAPI(vals[0])
			if err != nil {
				return nil, bad("%v", err)
			}
		case "tls", "ca", "insecure", "settle":
			tlsParams[name] = vals[0]
		default:
			return nil, bad("unknown parameter %q (known: %s)", name, strings.Join(Params, ", "))
		}
	}
	st, err := resolveSettings(tlsParams)
	if err != nil {
		return nil, bad("%v", err)
	}
	var user, pass string
	if u.User != nil {
		user = u.User.Username()
		pass, _ = u.User.Password()
	}
	d, err := build(u.Host, u.Hostname(), user, pass, st, api, opts)
	if err != nil {
		return nil, bad("%v", err)
	}
	d.target = shown
	return d, nil
}

// Open returns the destination a recorded endpoint names: its identity
// (smtp://host:port), the records API it was recorded with, and the
// connection settings it kept (an endpoint without any falls back to the
// environment, as a URL without tls and ca parameters does). Credentials,
// which endpoints never hold, come from the environment.
func Open(ep destination.Endpoint, opts ...Option) (*Destination, error) {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("smtp destination %s: %s", ep.Destination, fmt.Sprintf(format, a...))
	}
	hostport, ok := strings.CutPrefix(ep.Destination, "smtp://")
	host, port, err := net.SplitHostPort(hostport)
	if !ok || err != nil || host == "" || port == "" {
		return nil, bad("not an smtp://host:port identity")
	}
	var api *url.URL
	if ep.Lookup != "" {
		if api, err = parseAPI(ep.Lookup); err != nil {
			return nil, bad("%v", err)
		}
	}
	st, err := decodeSettings(ep.Settings)
	if err != nil {
		return nil, bad("%v", err)
	}
	d, err := build(hostport, host, "", "", st, api, opts)
	if err != nil {
		return nil, bad("%v", err)
	}
	d.target = ep.Destination
	return d, nil
}

// build is the destination both New and Open make, from values already
// parsed.
func build(addr, host, user, pass string, st Settings, api *url.URL, opts []Option) (*Destination, error) {
	policy, err := st.policy(host)
	if err != nil {
		return nil, err
	}
	d := &Destination{addr: addr, identity: "smtp://" + strings.ToLower(addr), tls: policy, settings: st, user: user, pass: pass,
		api: api, cfg: config{
			connectTimeout: DefaultConnectTimeout,
			commandTimeout: DefaultCommandTimeout,
			dataTimeout:    DefaultDataTimeout,
			helloName:      "localhost",
			from:           DefaultFrom,
			clock:          clock.System{},
			poolSize:       DefaultPoolSize,
			settle:         -1, // the default (SettleTime)
		}}
	if d.user == "" {
		// Credentials are never part of what is stored or approved: they
		// may come from the environment at send time instead.
		d.user, d.pass = os.Getenv(UserEnv), os.Getenv(PasswordEnv)
	}
	if st.Settle != "" {
		// Checked when the settings were read or decoded; an option may
		// still set it below.
		d.cfg.settle, _ = time.ParseDuration(st.Settle)
	}
	for _, o := range opts {
		o(&d.cfg)
	}
	if d.cfg.httpClient == nil {
		d.cfg.httpClient = &http.Client{Timeout: DefaultLookupTimeout}
	}
	return d, nil
}

func parseAPI(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("api %q: %v", s, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("api %q: scheme must be http or https", s)
	}
	if u.Host == "" || u.Port() == "" {
		return nil, fmt.Errorf("api %q: want http://host:port", s)
	}
	if u.Path != "" && u.Path != "/" || u.RawQuery != "" {
		return nil, fmt.Errorf("api %q: want only http://host:port", s)
	}
	u.Path = ""
	return u, nil
}

// Target returns the URL the destination was made from, password redacted.
func (d *Destination) Target() string { return d.target }

// Addr returns the SMTP server's host:port.
func (d *Destination) Addr() string { return d.addr }

// fail builds the *destination.DeliveryError for one phase.
func fail(o destination.Outcome, phase string, err error) error {
	return &destination.DeliveryError{Outcome: o, Err: fmt.Errorf("smtp %s: %w", phase, err)}
}

// replyOutcome classifies an error at a stage where nothing was handed over:
// a 4xx/5xx reply is the server's verdict; anything else is not delivered.
func replyOutcome(err error) destination.Outcome {
	var se *smtp.SMTPError
	if errors.As(err, &se) {
		switch se.Code / 100 {
		case 4:
			return destination.OutcomeRejectedTemporary
		case 5:
			return destination.OutcomeRejectedPermanent
		}
	}
	return destination.OutcomeNotDelivered
}

// Send delivers msg. A nil error means the server answered 250 to the final
// "."; every other result is a *destination.DeliveryError (see the package
// comment for the classification). Cancelling ctx closes the connection; the
// outcome is then classified by the phase it interrupted. msg.Target is not
// consulted: a Destination is made for one target by New.
func (d *Destination) Send(ctx context.Context, msg destination.Message) (destination.Receipt, error) {
	m, err := mailrender.Render(msg, d.cfg.from, d.cfg.clock.Now())
	if err != nil {
		return destination.Receipt{}, err // permanent: the renderer decides that for every mail destination
	}
	// A session kept from an accepted message (pool.go), else a new one.
	// A kept session the server has dropped meanwhile shows it at MAIL,
	// before anything of the message was sent: that costs one new
	// connection, once.
	if ctx.Err() != nil {
		// Not even a kept session: cancelling must not close them one by one.
		return destination.Receipt{}, fail(destination.OutcomeNotDelivered, "connect "+d.addr, context.Cause(ctx))
	}
	if s := d.pool.take(oswait.Now()); s != nil {
		r, stale, err := d.transact(ctx, s.conn, s.c, m, msg.TransportID, true)
		if !stale {
			return r, err
		}
	}
	conn, c, err := d.open(ctx)
	if err != nil {
		return destination.Receipt{}, err
	}
	r, _, err := d.transact(ctx, conn, c, m, msg.TransportID, false)
	return r, err
}

// open connects, negotiates TLS as the target asks, greets and
// authenticates: a session ready for MAIL. Every failure is
// OutcomeNotDelivered, and the connection is closed.
func (d *Destination) open(ctx context.Context) (*fencedConn, *smtp.Client, error) {
	dialer := net.Dialer{Timeout: d.cfg.connectTimeout}
	raw, err := dialer.DialContext(ctx, "tcp", d.addr)
	if err != nil {
		return nil, nil, fail(destination.OutcomeNotDelivered, "connect "+d.addr, err)
	}
	// The fence sits under TLS and go-smtp, so every deadline either sets
	// is held to the budget (fence.go).
	conn := &fencedConn{Conn: raw}
	conn.fence(budgetEnd(ctx))
	// Closing the socket is the one way to interrupt a blocked read.
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	session, err := d.negotiate(conn)
	if err != nil {
		conn.Close()
		return nil, nil, fail(destination.OutcomeNotDelivered, "session start", withCause(ctx, err))
	}
	// smtp.NewClient on our own connection, rather than smtp.Dial, so
	// that the connect timeout and ctx apply to the dial too.
	c := smtp.NewClient(session)
	c.CommandTimeout = d.cfg.commandTimeout
	if err := c.Hello(d.cfg.helloName); err != nil {
		c.Close()
		return nil, nil, fail(destination.OutcomeNotDelivered, "greeting", withCause(ctx, err))
	}
	if d.user != "" {
		if err := c.Auth(sasl.NewPlainClient("", d.user, d.pass)); err != nil {
			c.Close()
			return nil, nil, fail(destination.OutcomeNotDelivered, "auth", withCause(ctx, err))
		}
	}
	return conn, c, nil
}

// withCause adds why ctx ended to an error it caused.
func withCause(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%w (%v)", err, context.Cause(ctx))
	}
	return err
}

// staleSession reports whether an error at MAIL on a kept session means the
// server no longer holds that session: the connection is gone or silent,
// or the server said it is closing it (421, as a server does that times out
// an idle session). Any other reply is the server's verdict on this message.
func staleSession(err error) bool {
	var se *smtp.SMTPError
	if errors.As(err, &se) {
		return se.Code == 421
	}
	return true
}

// transact sends one message as one mail transaction (MAIL, RCPT, DATA) on
// a session that has greeted the server, and then keeps the session for the
// next message when the server accepted this one, or closes it. stale is
// true when a kept session turned out gone at MAIL and ctx is still live:
// nothing was sent, the session is closed, and the caller sends over a new
// one instead.
func (d *Destination) transact(ctx context.Context, conn *fencedConn, c *smtp.Client, m mailrender.Mail, transportID string, kept bool) (r destination.Receipt, stale bool, err error) {
	from, to, raw := m.From, m.To, m.Raw
	conn.fence(budgetEnd(ctx))
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	accepted := false
	// Only a session that ended in a clean 250, and was not closed by a
	// cancel, may carry the next message.
	defer func() { d.release(conn, c, accepted, stop() && accepted) }()
	c.CommandTimeout = d.cfg.commandTimeout
	c.SubmissionTimeout = d.cfg.dataTimeout
	var mopts *smtp.MailOptions
	if !mailrender.IsASCII(from) || !mailrender.IsASCII(to) {
		mopts = &smtp.MailOptions{UTF8: true}
	}
	if err := c.Mail(from, mopts); err != nil {
		if kept && ctx.Err() == nil && staleSession(err) {
			return destination.Receipt{}, true, nil
		}
		return destination.Receipt{}, false, fail(replyOutcome(err), "MAIL FROM", withCause(ctx, err))
	}
	if err := c.Rcpt(to, nil); err != nil {
		return destination.Receipt{}, false, fail(replyOutcome(err), "RCPT TO", withCause(ctx, err))
	}
	d.cfg.pause(ctx, PhaseData)
	w, err := c.Data()
	if err != nil {
		return destination.Receipt{}, false, fail(replyOutcome(err), "DATA", withCause(ctx, err))
	}
	// The body write has no deadline of its own in go-smtp; bound it here.
	conn.SetWriteDeadline(oswait.Deadline(d.cfg.commandTimeout))
	if _, err := w.Write(raw); err != nil {
		// The terminating "." is only written by Close, so the server
		// cannot have taken the message.
		return destination.Receipt{}, false, fail(destination.OutcomeNotDelivered, "message body", withCause(ctx, err))
	}
	// The commit point: the final "." goes out only within the budget. The
	// fence refuses any write after it; this check makes a send that got
	// here late (paused, say) stop before writing anything more.
	d.cfg.pause(ctx, PhaseCommit)
	if err := destination.MayCommit(ctx); err != nil {
		return destination.Receipt{}, false, fail(destination.OutcomeNotDelivered, "end of data", err)
	}
	// The write deadline stays on for the final flush of the body's tail and
	// "." (go-smtp writes them before it sets its own deadline for the
	// reply, and clears every deadline afterwards); the fence holds all of
	// them to the budget.
	resp, err := w.CloseWithResponse()
	if err != nil {
		var se *smtp.SMTPError
		if errors.As(err, &se) && (se.Code/100 == 4 || se.Code/100 == 5) {
			return destination.Receipt{}, false, fail(replyOutcome(err), "end of data", err)
		}
		// Lost or silent after the final ".": the server may have the
		// message. Only its records can tell.
		return destination.Receipt{}, false, fail(destination.OutcomeUnknown, "end of data", withCause(ctx, err))
	}
	at := d.cfg.clock.Now()
	accepted = true
	return destination.Receipt{TransportID: transportID, Response: "250 " + resp.StatusText, At: at}, false, nil
}

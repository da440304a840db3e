// Package testmailbox is a real SMTP server for rehearsals and tests: it
// stores every message it accepts in SQLite, answers queries about what
// arrived (by recipient, action key and Message-ID) through Go and a loopback
// JSON HTTP API, flags a second arrival for the same action key as a
// duplicate, and injects faults at the DATA stage — where a sender loses
// track of whether its message was taken.
//
// Counts always come from the store (SQL COUNT), never from a page of
// results, so a test that counts arrivals cannot be fooled by paging.
package testmailbox

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/emersion/go-smtp"

	"gatehouse/internal/clock"
)

// Credentials accepted by AUTH PLAIN when Config.RequireAuth is set and
// Config.AuthUsername/AuthPassword are not.
const (
	TestUsername = "gatehouse"
	TestPassword = "gatehouse"
)

// Defaults applied by Start to zero Config fields.
const (
	DefaultAddr            = "127.0.0.1:0"
	DefaultMaxMessageBytes = 10 << 20
	DefaultMaxRecipients   = 100
	DefaultReadTimeout     = 30 * time.Second
	DefaultDomain          = "mailbox.gatehouse.test"
)

// ErrNotFound is returned (wrapped) by Get for an id the mailbox does not hold.
var ErrNotFound = errors.New("message not found")

// ErrNotLoopback is returned (wrapped) by Start for a listen address that
// is not loopback when Config.AllowRemote is not set.
var ErrNotLoopback = errors.New("not a loopback address")

// Config configures a mailbox. The zero value is a working in-memory mailbox
// on loopback ports chosen by the system.
type Config struct {
	SMTPAddr string // SMTP listen address; default 127.0.0.1:0
	HTTPAddr string // HTTP API listen address; default 127.0.0.1:0
	NoHTTP   bool   // do not serve the HTTP API
	DBPath   string // SQLite file; empty keeps messages in memory

	Domain          string        // name in the greeting
	MaxMessageBytes int64         // larger messages get 552; default 10 MiB
	MaxRecipients   int           // more recipients get 452; default 100
	ReadTimeout     time.Duration // idle time before a session is dropped; default 30s
	RequireAuth     bool          // offer AUTH PLAIN and require it before MAIL
	AuthUsername    string        // default TestUsername
	AuthPassword    string        // default TestPassword
	Faults          []Fault       // faults in force from the start
	// Clock stamps arrivals and times the timed faults (delay_reply,
	// hold_354, stall_body, hold_then_store, a timed down); the system
	// clock when nil. With a fake clock a delayed reply comes, a held 354
	// or message is released, a stall ends and a timed down ends only when
	// the clock is advanced past it. Session read timeouts stay on the
	// wall clock: the kernel measures them.
	Clock clock.Clock

	// AllowRemote permits listen addresses that are not loopback. Without
	// it Start refuses them: the API deletes messages and injects faults.
	// With it an API token is required; one is generated when APIToken is
	// empty (read it back with Mailbox.APIToken).
	AllowRemote bool
	// APIToken, when set, must accompany every state-changing API call
	// (PUT and DELETE) as "Authorization: Bearer TOKEN"; reads stay open.
	APIToken string
	// HTTPNames are host names (or addresses) the HTTP API and web page
	// answer to besides their own: the listen address, the loopback names
	// when it is loopback, the TLS certificate's names. A request whose Host
	// is none of them gets 421 on every route (see Handler).
	HTTPNames []string

	// TLS offers (or requires) STARTTLS; off by default in Go, on in the
	// CLI. Without TLSCertFile/TLSKeyFile a self-signed certificate is
	// made at start (see CAFile).
	TLS         TLSMode
	TLSCertFile string
	TLSKeyFile  string
	// AllowInsecureAuth lets AUTH happen before STARTTLS (in clear text).
	AllowInsecureAuth bool
	// Debug, when set, receives the SMTP transcript of every session as
	// the server reads and writes it (after STARTTLS: the decrypted text).
	Debug io.Writer

	// ErrorLog receives the SMTP server's internal errors; nil discards them.
	ErrorLog *log.Logger
}

// Mailbox is a running test mailbox. Its methods are safe for concurrent use.
type Mailbox struct {
	cfg    Config
	store  *store
	server *smtp.Server
	ln     *switchListener
	faults *faultSet

	httpSrv *http.Server
	httpLn  net.Listener

	caFile string           // PEM a client trusts the mailbox by; "" without TLS
	cert   *tls.Certificate // the STARTTLS certificate; nil without TLS
	tmpDir string           // holds a generated certificate; removed by Close

	accepted, refused, dropped atomic.Int64
	// sessions counts the SMTP connections open now (see Stats.Sessions).
	sessions atomic.Int64

	// held counts the messages a timed fault holds now, and ended is
	// closed (and replaced) by EndHolds; holdsMu orders a hold's start
	// against EndHolds, so every hold either sees the channel closed or
	// begins after it.
	holdsMu sync.Mutex
	held    int64
	ended   chan struct{}

	downMu    sync.Mutex
	downTimer clock.Timer

	// holds counts the messages hold_then_store keeps out of the store,
	// so that Close stores them before it closes the store. holdMu orders
	// a hold's start against Close's start (see beginHold).
	holdMu sync.Mutex
	holds  sync.WaitGroup

	closing   chan struct{}
	closeOnce sync.Once
	closeErr  error
}

// Start opens the store, starts listening for SMTP (and HTTP, unless NoHTTP)
// and returns once both accept connections. ctx bounds only the start-up;
// the mailbox runs until Close.
func Start(ctx context.Context, cfg Config) (*Mailbox, error) {
	if cfg.SMTPAddr == "" {
		cfg.SMTPAddr = DefaultAddr
	}
	if cfg.HTTPAddr == "" {
		cfg.HTTPAddr = DefaultAddr
	}
	if cfg.MaxMessageBytes == 0 {
		cfg.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if cfg.MaxRecipients == 0 {
		cfg.MaxRecipients = DefaultMaxRecipients
	}
	if cfg.ReadTimeout == 0 {
		cfg.ReadTimeout = DefaultReadTimeout
	}
	if cfg.Domain == "" {
		cfg.Domain = DefaultDomain
	}
	if cfg.AuthUsername == "" && cfg.AuthPassword == "" {
		cfg.AuthUsername, cfg.AuthPassword = TestUsername, TestPassword
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.System{}
	}
	for _, f := range cfg.Faults {
		if err := f.Validate(); err != nil {
			return nil, err
		}
	}
	if err := checkTLSConfig(cfg); err != nil {
		return nil, err
	}
	if err := checkHTTPNames(cfg.HTTPNames); err != nil {
		return nil, err
	}
	if err := checkExposure(ctx, &cfg); err != nil {
		return nil, err
	}
	st, err := openStore(cfg.DBPath)
	if err != nil {
		return nil, err
	}
	m := &Mailbox{cfg: cfg, store: st, faults: newFaultSet(), closing: make(chan struct{}), ended: make(chan struct{})}

	m.ln, err = listenSwitch(ctx, cfg.SMTPAddr)
	if err != nil {
		st.close()
		return nil, err
	}
	s := smtp.NewServer(backend{m})
	if cfg.TLS != TLSOff {
		// Before the HTTP API starts: the certificate's names are names it answers to.
		if s.TLSConfig, err = m.setUpTLS(); err != nil {
			m.closeListeners()
			return nil, err
		}
		m.cert = &s.TLSConfig.Certificates[0]
	}
	if !cfg.NoHTTP {
		var lc net.ListenConfig
		m.httpLn, err = lc.Listen(ctx, "tcp", cfg.HTTPAddr)
		if err != nil {
			m.closeListeners()
			return nil, fmt.Errorf("listen http on %s: %w", cfg.HTTPAddr, err)
		}
		m.httpSrv = &http.Server{Handler: m.Handler(), ReadHeaderTimeout: 10 * time.Second}
		go m.httpSrv.Serve(m.httpLn)
	}
	s.Domain = cfg.Domain
	s.MaxMessageBytes = cfg.MaxMessageBytes
	s.MaxRecipients = cfg.MaxRecipients
	s.ReadTimeout = cfg.ReadTimeout
	s.WriteTimeout = cfg.ReadTimeout
	s.EnableSMTPUTF8 = true
	// go-smtp neither advertises nor accepts AUTH before STARTTLS unless
	// this is set.
	s.AllowInsecureAuth = cfg.AllowInsecureAuth
	if cfg.Debug != nil {
		s.Debug = cfg.Debug
	}
	// Assign the *log.Logger only when set: a nil pointer in the Logger
	// interface would not compare equal to nil and would panic on use.
	s.ErrorLog = log.New(io.Discard, "", 0)
	if cfg.ErrorLog != nil {
		s.ErrorLog = cfg.ErrorLog
	}
	m.server = s
	go s.Serve(faultListener{m.ln, m})

	if err := m.SetFaults(cfg.Faults); err != nil {
		m.Close()
		return nil, err
	}
	return m, nil
}

// checkExposure refuses non-loopback listen addresses unless AllowRemote is
// set, and gives an exposed mailbox its API token. It runs before anything
// is bound, so a refused address is never listened on, not even briefly.
func checkExposure(ctx context.Context, cfg *Config) error {
	if cfg.AllowRemote {
		if cfg.APIToken == "" {
			cfg.APIToken = randomHex(16)
		}
		return nil
	}
	addrs := []string{cfg.SMTPAddr}
	if !cfg.NoHTTP {
		addrs = append(addrs, cfg.HTTPAddr)
	}
	for _, a := range addrs {
		if err := loopbackOnly(ctx, a); err != nil {
			return fmt.Errorf("listen on %s: %w; the mailbox's API deletes messages and injects faults, so exposing it needs AllowRemote (gatehouse mailbox serve --allow-remote), which requires an API token", a, err)
		}
	}
	return nil
}

// loopbackOnly reports an error unless every address addr can bind to is
// loopback. An empty host means every interface.
func loopbackOnly(ctx context.Context, addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("bad listen address: %w", err)
	}
	if host == "" {
		return fmt.Errorf("%w: an empty host listens on every interface", ErrNotLoopback)
	}
	if ip := net.ParseIP(host); ip != nil {
		if !ip.IsLoopback() {
			return fmt.Errorf("%w: %s", ErrNotLoopback, ip)
		}
		return nil
	}
	ips, err := net.DefaultResolver.LookupIPAddr(ctx, host)
	if err != nil {
		return fmt.Errorf("resolve %s: %w", host, err)
	}
	for _, ip := range ips {
		if !ip.IP.IsLoopback() {
			return fmt.Errorf("%w: %s resolves to %s", ErrNotLoopback, host, ip.IP)
		}
	}
	return nil
}

// APIToken is the token state-changing API calls must carry, "" when none
// is required.
func (m *Mailbox) APIToken() string { return m.cfg.APIToken }

// SMTPAddr is the host:port the SMTP server listens on (also while down).
func (m *Mailbox) SMTPAddr() string { return m.ln.addr }

// HTTPAddr is the host:port of the HTTP API, or "" when it is not served.
func (m *Mailbox) HTTPAddr() string {
	if m.httpLn == nil {
		return ""
	}
	return m.httpLn.Addr().String()
}

// APIURL is the base URL of the HTTP API (http://host:port), or "".
func (m *Mailbox) APIURL() string {
	if m.httpLn == nil {
		return ""
	}
	return "http://" + m.HTTPAddr()
}

// Target is the destination target the gate uses to send here, with
// everything a client needs: the query API when it is served, and with TLS
// on, tls=require and the certificate to verify the mailbox by:
// smtp://host:port?api=http://host:port&tls=require&ca=/path/mailbox-ca.pem.
func (m *Mailbox) Target() string {
	var q []string
	if api := m.APIURL(); api != "" {
		q = append(q, "api="+api)
	}
	if m.caFile != "" {
		q = append(q, "tls=require", "ca="+url.QueryEscape(m.caFile))
	}
	t := "smtp://" + m.SMTPAddr()
	if len(q) > 0 {
		t += "?" + strings.Join(q, "&")
	}
	return t
}

// closeListeners undoes a start that failed after listening.
func (m *Mailbox) closeListeners() {
	m.ln.Close()
	if m.httpSrv != nil {
		m.httpSrv.Close()
	}
	m.store.close()
	if m.tmpDir != "" {
		os.RemoveAll(m.tmpDir)
	}
}

// Close stops the servers and closes the store. Replies still delayed by a
// fault are abandoned (delay_reply: the message is stored; hold_354: the
// sender never got to send it), and a message whose read stall_body
// stalled is refused, not stored. A message held by hold_then_store is
// stored at once, as a relay that has a message keeps it through its own
// shutdown: Close returns after it is on record. It is safe to call more
// than once.
func (m *Mailbox) Close() error {
	m.closeOnce.Do(func() {
		m.holdMu.Lock()
		close(m.closing)
		m.holdMu.Unlock()
		m.downMu.Lock()
		if m.downTimer != nil {
			m.downTimer.Stop()
		}
		m.downMu.Unlock()
		m.ln.Close()
		if err := m.server.Close(); err != nil && !errors.Is(err, smtp.ErrServerClosed) {
			m.closeErr = fmt.Errorf("close smtp server: %w", err)
		}
		// Held messages end their hold on m.closing and are stored now,
		// while the store still takes them.
		m.holds.Wait()
		if m.httpSrv != nil {
			if err := m.httpSrv.Close(); err != nil && m.closeErr == nil {
				m.closeErr = fmt.Errorf("close http server: %w", err)
			}
		}
		m.store.close()
		if m.tmpDir != "" {
			if err := os.RemoveAll(m.tmpDir); err != nil && m.closeErr == nil {
				m.closeErr = fmt.Errorf("remove the mailbox certificate: %w", err)
			}
		}
	})
	return m.closeErr
}

// wait holds a message for d on the mailbox's clock, or less when the
// mailbox closes, abandon (which may be nil) is closed, or EndHolds ends
// the hold. It reports whether the hold ran its course (d passed, or it
// was ended), rather than being cut short by a close; while it lasts the
// message counts in Stats.Held.
func (m *Mailbox) wait(d time.Duration, abandon <-chan struct{}) bool {
	m.holdsMu.Lock()
	ended := m.ended
	m.held++
	m.holdsMu.Unlock()
	defer func() {
		m.holdsMu.Lock()
		m.held--
		m.holdsMu.Unlock()
	}()
	t, fired := m.cfg.Clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-fired:
		return true
	case <-ended:
		return true
	case <-m.closing:
		return false
	case <-abandon:
		return false
	}
}

// heldNow is how many messages a timed fault holds now.
func (m *Mailbox) heldNow() int64 {
	m.holdsMu.Lock()
	defer m.holdsMu.Unlock()
	return m.held
}

// EndHolds ends every hold of a timed message fault in force now, as if
// its time had passed: a held 354 is sent, a stalled body is read on, a
// message held by hold_then_store is stored and a delayed reply is given.
// Holds that begin afterwards run their full time. It returns how many
// holds it ended. A test that keeps a session held for as long as it
// needs (a long duration) ends it here at the moment it chooses.
func (m *Mailbox) EndHolds() int {
	m.holdsMu.Lock()
	defer m.holdsMu.Unlock()
	close(m.ended)
	m.ended = make(chan struct{})
	return int(m.held)
}

// beginHold registers a message hold_then_store is about to keep out of
// the store; the caller calls m.holds.Done once it is stored. It reports
// false once Close has begun: the message is then stored without a hold.
// Taking holdMu makes every registration happen before Close's Wait, or
// not at all.
func (m *Mailbox) beginHold() bool {
	m.holdMu.Lock()
	defer m.holdMu.Unlock()
	select {
	case <-m.closing:
		return false
	default:
	}
	m.holds.Add(1)
	return true
}

// Filter selects messages. Empty fields match everything; Limit 0 means no
// limit (Go API) and Offset skips that many of the oldest matches.
type Filter struct {
	To        string // an envelope recipient, case-insensitive, brackets optional
	ActionKey string // the mailheader.ActionKey field, exact
	MessageID string // Message-ID, with or without angle brackets
	Limit     int
	Offset    int
}

// Message is one stored arrival. Raw is filled only by Get.
type Message struct {
	ID         int64     `json:"id"`
	ReceivedAt time.Time `json:"received_at"`
	From       string    `json:"from"` // envelope sender
	To         []string  `json:"to"`   // envelope recipients
	Subject    string    `json:"subject"`
	MessageID  string    `json:"message_id"` // without angle brackets
	ActionKey  string    `json:"action_key"`
	Attempt    string    `json:"attempt"` // the mailheader.Attempt field as sent
	Size       int64     `json:"size"`
	// Duplicate marks an arrival whose action key had already arrived.
	Duplicate bool   `json:"duplicate"`
	Raw       []byte `json:"-"`
}

// List returns the number of all messages matching f (ignoring Limit and
// Offset) and the requested page, oldest first.
func (m *Mailbox) List(ctx context.Context, f Filter) (int, []Message, error) {
	total, err := m.store.count(ctx, f)
	if err != nil {
		return 0, nil, err
	}
	msgs, err := m.store.list(ctx, f)
	if err != nil {
		return 0, nil, err
	}
	return total, msgs, nil
}

// Epoch returns the id of the store's current life: drawn anew when the
// store is created (on every start of an in-memory mailbox) and by Clear.
// A sender that records it at hand-over can later tell "the mailbox never
// got my message" from "the mailbox has forgotten what it got".
func (m *Mailbox) Epoch(ctx context.Context) (string, error) { return m.store.epoch(ctx) }

// Count returns how many stored messages match f (Limit and Offset ignored).
func (m *Mailbox) Count(ctx context.Context, f Filter) (int, error) {
	return m.store.count(ctx, f)
}

// Get returns one message with its raw bytes; an unknown id gives an error
// wrapping ErrNotFound.
func (m *Mailbox) Get(ctx context.Context, id int64) (Message, error) {
	return m.store.get(ctx, id)
}

// WaitFor blocks until at least n stored messages match f, and returns the
// count it saw. It wakes on every store, not on a timer; it gives up with
// ctx's error when ctx ends first.
func (m *Mailbox) WaitFor(ctx context.Context, f Filter, n int) (int, error) {
	for {
		changed := m.store.changes()
		got, err := m.store.count(ctx, f)
		if err != nil {
			return got, err
		}
		if got >= n {
			return got, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return got, fmt.Errorf("waiting for %d messages (have %d): %w", n, got, ctx.Err())
		case <-m.closing:
			return got, fmt.Errorf("waiting for %d messages (have %d): mailbox closed", n, got)
		}
	}
}

// Clear deletes every message, forgets every action key (the next arrival of
// any key is a first arrival again), begins a new epoch and resets the
// statistics. Configured faults stay. It returns how many messages were deleted.
func (m *Mailbox) Clear(ctx context.Context) (int, error) {
	n, err := m.store.clear(ctx)
	if err != nil {
		return 0, err
	}
	m.accepted.Store(0)
	m.refused.Store(0)
	m.dropped.Store(0)
	m.faults.resetCounts()
	return n, nil
}

// Stats are the mailbox's counters since start (or the last Clear).
type Stats struct {
	// Epoch is the store's current epoch (see Mailbox.Epoch).
	Epoch string `json:"epoch"`
	// Accepted counts messages stored, including those whose reply a fault
	// dropped or delayed.
	Accepted int64 `json:"accepted"`
	// Refused counts messages answered with a rejection (oversize,
	// malformed, injected reject, store failure); none of them was stored.
	Refused int64 `json:"refused"`
	// Dropped counts messages stored whose connection was then closed
	// without a reply (accept_then_drop).
	Dropped int64 `json:"dropped"`
	// Stored is COUNT(*) of the store right now.
	Stored int64 `json:"stored"`
	// Duplicates is how many stored arrivals carry an action key that had
	// already arrived; DuplicateActionKeys is how many keys that concerns.
	Duplicates          int64 `json:"duplicates"`
	DuplicateActionKeys int64 `json:"duplicate_action_keys"`
	// FaultsFired counts fired faults per kind (every kind is present).
	FaultsFired map[FaultKind]int64 `json:"faults_fired"`
	// Down reports whether the SMTP listener is currently closed by a fault.
	Down bool `json:"down"`
	// Held is how many messages a timed fault (hold_354, stall_body,
	// hold_then_store, delay_reply) holds now.
	Held int64 `json:"held"`
	// Sessions is how many SMTP connections are open now: accepted and
	// not yet closed. A message's fate is settled only once its session
	// has ended (a held 354 or a stalled body may still be read, stored
	// or refused), so a test that wants the last word on what arrived
	// waits for its senders to end and this to reach 0.
	Sessions int64 `json:"sessions"`
}

// Stats returns the counters; the stored and duplicate figures are read from
// the store itself.
func (m *Mailbox) Stats(ctx context.Context) (Stats, error) {
	stored, dups, dupKeys, err := m.store.counts(ctx)
	if err != nil {
		return Stats{}, err
	}
	epoch, err := m.store.epoch(ctx)
	if err != nil {
		return Stats{}, err
	}
	return Stats{
		Epoch:               epoch,
		Accepted:            m.accepted.Load(),
		Refused:             m.refused.Load(),
		Dropped:             m.dropped.Load(),
		Stored:              stored,
		Duplicates:          dups,
		DuplicateActionKeys: dupKeys,
		FaultsFired:         m.faults.firedCounts(),
		Down:                !m.ln.isUp(),
		Held:                m.heldNow(),
		Sessions:            m.sessions.Load(),
	}, nil
}

// Faults returns the faults in force and what each has done. Faults whose
// Count is used up are no longer listed (their firings stay in Stats).
func (m *Mailbox) Faults() []FaultStatus { return m.faults.status() }

// SetFaults replaces every fault. A down fault closes the SMTP listener at
// once; without one, a closed listener is opened again.
func (m *Mailbox) SetFaults(faults []Fault) error {
	for _, f := range faults {
		if err := f.Validate(); err != nil {
			return err
		}
	}
	m.faults.replace(faults)
	return m.applyDown()
}

// AddFault adds one fault after those already set.
func (m *Mailbox) AddFault(f Fault) error {
	if err := f.Validate(); err != nil {
		return err
	}
	m.faults.add(f)
	return m.applyDown()
}

// ClearFaults removes every fault and brings the listener back up.
func (m *Mailbox) ClearFaults() error { return m.SetFaults(nil) }

// applyDown makes the listener match the configured faults.
func (m *Mailbox) applyDown() error {
	m.downMu.Lock()
	defer m.downMu.Unlock()
	if m.downTimer != nil {
		m.downTimer.Stop()
		m.downTimer = nil
	}
	f, down := m.faults.down()
	if !down {
		return m.ln.up()
	}
	if m.ln.down() {
		m.faults.countDown()
	}
	if f.Duration > 0 {
		m.faults.downUntil(m.cfg.Clock.Now().Add(f.Duration).UTC().Truncate(time.Millisecond))
		m.downTimer = m.cfg.Clock.AfterFunc(f.Duration, func() {
			m.faults.removeDown()
			if err := m.applyDown(); err != nil && m.cfg.ErrorLog != nil {
				m.cfg.ErrorLog.Printf("testmailbox: coming back up: %v", err)
			}
		})
	}
	return nil
}

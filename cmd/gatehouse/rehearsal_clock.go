package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	neturl "net/url"
	"os"
	"path/filepath"
	"sync"
	"time"

	"gatehouse/internal/clock"
	"gatehouse/ledger"
)

// rehearsalClockEnv names the clock of a rehearsal that started this
// process (a team's workflow run by a scenario's run_workflow step). The
// rehearsal's ledger runs on a pretend clock; a gate verb run inside it
// must read the same clock, or its history, leases and presence would mix
// two times and the rehearsal's report would change from run to run.
const rehearsalClockEnv = "GATEHOUSE_REHEARSAL_CLOCK"

// rehearsalClock asks the rehearsal's clock URL for the time on every read.
// If the rehearsal stops answering it keeps the last time it was told
// rather than jump to the wall clock.
type rehearsalClock struct {
	url    string
	client *http.Client
	mu     sync.Mutex
	last   time.Time
}

// ledgerOptions are the options every gate verb opens the ledger with: the
// rehearsal's clock when $GATEHOUSE_REHEARSAL_CLOCK names one.
//
// A pretend clock must never reach a real ledger (its leases and its
// history would follow someone else's time, and an attempt still in
// flight could be judged absent). Anyone on the host can serve a clock, so
// what the clock says is no evidence: the ledger opens on it only if its
// own records mark it as a rehearsal's (ledger.WithRehearsalClock, refused
// otherwise; see notRehearsal). The clock must also be served on this
// machine's loopback and name the very ledger the verb opens.
func ledgerOptions(ledgerPath string) ([]ledger.Option, error) {
	leaseOpts, err := leaseOption()
	if err != nil {
		return nil, err
	}
	raw := os.Getenv(rehearsalClockEnv)
	if raw == "" {
		return leaseOpts, nil
	}
	u, err := neturl.Parse(raw)
	if err != nil || u.Scheme != "http" || !loopbackHost(u.Hostname()) {
		return nil, fmt.Errorf("$%s=%q: a rehearsal's clock is served over http on this machine's loopback; unset it outside a rehearsal", rehearsalClockEnv, raw)
	}
	c := &rehearsalClock{url: raw, client: &http.Client{Timeout: 5 * time.Second}}
	t, lease, served, err := c.askLedger()
	if err != nil {
		return nil, fmt.Errorf("$%s: %w; unset it outside a rehearsal (nothing was recorded)", rehearsalClockEnv, err)
	}
	if !sameLedger(served, ledgerPath) {
		return nil, fmt.Errorf("$%s is the clock of the rehearsal ledger %s, not of %s; unset it outside a rehearsal",
			rehearsalClockEnv, ledger.RedactLocation(served), ledger.RedactLocation(ledgerPath))
	}
	c.last = t
	opts := []ledger.Option{ledger.WithRehearsalClock(c)}
	if lease > 0 {
		// The rehearsal's restart runs out its own lease; attempts this
		// process starts must carry the same one.
		opts = append(opts, ledger.WithLease(lease))
	}
	return opts, nil
}

// notRehearsal turns the ledger's refusal of a rehearsal's clock into the
// command line's: refused at the door (exit 2), naming the variable, which
// outside a rehearsal has no business being set.
func notRehearsal(err error) error {
	if !errors.Is(err, ledger.ErrNotRehearsal) {
		return err
	}
	return &exitError{code: exitUsage, err: fmt.Errorf("$%s is set, but a rehearsal's clock is honoured only on the ledger its rehearsal created, and this is %w; unset it outside a rehearsal (nothing was recorded)",
		rehearsalClockEnv, err)}
}

// loopbackHost reports whether host is this machine's loopback.
func loopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// sameLedger compares two ledger locations, a file by its absolute path.
func sameLedger(a, b string) bool {
	if a == "" || b == "" {
		return false
	}
	if ledger.IsPostgres(a) || ledger.IsPostgres(b) {
		return a == b
	}
	aa, err1 := filepath.Abs(a)
	bb, err2 := filepath.Abs(b)
	return err1 == nil && err2 == nil && aa == bb
}

// askLedger is ask, with the ledger the clock belongs to.
func (c *rehearsalClock) askLedger() (time.Time, time.Duration, string, error) {
	resp, err := c.client.Get(c.url)
	if err != nil {
		return time.Time{}, 0, "", fmt.Errorf("ask the rehearsal's clock: %w", err)
	}
	defer resp.Body.Close()
	var body struct {
		Ledger string `json:"ledger"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return time.Time{}, 0, "", fmt.Errorf("the rehearsal's clock at %s answered %s, not a time", c.url, resp.Status)
	}
	t, lease, err := c.ask()
	return t, lease, body.Ledger, err
}

// ask reads the rehearsal's time and, when it serves one, its lease.
func (c *rehearsalClock) ask() (time.Time, time.Duration, error) {
	resp, err := c.client.Get(c.url)
	if err != nil {
		return time.Time{}, 0, fmt.Errorf("ask the rehearsal's clock: %w", err)
	}
	defer resp.Body.Close()
	var body struct {
		Now   time.Time `json:"now"`
		Lease string    `json:"lease"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || resp.StatusCode != http.StatusOK || body.Now.IsZero() {
		return time.Time{}, 0, fmt.Errorf("the rehearsal's clock at %s answered %s, not a time", c.url, resp.Status)
	}
	var lease time.Duration
	if body.Lease != "" {
		if lease, err = time.ParseDuration(body.Lease); err != nil || lease <= 0 {
			return time.Time{}, 0, fmt.Errorf("the rehearsal's clock at %s serves lease %q, not a duration", c.url, body.Lease)
		}
	}
	return body.Now.UTC(), lease, nil
}

// Now implements clock.Clock.
func (c *rehearsalClock) Now() time.Time {
	t, _, err := c.ask()
	c.mu.Lock()
	defer c.mu.Unlock()
	if err == nil {
		c.last = t
	}
	return c.last
}

// leaseEnv sets the attempt lease of the attempts this process starts
// (default 2 minutes): how long an attempt may stay in flight before
// recovery, on any host, may declare its outcome unknown. It must exceed
// the destination's longest send.
const leaseEnv = "GATEHOUSE_LEASE"

func leaseOption() ([]ledger.Option, error) {
	raw := os.Getenv(leaseEnv)
	if raw == "" {
		return nil, nil
	}
	d, err := time.ParseDuration(raw)
	if err != nil || d < time.Second {
		return nil, fmt.Errorf("$%s=%q: want a duration of at least 1s, such as 30s", leaseEnv, raw)
	}
	return []ledger.Option{ledger.WithLease(d)}, nil
}

// NewTimer implements clock.Clock on the wall clock: a process inside a
// rehearsal reads the rehearsal's time, but cannot be woken by it (the
// rehearsal's clock moves in another process), so its timers (the bound
// on a send) run in real time.
func (c *rehearsalClock) NewTimer(d time.Duration) (clock.Timer, <-chan time.Time) {
	return clock.System{}.NewTimer(d)
}

// AfterFunc implements clock.Clock on the wall clock (see NewTimer).
func (c *rehearsalClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	return clock.System{}.AfterFunc(d, f)
}

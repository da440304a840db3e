package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"sync"
	"time"

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
func ledgerOptions() ([]ledger.Option, error) {
	url := os.Getenv(rehearsalClockEnv)
	if url == "" {
		return nil, nil
	}
	c := &rehearsalClock{url: url, client: &http.Client{Timeout: 5 * time.Second}}
	t, lease, err := c.ask()
	if err != nil {
		return nil, fmt.Errorf("$%s: %w", rehearsalClockEnv, err)
	}
	c.last = t
	opts := []ledger.Option{ledger.WithClock(c)}
	if lease > 0 {
		// The rehearsal's restart runs out its own lease; attempts this
		// process starts must carry the same one.
		opts = append(opts, ledger.WithLease(lease))
	}
	return opts, nil
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

// Now implements ledger.Clock.
func (c *rehearsalClock) Now() time.Time {
	t, _, err := c.ask()
	c.mu.Lock()
	defer c.mu.Unlock()
	if err == nil {
		c.last = t
	}
	return c.last
}

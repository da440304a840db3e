// Package fakes holds fictional source systems and test doubles: a
// controllable clock, a destination with scripted outcomes, and (for
// rehearsals) a helpdesk and a CRM.
package fakes

import (
	"sync"
	"time"
)

// Clock is a controllable clock. It only moves when told to, so leases,
// presence TTLs and scenario steps never depend on the wall clock.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock starts a clock at t (UTC).
func NewClock(t time.Time) *Clock { return &Clock{now: t.UTC()} }

// Now returns the clock's current time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// Set moves the clock to t.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	c.now = t.UTC()
	c.mu.Unlock()
}

// Package fakes holds fictional source systems and test doubles: a
// controllable clock, a destination with scripted outcomes, and (for
// rehearsals) a helpdesk and a CRM.
package fakes

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"gatehouse/internal/clock"
)

// Clock is a controllable clock.Clock. It only moves when told to, so
// leases, presence TTLs, timed faults and scenario steps never depend on
// the wall clock; its timers fire when Advance or Set moves it past them.
type Clock struct {
	mu      sync.Mutex
	now     time.Time
	timers  []*fakeTimer
	started chan struct{} // closed and replaced whenever a timer starts
}

var _ clock.Clock = (*Clock)(nil)

// NewClock starts a clock at t (UTC).
func NewClock(t time.Time) *Clock { return &Clock{now: t.UTC()} }

// Now returns the clock's current time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d and fires the timers now due. The
// functions of due AfterFunc timers have run when it returns, so a test
// sees their effect at once.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	due := c.dueLocked()
	c.mu.Unlock()
	fire(due)
}

// Set moves the clock to t and fires the timers now due, as Advance does.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	c.now = t.UTC()
	due := c.dueLocked()
	c.mu.Unlock()
	fire(due)
}

// Pending is how many timers wait to fire.
func (c *Clock) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

// BlockUntil waits until at least n timers wait to fire, or ctx ends: a
// test advances the clock once the code under test has started the timer
// it means to fire.
func (c *Clock) BlockUntil(ctx context.Context, n int) error {
	for {
		c.mu.Lock()
		pending, started := len(c.timers), c.startedLocked()
		c.mu.Unlock()
		if pending >= n {
			return nil
		}
		select {
		case <-started:
		case <-ctx.Done():
			return fmt.Errorf("waiting for %d timers (have %d): %w", n, pending, ctx.Err())
		}
	}
}

// NewTimer implements clock.Clock.
func (c *Clock) NewTimer(d time.Duration) (clock.Timer, <-chan time.Time) {
	ch := make(chan time.Time, 1)
	t := c.add(d, func(now time.Time) { ch <- now })
	return t, ch
}

// AfterFunc implements clock.Clock: f runs in the goroutine that moves
// the clock past it (see Advance); one due at once (d <= 0) runs in its
// own goroutine, as f may take locks its caller holds.
func (c *Clock) AfterFunc(d time.Duration, f func()) clock.Timer {
	if d <= 0 {
		go f()
		return &fakeTimer{c: c}
	}
	return c.add(d, func(time.Time) { f() })
}

func (c *Clock) add(d time.Duration, fn func(time.Time)) *fakeTimer {
	c.mu.Lock()
	t := &fakeTimer{c: c, when: c.now.Add(d), fn: fn}
	c.timers = append(c.timers, t)
	close(c.startedLocked())
	c.started = make(chan struct{})
	due := c.dueLocked() // a timer for d <= 0 fires at once
	c.mu.Unlock()
	fire(due)
	return t
}

// startedLocked is the channel closed when the next timer starts (made
// here too, so a zero Clock works).
func (c *Clock) startedLocked() chan struct{} {
	if c.started == nil {
		c.started = make(chan struct{})
	}
	return c.started
}

// dueLocked removes and returns every due timer, earliest first, stamped
// with the time it fires at.
func (c *Clock) dueLocked() []firing {
	sort.SliceStable(c.timers, func(i, j int) bool { return c.timers[i].when.Before(c.timers[j].when) })
	var due []firing
	for len(c.timers) > 0 && !c.timers[0].when.After(c.now) {
		due = append(due, firing{c.timers[0], c.now})
		c.timers = c.timers[1:]
	}
	return due
}

type firing struct {
	t  *fakeTimer
	at time.Time
}

// fire runs due timers outside the clock's lock, so that a function may
// read the clock or start another timer.
func fire(due []firing) {
	for _, f := range due {
		f.t.fn(f.at)
	}
}

type fakeTimer struct {
	c    *Clock
	when time.Time
	fn   func(time.Time)
}

// Stop implements clock.Timer.
func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	for i, o := range t.c.timers {
		if o == t {
			t.c.timers = append(t.c.timers[:i], t.c.timers[i+1:]...)
			return true
		}
	}
	return false
}

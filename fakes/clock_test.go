package fakes

import (
	"context"
	"testing"
	"time"
)

var t0 = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)

func TestClockTimersFireWhenAdvancedPastThem(t *testing.T) {
	c := NewClock(t0)
	_, fired := c.NewTimer(2 * time.Second)
	ran := 0
	c.AfterFunc(time.Second, func() { ran++ })
	stopped := c.AfterFunc(time.Second, func() { t.Error("a stopped timer ran") })
	if !stopped.Stop() || stopped.Stop() {
		t.Error("Stop reports wrongly")
	}

	c.Advance(999 * time.Millisecond)
	select {
	case <-fired:
		t.Fatal("timer fired early")
	default:
	}
	if ran != 0 {
		t.Fatal("AfterFunc ran early")
	}
	c.Advance(time.Millisecond)
	if ran != 1 {
		t.Fatalf("AfterFunc ran %d times once due; want 1, before Advance returns", ran)
	}
	c.Set(t0.Add(5 * time.Second))
	select {
	case at := <-fired:
		if !at.Equal(t0.Add(5 * time.Second)) {
			t.Errorf("timer sent %v, want the clock's time when it fired", at)
		}
	default:
		t.Fatal("timer did not fire when the clock passed it")
	}
	if c.Pending() != 0 {
		t.Errorf("%d timers left", c.Pending())
	}
}

func TestClockBlockUntil(t *testing.T) {
	c := NewClock(t0)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	go c.NewTimer(time.Minute)
	if err := c.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	short, cancelShort := context.WithCancel(ctx)
	cancelShort()
	if err := c.BlockUntil(short, 2); err == nil {
		t.Fatal("BlockUntil(2) returned with one timer")
	}
}

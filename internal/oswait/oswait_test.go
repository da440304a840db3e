package oswait

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestPauseEndsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Pause(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("Pause on a cancelled context = %v, want context.Canceled", err)
	}
	if err := Pause(context.Background(), 0); err != nil {
		t.Fatalf("Pause(0) = %v", err)
	}
}

func TestBudget(t *testing.T) {
	if NewBudget(time.Hour).Spent() {
		t.Error("an hour's budget is spent at once")
	}
	if !NewBudget(-time.Nanosecond).Spent() {
		t.Error("a budget in the past is not spent")
	}
	if d := time.Until(Deadline(time.Minute)); d <= 0 || d > time.Minute {
		t.Errorf("Deadline(1m) is %v away", d)
	}
}

func TestStopwatch(t *testing.T) {
	s := StartStopwatch()
	if err := Pause(context.Background(), 5*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if d := s.Elapsed(); d < 5*time.Millisecond || d > time.Minute {
		t.Errorf("a 5ms pause measured %v", d)
	}
}

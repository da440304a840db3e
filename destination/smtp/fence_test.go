package smtp_test

import (
	"context"
	"testing"
	"time"

	"gatehouse/destination"
	smtpdest "gatehouse/destination/smtp"
	"gatehouse/testmailbox"
)

// stalledCtx is a send's context as a paused process finds it on waking:
// its deadline has passed, but the goroutine that would cancel it has not
// run yet, so Done is still open. Only the deadline tells the sender to
// stop, which is what the fence must honour.
type stalledCtx struct {
	context.Context
	end time.Time
}

func (c stalledCtx) Deadline() (time.Time, bool) { return c.end, true }

// TestPausedSenderNeverCommitsLate: a sender held at a phase of its send
// (waiting for 354, or with the body written and the final "." not yet)
// until after its budget's end, and woken with its context not yet
// cancelled, writes nothing more: the message is not delivered and never
// arrives, however the pause and the cancellation interleave. It fails if
// the check before the final "." and the socket's fence are both removed.
func TestPausedSenderNeverCommitsLate(t *testing.T) {
	for _, phase := range []smtpdest.Phase{smtpdest.PhaseData, smtpdest.PhaseCommit} {
		t.Run(string(phase), func(t *testing.T) {
			mb, err := testmailbox.Start(context.Background(), testmailbox.Config{})
			if err != nil {
				t.Fatal(err)
			}
			defer mb.Close()
			end := time.Now().Add(300 * time.Millisecond)
			paused := make(chan struct{}, 1)
			d, err := smtpdest.New(mb.Target(), smtpdest.WithPoolSize(0), smtpdest.WithPause(func(_ context.Context, p smtpdest.Phase) {
				if p != phase {
					return
				}
				paused <- struct{}{}
				// The process stands still until its budget is over.
				<-time.After(time.Until(end) + 50*time.Millisecond)
			}))
			if err != nil {
				t.Fatal(err)
			}
			msg := newMessage("paused-"+string(phase), 1)
			_, err = d.Gate().Send(stalledCtx{Context: ctxT(t), end: end}, msg)
			<-paused
			if o := destination.ClassifyDelivery(err); o != destination.OutcomeNotDelivered {
				t.Fatalf("paused past its budget at %s: outcome %s (%v), want not delivered", phase, o, err)
			}
			// A message sent after it arrives; the paused one never does.
			late := newMessage("after-"+string(phase), 1)
			if _, err := d.Gate().Send(ctxT(t), late); err != nil {
				t.Fatal(err)
			}
			if n, err := mb.Count(ctxT(t), testmailbox.Filter{ActionKey: late.ActionKey}); err != nil || n != 1 {
				t.Fatalf("the next message: %d arrived (%v), want 1", n, err)
			}
			if n, err := mb.Count(ctxT(t), testmailbox.Filter{ActionKey: msg.ActionKey}); err != nil || n != 0 {
				t.Fatalf("the paused message arrived %d times (%v), want never", n, err)
			}
		})
	}
}

// TestSendWithinItsBudgetIsDelivered: the fence costs nothing to a send
// that finishes in time, on a fresh session and on a kept one.
func TestSendWithinItsBudgetIsDelivered(t *testing.T) {
	mb, err := testmailbox.Start(context.Background(), testmailbox.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer mb.Close()
	d, err := smtpdest.New(mb.Target())
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for i := range 3 {
		ctx, cancel := context.WithTimeout(ctxT(t), 10*time.Second)
		msg := newMessage("in-budget", i+1)
		if _, err := d.Gate().Send(ctx, msg); err != nil {
			t.Fatalf("send %d: %v", i+1, err)
		}
		cancel()
	}
	if n, _ := mb.Count(ctxT(t), testmailbox.Filter{ActionKey: newMessage("in-budget", 1).ActionKey}); n != 3 {
		t.Fatalf("%d arrived, want 3", n)
	}
}

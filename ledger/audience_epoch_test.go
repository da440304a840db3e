package ledger_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"

	"gatehouse/destination"
	"gatehouse/destination/fake"
	"gatehouse/ledger"
)

// clearing is a destination whose records are cleared (a new epoch) at
// seeded moments, each right after a message was stored; it remembers the
// epoch each message was handed over in.
type clearing struct {
	*fake.Destination
	mu     sync.Mutex
	rng    *rand.Rand
	epoch  int
	clears int
	sentIn map[string]int // transport ID → epoch it was handed over in
}

var _ destination.EpochReporter = (*clearing)(nil)

func (c *clearing) Epoch(context.Context) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return "e" + strconv.Itoa(c.epoch), nil
}

func (c *clearing) Send(ctx context.Context, msg destination.Message) (destination.Receipt, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, err := c.Destination.Send(ctx, msg)
	c.sentIn[msg.TransportID] = c.epoch
	if c.rng.IntN(15) == 0 {
		c.epoch++
		c.clears++
	}
	return r, err
}

// TestAudienceSendRecordsAnEpochReadBeforeItsHandOver: while a pipelined
// send runs, the destination's records are cleared now and then. Every
// attempt must record an epoch read before its message was handed over,
// never a later one: a later epoch would let reconciliation take the
// cleared records' silence for the message's absence. The batch's epoch
// read runs in the background, ahead of its consent reads
// (GATEHOUSE_RACE_SEED repeats a run).
func TestAudienceSendRecordsAnEpochReadBeforeItsHandOver(t *testing.T) {
	rng := rand.New(rand.NewPCG(raceSeed(t), 0))
	for round := range 4 {
		t.Run(fmt.Sprint(round), func(t *testing.T) {
			w := newWorld(t)
			dir := bigRelease(t, w, "spring", 150)
			d := &clearing{Destination: w.dest, rng: rng, sentIn: map[string]int{}}
			req := ledger.AudienceSend{ReleaseID: "spring", Actor: "notice-bot", Concurrency: 1 + rng.IntN(8), Batch: 1 + rng.IntN(40)}
			s, err := w.l.SendAudience(w.ctx, req, d, dir)
			w.must(err)
			rows, err := w.l.AudienceRows(w.ctx, "spring", ledger.RowEligible, 1000, 0)
			w.must(err)
			checked := 0
			for _, r := range rows {
				atts, err := w.l.Attempts(w.ctx, r.ActionKey)
				w.must(err)
				for _, a := range atts {
					recorded, err := strconv.Atoi(strings.TrimPrefix(a.Epoch, "e"))
					if err != nil {
						t.Fatalf("attempt %s recorded epoch %q", a.TransportID, a.Epoch)
					}
					if sent, ok := d.sentIn[a.TransportID]; ok && recorded > sent {
						t.Errorf("attempt %s recorded epoch e%d, but its message was handed over in e%d", a.TransportID, recorded, sent)
					}
					checked++
				}
			}
			t.Logf("concurrency %d, batches of %d: %d sent, %d attempts checked, %d clears", req.Concurrency, req.Batch, s.Confirmed, checked, d.clears)
			if d.clears == 0 || s.Confirmed != 150 {
				t.Fatalf("confirmed %d of 150 with %d clears: the run does not test what it should", s.Confirmed, d.clears)
			}
		})
	}
}

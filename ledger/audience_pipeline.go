package ledger

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// sendRun is one pipelined audience send: a dispatcher that decides
// batches and workers that hand the decided messages over.
type sendRun struct {
	l      *Ledger
	req    AudienceSend
	rel    AudienceSummary
	body   string
	dest   Destination
	dir    Directory
	looker LookerOpener
	ep     Endpoint
	start  time.Time

	mu       sync.Mutex
	progress SendProgress
	failure  error // the first error that ends the run
}

func newSendRun(l *Ledger, req AudienceSend, rel AudienceSummary, body string, dest Destination, dir Directory) *sendRun {
	return &sendRun{l: l, req: req, rel: rel, body: body, dest: dest, dir: dir, looker: ownRecords(dest), ep: EndpointOf(dest),
		progress: SendProgress{Eligible: rel.Eligible}}
}

// send runs the dispatcher on the calling goroutine. Handing a message to
// a worker is a send on an unbuffered channel, so when the dispatcher has
// passed a batch on, every message of it is in a worker's hands.
func (s *sendRun) send(ctx context.Context) error {
	s.start = s.l.clock.Now()
	jobs := make(chan handOver)
	var wg sync.WaitGroup
	for range s.req.concurrency() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := range jobs {
				s.deliver(ctx, b)
			}
		}()
	}
	err := s.dispatch(ctx, jobs)
	close(jobs)
	wg.Wait()
	s.report(true)
	s.mu.Lock()
	defer s.mu.Unlock()
	return errors.Join(err, s.failure)
}

// dispatch reads the eligible recipients page by page and decides them in
// batches. With one worker it waits for each batch's outcomes before the
// next batch's consent reads, so a run is strictly sequential.
func (s *sendRun) dispatch(ctx context.Context, jobs chan<- handOver) error {
	var idle sync.WaitGroup // messages of the current batch not yet recorded
	batch := make([]AudienceRow, 0, s.req.batchSize())
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		defer func() { batch = batch[:0] }()
		if err := s.stopped(ctx); err != nil {
			return err
		}
		if s.req.concurrency() == 1 {
			idle.Wait()
		}
		return s.decideAndHandOver(ctx, batch, jobs, &idle)
	}
	for after := 0; ; {
		page, err := s.l.audienceRows(ctx, s.req.ReleaseID, RowEligible, after, audiencePage, 0)
		if err != nil {
			return err
		}
		for _, r := range page {
			after = r.Line
			batch = append(batch, r)
			if len(batch) == cap(batch) {
				if err := flush(); err != nil {
					return err
				}
			}
		}
		if len(page) < audiencePage {
			return flush()
		}
	}
}

// stopped ends the dispatch when ctx is done or a worker failed.
func (s *sendRun) stopped(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("send release %s: %w", s.req.ReleaseID, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failure
}

// decideAndHandOver is one batch, per recipient in this order: prepared
// (reconciled or proposed and approved), consent re-read, intent made
// durable (one BeginAttempts for the batch), message handed over.
func (s *sendRun) decideAndHandOver(ctx context.Context, rows []AudienceRow, jobs chan<- handOver, idle *sync.WaitGroup) error {
	var reqs []ExecuteRequest
	var customers []string
	for _, r := range rows {
		ready, err := s.l.prepareRecipient(ctx, s.req, s.rel, s.body, r, s.looker)
		if err != nil {
			return err
		}
		if !ready {
			s.count(func(p *SendProgress) { p.Done++ })
			continue
		}
		reqs = append(reqs, ExecuteRequest{Key: r.ActionKey, Executor: s.req.Actor, From: s.req.From, Endpoint: s.ep})
		customers = append(customers, r.CustomerID)
	}
	if len(reqs) == 0 {
		s.report(false)
		return nil
	}
	for i := range reqs {
		reqs[i].Reread = rereadConsent(ctx, s.dir, customers[i])
	}
	begun, err := s.l.BeginAttempts(ctx, reqs)
	if err != nil {
		return err
	}
	var stop error
	for _, b := range begun {
		if b.Err != nil {
			if errors.Is(b.Err, ErrStopped) {
				stop = b.Err
			} else if !recipientRefusal(b.Err) {
				return b.Err
			}
			s.refused(b.Err)
			continue
		}
		idle.Add(1)
		select {
		case jobs <- handOver{Begun: b, done: idle.Done}:
		case <-ctx.Done():
			// Decided but never handed over: the attempt stays in flight,
			// recovery makes it unknown, and the next run reconciles it.
			idle.Done()
			return fmt.Errorf("send release %s: %w", s.req.ReleaseID, ctx.Err())
		}
	}
	s.report(false)
	if stop != nil {
		return fmt.Errorf("send release %s: %w", s.req.ReleaseID, stop)
	}
	return nil
}

// handOver is one decided message on its way to a worker; done is called
// once its outcome is recorded.
type handOver struct {
	Begun
	done func()
}

// deliver hands one decided message over and records what happened.
func (s *sendRun) deliver(ctx context.Context, b handOver) {
	defer b.done()
	_, err := s.l.RecordDelivery(ctx, b.Attempt, s.l.Deliver(ctx, b.Attempt, b.Message, s.dest))
	switch {
	case err == nil:
		s.count(func(p *SendProgress) { p.Done++; p.Sent++ })
	case recipientRefusal(err):
		s.refused(err)
	default:
		s.mu.Lock()
		if s.failure == nil {
			s.failure = err
		}
		s.progress.Done++
		s.mu.Unlock()
	}
}

// refused counts one recipient the gate answered about.
func (s *sendRun) refused(err error) {
	s.count(func(p *SendProgress) {
		p.Done++
		switch {
		case errors.Is(err, ErrDenied):
			p.Denied++
		case errors.Is(err, ErrHeld), errors.Is(err, ErrUnknownOutcome), errors.Is(err, ErrStopped):
			p.Held++
		}
	})
}

func (s *sendRun) count(f func(*SendProgress)) {
	s.mu.Lock()
	f(&s.progress)
	s.mu.Unlock()
}

func (s *sendRun) report(final bool) {
	if s.req.Progress == nil {
		return
	}
	s.mu.Lock()
	p := s.progress
	s.mu.Unlock()
	p.Elapsed, p.Final = s.l.clock.Now().Sub(s.start), final
	s.req.Progress(p)
}

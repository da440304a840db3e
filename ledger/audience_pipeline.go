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
	delivered := make(chan deliveredMsg, s.req.concurrency())
	var wg sync.WaitGroup
	for range s.req.concurrency() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := range jobs {
				delivered <- deliveredMsg{b, s.l.Deliver(ctx, b.Attempt, b.Message, s.dest)}
			}
		}()
	}
	recorded := make(chan struct{})
	go func() {
		defer close(recorded)
		s.record(ctx, delivered)
	}()
	err := s.dispatch(ctx, jobs)
	close(jobs)
	wg.Wait()
	close(delivered)
	<-recorded
	s.report(true)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failure != nil && errors.Is(err, s.failure) {
		return err // the dispatch ended on the workers' failure
	}
	return errors.Join(err, s.failure)
}

// dispatch reads the eligible recipients page by page and decides them in
// batches. With several workers one goroutine prepares the next batch
// (proposals and approvals, which read no consent) while this one hands
// over the current one: it starts once the current batch's intents are
// durable, so its transaction does not compete with BeginAttempts for the
// one write connection. With one worker it is strictly sequential: a batch
// is prepared only after the previous one's outcomes are recorded.
func (s *sendRun) dispatch(ctx context.Context, jobs chan<- handOver) error {
	var idle sync.WaitGroup // messages handed over and not yet recorded
	if s.req.concurrency() == 1 {
		return s.eachBatch(ctx, func(rows []AudienceRow) error {
			idle.Wait()
			pb, err := s.prepare(ctx, rows)
			if err != nil {
				return err
			}
			return s.decideAndHandOver(ctx, pb, jobs, &idle, func() {})
		})
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	prepared := make(chan preparedBatch, 1)
	prepErr := make(chan error, 1)
	next := make(chan struct{}, 1) // the current batch's intents are durable: prepare the next
	next <- struct{}{}
	go func() {
		defer close(prepared)
		prepErr <- s.eachBatch(ctx, func(rows []AudienceRow) error {
			select {
			case <-next:
			case <-ctx.Done():
				return ctx.Err()
			}
			pb, err := s.prepare(ctx, rows)
			if err != nil {
				return err
			}
			select {
			case prepared <- pb:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
	}()
	begun := func() {
		select {
		case next <- struct{}{}:
		default:
		}
	}
	for pb := range prepared {
		if err := s.decideAndHandOver(ctx, pb, jobs, &idle, begun); err != nil {
			cancel()
			for range prepared { // let the preparer end
			}
			<-prepErr
			return err
		}
	}
	return <-prepErr
}

// eachBatch reads the eligible recipients page by page (never all at once)
// and calls fn for each batch of them, until fn or a stop ends it.
func (s *sendRun) eachBatch(ctx context.Context, fn func([]AudienceRow) error) error {
	batch := make([]AudienceRow, 0, s.req.batchSize())
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		if err := s.stopped(ctx); err != nil {
			return err
		}
		err := fn(batch)
		batch = make([]AudienceRow, 0, s.req.batchSize()) // fn's batch may still be in use
		return err
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

// preparedBatch is a batch whose recipients can be executed: proposed and
// approved, or reconciled. Their consent is not read yet.
type preparedBatch struct {
	reqs      []ExecuteRequest
	customers []string
}

// prepare moves each recipient of a batch to where it can be executed: new
// ones are proposed and approved together (one transaction), ones an
// earlier run left open are reconciled; recipients already done are
// counted and dropped.
func (s *sendRun) prepare(ctx context.Context, rows []AudienceRow) (preparedBatch, error) {
	var pb preparedBatch
	var fresh []AudienceRow
	for _, r := range rows {
		ready := true
		if r.State == "" {
			fresh = append(fresh, r)
		} else {
			var err error
			if ready, err = s.l.prepareRecipient(ctx, s.req, s.rel, s.body, r, s.looker); err != nil {
				return pb, err
			}
		}
		if !ready {
			s.count(func(p *SendProgress) { p.Done++ })
			continue
		}
		pb.reqs = append(pb.reqs, ExecuteRequest{Key: r.ActionKey, Executor: s.req.Actor, From: s.req.From, Endpoint: s.ep})
		pb.customers = append(pb.customers, r.CustomerID)
	}
	if len(fresh) > 0 {
		if err := s.l.proposeRecipients(ctx, s.req, s.rel, s.body, fresh); err != nil {
			return pb, err
		}
	}
	return pb, nil
}

// decideAndHandOver is one prepared batch, per recipient in this order:
// consent re-read, intent made durable (one BeginAttempts for the batch),
// message handed over. It starts only once every message of the previous
// batch is in a worker's hands.
// afterBegin is called once the batch's intents are durable (or there
// were none to decide).
func (s *sendRun) decideAndHandOver(ctx context.Context, pb preparedBatch, jobs chan<- handOver, idle *sync.WaitGroup, afterBegin func()) error {
	reqs, customers := pb.reqs, pb.customers
	if len(reqs) == 0 {
		afterBegin()
		s.report(false)
		return nil
	}
	for i := range reqs {
		reqs[i].Reread = rereadConsent(ctx, s.dir, customers[i])
	}
	// The epoch of the destination's records, read once per batch just
	// before its intents are recorded (see EndpointAt): should the records
	// be cleared while the batch is handed over, reconciliation meets
	// another epoch and holds instead of concluding absence.
	ep := EndpointAt(ctx, s.dest)
	for i := range reqs {
		reqs[i].Endpoint.Epoch = ep.Epoch
	}
	begun, err := s.l.BeginAttempts(ctx, reqs)
	afterBegin()
	if err != nil {
		return err
	}
	var stop error
	for i, b := range begun {
		if b.Err != nil {
			if errors.Is(b.Err, ErrStopped) {
				stop = b.Err
			} else if !recipientRefusal(b.Err) {
				s.withdraw(ctx, begun[i+1:], b.Err)
				return b.Err
			}
			s.refused(b.Err)
			continue
		}
		idle.Add(1)
		select {
		case jobs <- handOver{Begun: b, done: idle.Done}:
		case <-ctx.Done():
			idle.Done()
			s.withdraw(ctx, begun[i:], ctx.Err())
			return fmt.Errorf("send release %s: %w", s.req.ReleaseID, ctx.Err())
		}
	}
	s.report(false)
	if stop != nil {
		return fmt.Errorf("send release %s: %w", s.req.ReleaseID, stop)
	}
	return nil
}

// withdraw records the decided attempts of a batch that the run ends
// before handing over as not delivered, which they are: their recipients
// are approved again, not started, instead of waiting in flight for
// recovery and a reconcile.
func (s *sendRun) withdraw(ctx context.Context, begun []Begun, why error) {
	var atts []Attempt
	var ds []Delivery
	for _, b := range begun {
		if b.Err == nil {
			err := &DeliveryError{Outcome: OutcomeNotDelivered, Err: fmt.Errorf("the run ended before it was handed over (%w); nothing was sent", why)}
			atts, ds = append(atts, b.Attempt), append(ds, Delivery{Outcome: OutcomeNotDelivered, Err: err})
		}
	}
	if len(atts) > 0 {
		// What cannot be recorded stays in flight: recovery marks it
		// unknown and the next run reconciles it, which is safe too.
		s.l.RecordDeliveries(ctx, atts, ds)
	}
}

// handOver is one decided message on its way to a worker; done is called
// once its outcome is recorded.
type handOver struct {
	Begun
	done func()
}

// deliveredMsg is a hand-over and what the destination said.
type deliveredMsg struct {
	handOver
	d Delivery
}

// record records the outcomes the workers report, as many as are waiting
// (up to one batch) in one RecordDeliveries transaction.
func (s *sendRun) record(ctx context.Context, delivered <-chan deliveredMsg) {
	for first := range delivered {
		pending := []deliveredMsg{first}
	drain:
		for len(pending) < MaxBatch {
			select {
			case m, ok := <-delivered:
				if !ok {
					break drain
				}
				pending = append(pending, m)
			default:
				break drain
			}
		}
		atts, ds := make([]Attempt, len(pending)), make([]Delivery, len(pending))
		for i, m := range pending {
			atts[i], ds[i] = m.Attempt, m.d
		}
		_, errs := s.l.RecordDeliveries(ctx, atts, ds)
		for i, m := range pending {
			s.recorded(errs[i])
			m.done()
		}
	}
}

// recorded counts one recipient whose outcome is recorded (or could not be).
func (s *sendRun) recorded(err error) {
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
		case errors.Is(err, ErrHeld), errors.Is(err, ErrUnknownOutcome):
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

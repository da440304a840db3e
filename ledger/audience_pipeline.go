package ledger

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"gatehouse/destination"
)

// sendRun is one pipelined audience send: a dispatcher that decides
// batches and workers that hand the decided messages over.
type sendRun struct {
	l      *Ledger
	req    AudienceSend
	rel    AudienceSummary
	body   string
	dest   destination.Destination
	dir    Directory
	looker destination.RecordsOpener
	ep     destination.Endpoint
	start  time.Time
	// fresh: the run's next pass takes only recipients no pass has
	// touched (customers who carry a notice since the pass before).
	fresh bool

	mu       sync.Mutex
	progress SendProgress
	failure  error // the first error that ends the run
}

func newSendRun(l *Ledger, req AudienceSend, rel AudienceSummary, body string, dest destination.Destination, dir Directory) *sendRun {
	return &sendRun{l: l, req: req, rel: rel, body: body, dest: dest, dir: dir, looker: ownRecords(dest), ep: destination.EndpointOf(dest),
		progress: SendProgress{Eligible: rel.Eligible}}
}

// send runs one pass of the dispatcher on the calling goroutine (see
// sendCarrying); it reports the final progress to nobody, its caller does.
// Handing a message to
// a worker is a send on an unbuffered channel, so when the dispatcher has
// passed a batch on, every message of it is in a worker's hands.
func (s *sendRun) send(ctx context.Context) error {
	if s.start.IsZero() {
		s.start = s.l.clock.Now()
	}
	jobs := make(chan handOver)
	// Room for every message that can be handed over and not yet
	// recorded, so that a worker never waits for the recorder (which
	// waits for the write connection while a batch is decided).
	delivered := make(chan deliveredMsg, 2*s.req.batchSize()+s.req.concurrency())
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
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failure != nil && errors.Is(err, s.failure) {
		return err // the dispatch ended on the workers' failure
	}
	return errors.Join(err, s.failure)
}

// dispatch reads the eligible recipients page by page and decides them in
// batches. With several workers three goroutines overlap: one prepares the
// next batch (proposals and approvals, which read no consent) once the
// current batch's intents are durable, so that its transaction does not
// compete with BeginAttempts for the one write connection; this one decides
// batches (consent reads, BeginAttempts); and a hander hands the decided
// batches over (see handOverAll). A batch's consent reads start only once
// every message of the batch before the previous one is in a worker's
// hands, and only once every message of the previous one is when
// overlapping would make the bound on stale reads too wide (see overlaps).
// With one worker it is strictly sequential: a batch is prepared only
// after the previous one's outcomes are recorded.
func (s *sendRun) dispatch(ctx context.Context, jobs chan<- handOver) error {
	var idle sync.WaitGroup // messages handed over and not yet recorded
	if s.req.concurrency() == 1 {
		return s.eachBatch(ctx, func(rows []AudienceRow) error {
			idle.Wait()
			pb, err := s.prepare(ctx, rows)
			if err != nil {
				return err
			}
			begun, err := s.decide(ctx, pb, s.readEpoch(ctx, pb))
			if err != nil {
				return err
			}
			return s.handOverBatch(ctx, begun, jobs, &idle)
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
	// A token is a batch that may be decided and not yet all handed over:
	// two when batches overlap, else one.
	tokens := make(chan struct{}, 2)
	tokens <- struct{}{}
	if s.req.overlaps() {
		tokens <- struct{}{}
	}
	decided := make(chan []Begun, 1)
	halt := make(chan struct{}) // closed when the hander ends the run
	handErr := make(chan error, 1)
	go func() { handErr <- s.handOverAll(ctx, decided, jobs, &idle, tokens, halt) }()
	err := s.decideAll(ctx, prepared, decided, tokens, halt, func() {
		select {
		case next <- struct{}{}:
		default:
		}
	})
	close(decided)
	herr := <-handErr
	cancel()
	for range prepared { // let the preparer end
	}
	perr := <-prepErr
	if herr != nil {
		return herr
	}
	if err != nil {
		return err
	}
	return perr
}

// decideAll decides each prepared batch once it holds a token and passes
// it to the hander, until the batches end, one meets a stop, or the hander
// halts the run.
func (s *sendRun) decideAll(ctx context.Context, prepared <-chan preparedBatch, decided chan<- []Begun, tokens <-chan struct{},
	halt <-chan struct{}, afterBegin func()) error {
	for pb := range prepared {
		epoch := s.readEpoch(ctx, pb) // meanwhile: the wait for a token, the consent reads
		select {
		case <-tokens:
		case <-halt:
			return nil
		case <-ctx.Done():
			return fmt.Errorf("send release %s: %w", s.req.ReleaseID, ctx.Err())
		}
		select {
		case <-halt:
			return nil
		default:
		}
		begun, err := s.decide(ctx, pb, epoch)
		afterBegin()
		if err != nil {
			return err
		}
		decided <- begun // the hander drains decided until it is closed
		if metStop(begun) {
			return nil // the hander reports the stop
		}
	}
	return nil
}

// handOverAll hands over the decided batches in order, returning a token
// after each. Before it returns the token that lets the batch after next
// be decided, it reads the stop switch: when a stop was turned on, the
// next batch, decided in advance, is withdrawn instead of handed over (its
// recipients are approved again, not started), so that a stop halts the
// run within one batch even though the next batch's intents may have been
// recorded before it. Once it ends the run (a stop, a failure, ctx done,
// outcomes that could not be recorded), every batch still decided is
// withdrawn.
func (s *sendRun) handOverAll(ctx context.Context, decided <-chan []Begun, jobs chan<- handOver, idle *sync.WaitGroup,
	tokens chan<- struct{}, halt chan<- struct{}) error {
	var end, stopped error
	for begun := range decided {
		if end == nil && stopped != nil && !metStop(begun) {
			end = stopped
			close(halt)
		}
		if end == nil {
			// ctx done, or outcomes could not be recorded: hand nothing
			// more over.
			if err := s.stopped(ctx); err != nil {
				end = err
				close(halt)
			}
		}
		if end != nil {
			s.withdraw(ctx, begun, end)
			continue
		}
		if err := s.handOverBatch(ctx, begun, jobs, idle); err != nil {
			end = err
			close(halt)
			continue
		}
		sw, err := s.l.StopState(ctx)
		switch {
		case err != nil:
			end = fmt.Errorf("send release %s: %w", s.req.ReleaseID, err)
			close(halt)
			continue
		case sw.Stopped:
			stopped = fmt.Errorf("send release %s: %w: execution is stopped (by %s: %s); recipients decided before the stop and not yet handed over were not sent and are approved again",
				s.req.ReleaseID, ErrStopped, sw.Actor, sw.Reason)
		}
		tokens <- struct{}{}
	}
	return end
}

// metStop reports whether BeginAttempts met a stop in this batch.
func metStop(begun []Begun) bool {
	for _, b := range begun {
		if errors.Is(b.Err, ErrStopped) {
			return true
		}
	}
	return false
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
		page, err := s.l.audienceRows(ctx, s.req.ReleaseID, RowEligible, after, s.fresh, audiencePage, 0)
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

// preparedBatch is a batch whose recipients can be executed: new ones
// (fresh set), or ones an earlier run left approved or reconciled. Their
// consent is not read yet.
type preparedBatch struct {
	reqs      []ExecuteRequest
	customers []string
	fresh     []*newRecipient // nil for a recipient an earlier run proposed
}

// prepare moves each recipient of a batch to where it can be executed:
// ones an earlier run left open are reconciled; new ones get their
// proposal, which the batch's deciding transaction records (see decide);
// recipients already done are counted and dropped.
func (s *sendRun) prepare(ctx context.Context, rows []AudienceRow) (preparedBatch, error) {
	var pb preparedBatch
	for _, r := range rows {
		var fresh *newRecipient
		ready := true
		// A recipient sent back for approval at send (its approval by
		// the release's approver no longer held, see lapsedApproval) is
		// approved again, as a new one is, under the release's approval
		// as it stands now: the run that refused it ended there.
		if r.State == "" || r.State == StateAwaitingApproval {
			var err error
			if fresh, err = s.newRecipient(r); err != nil {
				return pb, err
			}
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
		pb.fresh = append(pb.fresh, fresh)
	}
	return pb, nil
}

// decide decides a prepared batch, per recipient in this order: consent
// re-read, then in one durable transaction for the batch (BeginAttempts)
// a new recipient proposed and approved and each intent recorded. Its
// messages may be handed over once it returns (handOverBatch). epoch is
// the batch's read of the destination's epoch (readEpoch).
func (s *sendRun) decide(ctx context.Context, pb preparedBatch, epoch <-chan string) ([]Begun, error) {
	reqs, customers := pb.reqs, pb.customers
	if len(reqs) == 0 {
		return nil, nil
	}
	for i := range reqs {
		reqs[i].Reread = rereadConsent(ctx, s.dir, customers[i])
	}
	e := <-epoch
	for i := range reqs {
		reqs[i].Endpoint.Epoch = e
	}
	return s.l.beginAttempts(ctx, reqs, pb.fresh)
}

// readEpoch reads, once per batch and in the background, the epoch of the
// destination's records (see EndpointAt) that the batch's attempts record:
// should the records be cleared while the batch is handed over,
// reconciliation meets another epoch and holds instead of concluding
// absence. Any read before the intents are recorded serves (a clear after
// it, and before the hand-over, still shows); this one starts before the
// batch waits for its turn, so that its round trip to the records' API
// overlaps that wait and the consent reads instead of adding to them.
func (s *sendRun) readEpoch(ctx context.Context, pb preparedBatch) <-chan string {
	epoch := make(chan string, 1)
	if len(pb.reqs) == 0 {
		return epoch // decide reads nothing from it
	}
	go func() { epoch <- destination.EndpointAt(ctx, s.dest).Epoch }()
	return epoch
}

// handOverBatch hands each decided message of a batch to a worker and
// counts the refusals; a stop met by BeginAttempts, a failure or ctx done
// ends the run (what was decided and not handed over is withdrawn).
func (s *sendRun) handOverBatch(ctx context.Context, begun []Begun, jobs chan<- handOver, idle *sync.WaitGroup) error {
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
		if b.Err != nil && recipientRefusal(b.Err) {
			s.refused(b.Err)
		}
		if b.Err == nil {
			err := &destination.DeliveryError{Outcome: destination.OutcomeNotDelivered, Err: fmt.Errorf("the run ended before it was handed over (%w); nothing was sent", why)}
			atts, ds = append(atts, b.Attempt), append(ds, Delivery{Outcome: destination.OutcomeNotDelivered, Err: err})
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

// record records the outcomes the workers report in RecordDeliveries
// transactions of up to MaxBatch. With several workers it waits for a
// batch's worth (or the end of the run) before it records, so that it
// takes the one write connection once a batch rather than between every
// few deliveries; nothing waits for these records but the run's end (an
// outcome recorded late is, after a crash, only one that recovery makes
// unknown and the next run reconciles). With one worker it records what
// is waiting at once: the next batch waits for it.
func (s *sendRun) record(ctx context.Context, delivered <-chan deliveredMsg) {
	group := 1
	if s.req.concurrency() > 1 {
		group = s.req.batchSize()
	}
	for first := range delivered {
		pending := []deliveredMsg{first}
		for len(pending) < group {
			m, ok := <-delivered
			if !ok {
				break
			}
			pending = append(pending, m)
		}
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

// doneSoFar is how many recipients the run has finished with.
func (s *sendRun) doneSoFar() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.progress.Done
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

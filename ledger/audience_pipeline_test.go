package ledger_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"gatehouse/destination"
	"gatehouse/destination/fake"
	"gatehouse/ledger"
)

// bigRelease imports and approves a release of n opted-in customers r1…rn.
func bigRelease(t *testing.T, w *world, release string, n int) crm {
	t.Helper()
	dir, file := optedIn(n)
	_, err := w.l.ImportAudience(w.ctx, ledger.AudienceImport{ReleaseID: release, SourceName: release + ".csv",
		Source: strings.NewReader(file), ActionType: "notice", Subject: "Opening hours change",
		Body: "Our opening hours change on 1 April.", Actor: "ops"}, dir)
	w.must(err)
	w.must(w.l.ApproveAudience(w.ctx, release, "lead", fake.DefaultName, ""))
	return dir
}

// optedIn is n opted-in customers r1…rn and an audience file naming them.
func optedIn(n int) (crm, string) {
	dir := crm{}
	var b strings.Builder
	b.WriteString("customer_id\n")
	for i := 1; i <= n; i++ {
		id := fmt.Sprintf("r%d", i)
		dir[id] = ledger.Customer{ID: id, Email: id + "@example.org", Consent: "yes"}
		b.WriteString(id + "\n")
	}
	return dir, b.String()
}

// sequence numbers the consent reads and hand-overs of one run in the
// order they happen.
type sequence struct {
	mu       sync.Mutex
	n        int
	read     map[string]int // customer → step of its consent read
	handedAt map[string]int // customer → step of its hand-over
	handed   []int          // steps of every hand-over, in order
	onRead   func(n int)    // called after the nth consent read
	onSend   func(n int)    // called at the nth send
}

func newSequence() *sequence { return &sequence{read: map[string]int{}, handedAt: map[string]int{}} }

type seqDir struct {
	crm
	s *sequence
}

func (d seqDir) CustomerByID(ctx context.Context, id string) (ledger.Customer, bool, error) {
	d.s.mu.Lock()
	d.s.n++
	d.s.read[id] = d.s.n
	reads := len(d.s.read)
	d.s.mu.Unlock()
	if d.s.onRead != nil {
		d.s.onRead(reads)
	}
	return d.crm.CustomerByID(ctx, id)
}

type seqDest struct {
	*fake.Destination
	s *sequence
}

func (d seqDest) Send(ctx context.Context, m destination.Message) (destination.Receipt, error) {
	d.s.mu.Lock()
	d.s.n++
	d.s.handedAt[strings.TrimSuffix(m.To, "@example.org")] = d.s.n
	d.s.handed = append(d.s.handed, d.s.n)
	sends := len(d.s.handed)
	d.s.mu.Unlock()
	if d.s.onSend != nil {
		d.s.onSend(sends)
	}
	return d.Destination.Send(ctx, m)
}

// TestPipelinedAudienceSendKeepsTheOrder sends 230 recipients with 4
// connections in batches of 16 and checks, per recipient, that the consent
// read came before its send and that at most two batches of other sends
// started in between (the one decided in advance and its own), besides
// those already in the workers' hands (2 × batch + concurrency − 1); every
// recipient arrives once and a re-run sends nothing. With batches too
// large to overlap within MaxStaleSends the bound is one batch.
func TestPipelinedAudienceSendKeepsTheOrder(t *testing.T) {
	for _, c := range []struct{ n, batch, concurrency, bound int }{{230, 16, 4, 2*16 + 4 - 1}, {330, 60, 4, 60 + 4 - 1}} {
		t.Run(fmt.Sprintf("Batch%d", c.batch), func(t *testing.T) { keepsTheOrder(t, c.n, c.batch, c.concurrency, c.bound) })
	}
}

func keepsTheOrder(t *testing.T, n, batch, concurrency, bound int) {
	w := newWorld(t)
	dir := bigRelease(t, w, "big", n)
	seq := newSequence()
	var progress []ledger.SendProgress
	send := ledger.AudienceSend{ReleaseID: "big", Actor: "notice-bot", Concurrency: concurrency, Batch: batch,
		Progress: func(p ledger.SendProgress) { progress = append(progress, p) }}
	if send.StaleSends() != bound {
		t.Fatalf("StaleSends %d, want %d", send.StaleSends(), bound)
	}
	s, err := w.l.SendAudience(w.ctx, send, seqDest{w.dest, seq}, seqDir{dir, seq})
	w.must(err)
	if s.Confirmed != n || w.dest.Calls() != n {
		t.Fatalf("confirmed %d, calls %d, want %d", s.Confirmed, w.dest.Calls(), n)
	}
	for id, read := range seq.read {
		at, ok := seq.handedAt[id]
		if !ok || at < read {
			t.Fatalf("%s: consent read at step %d, handed over at %d", id, read, at)
		}
		between := 0
		for _, h := range seq.handed {
			if h > read && h < at {
				between++
			}
		}
		if between > bound {
			t.Errorf("%s: %d sends between its consent read and its own, more than the bound %d", id, between, bound)
		}
	}
	for _, m := range w.dest.Arrived() {
		if w.dest.Arrivals(m.ActionKey) != 1 {
			t.Fatalf("%s arrived %d times", m.ActionKey, w.dest.Arrivals(m.ActionKey))
		}
	}
	last := progress[len(progress)-1]
	if !last.Final || last.Sent != n || last.Done != n || last.Eligible != n || len(progress) < n/batch {
		t.Fatalf("progress: %d reports, last %+v", len(progress), last)
	}
	s, err = w.l.SendAudience(w.ctx, send, w.dest, dir)
	w.must(err)
	if w.dest.Calls() != n || s.Confirmed != n {
		t.Fatalf("re-run sent again: calls %d", w.dest.Calls())
	}
}

// TestPipelinedAudienceSendStopsWithinOneBatch turns the stop switch on
// during the third batch's consent reads: the run ends with ErrStopped
// after the two batches already decided, the stopped batch sends nothing
// (its first recipient is held as stopped, the rest are not started), and
// after a resume a re-run sends each remaining recipient once.
func TestPipelinedAudienceSendStopsWithinOneBatch(t *testing.T) {
	w := newWorld(t)
	const n, batch = 40, 8
	dir := bigRelease(t, w, "big", n)
	seq := newSequence()
	seq.onRead = func(reads int) {
		if reads == 2*batch+3 {
			w.must(w.l.Stop(w.ctx, "ops", "wrong opening hours in the notice"))
		}
	}
	send := ledger.AudienceSend{ReleaseID: "big", Actor: "notice-bot", Concurrency: 3, Batch: batch}
	s, err := w.l.SendAudience(w.ctx, send, seqDest{w.dest, seq}, seqDir{dir, seq})
	if !errors.Is(err, ledger.ErrStopped) {
		t.Fatalf("send during a stop: %v, want ErrStopped", err)
	}
	if w.dest.Calls() != 2*batch || s.Confirmed != 2*batch {
		t.Fatalf("stopped run: calls %d, confirmed %d, want %d", w.dest.Calls(), s.Confirmed, 2*batch)
	}
	if len(seq.read) != 3*batch {
		t.Fatalf("%d consent reads, want the stopped batch's to be the last (%d)", len(seq.read), 3*batch)
	}
	if key := heldKey(t, w, "big"); !strings.Contains(key, fmt.Sprintf(":r%d:", 2*batch+1)) {
		t.Fatalf("held %s, want the first recipient of the stopped batch", key)
	}
	w.must(w.l.Resume(w.ctx, "ops", "notice corrected")) // releases the stop's hold
	s, err = w.l.SendAudience(w.ctx, send, w.dest, dir)
	w.must(err)
	if w.dest.Calls() != n || s.Confirmed != n {
		t.Fatalf("after resume: calls %d, confirmed %d, want %d", w.dest.Calls(), s.Confirmed, n)
	}
}

// TestPipelinedAudienceSendStopsWhileABatchWaits turns the stop switch on
// after the third batch was decided in advance, while the second is being
// handed over (its sends wait for the stop, so the hand-over cannot end
// before it): the second batch is sent, the third is withdrawn (its
// attempts recorded as not delivered, nothing sent), the run ends with
// ErrStopped, nothing is left in flight, and after a resume a re-run sends
// each remaining recipient once.
func TestPipelinedAudienceSendStopsWhileABatchWaits(t *testing.T) {
	w := newWorld(t)
	const n, batch = 40, 8
	dir := bigRelease(t, w, "big", n)
	seq := newSequence()
	stopped := make(chan struct{})
	seq.onSend = func(sends int) {
		if sends == batch+1 {
			go func() {
				defer close(stopped)
				if !thirdBatchDecided(t, w, batch) {
					t.Error("the third batch was not decided while the second was handed over")
				}
				w.must(w.l.Stop(w.ctx, "ops", "wrong opening hours in the notice"))
			}()
		}
		if sends > batch {
			<-stopped
		}
	}
	send := ledger.AudienceSend{ReleaseID: "big", Actor: "notice-bot", Concurrency: 3, Batch: batch}
	_, err := w.l.SendAudience(w.ctx, send, seqDest{w.dest, seq}, seqDir{dir, seq})
	if !errors.Is(err, ledger.ErrStopped) {
		t.Fatalf("send during a stop: %v, want ErrStopped", err)
	}
	if w.dest.Calls() != 2*batch {
		t.Fatalf("stopped run: %d sends, want the two batches' %d", w.dest.Calls(), 2*batch)
	}
	rows, err := w.l.AudienceRows(w.ctx, "big", ledger.RowEligible, n, 0)
	w.must(err)
	withdrawn := 0
	for _, r := range rows {
		if r.State == ledger.StateExecuting || r.State == ledger.StateUnknown {
			t.Fatalf("%s left %s by a stopped run", r.ActionKey, r.State)
		}
		atts, err := w.l.Attempts(w.ctx, r.ActionKey)
		w.must(err)
		for _, a := range atts {
			if strings.Contains(a.Response, "the run ended before it was handed over") {
				withdrawn++
			}
		}
	}
	if withdrawn != batch {
		t.Fatalf("%d attempts withdrawn, want the batch decided before the stop (%d)", withdrawn, batch)
	}
	w.must(w.l.Resume(w.ctx, "ops", "notice corrected"))
	s, err := w.l.SendAudience(w.ctx, send, w.dest, dir)
	w.must(err)
	if w.dest.Calls() != n || s.Confirmed != n {
		t.Fatalf("after resume: calls %d, confirmed %d, want %d", w.dest.Calls(), s.Confirmed, n)
	}
	for _, m := range w.dest.Arrived() {
		if w.dest.Arrivals(m.ActionKey) != 1 {
			t.Fatalf("%s arrived %d times", m.ActionKey, w.dest.Arrivals(m.ActionKey))
		}
	}
}

// thirdBatchDecided waits (reading the ledger, a bounded number of times)
// until every recipient of the third batch is in flight.
func thirdBatchDecided(t *testing.T, w *world, batch int) bool {
	for range 20000 {
		rows, err := w.l.AudienceRows(w.ctx, "big", ledger.RowEligible, batch, 2*batch)
		if err != nil {
			t.Error(err)
			return false
		}
		executing := 0
		for _, r := range rows {
			if r.State == ledger.StateExecuting {
				executing++
			}
		}
		if executing == batch {
			return true
		}
		runtime.Gosched()
	}
	return false
}

// heldKey is the one held recipient of a release.
func heldKey(t *testing.T, w *world, release string) string {
	t.Helper()
	rows, err := w.l.AudienceRows(w.ctx, release, ledger.RowEligible, 1000, 0)
	w.must(err)
	var held []string
	for _, r := range rows {
		if r.State == ledger.StateHeld {
			held = append(held, r.ActionKey)
		}
	}
	if len(held) != 1 {
		t.Fatalf("held recipients %v, want the one that met the stop", held)
	}
	return held[0]
}

// TestBeginAttemptsDecidesEachOnItsOwn runs one batch whose requests meet
// different answers: each gets the answer BeginAttempt gives it alone, and
// only the passing ones are in flight.
func TestBeginAttemptsDecidesEachOnItsOwn(t *testing.T) {
	w := newWorld(t)
	_, err := w.l.Claim(w.ctx, ledger.TaskRef{ID: "task-7"}, "wf-ack")
	w.must(err)
	var keys []string
	for _, r := range approvedRequests(w, "c1", "c2", "c3") {
		keys = append(keys, r.Key)
	}
	ep := destination.EndpointOf(w.dest)
	consentNo := []ledger.MaterialRead{{Source: "crm", Field: "consent", Value: "no"}}
	begun, err := w.l.BeginAttempts(w.ctx, []ledger.ExecuteRequest{
		{Key: keys[0], Executor: "wf-ack", Reread: consentYes, Endpoint: ep},
		{Key: keys[1], Executor: "wf-ack", Reread: consentNo, Endpoint: ep},
		{Key: keys[2], Executor: "wf-ack", Endpoint: ep}, // forgot the re-read: a slip
		{Key: keys[0], Executor: "wf-ack", Reread: consentYes, Endpoint: ep},
		{Key: keys[2], Executor: "", Reread: consentYes, Endpoint: ep},
		{Key: "nope", Executor: "wf-ack", Reread: consentYes, Endpoint: ep},
	})
	w.must(err)
	for i, want := range []error{nil, ledger.ErrDenied, ledger.ErrInvalid, ledger.ErrInFlight, ledger.ErrInvalid, ledger.ErrNotFound} {
		if got := begun[i].Err; (want == nil) != (got == nil) || want != nil && !errors.Is(got, want) {
			t.Errorf("request %d: %v, want %v", i, got, want)
		}
	}
	if begun[0].Message.TransportID == "" || begun[0].Attempt.Number != 1 {
		t.Fatalf("passing request: %+v", begun[0])
	}
	for key, want := range map[string]ledger.State{keys[0]: ledger.StateExecuting, keys[1]: ledger.StateDenied, keys[2]: ledger.StateApproved} {
		if got := w.state(key); got != want {
			t.Errorf("%s: %s, want %s", key, got, want)
		}
	}
	if !strings.Contains(historyText(t, w, keys[1]), "denied") {
		t.Errorf("the denial has no history line:\n%s", historyText(t, w, keys[1]))
	}
	if _, err := w.l.RecordDelivery(w.ctx, begun[0].Attempt, w.l.Deliver(w.ctx, begun[0].Attempt, begun[0].Message, w.dest)); err != nil {
		t.Fatal(err)
	}
	if w.state(keys[0]) != ledger.StateSent || w.dest.Calls() != 1 {
		t.Fatalf("after delivery: %s, calls %d", w.state(keys[0]), w.dest.Calls())
	}

	// A stop holds the first request that meets it and leaves the rest not
	// started, still approved.
	w.must(w.l.Stop(w.ctx, "ops", "incident"))
	begun, err = w.l.BeginAttempts(w.ctx, []ledger.ExecuteRequest{
		{Key: keys[2], Executor: "wf-ack", Reread: consentYes, Endpoint: ep},
		{Key: keys[0], Executor: "wf-ack", Reread: consentYes, Endpoint: ep},
	})
	w.must(err)
	if !errors.Is(begun[0].Err, ledger.ErrStopped) || !errors.Is(begun[1].Err, ledger.ErrStopped) {
		t.Fatalf("during a stop: %v / %v", begun[0].Err, begun[1].Err)
	}
	if w.state(keys[2]) != ledger.StateHeld || w.state(keys[0]) != ledger.StateSent {
		t.Fatalf("during a stop: %s, %s", w.state(keys[2]), w.state(keys[0]))
	}
}

// TestPipelinedAudienceSendCancelled cancels the run's context (an
// operator's Ctrl-C) during the second batch's consent reads, and in
// another run at the second batch's first send: the run ends with the
// context's error, no recipient is left in flight (decided but not handed
// over is recorded as not delivered), nothing is sent twice, and a re-run
// completes the release with each recipient once.
func TestPipelinedAudienceSendCancelled(t *testing.T) {
	for _, at := range []string{"ConsentRead", "Send"} {
		t.Run(at, func(t *testing.T) { cancelledSend(t, at) })
	}
}

func cancelledSend(t *testing.T, at string) {
	w := newWorld(t)
	const n, batch = 40, 8
	dir := bigRelease(t, w, "big", n)
	ctx, cancel := context.WithCancel(w.ctx)
	defer cancel()
	seq := newSequence()
	if at == "ConsentRead" {
		seq.onRead = func(reads int) {
			if reads == batch+2 {
				cancel()
			}
		}
	} else {
		seq.onSend = func(sends int) {
			if sends == batch+1 {
				cancel()
			}
		}
	}
	send := ledger.AudienceSend{ReleaseID: "big", Actor: "notice-bot", Concurrency: 3, Batch: batch}
	_, err := w.l.SendAudience(ctx, send, seqDest{w.dest, seq}, seqDir{dir, seq})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled send: %v, want context.Canceled", err)
	}
	if w.dest.Calls() > 2*batch {
		t.Fatalf("%d sends after a cancel in the second batch", w.dest.Calls())
	}
	rows, err := w.l.AudienceRows(w.ctx, "big", ledger.RowEligible, n, 0)
	w.must(err)
	withdrawn := 0
	for _, r := range rows {
		if r.State == ledger.StateExecuting {
			t.Fatalf("%s left in flight by a cancelled run", r.ActionKey)
		}
		atts, err := w.l.Attempts(w.ctx, r.ActionKey)
		w.must(err)
		for _, a := range atts {
			if strings.Contains(a.Response, "the run ended before it was handed over") {
				withdrawn++
			}
		}
	}
	t.Logf("cancelled at %s: %d sends, %d decided attempts withdrawn", at, w.dest.Calls(), withdrawn)
	// Every attempt the second batch decided was either sent or withdrawn,
	// and so was the third batch's if it was decided in advance.
	if at == "Send" && w.dest.Calls()+withdrawn != 2*batch && w.dest.Calls()+withdrawn != 3*batch {
		t.Fatalf("%d sends and %d withdrawn; want the two batches' %d or the three's %d", w.dest.Calls(), withdrawn, 2*batch, 3*batch)
	}
	s, err := w.l.SendAudience(w.ctx, send, w.dest, dir)
	w.must(err)
	if s.Confirmed != n {
		t.Fatalf("after the re-run %d of %d confirmed: %+v", s.Confirmed, n, s)
	}
	for _, m := range w.dest.Arrived() {
		if w.dest.Arrivals(m.ActionKey) != 1 {
			t.Fatalf("%s arrived %d times", m.ActionKey, w.dest.Arrivals(m.ActionKey))
		}
	}
}

// closingDest closes the ledger while its first message is being handed
// over, as a ledger whose storage failed mid-run.
type closingDest struct {
	*fake.Destination
	l    *ledger.Ledger
	once sync.Once
}

func (d *closingDest) Send(ctx context.Context, m destination.Message) (destination.Receipt, error) {
	d.once.Do(func() { d.l.Close() })
	return d.Destination.Send(ctx, m)
}

// TestPipelinedAudienceSendEndsWhenOutcomesCannotBeRecorded: when the
// ledger can no longer record (its storage gone), the run stops at once
// with an error that says the outcome was not recorded and is unknown, and
// nothing more is sent.
func TestPipelinedAudienceSendEndsWhenOutcomesCannotBeRecorded(t *testing.T) {
	w := newWorld(t)
	const n, batch = 40, 8
	dir := bigRelease(t, w, "big", n)
	dest := &closingDest{Destination: w.dest, l: w.l}
	send := ledger.AudienceSend{ReleaseID: "big", Actor: "notice-bot", Concurrency: 3, Batch: batch}
	_, err := w.l.SendAudience(w.ctx, send, dest, dir)
	if !errors.Is(err, ledger.ErrNotRecorded) || !errors.Is(err, ledger.ErrUnknownOutcome) {
		t.Fatalf("send on a failed ledger: %v, want ErrNotRecorded and ErrUnknownOutcome", err)
	}
	if w.dest.Calls() > batch {
		t.Fatalf("%d sends after the ledger failed in the first batch", w.dest.Calls())
	}
}

// TestRecordDeliveriesAnswersAsRecordDelivery records two deliveries in one
// transaction (one accepted, one unknown) with the answers RecordDelivery
// gives, and on a ledger that cannot record, ErrNotRecorded for each.
func TestRecordDeliveriesAnswersAsRecordDelivery(t *testing.T) {
	w := newWorld(t)
	_, err := w.l.Claim(w.ctx, ledger.TaskRef{ID: "task-7"}, "wf-ack")
	w.must(err)
	reqs := approvedRequests(w, "c1", "c2", "c3")
	begun, err := w.l.BeginAttempts(w.ctx, reqs)
	w.must(err)
	unknown := &destination.DeliveryError{Outcome: destination.OutcomeUnknown, Err: errors.New("connection lost after the final dot")}
	ds := []ledger.Delivery{{Outcome: destination.OutcomeAccepted, Receipt: destination.Receipt{Response: "250 ok"}},
		{Outcome: destination.OutcomeUnknown, Err: unknown}}
	res, errs := w.l.RecordDeliveries(w.ctx, []ledger.Attempt{begun[0].Attempt, begun[1].Attempt}, ds)
	if errs[0] != nil || res[0].Action.State != ledger.StateSent {
		t.Fatalf("accepted: %v, %s", errs[0], res[0].Action.State)
	}
	if !errors.Is(errs[1], ledger.ErrUnknownOutcome) || res[1].Action.State != ledger.StateUnknown {
		t.Fatalf("unknown: %v, %s", errs[1], res[1].Action.State)
	}
	w.l.Close()
	_, errs = w.l.RecordDeliveries(w.ctx, []ledger.Attempt{begun[2].Attempt}, ds[:1])
	if !errors.Is(errs[0], ledger.ErrNotRecorded) || !errors.Is(errs[0], ledger.ErrUnknownOutcome) {
		t.Fatalf("on a closed ledger: %v, want ErrNotRecorded and ErrUnknownOutcome", errs[0])
	}
}

// TestDeliverCountsTheLeaseFromTheAttemptsBeginning: a batch's attempts
// begin together and are handed over one after another. One handed over
// after three quarters of its lease is not sent at all (recovery may
// already call it unknown, and a reconciliation finding nothing would allow
// a retry while it lands); one handed over earlier is sent.
func TestDeliverCountsTheLeaseFromTheAttemptsBeginning(t *testing.T) {
	const lease = 4 * time.Minute
	w := newWorld(t)
	w.l.Close()
	w.open(ledger.WithLease(lease))
	_, err := w.l.Claim(w.ctx, ledger.TaskRef{ID: "task-7"}, "wf-ack")
	w.must(err)
	reqs := approvedRequests(w, "c1", "c2")
	begun, err := w.l.BeginAttempts(w.ctx, reqs)
	w.must(err)

	w.clock.Advance(lease / 2)
	first := w.l.Deliver(w.ctx, begun[0].Attempt, begun[0].Message, w.dest)
	if first.Outcome != destination.OutcomeAccepted || w.dest.Calls() != 1 {
		t.Fatalf("handed over at half its lease: %s (%v), %d calls", first.Outcome, first.Err, w.dest.Calls())
	}
	w.clock.Advance(lease/4 + time.Second)
	late := w.l.Deliver(w.ctx, begun[1].Attempt, begun[1].Message, w.dest)
	if late.Outcome != destination.OutcomeNotDelivered || w.dest.Calls() != 1 {
		t.Fatalf("handed over past three quarters of its lease: %s (%v), %d calls; want not delivered, never sent", late.Outcome, late.Err, w.dest.Calls())
	}
	if _, err := w.l.RecordDelivery(w.ctx, begun[1].Attempt, late); !errors.Is(err, ledger.ErrNotDelivered) {
		t.Fatalf("recording the late attempt: %v, want ErrNotDelivered", err)
	}
}

// TestFirstSendsOfALegacyReleaseBindOneDestination: a release approved
// before approvals named a destination is bound to its first send's. Two
// first sends at once to different destinations: one binds and sends, the
// other is refused as a wrong destination and sends nothing, whichever
// read the release first. Twenty rounds, each a new release.
func TestFirstSendsOfALegacyReleaseBindOneDestination(t *testing.T) {
	w := newWorld(t)
	driver := "sqlite3"
	if onPostgres() {
		driver = "pgx"
	}
	raw, err := sql.Open(driver, w.path)
	w.must(err)
	defer raw.Close()
	for round := range 20 {
		release := fmt.Sprintf("legacy-%d", round)
		dir := bigRelease(t, w, release, 3)
		// As a release approved before approvals named a destination.
		_, err = raw.Exec(`UPDATE audience_releases SET destination = '', lookup = '', sender = '' WHERE id = '` + release + `'`)
		w.must(err)
		dests := []*fake.Destination{{Name: "smtp://mail-a.test:25"}, {Name: "smtp://mail-b.test:25"}}
		errs := make([]error, 2)
		var wg sync.WaitGroup
		for i, d := range dests {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = w.l.SendAudience(w.ctx, ledger.AudienceSend{ReleaseID: release, Actor: "wf-notice", Concurrency: 2}, d, dir)
			}()
		}
		wg.Wait()
		var sent, refused int
		for i, err := range errs {
			switch {
			case err == nil:
				sent++
				if dests[i].Calls() != 3 {
					t.Errorf("round %d: the send that bound %s handed over %d messages, want 3", round, dests[i].Name, dests[i].Calls())
				}
			case errors.Is(err, ledger.ErrWrongDestination):
				refused++
				if dests[i].Calls() != 0 {
					t.Errorf("round %d: the refused send to %s handed over %d messages", round, dests[i].Name, dests[i].Calls())
				}
			default:
				t.Fatalf("round %d: send to %s: %v", round, dests[i].Name, err)
			}
		}
		if sent != 1 || refused != 1 {
			t.Fatalf("round %d: %d sends bound, %d refused; want 1 and 1 (%v)", round, sent, refused, errs)
		}
	}
}

// approvedRequests proposes and approves an acknowledgement to each
// customer on task-7 and returns the requests that would send them.
func approvedRequests(w *world, customers ...string) []ledger.ExecuteRequest {
	w.t.Helper()
	var reqs []ledger.ExecuteRequest
	for _, c := range customers {
		p := ackProposal("wf-ack")
		p.Customer, p.Recipient = c, c+"@example.org"
		a, err := w.l.Propose(w.ctx, p)
		w.must(err)
		_, err = w.l.Approve(w.ctx, a.Key, "lead", consentYes)
		w.must(err)
		reqs = append(reqs, ledger.ExecuteRequest{Key: a.Key, Executor: "wf-ack", Reread: consentYes, Endpoint: destination.EndpointOf(w.dest)})
	}
	return reqs
}

package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"gatehouse/destination"
	"gatehouse/internal/mailaddr"
)

// AudienceSummary reads a release's counts, including how far sending got.
func (l *Ledger) AudienceSummary(ctx context.Context, releaseID string) (AudienceSummary, error) {
	s := AudienceSummary{ReleaseID: releaseID, Arrived: -1}
	err := l.read(ctx, func(tx queryTx) error {
		err := tx.QueryRow(`SELECT source_name, source_digest, action_type, subject, approved_by, allow_implicit, case_sensitive_local_part,
			destination, lookup, sender, settle
			FROM audience_releases WHERE id = ?`, releaseID).
			Scan(&s.SourceName, &s.SourceDigest, &s.ActionType, &s.Subject, &s.ApprovedBy, &s.AllowImplicit, &s.LocalPart,
				&s.Destination, &s.Lookup, &s.Sender, &s.Settle)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("release %s: %w", releaseID, ErrNotFound)
		}
		if err != nil {
			return err
		}
		rows, err := tx.Query(`SELECT status, count(*) FROM audience_rows WHERE release_id = ? GROUP BY status`, releaseID)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var st string
			var n int
			if err := rows.Scan(&st, &n); err != nil {
				return err
			}
			s.SourceRows += n
			*map[string]*int{RowError: &s.ErrorRows, RowUnmatched: &s.Unmatched, RowDuplicate: &s.Duplicates,
				RowExcluded: &s.Excluded, RowRemoved: &s.Removed, RowMissing: &s.Missing, RowCovered: &s.Covered,
				RowEligible: &s.Eligible}[st] += n
		}
		if err := rows.Err(); err != nil {
			return err
		}
		// Counted on its own (distinct customers), so Check can catch a
		// customer resolved on two rows.
		if err := tx.QueryRow(`SELECT count(DISTINCT customer_id) FROM audience_rows
			WHERE release_id = ? AND status IN ('excluded', 'removed', 'missing', 'covered', 'eligible')`, releaseID).Scan(&s.Resolved); err != nil {
			return err
		}
		return tx.QueryRow(`SELECT
			count(*) FILTER (WHERE EXISTS (SELECT 1 FROM attempts t WHERE t.action_key = r.action_key)),
			count(*) FILTER (WHERE a.state = 'sent'),
			count(*) FILTER (WHERE a.state = 'held' OR a.state = 'unknown'),
			count(*) FILTER (WHERE a.state = 'denied')
			FROM audience_rows r LEFT JOIN actions a ON a.key = r.action_key
			WHERE r.release_id = ? AND r.status = 'eligible'`, releaseID).Scan(&s.Attempted, &s.Confirmed, &s.Held, &s.Denied)
	})
	return s, err
}

// AudienceRows lists a page of a release's rows, optionally of one status,
// in file order, with each recipient's action state.
func (l *Ledger) AudienceRows(ctx context.Context, releaseID, status string, limit, offset int) ([]AudienceRow, error) {
	return l.audienceRows(ctx, releaseID, status, 0, false, limit, offset)
}

// audienceRows lists rows after a file line (0: from the start). Paging by
// line, unlike by offset, skips nobody when a row changes status between
// pages (a recipient removed while a send runs). fresh keeps only rows
// whose action does not exist yet.
func (l *Ledger) audienceRows(ctx context.Context, releaseID, status string, afterLine int, fresh bool, limit, offset int) ([]AudienceRow, error) {
	if limit <= 0 {
		limit = 100
	}
	var out []AudienceRow
	err := l.read(ctx, func(tx queryTx) error {
		rows, err := tx.Query(audienceRowsSelect+`
			WHERE r.release_id = ? AND (? = '' OR r.status = ?) AND r.line > ? AND (? = 0 OR a.key IS NULL)
			ORDER BY r.line LIMIT ? OFFSET ?`,
			releaseID, status, status, afterLine, boolInt(fresh), limit, offset)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			r, err := scanAudienceRow(rows)
			if err != nil {
				return err
			}
			out = append(out, r)
		}
		return rows.Err()
	})
	return out, err
}

// audiencePage is how many recipients a send reads at a time.
const audiencePage = 500

// Pipelined sends: see SendAudience.
const (
	// DefaultConcurrency is the concurrency of `gatehouse audience send`:
	// enough connections to keep an SMTP server busy, few enough that a
	// batch's consent reads stay close to their hand-over.
	DefaultConcurrency = 8
	// MaxConcurrency bounds --concurrency.
	MaxConcurrency = 64
	// MaxBatch is the most recipients one batch decides together, and so
	// the most messages handed over between a recipient's consent read and
	// its own hand-over.
	MaxBatch = 100
	// MaxStaleSends is the widest the pipeline overlaps batches: the next
	// batch is decided while the current one is handed over only when at
	// most this many sends can then start between a recipient's consent
	// read and its own send (see AudienceSend.StaleSends).
	MaxStaleSends = 100
)

// AudienceSend asks the gate to send a release.
type AudienceSend struct {
	ReleaseID string
	Actor     string // executes; becomes owner of the release's task
	// From, when set, must equal the sender the release was approved with.
	From string
	// Concurrency is how many messages are handed over at once; 0 or 1
	// sends one recipient at a time, each decided in its own transaction.
	Concurrency int
	// Batch is how many recipients one transaction decides together; 0
	// picks 4 × Concurrency (1 when sending one at a time), at most
	// MaxBatch.
	Batch int
	// Progress, when set, is called from the sending goroutine after each
	// batch has been handed over and once at the end.
	Progress func(SendProgress)
	// RestoreCheckedBy is a person's word (why) that what a restored
	// ledger's release sent before the restore was checked by hand, for a
	// destination whose records the gate cannot consult; recorded.
	RestoreCheckedBy string
}

// SendProgress is how far a running send got.
type SendProgress struct {
	Eligible int           // eligible recipients of the release
	Done     int           // recipients this run has finished with (sent, skipped, refused, unknown)
	Sent     int           // confirmed sent by this run
	Held     int           // held or unknown outcome: they wait for a person or a reconcile
	Denied   int           // denied at send (consent changed)
	Elapsed  time.Duration // since the run started sending
	Final    bool          // the run has ended
}

// batchSize is the number of recipients decided per transaction.
func (req AudienceSend) batchSize() int {
	n := req.Batch
	if n <= 0 {
		n = 4 * req.concurrency()
		if req.concurrency() == 1 {
			n = 1
		}
	}
	return min(n, MaxBatch)
}

// overlaps reports whether a batch may be decided while the previous one
// is still being handed over: only when the wider bound on what starts
// between a recipient's consent read and its own send, two batches and
// the workers' hands (2 × Batch + Concurrency − 1), stays within
// MaxStaleSends. Otherwise each batch waits for the previous one, and the
// bound is Batch + Concurrency − 1.
func (req AudienceSend) overlaps() bool {
	return req.concurrency() > 1 && req.staleSends(2) <= MaxStaleSends
}

// StaleSends is the most sends that can start between a recipient's
// consent read and its own send in this run (see SendAudience).
func (req AudienceSend) StaleSends() int {
	if req.overlaps() {
		return req.staleSends(2)
	}
	return req.staleSends(1)
}

// staleSends is the bound when that many batches are decided or in the
// workers' hands at once: the batches and the workers' messages, less the
// recipient's own.
func (req AudienceSend) staleSends(batches int) int {
	return batches*req.batchSize() + req.concurrency() - 1
}

func (req AudienceSend) concurrency() int { return max(1, min(req.Concurrency, MaxConcurrency)) }

// SendAudience sends the release's notice once to every eligible recipient,
// each as its own business action keyed by (customer, release, action type).
// Re-running it sends nothing new for recipients already sent; after a crash
// it first reconciles unknown outcomes through the destination's lookup and
// then completes the rest, so nobody receives the notice twice.
//
// The send is pipelined through the gate's shipped steps. Recipients are
// read from the ledger a page at a time (never all at once) and taken in
// batches of at most MaxBatch. For each batch in this order: every
// recipient's consent is re-read from dir, one transaction (one fsync)
// proposes and approves the batch's new recipients, each just before its
// own intent, and makes the batch's intents durable as BeginAttempts
// does, and the messages are handed to Concurrency workers, each calling
// Deliver; RecordDeliveries records the outcomes as they come in. While
// one batch is handed over the next is decided (its consent reads and
// BeginAttempts), so the workers do not wait for the ledger; a batch's
// consent reads start only once every message of the batch before the
// previous one is in a worker's hands. So between a recipient's consent
// read and the start of its send at most 2 × Batch + Concurrency − 1 other
// sends start (71 at the defaults, 32 and 8). Batches overlap only when
// that is at most MaxStaleSends (100); with a larger Batch or Concurrency
// a batch's consent reads wait until every message of the previous batch
// is in a worker's hands, and the bound is Batch + Concurrency − 1 (at
// most 100 + 63). StaleSends is the bound of a given request. With
// Concurrency 1 the run is sequential: a batch is prepared only after the
// previous one's outcomes are recorded.
//
// A stop halts the run within one batch: BeginAttempts refuses the rest of
// the batch it meets, and a batch decided before the stop whose hand-over
// would start after the batch being handed over when the stop was seen is
// withdrawn instead (its attempts are recorded as not delivered, nothing
// was sent, and its recipients are approved again). The run returns an
// error wrapping ErrStopped. A
// crash at any point leaves each recipient sent, in flight (recovery makes
// it unknown, and the next run reconciles it), or not started.
func (l *Ledger) SendAudience(ctx context.Context, req AudienceSend, dest destination.Destination, dir Directory) (AudienceSummary, error) {
	rel, err := l.AudienceSummary(ctx, req.ReleaseID)
	if err != nil {
		return rel, err
	}
	if rel.ApprovedBy == "" {
		return rel, fmt.Errorf("send release %s: %w: the release has no send approval", req.ReleaseID, ErrApprovalStale)
	}
	// Each step below checks its own verb again (claim, reconcile, send);
	// this refuses a sender who may not send a release before any does.
	if err := l.Authorize(ctx, req.Actor, VerbAudienceSend); err != nil {
		return rel, err
	}
	if err := l.refuseLapsedRelease(ctx, rel, req.Actor); err != nil {
		return rel, err
	}
	if rel, err = l.bindRelease(ctx, rel, req, destination.EndpointOf(dest)); err != nil {
		return rel, err
	}
	task := TaskRef{ID: "release:" + req.ReleaseID, Subject: rel.Subject}
	if _, err := l.Claim(ctx, task, req.Actor); err != nil {
		return rel, fmt.Errorf("send release %s: %w", req.ReleaseID, err)
	}
	if _, err := l.Recover(ctx); err != nil {
		return rel, err
	}
	body, err := l.releaseBody(ctx, req.ReleaseID)
	if err != nil {
		return rel, err
	}
	// Addresses whose carrier became unable to receive the notice since
	// the last run (removed, missing from the latest export, denied) are
	// carried by the next customer with them.
	if n, err := l.carryOnRelease(ctx, req.ReleaseID, req.Actor); err != nil {
		return rel, err
	} else if n > 0 {
		rel.Eligible += n
	}
	run := newSendRun(l, req, rel, body, dest, dir)
	rc, err := run.verifyRelease(ctx, dest)
	if err != nil {
		out, serr := l.summaryAfter(ctx, req.ReleaseID, err)
		out.Restore = rc
		return out, serr
	}
	err = l.sendCarrying(ctx, run)
	run.report(true)
	out, err := l.summaryAfter(ctx, req.ReleaseID, err)
	out.Restore = rc
	return out, err
}

// sendCarrying runs passes over the release's recipients: the first over
// every eligible one, each further one over the customers who carry a
// notice since the pass before began, because its carrier was denied at
// send (or, by another run or a removal, handed on behind this run's
// reading). A pass proposes every recipient it reads, so the passes end
// once no address is handed on; one that finds none to take ends them too.
func (l *Ledger) sendCarrying(ctx context.Context, run *sendRun) error {
	for {
		done := run.doneSoFar()
		if err := run.send(ctx); err != nil {
			return err
		}
		if run.fresh && run.doneSoFar() == done {
			return nil
		}
		n, err := l.carryOnRelease(ctx, run.req.ReleaseID, run.req.Actor)
		if err != nil {
			return err
		}
		if n == 0 {
			if left, err := l.untouchedRecipients(ctx, run.req.ReleaseID); err != nil || !left {
				return err
			}
		}
		run.count(func(p *SendProgress) { p.Eligible += n })
		run.fresh = true
	}
}

// untouchedRecipients reports whether an eligible recipient of the release
// has no action yet.
func (l *Ledger) untouchedRecipients(ctx context.Context, releaseID string) (bool, error) {
	rows, err := l.audienceRows(ctx, releaseID, RowEligible, 0, true, 1, 0)
	return len(rows) > 0, err
}

// bindRelease checks the destination and sender of a send against the ones
// the release was approved with, binding a release approved before
// approvals named a destination to this first send's. A send elsewhere is
// refused before any recipient is touched. What it compares with is read in
// the deciding transaction: of two first sends at once, the second is
// judged against the binding the first recorded.
func (l *Ledger) bindRelease(ctx context.Context, rel AudienceSummary, req AudienceSend, ep destination.Endpoint) (AudienceSummary, error) {
	if rel.Destination == ep.Destination && (ep.Lookup == "" || ep.Lookup == rel.Lookup) && (req.From == "" || mailaddr.Same(req.From, rel.Sender)) &&
		otherSettle("", rel.Settle, ep) == nil {
		return rel, nil // bound already, and to this send's endpoint: nothing to write
	}
	dest := ep.Destination
	err := l.write(ctx, func(t *wtx) error {
		if err := t.QueryRow(`SELECT destination, lookup, sender, settle FROM audience_releases WHERE id = ?`, rel.ReleaseID).
			Scan(&rel.Destination, &rel.Lookup, &rel.Sender, &rel.Settle); err != nil {
			return fmt.Errorf("read release %s: %w", rel.ReleaseID, notFound(err))
		}
		var de *DestinationError
		switch {
		case rel.Destination == "":
		case rel.Destination != dest:
			de = &DestinationError{Key: "release " + rel.ReleaseID, Field: "destination", Recorded: rel.Destination, Named: dest}
		case ep.Lookup != "" && ep.Lookup != rel.Lookup:
			de = &DestinationError{Key: "release " + rel.ReleaseID, Field: "records endpoint", Recorded: orDash(rel.Lookup), Named: ep.Lookup}
		case req.From != "" && !mailaddr.Same(req.From, rel.Sender):
			de = &DestinationError{Key: "release " + rel.ReleaseID, Field: "sender", Recorded: rel.Sender, Named: req.From}
		default:
			// The settle time every recipient's attempt settles on.
			if de = otherSettle("release "+rel.ReleaseID, rel.Settle, ep); de == nil {
				return nil
			}
		}
		if de != nil {
			if err := t.event(req.Actor, "", "", EvWrongDestination, "",
				"The gate refused %s's send of release %s %s %s: the approved %s is %s; nothing was sent.",
				req.Actor, rel.ReleaseID, namedAs[de.Field], de.Named, de.Field, de.Recorded); err != nil {
				return err
			}
			return refuse(de)
		}
		sender := firstNonEmpty(req.From, destination.DefaultSender)
		if _, err := t.Exec(`UPDATE audience_releases SET destination = ?, lookup = ?, sender = ? WHERE id = ? AND destination = ''`,
			dest, ep.Lookup, sender, rel.ReleaseID); err != nil {
			return err
		}
		rel.Destination, rel.Lookup, rel.Sender = dest, ep.Lookup, sender
		return t.event(req.Actor, "", "", EvDestinationBound, "",
			"Release %s was approved before approvals named a destination; it is bound now to the destination of its first send, %s, from %s.",
			rel.ReleaseID, dest, sender)
	})
	return rel, err
}

// ownRecords reaches the records of dest and of nothing else: an audience
// run reconciles its recipients only where it sends.
func ownRecords(dest destination.Destination) destination.RecordsOpener {
	return destination.RecordsOpenerFunc(func(ep destination.Endpoint) (destination.Records, error) {
		lk, ok := dest.(destination.Records)
		if !ok || !sameEndpoint(ep, destination.EndpointOf(dest)) {
			return nil, nil
		}
		return lk, nil
	})
}

func (l *Ledger) summaryAfter(ctx context.Context, releaseID string, cause error) (AudienceSummary, error) {
	s, err := l.AudienceSummary(ctx, releaseID)
	return s, errors.Join(cause, err)
}

func (l *Ledger) releaseBody(ctx context.Context, releaseID string) (string, error) {
	var body string
	err := l.pool().QueryRowContext(ctx, `SELECT body FROM audience_releases WHERE id = ?`, releaseID).Scan(&body)
	return body, err
}

// prepareRecipient moves one recipient's action that an earlier run
// started to where it can be executed: reconciled when its outcome was left
// open (new recipients are proposed and approved by the batch that starts
// their attempts, see beginAttempts). It
// reports whether the recipient is to be executed now. Refusals that
// concern only this recipient are recorded and skipped; only an
// infrastructure error is returned.
func (l *Ledger) prepareRecipient(ctx context.Context, req AudienceSend, rel AudienceSummary, body string, r AudienceRow,
	looker destination.RecordsOpener) (bool, error) {
	key := r.ActionKey
	switch r.State {
	case StateSent, StateExecuting, StateFailed, StateDenied, StateCancelled:
		return false, nil
	case StateUnknown, StateHeld:
		a, err := l.Reconcile(ctx, ReconcileRequest{Key: key, Actor: req.Actor, Open: looker})
		if err != nil && !errors.Is(err, ErrHeld) {
			return false, err
		}
		if a.State != StateHeld || a.HoldCause != HoldSafeToRetry || a.LateArrivals > 0 {
			return false, nil // sent, arrived after all, or still needs a person
		}
		if _, err := l.ReleaseHold(ctx, key, req.Actor, "audience send re-run: reconciliation proved nothing arrived"); errors.Is(err, ErrNotPermitted) {
			return false, nil // nothing arrived on a person's word: a person releases it (recorded)
		} else if err != nil {
			return false, err
		}
	}
	return true, nil
}

// rereadConsent is the material read of one recipient, taken from dir just
// before its batch is decided.
func rereadConsent(ctx context.Context, dir Directory, customerID string) []MaterialRead {
	reread := []MaterialRead{{Source: "crm", Field: "consent"}}
	c, ok, err := dir.CustomerByID(ctx, customerID)
	switch {
	case err != nil:
		reread[0].Unavailable = true
	case !ok:
		reread[0].Value = "customer deleted"
	default:
		reread[0].Value = consentValue(c)
	}
	return reread
}

// recipientRefusal reports whether err is an answer about one recipient
// only (recorded, and the run goes on), as opposed to one that ends the run.
func recipientRefusal(err error) bool {
	for _, s := range []error{ErrDenied, ErrHeld, ErrInFlight, ErrCancelled, ErrDuplicate, ErrUnknownOutcome, ErrNotDelivered, ErrFailed} {
		if errors.Is(err, s) {
			return !errors.Is(err, ErrStopped) && !errors.Is(err, ErrNotRecorded)
		}
	}
	return false
}

// newRecipient is the proposal of a recipient no run has touched yet,
// approved as Propose and Approve would, on the consent class recorded at
// reconciliation.
func (s *sendRun) newRecipient(r AudienceRow) (*newRecipient, error) {
	p := Proposal{Task: TaskRef{ID: "release:" + s.req.ReleaseID}, Customer: r.CustomerID, Event: s.req.ReleaseID,
		ActionType: s.rel.ActionType, Target: "audience", Recipient: r.Email, Subject: s.rel.Subject, Body: s.body, Actor: s.req.Actor,
		Destination: s.rel.Destination, Lookup: s.rel.Lookup, Sender: s.rel.Sender}.withDefaults()
	if s.rel.Settle >= 0 {
		p.Settle = &s.rel.Settle // each recipient's approval binds the release's
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if err := validateApproval(s.rel.ApprovedBy, nil); err != nil {
		return nil, err
	}
	return &newRecipient{proposal: p, approver: s.rel.ApprovedBy,
		material: []MaterialRead{{Source: "crm", Field: "consent", Value: r.Consent.MaterialValue()}}}, nil
}

// proposeAndApprove is one new recipient: proposed (a recipient withdrawn
// meanwhile stays cancelled, and the gate refuses it later) and approved
// unless it already moved on.
func (t *wtx) proposeAndApprove(p Proposal, approver string, material []MaterialRead) error {
	a, err := t.propose(p)
	var keep *committedRefusal
	if errors.As(err, &keep) {
		err = keep.err // its history line stays: nothing is rolled back below unless the run ends
	}
	switch {
	case errors.Is(err, ErrCancelled):
		return nil
	case err != nil && !errors.Is(err, ErrDuplicate) && !errors.Is(err, ErrInFlight) && !errors.Is(err, ErrUnknownOutcome):
		return err
	case err != nil:
		// Another run got there first (sent, in flight, or its outcome
		// left open): the attempt below is refused for this recipient
		// alone, as it would be for one an earlier run started. A
		// refusal returns no action to go on with: read it.
		if a, err = getAction(t, p.Key()); err != nil {
			return err
		}
	}
	// Otherwise a is the action as propose left it (inserted, or its
	// version counted up with each change), so approve's compare-and-swap
	// on the version still catches any difference.
	if err := t.approve(&a, approver, material); !errors.Is(err, ErrWrongState) {
		return err
	}
	return nil
}

// consentValue is the consent field as the approval snapshot records it:
// the customer's consent class (opted in is "yes", see MaterialValue), so a
// CRM re-exported in other words does not change it, and a changed class
// denies the send.
func consentValue(c Customer) string {
	return c.Class().MaterialValue()
}

// UpsertCustomers refreshes the ledger's mirror of CRM records as given,
// without ImportCustomers' checks (unknown consent, resubscribes).
// It is durable: a withdrawn consent or a new suppression must survive a
// power loss, or a later send could go out on the old value.
func (l *Ledger) UpsertCustomers(ctx context.Context, cs []Customer) error {
	return l.write(ctx, func(t *wtx) error {
		stmt, err := t.prepareCustomerUpsert()
		if err != nil {
			return err
		}
		defer stmt.Close()
		for _, c := range cs {
			if c.ID == "" {
				return invalidf("customer record without id (email %q)", c.Email)
			}
			if err := upsertCustomer(t, stmt, c); err != nil {
				return err
			}
		}
		return nil
	})
}

// Customers is the ledger's mirror of CRM records, usable as a Directory.
func (l *Ledger) Customers() Directory { return mirror{l.pool()} }

// mirror reads the customers table through the read pool, or through the
// write transaction that has just refreshed it.
type mirror struct {
	q interface {
		QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	}
}

func (m mirror) CustomerByID(ctx context.Context, id string) (Customer, bool, error) {
	return m.one(ctx, `SELECT `+customerColumns+` FROM customers WHERE id = ?`, id)
}

func (m mirror) CustomerByEmail(ctx context.Context, email string) (Customer, bool, error) {
	return m.one(ctx, `SELECT `+customerColumns+` FROM customers WHERE email = ? COLLATE NOCASE ORDER BY id LIMIT 1`, email)
}

func (m mirror) one(ctx context.Context, q, arg string) (Customer, bool, error) {
	var c Customer
	var sup int
	err := m.q.QueryRowContext(ctx, q, arg).Scan(&c.ID, &c.Email, &c.Consent, &sup, &c.ConsentClass, &c.Lifecycle)
	if errors.Is(err, sql.ErrNoRows) {
		return c, false, nil
	}
	c.Suppressed = sup == 1
	return c, err == nil, err
}

// refuseLapsedRelease refuses, with its history line, a send of a release
// whose approver could not approve a release now on a registered ledger
// (no longer registered, enabled, a person, or holding the approve role):
// a release's approval is judged at send by today's rules, as an action's
// is (see lapsedApproval). Nothing is sent; an approval by someone who
// may approve it now lets it go.
func (l *Ledger) refuseLapsedRelease(ctx context.Context, rel AudienceSummary, actor string) error {
	return l.write(ctx, func(t *wtx) error {
		approver, err := readStanding(t, rel.ApprovedBy, "")
		if err != nil || !approver.registered {
			return err
		}
		why := releaseApprovalLapsed(approver)
		if why == "" {
			return nil
		}
		t.note(map[string]any{"release": rel.ReleaseID, "approver": rel.ApprovedBy, "why": why}, "")
		if err := t.event(actor, "", "", EvApprovalStale, "",
			"%s tried to send release %s, but its approval by %s no longer holds: %s; nothing was sent, and it needs approval again.",
			actor, rel.ReleaseID, rel.ApprovedBy, why); err != nil {
			return err
		}
		return refuse(&StateError{Key: "release " + rel.ReleaseID, Err: ErrApprovalStale,
			Hint: "its approval by " + rel.ApprovedBy + " no longer holds: " + why + "; approve it again (audience approve)"})
	})
}

// releaseApprovalLapsed is why a release approved by approver (its
// standing as registered now) would not be approved now ("" : it would).
func releaseApprovalLapsed(approver standing) string {
	approver.tokenOf = approver.actor.ID
	if why := approver.refusal(VerbAudienceApprove, RoleApprove, ""); why != "" {
		return approver.actor.ID + " could not approve it now: " + why
	}
	return ""
}

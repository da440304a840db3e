package ledger

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"

	"gatehouse/destination"
	"gatehouse/ledger/audiencefile"
)

// Customer is a CRM record as far as an audience needs it.
type Customer struct {
	ID           string
	Email        string
	Consent      string       // the consent as the CRM wrote it ("yes", "hs_email_optout=false")
	ConsentClass ConsentClass // what it means; empty: read Consent in the generic vocabulary (see Class)
	Suppressed   bool         // on a suppression list: never send
	Lifecycle    string       // lifecycle stage as the CRM wrote it ("Lead", "customer"), if it has one
}

// Directory resolves the identities an audience file names against the CRM.
// Lookups that fail because the CRM is unreachable return an error; a
// customer that does not exist is (Customer{}, false, nil).
type Directory interface {
	CustomerByID(ctx context.Context, id string) (Customer, bool, error)
	CustomerByEmail(ctx context.Context, email string) (Customer, bool, error)
}

// AudienceRow statuses, in the order reconciliation decides them.
const (
	RowError     = "error"     // the row itself is unusable
	RowUnmatched = "unmatched" // no customer with that id or address
	RowDuplicate = "duplicate" // the same customer appeared on an earlier row
	RowExcluded  = "excluded"  // no consent or suppressed
	RowRemoved   = "removed"   // removed by a person, with a reason
	RowEligible  = "eligible"  // will receive the notice once
)

// AudienceImport is an uploaded file to reconcile into a release.
type AudienceImport struct {
	ReleaseID  string
	SourceName string    // the file's name, for people
	Source     io.Reader // the file itself; stored with its digest
	ActionType string    // e.g. "notice"
	Subject    string
	Body       string
	Actor      string
	// AllowImplicit makes customers with implicit consent (subscribed
	// without an explicit opt-in) eligible; it is recorded with the release.
	AllowImplicit bool
	// Customers, when given, refresh the ledger's customer mirror in the
	// same transaction that records the release, and the rows are resolved
	// against the refreshed mirror: a refused import records neither.
	// CustomersReport, when given, receives what that import found.
	Customers       *CustomerImport
	CustomersReport *CustomerReport
}

// AudienceRow is one source row and what became of it.
type AudienceRow struct {
	Line       int
	Identity   string
	CustomerID string
	Email      string
	Status     string
	Reason     string
	ActionKey  string
	State      State        // the action's state once sending started ("" before)
	Consent    ConsentClass // the customer's consent class at reconciliation ("" for unresolved rows and rows reconciled before classes)
	Lifecycle  string       // the customer's lifecycle stage at reconciliation, as the CRM wrote it
}

// AudienceSummary keeps every count of a release apart. The counts always
// add up (see Check).
type AudienceSummary struct {
	// Restore is what this send looked up after a restore (SendAudience
	// only; zero otherwise).
	Restore      RestoreCheck
	ReleaseID    string
	SourceName   string
	SourceDigest string
	ActionType   string
	Subject      string
	ApprovedBy   string
	Destination  string // bound at approval ("" before destinations were bound)
	Lookup       string // where the destination's records are consulted, bound with it
	Sender       string
	// AllowImplicit: customers with implicit consent are eligible.
	AllowImplicit bool

	SourceRows int // data rows in the file (blank lines and the header excluded)
	ErrorRows  int // rows that could not be read as an identity
	Unmatched  int // identities with no customer
	Duplicates int // rows naming a customer already on an earlier row
	Resolved   int // distinct customers matched
	Excluded   int // resolved, but no consent or suppressed
	Removed    int // resolved, removed by a person
	Eligible   int // resolved and still to receive the notice

	Attempted int // eligible recipients with at least one attempt
	Confirmed int // eligible recipients whose notice was confirmed sent
	Held      int // eligible recipients waiting for a person (held, or outcome unknown)
	Denied    int // eligible recipients denied at send (consent changed)
	Arrived   int // filled by callers that count the destination (-1 unknown)
}

// Check verifies the arithmetic every report relies on.
func (s AudienceSummary) Check() error {
	if s.SourceRows != s.ErrorRows+s.Unmatched+s.Duplicates+s.Resolved {
		return fmt.Errorf("release %s: %d source rows ≠ %d errors + %d unmatched + %d duplicates + %d resolved",
			s.ReleaseID, s.SourceRows, s.ErrorRows, s.Unmatched, s.Duplicates, s.Resolved)
	}
	if s.Resolved != s.Excluded+s.Removed+s.Eligible {
		return fmt.Errorf("release %s: %d resolved ≠ %d excluded + %d removed + %d eligible",
			s.ReleaseID, s.Resolved, s.Excluded, s.Removed, s.Eligible)
	}
	if s.Confirmed > s.Attempted || s.Attempted > s.Eligible {
		return fmt.Errorf("release %s: confirmed %d ≤ attempted %d ≤ eligible %d does not hold", s.ReleaseID, s.Confirmed, s.Attempted, s.Eligible)
	}
	return nil
}

// ErrReleaseExists means the release id is taken by a different file.
var ErrReleaseExists = errors.New("audience release exists with a different file")

// ImportAudience reconciles an audience file against the directory and
// records the release: every row with its status, the file itself and its
// digest. The file is read once, as a stream. Importing the same file under
// the same release id again changes nothing; a different file is refused.
// A file that is unusable as a whole is refused and nothing is recorded.
func (l *Ledger) ImportAudience(ctx context.Context, in AudienceImport, dir Directory) (AudienceSummary, error) {
	if err := in.validate(); err != nil {
		return AudienceSummary{}, err
	}
	// The file is kept as the release's artifact; its rows are resolved
	// and recorded one at a time inside the transaction, never held all
	// at once.
	var stored bytes.Buffer
	hash := sha256.New()
	var err error
	var rep CustomerReport
	if in.Customers != nil {
		if rep, err = CheckCustomers(*in.Customers); err != nil {
			in.report(rep)
			return AudienceSummary{}, err
		}
	}
	if _, err = io.Copy(io.MultiWriter(&stored, hash), in.Source); err != nil {
		return AudienceSummary{}, fmt.Errorf("audience %s (%s): %w", in.ReleaseID, in.SourceName, err)
	}
	digest := "sha256:" + hex.EncodeToString(hash.Sum(nil))
	// Refreshed customers must be durable (see UpsertCustomers).
	err = l.writeWith(ctx, in.Customers != nil, func(t *wtx) error {
		var existing string
		err := t.QueryRow(`SELECT source_digest FROM audience_releases WHERE id = ?`, in.ReleaseID).Scan(&existing)
		if err == nil && existing != digest {
			return fmt.Errorf("%w: release %s was reconciled from another file (%s); use a new release id", ErrReleaseExists, in.ReleaseID, existing)
		}
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		if in.Customers != nil {
			rep.KeptWithdrawn, rep.Resubscribes = nil, nil
			if err := t.importCustomers(*in.Customers, &rep); err != nil {
				return err
			}
		}
		if existing != "" {
			return nil
		}
		rowDir := dir
		if in.Customers != nil {
			rowDir = mirror{t} // the refreshed mirror
		}
		return t.insertRelease(ctx, in, digest, stored.Bytes(), rowDir)
	})
	if err == nil && in.Customers != nil {
		rep.Written = true
	}
	in.report(rep)
	if err != nil {
		return AudienceSummary{}, err
	}
	return l.AudienceSummary(ctx, in.ReleaseID)
}

// report hands the customers import's report to the caller who asked.
func (in AudienceImport) report(rep CustomerReport) {
	if in.CustomersReport != nil && in.Customers != nil {
		*in.CustomersReport = rep
	}
}

func (in AudienceImport) validate() error {
	for name, v := range map[string]string{"release id": in.ReleaseID, "action type": in.ActionType, "actor": in.Actor, "subject": in.Subject} {
		if strings.TrimSpace(v) == "" {
			return invalidf("audience import: %s is empty", name)
		}
	}
	if strings.Contains(in.ReleaseID, ":") {
		return invalidf("audience import: release id %q may not contain ':'", in.ReleaseID)
	}
	for _, err := range []error{ValidateKeyFact("release id", in.ReleaseID), ValidateKeyFact("action type", in.ActionType),
		ValidateHeaderText("subject", in.Subject), ValidateBody("body", in.Body)} {
		if err != nil {
			return err
		}
	}
	if in.Source == nil {
		return invalidf("audience import: no source file")
	}
	return nil
}

// resolveRows reads the file and decides every row's status, handing each
// row to emit as soon as it is decided. firstLine says on which earlier
// line a customer was resolved, if any (a duplicate).
func resolveRows(ctx context.Context, src io.Reader, dir Directory, allowImplicit bool,
	firstLine func(customerID string) (int, bool, error), emit func(AudienceRow) error) error {
	_, err := audiencefile.Read(src, func(r audiencefile.Row) error {
		row := AudienceRow{Line: r.Line, Identity: r.Identity(), CustomerID: r.CustomerID, Email: r.Email}
		if r.Err != "" {
			row.Status, row.Reason = RowError, r.Err
			return emit(row)
		}
		c, ok, err := lookupCustomer(ctx, dir, r)
		if err != nil {
			return fmt.Errorf("line %d: resolve %s: %w", r.Line, row.Identity, err)
		}
		first, dup := 0, false
		if ok {
			if first, dup, err = firstLine(c.ID); err != nil {
				return err
			}
		}
		row.Status = decideRow(&row, c, ok, first, dup, allowImplicit)
		return emit(row)
	})
	return err
}

func lookupCustomer(ctx context.Context, dir Directory, r audiencefile.Row) (Customer, bool, error) {
	if r.CustomerID != "" {
		return dir.CustomerByID(ctx, r.CustomerID)
	}
	return dir.CustomerByEmail(ctx, r.Email)
}

func decideRow(row *AudienceRow, c Customer, found bool, first int, dup bool, allowImplicit bool) string {
	if !found {
		row.Reason = "no customer with this identity"
		return RowUnmatched
	}
	row.CustomerID, row.Email = c.ID, c.Email
	if dup {
		row.Reason = fmt.Sprintf("same customer as line %d", first)
		return RowDuplicate
	}
	row.Consent, row.Lifecycle = c.Class(), c.Lifecycle
	if err := ValidateAddress("address", c.Email); err != nil {
		row.Reason = err.Error()
		return RowExcluded
	}
	if ok, why := c.EligibleFor(allowImplicit); !ok {
		row.Reason = why
		return RowExcluded
	}
	return RowEligible
}

// insertRelease records the release and resolves its rows against dir,
// recording each as it is decided.
func (t *wtx) insertRelease(ctx context.Context, in AudienceImport, digest string, source []byte, dir Directory) error {
	if _, err := t.Exec(`INSERT INTO audience_releases (id, source_name, source_digest, source, action_type, subject, body,
		content_digest, created_by, created_at, allow_implicit) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		in.ReleaseID, in.SourceName, digest, source, in.ActionType, in.Subject, in.Body,
		Digest("", in.Subject, in.Body, "audience"), in.Actor, ns(t.now()), boolInt(in.AllowImplicit)); err != nil {
		return fmt.Errorf("record release %s: %w", in.ReleaseID, err)
	}
	stmt, err := t.Prepare(`INSERT INTO audience_rows (release_id, line, identity, customer_id, email, status, reason, action_key, consent, lifecycle)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)
	if err != nil {
		return err
	}
	defer stmt.Close()
	// A customer resolved on an earlier row was recorded with one of these
	// statuses; the index on (release_id, customer_id) finds it.
	first, err := t.Prepare(`SELECT line FROM audience_rows WHERE release_id = ? AND customer_id = ?
		AND status IN ('excluded', 'removed', 'eligible') LIMIT 1`)
	if err != nil {
		return err
	}
	defer first.Close()
	firstLine := func(customerID string) (int, bool, error) {
		var line int
		err := first.QueryRow(in.ReleaseID, customerID).Scan(&line)
		if errors.Is(err, sql.ErrNoRows) {
			return 0, false, nil
		}
		return line, err == nil, err
	}
	counts := map[string]int{}
	total := 0
	err = resolveRows(ctx, bytes.NewReader(source), dir, in.AllowImplicit, firstLine, func(r AudienceRow) error {
		key := ""
		if r.Status == RowEligible {
			key = audienceKey(r.CustomerID, in.ReleaseID, in.ActionType)
		}
		if _, err := stmt.Exec(in.ReleaseID, r.Line, r.Identity, r.CustomerID, r.Email, r.Status, r.Reason, key, string(r.Consent), r.Lifecycle); err != nil {
			return fmt.Errorf("record row %d of release %s: %w", r.Line, in.ReleaseID, err)
		}
		counts[r.Status]++
		total++
		return nil
	})
	if err != nil {
		return fmt.Errorf("audience %s (%s): %w", in.ReleaseID, in.SourceName, err)
	}
	takes := "opted-in customers only"
	if in.AllowImplicit {
		takes = "opted-in customers and customers with implicit consent"
	}
	return t.event(in.Actor, "", "", EvAudienceImported, "",
		"%s reconciled %s into release %s, which takes %s: %d rows, %d eligible, %d excluded, %d unmatched, %d duplicates, %d with errors.",
		in.Actor, firstNonEmpty(in.SourceName, "an audience file"), in.ReleaseID, takes, total, counts[RowEligible],
		counts[RowExcluded], counts[RowUnmatched], counts[RowDuplicate], counts[RowError])
}

// audienceKey is the action key of one recipient of a release: customer,
// release and action type, so re-sending a release never duplicates while a
// new release may send again.
func audienceKey(customerID, releaseID, actionType string) string {
	return Key(customerID, releaseID, actionType, "audience", 0)
}

// RemoveRecipient takes one eligible customer out of a release before their
// notice is sent, recording who and why.
func (l *Ledger) RemoveRecipient(ctx context.Context, releaseID, customerID, actor, reason string) error {
	if strings.TrimSpace(reason) == "" {
		return invalidf("remove %s from %s: a reason is required", customerID, releaseID)
	}
	return l.write(ctx, func(t *wtx) error {
		var key string
		err := t.QueryRow(`SELECT action_key FROM audience_rows WHERE release_id = ? AND customer_id = ? AND status = 'eligible'`,
			releaseID, customerID).Scan(&key)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("remove %s from %s: not an eligible recipient: %w", customerID, releaseID, ErrNotFound)
		}
		if err != nil {
			return err
		}
		if err := t.withdrawRecipient(releaseID, customerID, key, actor, reason); err != nil {
			return err
		}
		if _, err := t.Exec(`UPDATE audience_rows SET status = 'removed', reason = ? WHERE release_id = ? AND customer_id = ? AND status = 'eligible'`,
			"removed by "+actor+": "+reason, releaseID, customerID); err != nil {
			return err
		}
		return t.event(actor, "", key, EvAudienceRemoved, reason, "%s removed %s from release %s because: %s.", actor, customerID, releaseID, reason)
	})
}

// withdrawRecipient makes sure the removed recipient's action can never be
// executed: an existing one not yet executed is cancelled with its
// approvals, and where none exists yet a cancelled one is recorded, so a
// send already reading its page of recipients is refused by the gate.
func (t *wtx) withdrawRecipient(releaseID, customerID, key, actor, reason string) error {
	why := "removed from release " + releaseID + " by " + actor + ": " + reason
	a, err := getAction(t, key)
	switch {
	case errors.Is(err, ErrNotFound):
		var subject, body, actionType, email, dest, lookup, sender string
		if err := t.QueryRow(`SELECT r.subject, r.body, r.action_type, a.email, r.destination, r.lookup, r.sender FROM audience_releases r
			JOIN audience_rows a ON a.release_id = r.id WHERE r.id = ? AND a.customer_id = ? AND a.status = 'eligible'`,
			releaseID, customerID).Scan(&subject, &body, &actionType, &email, &dest, &lookup, &sender); err != nil {
			return fmt.Errorf("remove %s from %s: %w", customerID, releaseID, err)
		}
		task, err := t.ensureTask("release:"+releaseID, "", subject, actor)
		if err != nil {
			return err
		}
		p := Proposal{Customer: customerID, Event: releaseID, ActionType: actionType, Target: "audience",
			Recipient: email, Subject: subject, Body: body, Actor: actor, Destination: dest, Lookup: lookup, Sender: sender}
		_, err = t.insertAction(p, key, p.content().Digest(), task.ID, "", StateCancelled)
		return err
	case err != nil:
		return err
	}
	switch a.State {
	case StateDrafting, StateAwaitingApproval, StateApproved, StateDenied:
	case StateCancelled:
		return nil
	default:
		return &StateError{Key: key, State: a.State, Err: ErrWrongState, Hint: "sending already started for this recipient"}
	}
	if _, err := t.invalidateApprovals(key, why); err != nil {
		return err
	}
	return t.transition(&a, StateCancelled, why, "")
}

// ApproveAudience binds the send approval of a release to its content and
// source file, the destination it goes to and the sender it comes from.
func (l *Ledger) ApproveAudience(ctx context.Context, releaseID, approver, dest, sender string) error {
	return l.ApproveAudienceAt(ctx, releaseID, approver, destination.Endpoint{Destination: dest}, sender)
}

// ApproveAudienceAt is ApproveAudience for a destination whose records are
// consulted at ep.Lookup: the approval binds that endpoint too.
func (l *Ledger) ApproveAudienceAt(ctx context.Context, releaseID, approver string, ep destination.Endpoint, sender string) error {
	dest := ep.Destination
	if approver == "" {
		return invalidf("approve release %s: approver is empty", releaseID)
	}
	if dest == "" {
		return invalidf("approve release %s: name the destination it goes to", releaseID)
	}
	if sender == "" {
		sender = destination.DefaultSender
	}
	if err := ValidateAddress("sender", sender); err != nil {
		return err
	}
	if err := ValidateHeaderText("destination", dest); err != nil {
		return err
	}
	return l.write(ctx, func(t *wtx) error {
		var creator, content string
		err := t.QueryRow(`SELECT created_by, content_digest FROM audience_releases WHERE id = ?`, releaseID).Scan(&creator, &content)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("release %s: %w", releaseID, ErrNotFound)
		}
		if err != nil {
			return err
		}
		if _, err := t.Exec(`UPDATE audience_releases SET approved_by = ?, approved_at = ?, approved_digest = ?, destination = ?, lookup = ?, sender = ? WHERE id = ?`,
			approver, ns(t.now()), content, dest, ep.Lookup, sender, releaseID); err != nil {
			return err
		}
		return t.event(approver, "", "", EvApproved, "", "%s approved sending release %s from %s via %s (content %s).",
			approver, releaseID, sender, ep, content[:19])
	})
}

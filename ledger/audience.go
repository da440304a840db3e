package ledger

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"strings"
	"time"

	"gatehouse/destination"
	"gatehouse/internal/mailaddr"
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
	RowMissing   = "missing"   // absent from the latest CRM export: the mirror's record of them is stale
	RowCovered   = "covered"   // a duplicate by address: another customer with the same address carries the notice
	RowEligible  = "eligible"  // will receive the notice once
)

// RowStatuses lists every row status in the order reconciliation decides
// them.
var RowStatuses = []string{RowError, RowUnmatched, RowDuplicate, RowExcluded, RowRemoved, RowMissing, RowCovered, RowEligible}

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
	// LocalPart is how the customers' addresses are compared to send one
	// notice per address: local parts folded (the default) or kept
	// case-sensitive. It is recorded with the release and in its digest.
	LocalPart destination.LocalPart
	// Customers, when given, refresh the ledger's customer mirror in the
	// same transaction that records the release, and the rows are resolved
	// against the refreshed mirror: a refused import records neither. A
	// customer the mirror holds but the export lacks is missing from the
	// latest export, never eligible, unless Customers.KeepMissing.
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
	// Address is the customer's address as the release compares addresses
	// (mailaddr.Identity, with the release's local-part flag); "" for
	// unresolved rows, rows excluded for their address, and rows reconciled
	// before addresses were compared. Rows keep the address they were
	// reconciled by: a release reconciled by an older gate keeps its
	// carriers.
	Address string
	// CarrierLine is, for a covered row, the line of the customer whose
	// notice goes to the address.
	CarrierLine int
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
	// Settle is the destination's settle time, bound with it
	// (SettleUnbound on releases approved before approvals bound one).
	Settle time.Duration
	Sender string
	// AllowImplicit: customers with implicit consent are eligible.
	AllowImplicit bool
	// LocalPart: how the release compares its customers' addresses.
	LocalPart destination.LocalPart

	SourceRows int // data rows in the file (blank lines and the header excluded)
	ErrorRows  int // rows that could not be read as an identity
	Unmatched  int // identities with no customer
	Duplicates int // duplicates by id: rows naming a customer already on an earlier row
	Resolved   int // distinct customers matched
	Excluded   int // resolved, but no consent or suppressed
	Removed    int // resolved, removed by a person
	Missing    int // resolved, but absent from the latest CRM export
	Covered    int // duplicates by address: resolved, and another customer with the address carries the notice
	Eligible   int // resolved and still to receive the notice (one per address)

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
	if s.Resolved != s.Excluded+s.Removed+s.Missing+s.Covered+s.Eligible {
		return fmt.Errorf("release %s: %d resolved ≠ %d excluded + %d removed + %d missing + %d covered + %d eligible",
			s.ReleaseID, s.Resolved, s.Excluded, s.Removed, s.Missing, s.Covered, s.Eligible)
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
	if _, err = io.Copy(io.MultiWriter(&stored, hash), io.LimitReader(in.Source, audiencefile.MaxBytes+1)); err != nil {
		return AudienceSummary{}, fmt.Errorf("audience %s (%s): %w", in.ReleaseID, in.SourceName, err)
	}
	if err := withinLimits(in.SourceName, stored.Bytes()); err != nil {
		return AudienceSummary{}, err
	}
	digest := "sha256:" + hex.EncodeToString(hash.Sum(nil))
	// Refreshed customers must be durable (see UpsertCustomers).
	err = l.writeWith(ctx, in.Customers != nil, func(t *wtx) error {
		if _, err := t.permit(in.Actor, VerbAudienceImport, "", ""); err != nil {
			return err
		}
		var existing string
		var local destination.LocalPart
		err := t.QueryRow(`SELECT source_digest, case_sensitive_local_part FROM audience_releases WHERE id = ?`, in.ReleaseID).Scan(&existing, &local)
		if err == nil && existing != digest {
			return fmt.Errorf("%w: release %s was reconciled from another file (%s); use a new release id", ErrReleaseExists, in.ReleaseID, existing)
		}
		if err == nil && local != in.LocalPart {
			return fmt.Errorf("%w: release %s compares the local parts of addresses %s; use a new release id", ErrReleaseExists, in.ReleaseID, localPartWords(local))
		}
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		var present map[string]CustomerRecord
		if in.Customers != nil {
			rep.KeptWithdrawn, rep.Resubscribes, rep.Missing, rep.KeptMissing = nil, nil, nil, false
			if present, err = t.importCustomers(*in.Customers, &rep); err != nil {
				return err
			}
		}
		if existing != "" {
			if in.Customers == nil {
				return nil
			}
			// The export is the latest word on the customers of the
			// release recorded before.
			return t.markMissing(in.ReleaseID, present, *in.Customers, &rep)
		}
		rowDir := dir
		if in.Customers != nil {
			rowDir = mirror{t} // the refreshed mirror
		}
		return t.insertRelease(ctx, in, digest, stored.Bytes(), rowDir, present, &rep)
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

// withinLimits refuses an audience file over audiencefile's limits before
// anything is recorded: over MaxBytes (the caller read one byte more than
// the limit, never the rest), or over MaxRows (counted without resolving a
// row, so a file too long is refused before its first row is looked up).
func withinLimits(name string, file []byte) error {
	if len(file) > audiencefile.MaxBytes {
		return invalidf("audience file %s is over the limit of %d bytes (64 MiB); split the release into several", name, audiencefile.MaxBytes)
	}
	if _, err := audiencefile.CountRows(bytes.NewReader(file), audiencefile.MaxRows); err != nil {
		return invalidf("audience file %s has more than %d rows, the limit of an audience file; split the release into several", name, audiencefile.MaxRows)
	}
	return nil
}

// rowRules are what reconciliation decides a row by besides the
// directory: the release's consent and address rules, and what the rows
// before it were.
type rowRules struct {
	allowImplicit bool
	local         destination.LocalPart
	// firstLine says on which earlier line a customer was resolved, if any
	// (a duplicate by id).
	firstLine func(customerID string) (int, bool, error)
	// missing reports whether the latest export lacks a customer who would
	// be eligible (nil: no export was given).
	missing func(row AudienceRow) bool
	// missingFrom names that export.
	missingFrom string
	// carrier finds the earlier eligible row with an address, if any (a
	// duplicate by address).
	carrier func(address string) (AudienceRow, bool, error)
}

// resolveRows reads the file and decides every row's status, handing each
// row to emit as soon as it is decided.
func resolveRows(ctx context.Context, src io.Reader, dir Directory, rules rowRules, emit func(AudienceRow) error) error {
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
			if first, dup, err = rules.firstLine(c.ID); err != nil {
				return err
			}
		}
		if row.Status, err = rules.decide(&row, c, ok, first, dup); err != nil {
			return fmt.Errorf("line %d: %w", r.Line, err)
		}
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

// decide is a resolved row's status. The address a CRM gave with space
// around it is the address without: the notice goes there, and it is the
// address of any other customer who has it.
func (rr rowRules) decide(row *AudienceRow, c Customer, found bool, first int, dup bool) (string, error) {
	if !found {
		row.Reason = "no customer with this identity"
		return RowUnmatched, nil
	}
	row.CustomerID, row.Email = c.ID, strings.TrimSpace(c.Email)
	if dup {
		row.Reason = fmt.Sprintf("same customer as line %d", first)
		return RowDuplicate, nil
	}
	row.Consent, row.Lifecycle = c.Class(), c.Lifecycle
	if err := ValidateAddress("address", row.Email); err != nil {
		row.Reason = err.Error()
		return RowExcluded, nil
	}
	address, err := mailaddr.Identity(row.Email, rr.local)
	if err != nil {
		// No identity, no way to tell whether another customer's
		// address is the same mailbox: sent, it could be a second
		// notice.
		row.Reason = err.Error()
		return RowExcluded, nil
	}
	row.Address = address
	if ok, why := c.EligibleFor(rr.allowImplicit); !ok {
		row.Reason = why
		return RowExcluded, nil
	}
	if rr.missing != nil && rr.missing(*row) {
		row.Reason = "missing from the latest export (" + rr.missingFrom + ")"
		return RowMissing, nil
	}
	if rr.carrier != nil {
		carrier, shared, err := rr.carrier(row.Address)
		if err != nil {
			return "", err
		}
		if shared {
			row.CarrierLine = carrier.Line
			row.Reason = fmt.Sprintf("covered by %s (line %d): same address", carrier.CustomerID, carrier.Line)
			return RowCovered, nil
		}
	}
	return RowEligible, nil
}

// insertRelease records the release and resolves its rows against dir,
// recording each as it is decided. present, when a customers import came
// with the release, is who its export has: a customer the mirror holds
// besides is missing from the latest export (unless the import keeps them).
func (t *wtx) insertRelease(ctx context.Context, in AudienceImport, digest string, source []byte, dir Directory,
	present map[string]CustomerRecord, rep *CustomerReport) error {
	if _, err := t.Exec(`INSERT INTO audience_releases (id, source_name, source_digest, source, action_type, subject, body,
		content_digest, created_by, created_at, allow_implicit, case_sensitive_local_part) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		in.ReleaseID, in.SourceName, digest, source, in.ActionType, in.Subject, in.Body,
		releaseDigest(in.Subject, in.Body, in.LocalPart), in.Actor, ns(t.now()), boolInt(in.AllowImplicit), int(in.LocalPart)); err != nil {
		return fmt.Errorf("record release %s: %w", in.ReleaseID, err)
	}
	stmt, err := t.Prepare(`INSERT INTO audience_rows (release_id, line, identity, customer_id, email, status, reason, action_key, consent, lifecycle,
		address, carrier_line) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)
	if err != nil {
		return err
	}
	defer stmt.Close()
	// A customer resolved on an earlier row was recorded with one of these
	// statuses; the index on (release_id, customer_id) finds it.
	first, err := t.Prepare(`SELECT line FROM audience_rows WHERE release_id = ? AND customer_id = ?
		AND status IN ('excluded', 'removed', 'missing', 'covered', 'eligible') LIMIT 1`)
	if err != nil {
		return err
	}
	defer first.Close()
	// The first eligible customer with an address carries its notice; the
	// index on (release_id, address, line) finds it. Most addresses are
	// nobody else's, so the index is asked only for an address whose hash
	// an eligible row had before (a collision costs one query): a query per
	// row would make reconciling a large file several times slower.
	carrier, err := t.Prepare(`SELECT line, customer_id FROM audience_rows WHERE release_id = ? AND address = ? AND status = 'eligible'
		ORDER BY line LIMIT 1`)
	if err != nil {
		return err
	}
	defer carrier.Close()
	seed, carried := maphash.MakeSeed(), map[uint64]struct{}{}
	rules := rowRules{allowImplicit: in.AllowImplicit, local: in.LocalPart,
		firstLine: func(customerID string) (int, bool, error) {
			var line int
			err := first.QueryRow(in.ReleaseID, customerID).Scan(&line)
			if errors.Is(err, sql.ErrNoRows) {
				return 0, false, nil
			}
			return line, err == nil, err
		},
		carrier: func(address string) (AudienceRow, bool, error) {
			var r AudienceRow
			if _, ok := carried[maphash.String(seed, address)]; !ok {
				return r, false, nil
			}
			err := carrier.QueryRow(in.ReleaseID, address).Scan(&r.Line, &r.CustomerID)
			if errors.Is(err, sql.ErrNoRows) {
				return r, false, nil
			}
			return r, err == nil, err
		}}
	var kept []AudienceRow
	if present != nil {
		rules.missingFrom = firstNonEmpty(in.Customers.Source, "the CRM export")
		rules.missing = func(r AudienceRow) bool {
			if _, ok := present[r.CustomerID]; ok {
				return false
			}
			if in.Customers.KeepMissing {
				kept = append(kept, r)
				return false
			}
			return true
		}
	}
	counts := map[string]int{}
	total := 0
	err = resolveRows(ctx, bytes.NewReader(source), dir, rules, func(r AudienceRow) error {
		key := ""
		if r.Status == RowEligible {
			key = audienceKey(r.CustomerID, in.ReleaseID, in.ActionType)
		}
		if _, err := stmt.Exec(in.ReleaseID, r.Line, r.Identity, r.CustomerID, r.Email, r.Status, r.Reason, key, string(r.Consent), r.Lifecycle,
			r.Address, r.CarrierLine); err != nil {
			return fmt.Errorf("record row %d of release %s: %w", r.Line, in.ReleaseID, err)
		}
		switch r.Status {
		case RowEligible:
			carried[maphash.String(seed, r.Address)] = struct{}{}
		case RowMissing:
			rep.Missing = append(rep.Missing, r)
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
	also := ""
	if n := counts[RowCovered]; n > 0 {
		also += fmt.Sprintf(", %d covered by another customer's notice to the same address", n)
	}
	if n := counts[RowMissing]; n > 0 {
		also += fmt.Sprintf(", %d missing from the latest export", n)
	}
	if err := t.event(in.Actor, "", "", EvAudienceImported, "",
		"%s reconciled %s into release %s, which takes %s and compares the local parts of addresses %s: %d rows, %d eligible%s, %d excluded, %d unmatched, %d duplicates, %d with errors.",
		in.Actor, firstNonEmpty(in.SourceName, "an audience file"), in.ReleaseID, takes, localPartWords(in.LocalPart), total, counts[RowEligible],
		also, counts[RowExcluded], counts[RowUnmatched], counts[RowDuplicate], counts[RowError]); err != nil {
		return err
	}
	if len(kept) > 0 {
		rep.Missing, rep.KeptMissing = kept, true
		return t.keptMissingEvent(in.Actor, rules.missingFrom, in.ReleaseID, kept)
	}
	return nil
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
		if _, err := t.permit(actor, VerbAudienceRemove, "", ""); err != nil {
			return err
		}
		var key, status string
		err := t.QueryRow(`SELECT action_key, status FROM audience_rows WHERE release_id = ? AND customer_id = ? AND status IN ('eligible', 'covered')`,
			releaseID, customerID).Scan(&key, &status)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("remove %s from %s: not an eligible recipient: %w", customerID, releaseID, ErrNotFound)
		}
		if err != nil {
			return err
		}
		// A covered customer has no action of its own to withdraw (or one
		// withdrawn already, when it carried the address before).
		if status == RowEligible {
			if err := t.withdrawRecipient(releaseID, customerID, key, actor, reason); err != nil {
				return err
			}
		}
		if _, err := t.Exec(`UPDATE audience_rows SET status = 'removed', reason = ? WHERE release_id = ? AND customer_id = ? AND status = ?`,
			"removed by "+actor+": "+reason, releaseID, customerID, status); err != nil {
			return err
		}
		if err := t.event(actor, "", key, EvAudienceRemoved, reason, "%s removed %s from release %s because: %s.", actor, customerID, releaseID, reason); err != nil {
			return err
		}
		// Another customer with the address carries its notice now.
		_, err = t.carryOn(releaseID, actor)
		return err
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
		var settle time.Duration
		if err := t.QueryRow(`SELECT r.subject, r.body, r.action_type, a.email, r.destination, r.lookup, r.sender, r.settle FROM audience_releases r
			JOIN audience_rows a ON a.release_id = r.id WHERE r.id = ? AND a.customer_id = ? AND a.status = 'eligible'`,
			releaseID, customerID).Scan(&subject, &body, &actionType, &email, &dest, &lookup, &sender, &settle); err != nil {
			return fmt.Errorf("remove %s from %s: %w", customerID, releaseID, err)
		}
		task, err := t.ensureTask("release:"+releaseID, "", subject, actor)
		if err != nil {
			return err
		}
		p := Proposal{Customer: customerID, Event: releaseID, ActionType: actionType, Target: "audience",
			Recipient: email, Subject: subject, Body: body, Actor: actor, Destination: dest, Lookup: lookup, Sender: sender}
		if settle >= 0 {
			p.Settle = &settle
		}
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
// source file, the destination it goes to and the sender it comes from. It
// binds no settle time (see settleOf): ApproveAudienceAt does.
func (l *Ledger) ApproveAudience(ctx context.Context, releaseID, approver, dest, sender string) error {
	return l.approveAudience(ctx, releaseID, approver, destination.Endpoint{Destination: dest}, SettleUnbound, sender)
}

// ApproveAudienceAt is ApproveAudience for the endpoint ep, as
// destination.EndpointOf gives it: the approval binds its records endpoint
// and its settle time too, and a send through an endpoint that declares
// another is refused.
func (l *Ledger) ApproveAudienceAt(ctx context.Context, releaseID, approver string, ep destination.Endpoint, sender string) error {
	return l.approveAudience(ctx, releaseID, approver, ep, ep.Settle, sender)
}

func (l *Ledger) approveAudience(ctx context.Context, releaseID, approver string, ep destination.Endpoint, settle time.Duration, sender string) error {
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
		if _, err := t.permit(approver, VerbAudienceApprove, "", ""); err != nil {
			return err
		}
		var creator, content string
		err := t.QueryRow(`SELECT created_by, content_digest FROM audience_releases WHERE id = ?`, releaseID).Scan(&creator, &content)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("release %s: %w", releaseID, ErrNotFound)
		}
		if err != nil {
			return err
		}
		if _, err := t.Exec(`UPDATE audience_releases SET approved_by = ?, approved_at = ?, approved_digest = ?, destination = ?, lookup = ?, sender = ?, settle = ? WHERE id = ?`,
			approver, ns(t.now()), content, dest, ep.Lookup, sender, int64(max(settle, SettleUnbound)), releaseID); err != nil {
			return err
		}
		return t.event(approver, "", "", EvApproved, "", "%s approved sending release %s from %s via %s (content %s).",
			approver, releaseID, sender, ep, content[:19])
	})
}

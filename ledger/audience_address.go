package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"

	"gatehouse/destination"
)

// One notice per address. Customers of a release who share an address
// (mailaddr.Identity, with the release's local-part flag) are
// duplicates by address: the first eligible one in source order carries
// the notice, the others are covered by it. Should the carrier become
// unable to receive it before its notice is handed over (removed, missing
// from the latest export, denied at send), the next customer with the
// address carries it instead (carryOn).

// releaseDigest is what a release's approval binds besides its file: its
// content and, where it is not the default, how its addresses are compared,
// so that a release recorded before addresses were compared keeps its
// digest.
func releaseDigest(subject, body string, local destination.LocalPart) string {
	if local == destination.FoldLocalPart {
		return Digest("", subject, body, "audience")
	}
	return digestOf("audience release", "case-sensitive local parts", destination.NormalizeText(subject),
		destination.NormalizeText(body), "audience")
}

// localPartWords says how a release compares local parts, for people.
func localPartWords(local destination.LocalPart) string {
	if local == destination.CaseSensitiveLocalPart {
		return "case-sensitively"
	}
	return "case-insensitively"
}

// SharedAddress is one address that several customers of a release share,
// and which of them carries its notice.
type SharedAddress struct {
	Address string
	// Carrier is the customer whose notice goes to the address; Line 0 when
	// none is left (every customer with it became unable to receive it).
	Carrier AudienceRow
	Covered []AudienceRow // the others, in source order
}

// SharedAddresses lists up to limit of a release's shared addresses (those
// with covered customers), in the order their first customer appears in the
// file, and how many there are in all.
func (l *Ledger) SharedAddresses(ctx context.Context, releaseID string, limit int) ([]SharedAddress, int, error) {
	if limit <= 0 {
		limit = 100
	}
	var out []SharedAddress
	total := 0
	err := l.read(ctx, func(tx queryTx) error {
		if err := tx.QueryRow(`SELECT count(DISTINCT address) FROM audience_rows WHERE release_id = ? AND status = 'covered'`,
			releaseID).Scan(&total); err != nil {
			return err
		}
		rows, err := tx.Query(audienceRowsSelect+`
			WHERE r.release_id = ? AND r.status IN ('eligible', 'covered') AND r.address IN (
				SELECT address FROM audience_rows WHERE release_id = ? AND status = 'covered'
				GROUP BY address ORDER BY min(line) LIMIT ?)
			ORDER BY r.line`, releaseID, releaseID, limit)
		if err != nil {
			return err
		}
		defer rows.Close()
		at := map[string]int{}
		for rows.Next() {
			r, err := scanAudienceRow(rows)
			if err != nil {
				return err
			}
			i, ok := at[r.Address]
			if !ok {
				i = len(out)
				at[r.Address] = i
				out = append(out, SharedAddress{Address: r.Address})
			}
			sa := &out[i]
			if r.Status == RowEligible && (sa.Carrier.Line == 0 || carrying(sa.Carrier.State) < carrying(r.State)) {
				if sa.Carrier.Line != 0 {
					sa.Covered = append(sa.Covered, sa.Carrier)
				}
				sa.Carrier = r
				continue
			}
			sa.Covered = append(sa.Covered, r)
		}
		return rows.Err()
	})
	for i := range out {
		slices.SortFunc(out[i].Covered, func(a, b AudienceRow) int { return a.Line - b.Line })
	}
	return out, total, err
}

// carrying ranks an eligible row as the carrier of its address: one whose
// notice still goes out (or went) over one denied or withdrawn, which an
// eligible row is only until carryOn hands its address on.
func carrying(s State) int {
	if s == StateDenied || s == StateCancelled {
		return 0
	}
	return 1
}

// carryOnPending is carryOn's question, asked without the write lock: is
// there an address whose carrier is gone while a customer covered by it
// could carry its notice?
const carryOnPending = `SELECT c.address, min(c.line) FROM audience_rows c
	WHERE c.release_id = ? AND c.status = 'covered' AND c.action_key = '' AND NOT EXISTS (
		SELECT 1 FROM audience_rows e LEFT JOIN actions a ON a.key = e.action_key
		WHERE e.release_id = c.release_id AND e.address = c.address AND e.status = 'eligible'
		AND COALESCE(a.state, '') NOT IN ('denied', 'cancelled'))
	GROUP BY c.address ORDER BY min(c.line)`

// carryOnRelease runs carryOn in its own transaction when a read finds
// something for it to do, so that a send whose carriers all stand does not
// take the write turn for it.
func (l *Ledger) carryOnRelease(ctx context.Context, releaseID, actor string) (int, error) {
	pending := false
	if err := l.read(ctx, func(tx queryTx) error {
		var address string
		var line int
		err := tx.QueryRow(carryOnPending+` LIMIT 1`, releaseID).Scan(&address, &line)
		pending = err == nil
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		return err
	}); err != nil || !pending {
		return 0, err
	}
	n := 0
	// Losing this commit to a power failure loses only the hand-over: the
	// old carrier stays denied and the next run hands it on again.
	err := l.writeRelaxed(ctx, func(t *wtx) (err error) {
		n, err = t.carryOn(releaseID, actor)
		return err
	})
	return n, err
}

// carryOn hands the notice of each shared address whose carrier can no
// longer receive it (removed, missing from the latest export, its action
// denied at send or withdrawn) to the next customer with that address in
// source order, who becomes eligible. The old carrier is recorded as
// covered by the new one, and a denied action of it is withdrawn: approved
// again, it would send the address a second notice. A carrier whose notice
// was handed over, or whose outcome is open, keeps the address: its notice
// may have arrived. It returns how many customers carry a notice now; they
// have no action yet, so the next send takes them.
func (t *wtx) carryOn(releaseID, actor string) (int, error) {
	var actionType string
	if err := t.QueryRow(`SELECT action_type FROM audience_releases WHERE id = ?`, releaseID).Scan(&actionType); err != nil {
		return 0, fmt.Errorf("release %s: %w", releaseID, notFound(err))
	}
	type pending struct {
		address string
		line    int
	}
	var todo []pending
	rows, err := t.Query(carryOnPending, releaseID)
	if err != nil {
		return 0, err
	}
	for rows.Next() {
		var p pending
		if err := rows.Scan(&p.address, &p.line); err != nil {
			rows.Close()
			return 0, err
		}
		todo = append(todo, p)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return 0, err
	}
	for _, p := range todo {
		if err := t.handAddressOn(releaseID, actionType, p.address, p.line, actor); err != nil {
			return 0, err
		}
	}
	return len(todo), nil
}

// handAddressOn makes the covered customer at line the carrier of address.
func (t *wtx) handAddressOn(releaseID, actionType, address string, line int, actor string) error {
	group, err := t.addressRows(releaseID, address)
	if err != nil {
		return err
	}
	var next AudienceRow
	for _, r := range group {
		if r.Line == line {
			next = r
		}
	}
	if next.Line == 0 {
		return fmt.Errorf("release %s: line %d does not share address %s", releaseID, line, address)
	}
	prev, err := t.audienceRow(releaseID, next.CarrierLine)
	if err != nil {
		return err
	}
	covered := 0
	for _, r := range group {
		if r.Line == next.Line {
			continue
		}
		reason := fmt.Sprintf("covered by %s (line %d): same address", next.CustomerID, next.Line)
		if r.Status == RowEligible || r.ActionKey != "" {
			// A carrier, now or before: it stays covered, saying why.
			why, _, _ := strings.Cut(r.Reason, "; covered by ")
			if r.Status == RowEligible {
				why = goneWhy(r)
			}
			reason = fmt.Sprintf("%s; covered by %s (line %d), which carries the notice to this address", why, next.CustomerID, next.Line)
		}
		if r.Status == RowEligible && r.State == StateDenied {
			if err := t.withdrawCarrier(releaseID, r, next, actor); err != nil {
				return err
			}
		}
		if _, err := t.Exec(`UPDATE audience_rows SET status = 'covered', carrier_line = ?, reason = ? WHERE release_id = ? AND line = ?`,
			next.Line, reason, releaseID, r.Line); err != nil {
			return fmt.Errorf("release %s line %d: %w", releaseID, r.Line, err)
		}
		covered++
	}
	why := goneWhy(prev)
	if _, err := t.Exec(`UPDATE audience_rows SET status = 'eligible', action_key = ?, carrier_line = 0, reason = ? WHERE release_id = ? AND line = ?`,
		audienceKey(next.CustomerID, releaseID, actionType),
		fmt.Sprintf("carries the notice to this address: %s (line %d) %s", prev.CustomerID, prev.Line, why),
		releaseID, next.Line); err != nil {
		return fmt.Errorf("release %s line %d: %w", releaseID, next.Line, err)
	}
	return t.event(actor, "", "", EvAudienceCarrier, "",
		"%s (line %d) carries release %s's notice to %s now: %s (line %d) %s; %d other customer(s) with the address are covered by it.",
		next.CustomerID, next.Line, releaseID, address, prev.CustomerID, prev.Line, why, covered)
}

// withdrawCarrier cancels the denied action of a carrier whose address
// another customer carries now.
func (t *wtx) withdrawCarrier(releaseID string, r, next AudienceRow, actor string) error {
	a, err := getAction(t, r.ActionKey)
	if err != nil {
		return err
	}
	why := fmt.Sprintf("%s (line %d) carries release %s's notice to the same address", next.CustomerID, next.Line, releaseID)
	if _, err := t.invalidateApprovals(a.Key, why); err != nil {
		return err
	}
	if err := t.transition(&a, StateCancelled, why, ""); err != nil {
		return err
	}
	return t.event(actor, a.TaskID, a.Key, EvCancelled, "",
		"The gate withdrew %s: it was denied at send, and %s; approving it again would send the address a second notice.", a.Key, why)
}

// goneWhy says why a carrier no longer carries its address's notice.
func goneWhy(r AudienceRow) string {
	switch {
	case r.Status == RowRemoved:
		return "was removed from the release"
	case r.Status == RowMissing:
		return "is missing from the latest export"
	case r.State == StateDenied:
		return "was denied at send"
	case r.State == StateCancelled:
		return "was withdrawn"
	}
	return "can no longer receive it"
}

// addressRows reads the eligible and covered rows of one address.
func (t *wtx) addressRows(releaseID, address string) ([]AudienceRow, error) {
	rows, err := t.Query(audienceRowsSelect+`
		WHERE r.release_id = ? AND r.address = ? AND r.status IN ('eligible', 'covered') ORDER BY r.line`, releaseID, address)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []AudienceRow
	for rows.Next() {
		r, err := scanAudienceRow(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// audienceRow reads one row of a release, whatever its status.
func (t *wtx) audienceRow(releaseID string, line int) (AudienceRow, error) {
	r, err := scanAudienceRow(t.QueryRow(audienceRowsSelect+`
		WHERE r.release_id = ? AND r.line = ?`, releaseID, line))
	if err != nil {
		return r, fmt.Errorf("release %s line %d: %w", releaseID, line, notFound(err))
	}
	return r, nil
}

// audienceRowsSelect reads rows as scanAudienceRow scans them, each with
// its action's state (r for the rows, a for the actions).
const audienceRowsSelect = `SELECT r.line, r.identity, r.customer_id, r.email, r.status, r.reason, r.action_key, COALESCE(a.state, ''),
	r.consent, r.lifecycle, r.address, r.carrier_line
	FROM audience_rows r LEFT JOIN actions a ON a.key = r.action_key`

// scanAudienceRow reads one row of audienceRowsSelect.
func scanAudienceRow(s interface{ Scan(...any) error }) (AudienceRow, error) {
	var r AudienceRow
	var st string
	err := s.Scan(&r.Line, &r.Identity, &r.CustomerID, &r.Email, &r.Status, &r.Reason, &r.ActionKey, &st, &r.Consent, &r.Lifecycle,
		&r.Address, &r.CarrierLine)
	r.State = State(st)
	return r, err
}

// markMissing makes the customers of a release that the latest export
// lacks ineligible (RowMissing), and hands their addresses on; unless
// in.KeepMissing says the export was partial: then they are listed, keep
// what they had, and the history says who said so. A recipient whose
// notice was handed over or whose outcome is open keeps its row: the
// export comes too late to stop it.
func (t *wtx) markMissing(releaseID string, present map[string]CustomerRecord, in CustomerImport, rep *CustomerReport) error {
	var exists int
	if err := t.QueryRow(`SELECT count(*) FROM audience_releases WHERE id = ?`, releaseID).Scan(&exists); err != nil {
		return err
	}
	if exists == 0 {
		return fmt.Errorf("release %s: %w", releaseID, ErrNotFound)
	}
	rows, err := t.Query(audienceRowsSelect+`
		WHERE r.release_id = ? AND r.status IN ('eligible', 'covered') ORDER BY r.line`, releaseID)
	if err != nil {
		return err
	}
	var absent []AudienceRow
	for rows.Next() {
		r, err := scanAudienceRow(rows)
		if err != nil {
			rows.Close()
			return err
		}
		if _, ok := present[r.CustomerID]; !ok && notHandedOver(r) {
			absent = append(absent, r)
		}
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return err
	}
	if len(absent) == 0 {
		return nil
	}
	source := firstNonEmpty(in.Source, "the CRM export")
	if in.KeepMissing {
		rep.Missing, rep.KeptMissing = absent, true
		return t.keptMissingEvent(in.Actor, source, releaseID, absent)
	}
	for i, r := range absent {
		reason := "missing from the latest export (" + source + ")"
		if r.Status == RowEligible {
			if err := t.withdrawRecipient(releaseID, r.CustomerID, r.ActionKey, in.Actor, reason); err != nil {
				return err
			}
		}
		if _, err := t.Exec(`UPDATE audience_rows SET status = 'missing', reason = ? WHERE release_id = ? AND line = ?`,
			reason, releaseID, r.Line); err != nil {
			return fmt.Errorf("release %s line %d: %w", releaseID, r.Line, err)
		}
		key := ""
		if r.Status == RowEligible {
			key = r.ActionKey // its withdrawal is this line's to name
		}
		if err := t.event(in.Actor, "", key, EvAudienceMissing, "",
			"%s is missing from the latest export (%s, imported by %s): the mirror's record of them is stale, so they will not receive release %s (line %d was %s).",
			r.CustomerID, source, in.Actor, releaseID, r.Line, r.Status); err != nil {
			return err
		}
		absent[i].Status, absent[i].Reason = RowMissing, reason
	}
	rep.Missing = absent
	_, err = t.carryOn(releaseID, in.Actor)
	return err
}

// notHandedOver reports whether a row's notice could still be withheld:
// nothing was handed over and no outcome is open.
func notHandedOver(r AudienceRow) bool {
	switch r.State {
	case "", StateDrafting, StateAwaitingApproval, StateApproved, StateDenied, StateCancelled:
		return true
	}
	return false
}

// keptMissingEvent records that a person said the export was partial, so
// the customers it lacks kept their rows.
func (t *wtx) keptMissingEvent(actor, source, releaseID string, kept []AudienceRow) error {
	var names []string
	for i, r := range kept {
		if i == 10 {
			names = append(names, fmt.Sprintf("and %d more", len(kept)-10))
			break
		}
		names = append(names, fmt.Sprintf("%s (line %d)", r.CustomerID, r.Line))
	}
	return t.event(actor, "", "", EvAudienceMissing, "",
		"%s said %s is a partial export (--keep-missing): %d customer(s) of release %s absent from it keep their rows: %s.",
		actor, source, len(kept), releaseID, strings.Join(names, ", "))
}

package ledger

import (
	"bytes"
	"context"
	"fmt"
	"strings"

	"gatehouse/internal/mailaddr"
	"gatehouse/ledger/audiencefile"
)

// RecipientSample is one resolved recipient drawn for a person to check,
// with the identity key as the source file and the CRM give it now.
type RecipientSample struct {
	AudienceRow
	SourceKey string // identity key read again from the stored file at the row's line ("" when absent)
	CRMKey    string // the same kind of key for the customer the CRM resolves it to now ("" when none)
	CRMID     string // that customer's id
	// Same: the source, the release's row and the CRM name one identity key
	// and one customer.
	Same bool
}

// SampleRecipients draws up to n resolved recipients (eligible, covered,
// excluded, removed or missing) of a release spread across the lifecycle stages recorded at
// reconciliation: one of each stage before a second of any. Within a stage
// the rows are scattered through the file, the same ones on every call.
// Each is checked against the stored source file and against dir.
func (l *Ledger) SampleRecipients(ctx context.Context, releaseID string, n int, dir Directory) ([]RecipientSample, error) {
	var out []RecipientSample
	var source []byte
	err := l.read(ctx, func(tx queryTx) error {
		if err := tx.QueryRow(`SELECT source FROM audience_releases WHERE id = ?`, releaseID).Scan(&source); err != nil {
			return fmt.Errorf("release %s: %w", releaseID, notFound(err))
		}
		rows, err := tx.Query(`SELECT line, identity, customer_id, email, status, reason, action_key, consent, lifecycle FROM (
				SELECT r.*, row_number() OVER (PARTITION BY lifecycle ORDER BY (line * 2654435761) % 4294967291, line) AS k
				FROM audience_rows r WHERE release_id = ? AND status IN ('eligible', 'covered', 'excluded', 'removed', 'missing'))
			ORDER BY k, lifecycle LIMIT ?`, releaseID, n)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var s RecipientSample
			if err := rows.Scan(&s.Line, &s.Identity, &s.CustomerID, &s.Email, &s.Status, &s.Reason, &s.ActionKey, &s.Consent, &s.Lifecycle); err != nil {
				return err
			}
			out = append(out, s)
		}
		return rows.Err()
	})
	if err != nil || len(out) == 0 {
		return out, err
	}
	lines := map[int]string{}
	for _, s := range out {
		lines[s.Line] = ""
	}
	if _, err := audiencefile.Read(bytes.NewReader(source), func(r audiencefile.Row) error {
		if _, ok := lines[r.Line]; ok && r.Err == "" {
			lines[r.Line] = r.Identity()
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("release %s: read the stored file: %w", releaseID, err)
	}
	for i := range out {
		s := &out[i]
		s.SourceKey = lines[s.Line]
		c, found, err := lookupIdentity(ctx, dir, s.Identity)
		if err != nil {
			return nil, fmt.Errorf("release %s line %d: resolve %s: %w", releaseID, s.Line, s.Identity, err)
		}
		if found {
			s.CRMID = c.ID
			s.CRMKey = "id:" + c.ID
			if strings.HasPrefix(s.Identity, "email:") {
				s.CRMKey = "email:" + mailaddr.Folded(c.Email) // as audiencefile.Row.Identity writes it
			}
		}
		s.Same = s.SourceKey == s.Identity && s.CRMKey == s.Identity && s.CRMID == s.CustomerID
	}
	return out, nil
}

func lookupIdentity(ctx context.Context, dir Directory, identity string) (Customer, bool, error) {
	if id, ok := strings.CutPrefix(identity, "id:"); ok {
		return dir.CustomerByID(ctx, id)
	}
	return dir.CustomerByEmail(ctx, strings.TrimPrefix(identity, "email:"))
}

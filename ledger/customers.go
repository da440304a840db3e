package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"
	"strings"

	"gatehouse/internal/mailaddr"
)

// customerColumns is what the mirror reads of a customer, in Customer's order.
const customerColumns = `id, email, consent, suppressed, consent_class, lifecycle`

// ErrUnknownConsent means a customers import met consent values it does not
// understand and was not told to exclude them; nothing was written.
var ErrUnknownConsent = errors.New("consent not understood")

// ErrResubscribe means a customers import would move customers the ledger
// holds as unsubscribed or suppressed to another class, and was not told to
// accept that; nothing was written.
var ErrResubscribe = errors.New("import would resubscribe customers")

// CustomerRecord is one customer as a CRM export gave it, with where.
type CustomerRecord struct {
	Customer
	File string
	Line int
}

// Where names the record's file and line for people.
func (r CustomerRecord) Where() string { return fmt.Sprintf("%s:%d", r.File, r.Line) }

// Who names the record's customer: the id, or the address without one.
func (r CustomerRecord) Who() string { return firstNonEmpty(r.ID, r.Email) }

// CustomerImport refreshes the ledger's customer mirror from CRM exports.
type CustomerImport struct {
	Source  string // the exports' names, for the history
	Actor   string
	Records []CustomerRecord // a record without ID is matched by address
	// ExcludeUnknown imports customers whose consent was not understood as
	// ConsentUnknown (never eligible) instead of refusing the import.
	ExcludeUnknown bool
	// AcceptResubscribes lets the import move customers the ledger holds as
	// unsubscribed or suppressed to another class; each is listed.
	AcceptResubscribes bool
	// Release, when set, is an audience release the export is the latest
	// word on: its customers the export lacks are missing from the latest
	// export (RowMissing) and never receive its notice; the mirror's record
	// of them is stale. The same holds for the release an AudienceImport
	// reconciles with Customers.
	Release string
	// KeepMissing says the export is partial: customers it lacks keep
	// their rows, listed in the report and recorded in the history.
	KeepMissing bool
}

// Resubscribe is a customer an import moves out of a withdrawn class.
type Resubscribe struct {
	CustomerRecord
	From ConsentClass // the class the ledger held
}

// ValueCount is one consent value as written and how many rows had it.
type ValueCount struct {
	Value string `json:"value"`
	Rows  int    `json:"rows"`
}

// CustomerReport says what a customers import found and did.
type CustomerReport struct {
	Source  string
	Records int
	ByClass map[ConsentClass]int // classes as the exports gave them
	// Unknown lists the rows whose consent was not understood; UnknownValues
	// the distinct values (column=value as written), most frequent first.
	Unknown       []CustomerRecord
	UnknownValues []ValueCount
	// KeptWithdrawn lists customers whose value was not understood and whom
	// the ledger holds as unsubscribed or suppressed: they stay so.
	KeptWithdrawn []Resubscribe
	// Resubscribes lists customers moved out of a withdrawn class (accepted),
	// or that would have been (refused).
	Resubscribes []Resubscribe
	// Missing lists the rows of the release the export was the latest word
	// on whose customers it lacks: missing now, or kept (KeptMissing).
	Missing     []AudienceRow
	KeptMissing bool
	Written     bool // false when the import was refused
}

// ImportCustomers refreshes the mirror from CRM records in one durable
// transaction, after checking all of them: consent values that were not
// understood refuse the whole import (ErrUnknownConsent) unless
// ExcludeUnknown; a customer the ledger holds as unsubscribed or suppressed
// is never moved to another class unless AcceptResubscribes (otherwise
// ErrResubscribe), and each accepted move is a history event. A refused
// import writes nothing and returns the report of what it found.
func (l *Ledger) ImportCustomers(ctx context.Context, in CustomerImport) (CustomerReport, error) {
	rep, err := CheckCustomers(in)
	if err != nil {
		return rep, err
	}
	err = l.write(ctx, func(t *wtx) error {
		if _, err := t.permit(in.Actor, VerbCustomersImport, "", ""); err != nil {
			return err
		}
		rep.KeptWithdrawn, rep.Resubscribes, rep.Missing, rep.KeptMissing = nil, nil, nil, false
		present, err := t.importCustomers(in, &rep)
		if err != nil || in.Release == "" {
			return err
		}
		return t.markMissing(in.Release, present, in, &rep)
	})
	if err != nil {
		return rep, err
	}
	rep.Written = true
	return rep, nil
}

// CheckCustomers is the part of ImportCustomers that needs no ledger: it
// counts the records' classes and the consent values not understood, and
// returns ErrUnknownConsent as ImportCustomers would.
func CheckCustomers(in CustomerImport) (CustomerReport, error) {
	rep := CustomerReport{Source: in.Source, Records: len(in.Records), ByClass: map[ConsentClass]int{}}
	values := map[string]int{}
	for _, r := range in.Records {
		class := r.Class()
		rep.ByClass[class]++
		if class == ConsentUnknown {
			rep.Unknown = append(rep.Unknown, r)
			values[firstNonEmpty(r.Consent, "(empty)")]++
		}
	}
	rep.UnknownValues = sortedCounts(values)
	if len(rep.Unknown) > 0 && !in.ExcludeUnknown {
		return rep, fmt.Errorf("customers %s: %w: %d rows (%s), the first at %s; map them with --consent-value WORD=CLASS, or import them as never eligible with --unknown-consent=exclude; nothing was written",
			in.Source, ErrUnknownConsent, len(rep.Unknown), listValues(rep.UnknownValues, 5), rep.Unknown[0].Where())
	}
	return rep, nil
}

// importCustomers writes the records and returns them by customer id: who
// the export has.
func (t *wtx) importCustomers(in CustomerImport, rep *CustomerReport) (map[string]CustomerRecord, error) {
	stmt, err := t.prepareCustomerUpsert()
	if err != nil {
		return nil, err
	}
	defer stmt.Close()
	seen := map[string]CustomerRecord{}
	var write []CustomerRecord
	for _, r := range in.Records {
		if r.ID == "" && r.Email == "" {
			return nil, invalidf("customers %s: neither an id nor an address", r.Where())
		}
		old, found, err := t.existingCustomer(r)
		if err != nil {
			return nil, err
		}
		if r.ID == "" {
			// The id is the address as the export spelled it, folded: the
			// customers mirrored before keep theirs.
			r.ID = firstNonEmpty(old.ID, mailaddr.Folded(r.Email))
		}
		if first, dup := seen[r.ID]; dup {
			return nil, fmt.Errorf("customers %s: customer %s appears again (first at %s); one row per customer", r.Where(), r.ID, first.Where())
		}
		seen[r.ID] = r
		from, to := old.Class(), r.Class()
		switch {
		case !found || !from.Withdrawn() || to.Withdrawn():
		case to == ConsentUnknown:
			rep.KeptWithdrawn = append(rep.KeptWithdrawn, Resubscribe{CustomerRecord: r, From: from})
			r.Customer = Customer{ID: old.ID, Email: r.Email, Consent: old.Consent, ConsentClass: from,
				Suppressed: old.Suppressed, Lifecycle: r.Lifecycle}
		default:
			rep.Resubscribes = append(rep.Resubscribes, Resubscribe{CustomerRecord: r, From: from})
		}
		write = append(write, r)
	}
	if len(rep.Resubscribes) > 0 && !in.AcceptResubscribes {
		return nil, fmt.Errorf("customers %s: %w: %d the ledger holds as unsubscribed or suppressed (%s); accept them with --accept-resubscribes; nothing was written",
			in.Source, ErrResubscribe, len(rep.Resubscribes), listResubscribes(rep.Resubscribes, 5))
	}
	for _, r := range write {
		if err := upsertCustomer(t, stmt, r.Customer); err != nil {
			return nil, fmt.Errorf("customers %s: %w", r.Where(), err)
		}
	}
	for _, r := range rep.Resubscribes {
		if err := t.event(in.Actor, "", "", EvResubscribed, "",
			"%s accepted that %s, held as %s, is now %s (%s, %s).",
			in.Actor, r.Who(), r.From, r.Class(), firstNonEmpty(r.Consent, "no value"), r.Where()); err != nil {
			return nil, err
		}
	}
	return seen, t.event(in.Actor, "", "", EvCustomersImported, "", "%s", importSentence(in, rep))
}

// existingCustomer is the mirrored customer a record names: by id, or by
// address when the export has no id.
func (t *wtx) existingCustomer(r CustomerRecord) (Customer, bool, error) {
	q, arg := `SELECT `+customerColumns+` FROM customers WHERE id = ?`, r.ID
	if r.ID == "" {
		q, arg = `SELECT `+customerColumns+` FROM customers WHERE email = ? COLLATE NOCASE ORDER BY id LIMIT 1`, r.Email
	}
	var c Customer
	var sup int
	err := t.QueryRow(q, arg).Scan(&c.ID, &c.Email, &c.Consent, &sup, &c.ConsentClass, &c.Lifecycle)
	if errors.Is(err, sql.ErrNoRows) {
		return c, false, nil
	}
	c.Suppressed = sup == 1
	return c, err == nil, err
}

// prepareCustomerUpsert writes a customer; an export without an address or
// a lifecycle stage (a column it lacks) keeps the ones the ledger holds.
func (t *wtx) prepareCustomerUpsert() (*sql.Stmt, error) {
	return t.Prepare(`INSERT INTO customers (id, email, consent, suppressed, consent_class, lifecycle, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT(id) DO UPDATE SET consent = excluded.consent, suppressed = excluded.suppressed,
		consent_class = excluded.consent_class, updated_at = excluded.updated_at,
		email = CASE excluded.email WHEN '' THEN customers.email ELSE excluded.email END,
		lifecycle = CASE excluded.lifecycle WHEN '' THEN customers.lifecycle ELSE excluded.lifecycle END`)
}

func upsertCustomer(t *wtx, stmt *sql.Stmt, c Customer) error {
	if _, err := stmt.Exec(c.ID, c.Email, c.Consent, boolInt(c.Suppressed), string(c.Class()), c.Lifecycle, ns(t.now())); err != nil {
		return fmt.Errorf("record customer %s: %w", c.ID, err)
	}
	return nil
}

func importSentence(in CustomerImport, rep *CustomerReport) string {
	var classes []string
	for _, c := range ConsentClasses {
		if n := rep.ByClass[c]; n > 0 {
			classes = append(classes, fmt.Sprintf("%d %s", n, c))
		}
	}
	s := fmt.Sprintf("%s refreshed the customer mirror from %s: %d customers (%s)", in.Actor,
		firstNonEmpty(in.Source, "a CRM export"), rep.Records, strings.Join(classes, ", "))
	if len(rep.Unknown) > 0 {
		s += fmt.Sprintf("; %d with consent not understood, imported as never eligible: %s", len(rep.Unknown), listValues(rep.UnknownValues, 10))
	}
	if len(rep.KeptWithdrawn) > 0 {
		s += fmt.Sprintf("; %d of them kept as unsubscribed or suppressed", len(rep.KeptWithdrawn))
	}
	if len(rep.Resubscribes) > 0 {
		s += fmt.Sprintf("; %d resubscribes accepted: %s", len(rep.Resubscribes), listResubscribes(rep.Resubscribes, 10))
	}
	return s + "."
}

func sortedCounts(m map[string]int) []ValueCount {
	out := make([]ValueCount, 0, len(m))
	for v, n := range m {
		out = append(out, ValueCount{Value: v, Rows: n})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Rows != out[j].Rows {
			return out[i].Rows > out[j].Rows
		}
		return out[i].Value < out[j].Value
	})
	return out
}

func listValues(vs []ValueCount, max int) string {
	var parts []string
	for i, v := range vs {
		if i == max {
			parts = append(parts, fmt.Sprintf("and %d more values", len(vs)-max))
			break
		}
		parts = append(parts, fmt.Sprintf("%q ×%d", v.Value, v.Rows))
	}
	return strings.Join(parts, ", ")
}

func listResubscribes(rs []Resubscribe, max int) string {
	var parts []string
	for i, r := range rs {
		if i == max {
			parts = append(parts, fmt.Sprintf("and %d more", len(rs)-max))
			break
		}
		parts = append(parts, fmt.Sprintf("%s %s → %s at %s", r.Who(), r.From, r.Class(), r.Where()))
	}
	return strings.Join(parts, ", ")
}

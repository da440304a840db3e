// Package crmfile reads a CRM export (CSV) into customer records, with each
// customer's consent mapped to one ledger.ConsentClass. It recognises the
// columns and values the common tools write, case-insensitively:
//
//	tool         identity                          consent
//	Customer.io  id, email                         unsubscribed = true/false
//	Mailchimp    Email Address                     status = subscribed/unsubscribed/cleaned/pending,
//	                                               or the separate exports (UNSUB_TIME, CLEAN_TIME columns)
//	HubSpot      Record ID (hs_object_id), Email   Unsubscribed from all email (hs_email_optout) = true/false
//	Intercom     user_id (or id), email            unsubscribed_from_emails, marked_email_as_spam, has_hard_bounced
//	Braze        external_id, email                email_subscribe = opted_in/subscribed/unsubscribed
//	generic      customer_id (or id), email        consent or status; suppressed = yes/no
//
// Braze's "subscribed" is the only word read as implicit consent: it is the
// one vocabulary that tells it apart from an explicit opt-in. A value the
// reader does not understand gives ConsentUnknown, with the column and value
// as written, never a silent "no consent". A lifecycle column (HubSpot
// Lifecycle Stage, lifecycle, stage) is kept as written.
package crmfile

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strings"

	"gatehouse/internal/mailaddr"
	"gatehouse/ledger"
)

// Options say how to read consent beyond the recognised vocabularies.
type Options struct {
	// ConsentColumn names the column that holds consent, read in the
	// generic vocabulary; it replaces the recognised consent columns
	// (suppression flags still apply).
	ConsentColumn string
	// Values maps a value as written (compared after NormalizeConsentWord)
	// to a class; it is consulted before any vocabulary.
	Values map[string]ledger.ConsentClass
}

// Layout describes what the reader recognised in the header.
type Layout struct {
	IDColumn    string   // "" when the export has only addresses
	EmailColumn string   // "" when it has only ids
	Consent     []string // each consent source, e.g. "hs_email_optout (opt-out flag)"
	Lifecycle   string   // "" when there is none
}

// ErrUnusable marks an export that cannot be read at all; errors wrapping
// it name the file and line.
var ErrUnusable = errors.New("CRM export unusable")

// signal kinds: how a column's value speaks about consent.
type kind int

const (
	kindGeneric  kind = iota // consent/status words
	kindBraze                // email_subscribe: opted_in, subscribed (implicit), unsubscribed
	kindOptOut               // true: unsubscribed, false: opted in
	kindSuppress             // true: suppressed, false: says nothing
)

var kindNames = map[kind]string{kindGeneric: "consent words", kindBraze: "Braze subscription state",
	kindOptOut: "opt-out flag", kindSuppress: "suppression flag"}

// Recognised column names, after NormalizeConsentWord.
var (
	idNames        = []string{"customer_id", "customerid", "external_id", "user_id", "record_id", "hs_object_id", "contact_id", "id"}
	emailNames     = []string{"email", "e_mail", "email_address", "mail"}
	lifecycleNames = []string{"lifecycle_stage", "lifecyclestage", "lifecycle", "stage"}
	consentColumns = map[string]kind{
		"consent": kindGeneric, "email_consent": kindGeneric, "marketing_consent": kindGeneric,
		"status": kindGeneric, "email_status": kindGeneric, "subscription_status": kindGeneric,
		"email_marketing_status": kindGeneric,
		"email_subscribe":        kindBraze,
		"unsubscribed":           kindOptOut, "hs_email_optout": kindOptOut, "unsubscribed_from_all_email": kindOptOut,
		"opted_out_of_all_email": kindOptOut, "unsubscribed_from_emails": kindOptOut,
		"suppressed": kindSuppress, "marked_email_as_spam": kindSuppress, "has_hard_bounced": kindSuppress,
	}
)

type signal struct {
	col    int
	header string // as written
	kind   kind
}

type reader struct {
	file      string
	opts      Options
	lay       Layout
	header    []string
	id, email int
	lifecycle int
	signals   []signal
	fileClass ledger.ConsentClass // the class of every row, for exports split by status (Mailchimp)
	fileWhy   string              // the columns that tell it
}

// Read reads a whole export named file (for messages) and returns one
// record per data row, each with its consent class; a row whose consent
// was not understood has ConsentUnknown and, in Consent, the column and
// value as written. Errors name the file, line and column.
func Read(r io.Reader, file string, opts Options) ([]ledger.CustomerRecord, Layout, error) {
	br := bufio.NewReader(r)
	if bom, _ := br.Peek(3); bytes.Equal(bom, []byte{0xEF, 0xBB, 0xBF}) {
		br.Discard(3)
	}
	cr := csv.NewReader(br)
	cr.FieldsPerRecord = -1
	rd := &reader{file: file, opts: opts}
	var out []ledger.CustomerRecord
	seen := map[string]int{}
	for first := true; ; {
		rec, err := cr.Read()
		if err == io.EOF {
			if first {
				return nil, rd.lay, fmt.Errorf("%w: %s: the file has no header", ErrUnusable, file)
			}
			return out, rd.lay, nil
		}
		if err != nil {
			var pe *csv.ParseError
			if errors.As(err, &pe) {
				return nil, rd.lay, fmt.Errorf("%w: %s:%d: %v", ErrUnusable, file, pe.StartLine, pe.Err)
			}
			return nil, rd.lay, fmt.Errorf("read %s: %w", file, err)
		}
		line, _ := cr.FieldPos(0)
		if first {
			first = false
			if err := rd.detect(rec, line); err != nil {
				return nil, rd.lay, err
			}
			continue
		}
		if blank(rec) {
			continue
		}
		c, err := rd.row(rec, line)
		if err != nil {
			return nil, rd.lay, err
		}
		key := "id:" + c.ID
		if c.ID == "" {
			key = "email:" + mailaddr.Folded(c.Email) // the id the ledger gives it (ledger.ImportCustomers)
		}
		if prev, dup := seen[key]; dup {
			return nil, rd.lay, fmt.Errorf("%s:%d: customer %s appears again (first on line %d)", file, line, c.Who(), prev)
		}
		seen[key] = line
		out = append(out, c)
	}
}

func (rd *reader) detect(rec []string, line int) error {
	rd.id, rd.email, rd.lifecycle = -1, -1, -1
	rd.header = append([]string(nil), rec...)
	names := map[string]int{}
	for i, h := range rec {
		n := ledger.NormalizeConsentWord(h)
		if prev, dup := names[n]; dup && n != "" {
			return fmt.Errorf("%w: %s:%d: column %q appears twice (columns %d and %d)", ErrUnusable, rd.file, line, h, prev+1, i+1)
		}
		names[n] = i
	}
	pick := func(list []string) int {
		for _, n := range list {
			if i, ok := names[n]; ok {
				return i
			}
		}
		return -1
	}
	rd.id, rd.email, rd.lifecycle = pick(idNames), pick(emailNames), pick(lifecycleNames)
	if rd.id < 0 && rd.email < 0 {
		return fmt.Errorf("%w: %s:%d: no identity column (want customer_id, id, external_id, user_id, Record ID or an email column; have %s)",
			ErrUnusable, rd.file, line, strings.Join(rec, ", "))
	}
	rd.lay.IDColumn, rd.lay.EmailColumn, rd.lay.Lifecycle = colName(rec, rd.id), colName(rec, rd.email), colName(rec, rd.lifecycle)
	if err := rd.consentSignals(rec, names, line); err != nil {
		return err
	}
	for _, s := range rd.signals {
		rd.lay.Consent = append(rd.lay.Consent, fmt.Sprintf("%s (%s)", s.header, kindNames[s.kind]))
	}
	if rd.fileClass != "" {
		rd.lay.Consent = append(rd.lay.Consent, rd.fileWhy)
	}
	return nil
}

func (rd *reader) consentSignals(rec []string, names map[string]int, line int) error {
	if rd.opts.ConsentColumn != "" {
		i, ok := names[ledger.NormalizeConsentWord(rd.opts.ConsentColumn)]
		if !ok {
			return fmt.Errorf("%w: %s:%d: no column %q for --consent-column (have %s)", ErrUnusable, rd.file, line, rd.opts.ConsentColumn, strings.Join(rec, ", "))
		}
		rd.signals = append(rd.signals, signal{col: i, header: rec[i], kind: kindGeneric})
	}
	giving := rd.opts.ConsentColumn != ""
	for i, h := range rec {
		k, ok := consentColumns[ledger.NormalizeConsentWord(h)]
		if !ok || (rd.opts.ConsentColumn != "" && k != kindSuppress) {
			continue
		}
		rd.signals = append(rd.signals, signal{col: i, header: h, kind: k})
		giving = giving || k != kindSuppress
	}
	if giving {
		return nil
	}
	// Mailchimp exports an audience as separate files, one per status,
	// told apart by their columns.
	_, unsub := names["unsub_time"]
	_, clean := names["clean_time"]
	_, rating := names["member_rating"]
	_, optin := names["optin_time"]
	switch {
	case clean:
		rd.fileClass, rd.fileWhy = ledger.ConsentSuppressed, "CLEAN_TIME (Mailchimp cleaned export)"
	case unsub:
		rd.fileClass, rd.fileWhy = ledger.ConsentUnsubscribed, "UNSUB_TIME (Mailchimp unsubscribed export)"
	case rating && optin:
		rd.fileClass, rd.fileWhy = ledger.ConsentOptedIn, "MEMBER_RATING, OPTIN_TIME (Mailchimp subscribed export)"
	default:
		return fmt.Errorf("%w: %s:%d: no consent column (have %s); name it with --consent-column", ErrUnusable, rd.file, line, strings.Join(rec, ", "))
	}
	return nil
}

func (rd *reader) row(rec []string, line int) (ledger.CustomerRecord, error) {
	c := ledger.CustomerRecord{File: rd.file, Line: line}
	if len(rec) != len(rd.header) {
		return c, fmt.Errorf("%s:%d: has %d fields, the header has %d", rd.file, line, len(rec), len(rd.header))
	}
	c.ID, c.Email, c.Lifecycle = field(rec, rd.id), field(rec, rd.email), field(rec, rd.lifecycle)
	if c.ID == "" && c.Email == "" {
		return c, fmt.Errorf("%s:%d: neither %s nor %s has a value", rd.file, line, orNone(rd.lay.IDColumn), orNone(rd.lay.EmailColumn))
	}
	c.ConsentClass, c.Consent = rd.consent(rec)
	return c, nil
}

// consent combines the row's signals: any value not understood makes the
// row unknown; otherwise the most restrictive class wins.
func (rd *reader) consent(rec []string) (ledger.ConsentClass, string) {
	if rd.fileClass != "" {
		return rd.fileClass, rd.fileWhy
	}
	var unknown, evidence []string
	best := ledger.ConsentClass("")
	for _, s := range rd.signals {
		v := field(rec, s.col)
		class, says := rd.read(s, v)
		if !says {
			continue
		}
		ev := s.header + "=" + v
		if class == ledger.ConsentUnknown {
			unknown = append(unknown, ev)
			continue
		}
		evidence = append(evidence, ev)
		if best == "" || restrictiveness[class] > restrictiveness[best] {
			best = class
		}
	}
	switch {
	case len(unknown) > 0:
		return ledger.ConsentUnknown, strings.Join(unknown, "; ")
	case best == "":
		// Only suppression flags, all false: nothing said about consent.
		return ledger.ConsentUnknown, strings.Join(evidence, "; ")
	}
	return best, strings.Join(evidence, "; ")
}

var restrictiveness = map[ledger.ConsentClass]int{ledger.ConsentOptedIn: 0, ledger.ConsentImplicit: 1,
	ledger.ConsentPending: 2, ledger.ConsentUnsubscribed: 3, ledger.ConsentSuppressed: 4}

// read interprets one value; says is false when the value says nothing
// (a suppression flag that is false or empty).
func (rd *reader) read(s signal, v string) (ledger.ConsentClass, bool) {
	word := ledger.NormalizeConsentWord(v)
	if s.kind != kindSuppress {
		if c, ok := rd.opts.Values[word]; ok {
			return c, true
		}
	}
	switch s.kind {
	case kindBraze:
		switch word {
		case "opted_in":
			return ledger.ConsentOptedIn, true
		case "subscribed":
			return ledger.ConsentImplicit, true
		case "unsubscribed":
			return ledger.ConsentUnsubscribed, true
		}
		return ledger.ConsentUnknown, true
	case kindOptOut:
		if b, ok := parseBool(word); ok {
			if b {
				return ledger.ConsentUnsubscribed, true
			}
			return ledger.ConsentOptedIn, true
		}
		return ledger.ConsentUnknown, true
	case kindSuppress:
		if word == "" {
			return "", false
		}
		if b, ok := parseBool(word); ok {
			return ledger.ConsentSuppressed, b
		}
		return ledger.ConsentUnknown, true
	}
	return ledger.ClassifyConsent(v), true
}

func parseBool(word string) (value, ok bool) {
	switch word {
	case "true", "yes", "y", "1", "t":
		return true, true
	case "false", "no", "n", "0", "f":
		return false, true
	}
	return false, false
}

func field(rec []string, i int) string {
	if i < 0 || i >= len(rec) {
		return ""
	}
	return strings.TrimSpace(rec[i])
}

func colName(rec []string, i int) string {
	if i < 0 {
		return ""
	}
	return rec[i]
}

func orNone(s string) string {
	if s == "" {
		return "(no column)"
	}
	return s
}

func blank(rec []string) bool {
	for _, f := range rec {
		if strings.TrimSpace(f) != "" {
			return false
		}
	}
	return true
}

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/pflag"

	"gatehouse/internal/textenc"
	"gatehouse/ledger"
	"gatehouse/ledger/crmfile"
)

// crmFlags are the flags that refresh the ledger's customer mirror from CRM
// exports before a verb runs (audience reconcile, audience send).
type crmFlags struct {
	paths              []string
	consentColumn      string
	consentValues      []string
	unknown            string
	acceptResubscribes bool
	keepMissing        bool

	// filled by read
	records []ledger.CustomerRecord
	layouts []layoutV
	refused output // what to print when the exports were refused before the ledger opened
}

func (f *crmFlags) register(fs *pflag.FlagSet) {
	fs.StringArrayVar(&f.paths, "customers", nil, "CRM export (CSV) to refresh the ledger's customer mirror with; repeat for exports in several files (Mailchimp's subscribed, unsubscribed and cleaned files)")
	fs.StringVar(&f.consentColumn, "consent-column", "", "read consent from this column (words such as yes/no, subscribed/unsubscribed) instead of the recognised ones")
	fs.StringArrayVar(&f.consentValues, "consent-value", nil, "WORD=CLASS: read this consent value as a class (opted_in, implicit, pending, unsubscribed, suppressed); repeatable")
	fs.StringVar(&f.unknown, "unknown-consent", "refuse", "consent values not understood: refuse (exit 18, nothing written) or exclude (import them as never eligible, counted and listed)")
	fs.BoolVar(&f.acceptResubscribes, "accept-resubscribes", false, "let the exports move customers the ledger holds as unsubscribed or suppressed to another class (each is listed and recorded)")
	fs.BoolVar(&f.keepMissing, "keep-missing", false, "the exports are partial: customers of the release they lack keep their rows (listed and recorded) instead of being missing from the latest export")
}

// options checks the consent flags and turns them into reader options.
func (f *crmFlags) options(verb string) (crmfile.Options, error) {
	opts := crmfile.Options{ConsentColumn: f.consentColumn, Values: map[string]ledger.ConsentClass{}}
	switch f.unknown {
	case "refuse", "exclude":
	default:
		return opts, usageErr("%s: --unknown-consent %q: want refuse or exclude", verb, f.unknown)
	}
	for _, kv := range f.consentValues {
		word, class, ok := strings.Cut(kv, "=")
		c, valid := ledger.ParseConsentClass(class)
		if !ok || strings.TrimSpace(word) == "" || !valid {
			return opts, usageErr("%s: --consent-value %q: want WORD=CLASS with CLASS one of opted_in, implicit, pending, unsubscribed, suppressed", verb, kv)
		}
		opts.Values[ledger.NormalizeConsentWord(word)] = c
	}
	if len(f.paths) == 0 && (f.consentColumn != "" || len(f.consentValues) > 0 || f.acceptResubscribes || f.keepMissing) {
		return opts, usageErr("%s: --consent-column, --consent-value, --accept-resubscribes and --keep-missing apply to --customers files; none given", verb)
	}
	return opts, nil
}

// read is a check for gateRun.open: it reads every export whole before the
// ledger is opened, and refuses consent it does not understand (unless
// --unknown-consent=exclude) before anything is written.
func (f *crmFlags) read(verb string) func() error {
	return func() error {
		opts, err := f.options(verb)
		if err != nil || len(f.paths) == 0 {
			return err
		}
		for _, p := range f.paths {
			recs, lay, err := readExport(p, opts)
			if err != nil {
				return err
			}
			f.records = append(f.records, recs...)
			f.layouts = append(f.layouts, layoutV{File: p, IDColumn: lay.IDColumn, EmailColumn: lay.EmailColumn,
				Consent: lay.Consent, Lifecycle: lay.Lifecycle})
		}
		// ImportCustomers refuses the same way; checking here, before the
		// ledger opens, leaves the ledger file untouched, not even created.
		rep, err := ledger.CheckCustomers(f.importRequest(""))
		if err != nil {
			f.refused = customersOnly{f.view(rep)}
		}
		return err
	}
}

func readExport(path string, opts crmfile.Options) ([]ledger.CustomerRecord, crmfile.Layout, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, crmfile.Layout{}, fmt.Errorf("customers: %w", err)
	}
	// An export in another encoding is refused by name, before a column is
	// read: UTF-16 would otherwise look like a file without columns.
	if err := textenc.Check(data, true); err != nil {
		return nil, crmfile.Layout{}, fmt.Errorf("customers %s: %w", path, err)
	}
	return crmfile.Read(bytes.NewReader(textenc.StripBOM(data)), path, opts)
}

func (f *crmFlags) importRequest(actor string) ledger.CustomerImport {
	return ledger.CustomerImport{Source: strings.Join(f.paths, ", "), Actor: actor, Records: f.records,
		ExcludeUnknown: f.unknown == "exclude", AcceptResubscribes: f.acceptResubscribes, KeepMissing: f.keepMissing}
}

// load refreshes the mirror from what read found, in one transaction that
// also makes the release's customers the exports lack missing from the
// latest export (unless --keep-missing). It returns the view of the import
// (nil without --customers), also when the ledger refused it.
func (f *crmFlags) load(ctx context.Context, l *ledger.Ledger, actor, release string) (*customersView, error) {
	if len(f.paths) == 0 {
		return nil, nil
	}
	req := f.importRequest(actor)
	req.Release = release
	rep, err := l.ImportCustomers(ctx, req)
	v := f.view(rep)
	return &v, err
}

// customersView is what a customers import found and did.
type customersView struct {
	Files         []layoutV           `json:"files"`
	Customers     int                 `json:"customers"`
	ByClass       map[string]int      `json:"by_class"`
	Unknown       int                 `json:"unknown_consent_rows"`
	UnknownValues []ledger.ValueCount `json:"unknown_consent_values,omitempty"`
	UnknownRows   []consentRowV       `json:"unknown_consent,omitempty"`
	KeptWithdrawn []consentRowV       `json:"kept_withdrawn,omitempty"`
	Resubscribes  []consentRowV       `json:"resubscribes,omitempty"`
	// Missing counts the release's customers the exports lack; MissingRows
	// lists them. KeptMissing: --keep-missing kept their rows.
	Missing     int           `json:"missing_from_export"`
	MissingRows []missingRowV `json:"missing_from_export_rows,omitempty"`
	KeptMissing bool          `json:"kept_missing,omitempty"`
	Written     bool          `json:"written"`
}

// missingRowV is one row of the release whose customer the exports lack.
type missingRowV struct {
	Line     int    `json:"line"`
	Customer string `json:"customer_id"`
	Email    string `json:"email"`
	Status   string `json:"status"` // missing, or what it kept
}

type layoutV struct {
	File        string   `json:"file"`
	IDColumn    string   `json:"id_column,omitempty"`
	EmailColumn string   `json:"email_column,omitempty"`
	Consent     []string `json:"consent_columns"`
	Lifecycle   string   `json:"lifecycle_column,omitempty"`
}

type consentRowV struct {
	Where    string `json:"where"`
	Customer string `json:"customer"`
	Value    string `json:"value"`
	From     string `json:"from,omitempty"`
	To       string `json:"to,omitempty"`
}

// unknownRowsShown caps the rows a view lists; the counts cover them all.
const unknownRowsShown = 20

func (f *crmFlags) view(rep ledger.CustomerReport) customersView {
	v := customersView{Files: f.layouts, Customers: rep.Records, ByClass: map[string]int{}, Unknown: len(rep.Unknown),
		UnknownValues: rep.UnknownValues, Written: rep.Written}
	for c, n := range rep.ByClass {
		v.ByClass[string(c)] = n
	}
	for i, r := range rep.Unknown {
		if i == unknownRowsShown {
			break
		}
		v.UnknownRows = append(v.UnknownRows, consentRowV{Where: r.Where(), Customer: r.Who(), Value: r.Consent})
	}
	for _, r := range rep.KeptWithdrawn {
		v.KeptWithdrawn = append(v.KeptWithdrawn, consentRowV{Where: r.Where(), Customer: r.Who(), Value: r.Consent, From: string(r.From), To: string(r.From)})
	}
	for _, r := range rep.Resubscribes {
		v.Resubscribes = append(v.Resubscribes, consentRowV{Where: r.Where(), Customer: r.Who(), Value: r.Consent, From: string(r.From), To: string(r.Class())})
	}
	v.Missing, v.KeptMissing = len(rep.Missing), rep.KeptMissing
	for i, r := range rep.Missing {
		if i == unknownRowsShown {
			break
		}
		v.MissingRows = append(v.MissingRows, missingRowV{Line: r.Line, Customer: r.CustomerID, Email: r.Email, Status: r.Status})
	}
	return v
}

func (v *customersView) text(w io.Writer) {
	for _, f := range v.Files {
		fmt.Fprintf(w, "customers:\t%s\n", f.File)
		fmt.Fprintf(w, "  read as:\tidentity %s, consent %s", orDash(strings.Join(nonEmpty(f.IDColumn, f.EmailColumn), " / ")), strings.Join(f.Consent, ", "))
		if f.Lifecycle != "" {
			fmt.Fprintf(w, ", lifecycle %s", f.Lifecycle)
		}
		fmt.Fprintln(w)
	}
	var parts []string
	for _, c := range ledger.ConsentClasses {
		if n := v.ByClass[string(c)]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", c, n))
		}
	}
	fmt.Fprintf(w, "customers read\t%d\t= %s\n", v.Customers, strings.Join(parts, " + "))
	if v.Unknown > 0 {
		var vals []string
		for _, u := range v.UnknownValues {
			vals = append(vals, fmt.Sprintf("%q ×%d", u.Value, u.Rows))
		}
		fmt.Fprintf(w, "  consent not understood\t%d\trows: %s\n", v.Unknown, strings.Join(vals, ", "))
		writeConsentRows(w, v.UnknownRows, v.Unknown)
	}
	if len(v.KeptWithdrawn) > 0 {
		fmt.Fprintf(w, "  kept unsubscribed or suppressed\t%d\n", len(v.KeptWithdrawn))
		writeConsentRows(w, v.KeptWithdrawn, len(v.KeptWithdrawn))
	}
	if len(v.Resubscribes) > 0 {
		verb := "resubscribes accepted"
		if !v.Written {
			verb = "resubscribes not accepted"
		}
		fmt.Fprintf(w, "  %s\t%d\n", verb, len(v.Resubscribes))
		writeConsentRows(w, v.Resubscribes, len(v.Resubscribes))
	}
	if v.Missing > 0 {
		what := "missing from the latest export: not sent"
		if v.KeptMissing {
			what = "absent from the exports, kept (--keep-missing: a partial export)"
		}
		fmt.Fprintf(w, "  %s\t%d\n", what, v.Missing)
		fmt.Fprintf(w, "    LINE\tCUSTOMER\tADDRESS\tSTATUS\n")
		for _, r := range v.MissingRows {
			fmt.Fprintf(w, "    %d\t%s\t%s\t%s\n", r.Line, r.Customer, orDash(r.Email), r.Status)
		}
		if more := v.Missing - len(v.MissingRows); more > 0 && v.KeptMissing {
			fmt.Fprintf(w, "    … %d more\n", more)
		} else if more > 0 {
			fmt.Fprintf(w, "    … %d more (gatehouse audience show --rows missing)\n", more)
		}
	}
	if !v.Written {
		fmt.Fprintf(w, "nothing was written\n")
	}
}

func writeConsentRows(w io.Writer, rows []consentRowV, total int) {
	fmt.Fprintf(w, "    WHERE\tCUSTOMER\tVALUE\tCLASS\n")
	for _, r := range rows {
		class := "unknown"
		if r.From != "" {
			class = r.From + " → " + r.To
		}
		fmt.Fprintf(w, "    %s\t%s\t%s\t%s\n", r.Where, r.Customer, orDash(r.Value), class)
	}
	if total > len(rows) {
		fmt.Fprintf(w, "    … %d more\n", total-len(rows))
	}
}

// customersOnly prints a refused import on its own.
type customersOnly struct {
	Customers customersView `json:"customers"`
}

func (c customersOnly) text(w io.Writer) { c.Customers.text(w) }

func nonEmpty(ss ...string) []string {
	var out []string
	for _, s := range ss {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

// refusedOutput is what a verb prints when its customers import was
// refused: the import's view, or nothing.
func refusedOutput(v *customersView, err error) output {
	if v == nil || !(errors.Is(err, ledger.ErrUnknownConsent) || errors.Is(err, ledger.ErrResubscribe)) {
		return nil
	}
	return customersOnly{*v}
}

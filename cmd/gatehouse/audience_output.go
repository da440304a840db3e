package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"gatehouse/destination"
	"gatehouse/ledger"
	"gatehouse/testmailbox"
)

// releaseView is a release's reconciliation summary, the counts after
// sending, and optionally a page of its rows.
type releaseView struct {
	Release      string `json:"release"`
	Source       string `json:"source"`
	SourceDigest string `json:"source_digest"`
	ActionType   string `json:"action_type"`
	Subject      string `json:"subject"`
	ApprovedBy   string `json:"approved_by"`
	// AllowImplicit: the release takes customers with implicit consent.
	AllowImplicit bool `json:"allow_implicit"`
	// CaseSensitiveLocalPart: the release tells Ada@ from ada@.
	CaseSensitiveLocalPart bool           `json:"case_sensitive_local_part"`
	Customers              *customersView `json:"customers,omitempty"`
	SourceRows             int            `json:"source_rows"`
	ErrorRows              int            `json:"error_rows"`
	Unmatched              int            `json:"unmatched"`
	Duplicates             int            `json:"duplicates"` // by id: the same customer on an earlier row
	Resolved               int            `json:"resolved"`
	Excluded               int            `json:"excluded"`
	Removed                int            `json:"removed"`
	Missing                int            `json:"missing"`
	DuplicatesByAddress    int            `json:"duplicates_by_address"` // covered rows
	Eligible               int            `json:"eligible"`
	Attempted              int            `json:"attempted"`
	Confirmed              int            `json:"confirmed"`
	Held                   int            `json:"held"`
	Denied                 int            `json:"denied"`
	Arrived                *int           `json:"arrived,omitempty"`
	SentThisRun            *int           `json:"sent_this_run,omitempty"`
	// After a restore: recipients this run looked up at the destination
	// before its first batch, and those found there (held).
	CheckedAfterRestore *int           `json:"checked_after_restore,omitempty"`
	FoundAfterRestore   *int           `json:"found_after_restore,omitempty"`
	RowStatus           string         `json:"row_status,omitempty"`
	Rows                []audienceRowV `json:"rows,omitempty"`
	MoreRows            int            `json:"more_rows,omitempty"`
	Samples             []sampleV      `json:"samples,omitempty"`
	// SharedAddresses lists the addresses several customers share, each
	// with the customer who carries its notice and those covered by it.
	SharedAddresses     []sharedAddressV `json:"shared_addresses,omitempty"`
	MoreSharedAddresses int              `json:"more_shared_addresses,omitempty"`
}

// sharedAddressV is one address several customers of a release share.
type sharedAddressV struct {
	Address string `json:"address"`
	// CarriedBy is the customer whose notice goes to the address (nil when
	// every customer with it became unable to receive it).
	CarriedBy *addressRowV  `json:"carried_by"`
	Covered   []addressRowV `json:"covered"`
}

type addressRowV struct {
	Line     int    `json:"line"`
	Customer string `json:"customer_id"`
	Email    string `json:"email"` // as the CRM wrote it
	State    string `json:"state,omitempty"`
	Reason   string `json:"reason,omitempty"`
}

type audienceRowV struct {
	Line     int    `json:"line"`
	Identity string `json:"identity"`
	Customer string `json:"customer_id,omitempty"`
	Email    string `json:"email,omitempty"`
	Status   string `json:"status"`
	Reason   string `json:"reason,omitempty"`
	State    string `json:"state,omitempty"`
	Consent  string `json:"consent,omitempty"`
	Stage    string `json:"lifecycle,omitempty"`
}

// sampleV is one recipient drawn by audience show --sample.
type sampleV struct {
	Line      int    `json:"line"`
	Lifecycle string `json:"lifecycle"`
	Status    string `json:"status"`
	Consent   string `json:"consent,omitempty"`
	Customer  string `json:"customer_id"`
	SourceKey string `json:"source_key"`
	CRMKey    string `json:"crm_key"`
	Same      bool   `json:"same"`
}

// releaseOutput builds the view; with status it lists up to limit rows of
// that status, and with mb it counts arrivals per eligible recipient at the
// test mailbox.
func releaseOutput(ctx context.Context, l *ledger.Ledger, s ledger.AudienceSummary, status string, mb *testmailbox.Client, limit int) (output, error) {
	if err := s.Check(); err != nil {
		return nil, fmt.Errorf("the release's counts do not add up: %w", err)
	}
	v := releaseView{Release: s.ReleaseID, Source: s.SourceName, SourceDigest: s.SourceDigest, ActionType: s.ActionType,
		Subject: s.Subject, ApprovedBy: s.ApprovedBy, AllowImplicit: s.AllowImplicit,
		CaseSensitiveLocalPart: s.LocalPart == destination.CaseSensitiveLocalPart, SourceRows: s.SourceRows, ErrorRows: s.ErrorRows,
		Unmatched: s.Unmatched, Duplicates: s.Duplicates, Resolved: s.Resolved, Excluded: s.Excluded,
		Removed: s.Removed, Missing: s.Missing, DuplicatesByAddress: s.Covered, Eligible: s.Eligible,
		Attempted: s.Attempted, Confirmed: s.Confirmed, Held: s.Held, Denied: s.Denied}
	if s.Covered > 0 {
		if err := v.addSharedAddresses(ctx, l); err != nil {
			return nil, err
		}
	}
	if mb != nil {
		n, err := countArrivals(ctx, l, s.ReleaseID, mb)
		if err != nil {
			return nil, err
		}
		v.Arrived = &n
	}
	if status == "" || limit <= 0 {
		return v, nil
	}
	rows, err := l.AudienceRows(ctx, s.ReleaseID, status, limit+1, 0)
	if err != nil {
		return nil, err
	}
	v.RowStatus = status
	for i, r := range rows {
		if i == limit {
			v.MoreRows = statusCount(s, status) - limit
			break
		}
		v.Rows = append(v.Rows, audienceRowV{Line: r.Line, Identity: r.Identity, Customer: r.CustomerID,
			Email: r.Email, Status: r.Status, Reason: r.Reason, State: string(r.State), Consent: string(r.Consent), Stage: r.Lifecycle})
	}
	return v, nil
}

// sharedShown caps the shared addresses a view lists; the count covers
// them all.
const sharedShown = 20

// addSharedAddresses lists the release's shared addresses, each with the
// customer who carries its notice.
func (v *releaseView) addSharedAddresses(ctx context.Context, l *ledger.Ledger) error {
	shared, total, err := l.SharedAddresses(ctx, v.Release, sharedShown)
	if err != nil {
		return err
	}
	row := func(r ledger.AudienceRow) addressRowV {
		return addressRowV{Line: r.Line, Customer: r.CustomerID, Email: r.Email, State: string(r.State), Reason: r.Reason}
	}
	for _, sa := range shared {
		av := sharedAddressV{Address: sa.Address, Covered: []addressRowV{}}
		if sa.Carrier.Line != 0 {
			c := row(sa.Carrier)
			av.CarriedBy = &c
		}
		for _, r := range sa.Covered {
			av.Covered = append(av.Covered, row(r))
		}
		v.SharedAddresses = append(v.SharedAddresses, av)
	}
	v.MoreSharedAddresses = total - len(shared)
	return nil
}

// withCustomers adds the customers import a verb ran to its release view.
func withCustomers(out output, cv *customersView) output {
	if v, ok := out.(releaseView); ok && cv != nil {
		v.Customers = cv
		return v
	}
	return out
}

// withSamples adds n recipients drawn across lifecycle stages, each checked
// against the stored source file and the customer mirror.
func withSamples(ctx context.Context, l *ledger.Ledger, out output, n int) (output, error) {
	v, ok := out.(releaseView)
	if !ok {
		return out, nil
	}
	samples, err := l.SampleRecipients(ctx, v.Release, n, l.Customers())
	if err != nil {
		return nil, err
	}
	v.Samples = []sampleV{}
	for _, s := range samples {
		v.Samples = append(v.Samples, sampleV{Line: s.Line, Lifecycle: s.Lifecycle, Status: s.Status, Consent: string(s.Consent),
			Customer: s.CustomerID, SourceKey: s.SourceKey, CRMKey: s.CRMKey, Same: s.Same})
	}
	return v, nil
}

func statusCount(s ledger.AudienceSummary, status string) int {
	return map[string]int{ledger.RowError: s.ErrorRows, ledger.RowUnmatched: s.Unmatched, ledger.RowDuplicate: s.Duplicates,
		ledger.RowExcluded: s.Excluded, ledger.RowRemoved: s.Removed, ledger.RowMissing: s.Missing, ledger.RowCovered: s.Covered,
		ledger.RowEligible: s.Eligible}[status]
}

// countArrivals counts, per eligible recipient, what the mailbox received
// for their action key (COUNT at the mailbox, never a page).
func countArrivals(ctx context.Context, l *ledger.Ledger, release string, mb *testmailbox.Client) (int, error) {
	total := 0
	for offset := 0; ; offset += 500 {
		rows, err := l.AudienceRows(ctx, release, ledger.RowEligible, 500, offset)
		if err != nil {
			return 0, err
		}
		for _, r := range rows {
			n, err := mb.Count(ctx, testmailbox.Filter{ActionKey: r.ActionKey})
			if err != nil {
				return 0, fmt.Errorf("count arrivals for %s: %w", r.ActionKey, err)
			}
			total += n
		}
		if len(rows) < 500 {
			return total, nil
		}
	}
}

func (v releaseView) text(w io.Writer) {
	if v.Customers != nil {
		v.Customers.text(w)
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "release:\t%s\n", v.Release)
	fmt.Fprintf(w, "source:\t%s (%s)\n", orDash(v.Source), v.SourceDigest)
	fmt.Fprintf(w, "content:\t%s %q\n", v.ActionType, v.Subject)
	fmt.Fprintf(w, "approved by:\t%s\n", orDash(v.ApprovedBy))
	takes := "opted-in customers"
	if v.AllowImplicit {
		takes = "opted-in customers and customers with implicit consent"
	}
	fmt.Fprintf(w, "takes:\t%s\n", takes)
	local := "case-insensitively (Ada@example.org is ada@example.org)"
	if v.CaseSensitiveLocalPart {
		local = "case-sensitively (Ada@example.org is not ada@example.org)"
	}
	fmt.Fprintf(w, "addresses:\tone notice per address; local parts compared %s\n\n", local)
	fmt.Fprintf(w, "source rows\t%d\t= errors + unmatched + duplicates + resolved\n", v.SourceRows)
	fmt.Fprintf(w, "  rows with errors\t%d\n", v.ErrorRows)
	fmt.Fprintf(w, "  unmatched identities\t%d\n", v.Unmatched)
	fmt.Fprintf(w, "  duplicates by id (same customer)\t%d\n", v.Duplicates)
	fmt.Fprintf(w, "  resolved recipients\t%d\t= excluded + removed + missing + covered + eligible\n", v.Resolved)
	fmt.Fprintf(w, "    excluded (consent/suppression)\t%d\n", v.Excluded)
	fmt.Fprintf(w, "    removed by a person\t%d\n", v.Removed)
	fmt.Fprintf(w, "    missing from the latest export\t%d\n", v.Missing)
	fmt.Fprintf(w, "    covered (duplicates by address)\t%d\n", v.DuplicatesByAddress)
	fmt.Fprintf(w, "    final eligible\t%d\n", v.Eligible)
	fmt.Fprintf(w, "attempted\t%d\n", v.Attempted)
	fmt.Fprintf(w, "confirmed\t%d\n", v.Confirmed)
	if v.CheckedAfterRestore != nil {
		fmt.Fprintf(w, "checked after restore\t%d\t(%d found at the destination and held for a person)\n", *v.CheckedAfterRestore, *v.FoundAfterRestore)
	}
	if v.SentThisRun != nil {
		fmt.Fprintf(w, "sent by this run\t%d\t(%d were already sent)\n", *v.SentThisRun, v.Confirmed-*v.SentThisRun)
	}
	if v.Held+v.Denied > 0 {
		fmt.Fprintf(w, "held for a person\t%d\n", v.Held)
		fmt.Fprintf(w, "denied at send\t%d\n", v.Denied)
	}
	if v.Arrived != nil {
		fmt.Fprintf(w, "arrived\t%d\n", *v.Arrived)
	}
	v.sharedText(w)
	v.sampleText(w)
	if v.RowStatus == "" || len(v.Rows) == 0 {
		return
	}
	fmt.Fprintf(w, "\n%s rows:\n", v.RowStatus)
	fmt.Fprintf(w, "  LINE\tIDENTITY\tCONSENT\tWHY\tACTION STATE\n")
	for _, r := range v.Rows {
		fmt.Fprintf(w, "  %d\t%s\t%s\t%s\t%s\n", r.Line, orDash(strings.TrimSuffix(r.Identity, ":")), orDash(r.Consent), orDash(r.Reason), orDash(r.State))
	}
	if v.MoreRows > 0 {
		fmt.Fprintf(w, "  … %d more (gatehouse audience show --release %s --rows %s --limit N)\n", v.MoreRows, v.Release, v.RowStatus)
	}
}

// sharedText lists the shared addresses: who carries each one's notice,
// and who is covered by it.
func (v releaseView) sharedText(w io.Writer) {
	if len(v.SharedAddresses) == 0 {
		return
	}
	fmt.Fprintf(w, "\nduplicates by address (one notice each):\n")
	fmt.Fprintf(w, "  ADDRESS\tCARRIED BY\tSTATE\tCOVERED BY IT\n")
	for _, sa := range v.SharedAddresses {
		carrier, state := "nobody: no customer with it can receive it", "-"
		if c := sa.CarriedBy; c != nil {
			carrier, state = fmt.Sprintf("%s (line %d)", c.Customer, c.Line), orDash(c.State)
		}
		var covered []string
		for _, r := range sa.Covered {
			covered = append(covered, fmt.Sprintf("%s (line %d)", r.Customer, r.Line))
		}
		fmt.Fprintf(w, "  %s\t%s\t%s\t%s\n", sa.Address, carrier, state, strings.Join(covered, ", "))
	}
	if v.MoreSharedAddresses > 0 {
		fmt.Fprintf(w, "  … %d more (gatehouse audience show --release %s --rows covered --limit N)\n", v.MoreSharedAddresses, v.Release)
	}
}

func (v releaseView) sampleText(w io.Writer) {
	if v.Samples == nil {
		return
	}
	if len(v.Samples) == 0 {
		fmt.Fprintf(w, "\nsample: no resolved recipients\n")
		return
	}
	staged := false
	for _, s := range v.Samples {
		staged = staged || s.Lifecycle != ""
	}
	if staged {
		fmt.Fprintf(w, "\nsample across lifecycle stages:\n")
	} else {
		fmt.Fprintf(w, "\nsample (the CRM gave no lifecycle stages):\n")
	}
	fmt.Fprintf(w, "  LIFECYCLE\tLINE\tSOURCE KEY\tCRM KEY\tCUSTOMER\tSTATUS\tSAME\n")
	for _, s := range v.Samples {
		same := "yes"
		if !s.Same {
			same = "NO"
		}
		fmt.Fprintf(w, "  %s\t%d\t%s\t%s\t%s\t%s\t%s\n", orDash(s.Lifecycle), s.Line, orDash(s.SourceKey), orDash(s.CRMKey),
			s.Customer, s.Status, same)
	}
}

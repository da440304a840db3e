package main

import (
	"context"
	"fmt"
	"io"
	"strings"

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
	AllowImplicit bool           `json:"allow_implicit"`
	Customers     *customersView `json:"customers,omitempty"`
	SourceRows    int            `json:"source_rows"`
	ErrorRows     int            `json:"error_rows"`
	Unmatched     int            `json:"unmatched"`
	Duplicates    int            `json:"duplicates"`
	Resolved      int            `json:"resolved"`
	Excluded      int            `json:"excluded"`
	Removed       int            `json:"removed"`
	Eligible      int            `json:"eligible"`
	Attempted     int            `json:"attempted"`
	Confirmed     int            `json:"confirmed"`
	Held          int            `json:"held"`
	Denied        int            `json:"denied"`
	Arrived       *int           `json:"arrived,omitempty"`
	SentThisRun   *int           `json:"sent_this_run,omitempty"`
	// After a restore: recipients this run looked up at the destination
	// before its first batch, and those found there (held).
	CheckedAfterRestore *int           `json:"checked_after_restore,omitempty"`
	FoundAfterRestore   *int           `json:"found_after_restore,omitempty"`
	RowStatus           string         `json:"row_status,omitempty"`
	Rows                []audienceRowV `json:"rows,omitempty"`
	MoreRows            int            `json:"more_rows,omitempty"`
	Samples             []sampleV      `json:"samples,omitempty"`
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
		Subject: s.Subject, ApprovedBy: s.ApprovedBy, AllowImplicit: s.AllowImplicit, SourceRows: s.SourceRows, ErrorRows: s.ErrorRows,
		Unmatched: s.Unmatched, Duplicates: s.Duplicates, Resolved: s.Resolved, Excluded: s.Excluded,
		Removed: s.Removed, Eligible: s.Eligible, Attempted: s.Attempted, Confirmed: s.Confirmed, Held: s.Held, Denied: s.Denied}
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
		ledger.RowExcluded: s.Excluded, ledger.RowRemoved: s.Removed, ledger.RowEligible: s.Eligible}[status]
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
	fmt.Fprintf(w, "takes:\t%s\n\n", takes)
	fmt.Fprintf(w, "source rows\t%d\t= errors + unmatched + duplicates + resolved\n", v.SourceRows)
	fmt.Fprintf(w, "  rows with errors\t%d\n", v.ErrorRows)
	fmt.Fprintf(w, "  unmatched identities\t%d\n", v.Unmatched)
	fmt.Fprintf(w, "  duplicates\t%d\n", v.Duplicates)
	fmt.Fprintf(w, "  resolved recipients\t%d\t= excluded + removed + eligible\n", v.Resolved)
	fmt.Fprintf(w, "    excluded (consent/suppression)\t%d\n", v.Excluded)
	fmt.Fprintf(w, "    removed by a person\t%d\n", v.Removed)
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

package scenarios

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"gatehouse/destination"
	"gatehouse/fakes"
	"gatehouse/internal/mailaddr"
	"gatehouse/ledger"
	"gatehouse/testmailbox"
)

// audienceType is the action type of every audience notice in a rehearsal.
const audienceType = "notice"

// crmDirectory lets the gate resolve audience identities against the fake
// CRM, so consent changes and outages on cue reach audience sends too.
type crmDirectory struct{ crm *fakes.CRM }

func (d crmDirectory) CustomerByID(_ context.Context, id string) (ledger.Customer, bool, error) {
	if !d.crm.Available() {
		return ledger.Customer{}, false, fmt.Errorf("crm: %w", fakes.ErrSourceDown)
	}
	rec, ok := d.crm.Customer(id)
	if !ok {
		return ledger.Customer{}, false, nil
	}
	return ledger.Customer{ID: id, Email: rec["email"], Consent: rec["consent"],
		Suppressed: strings.EqualFold(rec["suppressed"], "yes")}, true, nil
}

func (d crmDirectory) CustomerByEmail(ctx context.Context, email string) (ledger.Customer, bool, error) {
	if !d.crm.Available() {
		return ledger.Customer{}, false, fmt.Errorf("crm: %w", fakes.ErrSourceDown)
	}
	for _, id := range d.crm.Customers() {
		if rec, ok := d.crm.Customer(id); ok && mailaddr.Same(rec["email"], email) {
			return d.CustomerByID(ctx, id)
		}
	}
	return ledger.Customer{}, false, nil
}

func (r *Run) directory() ledger.Directory { return crmDirectory{r.env.crm} }

// ConsentReading is what the gate reads the value a set step writes to a
// customer's consent as, when that is another word: an audience release's
// sends read consent as a class (ledger.ClassifyConsent), so "withdrawn" is
// "unsubscribed" in the gate's denial. "" when the gate reads the word as
// written (single actions compare the raw value).
func ConsentReading(sc *Scenario, s *Step) string {
	if s.Do != "set" || s.Customer == "" || s.Field != "consent" ||
		!slices.ContainsFunc(sc.Steps, func(st Step) bool { return st.Do == "send_audience" }) {
		return ""
	}
	if v := ledger.ClassifyConsent(s.Value).MaterialValue(); v != s.Value {
		return v
	}
	return ""
}

func (r *Run) doImportAudience(ctx context.Context, s *Step, _ barrier) (outcome, error) {
	sum, err := r.env.l.ImportAudience(ctx, ledger.AudienceImport{ReleaseID: s.Release, SourceName: s.Release + ".csv",
		Source: strings.NewReader(s.CSV), ActionType: audienceType, Subject: s.Subject, Body: s.Body, Actor: s.Actor}, r.directory())
	if err != nil {
		return fromErr(err, ClassOK)
	}
	r.mu.Lock()
	r.releases = append(r.releases, s.Release)
	r.mu.Unlock()
	return outcome{class: ClassOK, detail: fmt.Sprintf("%d rows, %d eligible", sum.SourceRows, sum.Eligible)}, nil
}

func (r *Run) doRemoveRecipient(ctx context.Context, s *Step, _ barrier) (outcome, error) {
	return fromErr(r.env.l.RemoveRecipient(ctx, s.Release, s.Customer, s.Actor, s.Reason), ClassOK)
}

func (r *Run) doApproveAudience(ctx context.Context, s *Step, _ barrier) (outcome, error) {
	return fromErr(r.env.l.ApproveAudienceAt(ctx, s.Release, s.Actor, destination.EndpointOf(r.env.dest), sender), ClassOK)
}

func (r *Run) doSendAudience(ctx context.Context, s *Step, _ barrier) (outcome, error) {
	sum, err := r.env.l.SendAudience(ctx, ledger.AudienceSend{ReleaseID: s.Release, Actor: s.Actor}, r.env.dest, r.directory())
	if err != nil {
		return fromErr(err, ClassOK)
	}
	return outcome{class: ClassOK, detail: fmt.Sprintf("%d of %d eligible confirmed", sum.Confirmed, sum.Eligible)}, nil
}

// audienceSummaries reads every release the run imported, with arrivals
// counted by the mailbox per eligible recipient.
func (r *Run) audienceSummaries(ctx context.Context) ([]ledger.AudienceSummary, error) {
	r.mu.Lock()
	releases := append([]string(nil), r.releases...)
	r.mu.Unlock()
	var out []ledger.AudienceSummary
	for _, id := range releases {
		s, err := r.env.l.AudienceSummary(ctx, id)
		if err != nil {
			return nil, err
		}
		if s.Arrived, err = r.audienceArrivals(ctx, id); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// samplesPerStatus is how many rows of each status a snapshot carries.
const samplesPerStatus = 2

// audienceViews adds sample rows of every status to the summaries.
func (r *Run) audienceViews(ctx context.Context) ([]AudienceView, error) {
	sums, err := r.audienceSummaries(ctx)
	if err != nil {
		return nil, err
	}
	var out []AudienceView
	for _, s := range sums {
		v := AudienceView{Summary: s}
		for _, status := range []string{ledger.RowEligible, ledger.RowExcluded, ledger.RowRemoved, ledger.RowCovered,
			ledger.RowMissing, ledger.RowDuplicate, ledger.RowUnmatched, ledger.RowError} {
			rows, err := r.env.l.AudienceRows(ctx, s.ReleaseID, status, samplesPerStatus, 0)
			if err != nil {
				return nil, err
			}
			v.Samples = append(v.Samples, rows...)
		}
		out = append(out, v)
	}
	return out, nil
}

// audienceArrivals counts what the mailbox received for a release's
// eligible recipients.
func (r *Run) audienceArrivals(ctx context.Context, release string) (int, error) {
	rows, err := r.env.l.AudienceRows(ctx, release, ledger.RowEligible, 100000, 0)
	if err != nil {
		return 0, err
	}
	total := 0
	for _, row := range rows {
		n, err := r.env.mb.Count(ctx, testmailbox.Filter{ActionKey: row.ActionKey})
		if err != nil {
			return 0, fmt.Errorf("count arrivals: %w", err)
		}
		total += n
	}
	return total, nil
}

// checkAudience compares each audience expectation with the release's
// counts in the final snapshot; it also checks that the counts add up.
func (r *Run) checkAudience(views []AudienceView) []Verdict {
	byID := map[string]ledger.AudienceSummary{}
	for _, v := range views {
		byID[v.Summary.ReleaseID] = v.Summary
	}
	var out []Verdict
	for _, a := range r.sc.Expect.Audience {
		s, ok := byID[a.Release]
		if !ok {
			out = append(out, Verdict{Name: "audience." + a.Release, Pos: a.Pos, Expected: "an imported release", Actual: "never imported"})
			continue
		}
		arith := Verdict{Name: "audience." + a.Release + " counts add up", Pos: a.Pos, Expected: "they add up", Actual: "they add up", Pass: true}
		if err := s.Check(); err != nil {
			arith.Actual, arith.Pass = err.Error(), false
		}
		out = append(out, arith)
		out = append(out, intVerdicts("audience."+a.Release+".", a.KeyPos, []intCheck{
			{"source_rows", a.SourceRows, s.SourceRows}, {"error_rows", a.ErrorRows, s.ErrorRows},
			{"unmatched", a.Unmatched, s.Unmatched}, {"duplicates", a.Duplicates, s.Duplicates},
			{"resolved", a.Resolved, s.Resolved}, {"excluded", a.Excluded, s.Excluded},
			{"removed", a.Removed, s.Removed}, {"eligible", a.Eligible, s.Eligible},
			{"attempted", a.Attempted, s.Attempted}, {"confirmed", a.Confirmed, s.Confirmed},
			{"arrived", a.Arrived, s.Arrived},
		})...)
	}
	return out
}

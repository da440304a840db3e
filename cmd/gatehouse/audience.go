package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"gatehouse/destination"
	"gatehouse/ledger"
	"gatehouse/testmailbox"
)

func init() { subcommands = append(subcommands, newAudienceCmd) }

func newAudienceCmd() *cobra.Command {
	return newVerbFamily("audience", "Reconcile a file-defined audience and send to it once",
		`audience turns an uploaded CSV into a release: every row is reconciled
against the CRM (the ledger's customer mirror, refreshed with --customers) and
counted as an error, unmatched, a duplicate (the same customer again),
excluded (consent or suppression), removed by a person, missing from the
latest export, covered (another customer with the same address carries the
notice: one notice per address), or eligible. Consent is read as the CRM
wrote it (Customer.io, Mailchimp, HubSpot, Intercom, Braze or plain
consent/status columns) and mapped to a class: opted_in, implicit, pending,
unknown, unsubscribed or suppressed. Sending creates one action per eligible
recipient, keyed by customer, release and action type, so re-running a send
never duplicates. Exit codes are those of gate, plus 18 when a customers
import is refused (see docs/cli.md).`,
		[]func() verbSpec{audienceReconcileVerb, audienceApproveVerb, audienceRemoveVerb, audienceSendVerb, audienceShowVerb})
}

func audienceReconcileVerb() verbSpec {
	var file, release, actionType string
	var allowImplicit, caseSensitive bool
	var c contentFlags
	var crm crmFlags
	return verbSpec{name: "reconcile", short: "Reconcile a CSV into a release and print its counts", actor: true,
		flags: func(fs *pflag.FlagSet) {
			fs.StringVar(&file, "file", "", "the audience CSV (customer_id and/or email column)")
			releaseFlag(fs, &release)
			crm.register(fs)
			fs.BoolVar(&allowImplicit, "allow-implicit", false, "customers with implicit consent (subscribed without an explicit opt-in) are eligible; recorded with the release")
			fs.BoolVar(&caseSensitive, "case-sensitive-local-part", false, "tell Ada@example.org from ada@example.org when sending one notice per address (default: one address); recorded with the release and in its digest")
			fs.StringVar(&actionType, "type", "notice", "action type of the notice")
			fs.StringVar(&c.subject, "subject", "", "the notice's subject")
			fs.StringVar(&c.body, "body", "", "the notice's body")
			fs.StringVar(&c.bodyFile, "body-file", "", "read the body from PATH, or stdin for -")
		},
		run: func(ctx context.Context, g *gateRun) (output, error) {
			const verb = "audience reconcile"
			var body string
			l, err := g.open(required(verb, "file", file), required(verb, "release", release),
				required(verb, "subject", c.subject), c.readInto(verb, g.in, &body), crm.read(verb))
			if err != nil {
				return crm.refused, err
			}
			// The exports were read whole before the ledger was opened; they
			// are recorded in the release's own transaction, so a refused
			// reconcile writes nothing.
			var ci *ledger.CustomerImport
			var rep ledger.CustomerReport
			if len(crm.paths) > 0 {
				req := crm.importRequest(g.actor)
				ci = &req
			}
			f, err := os.Open(file)
			if err != nil {
				return nil, fmt.Errorf("audience file: %w", err)
			}
			defer f.Close()
			local := destination.FoldLocalPart
			if caseSensitive {
				local = destination.CaseSensitiveLocalPart
			}
			s, err := l.ImportAudience(ctx, ledger.AudienceImport{ReleaseID: release, SourceName: file, Source: f,
				ActionType: actionType, Subject: c.subject, Body: body, Actor: g.actor, AllowImplicit: allowImplicit,
				LocalPart: local, Customers: ci, CustomersReport: &rep}, l.Customers())
			var cv *customersView
			if ci != nil {
				v := crm.view(rep)
				cv = &v
			}
			if err != nil {
				return refusedOutput(cv, err), err
			}
			out, err := releaseOutput(ctx, l, s, ledger.RowError, nil, 50)
			return withCustomers(out, cv), err
		}}
}

func audienceApproveVerb() verbSpec {
	var release, destURL, from string
	return verbSpec{name: "approve", short: "Approve sending a release's content to one destination from one sender", actor: true,
		flags: func(fs *pflag.FlagSet) {
			releaseFlag(fs, &release)
			fs.StringVar(&destURL, "destination", "", destinationUsage+" (bound by the approval)")
			fs.StringVar(&from, "from", "", "sender: one bare address (default "+destination.DefaultSender+"; bound by the approval)")
		},
		run: func(ctx context.Context, g *gateRun) (output, error) {
			const verb = "audience approve"
			var ep destination.Endpoint
			parse := func() (err error) { ep, err = parseDestination(verb, destURL); return err }
			checkFrom := func() error {
				if from == "" {
					return nil
				}
				if err := ledger.ValidateAddress("sender", from); err != nil {
					return usageErr("%s: --from: %v", verb, err)
				}
				return nil
			}
			l, err := g.open(required(verb, "release", release), required(verb, "destination", destURL), parse, checkFrom)
			if err != nil {
				return nil, err
			}
			if err := l.ApproveAudienceAt(ctx, release, g.actor, ep, from); err != nil {
				return nil, err
			}
			s, err := l.AudienceSummary(ctx, release)
			if err != nil {
				return nil, err
			}
			return releaseOutput(ctx, l, s, "", nil, 0)
		}}
}

func audienceRemoveVerb() verbSpec {
	var release, customer, reason string
	return verbSpec{name: "remove", short: "Remove one eligible recipient, with a reason", actor: true,
		flags: func(fs *pflag.FlagSet) {
			releaseFlag(fs, &release)
			fs.StringVar(&customer, "customer", "", "customer id to remove (eligible or covered)")
			reasonFlag(fs, &reason)
		},
		run: func(ctx context.Context, g *gateRun) (output, error) {
			const verb = "audience remove"
			l, err := g.open(required(verb, "release", release), required(verb, "customer", customer), required(verb, "reason", reason))
			if err != nil {
				return nil, err
			}
			if err := l.RemoveRecipient(ctx, release, customer, g.actor, reason); err != nil {
				return nil, err
			}
			s, err := l.AudienceSummary(ctx, release)
			if err != nil {
				return nil, err
			}
			return releaseOutput(ctx, l, s, "", nil, 0)
		}}
}

func audienceSendVerb() verbSpec {
	var release, destURL, from, restoreChecked string
	var concurrency int
	var crm crmFlags
	return verbSpec{name: "send", short: "Send a release once to every eligible recipient", actor: true,
		flags: func(fs *pflag.FlagSet) {
			releaseFlag(fs, &release)
			fs.StringVar(&destURL, "destination", "", destinationUsage+" (must be the approved one; add ?api= for its records)")
			fs.StringVar(&from, "from", "", "sender address; must be the approved one (an assertion, not a change)")
			fs.IntVar(&concurrency, "concurrency", ledger.DefaultConcurrency,
				fmt.Sprintf("messages handed over at once, 1–%d (1: one recipient at a time)", ledger.MaxConcurrency))
			fs.StringVar(&restoreChecked, "restore-checked-by", "", "after a restore, to a destination whose records the gate cannot consult: a person's word (why) that they checked what arrived; recorded")
			crm.register(fs)
		},
		run: func(ctx context.Context, g *gateRun) (output, error) {
			const verb = "audience send"
			var dest destination.Destination
			openDest := func() (err error) {
				dest, err = openDestination(verb, destURL)
				return err
			}
			checkConcurrency := func() error {
				if concurrency < 1 || concurrency > ledger.MaxConcurrency {
					return usageErr("%s: --concurrency %d: want 1 to %d", verb, concurrency, ledger.MaxConcurrency)
				}
				return nil
			}
			l, err := g.open(required(verb, "release", release), required(verb, "destination", destURL), checkConcurrency, openDest, crm.read(verb))
			if c, ok := dest.(io.Closer); ok {
				defer c.Close() // idle SMTP sessions
			}
			if err != nil {
				return crm.refused, err
			}
			cv, err := crm.load(ctx, l, g.actor, release)
			if err != nil {
				return refusedOutput(cv, err), err
			}
			before, err := l.AudienceSummary(ctx, release)
			if err != nil {
				return nil, err
			}
			send := ledger.AudienceSend{ReleaseID: release, Actor: g.actor, From: from, Concurrency: concurrency, RestoreCheckedBy: restoreChecked}
			if !g.json {
				send.Progress = newProgressPrinter(g.errOut, verb).report
			}
			s, err := l.SendAudience(ctx, send, dest, l.Customers())
			if errors.Is(err, ledger.ErrWrongDestination) {
				return nil, err
			}
			if err == nil && s.Held > 0 {
				// Recipients wait for a person: a workflow must not read
				// exit 0 as "all done".
				err = fmt.Errorf("%w: %d recipient(s) of release %s wait for a person (gate list --state held)", ledger.ErrHeld, s.Held, release)
			}
			out, oerr := releaseOutput(ctx, l, s, "", nil, 0)
			out = withCustomers(out, cv)
			if v, ok := out.(releaseView); ok {
				sent := s.Confirmed - before.Confirmed
				v.SentThisRun = &sent
				if s.Restore.Checked > 0 {
					v.CheckedAfterRestore, v.FoundAfterRestore = &s.Restore.Checked, &s.Restore.Found
				}
				out = v
			}
			return out, errors.Join(err, oerr)
		}}
}

func audienceShowVerb() verbSpec {
	var release, status, api string
	var limit, sample int
	return verbSpec{name: "show", short: "Show a release's counts and rows", readOnly: true,
		flags: func(fs *pflag.FlagSet) {
			releaseFlag(fs, &release)
			fs.StringVar(&status, "rows", "", "list rows of this status: "+strings.Join(ledger.RowStatuses, ", "))
			fs.IntVar(&limit, "limit", 20, "rows to list")
			fs.StringVar(&api, "api", "", "count arrivals per eligible recipient at this test mailbox API `URL` (the flag the mailbox verbs use)")
			fs.IntVar(&sample, "sample", 0, "draw N resolved recipients across the CRM's lifecycle stages and check each identity in the source file and the CRM mirror")
		},
		run: func(ctx context.Context, g *gateRun) (output, error) {
			const verb = "audience show"
			checkStatus := func() error {
				if status == "" || slices.Contains(ledger.RowStatuses, status) {
					return nil
				}
				return usageErr("%s: --rows %q is not a row status (want %s)", verb, status, strings.Join(ledger.RowStatuses, ", "))
			}
			var mb *testmailbox.Client
			openAPI := func() (err error) {
				if api != "" {
					if mb, err = testmailbox.NewClient(api, nil); err != nil {
						return usageErr("%s: --api: %v", verb, err)
					}
				}
				return nil
			}
			checkSample := func() error {
				if sample < 0 {
					return usageErr("%s: --sample %d: want a number of recipients, 0 or more", verb, sample)
				}
				return nil
			}
			l, err := g.open(required(verb, "release", release), checkStatus, openAPI, checkSample)
			if err != nil {
				return nil, err
			}
			s, err := l.AudienceSummary(ctx, release)
			if err != nil {
				return nil, err
			}
			if status == "" {
				status = ledger.RowError
			}
			out, err := releaseOutput(ctx, l, s, status, mb, limit)
			if err != nil || sample == 0 {
				return out, err
			}
			return withSamples(ctx, l, out, sample)
		}}
}

func releaseFlag(fs *pflag.FlagSet, release *string) {
	fs.StringVar(release, "release", "", "release id (ties file, content and approval together)")
}

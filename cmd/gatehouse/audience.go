package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"gatehouse/internal/textenc"
	"gatehouse/ledger"
	"gatehouse/testmailbox"
)

func init() { subcommands = append(subcommands, newAudienceCmd) }

func newAudienceCmd() *cobra.Command {
	return newVerbFamily("audience", "Reconcile a file-defined audience and send to it once",
		`audience turns an uploaded CSV into a release: every row is reconciled
against the CRM (the ledger's customer mirror, refreshed with --customers) and
counted as an error, unmatched, a duplicate, excluded (consent or
suppression), removed by a person, or eligible. Sending creates one action per
eligible recipient, keyed by customer, release and action type, so re-running a
send never duplicates. Exit codes are those of gate (see docs/cli.md).`,
		[]func() verbSpec{audienceReconcileVerb, audienceApproveVerb, audienceRemoveVerb, audienceSendVerb, audienceShowVerb})
}

func audienceReconcileVerb() verbSpec {
	var file, release, customers, actionType string
	var c contentFlags
	return verbSpec{name: "reconcile", short: "Reconcile a CSV into a release and print its counts", actor: true,
		flags: func(fs *pflag.FlagSet) {
			fs.StringVar(&file, "file", "", "the audience CSV (customer_id and/or email column)")
			releaseFlag(fs, &release)
			customersFlag(fs, &customers)
			fs.StringVar(&actionType, "type", "notice", "action type of the notice")
			fs.StringVar(&c.subject, "subject", "", "the notice's subject")
			fs.StringVar(&c.body, "body", "", "the notice's body")
			fs.StringVar(&c.bodyFile, "body-file", "", "read the body from PATH, or stdin for -")
		},
		run: func(ctx context.Context, g *gateRun) (output, error) {
			const verb = "audience reconcile"
			var body string
			var cs []ledger.Customer
			// The customers file is read whole before the ledger is opened,
			// and recorded in the release's own transaction: a refused
			// reconcile writes nothing.
			readCS := func() (err error) {
				if customers != "" {
					cs, err = readCustomers(customers)
				}
				return err
			}
			l, err := g.open(required(verb, "file", file), required(verb, "release", release),
				required(verb, "subject", c.subject), c.readInto(verb, g.in, &body), readCS)
			if err != nil {
				return nil, err
			}
			f, err := os.Open(file)
			if err != nil {
				return nil, fmt.Errorf("audience file: %w", err)
			}
			defer f.Close()
			s, err := l.ImportAudience(ctx, ledger.AudienceImport{ReleaseID: release, SourceName: file, Source: f,
				ActionType: actionType, Subject: c.subject, Body: body, Actor: g.actor, Customers: cs}, l.Customers())
			if err != nil {
				return nil, err
			}
			return releaseOutput(ctx, l, s, ledger.RowError, nil, 50)
		}}
}

func audienceApproveVerb() verbSpec {
	var release string
	return verbSpec{name: "approve", short: "Approve sending a release's content", actor: true,
		flags: func(fs *pflag.FlagSet) { releaseFlag(fs, &release) },
		run: func(ctx context.Context, g *gateRun) (output, error) {
			l, err := g.open(required("audience approve", "release", release))
			if err != nil {
				return nil, err
			}
			if err := l.ApproveAudience(ctx, release, g.actor); err != nil {
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
			fs.StringVar(&customer, "customer", "", "customer id to remove")
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
	var release, target, from, customers string
	return verbSpec{name: "send", short: "Send a release once to every eligible recipient", actor: true,
		flags: func(fs *pflag.FlagSet) {
			releaseFlag(fs, &release)
			fs.StringVar(&target, "target", "", "destination: smtp://host:port[?api=URL] or file://DIR")
			fs.StringVar(&from, "from", "", "sender address (the destination's default when empty)")
			customersFlag(fs, &customers)
		},
		run: func(ctx context.Context, g *gateRun) (output, error) {
			const verb = "audience send"
			var dest ledger.Destination
			openDest := func() (err error) {
				if dest, err = openDestination(target); err != nil {
					return usageErr("%s: %v", verb, err)
				}
				return nil
			}
			l, err := g.open(required(verb, "release", release), required(verb, "target", target), openDest)
			if err != nil {
				return nil, err
			}
			if err := loadCustomers(ctx, l, customers); err != nil {
				return nil, err
			}
			before, err := l.AudienceSummary(ctx, release)
			if err != nil {
				return nil, err
			}
			s, err := l.SendAudience(ctx, ledger.AudienceSend{ReleaseID: release, Actor: g.actor, From: from}, dest, l.Customers())
			out, oerr := releaseOutput(ctx, l, s, "", nil, 0)
			if v, ok := out.(releaseView); ok {
				sent := s.Confirmed - before.Confirmed
				v.SentThisRun = &sent
				out = v
			}
			return out, errors.Join(err, oerr)
		}}
}

func audienceShowVerb() verbSpec {
	var release, status, api string
	var limit int
	return verbSpec{name: "show", short: "Show a release's counts and rows", readOnly: true,
		flags: func(fs *pflag.FlagSet) {
			releaseFlag(fs, &release)
			fs.StringVar(&status, "rows", "", "list rows of this status: error, unmatched, duplicate, excluded, removed, eligible")
			fs.IntVar(&limit, "limit", 20, "rows to list")
			fs.StringVar(&api, "mailbox-api", "", "count arrivals per eligible recipient at this test mailbox API")
		},
		run: func(ctx context.Context, g *gateRun) (output, error) {
			const verb = "audience show"
			checkStatus := func() error {
				switch status {
				case "", ledger.RowError, ledger.RowUnmatched, ledger.RowDuplicate, ledger.RowExcluded, ledger.RowRemoved, ledger.RowEligible:
					return nil
				}
				return usageErr("%s: --rows %q is not a row status (want error, unmatched, duplicate, excluded, removed or eligible)", verb, status)
			}
			var mb *testmailbox.Client
			openAPI := func() (err error) {
				if api != "" {
					if mb, err = testmailbox.NewClient(api, nil); err != nil {
						return usageErr("%s: --mailbox-api: %v", verb, err)
					}
				}
				return nil
			}
			l, err := g.open(required(verb, "release", release), checkStatus, openAPI)
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
			return releaseOutput(ctx, l, s, status, mb, limit)
		}}
}

func releaseFlag(fs *pflag.FlagSet, release *string) {
	fs.StringVar(release, "release", "", "release id (ties file, content and approval together)")
}

func customersFlag(fs *pflag.FlagSet, path *string) {
	fs.StringVar(path, "customers", "", "CSV of CRM records (customer_id,email,consent,suppressed) to refresh the ledger's customer mirror")
}

// loadCustomers refreshes the ledger's CRM mirror from a CSV, if given.
func loadCustomers(ctx context.Context, l *ledger.Ledger, path string) error {
	if path == "" {
		return nil
	}
	cs, err := readCustomers(path)
	if err != nil {
		return err
	}
	return l.UpsertCustomers(ctx, cs)
}

// readCustomers reads a CRM export: a header with customer_id (or id) and
// email, optionally consent and suppressed. Errors name the file, line and
// column.
func readCustomers(path string) ([]ledger.Customer, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("customers: %w", err)
	}
	if err := textenc.Check(data, true); err != nil {
		return nil, fmt.Errorf("customers %s: %w", path, err)
	}
	r := csv.NewReader(bytes.NewReader(textenc.StripBOM(data)))
	header, err := r.Read()
	if err != nil {
		return nil, fmt.Errorf("customers %s: line 1: %v", path, err)
	}
	col := map[string]int{}
	for i, h := range header {
		col[strings.ToLower(strings.TrimSpace(h))] = i
	}
	if _, ok := col["customer_id"]; !ok {
		if i, ok := col["id"]; ok {
			col["customer_id"] = i
		}
	}
	for _, need := range []string{"customer_id", "email"} {
		if _, ok := col[need]; !ok {
			return nil, fmt.Errorf("customers %s: line 1: no %s column (have %s)", path, need, strings.Join(header, ", "))
		}
	}
	field := func(rec []string, name string) string {
		if i, ok := col[name]; ok && i < len(rec) {
			return strings.TrimSpace(rec[i])
		}
		return ""
	}
	var out []ledger.Customer
	for {
		rec, err := r.Read()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("customers %s: %v", path, err)
		}
		line, _ := r.FieldPos(0)
		c := ledger.Customer{ID: field(rec, "customer_id"), Email: field(rec, "email"), Consent: field(rec, "consent")}
		if c.ID == "" {
			return nil, fmt.Errorf("customers %s: line %d: customer_id is empty", path, line)
		}
		switch strings.ToLower(field(rec, "suppressed")) {
		case "", "no", "false", "0":
		case "yes", "true", "1":
			c.Suppressed = true
		default:
			return nil, fmt.Errorf("customers %s: line %d: suppressed %q is not yes or no", path, line, field(rec, "suppressed"))
		}
		out = append(out, c)
	}
}

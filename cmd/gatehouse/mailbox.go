package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"gatehouse/testmailbox"
)

func init() { subcommands = append(subcommands, newMailboxCmd) }

// mailboxAPIEnv names the mailbox API when --api is not given.
const mailboxAPIEnv = "GATEHOUSE_MAILBOX_API"

// mailboxTokenEnv holds the API token when --token is not given.
const mailboxTokenEnv = "GATEHOUSE_MAILBOX_TOKEN"

// Addresses `mailbox serve` listens on unless told otherwise; fixed so that
// a README example and a second terminal agree without reading the output.
const (
	defaultMailboxSMTP = "127.0.0.1:2525"
	defaultMailboxHTTP = "127.0.0.1:8025"
)

func newMailboxCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "mailbox <serve|list|count|clear|stats|fault>",
		Short: "Run the SMTP test mailbox or query a running one",
		Long: `mailbox runs a real SMTP server that stores every message it accepts,
flags a second arrival for one action key as a duplicate, and injects faults
(see "mailbox fault --help"). The other verbs query a running mailbox through
its HTTP API, given by --api or $` + mailboxAPIEnv + `.`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageErr("mailbox: missing verb (serve, list, count, clear, stats, fault or end-holds)")
			}
			return unknownVerb(cmd, args[0])
		},
	}
	cmd.AddCommand(newMailboxServeCmd(), newMailboxListCmd(), newMailboxCountCmd(),
		newMailboxClearCmd(), newMailboxStatsCmd(), newMailboxFaultCmd(), newMailboxEndHoldsCmd())
	return cmd
}

func newMailboxServeCmd() *cobra.Command {
	var (
		cfg     testmailbox.Config
		faults  []string
		tlsMode string
	)
	cmd := &cobra.Command{
		Use:   "serve [--smtp ADDR] [--http ADDR] [--db PATH] [--tls MODE] [--fault SPEC]…",
		Short: "Run the test mailbox until interrupted",
		Long: `serve listens for SMTP and for its HTTP API on loopback, prints both
addresses and the target to give "gate send", and runs until SIGINT or SIGTERM.
Without --db, messages are kept in memory.

The HTTP address also serves a read-only web page at /: the messages,
newest first, with their action key, recipient, subject and time, each
duplicate arrival of an action key marked; one message's header fields and
text; new arrivals appear as they are stored.

STARTTLS is offered with a certificate made at start (or --tls-cert and
--tls-key); the printed target names it (ca=PATH), so a send copied from it
verifies this mailbox. AUTH is taken only after STARTTLS unless
--allow-insecure-auth. A listen address that is not loopback is refused
unless --allow-remote, which requires an API token for every PUT and
DELETE (--api-token, or one generated and printed).

The HTTP API and web page answer only requests addressed to the mailbox's
own names (any other Host header gets 421, so a web page cannot rebind its
own name to this address): localhost and the loopback addresses when it
listens there, the address it listens on, the names in its TLS certificate,
and each --http-name (a name it is reached by through a proxy or tunnel).

Fault specs (repeat --fault for several):
  accept_then_drop[:count=N][:to=ADDR][:p=P][:seed=S]
  delay_reply=DURATION[…same fields]
  reject_temporary[…] | reject_permanent[…]
  down[=DURATION]
  hold_354=DURATION[…] | stall_body=DURATION[…] | hold_then_store=DURATION[…]
(see "mailbox fault --help" for what each does)`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			for _, s := range faults {
				f, err := testmailbox.ParseFault(s)
				if err != nil {
					return usageErr("--fault: %v", err)
				}
				cfg.Faults = append(cfg.Faults, f)
			}
			mode, err := testmailbox.ParseTLSMode(tlsMode)
			if err != nil {
				return usageErr("--tls: %v", err)
			}
			cfg.TLS = mode
			return serveMailbox(cmd.Context(), cmd.OutOrStdout(), cfg)
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.SMTPAddr, "smtp", defaultMailboxSMTP, "SMTP listen `address` (port 0: any free port)")
	f.StringVar(&cfg.HTTPAddr, "http", defaultMailboxHTTP, "HTTP API and web page listen `address` (port 0: any free port)")
	f.StringVar(&cfg.DBPath, "db", "", "SQLite `file` to keep messages in (default: memory)")
	f.StringArrayVar(&faults, "fault", nil, "inject a fault, e.g. accept_then_drop:count=1 (repeatable)")
	f.Int64Var(&cfg.MaxMessageBytes, "max-size", testmailbox.DefaultMaxMessageBytes, "largest message in `bytes` (larger: 552)")
	f.IntVar(&cfg.MaxRecipients, "max-recipients", testmailbox.DefaultMaxRecipients, "most recipients per message (more: 452)")
	f.BoolVar(&cfg.RequireAuth, "auth", false, "require AUTH PLAIN as "+testmailbox.TestUsername+"/"+testmailbox.TestPassword)
	f.StringVar(&tlsMode, "tls", string(testmailbox.TLSOffer), "STARTTLS: off, offer or require (`mode`)")
	f.StringVar(&cfg.TLSCertFile, "tls-cert", "", "PEM certificate `file` (default: one made at start)")
	f.StringVar(&cfg.TLSKeyFile, "tls-key", "", "PEM key `file` of --tls-cert")
	f.BoolVar(&cfg.AllowInsecureAuth, "allow-insecure-auth", false, "take AUTH before STARTTLS, in clear text")
	f.BoolVar(&cfg.AllowRemote, "allow-remote", false, "allow listen addresses that are not loopback (requires an API token)")
	f.StringVar(&cfg.APIToken, "api-token", "", "`token` every PUT and DELETE must carry (default with --allow-remote: generated)")
	f.StringArrayVar(&cfg.HTTPNames, "http-name", nil, "a host `name` the HTTP API and web page answer to besides their own (repeatable; any other Host gets 421)")
	return cmd
}

// serveMailbox runs until ctx ends or SIGINT/SIGTERM arrives, then closes
// the mailbox (which also flushes and closes the store).
func serveMailbox(ctx context.Context, out io.Writer, cfg testmailbox.Config) error {
	if ctx == nil {
		ctx = context.Background()
	}
	if cfg.MaxMessageBytes <= 0 || cfg.MaxRecipients <= 0 {
		return usageErr("--max-size and --max-recipients must be positive")
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	given := cfg.APIToken != ""
	m, err := testmailbox.Start(ctx, cfg)
	if errors.Is(err, testmailbox.ErrNotLoopback) || errors.Is(err, testmailbox.ErrBadConfig) {
		return usageErr("mailbox serve: %v", err)
	}
	if err != nil {
		return fmt.Errorf("mailbox serve: %w", err)
	}
	fmt.Fprintf(out, "smtp    %s\n", m.SMTPAddr())
	fmt.Fprintf(out, "http    %s\n", m.APIURL())
	fmt.Fprintf(out, "web     %s/ (read-only: what arrived, newest first, following new arrivals)\n", m.APIURL())
	fmt.Fprintf(out, "target  %s\n", m.Target())
	if m.CAFile() != "" {
		fmt.Fprintf(out, "tls     %s (certificate %s)\n", m.TLS(), m.CAFile())
	}
	switch {
	case given:
		fmt.Fprintf(out, "token   as given with --api-token; PUT and DELETE need it\n")
	case m.APIToken() != "":
		fmt.Fprintf(out, "token   %s (generated; PUT and DELETE need it: --token or $%s)\n", m.APIToken(), mailboxTokenEnv)
	}
	for _, f := range cfg.Faults {
		fmt.Fprintf(out, "fault   %s\n", f)
	}
	<-ctx.Done()
	fmt.Fprintln(out, "stopping")
	if err := m.Close(); err != nil {
		return fmt.Errorf("mailbox serve: %w", err)
	}
	return nil
}

// mailboxAPIFlag adds --api and --token to a query verb and returns a
// function that opens the client (a usage error when the URL is missing or
// malformed).
func mailboxAPIFlag(cmd *cobra.Command) func() (*testmailbox.Client, error) {
	var api, token string
	cmd.Flags().StringVar(&api, "api", "", "mailbox HTTP API `URL`, e.g. http://"+defaultMailboxHTTP+" (default $"+mailboxAPIEnv+")")
	cmd.Flags().StringVar(&token, "token", "", "the mailbox's API `token`, for a mailbox that has one (default $"+mailboxTokenEnv+")")
	return func() (*testmailbox.Client, error) {
		if token == "" {
			token = os.Getenv(mailboxTokenEnv)
		}
		if api == "" {
			api = os.Getenv(mailboxAPIEnv)
		}
		if api == "" {
			return nil, usageErr("mailbox %s: --api URL is required (or set $%s)", cmd.Name(), mailboxAPIEnv)
		}
		c, err := testmailbox.NewClient(api, nil)
		if err != nil {
			return nil, usageErr("--api: %v", err)
		}
		return c.WithToken(token), nil
	}
}

func mailboxFilterFlags(cmd *cobra.Command, f *testmailbox.Filter) {
	fl := cmd.Flags()
	fl.StringVar(&f.To, "to", "", "only messages to this envelope `recipient`")
	fl.StringVar(&f.ActionKey, "action-key", "", "only messages with this action `key`")
	fl.StringVar(&f.MessageID, "message-id", "", "only messages with this Message-ID")
}

// mailboxCtx bounds one API call so a hung mailbox cannot hang the CLI.
func mailboxCtx(cmd *cobra.Command) (context.Context, context.CancelFunc) {
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	return context.WithTimeout(ctx, 30*time.Second)
}

func newMailboxListCmd() *cobra.Command {
	var (
		f      testmailbox.Filter
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "list --api URL [--to ADDR] [--action-key KEY] [--limit N] [--offset N] [--json]",
		Short: "List arrived messages, oldest first",
		Args:  cobra.NoArgs,
	}
	open := mailboxAPIFlag(cmd)
	mailboxFilterFlags(cmd, &f)
	cmd.Flags().IntVar(&f.Limit, "limit", testmailbox.DefaultPageLimit, "at most `N` messages")
	cmd.Flags().IntVar(&f.Offset, "offset", 0, "skip the `N` oldest matches")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the API's JSON")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if f.Limit < 1 || f.Limit > testmailbox.MaxPageLimit {
			return usageErr("--limit %d: want 1 to %d", f.Limit, testmailbox.MaxPageLimit)
		}
		if f.Offset < 0 {
			return usageErr("--offset %d: must not be negative", f.Offset)
		}
		return mailboxCall(cmd, open, asJSON, func(c *testmailbox.Client, ctx context.Context) (testmailbox.MessagesResponse, error) {
			return c.List(ctx, f)
		}, printMailboxMessages)
	}
	return cmd
}

// mailboxCall opens the client, makes one bounded API call and prints its
// result: the API's JSON with asJSON, text otherwise. call takes the client
// first so that method expressions such as (*testmailbox.Client).Stats fit.
func mailboxCall[T any](cmd *cobra.Command, open func() (*testmailbox.Client, error), asJSON bool,
	call func(*testmailbox.Client, context.Context) (T, error), text func(io.Writer, T) error) error {
	c, err := open()
	if err != nil {
		return err
	}
	ctx, cancel := mailboxCtx(cmd)
	defer cancel()
	v, err := call(c, ctx)
	if err != nil {
		return err
	}
	if asJSON {
		return mailboxJSON(cmd.OutOrStdout(), v)
	}
	return text(cmd.OutOrStdout(), v)
}

func mailboxJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// printMailboxMessages writes one aligned row per message and a line saying how
// many of the total are shown, so a page is never mistaken for everything.
func printMailboxMessages(w io.Writer, r testmailbox.MessagesResponse) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tRECEIVED\tTO\tSUBJECT\tACTION KEY\tATTEMPT\tDUPLICATE")
	for _, m := range r.Messages {
		dup := ""
		if m.Duplicate {
			dup = "duplicate"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", m.ID, m.ReceivedAt.Local().Format("15:04:05.000"),
			strings.Join(m.To, ","), mailboxClip(m.Subject, 40), mailboxDash(m.ActionKey), mailboxDash(m.Attempt), dup)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "%d of %d messages\n", len(r.Messages), r.Total)
	return err
}

func mailboxClip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

func mailboxDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func newMailboxCountCmd() *cobra.Command {
	var f testmailbox.Filter
	cmd := &cobra.Command{
		Use:   "count --api URL [--to ADDR] [--action-key KEY] [--message-id ID]",
		Short: "Print how many messages arrived (a COUNT, never a page)",
		Args:  cobra.NoArgs,
	}
	open := mailboxAPIFlag(cmd)
	mailboxFilterFlags(cmd, &f)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		return mailboxCall(cmd, open, false, func(c *testmailbox.Client, ctx context.Context) (int, error) {
			return c.Count(ctx, f)
		}, func(w io.Writer, n int) error {
			_, err := fmt.Fprintln(w, n)
			return err
		})
	}
	return cmd
}

func newMailboxClearCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "clear --api URL",
		Short: "Delete every message, forget every action key and reset the stats",
		Args:  cobra.NoArgs,
	}
	open := mailboxAPIFlag(cmd)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		return mailboxCall(cmd, open, false, (*testmailbox.Client).Clear, func(w io.Writer, n int) error {
			_, err := fmt.Fprintf(w, "deleted %d messages\n", n)
			return err
		})
	}
	return cmd
}

func newMailboxEndHoldsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "end-holds --api URL",
		Short: "End every hold of a timed fault now, as if its time had passed",
		Long: `end-holds ends every hold in force now of hold_354, stall_body,
hold_then_store and delay_reply, as if its time had passed: a held 354 is
sent, a stalled body is read on, a held message is stored, a delayed reply
is given. Holds that begin afterwards run their full time, so a fault with
a long duration holds a session until you end it here.`,
		Args: cobra.NoArgs,
	}
	open := mailboxAPIFlag(cmd)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		return mailboxCall(cmd, open, false, (*testmailbox.Client).EndHolds, func(w io.Writer, n int) error {
			_, err := fmt.Fprintf(w, "ended %d hold(s)\n", n)
			return err
		})
	}
	return cmd
}

func newMailboxStatsCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "stats --api URL [--json]",
		Short: "Print the mailbox's counters",
		Args:  cobra.NoArgs,
	}
	open := mailboxAPIFlag(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the API's JSON")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		return mailboxCall(cmd, open, asJSON, (*testmailbox.Client).Stats, printMailboxStats)
	}
	return cmd
}

func printMailboxStats(out io.Writer, st testmailbox.Stats) error {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "epoch\t%s\nstored\t%d\naccepted\t%d\nrefused\t%d\ndropped\t%d\nduplicates\t%d (on %d action keys)\ndown\t%v\nheld now\t%d\nsessions open\t%d\n",
		mailboxDash(st.Epoch), st.Stored, st.Accepted, st.Refused, st.Dropped, st.Duplicates, st.DuplicateActionKeys, st.Down, st.Held, st.Sessions)
	for _, k := range testmailbox.FaultKinds {
		fmt.Fprintf(tw, "fired %s\t%d\n", k, st.FaultsFired[k])
	}
	return tw.Flush()
}

func newMailboxFaultCmd() *cobra.Command {
	var clear, asJSON bool
	cmd := &cobra.Command{
		Use:   "fault --api URL [--clear] [SPEC…]",
		Short: "Show, replace or clear the faults of a running mailbox",
		Long: `fault with specs replaces every fault of the running mailbox; with
--clear it removes them (and brings a downed listener back); with neither it
shows the faults in force. Spec format:

  kind[=DURATION][:count=N][:to=ADDR][:p=P][:seed=S]

  accept_then_drop   store, then close the connection without a reply
  delay_reply=D      store, then reply after D (e.g. 3s)
  reject_temporary   reply 451, store nothing
  reject_permanent   reply 550, store nothing
  down[=D]           refuse connections for D, or until cleared
  hold_354=D         answer DATA with 354 only after D; nothing stored meanwhile
  stall_body=D       stop reading after the message's first line for D, then
                     store and reply as normal
  hold_then_store=D  read the whole message, store nothing for D, then store
                     it and reply 250 (stored even if the sender has gone)

count=N fires on the next N matching messages; to=ADDR matches one envelope
recipient; p=P fires with probability P, drawn from a generator seeded by S.`,
		Args: cobra.ArbitraryArgs,
	}
	open := mailboxAPIFlag(cmd)
	cmd.Flags().BoolVar(&clear, "clear", false, "remove every fault")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the API's JSON")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if clear && len(args) > 0 {
			return usageErr("mailbox fault: give specs or --clear, not both")
		}
		var faults []testmailbox.Fault
		for _, s := range args {
			f, err := testmailbox.ParseFault(s)
			if err != nil {
				return usageErr("%v", err)
			}
			faults = append(faults, f)
		}
		return mailboxCall(cmd, open, asJSON, func(c *testmailbox.Client, ctx context.Context) (testmailbox.FaultsResponse, error) {
			if clear || len(faults) > 0 {
				return c.SetFaults(ctx, faults)
			}
			return c.Faults(ctx)
		}, func(w io.Writer, r testmailbox.FaultsResponse) error { return printMailboxFaults(w, r, time.Now()) })
	}
	return cmd
}

// printMailboxFaults writes each fault with what it did and how long it
// lasts: a count left, an end time, or until cleared.
func printMailboxFaults(w io.Writer, r testmailbox.FaultsResponse, now time.Time) error {
	if len(r.Faults) == 0 {
		fmt.Fprintln(w, "no faults")
	}
	for _, f := range r.Faults {
		fmt.Fprintf(w, "%s  (fired %d, %s)\n", f.Fault, f.Fired, faultLasts(f, now))
	}
	if r.Down {
		fmt.Fprintln(w, "smtp listener is down")
	}
	return nil
}

func faultLasts(f testmailbox.FaultStatus, now time.Time) string {
	switch {
	case !f.Until.IsZero():
		left := max(f.Until.Sub(now), 0).Round(100 * time.Millisecond)
		return fmt.Sprintf("ends %s, in %s", f.Until.Local().Format("15:04:05"), left)
	case f.Remaining >= 0:
		return fmt.Sprintf("%d left", f.Remaining)
	}
	return "until cleared"
}

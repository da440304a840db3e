package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"gatehouse/destination/registry"
	"gatehouse/review"
	"gatehouse/tui"
)

func init() { subcommands = append(subcommands, newReviewCmd) }

// reviewFlags are review's command line.
type reviewFlags struct {
	path, actor, format, since, until, out string
	stop                                   int
}

func newReviewCmd() *cobra.Command {
	var f reviewFlags
	cmd := &cobra.Command{
		Use:   "review",
		Short: "Review a ledger's history: timeline, rates, the state at a stop, a report",
		Long: `review reads a ledger's history after an incident. Without --format it opens
the review screen: a timeline of every history line grouped per action,
rates per hour or day, and every action's state at a stop (committed, in
flight, approved but not started, only proposed, then held, denied,
cancelled, failed). It only reads until the reviewer switches into
operating mode, which is recorded in the history.

With --format md or json it writes the same as a report: the window, who
stopped and why, the buckets, unknown outcomes with their evidence, manual
overrides, measures per day.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error { return runReview(f, c.OutOrStdout()) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.path, "ledger", "", "ledger file (default $"+ledgerEnv+")")
	fl.StringVar(&f.actor, "as", defaultActor(), "who reviews, recorded if they switch into operating mode")
	fl.StringVar(&f.format, "format", "", "write a report instead of opening the screen: md or json")
	fl.StringVar(&f.since, "since", "", "report: the window's start (UTC: 2006-01-02, 2006-01-02 15:04[:05] or RFC 3339)")
	fl.StringVar(&f.until, "until", "", "report: the window's end, exclusive (same forms as --since)")
	fl.IntVar(&f.stop, "stop", 0, "report: the stop to reconstruct, counted from 1 over the whole history (default: the last in the window)")
	fl.StringVarP(&f.out, "output", "o", "", "report: write to FILE instead of stdout")
	return cmd
}

func runReview(f reviewFlags, stdout io.Writer) error {
	if f.path == "" {
		f.path = os.Getenv(ledgerEnv)
	}
	if f.path == "" {
		return usageErr("review needs --ledger PATH (or $%s)", ledgerEnv)
	}
	opts, err := f.options()
	if err != nil {
		return err
	}
	if f.format == "" {
		return runReviewScreen(f)
	}
	l, err := openForReading(f.path)
	if err != nil {
		return err
	}
	defer l.Close()
	ctx := context.Background()
	h, err := review.Load(ctx, l)
	if err != nil {
		return err
	}
	r, err := review.Build(ctx, l, h, opts)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	if f.format == "json" {
		err = r.WriteJSON(&buf)
	} else {
		err = r.WriteMarkdown(&buf)
	}
	if err != nil {
		return err
	}
	if f.out == "" {
		_, err = stdout.Write(buf.Bytes())
		return err
	}
	if err := os.WriteFile(f.out, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	return nil
}

// options checks the flags before the ledger is opened.
func (f reviewFlags) options() (review.Options, error) {
	var o review.Options
	switch f.format {
	case "", "md", "json":
	default:
		return o, usageErr("--format %q: write md or json", f.format)
	}
	if f.format == "" && (f.since != "" || f.until != "" || f.stop != 0 || f.out != "") {
		return o, usageErr("--since, --until, --stop and -o shape a report: add --format md or --format json")
	}
	if f.stop < 0 {
		return o, usageErr("--stop %d: stops are counted from 1", f.stop)
	}
	o.Stop = f.stop
	var err error
	if o.Since, err = moment("--since", f.since); err != nil {
		return o, err
	}
	if o.Until, err = moment("--until", f.until); err != nil {
		return o, err
	}
	if !o.Since.IsZero() && !o.Until.IsZero() && !o.Until.After(o.Since) {
		return o, usageErr("--until must be after --since")
	}
	return o, nil
}

func moment(flag, v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	t, err := tui.ParseMoment(v)
	if err != nil {
		return t, usageErr("%s: %v", flag, err)
	}
	return t, nil
}

// runReviewScreen opens the review read-only; a write (the switch into
// operating mode, then the inspector's operations) opens the ledger for
// writing on demand, as inspect does.
func runReviewScreen(f reviewFlags) error {
	l, err := openInspected(f.path)
	if err != nil {
		return err
	}
	defer l.Close()
	if due := newRecoveryDue(context.Background(), l); due != nil {
		fmt.Fprintf(os.Stderr, "gatehouse: %s\n", due)
	}
	th := tui.NewTheme(tui.NoColor())
	rv := tui.NewReview(th, tui.ReviewConfig{Ledger: l, Actor: f.actor, Records: registry.Records()})
	return tui.Run(tui.NewApp(th, rv))
}

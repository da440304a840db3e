package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"gatehouse/ledger"
	"gatehouse/ledger/answer"
)

func init() { subcommands = append(subcommands, newGateCmd) }

// Exit codes of `gate` verbs beyond exitOK, exitOther and exitUsage. They
// name the refusal so that a workflow in any language can branch on it; see
// docs/cli.md.
const (
	exitDuplicate        = answer.Duplicate        // already sent
	exitInFlight         = answer.InFlight         // another executor holds an attempt right now
	exitDenied           = answer.Denied           // stale state, not the owner, approval stale, cancelled
	exitHeld             = answer.Held             // waits for a person
	exitUnknown          = answer.Unknown          // outcome unknown: reconcile, never resend
	exitStopped          = answer.Stopped          // the stop switch is on
	exitFailed           = answer.Failed           // rejected permanently: retrying cannot help
	exitWrongDestination = answer.WrongDestination // not the approved (or recorded) destination or sender
	exitConsent          = answer.Consent          // a customers import refused: consent not understood, or resubscribes not accepted
	exitNothingToDo      = answer.NothingToDo      // reconcile, resolve: no attempt whose outcome is open
	exitInterrupted      = answer.Interrupted      // SIGINT or SIGTERM ended the verb while it waited; nothing recorded
	exitNotPermitted     = answer.NotPermitted     // a registered ledger: the actor may not do this (recorded)
)

// tokenEnv holds the acting actor's token when --token is not given.
const tokenEnv = "GATEHOUSE_TOKEN"

// ledgerEnv names the ledger when --ledger is not given.
const ledgerEnv = "GATEHOUSE_LEDGER"

// gateOpts are the flags every verb shares.
type gateOpts struct {
	ledgerPath string
	actor      string
	token      string
	json       bool
}

// verbSpec describes one verb of a family (gate, audience): its flags and
// what it does.
type verbSpec struct {
	name, short string
	family      string // set by newVerbFamily
	// actor: the verb acts, so --as is required.
	actor bool
	// readOnly: the verb only reads, so it opens the ledger read-only: it
	// never creates, migrates, recovers or checkpoints it.
	readOnly bool
	flags    func(fs *pflag.FlagSet)
	run      func(ctx context.Context, g *gateRun) (output, error)
}

// gateRun is one invocation of a verb: the shared options and the open ledger.
type gateRun struct {
	gateOpts
	readOnly bool // open the ledger read-only
	l        *ledger.Ledger
	out      io.Writer
	errOut   io.Writer
	in       io.Reader
	// due is set when a read found attempts that recovery would mark.
	due *recoveryDue
	// opened is what opening the ledger asked of its store.
	opened ledger.Activity
	// ctx ends with SIGINT or SIGTERM: opening the ledger waits no longer.
	ctx context.Context
	// open: the verb acted on an open ledger, which took --as on its word.
	openLedger bool
}

// verbObservers maps a ledger location to a func(ledger.Activity) that a
// test registered: it is told, of every verb that opened that ledger, what
// the verb itself (not opening the ledger) asked of its store.
var verbObservers sync.Map

// output is what a verb prints: the same value as JSON with --json, or as
// plain text with aligned columns.
type output interface {
	text(w io.Writer)
}

// verbs in the order help lists them: the life of an action, then
// ownership and presence, then oversight.
var verbs = []func() verbSpec{
	proposeVerb, submitVerb, approveVerb, sendVerb, showVerb, listVerb, historyVerb,
	cancelVerb, correctVerb, holdVerb, releaseHoldVerb, reconcileVerb, resolveVerb,
	claimVerb, takeoverVerb, releaseVerb, viewVerb, leaveVerb, completeVerb, notificationsVerb,
	stopVerb, resumeVerb, metricsVerb,
}

func newGateCmd() *cobra.Command {
	return newVerbFamily("gate", "Drive the gate from a workflow in any language",
		`gate runs one gate operation on a ledger file and exits with a code that
names the result (see docs/cli.md). Every verb takes --ledger PATH (or
$GATEHOUSE_LEDGER) and --json; verbs that act take --as ACTOR.`, verbs)
}

// newVerbFamily builds a command whose verbs share --ledger, --as and --json
// and the exit codes of gate (gate, audience).
func newVerbFamily(family, short, long string, specs []func() verbSpec) *cobra.Command {
	opts := &gateOpts{}
	var names []string
	for _, v := range specs {
		names = append(names, v().name)
	}
	cmd := &cobra.Command{
		Use:   family + " <verb>",
		Short: short,
		Long:  long,
		Args:  cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageErr("%s needs a verb: %s", family, strings.Join(names, ", "))
			}
			return unknownVerb(cmd, args[0])
		},
	}
	pf := cmd.PersistentFlags()
	pf.StringVar(&opts.ledgerPath, "ledger", "", "ledger file (default $"+ledgerEnv+")")
	pf.StringVar(&opts.actor, "as", "", "who acts: a registered actor on a registered ledger, any name on an open one")
	pf.StringVar(&opts.token, "token", "", "the acting actor's token (default $"+tokenEnv+"); never printed")
	pf.BoolVar(&opts.json, "json", false, "print one JSON object instead of text")
	for _, v := range specs {
		spec := v()
		spec.family = family
		cmd.AddCommand(newVerbCmd(opts, spec))
	}
	return cmd
}

// title names the verb in messages: "gate send".
func (s verbSpec) title() string { return verbTitle(s.family + " " + s.name) }

// verbTitle names a verb in messages: "gate send", or a verb of another
// family given in full ("audience send").
func verbTitle(verb string) string {
	if strings.Contains(verb, " ") {
		return verb
	}
	return "gate " + verb
}

func newVerbCmd(opts *gateOpts, spec verbSpec) *cobra.Command {
	cmd := &cobra.Command{
		Use:   spec.name,
		Short: spec.short,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageErr("%s takes flags only, not %q", spec.title(), args[0])
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runVerb(cmd, *opts, spec)
		},
	}
	if spec.flags != nil {
		spec.flags(cmd.Flags())
	}
	return cmd
}

// runVerb checks the shared flags, opens the ledger, runs the verb and
// prints its output; a refusal becomes the exit code that names it.
func runVerb(cmd *cobra.Command, opts gateOpts, spec verbSpec) error {
	if opts.ledgerPath == "" {
		opts.ledgerPath = os.Getenv(ledgerEnv)
	}
	if opts.ledgerPath == "" {
		return usageErr("%s needs --ledger PATH (or $%s)", spec.title(), ledgerEnv)
	}
	if spec.actor && strings.TrimSpace(opts.actor) == "" {
		return usageErr("%s needs --as ACTOR: who acts", spec.title())
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx = ledger.WithToken(ctx, firstNonEmpty(opts.token, os.Getenv(tokenEnv)))
	g := &gateRun{gateOpts: opts, readOnly: spec.readOnly, out: cmd.OutOrStdout(), errOut: cmd.ErrOrStderr(), in: cmd.InOrStdin(), ctx: ctx}
	defer g.close()
	out, err := spec.run(ctx, g)
	if g.l != nil && g.readOnly {
		g.due = newRecoveryDue(ctx, g.l)
	}
	open := spec.actor && g.l != nil && g.l.CheckedOpen()
	var code int
	if err != nil {
		code = exitCode(err)
		if code == exitOther && ctx.Err() != nil && errors.Is(err, context.Canceled) {
			// Ended by SIGINT or SIGTERM while it waited: whatever it was
			// waiting to record was not recorded.
			code, err = exitInterrupted, fmt.Errorf("%w: interrupted while waiting; nothing was recorded", err)
		}
		err = &exitError{code: code, err: err}
		if errors.Is(err, ledger.ErrNotRecorded) && code != exitUnknown || code == exitUsage {
			out = nil // nothing was recorded: there is no state to show
		}
	}
	// A command that failed or was misused acted on no one's word.
	open = open && code != exitUsage && code != exitOther && code != exitInterrupted
	if open && !g.json {
		g.sayOpen()
	}
	g.openLedger = open
	if perr := g.print(out, err, code); perr != nil {
		return errors.Join(err, perr)
	}
	return err
}

// open runs a verb's flag checks in order and opens the ledger only when
// all pass. A nil check is skipped.
func (g *gateRun) open(checks ...func() error) (*ledger.Ledger, error) {
	for _, check := range checks {
		if check == nil {
			continue
		}
		if err := check(); err != nil {
			return nil, err
		}
	}
	return g.ledger()
}

// ledger opens the ledger on first use, so that a usage error found while
// reading the flags never creates a ledger file.
func (g *gateRun) ledger() (*ledger.Ledger, error) {
	if g.l != nil {
		return g.l, nil
	}
	opts, err := ledgerOptions(g.ledgerPath)
	if err != nil {
		return nil, err
	}
	errOut := g.errOut
	opts = append(opts, ledger.WithWaitNotice(func(msg string) { fmt.Fprintf(errOut, "gatehouse: %s\n", msg) }))
	if g.ctx != nil {
		opts = append(opts, ledger.WithContext(g.ctx))
	}
	var l *ledger.Ledger
	if g.readOnly {
		l, err = openForReading(g.ledgerPath, opts...)
	} else {
		l, err = ledger.Open(g.ledgerPath, opts...)
	}
	if err != nil {
		return nil, notRehearsal(err)
	}
	g.l = l
	g.opened = l.Activity()
	return l, nil
}

// openForReading opens the ledger read-only; an older schema names the verb
// that migrates it.
func openForReading(path string, opts ...ledger.Option) (*ledger.Ledger, error) {
	l, err := ledger.OpenReadOnly(path, opts...)
	if errors.Is(err, ledger.ErrNeedsMigration) {
		return nil, fmt.Errorf("%w; run: gatehouse ledger migrate --ledger %s", err, ledger.RedactLocation(path))
	}
	return l, err
}

func (g *gateRun) close() {
	if g.l == nil {
		return
	}
	if observe, ok := verbObservers.Load(g.ledgerPath); ok {
		now := g.l.Activity()
		observe.(func(ledger.Activity))(ledger.Activity{Writes: now.Writes - g.opened.Writes, Reads: now.Reads - g.opened.Reads})
	}
	g.l.Close()
}

// exitCode maps a refusal to the exit code that names it: the one the
// verb chose, else the gate's answer (ledger/answer), which the terminal
// app reports in the same words.
func exitCode(err error) int {
	if ee := (*exitError)(nil); errors.As(err, &ee) {
		return ee.code
	}
	return answer.Code(err)
}

// print writes the verb's output. With --json it is exactly one object
// carrying exit_code (and error on a refusal), so a workflow never has to
// parse stderr; a usage error prints nothing on stdout.
func (g *gateRun) print(out output, err error, code int) error {
	if code == exitUsage && out == nil {
		return nil // like a flag-parsing error: the one line on stderr says it all
	}
	if !g.json {
		if g.due != nil {
			fmt.Fprintf(g.errOut, "gatehouse: %s\n", g.due)
		}
		if out == nil {
			return nil
		}
		tw := tabwriter.NewWriter(g.out, 0, 4, 2, ' ', 0)
		out.text(tw)
		return tw.Flush()
	}
	obj := []byte("{}")
	if out != nil {
		var merr error
		if obj, merr = json.Marshal(out); merr != nil {
			return fmt.Errorf("encode output: %w", merr)
		}
	}
	extra := map[string]any{"exit_code": code}
	if g.openLedger {
		extra["open_ledger"] = true
	}
	if err != nil {
		extra["error"] = err.Error()
	}
	if g.due != nil {
		extra["recovery_due"] = g.due
	}
	tail, _ := json.Marshal(extra)
	_, werr := fmt.Fprintf(g.out, "%s\n", appendFields(obj, tail))
	return werr
}

// appendFields merges two encoded JSON objects, keeping the verb's field
// order first.
func appendFields(obj, tail []byte) []byte {
	obj = bytes.TrimSuffix(bytes.TrimSpace(obj), []byte("}"))
	tail = bytes.TrimPrefix(tail, []byte("{"))
	if len(bytes.TrimSpace(obj)) > 1 {
		obj = append(obj, ',')
	}
	return append(obj, tail...)
}

// sayOpen says, once per command, that the ledger took --as on its word:
// on an open ledger any name acts. With --json it is the object's
// open_ledger field instead.
func (g *gateRun) sayOpen() {
	fmt.Fprintf(g.errOut, "gatehouse: this ledger is open: --as %s was not checked (gatehouse actors require registers who may do what)\n", g.actor)
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

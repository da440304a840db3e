package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"gatehouse/destination/registry"
	"gatehouse/ledger"
)

func init() { subcommands = append(subcommands, newLedgerCmd) }

// ledgerVerbs are the verbs that look after the ledger file itself.
var ledgerVerbs = []string{"backup", "restore", "mark-restored", "check", "migrate", "recover"}

func newLedgerCmd() *cobra.Command {
	var path string
	cmd := &cobra.Command{
		Use:   "ledger <verb>",
		Short: "Back up, restore, check, migrate or recover a ledger file",
		Long: `ledger looks after the ledger file: backup takes a consistent copy while
workflows keep writing, restore puts a backup in place (refused while any
process has the ledger open, and over newer history unless --discard-newer),
mark-restored tells a ledger put back by other means (a hand copy, a snapshot,
pg_restore) that it is one, check verifies the file and the ledger's
invariants and names its late evidence (with --records it first reads the
destinations' records of attempts settled as not arrived again), migrate
applies pending schema migrations, and recover marks attempts whose executor
is gone as unknown. A restored ledger looks every action that had not ended
up at its destination before its first send. A backup copied into place
refuses every write until it is restored or marked restored. Exit codes: 0
done (check: no violation; late evidence is a finding, not a violation), 1 a
failure, a violation, or records that check --records could not read, 2
usage, a restore refused, or a write to a backup. See docs/RELIABILITY.md
before copying a ledger by hand.`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageErr("ledger needs a verb: %s", strings.Join(ledgerVerbs, ", "))
			}
			return unknownVerb(cmd, args[0])
		},
	}
	cmd.PersistentFlags().StringVar(&path, "ledger", "", "ledger file (default $"+ledgerEnv+")")
	ledgerPath := func(verb string) (string, error) {
		if path == "" {
			path = os.Getenv(ledgerEnv)
		}
		if path == "" {
			return "", usageErr("ledger %s needs --ledger PATH (or $%s)", verb, ledgerEnv)
		}
		return path, nil
	}
	cmd.AddCommand(ledgerBackupCmd(ledgerPath), ledgerRestoreCmd(ledgerPath), ledgerMarkRestoredCmd(ledgerPath), ledgerCheckCmd(ledgerPath),
		ledgerMigrateCmd(ledgerPath), ledgerRecoverCmd(ledgerPath))
	return cmd
}

// ledgerVerb is one `ledger` verb: flags only, and an interruptible context.
func ledgerVerb(name, short string, run func(ctx context.Context, cmd *cobra.Command) error) *cobra.Command {
	return &cobra.Command{
		Use:   name,
		Short: short,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageErr("ledger %s takes flags only, not %q", name, args[0])
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return run(ctx, cmd)
		},
	}
}

func ledgerBackupCmd(ledgerPath func(string) (string, error)) *cobra.Command {
	var to, actor, token string
	var force bool
	cmd := ledgerVerb("backup", "Write a consistent copy of the ledger while workflows keep writing", func(ctx context.Context, cmd *cobra.Command) error {
		path, err := ledgerPath("backup")
		if err != nil {
			return err
		}
		if to == "" {
			return usageErr("ledger backup needs --to FILE")
		}
		// A backup before a migration is what an operator should take, so
		// an older schema is copied as it is.
		l, err := openForReading(path, ledger.WithOlderSchema())
		if err != nil {
			return err
		}
		defer l.Close()
		// Only read: a refusal is not written to the history.
		if err := l.Authorize(withToken(ctx, token), actor, ledger.VerbBackup); err != nil {
			return notPermitted(err)
		}
		info, err := l.Backup(ctx, to, force)
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("%w; give --force to replace it", err)
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(cmd.OutOrStdout(), "backed up %s to %s: %s, %s, %d bytes; generation %d, taken at history line %d\n", path, info.Path,
			plural(info.Actions, "action", "actions"), plural(info.Events, "history event", "history events"), info.Bytes, info.Generation, info.Point)
		return nil
	})
	cmd.Flags().StringVar(&to, "to", "", "the backup file to write (refused if it exists, unless --force)")
	cmd.Flags().BoolVar(&force, "force", false, "replace an existing backup file")
	cmd.Flags().StringVar(&actor, "as", "", "who backs up (an admin, on a registered ledger)")
	cmd.Flags().StringVar(&token, "token", "", "the actor's token (default $"+tokenEnv+")")
	return cmd
}

// withToken is ctx carrying the token given, or $GATEHOUSE_TOKEN.
func withToken(ctx context.Context, token string) context.Context {
	return ledger.WithToken(ctx, firstNonEmpty(token, os.Getenv(tokenEnv)))
}

// notPermitted gives a refusal by the permission table its exit code.
func notPermitted(err error) error {
	if errors.Is(err, ledger.ErrNotPermitted) {
		return &exitError{code: exitNotPermitted, err: err}
	}
	return err
}

func ledgerRestoreCmd(ledgerPath func(string) (string, error)) *cobra.Command {
	var from, actor, reason, token string
	var discard bool
	cmd := ledgerVerb("restore", "Replace the ledger with a backup (refused while any process has it open, or over newer history)", func(ctx context.Context, cmd *cobra.Command) error {
		path, err := ledgerPath("restore")
		if err != nil {
			return err
		}
		if from == "" {
			return usageErr("ledger restore needs --from FILE")
		}
		// Whoever may replace the ledger is the ledger's to say: its
		// admins, not the backup's.
		if err := authorizeOn(ctx, path, withToken(ctx, token), actor, ledger.VerbRestore); err != nil {
			return err
		}
		info, err := ledger.RestoreWith(ctx, path, from, ledger.RestoreOptions{Actor: actor, Reason: reason, DiscardNewer: discard})
		if errors.Is(err, ledger.ErrNewerHistory) {
			return &exitError{code: exitUsage, err: err}
		}
		if err != nil {
			return err
		}
		out := cmd.OutOrStdout()
		fmt.Fprintf(out, "restored %s from %s: %s, schema version %d; generation %d begins\n", path, from,
			plural(info.Actions, "action", "actions"), info.SchemaVersion, info.Mark.Generation)
		if !info.Discarded.Empty() {
			fmt.Fprintf(out, "discarded: %s\n", info.Discarded)
		}
		printRestoreMark(out, info.Mark)
		return nil
	})
	cmd.Flags().StringVar(&from, "from", "", "the backup to restore (a file written by ledger backup)")
	cmd.Flags().BoolVar(&discard, "discard-newer", false, "replace a ledger that holds history past the backup's point (its sends are then unknown to the gate: see docs/RELIABILITY.md)")
	cmd.Flags().StringVar(&actor, "as", "", "who restores (recorded in the history; an admin, on a registered ledger)")
	cmd.Flags().StringVar(&reason, "reason", "", "why (recorded in the history)")
	cmd.Flags().StringVar(&token, "token", "", "the actor's token (default $"+tokenEnv+")")
	return cmd
}

// authorizeOn checks, on the ledger at path if there is one, that actor
// may do verb. It reads, so a permitted restore leaves the ledger's bytes
// as they were until it runs; only a refusal opens the ledger for writing,
// to record it. The ledger is closed again before the verb runs (a restore
// refuses a ledger any process holds open).
func authorizeOn(ctx context.Context, path string, tokenCtx context.Context, actor string, verb ledger.Verb) error {
	if !ledger.IsPostgres(path) {
		if _, err := os.Stat(path); err != nil {
			return nil // nothing to replace, nobody to ask
		}
	}
	r, err := ledger.OpenReadOnly(path, ledger.WithOlderSchema(), ledger.WithContext(ctx))
	if err != nil {
		return nil // the restore itself says what is wrong with it
	}
	ok, _, err := r.Permitted(tokenCtx, actor, verb)
	r.Close()
	if err != nil || ok {
		return err
	}
	l, err := ledger.Open(path, ledger.RequireExisting(), ledger.WithoutRecovery(), ledger.WithContext(ctx))
	if err != nil {
		return err
	}
	defer l.Close()
	return notPermitted(l.Authorize(tokenCtx, actor, verb))
}

func printRestoreMark(out io.Writer, m ledger.RestoreMark) {
	fmt.Fprintf(out, "unverified: %s and %s; each is looked up at its destination before its first send\n",
		plural(m.UnverifiedActions, "action", "actions"), plural(m.UnverifiedReleases, "audience release", "audience releases"))
}

// ledgerMarkRestoredCmd is for a ledger put back by anything but ledger
// restore: the gate cannot tell a hand copy of a live ledger from the
// original, and refuses every write to a backup copied into place until
// it is marked.
func ledgerMarkRestoredCmd(ledgerPath func(string) (string, error)) *cobra.Command {
	var actor, reason, token string
	cmd := ledgerVerb("mark-restored", "Tell a ledger put back by hand, a snapshot or pg_restore that it is a restored copy", func(ctx context.Context, cmd *cobra.Command) error {
		path, err := ledgerPath("mark-restored")
		if err != nil {
			return err
		}
		if actor == "" {
			return usageErr("ledger mark-restored needs --as NAME (recorded in the history)")
		}
		if strings.TrimSpace(reason) == "" {
			return usageErr("ledger mark-restored needs --reason TEXT (recorded in the history)")
		}
		if !ledger.IsPostgres(path) {
			if err := ledger.RefuseInUse(path); err != nil {
				return err
			}
		}
		l, err := ledger.Open(path, ledger.ToMarkRestored())
		if err != nil {
			return err
		}
		defer l.Close()
		m, err := l.MarkRestored(withToken(ctx, token), actor, reason)
		if err != nil {
			return notPermitted(err)
		}
		fmt.Fprintf(cmd.OutOrStdout(), "marked %s restored: generation %d begins\n", ledger.RedactLocation(path), m.Generation)
		printRestoreMark(cmd.OutOrStdout(), m)
		return nil
	})
	cmd.Flags().StringVar(&actor, "as", "", "who says so (recorded in the history; an admin, on a registered ledger)")
	cmd.Flags().StringVar(&reason, "reason", "", "what was put back, and from when (recorded in the history)")
	cmd.Flags().StringVar(&token, "token", "", "the actor's token (default $"+tokenEnv+")")
	return cmd
}

// ledgerCheckView is what ledger check prints with --json.
type ledgerCheckView struct {
	Ledger     string          `json:"ledger"`
	OK         bool            `json:"ok"`
	Violations []violationView `json:"violations"`
	// Findings are facts about the world the ledger recorded (late
	// evidence, actions that arrived twice): not violations, and they
	// stay, as the history does.
	Findings    []findingView `json:"findings"`
	Records     *recordsView  `json:"records,omitempty"`
	RecoveryDue *recoveryDue  `json:"recovery_due,omitempty"`
}

type violationView struct {
	Rule   string `json:"rule"`
	Detail string `json:"detail"`
}

type findingView struct {
	Rule    string `json:"rule"`
	Key     string `json:"key"`
	Attempt int    `json:"attempt,omitempty"`
	Detail  string `json:"detail"`
}

// recordsView is what check --records read again.
type recordsView struct {
	Read       int              `json:"read"`
	NoRecords  int              `json:"no_records"`
	Found      int              `json:"found"`
	Unreadable []unreadableView `json:"unreadable"`
}

type unreadableView struct {
	Key     string `json:"key"`
	Attempt int    `json:"attempt"`
	Error   string `json:"error"`
}

func ledgerCheckCmd(ledgerPath func(string) (string, error)) *cobra.Command {
	var asJSON, withRecords bool
	cmd := ledgerVerb("check", "Verify the file's integrity and the ledger's invariants, and name its late evidence", func(ctx context.Context, cmd *cobra.Command) error {
		path, err := ledgerPath("check")
		if err != nil {
			return err
		}
		// Reading the records again may record late evidence: only then is
		// the ledger opened for writing (without the recovery pass, which
		// is ledger recover's).
		var l *ledger.Ledger
		if withRecords {
			l, err = ledger.Open(path, ledger.RequireExisting(), ledger.WithoutRecovery())
		} else {
			l, err = openForReading(path)
		}
		if err != nil {
			return err
		}
		defer l.Close()
		var records *recordsView
		if withRecords {
			rc, err := l.RecheckRecords(ctx, registry.Records(), "gatehouse")
			if err != nil {
				return fmt.Errorf("ledger check %s: %w", path, err)
			}
			records = &recordsView{Read: rc.Read, NoRecords: rc.NoRecords, Found: len(rc.Found), Unreadable: []unreadableView{}}
			for _, u := range rc.Unreadable {
				records.Unreadable = append(records.Unreadable, unreadableView{Key: u.Key, Attempt: u.Attempt, Error: u.Err.Error()})
			}
		}
		vs, err := l.Check(ctx)
		if err != nil {
			return err
		}
		fs, err := l.Findings(ctx)
		if err != nil {
			return err
		}
		v := ledgerCheckView{Ledger: ledger.RedactLocation(path), OK: len(vs) == 0, Violations: []violationView{}, Findings: []findingView{},
			Records: records, RecoveryDue: newRecoveryDue(ctx, l)}
		for _, x := range vs {
			v.Violations = append(v.Violations, violationView{Rule: x.Rule, Detail: x.Detail})
		}
		for _, f := range fs {
			v.Findings = append(v.Findings, findingView{Rule: f.Rule, Key: f.Key, Attempt: f.Attempt, Detail: f.Detail})
		}
		if err := v.print(cmd.OutOrStdout(), cmd.ErrOrStderr(), asJSON); err != nil {
			return err
		}
		if !v.OK {
			return &exitError{code: exitOther, err: fmt.Errorf("ledger check %s: %s", path, plural(len(vs), "violation", "violations"))}
		}
		if records != nil && len(records.Unreadable) > 0 {
			return &exitError{code: exitOther, err: fmt.Errorf("ledger check %s: the records of %s could not be read; they were not checked",
				path, plural(len(records.Unreadable), "attempt", "attempts"))}
		}
		return nil
	})
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object instead of text")
	cmd.Flags().BoolVar(&withRecords, "records", false,
		"also read again the destination records of every attempt settled as not arrived, and record what arrived after all (writes the history)")
	return cmd
}

func (v ledgerCheckView) print(out, errOut io.Writer, asJSON bool) error {
	if asJSON {
		b, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("encode output: %w", err)
		}
		_, err = fmt.Fprintf(out, "%s\n", b)
		return err
	}
	if v.RecoveryDue != nil {
		fmt.Fprintf(errOut, "gatehouse: %s\n", v.RecoveryDue)
	}
	if r := v.Records; r != nil {
		fmt.Fprintf(out, "records: read again for %s settled as not arrived (%d without records to read); %s arrived after all\n",
			plural(r.Read, "attempt", "attempts"), r.NoRecords, plural(r.Found, "attempt", "attempts"))
		for _, u := range r.Unreadable {
			fmt.Fprintf(out, "unreadable: %s: attempt %d: %s\n", u.Key, u.Attempt, u.Error)
		}
	}
	for _, x := range v.Violations {
		fmt.Fprintf(out, "violation: %s: %s\n", x.Rule, x.Detail)
	}
	for _, f := range v.Findings {
		fmt.Fprintf(out, "finding: %s: %s: %s\n", f.Rule, f.Key, f.Detail)
	}
	if v.OK {
		fmt.Fprintf(out, "ok: %s passes the integrity check, its foreign keys and the ledger's invariants\n", v.Ledger)
		if len(v.Findings) > 0 {
			fmt.Fprintf(out, "%s above: what happened in the world (a customer may have, or has, a message twice), not a fault of the file\n",
				plural(len(v.Findings), "finding", "findings"))
		}
	}
	return nil
}

func ledgerMigrateCmd(ledgerPath func(string) (string, error)) *cobra.Command {
	return ledgerVerb("migrate", "Apply pending schema migrations", func(ctx context.Context, cmd *cobra.Command) error {
		path, err := ledgerPath("migrate")
		if err != nil {
			return err
		}
		from, to, err := ledger.Migrate(ctx, path)
		if err != nil {
			return err
		}
		if from == to {
			fmt.Fprintf(cmd.OutOrStdout(), "%s is at schema version %d: nothing to migrate\n", ledger.RedactLocation(path), to)
			return nil
		}
		fmt.Fprintf(cmd.OutOrStdout(), "migrated %s from schema version %d to %d\n", ledger.RedactLocation(path), from, to)
		return nil
	})
}

func ledgerRecoverCmd(ledgerPath func(string) (string, error)) *cobra.Command {
	return ledgerVerb("recover", "Mark attempts whose executor is gone (or whose lease ran out) as unknown", func(ctx context.Context, cmd *cobra.Command) error {
		path, err := ledgerPath("recover")
		if err != nil {
			return err
		}
		l, err := ledger.Open(path, ledger.RequireExisting(), ledger.WithoutRecovery())
		if err != nil {
			return err
		}
		defer l.Close()
		keys, err := l.Recover(ctx)
		if err != nil {
			return fmt.Errorf("recover %s: %w", ledger.RedactLocation(path), err)
		}
		if len(keys) == 0 {
			fmt.Fprintf(cmd.OutOrStdout(), "nothing to recover in %s\n", ledger.RedactLocation(path))
			return nil
		}
		fmt.Fprintf(cmd.OutOrStdout(), "marked %s unknown: %s\nnothing was re-sent; establish each outcome with gatehouse gate reconcile\n",
			plural(len(keys), "attempt", "attempts"), strings.Join(keys, ", "))
		return nil
	})
}

// recoveryDue is what a read says when attempts wait for the recovery pass:
// they still show as executing, although their executor is gone or their
// lease has run out.
type recoveryDue struct {
	Attempts int      `json:"attempts"`
	Actions  []string `json:"actions"`
	Run      string   `json:"run"`
}

// newRecoveryDue asks the ledger, without writing, whether recovery is due;
// nil when it is not (or the question could not be answered).
func newRecoveryDue(ctx context.Context, l *ledger.Ledger) *recoveryDue {
	due, err := l.RecoveryDue(ctx)
	if err != nil || len(due) == 0 {
		return nil
	}
	d := &recoveryDue{Attempts: len(due), Run: "gatehouse ledger recover --ledger " + l.Path()}
	for _, at := range due {
		d.Actions = append(d.Actions, at.ActionKey)
	}
	return d
}

func (d *recoveryDue) String() string {
	them := "them"
	if d.Attempts == 1 {
		them = "it"
	}
	return fmt.Sprintf("recovery due: %s in flight without a live executor or lease (%s) until recovery marks %s unknown; run %s, or any verb that acts",
		plural(d.Attempts, "attempt shows", "attempts show"), strings.Join(d.Actions, ", "), them, d.Run)
}

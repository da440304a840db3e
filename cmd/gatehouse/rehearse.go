package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/charmbracelet/x/term"
	"github.com/spf13/cobra"

	"gatehouse/ledger"
	"gatehouse/scenarios"
)

func init() { subcommands = append(subcommands, newRehearseCmd, newScenariosCmd) }

// rehearseFlags are the options of `gatehouse rehearse`.
type rehearseFlags struct {
	all    bool
	json   bool
	junit  string
	ledger string
	width  int
}

func newRehearseCmd() *cobra.Command {
	var f rehearseFlags
	cmd := &cobra.Command{
		Use:   "rehearse [NAME|FILE…]",
		Short: "Run scenarios against a real ledger and test mailbox and report every expectation",
		Long: `rehearse runs scenarios — built-in ones by NAME, or scenario files — each
against a fresh ledger, a real SMTP test mailbox and fake source systems, on a
fake clock. Per scenario it prints the three columns (intended actions |
attempts | arrived messages; side by side from 110 columns, stacked per action
below), the counts and each expectation with PASS or FAIL. It exits 1 when any expectation fails and 2 when a scenario file
is invalid.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runRehearse(cmd.Context(), cmd.OutOrStdout(), args, f)
		},
	}
	cmd.Flags().BoolVar(&f.all, "all", false, "rehearse every built-in scenario")
	cmd.Flags().BoolVar(&f.json, "json", false, "print the reports as JSON")
	cmd.Flags().StringVar(&f.junit, "junit", "", "also write JUnit XML to this file")
	cmd.Flags().StringVar(&f.ledger, "ledger", "", "keep the ledger in this file (one scenario only), or at this postgres:// URL (each scenario in its own schema)")
	cmd.Flags().IntVar(&f.width, "width", 0, fmt.Sprintf("the report's width in columns: side by side from %d, stacked per action below (default: the terminal's, else $COLUMNS, else 80)", scenarios.SideBySide))
	return cmd
}

func runRehearse(ctx context.Context, stdout io.Writer, args []string, f rehearseFlags) error {
	if ctx == nil {
		ctx = context.Background()
	}
	if f.all == (len(args) > 0) {
		return usageErr("rehearse: name scenarios or files, or give --all (not both)")
	}
	list, err := selectScenarios(args, f.all)
	if err != nil {
		return err
	}
	perScenario := ledger.IsPostgres(f.ledger) && len(list) > 1
	if f.ledger != "" && len(list) != 1 && !perScenario {
		return usageErr("rehearse: --ledger keeps one scenario's ledger file; name exactly one scenario (a postgres:// ledger keeps each in its own schema)")
	}
	reps := make([]scenarios.Report, 0, len(list))
	for _, sc := range list {
		loc := f.ledger
		if perScenario {
			// Each scenario in its own schema of the database: rehearsal_NAME.
			if loc, err = ledger.SchemaLocation(f.ledger, "rehearsal_"+strings.ReplaceAll(sc.Name, "-", "_")); err != nil {
				return usageErr("rehearse: --ledger: %v", err)
			}
		}
		rep, err := scenarios.RunAll(ctx, sc, scenarios.Options{LedgerPath: loc})
		if err != nil {
			rep = scenarios.ErrorReport(sc, err)
		}
		reps = append(reps, rep)
	}
	return writeReports(stdout, reps, f)
}

func writeReports(stdout io.Writer, reps []scenarios.Report, f rehearseFlags) error {
	write := func(w io.Writer, reps []scenarios.Report) error {
		return scenarios.WriteTextWidth(w, reps, reportWidth(f.width))
	}
	if f.json {
		write = scenarios.WriteJSON
	}
	if err := write(stdout, reps); err != nil {
		return fmt.Errorf("rehearse: write report: %w", err)
	}
	if f.junit != "" {
		if err := writeJUnitFile(f.junit, reps); err != nil {
			return err
		}
	}
	failed := 0
	for _, r := range reps {
		if !r.Passed {
			failed++
		}
	}
	if failed > 0 {
		return &exitError{code: exitOther, err: fmt.Errorf("rehearse: %d of %d scenarios failed", failed, len(reps))}
	}
	return nil
}

// reportWidth is the text report's width: --width, else the terminal's
// when the report goes to one, else $COLUMNS (a shell sets it for its
// children only when exported), else 80 for a file or a pipe.
func reportWidth(flag int) int {
	if flag > 0 {
		return flag
	}
	if fd := os.Stdout.Fd(); term.IsTerminal(fd) {
		if w, _, err := term.GetSize(fd); err == nil && w > 0 {
			return w
		}
	}
	if n, err := strconv.Atoi(strings.TrimSpace(os.Getenv("COLUMNS"))); err == nil && n > 0 {
		return n
	}
	return 80
}

func writeJUnitFile(path string, reps []scenarios.Report) error {
	out, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("rehearse: junit: %w", err)
	}
	if err := scenarios.WriteJUnit(out, reps); err != nil {
		out.Close()
		return fmt.Errorf("rehearse: junit %s: %w", path, err)
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("rehearse: junit %s: %w", path, err)
	}
	return nil
}

// selectScenarios resolves each argument as a scenario file when it names
// one (a path or a .yaml name), otherwise as a built-in scenario name.
func selectScenarios(args []string, all bool) ([]*scenarios.Scenario, error) {
	if all {
		list, err := scenarios.Builtin()
		if err != nil {
			return nil, fmt.Errorf("rehearse: %w", err)
		}
		return list, nil
	}
	var list []*scenarios.Scenario
	for _, a := range args {
		sc, err := loadScenario(a)
		if err != nil {
			return nil, err
		}
		list = append(list, sc)
	}
	return list, nil
}

func loadScenario(arg string) (*scenarios.Scenario, error) {
	if !looksLikeFile(arg) {
		sc, err := scenarios.Lookup(arg)
		if err != nil {
			return nil, usageErr("rehearse: %v", err)
		}
		return sc, nil
	}
	sc, err := scenarios.ParseFile(arg)
	var probs scenarios.Problems
	switch {
	case errors.As(err, &probs):
		return nil, &exitError{code: exitUsage, err: fmt.Errorf("invalid scenario file:\n%w", probs)}
	case err != nil:
		return nil, usageErr("rehearse: %v", err) // a missing or unreadable file is bad input too
	}
	return sc, nil
}

func looksLikeFile(arg string) bool {
	if strings.HasSuffix(arg, ".yaml") || strings.HasSuffix(arg, ".yml") || strings.ContainsRune(arg, os.PathSeparator) {
		return true
	}
	_, err := os.Stat(arg)
	return err == nil
}

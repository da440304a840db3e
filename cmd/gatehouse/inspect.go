package main

import (
	"context"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"gatehouse/destination/registry"
	"gatehouse/ledger"
	"gatehouse/tui"
)

func init() { subcommands = append(subcommands, newInspectCmd) }

func newInspectCmd() *cobra.Command {
	var path, actor string
	cmd := &cobra.Command{
		Use:   "inspect",
		Short: "Follow a live ledger and act on it as an operator",
		Long: `inspect opens a ledger that other processes are writing and follows it live:
tasks, actions, holds and unknown outcomes, metrics and the stop switch.
Operator operations (hold, release, reconcile, take over, stop, resume) go
through the same gate a workflow uses and ask for a reason. Reconcile asks
the records of the destination each attempt recorded (a file directory, or
the test mailbox API an SMTP attempt was sent with), and nothing else.`,
		Args: cobra.NoArgs,
		RunE: func(_ *cobra.Command, _ []string) error {
			if path == "" {
				path = os.Getenv(ledgerEnv)
			}
			if path == "" {
				return usageErr("inspect needs --ledger PATH (or $%s)", ledgerEnv)
			}
			return runInspect(path, actor)
		},
	}
	cmd.Flags().StringVar(&path, "ledger", "", "ledger file (default $"+ledgerEnv+")")
	cmd.Flags().StringVar(&actor, "as", defaultActor(), "who the operator is, recorded with every operation")
	return cmd
}

func runInspect(path, actor string) error {
	l, err := openInspected(path)
	if err != nil {
		return err
	}
	defer l.Close()
	// Printed before the app takes the screen, so it is there again when
	// the operator quits.
	if due := newRecoveryDue(context.Background(), l); due != nil {
		fmt.Fprintf(os.Stderr, "gatehouse: %s\n", due)
	}
	cfg := tui.InspectorConfig{Ledger: l, Actor: actor, Records: registry.Records()}
	th := tui.NewTheme(tui.NoColor())
	return tui.Run(tui.NewApp(th, tui.NewInspector(th, cfg)))
}

// openInspected opens the ledger as the inspector uses it: looking must not
// change anything, so it is read-only (no recovery pass, no migration, no
// checkpoint) until the operator performs an operation, whose write opens it
// for writing.
func openInspected(path string) (*ledger.Ledger, error) {
	return openForReading(path, ledger.WithWritesOnDemand())
}

// defaultActor names the operator after the login, so the history says who.
func defaultActor() string {
	if u := os.Getenv("USER"); u != "" {
		return "operator:" + u
	}
	return "operator"
}

package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/spf13/cobra"

	"gatehouse/ledger"
	"gatehouse/ledger/destinations"
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
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("no ledger at %s", path)
	}
	// Looking must not change anything, so the inspector does not run the
	// start-up recovery pass; the workflows' own processes do.
	l, err := ledger.Open(path, ledger.WithoutRecovery())
	if err != nil {
		return fmt.Errorf("open ledger %s: %w", path, err)
	}
	defer l.Close()
	cfg := tui.InspectorConfig{Ledger: l, Actor: actor, Records: destinations.Records()}
	th := tui.NewTheme(tui.NoColor())
	return tui.Run(tui.NewApp(th, tui.NewInspector(th, cfg)))
}

// defaultActor names the operator after the login, so the history says who.
func defaultActor() string {
	if u := os.Getenv("USER"); u != "" {
		return "operator:" + u
	}
	return "operator"
}

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/spf13/cobra"

	"gatehouse/scenarios"
	"gatehouse/tui"
)

// scenarioDirEnv names a folder of scenario files for the app when --dir
// is not given.
const scenarioDirEnv = "GATEHOUSE_SCENARIOS"

func init() { subcommands = append(subcommands, newAppCmd) }

func newAppCmd() *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:   "app",
		Short: "Open the terminal app (what running gatehouse without arguments does)",
		Long: `app opens the terminal app: the built-in scenarios and those in --dir, each
rehearsed against a temporary ledger and an embedded mailbox; the inspector
on a rehearsal's ledger; and the takeover demo. Nothing to configure.`,
		Args: cobra.NoArgs,
		RunE: func(_ *cobra.Command, _ []string) error { return openApp(dir) },
	}
	cmd.Flags().StringVar(&dir, "dir", os.Getenv(scenarioDirEnv), "folder of scenario files to list with the built-ins (default $"+scenarioDirEnv+")")
	return cmd
}

// runApp opens the terminal app with the built-in scenarios and those in
// --dir (or $GATEHOUSE_SCENARIOS).
func runApp(cmd *cobra.Command, _ []string) error {
	dir, err := cmd.Flags().GetString("dir")
	if err != nil {
		return err
	}
	return openApp(dir)
}

func openApp(dir string) error {
	list, err := appScenarios(dir)
	if err != nil {
		return err
	}
	var c cleanups
	defer c.run()
	th := tui.NewTheme(tui.NoColor())
	home := tui.NewHome(th, tui.HomeConfig{Scenarios: list,
		NewDemo: func(ctx context.Context) (tui.Screen, error) { return newDemoScreen(ctx, th, &c) }})
	return tui.Run(tui.NewApp(th, home))
}

// appScenarios returns the built-ins followed by the files in dir.
func appScenarios(dir string) ([]*scenarios.Scenario, error) {
	list, err := scenarios.Builtin()
	if err != nil {
		return nil, fmt.Errorf("built-in scenarios: %w", err)
	}
	if dir == "" {
		return list, nil
	}
	var files []string
	for _, pat := range []string{"*.yaml", "*.yml"} {
		m, err := filepath.Glob(filepath.Join(dir, pat))
		if err != nil {
			return nil, usageErr("--dir %s: %v", dir, err)
		}
		files = append(files, m...)
	}
	sort.Strings(files)
	for _, f := range files {
		sc, err := scenarios.ParseFile(f)
		var probs scenarios.Problems
		switch {
		case errors.As(err, &probs):
			// Every problem names the file; a file over the size limit
			// is refused having read no more than the limit.
			return nil, &exitError{code: exitUsage, err: fmt.Errorf("--dir %s:\n%w", dir, probs)}
		case err != nil:
			return nil, usageErr("--dir %s: %v", dir, err)
		}
		list = append(list, sc)
	}
	return list, nil
}

package main

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"gatehouse/scenarios"
)

func newScenariosCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "scenarios",
		Short: "List, show and validate rehearsal scenarios",
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "list",
		Short: "List the built-in scenarios",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return listScenarios(cmd.OutOrStdout()) },
	}, &cobra.Command{
		Use:   "show NAME|FILE",
		Short: "Print a built-in scenario's file, or a scenario file, and say which commands it would run",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return showScenario(cmd.OutOrStdout(), cmd.ErrOrStderr(), args[0])
		},
	}, &cobra.Command{
		Use:   "validate FILE…",
		Short: "Check scenario files without running them; problems are shown as file:line:col",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return validateScenarios(cmd.OutOrStdout(), cmd.ErrOrStderr(), args)
		},
	})
	return cmd
}

func listScenarios(w io.Writer) error {
	list, err := scenarios.Builtin()
	if err != nil {
		return fmt.Errorf("scenarios list: %w", err)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, sc := range list {
		fmt.Fprintf(tw, "%s\t%s\n", sc.Name, sc.Title)
	}
	return tw.Flush()
}

// validateScenarios prints "FILE: ok" per valid file and every problem of
// the others; it fails with exit 2, like rehearse, when any file is invalid.
func validateScenarios(stdout, stderr io.Writer, files []string) error {
	bad := 0
	for _, f := range files {
		sc, err := scenarios.ParseFile(f)
		var probs scenarios.Problems
		switch {
		case err == nil:
			fmt.Fprintf(stdout, "%s: ok\n", f)
			writeCommands(stdout, f, sc)
		case errors.As(err, &probs):
			bad++
			fmt.Fprintln(stderr, probs.Error())
		default:
			bad++
			fmt.Fprintf(stderr, "%s: %v\n", f, err)
		}
	}
	if bad > 0 {
		return &exitError{code: exitUsage, err: fmt.Errorf("scenarios validate: %d of %d files invalid", bad, len(files))}
	}
	return nil
}

// showScenario prints a built-in by name, or a scenario file as it is. A
// file that starts commands says so on stderr, command by command, so that
// nobody rehearses someone else's file without knowing what it runs.
func showScenario(stdout, stderr io.Writer, arg string) error {
	if !looksLikeFile(arg) {
		src, err := scenarios.BuiltinSource(arg)
		if err != nil {
			return usageErr("scenarios show: no built-in scenario %q (see: gatehouse scenarios list)", arg)
		}
		_, err = stdout.Write(src)
		return err
	}
	src, err := scenarios.ReadFile(arg)
	var probs scenarios.Problems
	if errors.As(err, &probs) {
		return &exitError{code: exitUsage, err: fmt.Errorf("scenarios show:\n%w", probs)}
	}
	if err != nil {
		return usageErr("scenarios show: %v", err)
	}
	if _, err := stdout.Write(src); err != nil {
		return err
	}
	if sc, err := scenarios.Parse(arg, src); err == nil {
		writeCommands(stderr, arg, sc)
	} else {
		fmt.Fprintf(stderr, "%s: not a valid scenario; run: gatehouse scenarios validate %s\n", arg, arg)
	}
	return nil
}

// writeCommands lists the commands a scenario starts when rehearsed.
func writeCommands(w io.Writer, file string, sc *scenarios.Scenario) {
	cmds := sc.Commands()
	if len(cmds) == 0 {
		return
	}
	fmt.Fprintf(w, "%s: runs %d command(s) on this machine when rehearsed (each in the folder of the file unless it names dir:):\n", file, len(cmds))
	for _, r := range sc.Runs() {
		fmt.Fprintf(w, "  $ %s\n", r.Command)
		if r.Dir != "" {
			fmt.Fprintf(w, "      dir: %s\n", r.Dir)
		}
		for _, k := range slices.Sorted(maps.Keys(r.Env)) {
			fmt.Fprintf(w, "      env: %s=%s\n", k, strconv.Quote(r.Env[k]))
		}
		if len(r.InheritEnv) > 0 {
			fmt.Fprintf(w, "      inherit_env: %s\n", strings.Join(r.InheritEnv, ", "))
		}
	}
}

package main

import (
	"errors"
	"fmt"
	"io"
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
		Use:   "show NAME",
		Short: "Print a built-in scenario's file, to read or copy as an example",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			src, err := scenarios.BuiltinSource(args[0])
			if err != nil {
				return usageErr("scenarios show: no built-in scenario %q (see: gatehouse scenarios list)", args[0])
			}
			_, err = cmd.OutOrStdout().Write(src)
			return err
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
		_, err := scenarios.ParseFile(f)
		var probs scenarios.Problems
		switch {
		case err == nil:
			fmt.Fprintf(stdout, "%s: ok\n", f)
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

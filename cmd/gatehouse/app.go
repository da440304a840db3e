package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

// runApp opens the terminal app. Until the app lands it explains what exists.
func runApp(cmd *cobra.Command, _ []string) error {
	fmt.Fprintln(cmd.OutOrStdout(), cmd.Long)
	fmt.Fprintln(cmd.OutOrStdout())
	return cmd.Help()
}

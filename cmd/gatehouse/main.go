// Command gatehouse is the single binary: the gate CLI for workflows, the
// test mailbox, the rehearsal runner and the terminal app.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
)

// Exit codes shared by every subcommand. `gate send` adds its own (see gate.go).
const (
	exitOK    = 0
	exitOther = 1
	exitUsage = 2
)

// exitError carries a process exit code up to main.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// usageErr reports a usage mistake: one line, exit code 2.
func usageErr(format string, a ...any) error {
	return &exitError{code: exitUsage, err: fmt.Errorf(format, a...)}
}

// subcommands is filled by each file's init, so that each command family
// lives in its own file.
var subcommands []func() *cobra.Command

func newRootCmd(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "gatehouse",
		Short: "A gate that makes each customer-facing action happen at most once",
		Long: `gatehouse keeps an execution ledger for customer-facing actions and a
terminal app to rehearse scenarios, inspect a live ledger and demonstrate an
ownership takeover. Run it without arguments to open the app.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE:          runApp,
	}
	root.Flags().String("dir", os.Getenv(scenarioDirEnv), "folder of scenario files to list with the built-ins (default $"+scenarioDirEnv+")")
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return &exitError{code: exitUsage, err: plainFlagError(err)}
	})
	for _, f := range subcommands {
		root.AddCommand(f())
	}
	return root
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run executes the command line and maps errors to exit codes.
func run(args []string, stdout, stderr io.Writer) int {
	root := newRootCmd(stdout, stderr)
	root.SetArgs(args)
	err := root.Execute()
	if err == nil {
		return exitOK
	}
	fmt.Fprintln(stderr, "gatehouse:", err)
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	if isCobraUsage(err) {
		return exitUsage
	}
	return exitOther
}

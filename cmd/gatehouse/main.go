// Command gatehouse is the single binary: the gate CLI for workflows, the
// test mailbox, the rehearsal runner and the terminal app.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"gatehouse/destination/httpdest"
	smtpdest "gatehouse/destination/smtp"
	"gatehouse/internal/redact"
	"gatehouse/ledger"
	"gatehouse/ledger/answer"
)

// Exit codes shared by every subcommand. `gate send` adds its own (see gate.go).
const (
	exitOK    = answer.OK
	exitOther = answer.Other
	exitUsage = answer.Usage
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
	for _, f := range subcommands {
		root.AddCommand(f())
	}
	markUsageErrors(root)
	return root
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run executes the command line and maps errors to exit codes. With
// --json anywhere on the command line, an error that printed nothing on
// stdout (a usage error, say) is still one JSON object there.
func run(args []string, stdout, stderr io.Writer) int {
	// Whatever a verb prints, a credential given on the command line or in
	// the environment (a ledger's or a destination's password) is masked on
	// the way out: locations are redacted where they are shown, and this
	// catches a library's error that quotes one.
	secrets := commandSecrets(args)
	stdout, stderr = redact.NewWriter(stdout, secrets...), redact.NewWriter(stderr, secrets...)
	out := &countingWriter{w: stdout}
	root := newRootCmd(out, stderr)
	root.SetArgs(args)
	err := unknownCommand(root, args)
	if err == nil {
		err = root.Execute()
	}
	if err == nil {
		return exitOK
	}
	fmt.Fprintln(stderr, "gatehouse:", err)
	code := exitOther
	if ee := (*exitError)(nil); errors.As(err, &ee) {
		code = ee.code
	} else if errors.Is(err, ledger.ErrKeyValueDSN) {
		code = exitUsage // a location in the wrong form, whichever verb was given it
	} else if errors.Is(err, ledger.ErrBackup) {
		code = exitUsage // a backup in place of a ledger, whichever verb would have written it
	}
	if wantsJSON(args) && out.n == 0 {
		b, _ := json.Marshal(map[string]any{"error": err.Error(), "exit_code": code})
		fmt.Fprintf(stdout, "%s\n", b)
	}
	return code
}

// commandSecrets are the credentials the command line and the environment
// carry: those in every location-like argument, the SMTP password and the
// HTTP destinations' Authorization.
func commandSecrets(args []string) []string {
	var out []string
	for _, a := range args {
		if _, v, ok := strings.Cut(a, "="); ok && strings.HasPrefix(a, "--") {
			a = v
		}
		out = append(out, redact.Secrets(a)...)
		if strings.HasPrefix(a, ledger.TokenPrefix) {
			out = append(out, a) // a token presented (--token) is never echoed
		}
	}
	if tok := os.Getenv(tokenEnv); len(tok) >= 3 {
		out = append(out, tok)
	}
	for _, env := range []string{ledgerEnv, "GATEHOUSE_DESTINATION"} {
		out = append(out, redact.Secrets(os.Getenv(env))...)
	}
	for _, env := range []string{smtpdest.PasswordEnv, httpdest.AuthorizationEnv} {
		if p := os.Getenv(env); len(p) >= 3 {
			out = append(out, p)
		}
	}
	if _, cred, ok := strings.Cut(os.Getenv(httpdest.AuthorizationEnv), " "); ok && len(cred) >= 3 {
		out = append(out, cred) // the credential without its scheme, wherever it turns up
	}
	if p := os.Getenv("PGPASSWORD"); len(p) >= 3 {
		out = append(out, p)
	}
	return out
}

// wantsJSON reports whether --json was asked for anywhere in args.
func wantsJSON(args []string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		if a == "--json" || a == "--json=true" {
			return true
		}
	}
	return false
}

// countingWriter counts what a command wrote.
type countingWriter struct {
	w io.Writer
	n int
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += n
	return n, err
}

package main

import (
	"bytes"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// TestCobraUsageErrorsExitTwo: every malformed command line cobra or pflag
// detects exits 2 through the hooks, whatever words they use for it.
func TestCobraUsageErrorsExitTwo(t *testing.T) {
	tests := []struct {
		name      string
		args      []string
		stderrHas string
	}{
		{"UnknownCommand", []string{"rehaerse"}, `unknown command "rehaerse" for "gatehouse" (did you mean "rehearse"?)`},
		{"UnknownFlag", []string{"scenarios", "list", "--nope"}, "--nope"},
		{"FlagNeedsValue", []string{"gate", "list", "--ledger"}, "--ledger"},
		{"WholeNumberWanted", []string{"gate", "list", "--ledger", "x.db", "--limit", "many"}, `invalid argument "many" for "--limit" flag: want a whole number`},
		{"TooFewArgs", []string{"scenarios", "show"}, "accepts 1 arg"},
		{"TooManyArgs", []string{"scenarios", "show", "a", "b"}, "accepts 1 arg"},
		{"NoArgsWanted", []string{"scenarios", "list", "extra"}, `"extra"`},
		{"MinimumArgs", []string{"scenarios", "validate"}, "at least 1"},
		{"CompletionExtraArg", []string{"completion", "bash", "extra"}, `"extra"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := run(tt.args, &out, &errOut)
			wantExit(t, result{code: code, stdout: out.String(), stderr: errOut.String()}, exitUsage, tt.stderrHas)
		})
	}
}

// usageCase is a command line refused as a usage error, and what its
// refusal must say.
type usageCase struct {
	name      string
	args      []string
	stderrHas string
}

// TestUnknownVerbIsNamed: a mistyped command or verb is named as such with
// the nearest one, exit 2, whatever flags follow it and under --help too,
// where cobra alone blames the verb's flags on the parent or prints the
// parent's help and exits 0.
func TestUnknownVerbIsNamed(t *testing.T) {
	tests := []usageCase{
		{"VerbBeforeItsFlags", []string{"gate", "sned", "--key", "K"}, `unknown verb "sned" for gate (did you mean "send"?)`},
		{"CommandUnderHelp", []string{"serve", "--help"}, `unknown command "serve" for "gatehouse" (did you mean "`},
		{"CommandUnderHelp/Suggested", []string{"serve", "--help"}, `"mailbox serve"`},
		{"VerbOfTwoFamilies", []string{"send"}, `(did you mean "audience send" or "gate send"?)`},
		{"VerbUnderHelp", []string{"gate", "sned", "--help"}, `unknown verb "sned" for gate (did you mean "send"?)`},
		{"AfterParentFlags", []string{"gate", "--ledger", "x.db", "--as", "bot", "sned"}, `unknown verb "sned" for gate`},
		{"HelpTopic", []string{"help", "gate", "sned"}, `unknown verb "sned" for gate (did you mean "send"?)`},
		{"NothingNear", []string{"ledger", "compact"}, `unknown verb "compact" for ledger (want one of backup, check, mark-restored, migrate, recover, restore)`},
		{"ScenariosUsedToPrintHelp", []string{"scenarios", "lst"}, `unknown verb "lst" for scenarios (did you mean "list"?)`},
	}
	// Every parent command, with each verb of its own mistyped and with a
	// word near none of them under --help.
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if !c.HasAvailableSubCommands() {
			return
		}
		path := strings.Fields(c.CommandPath())[1:]
		for _, sub := range c.Commands() {
			if !sub.IsAvailableCommand() {
				continue
			}
			n := sub.Name()
			typo := n[:len(n)-1] + "q" // no verb ends in q
			name := "Typo/" + c.CommandPath() + "/" + n
			tests = append(tests,
				usageCase{name, append(slices.Clone(path), typo), fmt.Sprintf("%q for ", typo)},
				usageCase{name + "/Suggested", append(slices.Clone(path), typo), fmt.Sprintf("%q", n)})
			walk(sub)
		}
		tests = append(tests, usageCase{"Unknown/" + c.CommandPath(), append(slices.Clone(path), "qqzzx", "--help"), `"qqzzx" for `})
	}
	walk(newRootCmd(io.Discard, io.Discard))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := run(tt.args, &out, &errOut)
			wantExit(t, result{code: code, stdout: out.String(), stderr: errOut.String()}, exitUsage, tt.stderrHas)
			if out.Len() != 0 {
				t.Errorf("stdout is not empty: %s", out.String())
			}
		})
	}
}

// TestKnownVerbsStillRun: the check before cobra leaves help of a real
// verb, a parent's own help and completion requests alone.
func TestKnownVerbsStillRun(t *testing.T) {
	for _, args := range [][]string{
		{"gate", "send", "--help"},
		{"gate", "--help"},
		{"--help"},
		{"help", "mailbox", "serve"},
		{"mailbox", "serve", "--help"},
		{"__complete", "gate", "se"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			var out, errOut bytes.Buffer
			if code := run(args, &out, &errOut); code != exitOK || out.Len() == 0 {
				t.Fatalf("exit %d, stdout %q, stderr %q; want 0 and output", code, out.String(), errOut.String())
			}
		})
	}
}

package main

import (
	"bytes"
	"testing"
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

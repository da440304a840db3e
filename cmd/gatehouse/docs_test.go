package main

import (
	"bytes"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// flagTable reads a markdown table of flags (flags | verbs | …) that follows
// the line containing marker in docs/cli.md: flag → verbs ("all" = every
// verb).
func flagTable(t *testing.T, doc, marker string) map[string][]string {
	t.Helper()
	i := strings.Index(doc, marker)
	if i < 0 {
		t.Fatalf("docs/cli.md has no %q", marker)
	}
	lines := strings.Split(doc[i:], "\n")
	out := map[string][]string{}
	started := false
	for _, ln := range lines[1:] {
		if !strings.HasPrefix(ln, "|") {
			if started {
				break
			}
			continue
		}
		started = true
		cells := strings.Split(ln, "|")
		if len(cells) < 4 {
			continue
		}
		var verbs []string
		for _, v := range strings.Split(cells[2], ",") {
			verbs = append(verbs, strings.TrimSpace(v))
		}
		// A row may name flags that go together: `--limit`, `--offset`.
		for _, f := range strings.Split(cells[1], ",") {
			flag := strings.Trim(strings.TrimSpace(f), "`")
			if !strings.HasPrefix(flag, "--") || strings.Trim(flag, "-") == "" {
				continue // header or separator
			}
			out[flag] = verbs
		}
	}
	return out
}

// cobraFlags lists each verb's flags (its own and the family's) as the
// binary defines them.
func cobraFlags(family *cobra.Command) map[string][]string {
	out := map[string][]string{}
	for _, c := range family.Commands() {
		var names []string
		add := func(f *pflag.Flag) {
			if f.Name != "help" && !slices.Contains(names, "--"+f.Name) {
				names = append(names, "--"+f.Name)
			}
		}
		c.Flags().VisitAll(add)
		c.InheritedFlags().VisitAll(add)
		family.PersistentFlags().VisitAll(add)
		sort.Strings(names)
		out[c.Name()] = names
	}
	return out
}

// TestFlagTableMatchesTheBinary: docs/cli.md's flag tables name exactly the
// flags each verb has, so the docs cannot drift from --help.
func TestFlagTableMatchesTheBinary(t *testing.T) {
	raw, err := os.ReadFile("../../docs/cli.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	for _, fam := range []struct {
		cmd    *cobra.Command
		marker string
	}{{newGateCmd(), "## Flags"}, {newAudienceCmd(), "`gatehouse audience`:"}, {newMailboxCmd(), "`gatehouse mailbox`:"}, {newPaymentsCmd(), "`gatehouse payments`:"}} {
		documented := flagTable(t, doc, fam.marker)
		actual := cobraFlags(fam.cmd)
		for verb, flags := range actual {
			var want []string
			for flag, verbs := range documented {
				if slices.Contains(verbs, "all") || slices.Contains(verbs, verb) {
					want = append(want, flag)
				}
			}
			sort.Strings(want)
			if !slices.Equal(want, flags) {
				t.Errorf("%s %s: docs/cli.md lists %v, the binary has %v", fam.cmd.Name(), verb, want, flags)
			}
		}
		for flag, verbs := range documented {
			for _, v := range verbs {
				if _, ok := actual[v]; !ok && v != "all" {
					t.Errorf("%s: docs/cli.md names %s for a verb %q that does not exist", fam.cmd.Name(), flag, v)
				}
			}
		}
	}
}

// exitCodes is every exit code the binary uses.
var exitCodes = []int{exitOK, exitOther, exitUsage, exitDuplicate, exitInFlight, exitDenied, exitHeld,
	exitUnknown, exitStopped, exitFailed, exitWrongDestination, exitConsent, exitNothingToDo, exitInterrupted}

// TestExitCodeTablesListEveryCode: the exit-code tables in docs/cli.md and
// the README list exactly the codes the binary uses.
func TestExitCodeTablesListEveryCode(t *testing.T) {
	row := regexp.MustCompile(`(?m)^\| (\d+) \|`)
	for _, file := range []struct{ path, marker string }{{"../../docs/cli.md", "## Exit codes"}, {"../../README.md", "## Exit codes"}} {
		raw, err := os.ReadFile(file.path)
		if err != nil {
			t.Fatal(err)
		}
		i := bytes.Index(raw, []byte(file.marker))
		if i < 0 {
			t.Fatalf("%s has no %q section", file.path, file.marker)
		}
		section := raw[i:]
		if j := bytes.Index(section[len(file.marker):], []byte("\n## ")); j >= 0 {
			section = section[:len(file.marker)+j]
		}
		var got []int
		for _, m := range row.FindAllSubmatch(section, -1) {
			n, _ := strconv.Atoi(string(m[1]))
			got = append(got, n)
		}
		want := slices.Clone(exitCodes)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("%s lists exit codes %v, the binary uses %v", file.path, got, want)
		}
	}
}

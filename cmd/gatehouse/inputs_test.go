package main

import (
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// inventoryFlags are the flags docs/inputs.md's Flags table names.
func inventoryFlags(t *testing.T) map[string]bool {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "docs", "inputs.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(raw), "\n## Flags\n")
	if !ok {
		t.Fatal("docs/inputs.md has no Flags section")
	}
	table, _, _ = strings.Cut(table, "\n## ")
	out := map[string]bool{}
	row := regexp.MustCompile("(?m)^\\| (.*?) \\| (approval|ledger|process|request) \\|")
	flag := regexp.MustCompile("`--([a-z0-9-]+)`")
	for _, r := range row.FindAllStringSubmatch(table, -1) {
		for _, f := range flag.FindAllStringSubmatch(r[1], -1) {
			out[f[1]] = true
		}
	}
	return out
}

// TestEveryFlagIsInTheInventory walks every command's flags and fails on
// one docs/inputs.md does not classify (bound at approval, the ledger's
// own, the process's own, or the request), and on a row naming a flag no
// command has: a flag is an input the executing process supplies, and it
// may only make the gate more careful.
func TestEveryFlagIsInTheInventory(t *testing.T) {
	listed := inventoryFlags(t)
	used := map[string][]string{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		visit := func(f *pflag.Flag) {
			if f.Name != "help" {
				used[f.Name] = append(used[f.Name], c.CommandPath())
			}
		}
		c.LocalFlags().VisitAll(visit)
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(newRootCmd(io.Discard, io.Discard))
	var names []string
	for n := range used {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if !listed[n] {
			t.Errorf("--%s (%s) is not in docs/inputs.md: add its row saying whether it is bound at approval, the ledger's own, the process's own or the request, and why it cannot weaken a rule", n, strings.Join(used[n], ", "))
		}
	}
	for n := range listed {
		if used[n] == nil {
			t.Errorf("docs/inputs.md lists --%s, which no command has any more: remove it", n)
		}
	}
}

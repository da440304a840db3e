package main

import (
	"os"
	"strings"
	"testing"
)

// TestPermitTableMatchesTheCode: docs/cli.md's table of who may do what is
// the one the gate enforces (ledger.Permits), row for row.
func TestPermitTableMatchesTheCode(t *testing.T) {
	raw, err := os.ReadFile("../../docs/cli.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	i := strings.Index(doc, "| verb | role | kinds |")
	if i < 0 {
		t.Fatal("docs/cli.md has no permission table (| verb | role | kinds |)")
	}
	var got []string
	for _, ln := range strings.Split(doc[i:], "\n")[2:] {
		if !strings.HasPrefix(ln, "|") {
			break
		}
		got = append(got, ln)
	}
	want := permitRows()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("docs/cli.md's permission table:\n%s\nthe code's:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

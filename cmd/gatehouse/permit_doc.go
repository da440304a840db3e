package main

import (
	"strings"

	"gatehouse/ledger"
)

// permitRows is the permission table as docs/cli.md prints it: one row per
// verb, from ledger.Permits.
func permitRows() []string {
	var out []string
	for _, p := range ledger.Permits {
		role := "any enabled actor"
		if p.Role != "" {
			role = "`" + string(p.Role) + "`"
		}
		var kinds []string
		for _, k := range p.Kinds {
			kinds = append(kinds, string(k))
		}
		out = append(out, "| `"+string(p.Verb)+"` | "+role+" | "+strings.Join(kinds, ", ")+" |")
	}
	return out
}

package main

import "strings"

// isCobraUsage recognises the errors cobra itself raises for a malformed
// command line (it has no typed errors for them), so they exit with 2.
func isCobraUsage(err error) bool {
	msg := err.Error()
	for _, p := range []string{
		"unknown command", "unknown flag", "unknown shorthand flag",
		"required flag", "accepts ", "requires at least", "requires at most",
		"invalid argument", "flag needs an argument", "bad flag syntax",
		"if any flags in the group",
	} {
		if strings.HasPrefix(msg, p) || strings.Contains(msg, " "+p) {
			return true
		}
	}
	return false
}

package main

import (
	"errors"
	"strings"
)

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

// plainFlagError drops Go's parser detail from a flag value error:
// `invalid argument "abc" for "--revision" flag: strconv.ParseInt: parsing
// "abc": invalid syntax` becomes `invalid argument "abc" for "--revision"
// flag: want a whole number`.
func plainFlagError(err error) error {
	msg := err.Error()
	i := strings.Index(msg, ": strconv.")
	if i < 0 {
		return err
	}
	want := "want a whole number"
	if strings.Contains(msg[i:], "ParseBool") {
		want = "want true or false"
	} else if strings.Contains(msg[i:], "ParseFloat") {
		want = "want a number"
	}
	return errors.New(msg[:i] + ": " + want)
}

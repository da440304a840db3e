package main

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// markUsageErrors makes every malformed command line cobra detects exit 2,
// without reading cobra's error text: flag errors reach the FlagErrorFunc
// hook and argument errors every command's Args hook, and each hook wraps
// what it gets as a usage error. It must run once the tree is complete; it
// adds cobra's help and completion commands first so they are covered too.
func markUsageErrors(root *cobra.Command) {
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return &exitError{code: exitUsage, err: plainFlagError(err)}
	})
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		c.Args = usageArgs(c.Args)
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

// usageArgs wraps a command's argument check so that its refusal is a
// usage error. A nil check behaves as cobra's default: a command without
// subcommands takes any arguments; the root refuses an unknown command.
func usageArgs(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(c *cobra.Command, args []string) error {
		if check == nil {
			if c.HasParent() || !c.HasSubCommands() || len(args) == 0 {
				return nil
			}
			return usageErr("unknown command %q for %q%s", args[0], c.CommandPath(), suggestions(c, args[0]))
		}
		err := check(c, args)
		var ee *exitError
		if err == nil || errors.As(err, &ee) {
			return err
		}
		return &exitError{code: exitUsage, err: err}
	}
}

// suggestions is cobra's "did you mean" list for an unknown command.
func suggestions(c *cobra.Command, arg string) string {
	if c.SuggestionsMinimumDistance <= 0 {
		c.SuggestionsMinimumDistance = 2 // cobra's own default
	}
	s := c.SuggestionsFor(arg)
	if len(s) == 0 {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", s[0])
}

// plainFlagError drops Go's parser detail from a flag value error:
// `invalid argument "abc" for "--revision" flag: strconv.ParseInt: parsing
// "abc": invalid syntax` becomes `invalid argument "abc" for "--revision"
// flag: want a whole number`.
func plainFlagError(err error) error {
	var iv *pflag.InvalidValueError
	var num *strconv.NumError
	if !errors.As(err, &iv) || !errors.As(err, &num) {
		return err
	}
	want := "want a whole number"
	switch num.Func {
	case "ParseBool":
		want = "want true or false"
	case "ParseFloat":
		want = "want a number"
	}
	name := "--" + iv.GetFlag().Name
	if f := iv.GetFlag(); f.Shorthand != "" && f.ShorthandDeprecated == "" {
		name = "-" + f.Shorthand + ", " + name
	}
	return fmt.Errorf("invalid argument %q for %q flag: %s", iv.GetValue(), name, want)
}

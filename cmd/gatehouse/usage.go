package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

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
			return unknownVerb(c, args[0])
		}
		err := check(c, args)
		var ee *exitError
		if err == nil || errors.As(err, &ee) {
			return err
		}
		return &exitError{code: exitUsage, err: err}
	}
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

// unknownCommand refuses a command line whose first word after a parent
// command is none of its verbs, before cobra runs it: cobra would stop at the
// parent and then report the verb's flags as the parent's ("gate sned --key
// K": unknown flag: --key) or, under --help, print the parent's help and exit
// 0. "help WORD…" is checked the same way. Cobra's hidden completion
// requests are left to cobra.
func unknownCommand(root *cobra.Command, args []string) error {
	if len(args) > 0 && (args[0] == cobra.ShellCompRequestCmd || args[0] == cobra.ShellCompNoDescRequestCmd) {
		return nil
	}
	if len(args) > 0 && args[0] == "help" {
		args = args[1:]
	}
	c, rest, err := root.Find(args)
	if err != nil || c == nil || !c.HasSubCommands() {
		return nil // a verb was found; its own checks apply
	}
	word, ok := firstWord(c, rest)
	if !ok {
		return nil
	}
	return unknownVerb(c, word)
}

// firstWord is the first argument of args that is not a flag or a flag's
// value, read as cobra reads it when it looks for a subcommand.
func firstWord(c *cobra.Command, args []string) (string, bool) {
	c.InitDefaultHelpFlag()
	lookup := func(long, short string) *pflag.Flag {
		for _, fs := range []*pflag.FlagSet{c.Flags(), c.InheritedFlags()} {
			if f := fs.Lookup(long); long != "" && f != nil {
				return f
			}
			if f := fs.ShorthandLookup(short); short != "" && f != nil {
				return f
			}
		}
		return nil
	}
	// takesValue: a flag cobra does not know is taken to have a value, as
	// cobra's own search does, so both stop at the same word.
	takesValue := func(f *pflag.Flag) bool { return f == nil || f.NoOptDefVal == "" }
	for i := 0; i < len(args); i++ {
		s := args[i]
		switch {
		case s == "--":
			return "", false
		case strings.HasPrefix(s, "--") && !strings.Contains(s, "="):
			if takesValue(lookup(s[2:], "")) {
				i++
			}
		case strings.HasPrefix(s, "-") && len(s) == 2 && s != "--":
			if takesValue(lookup("", s[1:])) {
				i++
			}
		case s != "" && !strings.HasPrefix(s, "-"):
			return s, true
		}
	}
	return "", false
}

// unknownVerb is the one refusal of a word that names no verb of c: the
// nearest verbs by cobra's SuggestionsFor (within SuggestionsMinimumDistance
// edits, or sharing its beginning), else every verb it has. At the root a
// word that is a verb of some family is pointed there ("serve": "mailbox
// serve").
func unknownVerb(c *cobra.Command, word string) error {
	what, of := "verb", strings.TrimPrefix(c.CommandPath(), c.Root().Name()+" ")
	if !c.HasParent() {
		what, of = "command", fmt.Sprintf("%q", c.Name())
	}
	if near := nearest(c, word); len(near) > 0 {
		return usageErr("unknown %s %q for %s (did you mean %s?)", what, word, of, quotedOr(near))
	}
	var names []string
	for _, sub := range c.Commands() {
		if sub.IsAvailableCommand() {
			names = append(names, sub.Name())
		}
	}
	return usageErr("unknown %s %q for %s (want one of %s)", what, word, of, strings.Join(names, ", "))
}

// nearest lists c's verbs near word. At the root, when none is, it lists
// the families that have a verb of that very name, else the verbs of each
// family near it, each named with its family.
func nearest(c *cobra.Command, word string) []string {
	if c.SuggestionsMinimumDistance <= 0 {
		c.SuggestionsMinimumDistance = 2 // cobra's own default
	}
	near := c.SuggestionsFor(word)
	if len(near) > 0 || c.HasParent() {
		return near
	}
	var exact []string
	for _, fam := range c.Commands() {
		if !fam.IsAvailableCommand() || !fam.HasSubCommands() {
			continue
		}
		if fam.SuggestionsMinimumDistance <= 0 {
			fam.SuggestionsMinimumDistance = c.SuggestionsMinimumDistance
		}
		for _, verb := range fam.SuggestionsFor(word) {
			near = append(near, fam.Name()+" "+verb)
			if verb == word {
				exact = append(exact, fam.Name()+" "+verb)
			}
		}
	}
	if len(exact) > 0 {
		return exact
	}
	return near
}

// quotedOr joins names as `"a"`, `"a" or "b"`, `"a", "b" or "c"`.
func quotedOr(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = strconv.Quote(n)
	}
	if len(q) == 1 {
		return q[0]
	}
	return strings.Join(q[:len(q)-1], ", ") + " or " + q[len(q)-1]
}

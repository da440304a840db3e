package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/pflag"

	"gatehouse/ledger"
)

// keyFlags address an action: --key, or the business facts the key is built
// from. --target is always the business target (part of the key); where a
// message goes is --destination.
type keyFlags struct {
	key   string
	facts ledger.KeyParts
}

func (k *keyFlags) registerFacts(fs *pflag.FlagSet) {
	fs.StringVar(&k.facts.Customer, "customer", "", "customer the action is for")
	fs.StringVar(&k.facts.Event, "event", "", "business event, e.g. the enquiry or webhook id")
	fs.StringVar(&k.facts.ActionType, "type", "", "action type, e.g. reply_ack")
	fs.StringVar(&k.facts.Target, "target", "", "business target the action acts on, e.g. the task or order (part of the key)")
	fs.IntVar(&k.facts.Revision, "revision", 0, "0 for the first message; corrections use the next")
}

func (k *keyFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&k.key, "key", "", "action key (or give the facts it is built from)")
	k.registerFacts(fs)
}

// anyFact reports whether any business fact was given.
func (k *keyFlags) anyFact() bool {
	f := k.facts
	return f.Customer != "" || f.Event != "" || f.ActionType != "" || f.Target != "" || f.Revision != 0
}

// requireFacts checks that every fact is present, for verbs that build a key.
func (k *keyFlags) requireFacts(verb string) (string, error) {
	f := k.facts
	var missing []string
	for _, m := range []struct{ flag, v string }{{"--customer", f.Customer}, {"--event", f.Event},
		{"--type", f.ActionType}, {"--target", f.Target}} {
		if strings.TrimSpace(m.v) == "" {
			missing = append(missing, m.flag)
		}
	}
	if len(missing) > 0 {
		return "", usageErr("%s needs %s", verbTitle(verb), strings.Join(missing, ", "))
	}
	if f.Revision < 0 {
		return "", usageErr("%s: --revision %d is negative", verbTitle(verb), f.Revision)
	}
	for _, m := range []struct{ flag, v string }{{"--customer", f.Customer}, {"--event", f.Event},
		{"--type", f.ActionType}, {"--target", f.Target}} {
		if err := ledger.ValidateKeyFact(m.flag, m.v); err != nil {
			return "", usageErr("%s: %v", verbTitle(verb), err)
		}
	}
	return f.Key(), nil
}

// resolve returns the addressed action key.
func (k *keyFlags) resolve(verb string) (string, error) {
	switch {
	case k.key != "" && k.anyFact():
		return "", usageErr("%s: give --key or the facts that build it, not both", verbTitle(verb))
	case k.key != "":
		if _, err := ledger.ParseKey(k.key); err != nil {
			return "", usageErr("%s: %v", verbTitle(verb), err)
		}
		return k.key, nil
	case !k.anyFact():
		return "", usageErr("%s needs --key KEY (or --customer, --event, --type, --target)", verbTitle(verb))
	}
	return k.requireFacts(verb)
}

// unavailableValue marks a material source that could not be read.
const unavailableValue = "?unavailable"

// materialList is the repeatable --material source.field=value flag. A value
// of exactly "?unavailable" says the source could not be read.
type materialList []ledger.MaterialRead

func (m *materialList) String() string {
	var parts []string
	for _, r := range *m {
		parts = append(parts, r.Name()+"="+r.Value)
	}
	return strings.Join(parts, ",")
}

// Type names the value in help text.
func (m *materialList) Type() string { return "source.field=value" }

// Set parses one source.field=value; pflag turns an error into a usage error.
func (m *materialList) Set(s string) error {
	name, value, ok := strings.Cut(s, "=")
	source, field, dot := strings.Cut(name, ".")
	if !ok || !dot || strings.TrimSpace(source) == "" || strings.TrimSpace(field) == "" {
		return fmt.Errorf("want source.field=value, e.g. crm.consent=yes")
	}
	r := ledger.MaterialRead{Source: strings.TrimSpace(source), Field: strings.TrimSpace(field), Value: value}
	if value == unavailableValue {
		r.Value, r.Unavailable = "", true
	}
	*m = append(*m, r)
	return nil
}

func (m *materialList) register(fs *pflag.FlagSet, usage string) {
	fs.Var(m, "material", usage+" (repeatable; value "+unavailableValue+" marks the source unreadable)")
}

// contentFlags are the message content of propose and correct.
type contentFlags struct {
	to, toName, subject, body, bodyFile string
}

func (c *contentFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&c.to, "to", "", "recipient: one bare address, e.g. ada@example.com")
	fs.StringVar(&c.toName, "to-name", "", "recipient's display name (no @, < or >)")
	fs.StringVar(&c.subject, "subject", "", "message subject")
	fs.StringVar(&c.body, "body", "", "message body (UTF-8, at most 10 MiB)")
	fs.StringVar(&c.bodyFile, "body-file", "", "read the body from PATH, or stdin for -")
}

// readBody returns the body from --body or --body-file, reading at most one
// byte past the limit so a huge file is refused without being held in
// memory.
func (c *contentFlags) readBody(verb string, stdin io.Reader) (string, error) {
	if c.bodyFile == "" {
		return c.body, nil
	}
	if c.body != "" {
		return "", usageErr("%s: give --body or --body-file, not both", verbTitle(verb))
	}
	src := stdin
	if c.bodyFile != "-" {
		f, err := os.Open(c.bodyFile)
		if err != nil {
			return "", usageErr("%s: --body-file: %v", verbTitle(verb), err)
		}
		defer f.Close()
		src = f
	}
	b, err := io.ReadAll(io.LimitReader(src, ledger.MaxBodyBytes+1))
	if err != nil {
		return "", fmt.Errorf("read body: %w", err)
	}
	if len(b) > ledger.MaxBodyBytes {
		return "", usageErr("%s: --body-file %s is over the limit of %d bytes (10 MiB)", verbTitle(verb), c.bodyFile, ledger.MaxBodyBytes)
	}
	return string(b), nil
}

// required checks that a required flag was not left empty.
func required(verb, flag, value string) func() error {
	return func() error {
		if strings.TrimSpace(value) == "" {
			return usageErr("%s needs --%s", verbTitle(verb), flag)
		}
		return nil
	}
}

// requiredIf is required when need holds, and no check otherwise.
func requiredIf(need bool, verb, flag, value string) func() error {
	if !need {
		return nil
	}
	return required(verb, flag, value)
}

// resolveInto is resolve as a check for gateRun.open.
func (k *keyFlags) resolveInto(verb string, key *string) func() error {
	return func() (err error) {
		*key, err = k.resolve(verb)
		return err
	}
}

// readInto is readBody as a check for gateRun.open.
func (c *contentFlags) readInto(verb string, stdin io.Reader, body *string) func() error {
	return func() (err error) {
		*body, err = c.readBody(verb, stdin)
		return err
	}
}

func reasonFlag(fs *pflag.FlagSet, reason *string) {
	fs.StringVar(reason, "reason", "", "why, in plain words (recorded in the history)")
}

func taskFlag(fs *pflag.FlagSet, task *string) {
	fs.StringVar(task, "task", "", "task (helpdesk conversation) id")
}

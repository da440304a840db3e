package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"gatehouse/ledger"
)

func init() { subcommands = append(subcommands, newActorsCmd, newPolicyCmd) }

func newActorsCmd() *cobra.Command {
	return newVerbFamily("actors", "Register who may do what on a ledger",
		`actors registers the callers of a ledger: persons, workflows, agents and
policies, each with roles (propose, approve, execute, resolve, release,
takeover, stop, operate, review, admin). A ledger is open until
'actors require' makes it registered: from then on every --as must be an
enabled actor with the role its verb needs (docs/cli.md lists the table),
and only an admin changes actors. 'actors token' issues a token, shown once;
a ledger that requires tokens for a role refuses its acts without the
actor's own. Every change is a line in the history naming who made it.
Exit codes are those of gate; 21 is "not permitted".`, actorVerbs)
}

var actorVerbs = []func() verbSpec{actorsAddVerb, actorsListVerb, actorsShowVerb, actorsGrantVerb, actorsRevokeVerb,
	actorsDisableVerb, actorsEnableVerb, actorsTokenVerb, actorsRequireVerb}

// actorView is one actor as printed.
type actorView struct {
	ID      string   `json:"id"`
	Kind    string   `json:"kind"`
	Name    string   `json:"name,omitempty"`
	Roles   []string `json:"roles"`
	Enabled bool     `json:"enabled"`
}

func viewOfActor(a ledger.Actor) actorView {
	v := actorView{ID: a.ID, Kind: string(a.Kind), Name: a.DisplayName, Enabled: a.Enabled, Roles: []string{}}
	for _, r := range a.Roles {
		v.Roles = append(v.Roles, string(r))
	}
	return v
}

func (v actorView) text(w io.Writer) {
	state := "enabled"
	if !v.Enabled {
		state = "disabled"
	}
	fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", v.ID, v.Kind, state, orNone(strings.Join(v.Roles, ",")), v.Name)
}

type actorList struct {
	Mode   string      `json:"mode"`
	Tokens []string    `json:"token_roles"`
	Actors []actorView `json:"actors"`
}

func (l actorList) text(w io.Writer) {
	fmt.Fprintf(w, "mode: %s", l.Mode)
	if len(l.Tokens) > 0 {
		fmt.Fprintf(w, " (tokens required for %s)", strings.Join(l.Tokens, ", "))
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "ACTOR\tKIND\tSTATE\tROLES\tNAME")
	for _, a := range l.Actors {
		a.text(w)
	}
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

func modeName(m ledger.Mode) string {
	if m.Registered {
		return "registered"
	}
	return "open"
}

func roleNames(rs []ledger.Role) []string {
	out := []string{}
	for _, r := range rs {
		out = append(out, string(r))
	}
	return out
}

func parseRolesFlag(verb, s string, need bool) ([]ledger.Role, error) {
	if need && strings.TrimSpace(s) == "" {
		return nil, usageErr("actors %s needs --roles LIST", verb)
	}
	rs, err := ledger.ParseRoles(s)
	if err != nil {
		return nil, usageErr("actors %s: %v", verb, err)
	}
	return rs, nil
}

func needID(verb, id string) func() error {
	return func() error {
		if strings.TrimSpace(id) == "" {
			return usageErr("actors %s needs --id ACTOR", verb)
		}
		return nil
	}
}

func actorsAddVerb() verbSpec {
	var id, kind, name, roles string
	return verbSpec{name: "add", short: "Register an actor (roles default by kind)", actor: true,
		flags: func(fs *pflag.FlagSet) {
			fs.StringVar(&id, "id", "", "the actor's name, as --as gives it")
			fs.StringVar(&kind, "kind", "", "person, workflow, agent or policy")
			fs.StringVar(&name, "name", "", "a display name")
			fs.StringVar(&roles, "roles", "", "comma-separated roles (default: the kind's)")
		},
		run: func(ctx context.Context, g *gateRun) (output, error) {
			var k ledger.Kind
			var rs []ledger.Role
			l, err := g.open(needID("add", id), func() (err error) {
				if k, err = ledger.ParseKind(kind); err != nil {
					return usageErr("actors add: --kind: %v", err)
				}
				if roles != "" {
					rs, err = parseRolesFlag("add", roles, false)
				}
				return err
			})
			if err != nil {
				return nil, err
			}
			a, err := l.AddActor(ctx, g.actor, ledger.Actor{ID: id, Kind: k, DisplayName: name, Roles: rs})
			if err != nil {
				return nil, err
			}
			return viewOfActor(a), nil
		}}
}

func actorsListVerb() verbSpec {
	return verbSpec{name: "list", short: "List the registered actors and the ledger's mode", readOnly: true,
		run: func(ctx context.Context, g *gateRun) (output, error) {
			l, err := g.open()
			if err != nil {
				return nil, err
			}
			m, err := l.Mode(ctx)
			if err != nil {
				return nil, err
			}
			as, err := l.Actors(ctx)
			if err != nil {
				return nil, err
			}
			out := actorList{Mode: modeName(m), Tokens: roleNames(m.TokenRoles), Actors: []actorView{}}
			for _, a := range as {
				out.Actors = append(out.Actors, viewOfActor(a))
			}
			return out, nil
		}}
}

// actorDetail is one actor with what the table lets it do.
type actorDetail struct {
	actorView
	May    []string `json:"may"`
	MayNot []string `json:"may_not"`
}

func (d actorDetail) text(w io.Writer) {
	fmt.Fprintln(w, "ACTOR\tKIND\tSTATE\tROLES\tNAME")
	d.actorView.text(w)
	fmt.Fprintf(w, "may:\t%s\n", orNone(strings.Join(d.May, ", ")))
	fmt.Fprintf(w, "may not:\t%s\n", orNone(strings.Join(d.MayNot, ", ")))
}

func actorsShowVerb() verbSpec {
	var id string
	return verbSpec{name: "show", short: "Show one actor and the verbs it may do", readOnly: true,
		flags: func(fs *pflag.FlagSet) { fs.StringVar(&id, "id", "", "the actor") },
		run: func(ctx context.Context, g *gateRun) (output, error) {
			l, err := g.open(needID("show", id))
			if err != nil {
				return nil, err
			}
			a, err := l.ActorByID(ctx, id)
			if err != nil {
				return nil, err
			}
			d := actorDetail{actorView: viewOfActor(a), May: []string{}, MayNot: []string{}}
			for _, p := range ledger.Permits {
				if ledger.Allows(a, p) {
					d.May = append(d.May, string(p.Verb))
				} else {
					d.MayNot = append(d.MayNot, string(p.Verb))
				}
			}
			sort.Strings(d.May)
			sort.Strings(d.MayNot)
			return d, nil
		}}
}

func rolesVerb(name, short string, change func(l *ledger.Ledger, ctx context.Context, by, id string, rs []ledger.Role) (ledger.Actor, error)) verbSpec {
	var id, roles string
	return verbSpec{name: name, short: short, actor: true,
		flags: func(fs *pflag.FlagSet) {
			fs.StringVar(&id, "id", "", "the actor")
			fs.StringVar(&roles, "roles", "", "comma-separated roles")
		},
		run: func(ctx context.Context, g *gateRun) (output, error) {
			var rs []ledger.Role
			l, err := g.open(needID(name, id), func() (err error) { rs, err = parseRolesFlag(name, roles, true); return err })
			if err != nil {
				return nil, err
			}
			a, err := change(l, ctx, g.actor, id, rs)
			if err != nil {
				return nil, err
			}
			return viewOfActor(a), nil
		}}
}

func actorsGrantVerb() verbSpec {
	return rolesVerb("grant", "Give an actor roles", (*ledger.Ledger).GrantRoles)
}

func actorsRevokeVerb() verbSpec {
	return rolesVerb("revoke", "Take roles from an actor (not the last admin's or stop holder's)", (*ledger.Ledger).RevokeRoles)
}

func enableVerb(name, short string, enabled bool) verbSpec {
	var id string
	return verbSpec{name: name, short: short, actor: true,
		flags: func(fs *pflag.FlagSet) { fs.StringVar(&id, "id", "", "the actor") },
		run: func(ctx context.Context, g *gateRun) (output, error) {
			l, err := g.open(needID(name, id))
			if err != nil {
				return nil, err
			}
			a, err := l.SetEnabled(ctx, g.actor, id, enabled)
			if err != nil {
				return nil, err
			}
			return viewOfActor(a), nil
		}}
}

func actorsDisableVerb() verbSpec {
	return enableVerb("disable", "Disable an actor: it can do nothing (not the last admin or stop holder)", false)
}

func actorsEnableVerb() verbSpec {
	return enableVerb("enable", "Enable a disabled actor again", true)
}

// issuedToken is printed once; the ledger keeps only its hash.
type issuedToken struct {
	Actor string `json:"actor"`
	Token string `json:"token"`
}

func (t issuedToken) text(w io.Writer) {
	fmt.Fprintf(w, "token for %s (shown once; the ledger keeps only its SHA-256):\n%s\n", t.Actor, t.Token)
}

func actorsTokenVerb() verbSpec {
	var id string
	return verbSpec{name: "token", short: "Issue a 256-bit token for an actor, shown once", actor: true,
		flags: func(fs *pflag.FlagSet) { fs.StringVar(&id, "id", "", "the actor the token proves") },
		run: func(ctx context.Context, g *gateRun) (output, error) {
			l, err := g.open(needID("token", id))
			if err != nil {
				return nil, err
			}
			tok, err := l.IssueToken(ctx, g.actor, id)
			if err != nil {
				return nil, err
			}
			return issuedToken{Actor: id, Token: tok}, nil
		}}
}

type modeView struct {
	Mode   string   `json:"mode"`
	Tokens []string `json:"token_roles"`
}

func (m modeView) text(w io.Writer) {
	fmt.Fprintf(w, "mode: %s\n", m.Mode)
	if len(m.Tokens) > 0 {
		fmt.Fprintf(w, "tokens required for: %s\n", strings.Join(m.Tokens, ", "))
	}
}

func actorsRequireVerb() verbSpec {
	var tokens bool
	var tokenRoles string
	return verbSpec{name: "require", short: "Switch the ledger to registered mode (needs an enabled admin and stop holder)", actor: true,
		flags: func(fs *pflag.FlagSet) {
			fs.BoolVar(&tokens, "tokens", false, "require tokens for approve, resolve, release, takeover, stop and admin")
			fs.StringVar(&tokenRoles, "token-roles", "", "require tokens for these roles instead (comma-separated)")
		},
		run: func(ctx context.Context, g *gateRun) (output, error) {
			var rs []ledger.Role
			l, err := g.open(func() (err error) {
				if tokenRoles != "" {
					rs, err = parseRolesFlag("require", tokenRoles, false)
				} else if tokens {
					rs = ledger.DefaultTokenRoles
				}
				return err
			})
			if err != nil {
				return nil, err
			}
			if err := l.Require(ctx, g.actor, rs); err != nil {
				return nil, err
			}
			m, err := l.Mode(ctx)
			return modeView{Mode: modeName(m), Tokens: roleNames(m.TokenRoles)}, err
		}}
}

func newPolicyCmd() *cobra.Command {
	return newVerbFamily("policy", "Say which action types a policy may approve",
		`policy sets, per action type, whether a policy actor may approve it and on
which material values (--requires crm.consent=yes), and whether it needs two
persons (the approver is not the proposer, the executor not the approver).
A type with no policy needs a person's approval. Every set raises the policy
version; an approval records the version it was given under and holds at
send only while the current version would still allow it.`, []func() verbSpec{policyShowVerb, policySetVerb})
}

type policyView struct {
	ActionType     string            `json:"action_type"`
	PolicyApproves bool              `json:"policy_approves"`
	Requires       map[string]string `json:"requires"`
	TwoPerson      bool              `json:"two_person"`
	Version        int64             `json:"version"`
	SetBy          string            `json:"set_by"`
	Says           string            `json:"says"`
}

func viewOfPolicy(p ledger.ActionPolicy) policyView {
	return policyView{ActionType: p.ActionType, PolicyApproves: p.PolicyApproves, Requires: p.Requires, TwoPerson: p.TwoPerson,
		Version: p.Version, SetBy: p.SetBy, Says: p.Describe()}
}

func (p policyView) text(w io.Writer) {
	fmt.Fprintf(w, "%s\tv%d\t%s\t%s\n", p.ActionType, p.Version, p.SetBy, p.Says)
}

type policyList struct {
	Version  int64        `json:"version"`
	Policies []policyView `json:"policies"`
}

func (l policyList) text(w io.Writer) {
	fmt.Fprintf(w, "policy version %d; a type not listed needs a person's approval\n", l.Version)
	if len(l.Policies) > 0 {
		fmt.Fprintln(w, "TYPE\tVERSION\tSET BY\tPOLICY")
	}
	for _, p := range l.Policies {
		p.text(w)
	}
}

func policyShowVerb() verbSpec {
	return verbSpec{name: "show", short: "Show the approval policies", readOnly: true,
		run: func(ctx context.Context, g *gateRun) (output, error) {
			l, err := g.open()
			if err != nil {
				return nil, err
			}
			m, err := l.Mode(ctx)
			if err != nil {
				return nil, err
			}
			ps, err := l.Policies(ctx)
			if err != nil {
				return nil, err
			}
			out := policyList{Version: m.PolicyVersion, Policies: []policyView{}}
			for _, p := range ps {
				out.Policies = append(out.Policies, viewOfPolicy(p))
			}
			return out, nil
		}}
}

func policySetVerb() verbSpec {
	var actionType string
	var approves, twoPerson bool
	var requires []string
	return verbSpec{name: "set", short: "Set the approval policy of an action type (a new policy version)", actor: true,
		flags: func(fs *pflag.FlagSet) {
			fs.StringVar(&actionType, "type", "", "the action type, e.g. reply_ack")
			fs.BoolVar(&approves, "policy-approves", false, "a policy actor may approve it")
			fs.StringArrayVar(&requires, "requires", nil, "source.field=value a policy approval must rest on (repeatable)")
			fs.BoolVar(&twoPerson, "two-person", false, "the approver is not the proposer, the executor not the approver")
		},
		run: func(ctx context.Context, g *gateRun) (output, error) {
			req := map[string]string{}
			l, err := g.open(func() error {
				if actionType == "" {
					return usageErr("policy set needs --type TYPE")
				}
				for _, r := range requires {
					k, v, ok := strings.Cut(r, "=")
					if !ok || !strings.Contains(k, ".") {
						return usageErr("policy set: --requires %q: want source.field=value", r)
					}
					req[k] = v
				}
				if len(req) > 0 && !approves {
					return usageErr("policy set: --requires says what a policy approval rests on; give --policy-approves too")
				}
				return nil
			})
			if err != nil {
				return nil, err
			}
			p, err := l.SetPolicy(ctx, g.actor, ledger.ActionPolicy{ActionType: actionType, PolicyApproves: approves, Requires: req, TwoPerson: twoPerson})
			if err != nil {
				return nil, err
			}
			return viewOfPolicy(p), nil
		}}
}

package ledger

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// History line kinds of actors, modes, tokens and policies.
const (
	EvActorChanged EventKind = "actor_changed"
	EvModeChanged  EventKind = "mode_changed"
	EvTokenIssued  EventKind = "token_issued"
	EvPolicySet    EventKind = "policy_set"
)

// TokenPrefix starts every token, so that one printed by accident is
// recognised (and redacted) wherever it turns up.
const TokenPrefix = "ght_"

// Mode is how a ledger treats --as.
type Mode struct {
	// Registered: every actor must be registered, enabled and hold the
	// role its verb needs. False: an open ledger, which takes any name.
	Registered bool
	// TokenRoles are the roles whose acts need the actor's own token.
	TokenRoles []Role
	// PolicyVersion is the version of the approval policies.
	PolicyVersion int64
}

// Mode reads the ledger's mode.
func (l *Ledger) Mode(ctx context.Context) (Mode, error) {
	var m Mode
	err := l.read(ctx, func(tx queryTx) error {
		var reg int
		var roles string
		if err := tx.QueryRow(`SELECT registered, token_roles, policy_version FROM actor_mode WHERE id = 1`).Scan(&reg, &roles, &m.PolicyVersion); err != nil {
			return fmt.Errorf("read the ledger's mode: %w", err)
		}
		m.Registered, m.TokenRoles = reg == 1, parseRoles(roles)
		return nil
	})
	return m, err
}

const actorCols = `id, kind, display_name, roles, enabled, created_by`

func scanActor(s interface{ Scan(...any) error }) (Actor, error) {
	var a Actor
	var kind, roles string
	var enabled int
	err := s.Scan(&a.ID, &kind, &a.DisplayName, &roles, &enabled, &a.CreatedBy)
	a.Kind, a.Roles, a.Enabled = Kind(kind), parseRoles(roles), enabled == 1
	return a, err
}

func getActor(q queryer, id string) (Actor, error) {
	a, err := scanActor(q.QueryRow(`SELECT `+actorCols+` FROM actors WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return a, fmt.Errorf("actor %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return a, fmt.Errorf("read actor %s: %w", id, err)
	}
	return a, nil
}

// ActorByID reads one registered actor.
func (l *Ledger) ActorByID(ctx context.Context, id string) (Actor, error) {
	var a Actor
	err := l.read(ctx, func(tx queryTx) (err error) {
		a, err = getActor(tx, id)
		return err
	})
	return a, err
}

// Actors lists the registered actors by id.
func (l *Ledger) Actors(ctx context.Context) ([]Actor, error) {
	var out []Actor
	err := l.read(ctx, func(tx queryTx) error {
		rows, err := tx.Query(`SELECT ` + actorCols + ` FROM actors ORDER BY id`)
		if err != nil {
			return fmt.Errorf("list actors: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			a, err := scanActor(rows)
			if err != nil {
				return err
			}
			out = append(out, a)
		}
		return rows.Err()
	})
	return out, err
}

// Permitted reports whether actor may do verb now, and why not: what the
// gate would answer, without recording anything (for a screen that shows
// an operator what they may do).
func (l *Ledger) Permitted(ctx context.Context, actor string, verb Verb) (bool, string, error) {
	var why string
	err := l.read(ctx, func(tx queryTx) error {
		s, err := readStanding(tx, actor, tokenHash(tokenFrom(ctx)))
		if err != nil && missingTable(err) {
			return nil // a ledger from before schema 16 is open
		}
		if err != nil || !s.registered {
			return err
		}
		p, _ := PermitFor(verb)
		why = s.refusal(verb, p.Role, "")
		return nil
	})
	return why == "" && err == nil, why, err
}

func readStanding(q queryer, actor, hash string) (standing, error) {
	var s standing
	var reg, enabled int
	var tokenRoles, kind, roles string
	if err := q.QueryRow(permitRead, hash, actor).Scan(&reg, &tokenRoles, &kind, &roles, &enabled, &s.tokenOf); err != nil {
		return s, fmt.Errorf("read the standing of %s: %w", actor, err)
	}
	s.registered, s.tokenRoles = reg == 1, parseRoles(tokenRoles)
	s.known = kind != ""
	s.actor = Actor{ID: actor, Kind: Kind(kind), Roles: parseRoles(roles), Enabled: enabled == 1}
	return s, nil
}

// Authorize checks that actor may do verb, for a verb that has no deciding
// transaction of its own (a backup, a check), or before work that may end
// writing nothing. It reads; only a refusal writes, its history line,
// except on a ledger opened read-only: reading never writes.
func (l *Ledger) Authorize(ctx context.Context, actor string, verb Verb) error {
	ok, why, err := l.Permitted(ctx, actor, verb)
	if err != nil || ok {
		return err
	}
	if l.readOnlyHandle() {
		return &PermitError{Actor: actor, Verb: verb, Why: why}
	}
	return l.writeRelaxed(ctx, func(t *wtx) error {
		_, err := t.permit(actor, verb, "", "")
		return err
	})
}

// readOnlyHandle reports whether l has no write connection and will not
// open one.
func (l *Ledger) readOnlyHandle() bool {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	return l.w == nil && !l.onDemand
}

// manage runs fn, a change of actors, policies or the mode, in one
// transaction after checking that by may make it: an admin on a registered
// ledger, anyone on an open one (the bootstrap).
func (l *Ledger) manage(ctx context.Context, by string, verb Verb, fn func(t *wtx, s standing) error) error {
	if strings.TrimSpace(by) == "" {
		return invalidf("%s: say who makes the change (--as)", verb)
	}
	return l.write(ctx, func(t *wtx) error {
		s, err := t.permit(by, verb, "", "")
		if err != nil {
			return err
		}
		return fn(t, s)
	})
}

// AddActor registers an actor. Roles default by kind (DefaultRoles) when
// none are given. On an open ledger anyone may add one (the first is
// usually the admin who then requires registration); on a registered one
// only an admin.
func (l *Ledger) AddActor(ctx context.Context, by string, a Actor) (Actor, error) {
	if err := ValidateKeyFact("actor id", a.ID); err != nil {
		return a, err
	}
	if _, err := ParseKind(string(a.Kind)); err != nil {
		return a, err
	}
	if err := ValidateHeaderText("display name", a.DisplayName); err != nil {
		return a, err
	}
	if a.Roles == nil {
		a.Roles = DefaultRoles(a.Kind)
	}
	if a.Kind != KindPerson && slices.Contains(a.Roles, RoleAdmin) {
		return a, invalidf("%s is a %s: admin is a person's role", a.ID, a.Kind)
	}
	a.Enabled, a.CreatedBy = true, by
	err := l.manage(ctx, by, VerbManageActors, func(t *wtx, _ standing) error {
		res, err := t.Exec(`INSERT INTO actors (id, kind, display_name, roles, enabled, created_by, created_at, updated_at)
			VALUES (?, ?, ?, ?, 1, ?, ?, ?) ON CONFLICT(id) DO NOTHING`,
			a.ID, string(a.Kind), a.DisplayName, joinRoles(a.Roles), by, ns(t.now()), ns(t.now()))
		if err != nil {
			return fmt.Errorf("add actor %s: %w", a.ID, err)
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return invalidf("actor %s is registered already; grant or revoke its roles instead", a.ID)
		}
		t.note(map[string]any{"actor": a.ID, "kind": string(a.Kind), "roles": joinRoles(a.Roles)}, "")
		return t.event(by, "", "", EvActorChanged, "", "%s registered %s %s with roles %s.", by, a.Kind, a.ID, orDash(joinRoles(a.Roles)))
	})
	a.Roles = parseRoles(joinRoles(a.Roles))
	return a, err
}

// GrantRoles gives an actor roles.
func (l *Ledger) GrantRoles(ctx context.Context, by, id string, roles []Role) (Actor, error) {
	return l.changeActor(ctx, by, id, func(a *Actor) (string, error) {
		a.Roles = append(a.Roles, roles...)
		return fmt.Sprintf("granted %s the roles %s", id, joinRoles(roles)), nil
	})
}

// RevokeRoles takes roles from an actor. The last enabled admin or stop
// holder of a registered ledger keeps them.
func (l *Ledger) RevokeRoles(ctx context.Context, by, id string, roles []Role) (Actor, error) {
	return l.changeActor(ctx, by, id, func(a *Actor) (string, error) {
		a.Roles = slices.DeleteFunc(a.Roles, func(r Role) bool { return slices.Contains(roles, r) })
		return fmt.Sprintf("revoked the roles %s of %s", joinRoles(roles), id), nil
	})
}

// SetEnabled enables or disables an actor; a disabled actor can do
// nothing. The last enabled admin or stop holder of a registered ledger
// stays enabled.
func (l *Ledger) SetEnabled(ctx context.Context, by, id string, enabled bool) (Actor, error) {
	return l.changeActor(ctx, by, id, func(a *Actor) (string, error) {
		a.Enabled = enabled
		if enabled {
			return "enabled " + id, nil
		}
		return "disabled " + id, nil
	})
}

func (l *Ledger) changeActor(ctx context.Context, by, id string, change func(*Actor) (string, error)) (Actor, error) {
	var out Actor
	err := l.manage(ctx, by, VerbManageActors, func(t *wtx, s standing) error {
		a, err := getActor(t, id)
		if err != nil {
			return err
		}
		what, err := change(&a)
		if err != nil {
			return err
		}
		a.Roles = parseRoles(joinRoles(a.Roles))
		if a.Kind != KindPerson && (a.Has(RoleAdmin)) {
			return invalidf("%s is not a person: admin is a person's role (%s is a %s)", id, id, a.Kind)
		}
		if s.registered {
			for _, r := range []Role{RoleAdmin, RoleStop} {
				if err := t.keepsHolder(a, r); err != nil {
					return err
				}
			}
		}
		if _, err := t.Exec(`UPDATE actors SET roles = ?, enabled = ?, updated_at = ?, version = version + 1 WHERE id = ?`,
			joinRoles(a.Roles), boolInt(a.Enabled), ns(t.now()), id); err != nil {
			return fmt.Errorf("change actor %s: %w", id, err)
		}
		out = a
		t.note(map[string]any{"actor": id, "roles": joinRoles(a.Roles), "enabled": a.Enabled}, "")
		return t.event(by, "", "", EvActorChanged, "", "%s %s; its roles are now %s%s.", by, what, orDash(joinRoles(a.Roles)),
			map[bool]string{true: "", false: " (disabled)"}[a.Enabled])
	})
	return out, err
}

// keepsHolder refuses a change that would leave a registered ledger
// without an enabled holder of role: nobody could then stop it, or change
// its actors.
func (t *wtx) keepsHolder(after Actor, role Role) error {
	if after.Enabled && after.Has(role) {
		return nil
	}
	var others int
	if err := t.QueryRow(`SELECT count(*) FROM actors WHERE id <> ? AND enabled = 1 AND (',' || roles || ',') LIKE ?`,
		after.ID, "%,"+string(role)+",%").Scan(&others); err != nil {
		return fmt.Errorf("count %s holders: %w", role, err)
	}
	before, err := getActor(t, after.ID)
	if err != nil {
		return err
	}
	if others == 0 && before.Enabled && before.Has(role) {
		return invalidf("%s is the last enabled actor with the %s role; grant it to another first", after.ID, role)
	}
	return nil
}

// IssueToken issues a new 256-bit token for an actor and returns it: the
// only time it is shown. The ledger keeps only its SHA-256.
func (l *Ledger) IssueToken(ctx context.Context, by, id string) (string, error) {
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", fmt.Errorf("draw a token: %w", err)
	}
	token := TokenPrefix + base64.RawURLEncoding.EncodeToString(raw[:])
	err := l.manage(ctx, by, VerbIssueToken, func(t *wtx, _ standing) error {
		if _, err := getActor(t, id); err != nil {
			return err
		}
		if _, err := t.Exec(`INSERT INTO actor_tokens (hash, actor, created_by, created_at) VALUES (?, ?, ?, ?)`,
			tokenHash(token), id, by, ns(t.now())); err != nil {
			return fmt.Errorf("record a token of %s: %w", id, err)
		}
		return t.event(by, "", "", EvTokenIssued, "", "%s issued a token for %s (the ledger keeps only its hash).", by, id)
	})
	if err != nil {
		return "", err
	}
	return token, nil
}

// Require switches the ledger to registered mode, needing tokens for
// tokenRoles (none: no token is asked for). It refuses unless an enabled
// admin and an enabled holder of the stop role exist, and by is an
// enabled admin (with their token, when admin acts need one).
func (l *Ledger) Require(ctx context.Context, by string, tokenRoles []Role) error {
	return l.manage(ctx, by, VerbRequireRegistered, func(t *wtx, s standing) error {
		for _, r := range []Role{RoleAdmin, RoleStop} {
			var n int
			if err := t.QueryRow(`SELECT count(*) FROM actors WHERE enabled = 1 AND (',' || roles || ',') LIKE ?`, "%,"+string(r)+",%").Scan(&n); err != nil {
				return fmt.Errorf("count %s holders: %w", r, err)
			}
			if n == 0 {
				return invalidf("actors require: no enabled actor holds the %s role; add one first (gatehouse actors add --id … --kind person --roles …,%s)", r, r)
			}
		}
		// Whoever switches must be able to act once it is switched.
		after := s
		if !s.registered {
			var err error
			if after, err = t.standingOf(by); err != nil {
				return err
			}
		}
		after.registered, after.tokenRoles = true, tokenRoles
		if why := after.refusal(VerbRequireRegistered, RoleAdmin, ""); why != "" {
			return invalidf("actors require: %s", why)
		}
		if _, err := t.Exec(`UPDATE actor_mode SET registered = 1, token_roles = ?, version = version + 1 WHERE id = 1`, joinRoles(tokenRoles)); err != nil {
			return fmt.Errorf("switch to registered mode: %w", err)
		}
		t.note(map[string]any{"registered": true, "token_roles": joinRoles(tokenRoles)}, "")
		tokens := "no act needs a token"
		if len(tokenRoles) > 0 {
			tokens = "acts of the roles " + joinRoles(tokenRoles) + " need the actor's own token"
		}
		return t.event(by, "", "", EvModeChanged, "", "%s switched the ledger to registered mode: every --as must be an enabled actor with the role its verb needs; %s.", by, tokens)
	})
}

// ActionPolicy is how approvals of one action type are given.
type ActionPolicy struct {
	ActionType string
	// PolicyApproves lets a policy actor approve the type, when every
	// material value in Requires is what the approval rests on.
	PolicyApproves bool
	Requires       map[string]string
	// TwoPerson: the approver is not the proposer, the executor not the
	// approver.
	TwoPerson bool
	Version   int64
	SetBy     string
}

// Policies lists the approval policies by action type.
func (l *Ledger) Policies(ctx context.Context) ([]ActionPolicy, error) {
	var out []ActionPolicy
	err := l.read(ctx, func(tx queryTx) error {
		rows, err := tx.Query(`SELECT action_type, policy_approves, requires, two_person, version, set_by FROM policies ORDER BY action_type`)
		if err != nil {
			return fmt.Errorf("list policies: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			p, err := scanPolicy(rows)
			if err != nil {
				return err
			}
			out = append(out, p)
		}
		return rows.Err()
	})
	return out, err
}

func scanPolicy(s interface{ Scan(...any) error }) (ActionPolicy, error) {
	var p ActionPolicy
	var pa, two int
	var req string
	if err := s.Scan(&p.ActionType, &pa, &req, &two, &p.Version, &p.SetBy); err != nil {
		return p, err
	}
	p.PolicyApproves, p.TwoPerson = pa == 1, two == 1
	if err := json.Unmarshal([]byte(req), &p.Requires); err != nil {
		return p, fmt.Errorf("policy of %s: %w", p.ActionType, err)
	}
	return p, nil
}

// policyOf reads the policy of an action type inside t (ok false: none).
func (t *wtx) policyOf(actionType string) (ActionPolicy, bool, error) {
	return readPolicy(t, actionType)
}

// readPolicy reads the policy of an action type (ok false: none).
func readPolicy(q queryer, actionType string) (ActionPolicy, bool, error) {
	p, err := scanPolicy(q.QueryRow(`SELECT action_type, policy_approves, requires, two_person, version, set_by FROM policies WHERE action_type = ?`, actionType))
	if errors.Is(err, sql.ErrNoRows) {
		return p, false, nil
	}
	if err != nil {
		return p, false, fmt.Errorf("read the policy of %s: %w", actionType, err)
	}
	return p, true, nil
}

// SetPolicy sets the approval policy of an action type, under the next
// policy version; an approval given under an earlier one is checked
// against it at execute.
func (l *Ledger) SetPolicy(ctx context.Context, by string, p ActionPolicy) (ActionPolicy, error) {
	if err := ValidateKeyFact("action type", p.ActionType); err != nil {
		return p, err
	}
	for name := range p.Requires {
		if src, field, ok := strings.Cut(name, "."); !ok || src == "" || field == "" {
			return p, invalidf("policy %s: material field %q needs source.field", p.ActionType, name)
		}
	}
	if p.Requires == nil {
		p.Requires = map[string]string{}
	}
	req, _ := json.Marshal(p.Requires)
	p.SetBy = by
	err := l.manage(ctx, by, VerbSetPolicy, func(t *wtx, _ standing) error {
		if err := t.QueryRow(`UPDATE actor_mode SET policy_version = policy_version + 1 WHERE id = 1 RETURNING policy_version`).Scan(&p.Version); err != nil {
			return fmt.Errorf("raise the policy version: %w", err)
		}
		if _, err := t.Exec(`INSERT INTO policies (action_type, policy_approves, requires, two_person, version, set_by, set_at)
			VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT(action_type) DO UPDATE SET policy_approves = excluded.policy_approves,
			requires = excluded.requires, two_person = excluded.two_person, version = excluded.version, set_by = excluded.set_by, set_at = excluded.set_at`,
			p.ActionType, boolInt(p.PolicyApproves), string(req), boolInt(p.TwoPerson), p.Version, by, ns(t.now())); err != nil {
			return fmt.Errorf("set the policy of %s: %w", p.ActionType, err)
		}
		t.note(map[string]any{"action_type": p.ActionType, "policy_approves": p.PolicyApproves, "requires": p.Requires,
			"two_person": p.TwoPerson, "version": p.Version}, "")
		return t.event(by, "", "", EvPolicySet, "", "%s set policy version %d for %s: %s.", by, p.Version, p.ActionType, p.describe())
	})
	return p, err
}

func (p ActionPolicy) describe() string {
	var parts []string
	if p.PolicyApproves {
		s := "a policy may approve it"
		if len(p.Requires) > 0 {
			var conds []string
			for _, k := range sortedKeys(p.Requires) {
				conds = append(conds, k+"="+p.Requires[k])
			}
			s += " when " + strings.Join(conds, ", ")
		}
		parts = append(parts, s)
	} else {
		parts = append(parts, "a person approves it")
	}
	if p.TwoPerson {
		parts = append(parts, "two persons: the approver is not the proposer, the executor not the approver")
	}
	return strings.Join(parts, "; ")
}

// Describe says what the policy allows, in a sentence.
func (p ActionPolicy) Describe() string { return p.describe() }

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// policyAllows reports why a policy actor's approval of an action type on
// these material values is not allowed under p ("" : it is).
func policyAllows(p ActionPolicy, ok bool, actionType string, material []MaterialRead) string {
	if !ok || !p.PolicyApproves {
		return fmt.Sprintf("no policy lets a policy actor approve %s; it needs a person", actionType)
	}
	got := materialMap(material)
	for _, k := range sortedKeys(p.Requires) {
		if v, has := got[k]; !has || v != p.Requires[k] {
			return fmt.Sprintf("policy version %d approves %s only when %s=%s (the approval rests on %s)", p.Version, actionType, k, p.Requires[k], orDash(got[k]))
		}
	}
	return ""
}

// missingTable reports whether err is a read of a table an older schema
// lacks (a backup of an older ledger is read without migrating it).
func missingTable(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "no such table") || (strings.Contains(msg, "relation") && strings.Contains(msg, "does not exist"))
}

package ledger

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Kind is what an actor is. The caller's name is not an identity: what a
// registered actor may do follows from its kind and its roles.
type Kind string

// Actor kinds.
const (
	KindPerson   Kind = "person"
	KindWorkflow Kind = "workflow"
	KindAgent    Kind = "agent"
	KindPolicy   Kind = "policy"
)

// Kinds lists every actor kind.
var Kinds = []Kind{KindPerson, KindWorkflow, KindAgent, KindPolicy}

// Role is a permission an actor holds.
type Role string

// Roles.
const (
	RolePropose  Role = "propose"  // propose, submit, cancel, correct; audience import and remove
	RoleApprove  Role = "approve"  // approve an action or a release
	RoleExecute  Role = "execute"  // claim, send, reconcile, release a task, complete
	RoleResolve  Role = "resolve"  // record an outcome checked by hand
	RoleRelease  Role = "release"  // lift holds
	RoleTakeover Role = "takeover" // take a task over from its owner
	RoleStop     Role = "stop"     // stop and resume all execution
	RoleOperate  Role = "operate"  // the inspector's and the review's operations: hold, operating mode
	RoleReview   Role = "review"   // read the whole ledger for a review or a check
	RoleAdmin    Role = "admin"    // actors, policies, tokens, modes; backup and restore
)

// Roles lists every role in the order the documentation gives them.
var Roles = []Role{RolePropose, RoleApprove, RoleExecute, RoleResolve, RoleRelease, RoleTakeover, RoleStop,
	RoleOperate, RoleReview, RoleAdmin}

// DefaultRoles are the roles an actor of a kind is given when none are
// named: what the kind can do in the ordinary course. Stop and admin are
// never given by default; a person is given them by name.
func DefaultRoles(k Kind) []Role {
	switch k {
	case KindPerson:
		return []Role{RolePropose, RoleApprove, RoleExecute, RoleResolve, RoleRelease, RoleTakeover, RoleOperate, RoleReview}
	case KindWorkflow:
		return []Role{RolePropose, RoleExecute}
	case KindAgent:
		return []Role{RolePropose}
	case KindPolicy:
		return []Role{RoleApprove}
	}
	return nil
}

// DefaultTokenRoles are the roles whose acts need the actor's own token when
// a ledger requires tokens without naming roles: the acts a workflow must
// never pass off as a person's.
var DefaultTokenRoles = []Role{RoleApprove, RoleResolve, RoleRelease, RoleTakeover, RoleStop, RoleAdmin}

// Verb names one operation the gate permits or refuses. Gate verbs are
// their bare names; other families are prefixed ("audience send").
type Verb string

// Verbs.
const (
	VerbClaim       Verb = "claim"
	VerbView        Verb = "view"
	VerbLeave       Verb = "leave"
	VerbPropose     Verb = "propose"
	VerbSubmit      Verb = "submit"
	VerbApprove     Verb = "approve"
	VerbExecute     Verb = "send"
	VerbReconcile   Verb = "reconcile"
	VerbResolve     Verb = "resolve"
	VerbHold        Verb = "hold"
	VerbReleaseHold Verb = "release-hold"
	VerbCancel      Verb = "cancel"
	VerbCorrect     Verb = "correct"
	VerbComplete    Verb = "complete"
	VerbTakeover    Verb = "takeover"
	VerbRelease     Verb = "release"
	VerbStop        Verb = "stop"
	VerbResume      Verb = "resume"

	VerbAudienceImport    Verb = "audience reconcile"
	VerbAudienceRemove    Verb = "audience remove"
	VerbAudienceApprove   Verb = "audience approve"
	VerbAudienceSend      Verb = "audience send"
	VerbCustomersImport   Verb = "import customers"
	VerbBackup            Verb = "ledger backup"
	VerbRestore           Verb = "ledger restore"
	VerbMarkRestored      Verb = "ledger mark-restored"
	VerbOperate           Verb = "operate"
	VerbManageActors      Verb = "change actors"
	VerbSetPolicy         Verb = "set policies"
	VerbIssueToken        Verb = "issue tokens"
	VerbRequireRegistered Verb = "require registration"
)

// Permit is one row of the table: the role a verb needs and the kinds of
// actor that may hold it for that verb, with the reason a refusal gives
// for a kind that may not.
type Permit struct {
	Verb  Verb
	Role  Role   // "" : any enabled actor
	Kinds []Kind // the kinds that may do it
	// KindWhy is what a refusal says to an actor of another kind.
	KindWhy string
}

var (
	anyKind    = []Kind{KindPerson, KindWorkflow, KindAgent, KindPolicy}
	actingKind = []Kind{KindPerson, KindWorkflow, KindAgent}
	runsKind   = []Kind{KindPerson, KindWorkflow}
	personOnly = []Kind{KindPerson}
)

// Permits is the one table of who may do what: every verb of the gate, the
// audience and the ledger, and the inspector's and review's operations,
// which go through these verbs. docs/cli.md prints it; every check reads it.
var Permits = []Permit{
	{VerbView, "", anyKind, ""},
	{VerbLeave, "", anyKind, ""},
	{VerbPropose, RolePropose, actingKind, "a policy only approves"},
	{VerbSubmit, RolePropose, actingKind, "a policy only approves"},
	{VerbCancel, RolePropose, actingKind, "a policy only approves"},
	{VerbCorrect, RolePropose, actingKind, "a policy only approves"},
	{VerbApprove, RoleApprove, []Kind{KindPerson, KindPolicy}, "an approval is a person's or a policy's decision"},
	{VerbClaim, RoleExecute, runsKind, "an owner is a person or a workflow"},
	{VerbExecute, RoleExecute, actingKind, "a policy only approves"},
	{VerbReconcile, RoleExecute, actingKind, "a policy only approves"},
	{VerbRelease, RoleExecute, runsKind, "an owner is a person or a workflow"},
	{VerbComplete, RoleExecute, runsKind, "an owner is a person or a workflow"},
	{VerbResolve, RoleResolve, personOnly, "resolving an outcome is a person's act"},
	{VerbHold, RoleOperate, actingKind, "a policy only approves"},
	{VerbReleaseHold, RoleRelease, runsKind, "lifting a hold is a person's act or a workflow's given the role"},
	{VerbTakeover, RoleTakeover, personOnly, "a takeover is a person's act"},
	{VerbStop, RoleStop, runsKind, "the stop switch is a person's or a workflow's given the role"},
	{VerbResume, RoleStop, runsKind, "the stop switch is a person's or a workflow's given the role"},
	{VerbAudienceImport, RolePropose, runsKind, "an audience is prepared by a person or a workflow"},
	{VerbCustomersImport, RolePropose, runsKind, "an audience is prepared by a person or a workflow"},
	{VerbAudienceRemove, RolePropose, runsKind, "an audience is prepared by a person or a workflow"},
	{VerbAudienceApprove, RoleApprove, personOnly, "a release is approved by a person"},
	{VerbAudienceSend, RoleExecute, runsKind, "a release is sent by a person or a workflow"},
	{VerbOperate, RoleOperate, personOnly, "operating mode is a person's"},
	{VerbBackup, RoleAdmin, personOnly, "managing the ledger is a person's act"},
	{VerbRestore, RoleAdmin, personOnly, "managing the ledger is a person's act"},
	{VerbMarkRestored, RoleAdmin, personOnly, "managing the ledger is a person's act"},
	{VerbManageActors, RoleAdmin, personOnly, "managing actors is a person's act"},
	{VerbIssueToken, RoleAdmin, personOnly, "managing actors is a person's act"},
	{VerbRequireRegistered, RoleAdmin, personOnly, "managing actors is a person's act"},
	{VerbSetPolicy, RoleAdmin, personOnly, "managing policies is a person's act"},
}

// PermitFor returns the table's row for verb.
func PermitFor(v Verb) (Permit, bool) {
	for _, p := range Permits {
		if p.Verb == v {
			return p, true
		}
	}
	return Permit{}, false
}

// ErrNotPermitted: the actor may not do this (not registered, disabled,
// lacking the role, of a kind that may not, without its token). The
// refusal is recorded; nothing else is.
var ErrNotPermitted = errors.New("not permitted")

// PermitError says who was refused what, and why.
type PermitError struct {
	Actor string
	Verb  Verb
	Why   string
}

func (e *PermitError) Error() string {
	return fmt.Sprintf("%s may not %s: %s", e.Actor, e.Verb, e.Why)
}

// Unwrap makes errors.Is(err, ErrNotPermitted) true.
func (e *PermitError) Unwrap() error { return ErrNotPermitted }

// EvNotPermitted is a refusal by the permission table; counted.
const EvNotPermitted EventKind = "not_permitted"

// Actor is a registered actor.
type Actor struct {
	ID          string
	Kind        Kind
	DisplayName string
	Roles       []Role
	Enabled     bool
	CreatedBy   string
}

// Has reports whether the actor holds role.
func (a Actor) Has(r Role) bool { return slices.Contains(a.Roles, r) }

// token carries a presented token in a context (WithToken).
type tokenKey struct{}

// WithToken makes every ledger operation run under ctx present token as
// the acting actor's proof (see `actors token`).
func WithToken(ctx context.Context, token string) context.Context {
	if token == "" {
		return ctx
	}
	return context.WithValue(ctx, tokenKey{}, token)
}

func tokenFrom(ctx context.Context) string {
	s, _ := ctx.Value(tokenKey{}).(string)
	return s
}

// permitRead reads, in one statement, the ledger's mode and the acting
// actor (and whose the presented token is).
const permitRead = `SELECT m.registered, m.token_roles, COALESCE(a.kind, ''), COALESCE(a.roles, ''), COALESCE(a.enabled, 0),
	COALESCE((SELECT k.actor FROM actor_tokens k WHERE k.hash = ? AND k.revoked = 0), '')
	FROM actor_mode m LEFT JOIN actors a ON a.id = ? WHERE m.id = 1`

// standingKey is an actor and the hash of the token presented for it.
type standingKey struct{ actor, token string }

// standing is what a deciding transaction knows of its actor.
type standing struct {
	registered bool
	tokenRoles []Role
	known      bool
	actor      Actor
	tokenOf    string // whose the presented token is ("" none)
}

// standingOf reads the ledger's mode and actor inside t. On PostgreSQL the
// read travels with the reads the verb sent ahead before it, so a check
// costs no round trip of its own when it comes before the verb's first
// read.
func (t *wtx) standingOf(actor string) (standing, error) {
	hash := tokenHash(t.token)
	if s, ok := t.standings[standingKey{actor, hash}]; ok {
		t.who = &s
		return s, nil
	}
	s, err := readStanding(t, actor, hash)
	if err == nil && t.standings != nil {
		t.standings[standingKey{actor, hash}] = s
	}
	if err == nil {
		t.who = &s
		mode := int32(modeOpen)
		if s.registered {
			mode = modeRegistered
		}
		t.l.seenMode.Store(mode)
	}
	return s, err
}

// What a handle's last permission check found the ledger to be.
const (
	modeUnseen = iota
	modeOpen
	modeRegistered
)

// CheckedOpen reports whether this handle's last permission check found
// an open ledger, one that took the actor's name on its word; false when
// it found a registered one or made no check. It reads nothing.
func (l *Ledger) CheckedOpen() bool { return l.seenMode.Load() == modeOpen }

// permit checks that actor may do verb, inside the deciding transaction (a
// change of roles cannot slip between check and write). On an open ledger
// everything is permitted. A refusal records its history line and returns
// an error that commits it; the caller must not have written anything
// before, and writes nothing after.
// taskID and key, when known, place the refusal in that task's and
// action's history.
func (t *wtx) permit(actor string, verb Verb, taskID, key string) (standing, error) {
	p, _ := PermitFor(verb)
	return t.permitAs(actor, verb, p.Role, "", taskID, key)
}

// permitAs is permit with the role given by the caller (a verb whose role
// depends on what it acts on); why, when not "", is what a refusal for a
// missing role says.
func (t *wtx) permitAs(actor string, verb Verb, role Role, why, taskID, key string) (standing, error) {
	s, err := t.standingOf(actor)
	if err != nil || !s.registered {
		return s, err
	}
	if reason := s.refusal(verb, role, why); reason != "" {
		return s, t.notPermitted(actor, verb, reason, taskID, key)
	}
	return s, nil
}

// judge refuses, with its history line, what s may not do by the table.
func (t *wtx) judge(s standing, actor string, verb Verb, taskID, key string) error {
	if !s.registered {
		return nil
	}
	p, _ := PermitFor(verb)
	if reason := s.refusal(verb, p.Role, ""); reason != "" {
		return t.notPermitted(actor, verb, reason, taskID, key)
	}
	return nil
}

// refusal is why s may not do verb with role ("" : it may).
func (s standing) refusal(verb Verb, role Role, why string) string {
	p, ok := PermitFor(verb)
	switch {
	case !ok:
		return "the gate has no rule for it"
	case !s.known:
		return s.actor.ID + " is not a registered actor of this ledger"
	case !s.actor.Enabled:
		return s.actor.ID + " is disabled"
	case !slices.Contains(p.Kinds, s.actor.Kind):
		return p.KindWhy
	case role != "" && !s.actor.Has(role):
		if why != "" {
			return why
		}
		return fmt.Sprintf("%s (%s) lacks the %s role", s.actor.ID, s.actor.Kind, role)
	case role != "" && slices.Contains(s.tokenRoles, role) && s.tokenOf != s.actor.ID:
		if s.tokenOf == "" {
			return fmt.Sprintf("the %s role needs %s's own token (--token or $GATEHOUSE_TOKEN)", role, s.actor.ID)
		}
		return fmt.Sprintf("the %s role needs %s's own token; the token presented is another actor's", role, s.actor.ID)
	}
	return ""
}

// notPermitted records a refusal and returns it, to be committed alone.
func (t *wtx) notPermitted(actor string, verb Verb, reason, taskID, key string) error {
	t.note(map[string]any{"verb": string(verb)}, "")
	if err := t.event(actor, taskID, key, EvNotPermitted, "", "%s may not %s: %s.", actor, verb, reason); err != nil {
		return err
	}
	return refuse(&PermitError{Actor: actor, Verb: verb, Why: reason})
}

func parseRoles(s string) []Role {
	if s == "" {
		return nil
	}
	var out []Role
	for _, r := range strings.Split(s, ",") {
		out = append(out, Role(r))
	}
	return out
}

func joinRoles(rs []Role) string {
	ss := make([]string, 0, len(rs))
	for _, r := range rs {
		ss = append(ss, string(r))
	}
	slices.Sort(ss)
	return strings.Join(slices.Compact(ss), ",")
}

// ParseRoles reads a comma-separated list of roles, refusing an unknown one.
func ParseRoles(s string) ([]Role, error) {
	var out []Role
	for _, r := range strings.Split(s, ",") {
		r = strings.TrimSpace(r)
		if r == "" {
			continue
		}
		if !slices.Contains(Roles, Role(r)) {
			return nil, invalidf("unknown role %q (roles: %s)", r, joinRoles(Roles))
		}
		out = append(out, Role(r))
	}
	return out, nil
}

// ParseKind reads an actor kind.
func ParseKind(s string) (Kind, error) {
	if !slices.Contains(Kinds, Kind(s)) {
		return "", invalidf("unknown actor kind %q (person, workflow, agent or policy)", s)
	}
	return Kind(s), nil
}

// tokenHash is how a token is stored and looked up: its SHA-256, hex. An
// absent token hashes to "", which no stored token has.
func tokenHash(token string) string {
	if token == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// Allows reports whether the table lets a (as registered now) do p's verb,
// tokens aside: for a screen or `actors show`. A verb whose role depends on
// what it acts on (release-hold) is judged by its table row.
func Allows(a Actor, p Permit) bool {
	s := standing{registered: true, known: true, actor: a, tokenOf: a.ID}
	return s.refusal(p.Verb, p.Role, "") == ""
}

package ledger

import (
	"fmt"
	"slices"
	"strings"
)

// approvalPolicy applies the approval policies of a registered ledger to
// an approval about to be recorded, refusing (with its history line) one
// they do not allow, and returns the policy version it is given under (0
// on an open ledger). A policy actor approves only the types a policy lets
// it, on the material values the policy names; a two-person type is not
// approved by its proposer, nor without the approver's own token once the
// ledger requires tokens.
func (t *wtx) approvalPolicy(a *Action, approver string, material []MaterialRead) (int64, error) {
	if t.who == nil || !t.who.registered || t.who.actor.ID != approver {
		return 0, nil
	}
	p, ok, err := t.policyOf(a.ActionType)
	if err != nil {
		return 0, err
	}
	version, err := t.policyVersion()
	if err != nil {
		return 0, err
	}
	if why := t.who.twoPersonToken(p, ok); why != "" {
		return 0, t.notPermitted(approver, VerbApprove, why, a.TaskID, a.Key)
	}
	if t.who.actor.Kind == KindPolicy {
		if why := policyAllows(p, ok, a.ActionType, material); why != "" {
			return 0, t.notPermitted(approver, VerbApprove, why, a.TaskID, a.Key)
		}
	}
	if ok && p.TwoPerson && a.ProposedBy == approver {
		return 0, t.notPermitted(approver, VerbApprove,
			fmt.Sprintf("%s needs two persons (policy version %d): %s proposed it, so someone else approves it", a.ActionType, p.Version, approver), a.TaskID, a.Key)
	}
	return version, nil
}

func (t *wtx) policyVersion() (int64, error) {
	var v int64
	if err := t.QueryRow(`SELECT policy_version FROM actor_mode WHERE id = 1`).Scan(&v); err != nil {
		return 0, fmt.Errorf("read the policy version: %w", err)
	}
	return v, nil
}

// twoPersonToken is why s may not act on an action of a type p makes
// two-person without its own token ("" : it may). Once a ledger requires
// tokens for any role, every act on a two-person type needs one, whatever
// role it takes: two persons are two tokens, or one person could propose
// and send under another's name around their own approval.
func (s standing) twoPersonToken(p ActionPolicy, ok bool) string {
	if !s.registered || len(s.tokenRoles) == 0 || !ok || !p.TwoPerson || s.tokenOf == s.actor.ID {
		return ""
	}
	if s.tokenOf == "" {
		return fmt.Sprintf("%s needs two persons (policy version %d), so every act on it needs the actor's own token; present %s's (--token or $GATEHOUSE_TOKEN)",
			p.ActionType, p.Version, s.actor.ID)
	}
	return fmt.Sprintf("%s needs two persons (policy version %d), so every act on it needs the actor's own token; the token presented is not %s's",
		p.ActionType, p.Version, s.actor.ID)
}

// refuseTwoPersonWithoutToken refuses, with its history line, an act of s
// on an action of actionType without s's own token when the type is
// two-person and the ledger requires tokens (see twoPersonToken). It reads
// the type's policy only when the token is missing.
func (t *wtx) refuseTwoPersonWithoutToken(s standing, verb Verb, actionType, taskID, key string) error {
	if !s.registered || len(s.tokenRoles) == 0 || s.tokenOf == s.actor.ID {
		return nil
	}
	p, ok, err := t.policyOf(actionType)
	if err != nil {
		return err
	}
	if why := s.twoPersonToken(p, ok); why != "" {
		return t.notPermitted(s.actor.ID, verb, why, taskID, key)
	}
	return nil
}

// executePolicy checks, at execute on a registered ledger, the approval by
// today's rules: a two-person type is sent only with the executor's own
// token (once tokens are required) and not by its approver, which refuses
// the executor; and the approval holds only while its approver could give
// it now (see lapsedApproval), like a material field: one that no longer
// holds sends the action back for approval.
func (t *wtx) executePolicy(a *Action, ap Approval, executor string) error {
	if t.who == nil || !t.who.registered {
		return nil
	}
	p, ok, err := t.policyOf(a.ActionType)
	if err != nil {
		return err
	}
	if why := t.who.twoPersonToken(p, ok); why != "" {
		return t.notPermitted(executor, VerbExecute, why, a.TaskID, a.Key)
	}
	if ok && p.TwoPerson && ap.Approver == executor {
		return t.notPermitted(executor, VerbExecute,
			fmt.Sprintf("%s needs two persons (policy version %d): %s approved it, so someone else sends it", a.ActionType, p.Version, executor), a.TaskID, a.Key)
	}
	approver, err := readStanding(t, ap.Approver, "")
	if err != nil {
		return err
	}
	why := lapsedApproval(*a, ap, approver, p, ok)
	if why == "" {
		return nil
	}
	if _, err := t.invalidateApprovals(a.Key, "it no longer holds: "+why); err != nil {
		return err
	}
	t.note(map[string]any{"approver": ap.Approver, "policy_version": ap.PolicyVersion, "why": why}, "")
	return t.refuseWith(a, StateAwaitingApproval, "", executor, EvApprovalStale,
		&StateError{Key: a.Key, Err: ErrApprovalStale, Hint: "its approval no longer holds: " + why},
		"%s tried to send %s, but its approval by %s (policy version %d) no longer holds: %s; it needs approval again.",
		executor, a.Key, ap.Approver, ap.PolicyVersion, why)
}

// lapsedApproval is why approval ap of a would not be given now on a
// registered ledger ("" : it would), approver being the approver's
// standing as registered now and p the type's policy now (ok false: none).
// An approval is judged by today's rules, not the ones it was given under:
// an approver who is no longer registered, enabled, of a kind that
// approves or holding the approve role; a policy actor whose policy no
// longer allows it; the proposer (or a correction's author) approving a
// two-person type (or their own correction). Tokens aside: whose token an
// approval was given with is not recorded.
func lapsedApproval(a Action, ap Approval, approver standing, p ActionPolicy, ok bool) string {
	approver.tokenOf = approver.actor.ID
	if why := approver.refusal(VerbApprove, RoleApprove, ""); why != "" {
		if pm, _ := PermitFor(VerbApprove); approver.known && approver.actor.Enabled && !slices.Contains(pm.Kinds, approver.actor.Kind) {
			why = fmt.Sprintf("%s is %s, and %s", ap.Approver, kindWithArticle(approver.actor.Kind), why)
		}
		return fmt.Sprintf("%s could not approve it now: %s", ap.Approver, why)
	}
	switch {
	case approver.actor.Kind == KindPolicy:
		return policyAllows(p, ok, a.ActionType, ap.Material)
	case ok && p.TwoPerson && ap.Approver == a.ProposedBy:
		return fmt.Sprintf("%s needs two persons (policy version %d), and %s both proposed and approved it", a.ActionType, p.Version, ap.Approver)
	}
	if a.Corrects != "" && ap.Approver == a.ProposedBy {
		return fmt.Sprintf("%s is a correction, and %s both drafted and approved it; a second person reviews it", a.Key, ap.Approver)
	}
	return ""
}

// kindWithArticle is a kind as a sentence names one: "an agent".
func kindWithArticle(k Kind) string {
	if strings.ContainsRune("aeiou", rune(k[0])) {
		return "an " + string(k)
	}
	return "a " + string(k)
}

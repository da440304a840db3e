package ledger

import "fmt"

// approvalPolicy applies the approval policies of a registered ledger to
// an approval about to be recorded, refusing (with its history line) one
// they do not allow, and returns the policy version it is given under (0
// on an open ledger). A policy actor approves only the types a policy lets
// it, on the material values the policy names; a two-person type is not
// approved by its proposer.
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

// executePolicy checks, at execute on a registered ledger, what the
// policies say of the approval now: an approval given by a policy (or
// under an earlier version) holds only while the current version would
// still allow it, like a material field; a two-person type is not executed
// by its approver. The first sends the action back for approval; the
// second refuses the executor.
func (t *wtx) executePolicy(a *Action, ap Approval, executor string) error {
	if t.who == nil || !t.who.registered {
		return nil
	}
	p, ok, err := t.policyOf(a.ActionType)
	if err != nil {
		return err
	}
	if ok && p.TwoPerson && ap.Approver == executor {
		return t.notPermitted(executor, VerbExecute,
			fmt.Sprintf("%s needs two persons (policy version %d): %s approved it, so someone else sends it", a.ActionType, p.Version, executor), a.TaskID, a.Key)
	}
	var why string
	approverKind := Kind("")
	if ap.PolicyVersion > 0 || ok {
		approver, err := getActor(t, ap.Approver)
		if err == nil {
			approverKind = approver.Kind
		}
	}
	switch {
	case approverKind == KindPolicy:
		why = policyAllows(p, ok, a.ActionType, ap.Material)
	case ok && p.TwoPerson && ap.Approver == a.ProposedBy:
		why = fmt.Sprintf("%s needs two persons since policy version %d, and %s both proposed and approved it", a.ActionType, p.Version, ap.Approver)
	}
	if why == "" {
		return nil
	}
	if _, err := t.invalidateApprovals(a.Key, "the approval policy changed: "+why); err != nil {
		return err
	}
	return t.refuseWith(a, StateAwaitingApproval, "", executor, EvApprovalStale,
		&StateError{Key: a.Key, Err: ErrApprovalStale, Hint: "the approval policy no longer allows its approval: " + why},
		"%s tried to send %s, but its approval by %s (policy version %d) is no longer allowed: %s; it needs approval again.",
		executor, a.Key, ap.Approver, ap.PolicyVersion, why)
}

package ledger

import (
	"strings"
	"time"
)

// Credit says who did what to an action, from its history: who proposed
// it and whose act put it in the state it is in. The task's owner is
// another fact (Task.Owner): a screen that shows the owner beside an
// action's state credits the owner with what someone else, or the gate,
// did.
type Credit struct {
	// ProposedBy proposed the action; "" when nobody did (a recipient
	// removed from an audience before its notice was drafted is recorded
	// as a cancelled action nobody proposed).
	ProposedBy string
	ProposedAt time.Time
	// By is whose act put the action in its current state; "" when the
	// history does not say (lines written before schema 6 carry no state).
	By string
	// ByGate: the gate decided at By's request (a send it denied, held or
	// cancelled because the owner changed), not By.
	ByGate bool
	// Request is what By asked for when the gate decided: "send", or
	// "request" when the line does not say.
	Request string
	// Act is what By did, in a word: "removed", "withdrew", "approved",
	// "sent"… or, when ByGate, what the gate did.
	Act string
	At  time.Time
}

// CreditOf reads a's credit from its history (evs: the action's events,
// oldest first, as Detail returns them).
func CreditOf(a Action, evs []Event) Credit {
	var c Credit
	for _, e := range evs {
		if e.ActionKey != a.Key {
			continue
		}
		if e.Kind == EvProposed && c.ProposedBy == "" {
			c.ProposedBy, c.ProposedAt = e.Actor, e.At
		}
		if e.ToState == "" || !reachesState(e.ToState, a.State) {
			continue
		}
		c.By, c.At, c.ByGate, c.Act, c.Request = e.Actor, e.At, gateDecided(e), actWord(e, a.State), ""
		switch {
		case e.Kind == EvRecoveredUnknown:
			c.Act, c.Request = "marked unknown", "restart"
		case c.ByGate:
			c.Request = "request"
			if strings.Contains(e.Message, e.Actor+"'s send") || strings.Contains(e.Message, e.Actor+" tried to send") {
				c.Request = "send"
			}
		}
	}
	return c
}

// reachesState reports whether a line's ToState is the state s ("held"
// lines carry their cause after a colon).
func reachesState(to string, s State) bool {
	st, _, _ := strings.Cut(to, ":")
	return State(st) == s
}

// gateDecided reports whether a line records the gate's decision on an
// actor's request rather than the actor's own act.
func gateDecided(e Event) bool {
	switch {
	case strings.HasPrefix(e.Message, "The gate "), e.Kind == EvRecoveredUnknown:
		return true
	case e.Kind == EvDenied, e.Kind == EvOwnershipConflict, e.Kind == EvRefusedStopped, e.Kind == EvDuplicateBlock:
		return true
	case e.Kind == EvHeld:
		return !strings.HasPrefix(e.Message, e.Actor+" put ")
	}
	return false
}

func actWord(e Event, s State) string {
	switch e.Kind {
	case EvAudienceRemoved:
		return "removed"
	case EvCancelled:
		if !gateDecided(e) {
			return "withdrew"
		}
	case EvReconciled:
		return "reconciled"
	}
	return strings.ReplaceAll(string(s), "_", " ")
}

// Words says who put the action in its state, e.g. "removed by lead",
// "cancelled by the gate at wf-ack's send"; "" when the history does not
// say.
func (c Credit) Words() string {
	switch {
	case c.By == "":
		return ""
	case c.Request == "restart":
		return c.Act + " by the gate on restart"
	case c.ByGate:
		return c.Act + " by the gate at " + c.By + "'s " + c.Request
	case c.Act == "withdrew":
		return "withdrawn by " + c.By
	}
	return c.Act + " by " + c.By
}

// Short is whose act it was, for a narrow column beside the state: the
// actor, or "gate" when the gate decided.
func (c Credit) Short() string {
	if c.ByGate {
		return "gate"
	}
	return c.By
}

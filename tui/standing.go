package tui

import (
	"context"
	"errors"
	"fmt"
	"strings"

	tea "charm.land/bubbletea/v2"

	"gatehouse/ledger"
	"gatehouse/ledger/answer"
)

// standing is who operates a screen and what the ledger lets them do, read
// when the screen opens, so an operator sees their roles before they try
// anything (and the gate still decides each operation on its own).
type standing struct {
	actor string
	line  string // "as olga · person · operate, release, stop"
}

// readStanding says who actor is on l: an open ledger takes any name; a
// registered one names the actor's kind and roles, or why it can do nothing.
func readStanding(ctx context.Context, l *ledger.Ledger, actor string) standing {
	s := standing{actor: actor}
	m, err := l.Mode(ctx)
	switch {
	case err != nil:
		s.line = fmt.Sprintf("as %s · roles could not be read: %v", actor, err)
	case !m.Registered:
		s.line = fmt.Sprintf("as %s · open ledger: any name is taken, nothing is checked", actor)
	default:
		a, err := l.ActorByID(ctx, actor)
		switch {
		case errors.Is(err, ledger.ErrNotFound):
			s.line = fmt.Sprintf("as %s · not registered: every operation will be refused", actor)
		case err != nil:
			s.line = fmt.Sprintf("as %s · roles could not be read: %v", actor, err)
		case !a.Enabled:
			s.line = fmt.Sprintf("as %s · %s · disabled: every operation will be refused", actor, a.Kind)
		default:
			roles := make([]string, len(a.Roles))
			for i, r := range a.Roles {
				roles[i] = string(r)
			}
			s.line = fmt.Sprintf("as %s · %s · %s", actor, a.Kind, orText(strings.Join(roles, ", "), "no roles"))
		}
	}
	return s
}

// permitMsg is the ledger's answer to whether an operation may be tried.
type permitMsg struct {
	op  operation
	ok  bool
	why string
}

// permit asks the ledger whether o may do op before the confirmation
// opens: an operation the operator may not do says why at once instead of
// asking for a reason the gate will refuse. The gate checks again when the
// operation runs, inside its deciding transaction.
func (o operator) permit(op operation) func(context.Context) tea.Msg {
	return func(ctx context.Context) tea.Msg {
		if op.gate == "" {
			return permitMsg{op: op, ok: true}
		}
		ok, why, err := o.l.Permitted(ctx, o.actor, op.gate)
		if err != nil {
			// Not knowing is no refusal: the gate decides when it runs.
			return permitMsg{op: op, ok: true}
		}
		return permitMsg{op: op, ok: ok, why: why}
	}
}

// refused says a permission refusal in the words of the CLI's exit code.
func (m permitMsg) refused() tea.Cmd {
	what := m.op.verb
	if m.op.target != "" {
		what += " " + m.op.target
	}
	// Asked, not tried: nothing is recorded, unlike the gate's refusal of
	// the same verb on the command line (exit 21, recorded).
	text := fmt.Sprintf("%s → not permitted (the command line exits %d): %s; nothing was tried", what, answer.NotPermitted, m.why)
	return func() tea.Msg { return statusMsg{text: text, err: true} }
}

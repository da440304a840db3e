package ledger

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// TaskRef names a task; Customer and Subject are only used when the ledger
// sees the task for the first time.
type TaskRef struct {
	ID       string
	Customer string
	Subject  string
}

// Claim makes actor the owner of an unowned task. Claiming a task one
// already owns is a no-op; claiming a task someone else owns is refused with
// an *OwnershipError and recorded as an ownership conflict.
func (l *Ledger) Claim(ctx context.Context, ref TaskRef, actor string) (Task, error) {
	if actor == "" {
		return Task{}, invalidf("claim: actor is empty")
	}
	var out Task
	err := l.write(ctx, func(t *wtx) error {
		t.readAhead(taskByID, []any{ref.ID}, "")
		if _, err := t.permit(actor, VerbClaim, ref.ID, ""); err != nil {
			return err
		}
		tk, err := t.ensureTask(ref.ID, ref.Customer, ref.Subject, actor)
		if err != nil {
			return err
		}
		out = tk
		switch tk.Owner {
		case actor:
			return nil
		case "":
			if err := t.setOwner(&tk, actor); err != nil {
				return err
			}
			out = tk
			return t.event(actor, tk.ID, "", EvClaimed, "", "%s claimed task %s and is now its owner.", actor, tk.ID)
		default:
			if err := t.event(actor, tk.ID, "", EvOwnershipConflict, "",
				"%s tried to claim task %s, but %s already owns it; nothing changed.", actor, tk.ID, tk.Owner); err != nil {
				return err
			}
			return refuse(&OwnershipError{Task: tk.ID, Owner: tk.Owner, Actor: actor})
		}
	})
	return out, err
}

// TakeOver makes actor the owner whoever owned the task before. The reason is
// mandatory; the previous owner receives a notification.
func (l *Ledger) TakeOver(ctx context.Context, ref TaskRef, actor, reason string) (Task, error) {
	if actor == "" {
		return Task{}, invalidf("take over: actor is empty")
	}
	if strings.TrimSpace(reason) == "" {
		return Task{}, invalidf("take over: a reason is required")
	}
	var out Task
	err := l.write(ctx, func(t *wtx) error {
		t.readAhead(taskByID, []any{ref.ID}, "")
		if _, err := t.permit(actor, VerbTakeover, ref.ID, ""); err != nil {
			return err
		}
		// A takeover changes who owns known work; a typo must not create a
		// phantom task with an owner. Claim creates tasks.
		tk, err := getTask(t, ref.ID)
		if errors.Is(err, ErrNotFound) {
			return invalidf("take over %s: the ledger has no such task; check the id, or claim it to open it", ref.ID)
		}
		if err != nil {
			return err
		}
		prev := tk.Owner
		if prev == actor {
			out = tk
			return nil
		}
		if err := t.setOwner(&tk, actor); err != nil {
			return err
		}
		out = tk
		if prev == "" {
			return t.event(actor, tk.ID, "", EvTakeover, reason,
				"%s took over task %s, which had no owner, because: %s.", actor, tk.ID, reason)
		}
		if err := t.event(actor, tk.ID, "", EvTakeover, reason,
			"%s took over task %s from %s because: %s.", actor, tk.ID, prev, reason); err != nil {
			return err
		}
		msg := fmt.Sprintf("%s took over task %s from you because: %s.", actor, tk.ID, reason)
		if _, err := t.Exec(`INSERT INTO notifications (recipient, task_id, at, message) VALUES (?, ?, ?, ?)`,
			prev, tk.ID, ns(t.now()), msg); err != nil {
			return fmt.Errorf("notify %s: %w", prev, err)
		}
		return t.event(actor, tk.ID, "", EvNotificationQueued, "", "%s was notified of the takeover.", prev)
	})
	return out, err
}

// Release gives up ownership. Only the owner may release.
func (l *Ledger) Release(ctx context.Context, taskID, actor, reason string) (Task, error) {
	var out Task
	err := l.write(ctx, func(t *wtx) error {
		t.readAhead(taskByID, []any{taskID}, "")
		if _, err := t.permit(actor, VerbRelease, taskID, ""); err != nil {
			return err
		}
		tk, err := getTask(t, taskID)
		if err != nil {
			return err
		}
		out = tk
		if tk.Owner != actor {
			if err := t.event(actor, tk.ID, "", EvOwnershipConflict, reason,
				"%s tried to release task %s, but the owner is %s; nothing changed.", actor, tk.ID, ownerName(tk.Owner)); err != nil {
				return err
			}
			return refuse(&OwnershipError{Task: tk.ID, Owner: tk.Owner, Actor: actor})
		}
		if err := t.setOwner(&tk, ""); err != nil {
			return err
		}
		out = tk
		return t.event(actor, tk.ID, "", EvReleased, reason, "%s released task %s; it has no owner now.", actor, tk.ID)
	})
	return out, err
}

// Complete closes a task. It is refused (ErrIncomplete) while any of its
// actions lacks a settled outcome: drafts must be cancelled, sends recorded,
// unknown outcomes reconciled.
func (l *Ledger) Complete(ctx context.Context, taskID, actor string) error {
	return l.write(ctx, func(t *wtx) error {
		t.readAhead(taskByID, []any{taskID}, "")
		if _, err := t.permit(actor, VerbComplete, taskID, ""); err != nil {
			return err
		}
		tk, err := getTask(t, taskID)
		if err != nil {
			return err
		}
		if tk.Owner != "" && tk.Owner != actor {
			if err := t.event(actor, tk.ID, "", EvOwnershipConflict, "",
				"%s tried to complete task %s, but %s owns it.", actor, tk.ID, tk.Owner); err != nil {
				return err
			}
			return refuse(&OwnershipError{Task: tk.ID, Owner: tk.Owner, Actor: actor})
		}
		rows, err := t.Query(`SELECT key, state FROM actions WHERE task_id = ?
			AND state NOT IN ('sent', 'failed', 'denied', 'cancelled') ORDER BY key`, taskID)
		if err != nil {
			return err
		}
		var pending []string
		for rows.Next() {
			var k, s string
			if err := rows.Scan(&k, &s); err != nil {
				rows.Close()
				return err
			}
			pending = append(pending, k+" ("+s+")")
		}
		rows.Close()
		if len(pending) > 0 {
			list := strings.Join(pending, ", ")
			if err := t.event(actor, tk.ID, "", EvCompleteRefused, "",
				"%s could not complete task %s: these actions have no recorded outcome: %s.", actor, tk.ID, list); err != nil {
				return err
			}
			return refuse(fmt.Errorf("complete %s: %w: %s", tk.ID, ErrIncomplete, list))
		}
		if _, err := t.Exec(`UPDATE tasks SET status = 'completed', version = version + 1, updated_at = ? WHERE id = ?`,
			ns(t.now()), tk.ID); err != nil {
			return err
		}
		return t.event(actor, tk.ID, "", EvCompleted, "", "%s completed task %s.", actor, tk.ID)
	})
}

// View records that actor (a person or a running automation, by kind) is on
// the task for ttl. Presence is advisory: it never changes ownership.
func (l *Ledger) View(ctx context.Context, ref TaskRef, actor, kind string, ttl time.Duration) error {
	if kind == "" {
		kind = "viewer"
	}
	if ttl <= 0 {
		ttl = 5 * time.Minute
	}
	return l.writeRelaxed(ctx, func(t *wtx) error {
		t.readAhead(taskByID, []any{ref.ID}, "")
		if _, err := t.permit(actor, VerbView, ref.ID, ""); err != nil {
			return err
		}
		tk, err := t.ensureTask(ref.ID, ref.Customer, ref.Subject, actor)
		if err != nil {
			return err
		}
		var existing int
		t.QueryRow(`SELECT count(*) FROM presence WHERE task_id = ? AND actor = ? AND expires_at > ?`,
			tk.ID, actor, ns(t.now())).Scan(&existing)
		if _, err := t.Exec(`INSERT INTO presence (task_id, actor, kind, since, expires_at) VALUES (?, ?, ?, ?, ?)
			ON CONFLICT(task_id, actor) DO UPDATE SET kind = excluded.kind, expires_at = excluded.expires_at,
			since = CASE WHEN presence.expires_at > ? THEN presence.since ELSE excluded.since END`,
			tk.ID, actor, kind, ns(t.now()), ns(t.now().Add(ttl)), ns(t.now())); err != nil {
			return fmt.Errorf("record presence: %w", err)
		}
		if existing > 0 {
			return nil // a heartbeat, not news
		}
		return t.event(actor, tk.ID, "", EvViewing, "",
			"%s (%s) is looking at task %s; this does not change its owner (%s).", actor, kind, tk.ID, ownerName(tk.Owner))
	})
}

// Leave removes actor's presence from the task.
func (l *Ledger) Leave(ctx context.Context, taskID, actor string) error {
	return l.writeRelaxed(ctx, func(t *wtx) error {
		if _, err := t.permit(actor, VerbLeave, taskID, ""); err != nil {
			return err
		}
		res, err := t.Exec(`DELETE FROM presence WHERE task_id = ? AND actor = ?`, taskID, actor)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return nil
		}
		return t.event(actor, taskID, "", EvLeft, "", "%s left task %s.", actor, taskID)
	})
}

// Presence lists who is on the task now (expired markers are ignored).
func (l *Ledger) Presence(ctx context.Context, taskID string) ([]Presence, error) {
	var out []Presence
	err := l.read(ctx, func(tx queryTx) error {
		rows, err := tx.Query(`SELECT task_id, actor, kind, since, expires_at FROM presence
			WHERE task_id = ? AND expires_at > ? ORDER BY since, actor`, taskID, ns(l.clock.Now()))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var p Presence
			var s, e int64
			if err := rows.Scan(&p.TaskID, &p.Actor, &p.Kind, &s, &e); err != nil {
				return err
			}
			p.Since, p.ExpiresAt = fromNS(s), fromNS(e)
			out = append(out, p)
		}
		return rows.Err()
	})
	return out, err
}

// Task reads one task.
func (l *Ledger) Task(ctx context.Context, id string) (Task, error) {
	var tk Task
	err := l.read(ctx, func(tx queryTx) error {
		var err error
		tk, err = getTask(tx, id)
		return err
	})
	return tk, err
}

// Notifications lists the notifications addressed to recipient, oldest first.
func (l *Ledger) Notifications(ctx context.Context, recipient string) ([]Notification, error) {
	var out []Notification
	err := l.read(ctx, func(tx queryTx) error {
		rows, err := tx.Query(`SELECT id, recipient, task_id, at, message FROM notifications
			WHERE recipient = ? ORDER BY id`, recipient)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var n Notification
			var at int64
			if err := rows.Scan(&n.ID, &n.Recipient, &n.TaskID, &at, &n.Message); err != nil {
				return err
			}
			n.At = fromNS(at)
			out = append(out, n)
		}
		return rows.Err()
	})
	return out, err
}

func ownerName(o string) string {
	if o == "" {
		return "nobody"
	}
	return o
}

package ledger

import (
	"context"
	"fmt"
	"maps"
	"slices"
)

// Violation is one broken rule found by Check: the file's own integrity, a
// reference to a missing row, or one of the ledger's invariants.
type Violation struct {
	Rule   string // which rule, e.g. "one attempt in flight"
	Detail string // which rows, in words
}

func (v Violation) String() string { return v.Rule + ": " + v.Detail }

// invariants are the ledger's own rules as queries that return one row per
// violation: a subject and its detail.
var invariants = []struct {
	rule, query, format string
}{
	{"one attempt in flight", `SELECT action_key, count(*) FROM attempts WHERE outcome = ''
		GROUP BY action_key HAVING count(*) > 1 ORDER BY action_key`,
		"%s has %d attempts without an outcome"},
	{"executing has its attempt", `SELECT a.key, count(t.id) FROM actions a LEFT JOIN attempts t ON t.action_key = a.key AND t.outcome = ''
		WHERE a.state = 'executing' GROUP BY a.key HAVING count(t.id) != 1 ORDER BY a.key`,
		"%s is executing with %d attempts without an outcome, want exactly 1"},
	{"attempt in flight belongs to an unsettled action", `SELECT t.action_key, t.number || ' while the action is ' || a.state ||
		CASE WHEN a.hold_cause != '' THEN ' (' || a.hold_cause || ')' ELSE '' END
		FROM attempts t JOIN actions a ON a.key = t.action_key WHERE t.outcome = ''
		AND NOT (a.state IN ('executing', 'unknown') OR (a.state = 'held' AND a.hold_cause = 'unknown_outcome'))
		ORDER BY t.action_key`,
		"%s has attempt %s without an outcome"},
	{"sent has an accepted attempt", `SELECT a.key, count(t.id) FROM actions a LEFT JOIN attempts t ON t.action_key = a.key
		WHERE a.state = 'sent' GROUP BY a.key HAVING coalesce(sum(CASE WHEN t.outcome = 'accepted' THEN 1 ELSE 0 END), 0) = 0 ORDER BY a.key`,
		"%s is sent but none of its %d attempts was accepted"},
	{"failed has a permanent rejection", `SELECT a.key, count(t.id) FROM actions a LEFT JOIN attempts t ON t.action_key = a.key
		WHERE a.state = 'failed' GROUP BY a.key HAVING coalesce(sum(CASE WHEN t.outcome = 'rejected_permanent' THEN 1 ELSE 0 END), 0) = 0 ORDER BY a.key`,
		"%s failed but none of its %d attempts was rejected permanently"},
	// An action counts the attempts of it that arrived after they were
	// settled as not arrived (schema 13); only such an attempt can have.
	{"late arrivals match attempts", `SELECT a.key, a.late_arrivals || ', but ' ||
		(SELECT count(*) FROM attempts t WHERE t.action_key = a.key AND t.arrived_late != 0) || ' of its attempts arrived late'
		FROM actions a WHERE a.late_arrivals != (SELECT count(*) FROM attempts t WHERE t.action_key = a.key AND t.arrived_late != 0)
		ORDER BY a.key`,
		"%s counts late arrivals %s"},
	{"late arrival of an attempt settled as not arrived", `SELECT action_key, number || ' is ' || outcome FROM attempts
		WHERE arrived_late != 0 AND outcome NOT IN ('not_delivered', 'rejected_temporary', 'rejected_permanent')
		ORDER BY action_key, number`,
		"%s: attempt %s, yet it is marked as arrived late"},
	// A review folds the history into states: the last state an action's
	// history led to must be the state it is in.
	{"history leads to the state", `SELECT a.key, (CASE WHEN a.state = 'held' AND a.hold_cause != '' THEN 'held:' || a.hold_cause ELSE a.state END)
		|| ', but its history last led to ' || e.to_state
		FROM actions a JOIN events e ON e.id = (SELECT max(x.id) FROM events x WHERE x.action_key = a.key AND x.to_state != '')
		WHERE e.to_state != (CASE WHEN a.state = 'held' AND a.hold_cause != '' THEN 'held:' || a.hold_cause ELSE a.state END)
		ORDER BY a.key`,
		"%s is %s"},
	// Lines written since the history carries states: the ones that always
	// move an action say where to, and an approval and an attempt carry
	// what they bound (material values, destination, Message-ID).
	{"history lines carry their facts", `SELECT action_key, kind || ' (event ' || id || ')' || CASE WHEN to_state = '' THEN ' names no state' ELSE ' has no detail' END
		FROM events WHERE id >= (SELECT folded_from FROM history_format) AND action_key != '' AND (
		(kind IN ('proposed', 'approved', 'attempt_started', 'sent', 'unknown', 'recovered_unknown', 'failed', 'not_delivered', 'cancelled', 'denied', 'correction') AND to_state = '')
		OR (kind IN ('approved', 'attempt_started') AND detail = ''))
		ORDER BY id`,
		"%s: %s"},
}

// Check reads the whole ledger in one snapshot and reports every violation:
// SQLite's integrity check, foreign keys, and the ledger's invariants (at
// most one attempt in flight per action; every action's state agrees with
// its attempts; the counters equal a recount of the history; the kept
// number of actions in each state equals a recount; on a registered
// ledger, every approval a send may still rest on is one its approver
// could give now). It only reads.
// An error means the check itself could not run.
func (l *Ledger) Check(ctx context.Context) ([]Violation, error) {
	var out []Violation
	err := l.read(ctx, func(tx queryTx) error {
		out = nil
		for _, step := range []func(queryTx) ([]Violation, error){checkIntegrity, checkForeignKeys, checkInvariants, checkCounters, checkActionCounts, checkActors, checkApprovals} {
			vs, err := step(tx)
			if err != nil {
				return err
			}
			out = append(out, vs...)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("check ledger %s: %w", l.path, err)
	}
	return out, nil
}

func checkIntegrity(tx queryTx) ([]Violation, error) {
	if tx.d.isPostgres() {
		return nil, nil // the server keeps its own files consistent
	}
	rows, err := tx.Query(`PRAGMA integrity_check`)
	if err != nil {
		return nil, fmt.Errorf("integrity check: %w", err)
	}
	defer rows.Close()
	var out []Violation
	for rows.Next() {
		var msg string
		if err := rows.Scan(&msg); err != nil {
			return nil, err
		}
		if msg != "ok" {
			out = append(out, Violation{Rule: "integrity", Detail: msg})
		}
	}
	return out, rows.Err()
}

func checkForeignKeys(tx queryTx) ([]Violation, error) {
	if tx.d.isPostgres() {
		return nil, nil // enforced by the server on every write
	}
	rows, err := tx.Query(`PRAGMA foreign_key_check`)
	if err != nil {
		return nil, fmt.Errorf("foreign key check: %w", err)
	}
	defer rows.Close()
	var out []Violation
	for rows.Next() {
		var table, parent string
		var rowid, fk any
		if err := rows.Scan(&table, &rowid, &parent, &fk); err != nil {
			return nil, err
		}
		out = append(out, Violation{Rule: "foreign key", Detail: fmt.Sprintf("%s row %v refers to a missing %s row", table, rowid, parent)})
	}
	return out, rows.Err()
}

func checkInvariants(tx queryTx) ([]Violation, error) {
	var out []Violation
	for _, inv := range invariants {
		rows, err := tx.Query(inv.query)
		if err != nil {
			return nil, fmt.Errorf("check %s: %w", inv.rule, err)
		}
		for rows.Next() {
			var subject, detail string
			if err := rows.Scan(&subject, &detail); err != nil {
				rows.Close()
				return nil, err
			}
			out = append(out, Violation{Rule: inv.rule, Detail: fmt.Sprintf(inv.format, subject, detail)})
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// checkCounters recounts the counted history events and compares them with
// the counters Metrics reads.
func checkCounters(tx queryTx) ([]Violation, error) {
	kept, err := kindCounts(tx, `SELECT kind, n FROM counters`)
	if err != nil {
		return nil, fmt.Errorf("read counters: %w", err)
	}
	// One pass over the history (it has no index by kind).
	recount, err := kindCounts(tx, `SELECT kind, count(*) FROM events GROUP BY kind`)
	if err != nil {
		return nil, fmt.Errorf("recount history: %w", err)
	}
	// Outcomes a person established share the kind "reconciled"; lines
	// written before details existed say so in their sentence.
	var byPerson int
	if err := tx.QueryRow(`SELECT count(*) FROM events WHERE kind = 'reconciled'
		AND (detail LIKE '%"by":"person"%' OR (detail = '' AND message LIKE '%checked the destination by hand%'))`).Scan(&byPerson); err != nil {
		return nil, fmt.Errorf("recount outcomes resolved by a person: %w", err)
	}
	recount[CounterResolvedByPerson] = byPerson
	kinds := map[string]bool{CounterResolvedByPerson: true}
	for k := range countedKinds {
		kinds[string(k)] = true
	}
	for k := range kept {
		kinds[k] = true
	}
	var out []Violation
	for _, k := range slices.Sorted(maps.Keys(kinds)) {
		switch {
		case !countedKinds[EventKind(k)] && k != CounterResolvedByPerson:
			out = append(out, Violation{Rule: "counters match history", Detail: fmt.Sprintf("counter %s = %d counts a kind the ledger does not count", k, kept[k])})
		case kept[k] != recount[k]:
			out = append(out, Violation{Rule: "counters match history", Detail: fmt.Sprintf("counter %s = %d, the history has %d", k, kept[k], recount[k])})
		}
	}
	return out, nil
}

// checkActionCounts recounts the actions in each state and compares them
// with the counts the inspector's totals read (schema 10).
func checkActionCounts(tx queryTx) ([]Violation, error) {
	kept, err := kindCounts(tx, `SELECT state, n FROM action_counts`)
	if err != nil {
		return nil, fmt.Errorf("read action counts: %w", err)
	}
	recount, err := kindCounts(tx, `SELECT state, count(*) FROM actions GROUP BY state`)
	if err != nil {
		return nil, fmt.Errorf("recount actions: %w", err)
	}
	var out []Violation
	states := maps.Clone(recount)
	maps.Copy(states, kept)
	for _, st := range slices.Sorted(maps.Keys(states)) {
		if kept[st] != recount[st] {
			out = append(out, Violation{Rule: "action counts match actions",
				Detail: fmt.Sprintf("count of state %s = %d, the ledger has %d", st, kept[st], recount[st])})
		}
	}
	return out, nil
}

func kindCounts(tx queryTx, query string) (map[string]int, error) {
	rows, err := tx.Query(query)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var k string
		var n int
		if err := rows.Scan(&k, &n); err != nil {
			return nil, err
		}
		out[k] = n
	}
	return out, rows.Err()
}

// checkActors checks the actors of schema 16: a registered ledger keeps
// an enabled admin and an enabled stop holder (or nobody could change its
// actors, or stop it); roles are the known ones, admin a person's; a token
// is stored only as its SHA-256.
func checkActors(tx queryTx) ([]Violation, error) {
	var out []Violation
	var registered int
	if err := tx.QueryRow(`SELECT registered FROM actor_mode WHERE id = 1`).Scan(&registered); err != nil {
		return nil, fmt.Errorf("read the ledger's mode: %w", err)
	}
	rows, err := tx.Query(`SELECT id, kind, roles, enabled FROM actors ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("read actors: %w", err)
	}
	holders := map[Role]int{}
	for rows.Next() {
		var id, kind, roles string
		var enabled int
		if err := rows.Scan(&id, &kind, &roles, &enabled); err != nil {
			rows.Close()
			return nil, err
		}
		for _, r := range parseRoles(roles) {
			switch {
			case !slices.Contains(Roles, r):
				out = append(out, Violation{Rule: "actors", Detail: fmt.Sprintf("actor %s holds an unknown role %q", id, r)})
			case r == RoleAdmin && Kind(kind) != KindPerson:
				out = append(out, Violation{Rule: "actors", Detail: fmt.Sprintf("actor %s (%s) holds the admin role, a person's", id, kind)})
			}
			if enabled == 1 {
				holders[r]++
			}
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if registered == 1 {
		for _, r := range []Role{RoleAdmin, RoleStop} {
			if holders[r] == 0 {
				out = append(out, Violation{Rule: "actors", Detail: fmt.Sprintf("the ledger is registered but no enabled actor holds the %s role", r)})
			}
		}
	}
	var bad int
	if err := tx.QueryRow(`SELECT count(*) FROM actor_tokens WHERE length(hash) <> 64 OR hash LIKE ?`, TokenPrefix+"%").Scan(&bad); err != nil {
		return nil, fmt.Errorf("read tokens: %w", err)
	}
	if bad > 0 {
		out = append(out, Violation{Rule: "actors", Detail: fmt.Sprintf("%d stored tokens are not SHA-256 hashes", bad)})
	}
	return out, nil
}

// RuleLapsedApproval names a violation of checkApprovals: a fact about the
// actors and policies (a role revoked, a policy changed), which a send
// already refuses, not a fault of the file.
const RuleLapsedApproval = "approvals"

// checkApprovals names, on a registered ledger, every valid approval a
// later send may still rest on (its action approved, held, or unknown)
// that its approver could not give now: the send would refuse it as stale
// (see lapsedApproval). An open ledger judges no approver.
func checkApprovals(tx queryTx) ([]Violation, error) {
	var registered int
	if err := tx.QueryRow(`SELECT registered FROM actor_mode WHERE id = 1`).Scan(&registered); err != nil {
		return nil, fmt.Errorf("read the ledger's mode: %w", err)
	}
	if registered != 1 {
		return nil, nil
	}
	actions, err := actionsAwaitingSend(tx)
	if err != nil {
		return nil, err
	}
	var out []Violation
	for _, a := range actions {
		ap, ok, err := currentApproval(tx, a.Key)
		if err != nil || !ok {
			if err != nil {
				return nil, err
			}
			continue
		}
		approver, err := readStanding(tx, ap.Approver, "")
		if err != nil {
			return nil, err
		}
		p, hasPolicy, err := readPolicy(tx, a.ActionType)
		if err != nil {
			return nil, err
		}
		if why := lapsedApproval(a, ap, approver, p, hasPolicy); why != "" {
			out = append(out, Violation{Rule: RuleLapsedApproval, Detail: fmt.Sprintf("%s: its approval by %s (policy version %d) no longer holds: %s; a send refuses it until it is approved again",
				a.Key, ap.Approver, ap.PolicyVersion, why)})
		}
	}
	releases, err := releaseLapses(tx)
	return append(out, releases...), err
}

// releaseLapses names every approved release with a recipient still to
// send whose approver could not approve a release now.
func releaseLapses(tx queryTx) ([]Violation, error) {
	rows, err := tx.Query(`SELECT r.id, r.approved_by FROM audience_releases r WHERE r.approved_by != '' AND EXISTS (
		SELECT 1 FROM audience_rows w LEFT JOIN actions a ON a.key = w.action_key
		WHERE w.release_id = r.id AND w.status = 'eligible' AND (a.key IS NULL OR a.state NOT IN ('sent', 'failed', 'cancelled')))
		ORDER BY r.id`)
	if err != nil {
		return nil, fmt.Errorf("read approved releases: %w", err)
	}
	type approved struct{ id, by string }
	var rels []approved
	for rows.Next() {
		var r approved
		if err := rows.Scan(&r.id, &r.by); err != nil {
			rows.Close()
			return nil, err
		}
		rels = append(rels, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	var out []Violation
	for _, r := range rels {
		approver, err := readStanding(tx, r.by, "")
		if err != nil {
			return nil, err
		}
		if why := releaseApprovalLapsed(approver); why != "" {
			out = append(out, Violation{Rule: RuleLapsedApproval, Detail: fmt.Sprintf("release %s: its approval by %s no longer holds: %s; its send is refused until it is approved again",
				r.id, r.by, why)})
		}
	}
	return out, nil
}

// actionsAwaitingSend are the actions a later send may start for on their
// current approval: approved, held, or with an outcome still unknown.
func actionsAwaitingSend(tx queryTx) ([]Action, error) {
	rows, err := tx.Query(`SELECT ` + actionCols + ` FROM actions WHERE state IN ('approved', 'held', 'unknown') ORDER BY key`)
	if err != nil {
		return nil, fmt.Errorf("read actions awaiting a send: %w", err)
	}
	defer rows.Close()
	var out []Action
	for rows.Next() {
		a, err := scanAction(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, rows.Err()
}

package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"gatehouse/destination"
)

// Late evidence is what turns up about an attempt after it was settled: a
// report that differs from the settled outcome (recordOutcome), or the
// message of an attempt settled as not arrived found in its destination's
// records. The latter is the residual window made visible: a process that
// stood still inside the write of its final "." and finished it after its
// deadline, a relay that held a message past the settle time. Such an
// attempt keeps the outcome it was settled with; what arrived is recorded
// beside it, once, and counted, and its action is never attempted again.

// settledAsNotArrived reports whether the gate concluded that nothing of
// the attempt arrived: the destination said not delivered or rejected it,
// or reconciliation found nothing after its settle time.
func settledAsNotArrived(att Attempt) bool {
	switch att.Outcome {
	case destination.OutcomeNotDelivered, destination.OutcomeRejectedTemporary, destination.OutcomeRejectedPermanent:
		return true
	}
	return false
}

// recheckable are the attempts whose records are worth reading again:
// settled as not arrived, and not already known to have arrived after all.
func recheckable(atts []Attempt) []Attempt {
	var out []Attempt
	for _, at := range atts {
		if settledAsNotArrived(at) && at.ArrivedLate.IsZero() {
			out = append(out, at)
		}
	}
	return out
}

// isOwn reports whether a stored message is the attempt's own: its
// Message-ID, recipient, sender and content digest all match the intent
// (see judge).
func isOwn(att Attempt, m destination.FoundMessage) bool {
	if att.Wire != "" {
		return isOwnRecord(att, m)
	}
	return m.MessageID == att.MessageID && containsFold(m.Recipients, att.Recipient) && sameSender(m.Sender, att.Sender) &&
		(att.ContentDigest == "" || m.ContentDigest == att.ContentDigest)
}

// lateFind is one attempt settled as not arrived whose own message the
// records hold.
type lateFind struct {
	att Attempt
	msg destination.FoundMessage
	at  destination.Endpoint // the records that hold it
}

// findLate matches what records answered against attempts settled as not
// arrived: each attempt found at most once.
func findLate(atts []Attempt, ep destination.Endpoint, res destination.LookupResult) []lateFind {
	var out []lateFind
	for _, at := range atts {
		for _, m := range res.Messages {
			if isOwn(at, m) {
				out = append(out, lateFind{att: at, msg: m, at: ep})
				break
			}
		}
	}
	return out
}

// withoutOwnOf drops from res the messages that are the own of one of
// atts: an earlier attempt's message is evidence about that attempt, not a
// contradiction of the one reconciled.
func withoutOwnOf(res destination.LookupResult, atts []Attempt) destination.LookupResult {
	out := destination.LookupResult{Epoch: res.Epoch}
	for _, m := range res.Messages {
		own := false
		for _, at := range atts {
			own = own || isOwn(at, m)
		}
		if !own {
			out.Messages = append(out.Messages, m)
		}
	}
	return out
}

// endpointKey groups attempts whose records are the same: one lookup by
// action key answers for all of them.
func endpointKey(ep destination.Endpoint) string { return ep.Destination + "\x00" + ep.Lookup }

// answered is a lookup reconciliation already made: of the records the
// attempts recorded at recorded consult, read at at (the same, unless a
// person said the destination moved).
type answered struct {
	recorded, at destination.Endpoint
	res          destination.LookupResult
}

// lookLate reads the records of every attempt in atts, one lookup per
// destination (none for those the lookup already made, when not nil,
// answers), and returns what they hold of them. A lookup that fails is
// returned per attempt number in failed; attempts whose destination keeps
// no records the gate can consult are counted in noRecords.
func lookLate(ctx context.Context, open destination.RecordsOpener, key string, atts []Attempt,
	made *answered) (found []lateFind, failed map[int]error, noRecords int) {
	groups := map[string][]Attempt{}
	var order []string
	for _, at := range atts {
		k := endpointKey(at.Endpoint())
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], at)
	}
	failed = map[int]error{}
	for _, k := range order {
		group := groups[k]
		at := group[0].Endpoint()
		if made != nil && k == endpointKey(made.recorded) {
			found = append(found, findLate(group, made.at, made.res)...)
			continue
		}
		res, err := lookUp(ctx, open, at, destination.LookupQuery{ActionKey: key})
		if errors.Is(err, errNoRecords) {
			noRecords += len(group)
			continue
		}
		if err != nil {
			for _, g := range group {
				failed[g.Number] = err
			}
			continue
		}
		found = append(found, findLate(group, at, res)...)
	}
	return found, failed, noRecords
}

// recordLateFinds records each find whose attempt is still settled as not
// arrived and not yet known to have arrived: once per attempt, however
// often the records are read again. by says who or what read them. It
// reports how many it recorded.
func (t *wtx) recordLateFinds(a *Action, finds []lateFind, actor, by string) (int, error) {
	n := 0
	for _, f := range finds {
		att, err := getAttemptByTransport(t, f.att.TransportID)
		if err != nil {
			return n, err
		}
		if !settledAsNotArrived(att) || !att.ArrivedLate.IsZero() {
			continue
		}
		if err := t.requireDurable(); err != nil {
			return n, err // it restricts execution: the action is never attempted again
		}
		if err := t.markArrived(a, att); err != nil {
			return n, err
		}
		arrived, err := arrivedAttempts(t, a.Key)
		if err != nil {
			return n, err
		}
		t.note(map[string]any{"attempt": att.Number, "settled_as": string(att.Outcome), "message_id": f.msg.MessageID,
			"recipient": att.Recipient, "destination": f.at.Destination, "found_by": by, "arrivals": a.Arrivals()}, "")
		if err := t.event(actor, a.TaskID, a.Key, EvLateArrival, "",
			"Attempt %d of %s arrived after all: %s found its message %s for %s in the records of %s, although the attempt was settled as %s.%s",
			att.Number, a.Key, by, f.msg.MessageID, att.Recipient, f.at.Destination, att.Outcome, arrivalConsequence(*a, arrived)); err != nil {
			return n, err
		}
		if err := t.holdArrivedLate(a, actor, arrived); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// markArrived records that att's message arrived although att was settled
// as not arrived, and counts it on its action: once per attempt.
func (t *wtx) markArrived(a *Action, att Attempt) error {
	if err := t.compareAndSwap(fmt.Sprintf("record that attempt %d of %s arrived", att.Number, a.Key), "recorded already",
		`UPDATE attempts SET arrived_late = ? WHERE id = ? AND arrived_late = 0`, ns(t.now()), att.ID); err != nil {
		return err
	}
	if err := t.later("count the late arrival of "+a.Key, `UPDATE actions SET late_arrivals = late_arrivals + 1 WHERE key = ?`, a.Key); err != nil {
		return err
	}
	a.LateArrivals++
	return nil
}

// holdArrivedLate holds an action the gate would otherwise send next
// (approved, held as safe to retry, queued by a stop) once its message is
// known to have arrived: "nothing arrived" was wrong, and there is nothing
// to retry. Any other state stays as it is (a sent action that arrived
// twice stays sent); the gate refuses every later attempt anyway.
func (t *wtx) holdArrivedLate(a *Action, actor string, arrived []int) error {
	next := a.State == StateApproved || (a.State == StateHeld && (a.HoldCause == HoldSafeToRetry || a.HoldCause == HoldStopped))
	if !next || a.LateArrivals == 0 {
		return nil
	}
	return t.heldAsArrived(a, actor, arrived)
}

// heldAsArrived holds a for good reason: its message arrived (arrived
// names the attempts).
func (t *wtx) heldAsArrived(a *Action, actor string, arrived []int) error {
	reason := fmt.Sprintf("%s arrived after all: the customer has the message, so it will not be sent again; a second message needs a correction",
		AttemptList(arrived))
	if err := t.transition(a, StateHeld, reason, HoldArrivedLate); err != nil {
		return err
	}
	return t.event(actor, a.TaskID, a.Key, EvHeld, "", "%s is held: %s.", a.Key, reason)
}

// arrivedAttempts lists the numbers of the attempts of key known to have
// arrived: accepted, or arrived after they were settled otherwise.
func arrivedAttempts(q queryer, key string) ([]int, error) {
	rows, err := q.Query(`SELECT number FROM attempts WHERE action_key = ? AND (outcome = 'accepted' OR arrived_late != 0) ORDER BY number`, key)
	if err != nil {
		return nil, fmt.Errorf("read the arrivals of %s: %w", key, err)
	}
	defer rows.Close()
	var out []int
	for rows.Next() {
		var n int
		if err := rows.Scan(&n); err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, rows.Err()
}

// arrivalConsequence is what a late arrival means for its action, for the
// history line that records it.
func arrivalConsequence(a Action, arrived []int) string {
	if a.ArrivedTwice() {
		return fmt.Sprintf(" The customer has it twice: %s arrived. The action stays %s; the duplicate is a fact to look at, not a state.",
			AttemptList(arrived), a.State)
	}
	return " The gate will not send it again; a second message needs a correction."
}

// AttemptList names attempts in words: "attempt 1", "attempts 1 and 2",
// "attempts 1, 2 and 3".
func AttemptList(ns []int) string {
	words := make([]string, len(ns))
	for i, n := range ns {
		words[i] = fmt.Sprint(n)
	}
	switch len(words) {
	case 0:
		return "no attempt"
	case 1:
		return "attempt " + words[0]
	}
	return "attempts " + strings.Join(words[:len(words)-1], ", ") + " and " + words[len(words)-1]
}

// recheckSettled reads again the records of a's attempts settled as not
// arrived, for an action whose outcome is not open (a reconcile of a sent
// action, of one held as safe to retry), and records what arrived after
// all. Records that cannot be read change nothing here: a later reconcile
// or `ledger check --records` reads them again.
func (l *Ledger) recheckSettled(ctx context.Context, a Action, actor string, open destination.RecordsOpener, atts []Attempt) (Action, error) {
	again := recheckable(atts)
	if len(again) == 0 {
		return a, nil
	}
	finds, _, _ := lookLate(ctx, open, a.Key, again, nil)
	if len(finds) == 0 {
		return a, nil
	}
	return l.onAction(ctx, a.Key, true, func(t *wtx, cur *Action) error {
		_, err := t.recordLateFinds(cur, finds, actor, actor+"'s reconciliation")
		return err
	})
}

// RecordsCheck is what RecheckRecords did.
type RecordsCheck struct {
	// Read counts the attempts settled as not arrived whose records were
	// read again; NoRecords those whose destination keeps no records the
	// gate can consult (nothing to read, so nothing to find).
	Read, NoRecords int
	// Found are the late arrivals recorded now, as Findings would name them.
	Found []Finding
	// Unreadable are the attempts whose records could not be read: they
	// were not checked, and a later run reads them again.
	Unreadable []UnreadableRecords
}

// UnreadableRecords is one attempt whose records could not be read.
type UnreadableRecords struct {
	Key     string
	Attempt int
	Err     error
}

// RecheckRecords reads again the destination records of every attempt
// settled as not arrived (not delivered, rejected, or reconciled as absent)
// and not yet known to have arrived, asking each attempt's own destination
// through open, once per action and destination. A message of such an
// attempt found there (Message-ID, recipient, sender and content all
// matching) is recorded as late evidence, once, in the history and on the
// attempt: the next Findings name it. actor is who the history says read
// them. An error means the ledger could not be read or written; records that
// could not be read are reported in the result.
func (l *Ledger) RecheckRecords(ctx context.Context, open destination.RecordsOpener, actor string) (RecordsCheck, error) {
	var rc RecordsCheck
	byKey := map[string][]Attempt{}
	var keys []string
	err := l.read(ctx, func(tx queryTx) error {
		byKey, keys = map[string][]Attempt{}, nil
		rows, err := tx.Query(`SELECT ` + attemptCols + ` FROM attempts
			WHERE outcome IN ('not_delivered', 'rejected_temporary', 'rejected_permanent') AND arrived_late = 0
			ORDER BY action_key, number`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			at, err := scanAttempt(rows)
			if err != nil {
				return err
			}
			if _, ok := byKey[at.ActionKey]; !ok {
				keys = append(keys, at.ActionKey)
			}
			byKey[at.ActionKey] = append(byKey[at.ActionKey], at)
		}
		return rows.Err()
	})
	if err != nil {
		return rc, fmt.Errorf("read the attempts settled as not arrived: %w", err)
	}
	for _, key := range keys {
		if err := ctx.Err(); err != nil {
			return rc, err
		}
		atts := byKey[key]
		finds, failed, none := lookLate(ctx, open, key, atts, nil)
		rc.NoRecords += none
		rc.Read += len(atts) - none - len(failed)
		for _, at := range atts {
			if err, ok := failed[at.Number]; ok {
				rc.Unreadable = append(rc.Unreadable, UnreadableRecords{Key: key, Attempt: at.Number, Err: err})
			}
		}
		if len(finds) == 0 {
			continue
		}
		var recorded []lateFind
		_, err := l.onAction(ctx, key, true, func(t *wtx, a *Action) error {
			recorded = nil
			for _, f := range finds {
				n, err := t.recordLateFinds(a, []lateFind{f}, actor, "a check of the records (ledger check --records)")
				if err != nil {
					return err
				}
				if n > 0 {
					recorded = append(recorded, f)
				}
			}
			return nil
		})
		if err != nil {
			return rc, fmt.Errorf("record the late arrival of %s: %w", key, err)
		}
		for _, f := range recorded {
			rc.Found = append(rc.Found, Finding{Rule: RuleLateEvidence, Key: key, Attempt: f.att.Number,
				Detail: fmt.Sprintf("attempt %d arrived after all: its message %s for %s is in the records of %s, although it was settled as %s",
					f.att.Number, f.msg.MessageID, f.att.Recipient, f.at.Destination, f.att.Outcome)})
		}
	}
	return rc, nil
}

// Finding is a fact about the world that a check names beside the
// ledger's violations: the ledger is sound, but what it recorded says a
// customer may have, or has, a message more than once. Findings stay, as
// the history does; they are not faults of the file.
type Finding struct {
	Rule    string // RuleLateEvidence or RuleArrivedTwice
	Key     string
	Attempt int // the attempt it is about; 0 for the whole action
	Detail  string
}

func (f Finding) String() string { return f.Rule + ": " + f.Key + ": " + f.Detail }

// The rules findings are named by.
const (
	RuleLateEvidence = "late evidence"
	RuleArrivedTwice = "arrived twice"
)

// Findings lists every late evidence line of the history (a report or a
// message that turned up after its attempt was settled), oldest first, and
// then every action known to have arrived twice. It only reads.
func (l *Ledger) Findings(ctx context.Context) ([]Finding, error) {
	var out []Finding
	err := l.read(ctx, func(tx queryTx) error {
		out = nil
		rows, err := tx.Query(`SELECT action_key, message, detail FROM events WHERE kind IN ('late_outcome', 'late_arrival') ORDER BY id`)
		if err != nil {
			return err
		}
		for rows.Next() {
			var f Finding
			var detail string
			if err := rows.Scan(&f.Key, &f.Detail, &detail); err != nil {
				rows.Close()
				return err
			}
			f.Rule, f.Attempt = RuleLateEvidence, Event{Message: f.Detail, Detail: detail}.AttemptNumber()
			out = append(out, f)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		rows, err = tx.Query(`SELECT ` + actionCols + ` FROM actions WHERE late_arrivals > 0 AND (late_arrivals > 1 OR state = 'sent') ORDER BY key`)
		if err != nil {
			return err
		}
		var twice []Action
		for rows.Next() {
			a, err := scanAction(rows)
			if err != nil {
				rows.Close()
				return err
			}
			twice = append(twice, a)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for _, a := range twice {
			arrived, err := arrivedAttempts(tx, a.Key)
			if err != nil {
				return err
			}
			out = append(out, Finding{Rule: RuleArrivedTwice, Key: a.Key,
				Detail: fmt.Sprintf("%s arrived: the customer has the message %d times; the action stays %s", AttemptList(arrived), len(arrived), a.State)})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read the late evidence of %s: %w", l.path, err)
	}
	return out, nil
}

// AttemptNumber is the attempt a history line is about: in its detail, or
// for a line written before lines carried one, its sentence when it begins
// "Attempt N of …"; 0 when it names none.
func (e Event) AttemptNumber() int {
	var d struct{ Attempt int }
	if json.Unmarshal([]byte(e.Detail), &d) == nil && d.Attempt > 0 {
		return d.Attempt
	}
	var n int
	if _, err := fmt.Sscanf(e.Message, "Attempt %d of", &n); err == nil {
		return n
	}
	return 0
}

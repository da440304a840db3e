package ledger

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"gatehouse/destination"
)

// This file is what the gate does differently for an action that is an
// HTTP request: the provider-facing key and its generation, the bytes an
// attempt hands over, a probe's answer, and reconciliation by the
// destination's duplicate control (see docs/destinations.md).

// keySecret is the ledger's secret for provider-facing keys, read once.
func (t *wtx) keySecret() ([]byte, error) {
	if s := t.l.keySecret.Load(); s != nil {
		return *s, nil
	}
	var hexed string
	if err := t.QueryRow(`SELECT key_secret FROM ledger_identity`).Scan(&hexed); err != nil {
		return nil, fmt.Errorf("read the ledger's key secret: %w", err)
	}
	secret, err := hex.DecodeString(hexed)
	if err != nil || len(secret) < 16 {
		return nil, fmt.Errorf("the ledger's key secret is unreadable (%d bytes)", len(secret))
	}
	t.l.keySecret.Store(&secret)
	return secret, nil
}

// ProviderKey is the key an HTTP attempt carries to the provider (in the
// duplicate control's header and at its reference-id field): an HMAC of
// the action key and the key generation under the ledger's secret, so
// that nobody who knows the action key alone can compute it, replay the
// gate's write or pre-empt it with another body. Two ledgers never draw
// the same key; a ledger restored from a backup draws the same keys again,
// which a provider that keeps keys answers from what it stored.
func ProviderKey(secret []byte, actionKey string, generation, max int) string {
	m := hmac.New(sha256.New, secret)
	fmt.Fprintf(m, "gatehouse provider key\x00%s\x00%d", actionKey, generation)
	k := "gh_" + hex.EncodeToString(m.Sum(nil))[:48]
	if max > 0 && len(k) > max {
		k = k[:max]
	}
	return k
}

// nextGeneration is the key generation attempt n+1 of an action uses: the
// last attempt's, moved on only once that attempt's absence was
// established (reconciled, or resolved by a person, as not delivered). A
// provider that stored an answer under a key (Stripe stores even a 500)
// answers it for as long as it keeps the key, so a new write needs a new
// key; but only absence proves there is no write under the old one.
func nextGeneration(last Attempt, n int) int {
	if n == 0 || last.KeyGeneration == 0 {
		return 1
	}
	if last.Outcome == destination.OutcomeNotDelivered && last.Reconciled {
		return last.KeyGeneration + 1
	}
	return last.KeyGeneration
}

// writeOf fills an HTTP attempt's write: its key, generation and the
// exact bytes it will hand over, recorded with the intent.
func (t *wtx) writeOf(a *Action, att *Attempt, n int) error {
	prof, err := destination.ParseProfileString(a.Lookup)
	if err != nil {
		return fmt.Errorf("attempt %d of %s: %w", att.Number, a.Key, err)
	}
	req, err := destination.ParseCanonical(a.Request)
	if err != nil {
		return fmt.Errorf("attempt %d of %s: %w", att.Number, a.Key, err)
	}
	var last Attempt
	if n > 0 {
		if last, err = lastAttempt(t, a.Key); err != nil {
			return err
		}
	}
	secret, err := t.keySecret()
	if err != nil {
		return err
	}
	att.KeyGeneration = nextGeneration(last, n)
	att.ProviderKey = ProviderKey(secret, a.Key, att.KeyGeneration, prof.KeyMax)
	w, err := req.Write(prof, a.Key, att.ProviderKey)
	if err != nil {
		return fmt.Errorf("attempt %d of %s: %w", att.Number, a.Key, err)
	}
	_, host, _ := strings.Cut(att.Destination, "://")
	att.Wire = string(w.Wire(host))
	att.MessageID = att.ProviderKey
	att.ContentDigest = destination.RequestDigest(a.Request)
	att.write = &w
	att.probe = a.State == StateHeld && a.HoldCause == HoldProbeDue
	return nil
}

// requestLine is the first line of recorded wire bytes ("POST /v1/refunds").
func requestLine(wire string) string {
	line, _, _ := strings.Cut(wire, "\r\n")
	return strings.TrimSuffix(line, " HTTP/1.1")
}

// wireBody is the body of recorded wire bytes.
func wireBody(wire string) []byte {
	_, body, _ := strings.Cut(wire, "\r\n\r\n")
	return []byte(body)
}

// isOwnRecord reports whether a provider's record is the HTTP attempt's
// write: it carries the attempt's key at the reference-id field, and every
// field the attempt wrote that it holds has the written value. The action
// key alone can be computed by anyone; a record carrying it and not the
// key is someone else's.
func isOwnRecord(att Attempt, m destination.FoundMessage) bool {
	return m.MessageID == att.MessageID && destination.RecordAgrees(m.Record, wireBody(att.Wire))
}

// judgeRecords is judge for an HTTP attempt's provider records.
func judgeRecords(att Attempt, res destination.LookupResult) verdict {
	var v verdict
	for _, m := range res.Messages {
		id := orDash(m.DestinationID)
		switch {
		case m.MessageID != att.MessageID:
			v.contradictions = append(v.contradictions, fmt.Sprintf("record %s carries the action key but not attempt %d's key (key %s)",
				id, att.Number, orDash(m.MessageID)))
		case !destination.RecordAgrees(m.Record, wireBody(att.Wire)):
			v.contradictions = append(v.contradictions, fmt.Sprintf("record %s carries attempt %d's key but other values than it wrote", id, att.Number))
		default:
			v.own++
			v.ids = append(v.ids, m.DestinationID)
		}
	}
	if v.own > 1 {
		v.contradictions = append(v.contradictions, fmt.Sprintf("%d records carry attempt %d's key (%s): the provider acted more than once",
			v.own, att.Number, strings.Join(v.ids, ", ")))
	}
	return v
}

// sameKeyAs drops the attempts that carry at's provider key: at the
// provider they are one write with it, never an earlier one arriving late.
func sameKeyAs(atts []Attempt, at Attempt) []Attempt {
	if at.ProviderKey == "" {
		return atts
	}
	var out []Attempt
	for _, x := range atts {
		if x.ProviderKey != at.ProviderKey {
			out = append(out, x)
		}
	}
	return out
}

// keyWindowEnd is when the provider forgets att's key: its window from
// the first attempt that carried it. Zero when the destination keeps no
// key.
func keyWindowEnd(q queryer, att Attempt) (time.Time, destination.Profile, error) {
	prof, err := destination.ParseProfileString(att.Lookup)
	if err != nil || !prof.HasKey() {
		return time.Time{}, prof, err
	}
	var first int64
	if err := q.QueryRow(`SELECT min(started_at) FROM attempts WHERE action_key = ? AND provider_key = ?`,
		att.ActionKey, att.ProviderKey).Scan(&first); err != nil {
		return time.Time{}, prof, fmt.Errorf("first attempt under the key of %s: %w", att.ActionKey, err)
	}
	return fromNS(first).Add(prof.Window), prof, nil
}

// probeDue reports whether reconciling att is a probe: the provider keeps
// its key, a probe sent now lands within the key's window (a lease before
// its end), and the key does not hold a stored 5xx, which a probe would
// only be answered again. It says why not otherwise.
func (t *wtx) probeDue(att Attempt) (bool, time.Time, string, error) {
	end, prof, err := keyWindowEnd(t, att)
	switch {
	case err != nil:
		return false, end, "", err
	case !prof.HasKey():
		return false, end, "the destination keeps no key", nil
	case att.Outcome == destination.OutcomeContradiction:
		// The same key would be answered the same refusal: what it
		// holds is for the records, or a person, to say.
		return false, end, "the provider holds another request under the key", nil
	case prof.Stores5xx && att.HTTPStatus >= 500:
		return false, end, fmt.Sprintf("the provider stored its %d under the key, and would answer it again", att.HTTPStatus), nil
	case !t.now().Add(t.l.lease).Before(end):
		return false, end, fmt.Sprintf("the provider's key window ended at %s", clockTime(end)), nil
	}
	return true, end, "", nil
}

// holdProbeDue parks an unknown HTTP outcome for a probe: the next send
// repeats attempt att's bytes under its key, through every check of a send.
func (t *wtx) holdProbeDue(a *Action, att Attempt, actor string, end time.Time) error {
	reason := fmt.Sprintf("outcome of attempt %d unknown; the provider keeps its key until %s, so the next send repeats the same bytes under the same key (a probe: the stored result if it arrived, the first execution if not)",
		att.Number, clockTime(end))
	if a.State != StateHeld || a.HoldCause != HoldProbeDue || a.Reason != reason {
		if err := t.transition(a, StateHeld, reason, HoldProbeDue); err != nil {
			return err
		}
	}
	return t.refuseWith(a, "", "", actor, EvHeld,
		&StateError{Key: a.Key, State: a.State, Err: ErrHeld, Hint: reason + "; send it again to probe"},
		"%s reconciled %s: attempt %d's outcome is unknown, and %s keeps its key %s until %s, so the probe is the same request with the same key; the next send makes it, after the checks of a send.",
		actor, a.Key, att.Number, orDash(att.Destination), att.ProviderKey, clockTime(end))
}

// refuseStaleProbe turns a probe that can no longer land within the key's
// window back into an unknown outcome: past the window the same key is a
// new request, and only the records (or a person) can say what happened.
func (t *wtx) refuseStaleProbe(a *Action, executor string) error {
	att, err := lastAttempt(t, a.Key)
	if err != nil {
		return err
	}
	if ok, _, why, err := t.probeDue(att); err != nil || ok {
		return err
	} else {
		reason := fmt.Sprintf("attempt %d's outcome is unknown and %s; a probe could be a second request, so it is reconciled by the records or by a person", att.Number, why)
		return t.refuseWith(a, StateUnknown, "", executor, EvRefused,
			&StateError{Key: a.Key, Err: ErrUnknownOutcome, Hint: reason},
			"%s tried to send %s as a probe, but %s; it is unknown again: reconcile it.", executor, a.Key, why)
	}
}

// probedAttempt is the earlier attempt an HTTP attempt probed: the latest
// one before it under the same key whose outcome is unknown and not
// reconciled (nil when it probed none).
func (t *wtx) probedAttempt(att Attempt) (*Attempt, error) {
	p, err := scanAttempt(t.QueryRow(`SELECT `+attemptCols+` FROM attempts WHERE action_key = ? AND provider_key = ? AND number < ?
		AND outcome = 'unknown' AND reconciled = 0 ORDER BY number DESC LIMIT 1`, att.ActionKey, att.ProviderKey, att.Number))
	if err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil, nil
		}
		return nil, fmt.Errorf("attempt probed by %d of %s: %w", att.Number, att.ActionKey, err)
	}
	return &p, nil
}

// applyProbe moves an action on by its probe's answer. A 2xx settles the
// probed attempts under the key too: the provider answered one write for
// them all (its stored result, or its first execution). A probe that did
// not reach the provider leaves the outcome open and the probe due; one
// refused for good says nothing of the earlier write, so a person looks.
func (t *wtx) applyProbe(a *Action, att, probed Attempt, o destination.Outcome, response string, rcpt destination.Receipt) error {
	switch o {
	case destination.OutcomeAccepted:
		how := "acted on it now: the earlier attempts had not arrived, and this is the first execution"
		if rcpt.Replayed {
			how = "replayed the result it stored for the earlier attempt"
		}
		note := fmt.Sprintf("the probe, attempt %d under the same key, was answered %d (%s): the provider %s", att.Number, rcpt.Status, orDash(rcpt.DestinationID), how)
		if _, err := t.Exec(`UPDATE attempts SET reconciled = 1, response = ?, destination_action_id = ? WHERE action_key = ? AND provider_key = ?
			AND number < ? AND outcome = 'unknown' AND reconciled = 0`, truncate(note, 2000), rcpt.DestinationID, att.ActionKey, att.ProviderKey, att.Number); err != nil {
			return fmt.Errorf("settle the attempts probed by %d of %s: %w", att.Number, att.ActionKey, err)
		}
		if err := t.event(att.Executor, a.TaskID, a.Key, EvReconciled, "", "Attempt %d of %s (and any before it under key %s) is settled by its probe: %s.",
			probed.Number, a.Key, att.ProviderKey, note); err != nil {
			return err
		}
		return t.applyOutcome(a, att, o, response, false)
	case destination.OutcomeNotDelivered, destination.OutcomeRejectedTemporary:
		end, _, err := keyWindowEnd(t, att)
		if err != nil {
			return err
		}
		reason := fmt.Sprintf("the probe, attempt %d, did not reach the provider (%s); attempt %d's outcome is still unknown: probe again until %s",
			att.Number, truncate(response, 200), probed.Number, clockTime(end))
		if err := t.transition(a, StateHeld, reason, HoldProbeDue); err != nil {
			return err
		}
		return t.event(att.Executor, a.TaskID, a.Key, EvHeld, "", "%s: %s.", a.Key, reason)
	case destination.OutcomeRejectedPermanent:
		reason := fmt.Sprintf("the probe, attempt %d, was refused (%s), which says nothing of attempt %d: its outcome is unknown; a person must check the destination",
			att.Number, truncate(response, 200), probed.Number)
		if err := t.transition(a, StateHeld, reason, HoldUnknownOutcome); err != nil {
			return err
		}
		return t.event(att.Executor, a.TaskID, a.Key, EvHeld, "", "%s is held: %s.", a.Key, reason)
	}
	return t.applyOutcome(a, att, o, response, false)
}

// WireText is the bytes an HTTP attempt handed over, for a person: the
// request line, the header fields and the body, a line each ("" for a
// message).
func (at Attempt) WireText() string {
	return string(bytes.ReplaceAll([]byte(at.Wire), []byte("\r\n"), []byte("\n")))
}

// keepProbeOpen puts an action whose probe was refused back on hold for
// its probe: whatever the refusal did to it (denied, cancelled, held by
// the stop), the earlier attempt's outcome is still unknown, and nothing
// may treat the action as unsent. An action the refusal left held for its
// probe, or unknown (the key's window has ended), stays as it is.
func (t *wtx) keepProbeOpen(a *Action, executor string, refusal error) error {
	if a.State == StateUnknown || a.State == StateHeld && a.HoldCause == HoldProbeDue {
		return nil
	}
	was := a.State
	reason := truncate(fmt.Sprintf("the probe was refused (%s: %s); the earlier attempt's outcome is still unknown, so it waits for its probe once that clears, or for a person (gate resolve)",
		was, refusalReason(refusal)), 1000)
	if err := t.transition(a, StateHeld, reason, HoldProbeDue); err != nil {
		return err
	}
	return t.event(executor, a.TaskID, a.Key, EvHeld, "", "%s stays held for its probe: %s.", a.Key, reason)
}

// RequestText is an action's HTTP request for a person approving it: the
// request line, the headers that carry meaning, the body as indented JSON,
// a line each ("" for a message). It is the write, not a description.
func (a Action) RequestText() string {
	if a.Request == "" {
		return ""
	}
	r, err := destination.ParseCanonical(a.Request)
	if err != nil {
		return a.Request
	}
	var b strings.Builder
	b.WriteString(r.Method + " " + r.Path + "\n")
	names := make([]string, 0, len(r.Headers))
	for n := range r.Headers {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		b.WriteString(n + ": " + r.Headers[n] + "\n")
	}
	var body bytes.Buffer
	if json.Indent(&body, r.Body, "", "  ") == nil {
		b.Write(body.Bytes())
	} else {
		b.Write(r.Body)
	}
	return strings.TrimRight(b.String(), "\n")
}

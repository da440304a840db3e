package scenarios

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"gatehouse/destination"
	"gatehouse/destination/httpdest"
	"gatehouse/fakes"
)

// This file is what a rehearsal does for an action that is a refund at the
// payments fake (fakes.Payments, docs/payments.md): the request it writes,
// the HTTP destination under the duplicate control the action declares,
// the fake's faults and options as steps, and the refunds the fake holds
// as the third column, "at the destination".

// Profiles are the duplicate controls a refund action may name, each the
// query of an HTTP destination URL (docs/destinations.md). An action may
// also give a dup=… query of its own.
var Profiles = map[string]string{
	// The provider keeps keys, and the gate has no other way to look.
	"keys": "dup=idempotency-key",
	// Keys, and after the window a search by reference.
	"keys_ref": "dup=idempotency-key&ref=metadata.gatehouse_key&search=/v1/refunds",
	// Stripe: keys, a stored 500 under the key, a search that lags.
	"stripe": "dup=idempotency-key&stores5xx=true&ref=metadata.gatehouse_key&search=/v1/refunds&lag=30s",
	// No keys; the provider keeps our reference and can be searched.
	"reference": "dup=reference&ref=metadata.gatehouse_key&search=/v1/refunds&lag=30s",
	// Nothing: an unknown outcome is a person's.
	"none": "dup=none",
}

// ProfileNames lists Profiles in documentation order.
var ProfileNames = []string{"keys", "keys_ref", "stripe", "reference", "none"}

// PaymentsFaults are the payments_fault words: the fake's faults, "up"
// (the end of down) and "none" (forget the queued ones).
var PaymentsFaults = []string{"commit_then_drop", "delay", "error_500", "error_429", "drop_before_commit", "down", "up", "none"}

// PaymentsFields are what payments_set changes.
var PaymentsFields = []string{"keys", "window", "search_lag", "store_5xx"}

// profileQuery is the destination query a refund action's profile names.
func profileQuery(name string) (string, error) {
	if q, ok := Profiles[name]; ok {
		return q, nil
	}
	if strings.HasPrefix(name, "dup=") {
		return name, nil
	}
	return "", fmt.Errorf("profile %q is not known", name)
}

// paymentsDest is the HTTP destination at the payments fake under one
// duplicate control, opened once per run and profile.
func (e *env) paymentsDest(profile string) (*httpdest.Destination, error) {
	if d, ok := e.httpDests[profile]; ok {
		return d, nil
	}
	q, err := profileQuery(profile)
	if err != nil {
		return nil, err
	}
	d, err := httpdest.New(e.paymentsURL + "?" + q)
	if err != nil {
		return nil, fmt.Errorf("payments destination %s: %w", profile, err)
	}
	d.Clock = e.clock
	if e.httpDests == nil {
		e.httpDests = map[string]*httpdest.Destination{}
	}
	e.httpDests[profile] = d
	return d, nil
}

// paymentsRecords opens the payments fake's records under the duplicate
// control an endpoint recorded, on the rehearsal clock.
func (e *env) paymentsRecords(ep destination.Endpoint) (destination.Records, error) {
	d, err := httpdest.Open(ep)
	if err != nil {
		return nil, err
	}
	d.Clock = e.clock
	return d, nil
}

// setPayments applies the world's starting options to the fake.
func (e *env) setPayments(w *PaymentsWorld) error {
	if w == nil {
		return nil
	}
	for _, f := range []struct{ field, value string }{
		{"keys", w.Keys}, {"window", w.Window}, {"search_lag", w.SearchLag}, {"store_5xx", w.Store5xx},
	} {
		if f.value == "" {
			continue
		}
		if err := e.setPaymentsField(f.field, f.value); err != nil {
			return fmt.Errorf("payments %s: %w", f.field, err)
		}
	}
	return nil
}

func (e *env) setPaymentsField(field, value string) error {
	switch field {
	case "keys":
		return e.payments.SetKeys(value)
	case "window", "search_lag":
		d, err := time.ParseDuration(value)
		if err != nil {
			return err
		}
		if field == "window" {
			return e.payments.SetWindow(d)
		}
		return e.payments.SetSearchLag(d)
	case "store_5xx":
		on, err := yesNo(value)
		if err != nil {
			return err
		}
		e.payments.SetStore5xx(on)
		return nil
	}
	return fmt.Errorf("unknown payments field %q", field)
}

func yesNo(s string) (bool, error) {
	switch strings.ToLower(s) {
	case "yes", "true":
		return true, nil
	case "no", "false":
		return false, nil
	}
	return false, fmt.Errorf("%q: want yes or no", s)
}

// refund is a refund action's content: the body it writes.
type refund struct {
	profile  string
	payment  string
	amount   int
	currency string
	reason   string
}

// request is the refund as the HTTP request the gate binds. A profile
// with a reference gets the action key from the gate itself; without
// one the body carries it, so that the fake can count records per action
// key whatever the profile (the refund's own metadata, as a team's would).
func (a *actionState) request(prof destination.Profile) (string, error) {
	body := map[string]any{"payment": a.refund.payment, "amount": a.refund.amount, "currency": a.refund.currency}
	if a.refund.reason != "" {
		body["reason"] = a.refund.reason
	}
	if !prof.HasReference() {
		body["metadata"] = map[string]string{fakes.GatehouseKeyField: a.key}
	}
	raw, err := json.Marshal(body)
	if err != nil {
		return "", err
	}
	return destination.Request{Method: "POST", Path: "/v1/refunds", Body: raw}.Canonical()
}

// doPaymentsFault injects one of the payments fake's faults, ends down,
// or forgets the faults still queued.
func (r *Run) doPaymentsFault(_ context.Context, s *Step, _ barrier) (outcome, error) {
	p := r.env.payments
	switch s.Fault {
	case "none":
		p.ClearFaults()
	case "up":
		p.SetDown(false)
	case string(fakes.PayDown):
		p.SetDown(true)
	default:
		f := fakes.PaymentsFault{Kind: fakes.PaymentsFaultKind(s.Fault), Count: s.Count}
		if s.Delay != "" {
			d, err := time.ParseDuration(s.Delay)
			if err != nil {
				return outcome{}, fmt.Errorf("payments fault: %w", err)
			}
			f.Delay = d
		}
		if err := p.QueueFault(f); err != nil {
			return outcome{}, fmt.Errorf("payments fault: %w", err)
		}
	}
	return outcome{class: ClassOK}, nil
}

// doPaymentsSet changes one of the fake's options.
func (r *Run) doPaymentsSet(_ context.Context, s *Step, _ barrier) (outcome, error) {
	if err := r.env.setPaymentsField(s.Field, s.Value); err != nil {
		return outcome{}, fmt.Errorf("payments_set %s: %w", s.Field, err)
	}
	return outcome{class: ClassOK}, nil
}

// refundRecords are the refunds the fake holds now, per action key, in
// creation order.
func (r *Run) refundRecords() map[string][]fakes.PaymentsRecord {
	out := map[string][]fakes.PaymentsRecord{}
	for _, rec := range r.env.payments.Records().Records {
		k := rec.Refund.Metadata[fakes.GatehouseKeyField]
		out[k] = append(out[k], rec)
	}
	return out
}

// recordCell is one refund at the fake as the third column shows it: its
// id, the key it came with (the idempotency key, or the gate's key at
// the reference-id field), its amount, and whether it is a second record
// for its action key.
func recordCell(rec fakes.PaymentsRecord, n int) ArrivalCell {
	key := rec.IdempotencyKey
	if key == "" {
		key = rec.Refund.Metadata["gatehouse_ref"]
	}
	at, _ := time.Parse(time.RFC3339, rec.Refund.Created)
	return ArrivalCell{MessageID: key, DestinationID: rec.Refund.ID, To: rec.Refund.Payment,
		Subject: fmt.Sprintf("refund %s %s", formatMinor(rec.Refund.Amount), strings.ToUpper(rec.Refund.Currency)),
		At:      at, Duplicate: n > 0, Record: true}
}

// formatMinor writes minor units as a decimal amount (1250 → 12.50).
func formatMinor(v int64) string {
	s := strconv.FormatInt(v, 10)
	for len(s) < 3 {
		s = "0" + s
	}
	return s[:len(s)-2] + "." + s[len(s)-2:]
}

// checkRecords judges the records expectation against the fake's own
// records.
func (r *Run) checkRecords(x *RecordExpect) []Verdict {
	recs := r.env.payments.Records()
	var out []Verdict
	if x.Total != nil {
		out = append(out, intVerdict("records.total", x.KeyPos["total"], *x.Total, len(recs.Records)))
	}
	for _, name := range sortedKeys(x.PerAction) {
		out = append(out, intVerdict("records.per_action."+name, x.KeyPos["per_action"], x.PerAction[name], recs.PerKey[r.action(name).key]))
	}
	return out
}

// refundWorld validates the world's payments options and refund actions.
func (v *validator) refundWorld() {
	w := v.sc.World
	if p := w.Payments; p != nil {
		v.oneOf(p.KeyPos, "keys", p.Keys, []string{fakes.PaymentsKeys, fakes.PaymentsNoKeys})
		v.duration(p.KeyPos, "window", p.Window)
		v.duration(p.KeyPos, "search_lag", p.SearchLag)
		v.oneOf(p.KeyPos, "store_5xx", strings.ToLower(p.Store5xx), []string{"yes", "no", "true", "false"})
	}
	for _, a := range w.Actions {
		if a.Refund == nil {
			if a.Profile != "" {
				v.problem(a.KeyPos["profile"], "add refund: {payment: …, amount: …, currency: …}", "action %q: profile belongs to a refund", a.Name)
			}
			continue
		}
		v.require(a.Refund.Pos, "refund", map[string]string{"payment": a.Refund.Payment, "currency": a.Refund.Currency})
		if a.Refund.Amount <= 0 {
			v.problem(or2(a.Refund.KeyPos["amount"], a.Refund.Pos), "write the amount in minor units, e.g. 1250 for 12.50", "action %q: refund amount must be positive", a.Name)
		}
		if a.Profile == "" {
			v.problem(a.Pos, "one of: "+strings.Join(ProfileNames, ", ")+", or a dup=… query", "action %q: a refund needs profile", a.Name)
		} else if q, err := profileQuery(a.Profile); err != nil {
			v.problem(a.KeyPos["profile"], "one of: "+strings.Join(ProfileNames, ", ")+", or a dup=… query", "action %q: %v", a.Name, err)
		} else if _, err := httpdest.New("http://127.0.0.1:1?" + q); err != nil {
			v.problem(a.KeyPos["profile"], "see docs/destinations.md, Declaring the duplicate control", "action %q: profile: %v", a.Name, err)
		}
		for _, k := range []string{"subject", "body", "to"} {
			if _, ok := a.KeyPos[k]; ok {
				v.problem(a.KeyPos[k], "a refund's content is its refund: block", "action %q: %s does not apply to a refund", a.Name, k)
			}
		}
	}
}

func or2(p, q Pos) Pos {
	if p.Line > 0 {
		return p
	}
	return q
}

// refundStep checks what a step may do to a refund action, and the words
// of the payments verbs.
func (v *validator) refundStep(name string, s *Step) {
	isRefund := slices.ContainsFunc(v.sc.World.Actions, func(a ActionDef) bool { return a.Name == s.Action && a.Refund != nil })
	if _, ok := s.KeyPos["amount"]; ok {
		if !isRefund {
			v.problem(s.KeyPos["amount"], "amount changes a refund action", "%s: %q is no refund", name, s.Action)
		} else if s.Amount <= 0 {
			v.problem(s.KeyPos["amount"], "write the amount in minor units, e.g. 1250 for 12.50", "%s: amount must be positive", name)
		}
	}
	if isRefund {
		switch s.Do {
		case "correct", "pause_executor", "resume_executor":
			v.problem(s.KeyPos["do"], "rehearse a refund with send, crash, reconcile and payments_fault", "%s: %s does not apply to a refund yet", name, s.Do)
		}
		for _, k := range []string{"subject", "body", "to"} {
			if _, ok := s.KeyPos[k]; ok {
				v.problem(s.KeyPos[k], "a refund changes by amount:", "%s: %s does not apply to a refund", name, k)
			}
		}
	}
	switch s.Do {
	case "payments_fault":
		v.oneOf(s.KeyPos, "fault", s.Fault, PaymentsFaults)
	case "payments_set":
		v.oneOf(s.KeyPos, "field", s.Field, PaymentsFields)
		switch s.Field {
		case "window", "search_lag":
			v.duration(s.KeyPos, "value", s.Value)
		case "keys":
			v.oneOf(s.KeyPos, "value", s.Value, []string{fakes.PaymentsKeys, fakes.PaymentsNoKeys})
		case "store_5xx":
			v.oneOf(s.KeyPos, "value", strings.ToLower(s.Value), []string{"yes", "no", "true", "false"})
		}
	}
}

// sortedRecordKeys are the action keys with records, sorted.
func sortedRecordKeys(m map[string][]fakes.PaymentsRecord) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

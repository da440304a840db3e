package scenarios

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// Steps that bring a refund to its end after the first send, by what the
// send left (docs/destinations.md, Reconcile per profile).
const (
	// A retry: the fault was temporary and nothing was created.
	retry = `  - {do: send, action: refund, actor: wf, expect: sent}
`
	// The probe: the same bytes under the same key, within the window.
	probe = `  - {do: reconcile, action: refund, actor: wf, expect: held, reason_contains: same key}
  - {do: send, action: refund, actor: wf, expect: sent}
`
	// The search finds the refund once its lag has passed.
	foundAfterLag = `  - {do: reconcile, action: refund, actor: wf, expect: held, reason_contains: not found yet}
  - {do: wait, for: 30s}
  - {do: reconcile, action: refund, actor: wf, expect: sent}
`
	// The search proves absence once the attempt has settled; a person
	// releases the hold and the retry goes under the next key generation.
	absentThenRetry = `  - {do: reconcile, action: refund, actor: wf, expect: held, reason_contains: not found yet}
  - {do: wait, for: 5m}
  - {do: reconcile, action: refund, actor: wf, expect: held, reason_contains: safe to retry}
  - {do: release_hold, action: refund, actor: lead, reason: no refund at the provider}
  - {do: send, action: refund, actor: wf, expect: sent}
`
	// Without a duplicate control the outcome is a person's, always.
	forAPerson = `  - {do: reconcile, action: refund, actor: wf, expect: held, reason_contains: a person must}
  - {do: send, action: refund, actor: wf, expect: unknown}
`
)

// refundCase is one cell of the profile × fault table: what the first
// send is, the steps after it, and how it ends.
type refundCase struct {
	profile, fault string
	send           string // the first send's class
	then           string
	state          string // the end state
	records        int    // refunds at the fake for the action
}

// refundCases is the table the acceptance asks for: each profile with each
// fault at each HTTP phase. "none" is no fault (a 201); commit_then_drop
// is "request written, no response" after the provider acted,
// drop_before_commit the same before it did; error_500 and down are 5xx
// (stored under the key at the stripe profile), error_429 a rate limit,
// delay an answer that comes late but complete.
func refundCases() []refundCase {
	var out []refundCase
	for _, p := range ProfileNames {
		keys := p == "keys" || p == "keys_ref" || p == "stripe"
		add := func(fault, send, then, state string, records int) {
			out = append(out, refundCase{p, fault, send, then, state, records})
		}
		add("none", ClassSent, "", "sent", 1)
		add("delay", ClassSent, "", "sent", 1)
		add("error_429", ClassNotDelivered, retry, "sent", 1)
		switch {
		case keys:
			add("commit_then_drop", ClassUnknown, probe, "sent", 1)
			add("drop_before_commit", ClassUnknown, probe, "sent", 1)
		case p == "reference":
			add("commit_then_drop", ClassUnknown, foundAfterLag, "sent", 1)
			add("drop_before_commit", ClassUnknown, absentThenRetry, "sent", 1)
		default:
			add("commit_then_drop", ClassUnknown, forAPerson, "held", 1)
			add("drop_before_commit", ClassUnknown, forAPerson, "held", 0)
		}
		if p == "stripe" {
			add("error_500", ClassUnknown, absentThenRetry, "sent", 1)
			add("down", ClassUnknown, "  - {do: payments_fault, fault: up}\n"+absentThenRetry, "sent", 1)
		} else {
			add("error_500", ClassNotDelivered, retry, "sent", 1)
			add("down", ClassNotDelivered, "  - {do: payments_fault, fault: up}\n"+retry, "sent", 1)
		}
	}
	return out
}

// scenario is the cell as a scenario file: the refund proposed, approved,
// the fault queued, the send, the steps after it, and the expectations
// over the fake's own records.
func (c refundCase) scenario() string {
	store, keys := "no", "keys"
	if c.profile == "stripe" {
		store = "yes"
	}
	if c.profile == "reference" || c.profile == "none" {
		keys = "none"
	}
	fault := fmt.Sprintf("  - {do: payments_fault, fault: %s}\n", c.fault)
	switch c.fault {
	case "none":
		fault = ""
	case "delay":
		fault = "  - {do: payments_fault, fault: delay, delay: 20ms}\n"
	}
	return fmt.Sprintf(`name: refund-%s-%s
title: %s × %s
description: one cell of the profile × fault table
world:
  customers:
    - {id: cust-ada, email: ada@example.com, fields: {payment_state: captured}}
  tasks:
    - {id: t-1, customer: cust-ada, subject: Return, owner: wf}
  actors:
    - {id: wf, kind: workflow}
    - {id: lead, kind: staff}
  payments: {keys: %s, search_lag: 30s, store_5xx: "%s"}
  actions:
    - name: refund
      task: t-1
      event: return-88
      type: refund
      refund: {payment: pay_1, amount: 1250, currency: eur}
      profile: %s
      material: [crm.payment_state]
steps:
  - {do: propose, action: refund, actor: wf}
  - {do: approve, action: refund, actor: lead}
%s  - {do: send, action: refund, actor: wf, expect: %s}
%sexpect:
  records: {total: %d, per_action: {refund: %d}}
  states: {refund: %s}
`, strings.ReplaceAll(c.profile, "_", "-"), strings.ReplaceAll(c.fault, "_", "-"), c.profile, c.fault,
		keys, store, c.profile, fault, c.send, c.then, c.records, c.records, c.state)
}

// TestRefundUnderEveryProfileAndFault rehearses a refund under every
// duplicate control with each fault at each HTTP phase: the first send's
// class and the end state are the table's (testdata/refund-faults.golden,
// the same table as docs/scenarios.md), and the fake holds exactly the
// records the table says — one wherever the refund ends sent, never two.
func TestRefundUnderEveryProfileAndFault(t *testing.T) {
	cases := refundCases()
	var mu sync.Mutex
	got := map[string]string{}
	t.Run("cells", func(t *testing.T) {
		for _, c := range cases {
			t.Run(c.profile+"/"+c.fault, func(t *testing.T) {
				t.Parallel()
				sc, err := Parse("refund-table.yaml", []byte(c.scenario()))
				if err != nil {
					t.Fatalf("%v\n%s", err, c.scenario())
				}
				rep := mustRun(t, sc, Options{})
				var b bytes.Buffer
				WriteText(&b, []Report{rep})
				if !rep.Passed {
					t.Fatalf("cell failed:\n%s", b.String())
				}
				mu.Lock()
				got[c.profile+"/"+c.fault] = fmt.Sprintf("%s → %s · %d", c.send, c.state, c.records)
				mu.Unlock()
			})
		}
	})
	var table strings.Builder
	table.WriteString("| fault | " + strings.Join(ProfileNames, " | ") + " |\n")
	table.WriteString("| --- |" + strings.Repeat(" --- |", len(ProfileNames)) + "\n")
	var faults []string
	for _, c := range cases {
		if c.profile == ProfileNames[0] {
			faults = append(faults, c.fault)
		}
	}
	for _, f := range faults {
		table.WriteString("| " + f + " |")
		for _, p := range ProfileNames {
			table.WriteString(" " + or(got[p+"/"+f], "FAILED") + " |")
		}
		table.WriteString("\n")
	}
	golden := filepath.Join("testdata", "refund-faults.golden")
	if *update {
		if err := os.WriteFile(golden, []byte(table.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if table.String() != string(want) {
		t.Fatalf("the table differs from %s:\n%s", golden, table.String())
	}
	doc, err := os.ReadFile(filepath.Join("..", "docs", "scenarios.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(doc, want) {
		t.Fatalf("docs/scenarios.md does not hold the table of %s", golden)
	}
}

// TestSecondRefundIsMarkedDuplicate: a refund someone else writes to the
// provider with the action's key shows in the third column beside the
// gate's own, marked DUPLICATE and UNMATCHED (no attempt carried its key
// or recorded its id), and the records expectation counts both.
func TestSecondRefundIsMarkedDuplicate(t *testing.T) {
	c := refundCase{profile: "keys_ref", fault: "none", send: ClassSent, state: "sent", records: 1}
	sc, err := Parse("refund-dup.yaml", []byte(c.scenario()))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	r, err := NewRun(ctx, sc, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for !r.Done() {
		if _, err := r.Step(ctx); err != nil {
			t.Fatal(err)
		}
	}
	key := r.action("refund").key
	body := fmt.Sprintf(`{"payment": "pay_1", "amount": 1250, "currency": "eur", "metadata": {"gatehouse_key": %q}}`, key)
	resp, err := http.Post(r.env.paymentsURL+"/v1/refunds", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	rep, err := r.Finish(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Passed {
		t.Fatal("two refunds for one action passed records.per_action: 1")
	}
	row := rep.Rows[0]
	if len(row.Arrivals) != 2 || row.Arrivals[0].Duplicate || row.Arrivals[0].Unmatched || row.Arrivals[0].Attempt != 1 ||
		!row.Arrivals[1].Duplicate || !row.Arrivals[1].Unmatched {
		t.Fatalf("arrivals %+v", row.Arrivals)
	}
	var b bytes.Buffer
	WriteText(&b, []Report{rep})
	for _, want := range []string{"AT THE DESTINATION", "DUPLICATE  UNMATCHED: no attempt has this record's key or id", "records.per_action.refund: expected 1, got 2"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, b.String())
		}
	}
}

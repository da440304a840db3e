package tui

import (
	"strings"
	"testing"

	"gatehouse/destination"
	"gatehouse/ledger"
)

// TestDetailShowsTheRequestItself: an action that is an HTTP request shows
// the write in its detail (request line, headers, the body's fields and
// values), where a message shows its recipient and subject.
func TestDetailShowsTheRequestItself(t *testing.T) {
	r, err := destination.ParseRequest([]byte(`{"method": "POST", "path": "/v1/refunds", "headers": {"Stripe-Version": "2026-01-28"},
		"body": {"payment": "pay_1", "amount": 1250, "currency": "eur"}}`))
	if err != nil {
		t.Fatal(err)
	}
	canon, err := r.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	d := ledger.ActionDetail{Action: ledger.Action{Key: "gh1:c:e:refund:o:r0", State: ledger.StateApproved, Request: canon,
		Destination: "http://127.0.0.1:8080", Lookup: "dup=none"}}
	text := strings.Join(actionDetailLines(NewTheme(true), d, 120), "\n")
	for _, want := range []string{"request    POST /v1/refunds", "Stripe-Version: 2026-01-28", `"amount": 1250`, `"payment": "pay_1"`} {
		if !strings.Contains(text, want) {
			t.Errorf("detail lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "subject") {
		t.Errorf("a request's detail shows a subject:\n%s", text)
	}
}

package destination_test

import (
	"strings"
	"testing"

	"gatehouse/destination"
)

// TestRequestCanonicalForm: formatting and key order never change the
// canonical request (so an approval holds), any changed amount, account,
// path or meaningful header does, and what the gate writes itself is
// refused in a request file.
func TestRequestCanonicalForm(t *testing.T) {
	base := `{"method": "POST", "path": "/v1/refunds", "headers": {"stripe-version": "2026-01-01"},
		"body": {"payment": "pay_1", "amount": 1250, "currency": "eur"}}`
	canon := func(t *testing.T, file string) string {
		t.Helper()
		r, err := destination.ParseRequest([]byte(file))
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		c, err := r.Canonical()
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	want := canon(t, base)
	if !strings.Contains(want, `"Stripe-Version":"2026-01-01"`) || !strings.Contains(want, `{"amount":1250,"currency":"eur","payment":"pay_1"}`) {
		t.Fatalf("canonical form %s", want)
	}
	same := []string{
		`{"body":{"currency":"eur","amount":1250,"payment":"pay_1"},"headers":{"Stripe-Version":" 2026-01-01 "},"path":"/v1/refunds","method":"post"}`,
		"{\n  \"method\": \"POST\",\n  \"path\": \"/v1/refunds\",\n  \"headers\": {\"Stripe-Version\": \"2026-01-01\"},\n  \"body\": {\n    \"payment\": \"pay_1\",\n    \"amount\": 1250,\n    \"currency\": \"eur\"\n  }\n}",
	}
	for _, s := range same {
		if got := canon(t, s); got != want {
			t.Errorf("reformatted request changed its canonical form:\n%s\n%s", got, want)
		}
	}
	changed := map[string]string{
		"amount":  strings.Replace(base, "1250", "1251", 1),
		"account": strings.Replace(base, "pay_1", "pay_2", 1),
		"path":    strings.Replace(base, "/v1/refunds", "/v1/refunds/x", 1),
		"header":  strings.Replace(base, "2026-01-01", "2025-01-01", 1),
		"method":  strings.Replace(base, "POST", "PUT", 1),
	}
	for what, s := range changed {
		if got := canon(t, s); got == want {
			t.Errorf("a changed %s kept the canonical form", what)
		}
	}
	refused := map[string]string{
		"duplicate key":   `{"method": "POST", "path": "/x", "body": {"amount": 1, "amount": 2}}`,
		"gate's header":   `{"method": "POST", "path": "/x", "headers": {"Idempotency-Key": "mine"}, "body": {}}`,
		"content type":    `{"method": "POST", "path": "/x", "headers": {"content-type": "text/plain"}, "body": {}}`,
		"a read":          `{"method": "GET", "path": "/x"}`,
		"unknown field":   `{"method": "POST", "path": "/x", "heaers": {}, "body": {}}`,
		"no body":         `{"method": "POST", "path": "/x"}`,
		"relative path":   `{"method": "POST", "path": "x", "body": {}}`,
		"header break":    `{"method": "POST", "path": "/x", "headers": {"X-A": "a\r\nX-B: b"}, "body": {}}`,
		"trailing values": `{"method": "POST", "path": "/x", "body": {}} {}`,
	}
	for what, s := range refused {
		if _, err := destination.ParseRequest([]byte(s)); err == nil {
			t.Errorf("%s: accepted", what)
		}
	}
}

// TestWriteFillsTheGatesFields: the write carries the key header and the
// reference fields, and a body that already fills them is refused.
func TestWriteFillsTheGatesFields(t *testing.T) {
	p, err := destination.ParseProfileString("dup=idempotency-key&ref=metadata.gatehouse_key&search=/v1/refunds")
	if err != nil {
		t.Fatal(err)
	}
	r := destination.Request{Method: "POST", Path: "/v1/refunds", Body: []byte(`{"amount": 5, "metadata": {"order": "o1"}}`)}
	w, err := r.Write(p, "act", "gh_1")
	if err != nil {
		t.Fatal(err)
	}
	if got := string(w.Body); got != `{"amount":5,"metadata":{"gatehouse_key":"act","gatehouse_ref":"gh_1","order":"o1"}}` {
		t.Fatalf("body %s", got)
	}
	if !destination.RecordAgrees([]byte(`{"id": "re_1", "amount": 5.0, "metadata": {"gatehouse_key": "act", "gatehouse_ref": "gh_1", "order": "o1"}}`), w.Body) {
		t.Fatal("a record holding every written field is not the write's")
	}
	if !destination.RecordAgrees([]byte(`{"id": "re_1", "amount": 5}`), w.Body) {
		t.Fatal("a record that echoes only some fields is not the write's")
	}
	if destination.RecordAgrees([]byte(`{"id": "re_1", "amount": 6, "metadata": {"gatehouse_key": "act", "gatehouse_ref": "gh_1", "order": "o1"}}`), w.Body) {
		t.Fatal("a record with another amount is the write's")
	}
	forged := destination.Request{Method: "POST", Path: "/v1/refunds", Body: []byte(`{"metadata": {"gatehouse_ref": "mine"}}`)}
	if _, err := forged.Write(p, "act", "gh_1"); err == nil {
		t.Fatal("a body setting the gate's key field was written")
	}
	paypal, err := destination.ParseProfileString("dup=idempotency-key&header=PayPal-Request-Id")
	if err != nil {
		t.Fatal(err)
	}
	own := destination.Request{Method: "POST", Path: "/v2/refunds", Headers: map[string]string{"Paypal-Request-Id": "mine"}, Body: []byte(`{}`)}
	if _, err := own.Write(paypal, "act", "gh_1"); err == nil {
		t.Fatal("a request carrying its own key header was written")
	}
}

// TestProfileParse: each control with its defaults, and the mistakes a URL
// can make.
func TestProfileParse(t *testing.T) {
	p, err := destination.ParseProfileString("dup=idempotency-key&stores5xx=true")
	if err != nil || p.KeyHeader != "Idempotency-Key" || p.Window != destination.DefaultWindow || !p.Stores5xx || p.HasReference() {
		t.Fatalf("%+v %v", p, err)
	}
	again, err := destination.ParseProfileString(p.String())
	if err != nil || again != p {
		t.Fatalf("round trip: %+v %v, want %+v", again, err, p)
	}
	for _, bad := range []string{"", "dup=maybe", "dup=reference", "dup=none&ref=a.b", "dup=reference&ref=a.b&window=1h",
		"dup=idempotency-key&window=soon", "dup=idempotency-key&colour=red", "dup=reference&ref=external_id&search=/x"} {
		if _, err := destination.ParseProfileString(bad); err == nil {
			t.Errorf("%q: accepted", bad)
		}
	}
}

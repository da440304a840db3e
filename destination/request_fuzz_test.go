package destination_test

import (
	"testing"

	"gatehouse/destination"
)

// FuzzCanonicalRequest: whatever a request file holds, a request the
// parser takes has one canonical form, which reads back to itself (so an
// approval digest computed twice agrees), and its write under a profile
// with a reference either fails or keeps the body JSON that agrees with
// what was approved.
func FuzzCanonicalRequest(f *testing.F) {
	for _, s := range []string{
		`{"method": "POST", "path": "/v1/refunds", "body": {"payment": "pay_1", "amount": 1250, "currency": "eur"}}`,
		`{"method": "patch", "path": "/x", "headers": {"x-api-version": "2"}, "body": [1, 2.50, "é", {"a": null}]}`,
		`{"method": "DELETE", "path": "/a/b?c=d"}`,
		`{"method": "POST", "path": "/x", "body": {"a": 1, "a": 2}}`,
	} {
		f.Add([]byte(s))
	}
	prof, err := destination.ParseProfileString("dup=idempotency-key&ref=metadata.gatehouse_key&search=/v1/refunds")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := destination.ParseRequest(data)
		if err != nil {
			return
		}
		c, err := r.Canonical()
		if err != nil {
			t.Fatalf("parsed but no canonical form: %v", err)
		}
		back, err := destination.ParseCanonical(c)
		if err != nil {
			t.Fatalf("canonical form %s does not read back: %v", c, err)
		}
		again, err := back.Canonical()
		if err != nil || again != c {
			t.Fatalf("canonical form moved: %s → %s (%v)", c, again, err)
		}
		w, err := r.Write(prof, "ak", "gh_k")
		if err != nil {
			return
		}
		if len(r.Body) > 0 && !destination.RecordAgrees(w.Body, r.Body) {
			t.Fatalf("the write %s disagrees with the approved body %s", w.Body, r.Body)
		}
	})
}

package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf16"

	"gatehouse/ledger"
)

func utf16File(t *testing.T, path, s string, mark bool) {
	t.Helper()
	var out []byte
	if mark {
		out = append(out, 0xFF, 0xFE)
	}
	for _, u := range utf16.Encode([]rune(s)) {
		out = append(out, byte(u), byte(u>>8))
	}
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
}

// customerKnown reports whether the ledger's customer mirror holds id.
func customerKnown(t *testing.T, path, id string) bool {
	t.Helper()
	l, err := ledger.OpenReadOnly(path)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, ok, err := l.Customers().CustomerByID(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

func TestRefusedAudienceReconcileWritesNothing(t *testing.T) {
	tests := []struct {
		Name string
		// Setup prepares the files and returns what the refusal must say.
		Setup func(t *testing.T, e *audienceEnv) string
	}{
		{"AudienceFileUTF16", func(t *testing.T, e *audienceEnv) string {
			utf16File(t, e.file, testAudience, true)
			return "not UTF-8 text: it is UTF-16 (little-endian byte order mark)"
		}},
		{"AudienceFileUTF16WithoutBOM", func(t *testing.T, e *audienceEnv) string {
			utf16File(t, e.file, testAudience, false)
			return "a NUL byte: it looks like UTF-16"
		}},
		{"CustomersFileUTF16", func(t *testing.T, e *audienceEnv) string {
			utf16File(t, e.custom, testCustomers, true)
			return "customers " + e.custom + ": not UTF-8 text: it is UTF-16"
		}},
		{"CustomersFileLatin1", func(t *testing.T, e *audienceEnv) string {
			os.WriteFile(e.custom, []byte(testCustomers+"c9,ren\xe9@example.org,yes,no\n"), 0o644)
			return "customers " + e.custom + ": not UTF-8 text: line 7, column 7: byte 0xE9"
		}},
		{"CustomersFileBadRow", func(t *testing.T, e *audienceEnv) string {
			os.WriteFile(e.custom, []byte(testCustomers+"c9,x@example.org,yes,maybe\n"), 0o644)
			return `consent not understood: 1 rows ("suppressed=maybe" ×1)`
		}},
		{"ReleaseTakenByAnotherFile", func(t *testing.T, e *audienceEnv) string {
			other := filepath.Join(filepath.Dir(e.file), "other.csv")
			os.WriteFile(other, []byte("customer_id\nc2\n"), 0o644)
			r := e.run("reconcile", "--release", "spring", "--file", other, "--as", "ops", "--subject", "S")
			if r.code != 0 {
				t.Fatalf("first reconcile: %d %s", r.code, r.stderr)
			}
			return "reconciled from another file"
		}},
	}
	for _, tc := range tests {
		t.Run(tc.Name, func(t *testing.T) {
			e := newAudienceEnv(t)
			want := tc.Setup(t, e)
			r := e.run("reconcile", "--release", "spring", "--file", e.file, "--customers", e.custom, "--as", "ops",
				"--subject", "Opening hours change")
			if r.code == 0 || !strings.Contains(r.stderr, want) || strings.Count(r.stderr, "\n") != 1 {
				t.Fatalf("exit %d, stderr %q, want one line with %q", r.code, r.stderr, want)
			}
			if _, err := os.Stat(e.ledger); err != nil {
				return // refused before the ledger was opened
			}
			if customerKnown(t, e.ledger, "c1") {
				t.Fatal("a refused reconcile recorded the customers")
			}
		})
	}
}

func TestAudienceReconcileAcceptsUTF8BOM(t *testing.T) {
	e := newAudienceEnv(t)
	os.WriteFile(e.file, []byte("\uFEFF"+testAudience), 0o644)
	os.WriteFile(e.custom, []byte("\uFEFF"+testCustomers), 0o644)
	v := e.view("reconcile", "--release", "spring", "--file", e.file, "--customers", e.custom, "--as", "ops",
		"--subject", "Opening hours change")
	if v.SourceRows != 8 || v.Eligible != 3 {
		t.Fatalf("rows %d, eligible %d; want 8 and 3", v.SourceRows, v.Eligible)
	}
	if !customerKnown(t, e.ledger, "c1") {
		t.Fatal("the customers were not recorded")
	}
}

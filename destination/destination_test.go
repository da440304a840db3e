package destination_test

import (
	"crypto/sha256"
	"encoding/hex"
	"math/rand/v2"
	"strings"
	"testing"

	"gatehouse/destination"
)

// digestByDefinition is ContentDigest as its documentation defines it.
func digestByDefinition(subject, body string) string {
	sum := sha256.Sum256([]byte(destination.NormalizeText(subject) + "\x00" + destination.NormalizeText(body)))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// TestContentDigestIsNormalizedText: the digest, computed without building
// the normalized text, is the SHA-256 of it all the same, across buffer
// boundaries, Unicode white space and invalid UTF-8.
func TestContentDigestIsNormalizedText(t *testing.T) {
	tests := []struct{ subject, body string }{
		{"", ""},
		{"We received your enquiry", "Hello Ada,\r\nthank you.\r\n"},
		{"  a \t b  ", "\n\n x\u00a0y\u2028z \v\f"},
		{"caf\xe9", "\xff \x80\x80"},
		{"", strings.Repeat("w", 100<<10)},
		{strings.Repeat("ab ", 20<<10), strings.Repeat("a\r\n", 50<<10)},
	}
	for i, tt := range tests {
		if got, want := destination.ContentDigest(tt.subject, tt.body), digestByDefinition(tt.subject, tt.body); got != want {
			t.Errorf("case %d: digest %s, want %s", i, got, want)
		}
	}
	const seed = 7
	rng := rand.New(rand.NewPCG(seed, seed))
	pieces := []string{"a", "ü", " ", "  ", "\t", "\n", "\r\n", "\u00a0", "\u3000", "\xe9", strings.Repeat("x", 5000)}
	draw := func() string {
		var b strings.Builder
		for range rng.IntN(200) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		return b.String()
	}
	for i := range 500 {
		s, b := draw(), draw()
		if got, want := destination.ContentDigest(s, b), digestByDefinition(s, b); got != want {
			t.Fatalf("seed %d, case %d: digest of %q / %q is %s, want %s", seed, i, s, b, got, want)
		}
	}
}

// TestContentDigestToleratesFormatting: re-wrapping and line endings do
// not change the digest; a changed word, or a word moved between subject
// and body, does.
func TestContentDigestToleratesFormatting(t *testing.T) {
	d := destination.ContentDigest("Your order", "Dear Ada,\nit ships today.\n")
	if got := destination.ContentDigest(" Your  order ", "Dear Ada, it\r\nships today."); got != d {
		t.Error("re-wrapping changed the digest")
	}
	for _, other := range [][2]string{{"Your order", "Dear Ada,\nit ships tomorrow.\n"}, {"Your", "order Dear Ada, it ships today."}} {
		if destination.ContentDigest(other[0], other[1]) == d {
			t.Errorf("%q / %q has the same digest", other[0], other[1])
		}
	}
}

// TestContentDigestDoesNotCopyTheWords: digesting a body of a million
// one-letter words, as a record anyone wrote may hold, allocates a small
// buffer, neither a copy of the text nor a string per word.
func TestContentDigestDoesNotCopyTheWords(t *testing.T) {
	body := strings.Repeat("a ", 1<<20)
	r := testing.Benchmark(func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			destination.ContentDigest("", body)
		}
	})
	if n := r.AllocedBytesPerOp(); n > 256<<10 {
		t.Errorf("%d bytes allocated per digest of a %d-byte body", n, len(body))
	}
}

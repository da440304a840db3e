package audiencefile_test

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf16"

	"gatehouse/ledger/audiencefile"
)

func utf16LE(s string, mark bool) string {
	var out []byte
	if mark {
		out = append(out, 0xFF, 0xFE)
	}
	for _, u := range utf16.Encode([]rune(s)) {
		out = append(out, byte(u), byte(u>>8))
	}
	return string(out)
}

// TestReadRefusesWideEncodings: UTF-16 read as bytes is valid UTF-8 full of
// NUL bytes; it must be refused as a whole, naming the encoding, and never
// turned into identities.
func TestReadRefusesWideEncodings(t *testing.T) {
	const csv = "customer_id,email\nc1,ada@example.org\n"
	tests := []struct{ Name, In, Text string }{
		{"UTF16WithBOM", utf16LE(csv, true), "UTF-16 (little-endian byte order mark)"},
		{"UTF16WithoutBOM", utf16LE(csv, false), "line 1, column 2: a NUL byte"},
		{"UTF32WithBOM", "\xff\xfe\x00\x00c\x00\x00\x00", "UTF-32"},
	}
	for _, tc := range tests {
		t.Run(tc.Name, func(t *testing.T) {
			rows := 0
			_, err := audiencefile.Read(strings.NewReader(tc.In), func(audiencefile.Row) error { rows++; return nil })
			if !errors.Is(err, audiencefile.ErrUnusable) || !strings.Contains(err.Error(), tc.Text) || rows != 0 {
				t.Fatalf("err = %v after %d rows, want %q before any row", err, rows, tc.Text)
			}
		})
	}
}

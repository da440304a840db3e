package scenarios

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf16"
)

func toUTF16LE(b []byte, mark bool) []byte {
	var out []byte
	if mark {
		out = append(out, 0xFF, 0xFE)
	}
	for _, u := range utf16.Encode([]rune(string(b))) {
		out = append(out, byte(u), byte(u>>8))
	}
	return out
}

// TestScenarioFileEncodings: a UTF-8 byte order mark is accepted; any other
// encoding is one problem, on one line, that names the file and the encoding.
func TestScenarioFileEncodings(t *testing.T) {
	src, err := BuiltinSource("audience-messy-file")
	if err != nil {
		t.Fatal(err)
	}
	latin1 := bytes.Replace(src, []byte("title: "), []byte("title: caf\xe9 "), 1)
	tests := []struct {
		Name string
		Src  []byte
		Want string // "" when the file must parse
	}{
		{"UTF8", src, ""},
		{"UTF8WithBOM", append([]byte("\uFEFF"), src...), ""},
		{"UTF16WithBOM", toUTF16LE(src, true), ":1:1: not UTF-8 text: it is UTF-16 (little-endian byte order mark); save it as UTF-8"},
		{"UTF16WithoutBOM", toUTF16LE(src, false), ":1:2: not UTF-8 text: a NUL byte: it looks like UTF-16 or UTF-32 without a byte order mark"},
		{"Latin1", latin1, "not UTF-8 text: byte 0xE9 is not UTF-8 (perhaps Latin-1 or Windows-1252)"},
	}
	for _, tc := range tests {
		t.Run(tc.Name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "s.yaml")
			if err := os.WriteFile(file, tc.Src, 0o644); err != nil {
				t.Fatal(err)
			}
			sc, err := ParseFile(file)
			if tc.Want == "" {
				if err != nil || sc.Name != "audience-messy-file" {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("accepted")
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, file+":") || !strings.Contains(msg, tc.Want) || strings.Contains(msg, "\n") {
				t.Fatalf("want one line naming %s and %q, got (%d bytes):\n%s", file, tc.Want, len(msg), msg)
			}
		})
	}
}

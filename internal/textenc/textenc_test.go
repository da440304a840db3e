package textenc

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf16"
)

func utf16le(s string, mark bool) []byte {
	var out []byte
	if mark {
		out = append(out, 0xFF, 0xFE)
	}
	for _, u := range utf16.Encode([]rune(s)) {
		out = append(out, byte(u), byte(u>>8))
	}
	return out
}

func TestCheck(t *testing.T) {
	tests := []struct {
		Name     string
		In       []byte
		Complete bool
		Want     string // "" when the input is UTF-8 text
	}{
		{"Plain", []byte("name: a\nsteps: []\n"), true, ""},
		{"UTF8BOM", []byte("\uFEFFname: é\n"), true, ""},
		{"UTF16LEWithBOM", utf16le("name: a\n", true), true, "UTF-16 (little-endian byte order mark)"},
		{"UTF16BEWithBOM", []byte{0xFE, 0xFF, 0, 'a'}, true, "UTF-16 (big-endian byte order mark)"},
		{"UTF32LEWithBOM", []byte{0xFF, 0xFE, 0, 0, 'a', 0, 0, 0}, true, "UTF-32 (little-endian byte order mark)"},
		{"UTF16WithoutBOM", utf16le("email\nada@example.org\n", false), true, "line 1, column 2: a NUL byte"},
		{"Latin1", []byte("name: a\ntitle: caf\xe9\n"), true, "line 2, column 11: byte 0xE9 is not UTF-8"},
		{"CutOffAtTheEndOfAHead", []byte("caf\xc3"), false, ""},
		{"CutOffAtTheEndOfTheFile", []byte("caf\xc3"), true, "line 1, column 4: byte 0xC3"},
	}
	for _, tc := range tests {
		t.Run(tc.Name, func(t *testing.T) {
			err := Check(tc.In, tc.Complete)
			if tc.Want == "" {
				if err != nil {
					t.Fatalf("refused UTF-8 text: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrNotUTF8) || !strings.Contains(err.Error(), tc.Want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("err = %v, want one line with %q", err, tc.Want)
			}
		})
	}
}

// Package textenc names what is wrong with the encoding of a text file a
// person hands to gatehouse (a scenario, an audience or customer CSV).
// Every such file is UTF-8, with or without a byte order mark; anything else
// is refused with one line that says which encoding it looks like, instead
// of being parsed into garbage (UTF-16 read as bytes is valid UTF-8 full of
// NUL bytes).
package textenc

import (
	"bytes"
	"errors"
	"fmt"
	"unicode/utf8"
)

// ErrNotUTF8 marks input that is not UTF-8 text.
var ErrNotUTF8 = errors.New("not UTF-8 text")

var bom = []byte{0xEF, 0xBB, 0xBF}

// StripBOM returns b without a leading UTF-8 byte order mark.
func StripBOM(b []byte) []byte { return bytes.TrimPrefix(b, bom) }

// Error says why a file is not UTF-8 text and, when one byte shows it,
// where.
type Error struct {
	Line, Col int    // 1-based position of the offending byte; 0 for the whole file
	Problem   string // which encoding it looks like, and what to do
}

func (e *Error) Error() string {
	if e.Line == 0 {
		return ErrNotUTF8.Error() + ": " + e.Problem
	}
	return fmt.Sprintf("%s: line %d, column %d: %s", ErrNotUTF8, e.Line, e.Col, e.Problem)
}

// Unwrap makes errors.Is(err, ErrNotUTF8) hold.
func (e *Error) Unwrap() error { return ErrNotUTF8 }

const saveAsUTF8 = "; save it as UTF-8"

// Check reports why b, the start of a file (or all of it when complete),
// is not UTF-8 text: a UTF-16 or UTF-32 byte order mark, NUL bytes (UTF-16
// or UTF-32 without a mark), or an invalid byte. A leading UTF-8 byte order
// mark is fine. When b is only the start of a file, a character cut off at
// its end is not an error. The error is an *Error.
func Check(b []byte, complete bool) error {
	if err := Wide(b); err != nil {
		return err
	}
	b = StripBOM(b)
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size <= 1 {
			if !complete && !utf8.FullRune(b[i:]) {
				return nil // cut off by the end of what was read
			}
			line, col := position(b, i)
			return &Error{Line: line, Col: col, Problem: fmt.Sprintf("byte 0x%02X is not UTF-8 (perhaps Latin-1 or Windows-1252)", b[i]) + saveAsUTF8}
		}
		i += size
	}
	return nil
}

// Wide reports the one mistake a byte-oriented reader cannot see for
// itself: b is UTF-16 or UTF-32, with a byte order mark or without (then
// its NUL bytes give it away; no text file holds one). The error is an
// *Error.
func Wide(b []byte) error {
	for _, m := range []struct {
		mark []byte
		name string
	}{
		{[]byte{0xFF, 0xFE, 0, 0}, "UTF-32 (little-endian byte order mark)"},
		{[]byte{0, 0, 0xFE, 0xFF}, "UTF-32 (big-endian byte order mark)"},
		{[]byte{0xFF, 0xFE}, "UTF-16 (little-endian byte order mark)"},
		{[]byte{0xFE, 0xFF}, "UTF-16 (big-endian byte order mark)"},
	} {
		if bytes.HasPrefix(b, m.mark) {
			return &Error{Problem: "it is " + m.name + saveAsUTF8}
		}
	}
	b = StripBOM(b)
	if i := bytes.IndexByte(b, 0); i >= 0 {
		line, col := position(b, i)
		return &Error{Line: line, Col: col, Problem: "a NUL byte: it looks like UTF-16 or UTF-32 without a byte order mark" + saveAsUTF8}
	}
	return nil
}

// position is the 1-based line and column (in characters) of offset i.
func position(b []byte, i int) (line, col int) {
	start := bytes.LastIndexByte(b[:i], '\n') + 1
	return bytes.Count(b[:i], []byte{'\n'}) + 1, utf8.RuneCount(b[start:i]) + 1
}

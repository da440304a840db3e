// Package audiencefile reads an uploaded audience file (CSV) as a stream of
// rows with line numbers. It only reads: whether a row's identity is a real,
// eligible customer is decided by the ledger's audience reconciliation.
package audiencefile

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"gatehouse/internal/mailaddr"
	"gatehouse/internal/textenc"
)

// Row is one data row of the file.
type Row struct {
	Line       int    // 1-based line of the row's first character
	CustomerID string // stable customer id, if the file has that column
	Email      string // address, if the file has that column
	Err        string // why the row is unusable ("" when it is fine)
}

// Identity is what the row claims to be: the customer id when present,
// otherwise the address as written, lower-cased (mailaddr.Folded). It is
// a label recorded with the row, not the address's identity: releases
// recorded before keep theirs, and a sample compares them as written.
func (r Row) Identity() string {
	if r.CustomerID != "" {
		return "id:" + r.CustomerID
	}
	return "email:" + mailaddr.Folded(r.Email)
}

// Layout describes the columns found.
type Layout struct {
	HasHeader bool
	Columns   []string // header names as written (or col1, col2… without header)
	IDColumn  int      // -1 when absent
	MailCol   int      // -1 when absent
}

// Limits of an audience file. A release is the customers one notice
// goes to; the largest the project measures is 100,000 rows
// (docs/BENCHMARKS.md), and the limits stand well above it. The file is
// kept whole as the release's artifact, so its bytes bound the memory an
// import takes; the rows bound the one transaction that records them.
const (
	// MaxBytes is the largest audience file read (64 MiB).
	MaxBytes = 64 << 20
	// MaxRows is the most data rows an audience file may have (1,000,000).
	MaxRows = 1_000_000
)

// ErrTooLarge marks a file over MaxBytes or MaxRows; errors wrapping it
// name the limit.
var ErrTooLarge = errors.New("audience file over its limit")

// CountRows counts the data rows of a file that Read would hand to its
// callback, stopping with an error wrapping ErrTooLarge at the first row
// past max. A file Read cannot use is not its concern: it reports no error
// for it, and Read names the problem.
func CountRows(r io.Reader, max int) (int, error) {
	n := 0
	_, err := Read(r, func(Row) error {
		if n++; n > max {
			return fmt.Errorf("%w: more than %d rows", ErrTooLarge, max)
		}
		return nil
	})
	if errors.Is(err, ErrTooLarge) {
		return n, err
	}
	return n, nil
}

// ErrUnusable marks a file that cannot be used at all (no identity column,
// duplicate columns, not UTF-8, broken quoting…). Errors wrapping it name the
// line.
var ErrUnusable = errors.New("audience file unusable")

var (
	idNames   = []string{"customer_id", "customer id", "customerid", "customer", "id"}
	mailNames = []string{"email", "e-mail", "email_address", "email address", "mail"}
)

// Read streams the file, calling fn once per non-blank data row in order.
// The header is detected: a first row naming a customer id or email column
// is a header; a first row whose fields hold an address is data, with that
// column as the email. A UTF-8 byte order mark, CRLF line ends, quoted fields
// and blank lines are accepted; UTF-16 or UTF-32 (with or without a byte
// order mark) is refused. It returns the layout, or an error wrapping
// ErrUnusable (naming the line) when the file itself cannot be used; rows
// with problems are passed to fn with Err set instead.
func Read(r io.Reader, fn func(Row) error) (Layout, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	head, _ := br.Peek(br.Size())
	if err := textenc.Wide(head); err != nil {
		return Layout{}, fmt.Errorf("%w: %v", ErrUnusable, err)
	}
	if bom, _ := br.Peek(3); bytes.Equal(bom, []byte{0xEF, 0xBB, 0xBF}) {
		br.Discard(3)
	}
	cr := csv.NewReader(br)
	cr.FieldsPerRecord = -1
	cr.ReuseRecord = true
	var lay Layout
	first := true
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			if first {
				return lay, fmt.Errorf("%w: the file has no rows", ErrUnusable)
			}
			return lay, nil
		}
		if err != nil {
			var pe *csv.ParseError
			if errors.As(err, &pe) {
				return lay, fmt.Errorf("%w: line %d: %v", ErrUnusable, pe.StartLine, pe.Err)
			}
			return lay, fmt.Errorf("read audience file: %w", err)
		}
		line, _ := cr.FieldPos(0)
		if blank(rec) {
			continue
		}
		if first {
			first = false
			lay, err = detect(rec, line)
			if err != nil {
				return lay, err
			}
			if lay.HasHeader {
				continue
			}
		}
		if err := fn(makeRow(lay, rec, line)); err != nil {
			return lay, err
		}
	}
}

// blank reports whether a line holds nothing at all (white space). A line
// of separators only (",") is a row whose fields are empty: it is counted,
// as an error, so the source rows add up to what a person sees in the file.
func blank(rec []string) bool {
	return len(rec) == 1 && strings.TrimSpace(rec[0]) == ""
}

func detect(rec []string, line int) (Layout, error) {
	lay := Layout{IDColumn: -1, MailCol: -1}
	seen := map[string]int{}
	for i, f := range rec {
		if !utf8.ValidString(f) {
			return lay, fmt.Errorf("%w: line %d: not UTF-8 text", ErrUnusable, line)
		}
		name := strings.ToLower(strings.TrimSpace(f))
		if prev, dup := seen[name]; dup && name != "" {
			return lay, fmt.Errorf("%w: line %d: column %q appears twice (columns %d and %d)", ErrUnusable, line, f, prev+1, i+1)
		}
		seen[name] = i
		switch {
		case lay.IDColumn < 0 && contains(idNames, name):
			lay.IDColumn = i
		case lay.MailCol < 0 && contains(mailNames, name):
			lay.MailCol = i
		}
	}
	if lay.IDColumn >= 0 || lay.MailCol >= 0 {
		lay.HasHeader = true
		lay.Columns = append([]string(nil), rec...)
		return lay, nil
	}
	for i, f := range rec {
		lay.Columns = append(lay.Columns, fmt.Sprintf("col%d", i+1))
		if lay.MailCol < 0 && strings.Contains(f, "@") {
			lay.MailCol = i
		}
	}
	if lay.MailCol < 0 {
		return lay, fmt.Errorf("%w: line %d: no customer_id or email column in the header, and the first row holds no address", ErrUnusable, line)
	}
	return lay, nil
}

func makeRow(lay Layout, rec []string, line int) Row {
	row := Row{Line: line}
	for _, f := range rec {
		if !utf8.ValidString(f) {
			row.Err = "not UTF-8 text"
			return row
		}
	}
	if lay.HasHeader && len(rec) != len(lay.Columns) {
		row.Err = fmt.Sprintf("has %d fields, the header has %d", len(rec), len(lay.Columns))
		return row
	}
	if lay.IDColumn >= 0 && lay.IDColumn < len(rec) {
		row.CustomerID = strings.TrimSpace(rec[lay.IDColumn])
	}
	if lay.MailCol >= 0 && lay.MailCol < len(rec) {
		row.Email = strings.TrimSpace(rec[lay.MailCol])
	}
	switch {
	case row.CustomerID == "" && row.Email == "":
		row.Err = "neither a customer id nor an email"
	case row.Email != "" && !plausibleAddress(row.Email):
		row.Err = fmt.Sprintf("email %q is not an address", row.Email)
	}
	return row
}

// plausibleAddress is a deliberately small check: one @ with text on both
// sides and no spaces. Deliverability is the destination's business.
func plausibleAddress(s string) bool {
	at := strings.IndexByte(s, '@')
	return at > 0 && at == strings.LastIndexByte(s, '@') && at < len(s)-1 && !strings.ContainsAny(s, " \t<>,;")
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

package audiencefile_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"gatehouse/ledger/audiencefile"
)

func readAll(t testing.TB, in string) ([]audiencefile.Row, audiencefile.Layout, error) {
	var rows []audiencefile.Row
	lay, err := audiencefile.Read(strings.NewReader(in), func(r audiencefile.Row) error {
		rows = append(rows, r)
		return nil
	})
	return rows, lay, err
}

func TestRead(t *testing.T) {
	tests := []struct {
		Name string
		In   string
		Want string // rows as "line:identity" or "line:!error", joined by " | "
	}{
		{"HeaderAndRows", "customer_id,email\nc1,a@x.org\nc2,b@x.org\n", "2:id:c1 | 3:id:c2"},
		{"BOMAndCRLF", "\uFEFFEmail,Name\r\nA@X.org,Ada\r\nb@x.org,Bea\r\n", "2:email:a@x.org | 3:email:b@x.org"},
		{"QuotedFieldsWithCommasAndNewlines", "email,name\n\"a@x.org\",\"Lovelace, Ada\"\nb@x.org,\"two\nlines\"\nc@x.org,C\n", "2:email:a@x.org | 3:email:b@x.org | 5:email:c@x.org"},
		{"BlankLines", "email\n\na@x.org\n  \n\nb@x.org\n", "3:email:a@x.org | 6:email:b@x.org"},
		// A row of separators only is a row a person sees: counted, as an error.
		{"RowOfSeparatorsOnly", "customer_id,email\nc1,\n,\nc2,\n", "2:id:c1 | 3:!neither a customer id nor an email | 4:id:c2"},
		{"NoHeaderDetected", "a@x.org,Ada\nb@x.org,Bea\n", "1:email:a@x.org | 2:email:b@x.org"},
		{"BadRows", "customer_id,email\n,\nc2,not-an-address\nc3,c@x.org,extra\nc4,\n", "2:!neither a customer id nor an email | 3:!email \"not-an-address\" is not an address | 4:!has 3 fields, the header has 2 | 5:id:c4"},
		{"EmptyBothFields", "customer_id,email,name\n,,Ada\n", "2:!neither a customer id nor an email"},
	}
	for _, tc := range tests {
		t.Run(tc.Name, func(t *testing.T) {
			rows, _, err := readAll(t, tc.In)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range rows {
				if r.Err != "" {
					got = append(got, fmt.Sprintf("%d:!%s", r.Line, r.Err))
				} else {
					got = append(got, fmt.Sprintf("%d:%s", r.Line, r.Identity()))
				}
			}
			if s := strings.Join(got, " | "); s != tc.Want {
				t.Fatalf("got  %s\nwant %s", s, tc.Want)
			}
		})
	}
}

func TestReadRefusesUnusableFiles(t *testing.T) {
	tests := []struct {
		Name string
		In   string
		Text string
	}{
		{"Empty", "", "no rows"},
		{"OnlyBlank", "\n\n", "no rows"},
		{"MissingIdentityColumn", "name,city\nAda,London\n", "line 1: no customer_id or email column"},
		{"DuplicateColumns", "email,name,Email\na@x.org,Ada,b@x.org\n", `line 1: column "Email" appears twice (columns 1 and 3)`},
		{"BrokenQuoting", "email\n\"a@x.org\n", "line 2:"},
		{"NotUTF8Header", "em\xffail\na@x.org\n", "line 1: not UTF-8"},
	}
	for _, tc := range tests {
		t.Run(tc.Name, func(t *testing.T) {
			_, _, err := readAll(t, tc.In)
			if !errors.Is(err, audiencefile.ErrUnusable) || !strings.Contains(err.Error(), tc.Text) {
				t.Fatalf("err = %v, want %q", err, tc.Text)
			}
		})
	}
}

// TestReadStreams100kRows checks a large file is read row by row.
func TestReadStreams100kRows(t *testing.T) {
	var b strings.Builder
	b.WriteString("customer_id,email\n")
	for i := 0; i < 100_000; i++ {
		fmt.Fprintf(&b, "c%d,c%d@example.org\n", i, i)
	}
	n := 0
	lay, err := audiencefile.Read(strings.NewReader(b.String()), func(r audiencefile.Row) error {
		n++
		if r.Err != "" || r.Line != n+1 {
			return fmt.Errorf("row %d: %+v", n, r)
		}
		return nil
	})
	if err != nil || n != 100_000 || !lay.HasHeader {
		t.Fatalf("n=%d err=%v", n, err)
	}
}

func FuzzRead(f *testing.F) {
	for _, s := range []string{
		"customer_id,email\nc1,a@x.org\n",
		"\uFEFFemail\r\na@x.org\r\n",
		"email,name\n\"a@x.org\",\"x, y\"\n",
		"a@x.org\n\n,\n",
		"email,Email\n",
		"\"unterminated\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		last := 0
		_, err := audiencefile.Read(strings.NewReader(string(data)), func(r audiencefile.Row) error {
			if r.Line <= last {
				t.Fatalf("line numbers not increasing: %d after %d", r.Line, last)
			}
			last = r.Line
			if r.Err == "" && r.CustomerID == "" && r.Email == "" {
				t.Fatalf("row without identity accepted: %+v", r)
			}
			return nil
		})
		if err != nil && !errors.Is(err, audiencefile.ErrUnusable) {
			t.Fatalf("unexpected error class: %v", err)
		}
	})
}

// TestCountRows: rows are counted as Read hands them over (the header and
// blank lines are not rows); counting stops at the first row past max with
// ErrTooLarge; a file Read cannot use is left for Read to name.
func TestCountRows(t *testing.T) {
	for _, tc := range []struct {
		file      string
		max, want int
		tooLarge  bool
	}{
		{"customer_id\nr1\n\nr2\nr3\n", 3, 3, false},
		{"customer_id\nr1\nr2\nr3\nr4\n", 3, 4, true},
		{"ann@example.com\nbob@example.com\n", 2, 2, false},
		{"", 3, 0, false},
		{"customer_id\n\"r1\n", 3, 0, false},
	} {
		n, err := audiencefile.CountRows(strings.NewReader(tc.file), tc.max)
		if n != tc.want || errors.Is(err, audiencefile.ErrTooLarge) != tc.tooLarge || (err != nil && !tc.tooLarge) {
			t.Errorf("CountRows(%q, %d) = %d, %v; want %d, too large %v", tc.file, tc.max, n, err, tc.want, tc.tooLarge)
		}
	}
}

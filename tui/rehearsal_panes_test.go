package tui

import (
	"encoding/json"
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/charmbracelet/x/ansi"

	"gatehouse/scenarios"
)

// finishedRehearsal runs interrupted-before-accept to its end at a size:
// 19 expectations and more history than a small screen holds.
func finishedRehearsal(t *testing.T, w, h int) (*App, *Rehearsal) {
	t.Helper()
	r := newTestRehearsal(t, "interrupted-before-accept")
	a := newDriven(r, w, h)
	for r.report == nil {
		if typeKeys(a, "n"); r.snap.Step > len(r.sc.Steps) {
			t.Fatal("the rehearsal did not finish")
		}
	}
	return a, r
}

// lineWith is the first screen line holding s ("" for none).
func lineWith(screen, s string) string {
	for _, l := range strings.Split(screen, "\n") {
		if strings.Contains(l, s) {
			return l
		}
	}
	return ""
}

// TestRehearsalExpectationsAndHistoryRead: at 80x24 and 160x45 the
// expectations show their expected and actual values, failures first;
// tab reaches the expectations, whose cursor and page keys scroll them,
// then the history, which scrolls back from its newest line; nothing is
// wider than the terminal.
func TestRehearsalExpectationsAndHistoryRead(t *testing.T) {
	for _, term := range careTerms {
		t.Run(sizeName(term.w, term.h), func(t *testing.T) {
			a, r := finishedRehearsal(t, term.w, term.h)
			r.snap.Verdicts = append(r.snap.Verdicts, scenarios.Verdict{Name: "arrivals.total", Expected: "1", Actual: "2"})
			s := screenText(a)
			head := lineWith(s, "expectation")
			if !strings.Contains(head, "expected") || !strings.Contains(head, "actual") {
				t.Fatalf("no expected and actual columns:\n%s", s)
			}
			failed := strings.Fields(lineWith(s, "✗"))
			if len(failed) != 4 || failed[1] != "arrivals.total" || failed[2] != "1" || failed[3] != "2" {
				t.Fatalf("the failure is not first with its values, got %q:\n%s", failed, s)
			}
			for i, l := range strings.Split(s, "\n") {
				if ansi.StringWidth(l) > term.w {
					t.Errorf("line %d is %d columns wide: %q", i+1, ansi.StringWidth(l), l)
				}
			}

			typeKeys(a, "tab")
			if s = screenText(a); !strings.Contains(s, "Expectations: 19 passed, 1 failed · 1 of 20") {
				t.Fatalf("tab does not reach the expectations:\n%s", s)
			}
			typeKeys(a, "pgdown", "j")
			s = screenText(a)
			if strings.Contains(s, "· 1 of 20") || lineWith(s, "✗") != "" && r.expPos.rows < 20 {
				t.Fatalf("pgdn and j do not scroll the expectations (top %d, cursor %d):\n%s", r.expPos.top, r.expPos.cursor, s)
			}
			if !strings.Contains(s, r.sc.File) {
				t.Errorf("the selected expectation is not shown whole, with where it is written:\n%s", s)
			}

			typeKeys(a, "tab")
			before := screenText(a)
			const first = "Task t-4001 was opened in the ledger."
			typeKeys(a, "g")
			s = screenText(a)
			if !strings.Contains(s, first) {
				t.Fatalf("the history does not scroll back to its first line:\n%s", s)
			}
			if !strings.Contains(before, first) && lastHistoryLine(s) == lastHistoryLine(before) {
				t.Fatalf("the history shows the same lines after g:\n%s", s)
			}
		})
	}
}

// lastHistoryLine is the last line of the history pane on screen.
func lastHistoryLine(screen string) string {
	lines := strings.Split(screen, "\n")
	last := ""
	in := false
	for _, l := range lines {
		switch {
		case strings.HasPrefix(l, "History ("):
			in = true
		case strings.HasPrefix(l, "Expectations:"):
			in = false
		case in:
			last = l
		}
	}
	return last
}

// TestRehearsalExportsItsResult: e writes the finished rehearsal's result
// in the format its file's extension names, and says where.
func TestRehearsalExportsItsResult(t *testing.T) {
	a, r := finishedRehearsal(t, 100, 30)
	dir := t.TempDir()
	for _, tc := range []struct {
		file, format string
		check        func(t *testing.T, b []byte)
	}{
		{"result.json", "JSON", func(t *testing.T, b []byte) {
			var doc struct {
				Passed    bool
				Scenarios []scenarios.Report
			}
			if err := json.Unmarshal(b, &doc); err != nil || len(doc.Scenarios) != 1 || len(doc.Scenarios[0].Verdicts) != 19 {
				t.Fatalf("JSON: %v, %+v", err, doc)
			}
		}},
		{"result.xml", "JUnit XML", func(t *testing.T, b []byte) {
			var doc struct {
				Tests int `xml:"tests,attr"`
			}
			if err := xml.Unmarshal(b, &doc); err != nil || doc.Tests != 19 {
				t.Fatalf("JUnit: %v, %d tests", err, doc.Tests)
			}
		}},
		{"result.md", "Markdown", func(t *testing.T, b []byte) {
			for _, want := range []string{"# interrupted-before-accept", "## Expectations", "| PASS | arrivals.total | 1 | 1 |"} {
				if !strings.Contains(string(b), want) {
					t.Errorf("Markdown lacks %q:\n%s", want, b)
				}
			}
		}},
	} {
		t.Run(tc.format, func(t *testing.T) {
			path := filepath.Join(dir, tc.file)
			typeKeys(a, "e")
			if r.export == nil {
				t.Fatalf("e opens no prompt:\n%s", screenText(a))
			}
			r.export.SetValue(path)
			typeKeys(a, "enter")
			if s := strings.Join(a.statusLines(), " "); !strings.Contains(strings.Join(strings.Fields(s), " "), "wrote the result as "+tc.format) {
				t.Fatalf("status %q", s)
			}
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, b)
		})
	}
	typeKeys(a, "e")
	r.export.SetValue(filepath.Join(dir, "result.txt"))
	typeKeys(a, "enter")
	if s := strings.Join(a.statusLines(), " "); !strings.Contains(s, "name a .json, .xml (JUnit) or .md file") || r.export == nil {
		t.Fatalf("an unknown extension: status %q, prompt open %v", s, r.export != nil)
	}
}

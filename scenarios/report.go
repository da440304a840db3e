package scenarios

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"strings"

	"gatehouse/ledger"
)

// Report is the verdict of one rehearsal. It holds no wall-clock time and
// no detail that depends on which goroutine won a race, so rehearsing the
// same scenario twice gives an identical report.
type Report struct {
	Name        string       `json:"name"`
	Title       string       `json:"title"`
	Description string       `json:"description"`
	File        string       `json:"file"`
	Passed      bool         `json:"passed"`
	Error       string       `json:"error,omitempty"` // the rehearsal itself broke
	Steps       []StepResult `json:"steps"`
	Rows        []Row        `json:"rows"`
	Counts      Counts       `json:"counts"`
	Verdicts    []Verdict    `json:"expectations"`
	// Audiences summarises each audience release the scenario imported.
	Audiences []ledger.AudienceSummary `json:"audiences,omitempty"`
}

// Failed counts the failed expectations (a broken run counts as one).
func (rep Report) Failed() int {
	n := 0
	for _, v := range rep.Verdicts {
		if !v.Pass {
			n++
		}
	}
	if rep.Error != "" {
		n++
	}
	return n
}

// ErrorReport is the report of a rehearsal that could not run to its end.
func ErrorReport(sc *Scenario, err error) Report {
	return Report{Name: sc.Name, Title: sc.Title, Description: sc.Description, File: sc.File, Error: err.Error()}
}

func (r *Run) report(snap Snapshot) Report {
	rep := Report{Name: r.sc.Name, Title: r.sc.Title, Description: r.sc.Description, File: r.sc.File,
		Steps: r.results, Rows: snap.Rows, Counts: snap.Counts, Verdicts: r.verdicts}
	for _, a := range snap.Audiences {
		rep.Audiences = append(rep.Audiences, a.Summary)
	}
	rep.Passed = rep.Failed() == 0
	return rep
}

// Column widths of the side-by-side view.
const (
	colIntended = 30
	colAttempts = 30
	colArrived  = 44
)

// WriteText renders reports for a terminal: per scenario the steps, the
// three columns side by side, the counts and every expectation.
func WriteText(w io.Writer, reps []Report) error {
	var b strings.Builder
	for _, rep := range reps {
		writeReport(&b, rep)
	}
	passed := 0
	for _, rep := range reps {
		if rep.Passed {
			passed++
		}
	}
	fmt.Fprintf(&b, "%d of %d scenarios passed\n", passed, len(reps))
	_, err := io.WriteString(w, b.String())
	return err
}

func writeReport(b *strings.Builder, rep Report) {
	fmt.Fprintf(b, "== %s — %s: %s\n", rep.Name, rep.Title, passWord(rep.Passed))
	if rep.Error != "" {
		fmt.Fprintf(b, "   the rehearsal broke: %s\n\n", rep.Error)
		return
	}
	b.WriteString("steps\n")
	for _, s := range rep.Steps {
		fmt.Fprintf(b, "  %2d. %s  %s → %s\n", s.Index, s.Clock.Format("15:04:05"), s.Label, s.Class)
		for _, p := range s.Parallel {
			fmt.Fprintf(b, "        ‖ %s\n", p.Label)
		}
	}
	b.WriteString("\n")
	writeColumns(b, rep.Rows)
	writeRuns(b, rep.Steps)
	c := rep.Counts
	fmt.Fprintf(b, "counts  intended %d · attempts %d · confirmed %d · arrived %d · denials %d · duplicate blocks %d · holds %d · conflicts %d · unknown %d\n",
		c.Intended, c.Attempts, c.Confirmed, c.Arrived, c.Denials, c.DuplicateBlocks, c.Holds, c.Conflicts, c.Unknown)
	for _, a := range rep.Audiences {
		writeAudience(b, a)
	}
	b.WriteString("expectations\n")
	for _, v := range rep.Verdicts {
		fmt.Fprintf(b, "  %s  %s  (%s:%d:%d)\n", passWord(v.Pass), v.Message(), rep.File, v.Pos.Line, v.Pos.Col)
	}
	b.WriteString("\n")
}

func passWord(ok bool) string {
	if ok {
		return "PASS"
	}
	return "FAIL"
}

// writeColumns lays out intended actions | attempts | arrived messages,
// one block per action key, each arrival on the line of the attempt whose
// Message-ID it carries.
func writeColumns(b *strings.Builder, rows []Row) {
	line := func(l, m, r string) {
		row := fmt.Sprintf("%s │ %s │ %s", cell(l, colIntended), cell(m, colAttempts), r)
		b.WriteString(strings.TrimRight(row, " ") + "\n")
	}
	line("INTENDED ACTIONS", "ATTEMPTS", "ARRIVED MESSAGES")
	if len(rows) == 0 {
		line("(none)", "", "")
	}
	for _, row := range rows {
		fmt.Fprintf(b, "%s\n", strings.Repeat("─", colIntended+colAttempts+colArrived+6))
		fmt.Fprintf(b, "%s %s\n", or(row.Name, "?"), row.Key)
		left := append([]string{"state " + or(row.State, "not in the ledger")}, creditLines(row, colIntended)...)
		var mid, right []string
		for _, l := range row.Lines() {
			m, r := attemptText(l.Attempt), arrivalText(l.Arrival)
			n := max(len(m), len(r))
			mid, right = append(mid, pad(m, n)...), append(right, pad(r, n)...)
		}
		for i := 0; i < max(len(left), len(mid), len(right)); i++ {
			line(at(left, i), at(mid, i), at(right, i))
		}
	}
	fmt.Fprintf(b, "%s\n", strings.Repeat("─", colIntended+colAttempts+colArrived+6))
}

func attemptText(a *AttemptCell) []string {
	if a == nil {
		return nil
	}
	return []string{fmt.Sprintf("#%d %s", a.Number, a.Outcome), "   " + localPart(a.TransportID)}
}

func arrivalText(m *ArrivalCell) []string {
	if m == nil {
		return nil
	}
	mark := ""
	if m.Duplicate {
		mark += "  DUPLICATE"
	}
	if m.Unmatched {
		mark += "  UNMATCHED: no attempt has this Message-ID"
	}
	return []string{localPart(m.MessageID), fmt.Sprintf("   %s %s%s", m.To, m.At.Format("15:04:05"), mark), "   “" + m.Subject + "”"}
}

// pad extends lines with empty ones to n.
// creditLines say, each in its place, whose act put the action in its
// state, who proposed it when that is someone else, and who owns the task
// now: the owner beside a state would credit the owner with the act.
func creditLines(row Row, w int) []string {
	if row.State == "" {
		return nil
	}
	var out []string
	if row.By != "" {
		out = append(out, wrapText(row.By, w)...)
	}
	switch {
	case row.ProposedBy == "":
		out = append(out, "never proposed")
	case !strings.HasSuffix(row.By, " by "+row.ProposedBy):
		out = append(out, wrapText("proposed by "+row.ProposedBy, w)...)
	}
	return append(out, wrapText("task owner now "+or(row.Owner, "nobody"), w)...)
}

// wrapText breaks s at spaces into lines of at most w runes; a word wider
// than w is left for cell to cut.
func wrapText(s string, w int) []string {
	var out []string
	cur := ""
	for _, word := range strings.Fields(s) {
		switch {
		case cur == "":
			cur = word
		case len([]rune(cur))+1+len([]rune(word)) <= w:
			cur += " " + word
		default:
			out, cur = append(out, cur), word
		}
	}
	return append(out, cur)
}

func pad(lines []string, n int) []string {
	for len(lines) < n {
		lines = append(lines, "")
	}
	return lines
}

// localPart drops the constant "@gatehouse.invalid" of transport ids so
// they fit their column; the JSON report keeps them whole.
func localPart(id string) string {
	if i := strings.IndexByte(id, '@'); i > 0 {
		return id[:i]
	}
	return id
}

func at(list []string, i int) string {
	if i < len(list) {
		return list[i]
	}
	return ""
}

// cell pads or cuts s to exactly w runes.
func cell(s string, w int) string {
	r := []rune(s)
	if len(r) > w {
		return string(r[:w-1]) + "…"
	}
	return s + strings.Repeat(" ", w-len(r))
}

// WriteJSON writes the reports as one JSON document.
func WriteJSON(w io.Writer, reps []Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(struct {
		Passed    bool     `json:"passed"`
		Scenarios []Report `json:"scenarios"`
	}{allPassed(reps), reps})
}

func allPassed(reps []Report) bool {
	for _, r := range reps {
		if !r.Passed {
			return false
		}
	}
	return true
}

// JUnit XML: one test suite per scenario, one test case per expectation.
type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name     string      `xml:"name,attr"`
	Tests    int         `xml:"tests,attr"`
	Failures int         `xml:"failures,attr"`
	Cases    []junitCase `xml:"testcase"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Failure   *junitFailure `xml:"failure,omitempty"`
}

type junitFailure struct {
	Message string `xml:"message,attr"`
	Text    string `xml:",chardata"`
}

// WriteJUnit writes the reports as JUnit XML for CI systems.
func WriteJUnit(w io.Writer, reps []Report) error {
	var all junitSuites
	for _, rep := range reps {
		s := junitSuite{Name: rep.Name}
		if rep.Error != "" {
			s.Cases = append(s.Cases, junitCase{Name: "rehearsal runs", Classname: rep.Name,
				Failure: &junitFailure{Message: rep.Error, Text: rep.Error}})
		}
		for _, v := range rep.Verdicts {
			c := junitCase{Name: v.Name, Classname: rep.Name}
			if !v.Pass {
				c.Failure = &junitFailure{Message: v.Message(), Text: fmt.Sprintf("%s:%d:%d: %s", rep.File, v.Pos.Line, v.Pos.Col, v.Message())}
			}
			s.Cases = append(s.Cases, c)
		}
		s.Tests, s.Failures = len(s.Cases), rep.Failed()
		all.Tests += s.Tests
		all.Failures += s.Failures
		all.Suites = append(all.Suites, s)
	}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(all); err != nil {
		return fmt.Errorf("write junit: %w", err)
	}
	_, err := io.WriteString(w, "\n")
	return err
}

// writeAudience prints a release's counts in the order they add up.
func writeAudience(b *strings.Builder, a ledger.AudienceSummary) {
	fmt.Fprintf(b, "audience %s  %d source rows = %d errors + %d unmatched + %d duplicates + %d resolved\n",
		a.ReleaseID, a.SourceRows, a.ErrorRows, a.Unmatched, a.Duplicates, a.Resolved)
	fmt.Fprintf(b, "         %d resolved = %d excluded + %d removed%s + %d eligible · attempted %d · confirmed %d · arrived %d\n",
		a.Resolved, a.Excluded, a.Removed, MissingCovered(a), a.Eligible, a.Attempted, a.Confirmed, a.Arrived)
}

// MissingCovered is the part of a release's resolved sum that only
// releases with customers missing from the latest export, or sharing an
// address, have ("" for the others).
func MissingCovered(a ledger.AudienceSummary) string {
	s := ""
	if a.Missing > 0 {
		s += fmt.Sprintf(" + %d missing", a.Missing)
	}
	if a.Covered > 0 {
		s += fmt.Sprintf(" + %d covered", a.Covered)
	}
	return s
}

// writeRuns lists every process a workflow step ran beside the columns:
// its command, how it ended and the last lines of its output.
func writeRuns(b *strings.Builder, steps []StepResult) {
	first := true
	for _, s := range steps {
		for _, run := range s.Runs {
			if first {
				b.WriteString("workflow runs\n")
				first = false
			}
			fmt.Fprintf(b, "  step %d  $ %s\n", s.Index, run.Command)
			fmt.Fprintf(b, "          → %s\n", run.End)
			if run.Truncated {
				fmt.Fprintf(b, "          │ (output %d bytes; the first %d not kept)\n", run.OutputBytes, run.OutputBytes-OutputCap)
			}
			for _, l := range run.Output {
				fmt.Fprintf(b, "          │ %s\n", l)
			}
		}
	}
	if !first {
		b.WriteString("\n")
	}
}

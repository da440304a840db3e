package scenarios

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/charmbracelet/x/ansi"

	"gatehouse/internal/keyname"
	"gatehouse/internal/wrap"
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

// Column widths of the side-by-side view; the arrived messages take the
// rest of the width.
const (
	colIntended = 30
	colAttempts = 30
	colArrived  = 44
)

// SideBySide is the least width at which the three columns stand side by
// side; below it each action's intended, attempted and arrived lines stand
// one below the other.
const SideBySide = colIntended + colAttempts + colArrived + 6

// WriteText renders reports with the three columns side by side and no
// line wrapped, for a reader that has the room (a file, a wide terminal).
func WriteText(w io.Writer, reps []Report) error { return WriteTextWidth(w, reps, 0) }

// WriteTextWidth renders reports for a terminal width columns wide (0: as
// wide as they need): per scenario the steps, the three columns (side by
// side from SideBySide columns, else stacked per action), the counts and
// every expectation, each line wrapped to the width.
func WriteTextWidth(w io.Writer, reps []Report, width int) error {
	if width > 0 {
		width = max(width, 40)
	}
	var b strings.Builder
	for _, rep := range reps {
		writeReport(&b, rep, width)
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

// textLine writes text after prefix, as it is when it fits the width,
// else wrapped under itself.
func textLine(b *strings.Builder, width int, prefix, text string) {
	if width <= 0 || ansi.StringWidth(prefix+text) <= width {
		b.WriteString(strings.TrimRight(prefix+text, " ") + "\n")
		return
	}
	for _, l := range wrap.Hanging(prefix, text, width) {
		b.WriteString(strings.TrimRight(l, " ") + "\n")
	}
}

func writeReport(b *strings.Builder, rep Report, width int) {
	textLine(b, width, "== ", fmt.Sprintf("%s — %s: %s", rep.Name, rep.Title, passWord(rep.Passed)))
	if rep.Error != "" {
		textLine(b, width, "   ", "the rehearsal broke: "+rep.Error)
		b.WriteString("\n")
		return
	}
	b.WriteString("steps\n")
	for _, s := range rep.Steps {
		textLine(b, width, fmt.Sprintf("  %2d. %s  ", s.Index, s.Clock.Format("15:04:05")), s.Label+" → "+s.Class)
		for _, p := range s.Parallel {
			textLine(b, width, "        ‖ ", p.Label)
		}
	}
	b.WriteString("\n")
	if width <= 0 || width >= SideBySide {
		writeColumns(b, rep.Rows, width)
	} else {
		writeStacked(b, rep.Rows, width)
	}
	writeRuns(b, rep.Steps, width)
	c := rep.Counts
	textLine(b, width, "counts  ", fmt.Sprintf("intended %d · attempts %d · confirmed %d · arrived %d · denials %d · duplicate blocks %d · holds %d · conflicts %d · unknown %d",
		c.Intended, c.Attempts, c.Confirmed, c.Arrived, c.Denials, c.DuplicateBlocks, c.Holds, c.Conflicts, c.Unknown))
	for _, a := range rep.Audiences {
		writeAudience(b, a, width)
	}
	b.WriteString("expectations\n")
	for _, v := range rep.Verdicts {
		textLine(b, width, "  "+passWord(v.Pass)+"  ", fmt.Sprintf("%s  (%s:%d:%d)", v.Message(), rep.File, v.Pos.Line, v.Pos.Col))
	}
	b.WriteString("\n")
}

func passWord(ok bool) string {
	if ok {
		return "PASS"
	}
	return "FAIL"
}

// rowNames names each row: the scenario's name for its action, else its
// key's telling part (internal/keyname), so two unnamed rows never read
// alike.
func rowNames(rows []Row) []string {
	keys := make([]string, len(rows))
	for i, r := range rows {
		keys[i] = r.Key
	}
	names := keyname.Telling(keys, nil)
	for i, r := range rows {
		if r.Name != "" {
			names[i] = r.Name
		}
	}
	return names
}

// writeColumns lays out intended actions | attempts | at the destination
// (the messages that arrived, the records the provider created), one block
// per action key, each arrival on the line of the attempt whose mark it
// carries.
func writeColumns(b *strings.Builder, rows []Row, width int) {
	arrived := width - colIntended - colAttempts - 6
	if width <= 0 {
		width, arrived = SideBySide, math.MaxInt // the rules' width; the last column runs on
	}
	line := func(l, m, r string) {
		row := fmt.Sprintf("%s │ %s │ %s", cell(l, colIntended), cell(m, colAttempts), r)
		b.WriteString(strings.TrimRight(row, " ") + "\n")
	}
	rule := strings.Repeat("─", width)
	line("INTENDED ACTIONS", "ATTEMPTS", "AT THE DESTINATION")
	if len(rows) == 0 {
		line("(none)", "", "")
	}
	names := rowNames(rows)
	for i, row := range rows {
		b.WriteString(rule + "\n")
		textLine(b, width, names[i]+" ", row.Key)
		left := append([]string{"state " + or(row.State, "not in the ledger")}, creditLines(row, colIntended)...)
		var mid, right []string
		for _, l := range row.Lines() {
			m, r := attemptText(l.Attempt), wrapCells(arrivalText(l.Arrival), arrived)
			n := max(len(m), len(r))
			mid, right = append(mid, pad(m, n)...), append(right, pad(r, n)...)
		}
		for i := 0; i < max(len(left), len(mid), len(right)); i++ {
			line(at(left, i), at(mid, i), at(right, i))
		}
	}
	b.WriteString(rule + "\n")
}

// wrapCells wraps each of a cell's lines that is wider than w under its
// own indent.
func wrapCells(lines []string, w int) []string {
	var out []string
	for _, l := range lines {
		if ansi.StringWidth(l) <= w {
			out = append(out, l)
			continue
		}
		text := strings.TrimLeft(l, " ")
		out = append(out, wrap.Hanging(l[:len(l)-len(text)], text, w)...)
	}
	return out
}

// writeStacked lays out each action key's block one part below the other
// where the three columns do not fit: what was intended, each attempt, and
// each message that arrived with the attempt whose Message-ID it carries.
func writeStacked(b *strings.Builder, rows []Row, width int) {
	rule := strings.Repeat("─", width)
	b.WriteString("actions: intended · attempts · arrived messages\n")
	if len(rows) == 0 {
		b.WriteString("  (none)\n")
	}
	names := rowNames(rows)
	for i, row := range rows {
		b.WriteString(rule + "\n")
		textLine(b, width, names[i]+" ", row.Key)
		intended := append([]string{"state " + or(row.State, "not in the ledger")}, creditLines(row, math.MaxInt)...)
		textLine(b, width, "  intended  ", strings.Join(intended, " · "))
		var atts, arrs []string
		for _, a := range row.Attempts {
			atts = append(atts, fmt.Sprintf("#%d %s · %s", a.Number, a.Outcome, localPart(a.TransportID)))
		}
		for _, m := range row.Arrivals {
			arrs = append(arrs, strings.Join(stackedArrival(m), " · "))
		}
		labelled(b, width, "  attempts  ", atts, "none")
		labelled(b, width, "  arrived   ", arrs, "nothing")
	}
	b.WriteString(rule + "\n")
}

// labelled writes items under one label, the label on the first only;
// none stands for no item.
func labelled(b *strings.Builder, width int, label string, items []string, none string) {
	if len(items) == 0 {
		items = []string{none}
	}
	for i, it := range items {
		if i > 0 {
			label = strings.Repeat(" ", len(label))
		}
		textLine(b, width, label, it)
	}
}

// stackedArrival is one arrival on its own lines: which attempt sent it
// (or that none did), where, when and what.
func stackedArrival(m ArrivalCell) []string {
	from := fmt.Sprintf("from attempt %d", m.Attempt)
	if m.Unmatched {
		from = "UNMATCHED: no attempt has this Message-ID"
	}
	parts := []string{localPart(m.MessageID) + " " + from, m.To + " " + m.At.Format("15:04:05"), "“" + m.Subject + "”"}
	if m.Duplicate {
		parts = append(parts, "DUPLICATE")
	}
	return parts
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
		if m.Record {
			mark = strings.Replace(mark, "this Message-ID", "this record's key or id", 1)
		}
	}
	if m.Record {
		return []string{m.DestinationID, fmt.Sprintf("   %s %s%s", m.To, m.At.Format("15:04:05"), mark), "   “" + m.Subject + "”"}
	}
	return []string{localPart(m.MessageID), fmt.Sprintf("   %s %s%s", m.To, m.At.Format("15:04:05"), mark), "   “" + m.Subject + "”"}
}

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

// wrapText breaks s at spaces into lines of at most w columns (see
// internal/wrap).
func wrapText(s string, w int) []string { return wrap.Words(s, w) }

// pad extends lines with empty ones to n.
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
func writeAudience(b *strings.Builder, a ledger.AudienceSummary, width int) {
	textLine(b, width, "audience ", fmt.Sprintf("%s  %d source rows = %d errors + %d unmatched + %d duplicates + %d resolved",
		a.ReleaseID, a.SourceRows, a.ErrorRows, a.Unmatched, a.Duplicates, a.Resolved))
	textLine(b, width, "         ", fmt.Sprintf("%d resolved = %d excluded + %d removed%s + %d eligible · attempted %d · confirmed %d · arrived %d",
		a.Resolved, a.Excluded, a.Removed, MissingCovered(a), a.Eligible, a.Attempted, a.Confirmed, a.Arrived))
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
func writeRuns(b *strings.Builder, steps []StepResult, width int) {
	first := true
	for _, s := range steps {
		for _, run := range s.Runs {
			if first {
				b.WriteString("workflow runs\n")
				first = false
			}
			textLine(b, width, fmt.Sprintf("  step %d  $ ", s.Index), run.Command)
			textLine(b, width, "          → ", run.End)
			if run.Truncated {
				textLine(b, width, "          │ ", fmt.Sprintf("(output %d bytes; the first %d not kept)", run.OutputBytes, run.OutputBytes-OutputCap))
			}
			for _, l := range run.Output {
				textLine(b, width, "          │ ", l)
			}
		}
	}
	if !first {
		b.WriteString("\n")
	}
}

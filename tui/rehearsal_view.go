package tui

import (
	"fmt"
	"slices"
	"strings"

	"github.com/charmbracelet/x/ansi"

	"gatehouse/destination"
	"gatehouse/internal/keyname"
	"gatehouse/ledger"
	"gatehouse/scenarios"
)

// View implements Screen.
func (r *Rehearsal) View() string {
	w := r.width
	top := r.headLines(w)
	top = append(top, packItems(r.countsBar(), w)...)
	top = append(top, r.audienceLines(w, audienceSampleRows(r.height))...)
	rest := r.height - len(top)
	if r.export != nil {
		rest-- // the prompt's line
	}
	// The columns come first: they get every line they need but what the
	// expectations and the history keep (their titles and a line or two);
	// of what is left the history takes what it needs, the expectations
	// the rest. The pane in focus gets half the room at least, so it can be
	// read and scrolled.
	expNeed := len(r.snap.Verdicts) + 2
	if r.focus == paneExpect {
		expNeed += 2 // the selected expectation, whole
	}
	expFloor, histMin := min(expNeed, max(r.height/4, 3)), 3
	switch r.focus {
	case paneExpect:
		expFloor = min(expNeed, max(rest/2, expFloor))
	case paneHistory:
		histMin, expFloor = max(rest/2, histMin), min(expFloor, 3)
	}
	table := r.columns(w, max(rest-expFloor-histMin, 3))
	left := rest - len(table)
	need := r.historyNeed(w)
	expH := max(min(expNeed, left-need), expFloor)
	hist := r.historyPane(w, max(min(left-expH, need), 2))
	lines := append(top, table...)
	lines = append(lines, hist...)
	lines = append(lines, r.expectLines(w, expH)...)
	if r.export != nil {
		lines = append(lines, r.export.View())
	}
	return strings.Join(lines, "\n")
}

// headLines say where the run is: the step that ran, how it went and what
// comes next.
func (r *Rehearsal) headLines(w int) []string {
	state := "paused"
	switch {
	case r.report != nil && r.report.Passed:
		state = r.th.Good.Render("finished: PASSED")
	case r.report != nil:
		state = r.th.Bad.Render(fmt.Sprintf("finished: FAILED (%d)", r.report.Failed()))
	case r.playing:
		state = fmt.Sprintf("playing, %s per step", speeds[r.speed])
	}
	lines := []string{r.th.Header.Render(fmt.Sprintf("step %d of %d", r.snap.Step, r.snap.Steps)) + " · " + state}
	if r.last != nil {
		res := r.last.Class
		if d := r.last.Detail; d != "" {
			for _, row := range r.snap.Rows { // the step names its action already
				d = withoutKey(d, row.Key+":")
			}
			res += ": " + d
		}
		lines = append(lines, para(fmt.Sprintf("did %d: ", r.last.Index), r.last.Label+" → "+res, w)...)
		lines = append(lines, r.runLines(w)...)
	}
	if r.snap.Step < len(r.sc.Steps) {
		lines = append(lines, para(r.th.Dim.Render("next: "), describeStep(r.sc, r.sc.Steps[r.snap.Step]), w)...)
	}
	return lines
}

// countsBar keeps the figures apart, as the design demands.
func (r *Rehearsal) countsBar() []string {
	c := r.snap.Counts
	return []string{fmt.Sprintf("intended %d", c.Intended), fmt.Sprintf("attempts %d", c.Attempts),
		fmt.Sprintf("confirmed %d", c.Confirmed), fmt.Sprintf("arrived %d", c.Arrived),
		fmt.Sprintf("denials %d", c.Denials), fmt.Sprintf("duplicate blocks %d", c.DuplicateBlocks),
		fmt.Sprintf("holds %d", c.Holds), fmt.Sprintf("conflicts %d", c.Conflicts), fmt.Sprintf("unknown %d", c.Unknown)}
}

// The columns of the three-column table, by index into threeCols.
const (
	cName = iota
	cState
	cBy
	cOwner
	cNum
	cTransport
	cOutcome
	cMessageID
	cTo
	cSubject
	cAt
)

var threeCols = []column{
	{"action", 6, 1}, {"state", 9, 0}, {"by", 6, 1}, {"owner now", 6, 1},
	{"#", 1, 0}, {"transport id", 6, 0}, {"outcome", 9, 0},
	{"message-id", 6, 0}, {"to", 5, 0}, {"subject", 8, 1}, {"arrived", 8, 0},
}

// threeLayout is which columns a width shows, how wide each is and whether
// states and outcomes are in their short forms. It depends only on the
// scenario and the width, so the columns keep their widths for a whole run.
type threeLayout struct {
	keep   []int // indexes of threeCols shown
	groups []int // where intended, attempts and arrived start among keep
	widths []int // per kept column
	short  bool
}

// layoutTiers drop columns by meaning as the screen narrows: first the
// message-id (an arrival on an attempt's line carries that attempt's id),
// then the long words, the transport id (the detail has it), the task's
// owner now (the detail has it) and the recipient; whose act put each
// action in its state stays, since the owner beside a state would read as
// its author.
var layoutTiers = []struct {
	drop  []int
	short bool
}{
	{nil, false},
	{[]int{cMessageID}, false},
	{[]int{cMessageID}, true},
	{[]int{cMessageID, cTransport}, true},
	{[]int{cMessageID, cTransport, cOwner}, true},
	{[]int{cMessageID, cTransport, cOwner, cTo}, true},
}

// subjectRoom is the least a subject column is worth showing with: room
// for a mark (DUPLICATE, UNMATCHED and its Message-ID) and some words.
const subjectRoom = 20

// layoutFor chooses the richest tier whose columns fit width w.
func (r *Rehearsal) layoutFor(w int) threeLayout {
	// A key the scenario does not name (an action a workflow made up, say)
	// needs room for the part that tells it apart: its layout is chosen
	// again when such a key first appears, and only then.
	keys := make([]string, len(r.snap.Rows))
	for i, row := range r.snap.Rows {
		keys[i] = row.Key
	}
	need := 0
	for i, n := range keyname.Telling(keys, nil) {
		if r.snap.Rows[i].Name == "" {
			need = max(need, ansi.StringWidth(n))
		}
	}
	at := layoutAt{w, need}
	if l, ok := r.layouts[at]; ok {
		return l
	}
	var l threeLayout
	for _, tier := range layoutTiers {
		l = r.buildLayout(tier.drop, tier.short, w, need)
		if sum(l.widths)+colGap*(len(l.widths)-1) <= w && l.widths[len(l.widths)-2] >= subjectRoom {
			break
		}
	}
	if r.layouts == nil {
		r.layouts = map[layoutAt]threeLayout{}
	}
	r.layouts[at] = l
	return l
}

// layoutAt is what a layout is chosen for: a width, and the room the
// widest unnamed key needs.
type layoutAt struct{ width, need int }

// keyNames names the rows the scenario does not name by their keys (see
// keyname), in w columns, told apart from every key of the run; a named
// row's entry is its name.
func (r *Rehearsal) keyNames(w int) []string {
	keys := make([]string, len(r.snap.Rows))
	for i, row := range r.snap.Rows {
		keys[i] = row.Key
	}
	names := keyname.Names(keys, nil, w)
	for i, row := range r.snap.Rows {
		if row.Name != "" {
			names[i] = row.Name
		}
	}
	return names
}

func (r *Rehearsal) buildLayout(drop []int, short bool, w, need int) threeLayout {
	seeds := r.seedWidths(short)
	seeds[cName] = max(seeds[cName], need)
	l := threeLayout{short: short}
	for i := range threeCols {
		if slices.Contains(drop, i) {
			continue
		}
		switch i {
		case cName:
			l.groups = append(l.groups, len(l.keep))
		case cNum:
			l.groups = append(l.groups, len(l.keep))
		case cMessageID, cTo, cSubject:
			if len(l.groups) < 3 {
				l.groups = append(l.groups, len(l.keep))
			}
		}
		l.keep = append(l.keep, i)
		l.widths = append(l.widths, seeds[i])
	}
	// The subject takes what is left; when nothing is, the action and owner
	// columns give way down to their minimum.
	subj := len(l.keep) - 2
	rest := w - colGap*(len(l.keep)-1) - (sum(l.widths) - l.widths[subj])
	l.widths[subj] = max(rest, threeCols[cSubject].min)
	for over := sum(l.widths) + colGap*(len(l.keep)-1) - w; over > 0; over-- {
		i := widest(l, []int{cName, cBy, cOwner})
		if i < 0 {
			break
		}
		l.widths[i]--
	}
	return l
}

// widest is the position in l of the widest of cols still above its
// minimum, or -1.
func widest(l threeLayout, cols []int) int {
	best := -1
	for pos, c := range l.keep {
		if slices.Contains(cols, c) && l.widths[pos] > threeCols[c].min && (best < 0 || l.widths[pos] > l.widths[best]) {
			best = pos
		}
	}
	return best
}

// seedWidths are the widths every value of the scenario needs: its action
// names, actors, recipients, every state and outcome word, the transport
// id's fixed length.
func (r *Rehearsal) seedWidths(short bool) []int {
	out := make([]int, len(threeCols))
	for i, c := range threeCols {
		out[i] = ansi.StringWidth(c.title)
	}
	grow := func(i int, s string) { out[i] = max(out[i], ansi.StringWidth(s)) }
	w := r.sc.World
	for _, a := range w.Actions {
		grow(cName, a.Name)
		grow(cTo, a.To)
	}
	audience := slices.ContainsFunc(r.sc.Steps, func(s scenarios.Step) bool { return s.Do == "import_audience" })
	for _, c := range w.Customers {
		grow(cTo, c.Email)
		if audience {
			grow(cName, c.ID) // a release's rows are named by customer
		}
	}
	for _, a := range w.Actors {
		grow(cOwner, a.ID)
		grow(cBy, a.ID)
	}
	for _, st := range r.sc.Steps {
		grow(cName, st.As) // a correction's name
	}
	grow(cBy, ledger.Credit{ByGate: true}.Short())
	for _, s := range ledger.AllStates {
		grow(cState, stateWord(s, short))
	}
	for _, o := range []destination.Outcome{destination.OutcomeAccepted, destination.OutcomeNotDelivered,
		destination.OutcomeRejectedTemporary, destination.OutcomeRejectedPermanent, destination.OutcomeUnknown} {
		grow(cOutcome, outcomeWord(string(o), false, short))
		grow(cOutcome, outcomeWord(string(o), true, short))
	}
	grow(cNum, "99")
	grow(cTransport, localPart(ledger.NewTransportID("", 1)))
	grow(cMessageID, localPart(ledger.NewTransportID("", 1)))
	grow(cAt, clockFormat)
	out[cSubject] = threeCols[cSubject].min
	return out
}

// localPart drops the constant "@gatehouse.invalid" of transport ids; the
// detail screen shows them whole.
func localPart(id string) string {
	if i := strings.IndexByte(id, '@'); i > 0 {
		return id[:i]
	}
	return id
}

// columns draws intended actions | attempts | at the destination (the
// messages that arrived, the records a provider created) joined by
// action key, each arrival on the line of the attempt whose Message-ID it
// carries.
func (r *Rehearsal) columns(w, h int) []string {
	l := r.layoutFor(w)
	rows, owner := threeRows(r.snap.Rows, r.keyNames(l.widths[0]), l.short)
	if len(rows) == 0 && r.report != nil {
		return []string{r.th.Dim.Render("No action was proposed in this rehearsal: nothing to send, nothing arrived.")}
	}
	if len(rows) == 0 {
		return []string{r.th.Dim.Render("No action yet: the columns fill as the steps run.")}
	}
	sel := -1
	if r.pos.total > 0 {
		sel = owner[0]
		for i, o := range owner {
			if o == r.pos.cursor {
				sel = i
				break
			}
		}
	}
	for i := range rows {
		if k := r.snap.Rows[owner[i]]; k.Name != "" && rows[i].cells[cName] != "" {
			rows[i].cells[cName] = abbrev(k.Name, l.widths[0]) // a key's name fits already
		}
	}
	cols, rows := project(l.keep, threeCols, rows)
	// Group line, column header and a footer leave h-3 lines for rows;
	// scroll so the selected line stays on screen.
	var footer string
	if avail := max(h-3, 1); len(rows) > avail {
		start := min(max(sel-avail/2, 0), len(rows)-avail)
		footer = r.th.Dim.Render(fmt.Sprintf("lines %d–%d of %d (%d keys); %s select, %s opens",
			start+1, start+avail, len(rows), len(r.snap.Rows), keyOf(Keys.Up)+" "+keyOf(Keys.Down), keyOf(Keys.Open)))
		rows, sel = rows[start:start+avail], sel-start
	}
	table := renderLipglossTable(r.th, cols, rows, sel, l.widths)
	group := groupHeader(r.th, l.widths, l.groups, []string{"intended actions", "attempts", "at the destination"})
	out := append([]string{group}, table...)
	if footer != "" {
		out = append(out, footer)
	}
	return out
}

func project(keep []int, cols []column, rows []row) ([]column, []row) {
	pc := make([]column, len(keep))
	for i, k := range keep {
		pc[i] = cols[k]
	}
	pr := make([]row, len(rows))
	for j, r := range rows {
		cells := make([]string, len(keep))
		for i, k := range keep {
			cells[i] = r.cells[k]
		}
		pr[j] = row{cells: cells, mark: r.mark}
	}
	return pc, pr
}

// threeRows expands each key into its lines aligned by attempt (see
// scenarios.Row.Lines); owner maps each line back to its key's row.
func threeRows(keys []scenarios.Row, names []string, short bool) (rows []row, owner []int) {
	for i, k := range keys {
		m, note := rowMark(k)
		for j, ln := range k.Lines() {
			cells := make([]string, len(threeCols))
			if j == 0 {
				st := "not in the ledger"
				if k.State != "" {
					st = stateWord(ledger.State(k.State), short)
				}
				cells[cName], cells[cState], cells[cBy], cells[cOwner] = names[i], st, k.ByShort, k.Owner
			}
			if a := ln.Attempt; a != nil {
				cells[cNum], cells[cTransport] = fmt.Sprint(a.Number), localPart(a.TransportID)
				cells[cOutcome] = outcomeWord(scenarioOutcome(a.Outcome), a.Reconciled, short)
			}
			if a := ln.Arrival; a != nil {
				cells[cMessageID], cells[cTo], cells[cAt] = arrivalID(*a), a.To, a.At.Format(clockFormat)
				cells[cSubject] = arrivalSubject(*a)
			} else if j == 0 && note != "" {
				cells[cSubject] = note
			}
			rows = append(rows, row{cells: cells, mark: m})
			owner = append(owner, i)
		}
	}
	return rows, owner
}

// arrivalSubject leads with what is wrong with an arrival, so the mark
// survives a narrow column: an arrival no attempt sent names its own
// Message-ID, since no attempt on its line does.
func arrivalSubject(a scenarios.ArrivalCell) string {
	s := a.Subject
	if a.Duplicate {
		s = "DUPLICATE · " + s
	}
	if a.Unmatched {
		s = "UNMATCHED " + arrivalID(a) + " · " + s
	}
	return s
}

// arrivalID names what is at the destination: a message by its
// Message-ID, a provider's record by the provider's id.
func arrivalID(a scenarios.ArrivalCell) string {
	if a.Record {
		return a.DestinationID
	}
	return localPart(a.MessageID)
}

// rowMark highlights a duplicate (two arrivals for one action), a missing
// send (the ledger says sent, nothing arrived), an arrival no attempt sent
// and an arrival nobody intended.
func rowMark(k scenarios.Row) (mark, string) {
	unmatched := slices.ContainsFunc(k.Arrivals, func(a scenarios.ArrivalCell) bool { return a.Unmatched })
	switch {
	case len(k.Arrivals) > 1, k.State == "", unmatched:
		return markBad, ""
	case len(k.Arrivals) == 0 && k.State == "sent":
		return markBad, "MISSING: the ledger says sent, nothing arrived"
	case len(k.Arrivals) == 1:
		return markGood, ""
	}
	return markNone, ""
}

// groupHeader labels groups of columns starting at the given indexes.
func groupHeader(th Theme, ws, starts []int, names []string) string {
	var b strings.Builder
	for g, start := range starts {
		end := len(ws)
		if g+1 < len(starts) {
			end = starts[g+1]
		}
		span := -colGap
		for _, x := range ws[start:end] {
			span += x + colGap
		}
		if g > 0 {
			b.WriteString(strings.Repeat(" ", colGap))
		}
		b.WriteString(ansi.Truncate("── "+names[g]+" "+strings.Repeat("─", span), span, ""))
	}
	return th.Dim.Render(b.String())
}

// audienceLines summarise each audience release: the counts in the order
// they add up, then (when h > 0) at most h sample rows across statuses and
// lifecycle states.
func (r *Rehearsal) audienceLines(w, h int) []string {
	var out []string
	for _, a := range r.snap.Audiences {
		s := a.Summary
		out = append(out, para(r.th.Header.Render("Audience "+s.ReleaseID+": "), fmt.Sprintf(
			"%d rows = %d errors + %d unmatched + %d duplicates + %d resolved = %d excluded + %d removed%s + %d eligible · "+
				"attempted %d · confirmed %d · arrived %d",
			s.SourceRows, s.ErrorRows, s.Unmatched, s.Duplicates, s.Resolved,
			s.Excluded, s.Removed, scenarios.MissingCovered(s), s.Eligible, s.Attempted, s.Confirmed, s.Arrived), w)...)
		for i, row := range a.Samples {
			if h <= 0 {
				break // a short screen keeps the counts only; the detail has the rows
			}
			if i == h {
				out = append(out, r.th.Dim.Render(fmt.Sprintf("  … %d more sample rows", len(a.Samples)-h)))
				break
			}
			out = append(out, fitLine(fmt.Sprintf("  line %-3d %-18s %s", row.Line, orText(row.CustomerID, row.Identity), audienceFate(row)), w))
		}
	}
	return out
}

// audienceFate says what became of a row: its status, why, and for an
// eligible recipient how far its notice got.
func audienceFate(row ledger.AudienceRow) string {
	switch {
	case row.Status == ledger.RowEligible && row.State != "":
		return "eligible → " + string(row.State)
	case row.Status == ledger.RowEligible:
		return "eligible, not sent yet"
	case row.Reason != "":
		return row.Status + ": " + row.Reason
	}
	return row.Status
}

// audienceSampleRows is how many sample audience rows fit: none on a short
// screen, where the table and history need the room.
func audienceSampleRows(height int) int {
	if height < 30 {
		return 0
	}
	return height / 5
}

// runLines show the processes the last step ran, beside the columns: each
// command, how it ended and its last line of output.
func (r *Rehearsal) runLines(w int) []string {
	var lines []string
	for _, run := range r.last.Runs {
		lines = append(lines, para(r.th.Dim.Render("  $ "), run.Command+" → "+run.End, w)...)
		if n := len(run.Output); n > 0 {
			lines = append(lines, para(r.th.Dim.Render("    │ "), run.Output[n-1], w)...)
		}
	}
	return lines
}

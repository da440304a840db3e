package tui

import (
	"fmt"
	"sort"
	"strings"

	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"

	"gatehouse/internal/keyname"
	"gatehouse/ledger"
)

const clockFormat = "15:04:05"

// View implements Screen.
func (in *Inspector) View() string {
	lines := []string{in.tabBar()}
	switch {
	case in.form != nil:
		lines = append(lines, "", in.form.view(in.th, min(in.width-2, 76)))
	case in.tab == tabMetrics:
		lines = append(lines, metricsLines(in.th, in.metrics)...)
	case in.tab == tabStop:
		lines = append(lines, stopLines(in.th, in.sw)...)
	default:
		lines = append(lines, in.filterLine())
		lines = append(lines, in.table()...)
	}
	return strings.Join(lines, "\n")
}

// tabBar shows the tabs and, always, whether execution is stopped.
func (in *Inspector) tabBar() string {
	var b strings.Builder
	for i, name := range tabNames {
		st := in.th.Tab
		if tab(i) == in.tab {
			st = in.th.TabActive
		}
		b.WriteString(st.Render(name))
	}
	if in.sw.Stopped {
		b.WriteString("  " + in.th.Bad.Render("■ STOPPED"))
	}
	// Who operates, with their roles, in the room the tabs leave: cut at
	// the end, where the roles are, never the name.
	if line := in.standing.line; line != "" {
		if room := in.width - lipgloss.Width(b.String()) - 2; room >= 12 {
			b.WriteString("  " + in.th.Dim.Render(ansi.Truncate(line, room, "…")))
		}
	}
	return b.String()
}

// filterLine says what the list shows: search, state filter and position.
func (in *Inspector) filterLine() string {
	li := in.current()
	if in.searching {
		return in.search.View()
	}
	var parts []string
	if li.search != "" {
		parts = append(parts, fmt.Sprintf("search %q", li.search))
	}
	if s := stateChoices[li.state]; in.tab == tabActions && s != "" {
		parts = append(parts, "state "+stateWord(s, false))
	}
	pos := "none"
	if li.pos.total > 0 {
		last := min(li.pos.top+li.pos.rows, li.pos.total)
		pos = fmt.Sprintf("%d–%d of %d", li.pos.top+1, last, li.pos.total)
	}
	parts = append(parts, pos)
	return in.th.Dim.Render(strings.Join(parts, " · "))
}

func (in *Inspector) table() []string {
	li := in.current()
	sel := li.pos.selected()
	if li.pos.total == 0 && li.loaded {
		return []string{"", in.th.Dim.Render("  " + in.emptyText(li))}
	}
	switch in.tab {
	case tabTasks:
		return renderTable(in.th, taskCols, taskRows(li.tasks), sel, in.width)
	case tabHolds:
		return renderTable(in.th, holdCols, holdRows(li.actions, in.width), sel, in.width)
	}
	return renderTable(in.th, actionCols, actionRows(li.actions, in.width), sel, in.width)
}

// wideTable is the width from which states and causes are shown in their
// long forms.
const wideTable = 120

// emptyText says why a list is empty: nothing matches what was asked, or
// there is nothing yet.
func (in *Inspector) emptyText(li *list) string {
	switch {
	case in.tab == tabActions && (li.search != "" || li.state != 0):
		return "no matches: / changes the search, s the state"
	case li.search != "":
		return "no matches: / changes the search"
	}
	switch in.tab {
	case tabTasks:
		return "no tasks in this ledger yet"
	case tabHolds:
		return "nothing is held and no outcome is unknown"
	}
	return "no actions in this ledger yet"
}

var taskCols = []column{
	{"task", 8, 1}, {"customer", 9, 1}, {"subject", 8, 3}, {"owner", 9, 2},
	{"viewers", 8, 2}, {"pending", 7, 0}, {"updated", 8, 0},
}

func taskRows(ts []ledger.TaskSummary) []row {
	out := make([]row, len(ts))
	for i, t := range ts {
		owner := t.Owner
		if owner == "" {
			owner = "(none)"
		}
		r := row{cells: []string{t.ID, t.Customer, t.Subject, owner,
			strings.Join(t.Viewers, ", "), fmt.Sprint(t.Pending), t.UpdatedAt.Format(clockFormat)}}
		if t.Owner == "" && t.Pending > 0 {
			r.mark = markWarn
		}
		out[i] = r
	}
	return out
}

// The key column shows what tells the page's keys apart, and more of each
// where there is room (see keyname); enter opens the whole key.
var actionCols = []column{
	{"action", 14, 0}, {"state", 9, 0}, {"task", 6, 0}, {"why", 12, 1}, {"updated", 8, 0},
}

// labels are the page's keys as the key column shows them in a table w
// columns wide: the column takes what the other columns leave, up to what a
// whole key needs.
func labels(as []ledger.Action, w int) []string {
	keys, tasks := make([]string, len(as)), make([]string, len(as))
	for i, a := range as {
		keys[i], tasks[i] = a.Key, a.TaskID
	}
	return keyname.Names(keys, tasks, min(max(w*3/10, 14), 60))
}

func actionRows(as []ledger.Action, w int) []row {
	short := w < wideTable
	out := make([]row, len(as))
	for i, label := range labels(as, w) {
		a := as[i]
		out[i] = row{cells: []string{label, stateWord(a.State, short), a.TaskID, why(a),
			a.UpdatedAt.Format(clockFormat)}, mark: actionMark(a)}
	}
	return out
}

// why is the reason a row shows, led by what a reader must not miss: the
// customer has the message twice (its state stays what it is).
func why(a ledger.Action) string {
	w := withoutKey(a.Reason, a.Key)
	switch {
	case a.ArrivedTwice():
		return fmt.Sprintf("ARRIVED TWICE (%d arrivals) · %s", a.Arrivals(), w)
	case a.LateArrivals > 0:
		return "arrived late · " + w
	}
	return w
}

// actionMark marks a row by its state, and as bad whatever its state when
// the action arrived twice.
func actionMark(a ledger.Action) mark {
	if a.ArrivedTwice() {
		return markBad
	}
	return stateMark(a.State)
}

var holdCols = []column{
	{"action", 14, 0}, {"state", 7, 0}, {"cause", 8, 0}, {"task", 6, 0}, {"why", 12, 1},
}

func holdRows(as []ledger.Action, w int) []row {
	short := w < wideTable
	out := make([]row, len(as))
	for i, label := range labels(as, w) {
		a := as[i]
		out[i] = row{cells: []string{label, stateWord(a.State, short), causeWord(a.HoldCause, short),
			a.TaskID, why(a)}, mark: actionMark(a)}
	}
	return out
}

// withoutKey drops an action key from a sentence about that action, for a
// row or a status line that names the action already.
func withoutKey(s, key string) string {
	s = strings.ReplaceAll(s, " "+key, "")
	return strings.TrimSpace(strings.ReplaceAll(s, key, ""))
}

// causeWord is why an action is held; the short forms are still words.
func causeWord(c ledger.HoldCause, short bool) string {
	if short {
		switch c {
		case ledger.HoldOwnerMissing:
			return "no owner"
		case ledger.HoldSourceUnavailable:
			return "source down"
		case ledger.HoldUnknownOutcome:
			return "unknown"
		case ledger.HoldNotFoundYet:
			return "not yet"
		case ledger.HoldProbeDue:
			return "probe"
		case ledger.HoldArrivedLate:
			return "arrived"
		}
	}
	return strings.ReplaceAll(string(c), "_", " ")
}

func stateMark(s ledger.State) mark {
	switch s {
	case ledger.StateSent:
		return markGood
	case ledger.StateHeld, ledger.StateUnknown, ledger.StateExecuting:
		return markWarn
	case ledger.StateFailed, ledger.StateDenied:
		return markBad
	}
	return markNone
}

func metricsLines(th Theme, m ledger.Metrics) []string {
	rows := []struct {
		name string
		n    int
		note string
	}{
		{"intended actions", m.Intended, "business actions recorded"},
		{"attempts", m.Attempts, "tries at a destination"},
		{"confirmed", m.Confirmed, "attempts the destination accepted"},
		{"duplicate blocks", m.DuplicateBlocks, "second sends or proposals blocked"},
		{"denials", m.Denials, "material field changed since approval"},
		{"ownership conflicts", m.OwnershipConflicts, "not the owner"},
		{"held now", m.Holds, "waiting for a person"},
		{"unknown now", m.Unknown, "outcome not yet reconciled"},
		{"unknown ever", m.UnknownOutcomes, "attempts recorded as unknown"},
		{"stale proposals", m.StaleProposals, "only proposed, unchanged for a day"},
		{"manual overrides", m.ManualOverrides, "hold releases, moves, outcomes resolved by hand"},
		{"late evidence", m.LateEvidence, "reports and messages that turned up after their attempt was settled"},
		{"arrived twice", m.ArrivedTwice, "actions the customer has more than once"},
	}
	out := []string{""}
	for _, r := range rows {
		out = append(out, fmt.Sprintf("  %-20s %8d  %s", r.name, r.n, th.Dim.Render(r.note)))
	}
	if len(m.UnmatchedByRelease) > 0 {
		out = append(out, "", th.Header.Render("  unmatched source rows, by audience release"))
		rels := make([]string, 0, len(m.UnmatchedByRelease))
		for rel := range m.UnmatchedByRelease {
			rels = append(rels, rel)
		}
		sort.Strings(rels)
		for _, rel := range rels {
			out = append(out, fmt.Sprintf("  %-20s %8d", rel, m.UnmatchedByRelease[rel]))
		}
	}
	out = append(out, "", th.Header.Render("  by state"))
	for _, s := range ledger.AllStates {
		if n := m.ByState[s]; n > 0 {
			out = append(out, fmt.Sprintf("  %-20s %8d", stateWord(s, false), n))
		}
	}
	return out
}

func stopLines(th Theme, sw ledger.Switch) []string {
	if !sw.Stopped {
		out := []string{"", "  " + th.Good.Render("Execution is running."), ""}
		if sw.Actor != "" {
			out = append(out, fmt.Sprintf("  Last resumed by %s at %s: %s", sw.Actor, sw.At.Format(clockFormat), sw.Reason))
		}
		return append(out, "", th.Dim.Render("  "+keyOf(Keys.Stop)+" stops every attempt everywhere, with a reason."))
	}
	return []string{"", "  " + th.Bad.Render("■ Execution is STOPPED: no attempt starts anywhere."), "",
		fmt.Sprintf("  Stopped by %s at %s: %s", sw.Actor, sw.At.Format(clockFormat), sw.Reason), "",
		th.Dim.Render("  " + keyOf(Keys.Resume) + " resumes, with a reason, and releases the holds the stop caused.")}
}

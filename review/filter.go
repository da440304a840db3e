package review

import (
	"slices"
	"strings"

	"gatehouse/ledger"
)

// Group is a set of history kinds a reviewer filters the timeline by.
type Group struct {
	Name  string
	kinds map[ledger.EventKind]bool
	// override selects manual overrides, whatever their kind.
	override bool
}

func group(name string, kinds ...ledger.EventKind) Group {
	g := Group{Name: name, kinds: map[ledger.EventKind]bool{}}
	for _, k := range kinds {
		g.kinds[k] = true
	}
	return g
}

// Groups are the kind filters, in the order a view cycles through them;
// Groups[0] selects every line.
var Groups = []Group{
	{Name: "all"},
	group("denials", ledger.EvDenied),
	group("duplicate blocks", ledger.EvDuplicateBlock),
	group("ownership conflicts", ledger.EvOwnershipConflict, ledger.EvTakeover),
	group("unknown", ledger.EvUnknown, ledger.EvRecoveredUnknown, ledger.EvContradiction, ledger.EvReconciled),
	group("holds", ledger.EvHeld, ledger.EvRefusedStopped, ledger.EvContradiction, ledger.EvHoldReleased),
	{Name: "manual overrides", override: true},
	group("corrections", ledger.EvCorrection),
	group("stops", ledger.EvStopped, ledger.EvResumed, ledger.EvRefusedStopped),
	group("late evidence", ledger.EvLateOutcome, ledger.EvLateArrival),
}

// Filter selects timeline lines; the zero Filter selects all.
type Filter struct {
	Group int // index into Groups
	// Actor is part of who acted, in any case.
	Actor string
	// Subject is part of the customer, task or action key, in any case.
	Subject string
	// Since and Until bound the lines' moments (Unix ns, Until exclusive);
	// 0 leaves an end open.
	Since, Until int64
}

// IsZero reports whether f selects everything.
func (f Filter) IsZero() bool { return f == Filter{} }

// Select returns the indexes into Events of the lines f selects, oldest
// first. It is one pass over the compact lines: the text of a name is
// matched once per distinct name, not once per line.
//
// The result must not be modified: the selection of everything is shared.
func (h *History) Select(f Filter) []int32 {
	if f.IsZero() {
		return h.all
	}
	g := Groups[min(max(f.Group, 0), len(Groups)-1)]
	var kindOK []bool
	if g.kinds != nil {
		kindOK = make([]bool, len(h.Kinds))
		for i, k := range h.Kinds {
			kindOK[i] = g.kinds[k]
		}
	}
	actorOK := matchNames(h.Actors, f.Actor)
	var actionOK, taskOK []bool
	if f.Subject != "" {
		actionOK = make([]bool, len(h.Keys))
		needle := strings.ToLower(f.Subject)
		for i := 1; i < len(h.Keys); i++ {
			actionOK[i] = strings.Contains(h.subjects[i], needle)
		}
		taskOK = matchNames(h.Tasks, f.Subject)
		taskOK[0] = false
	}
	from, to := 0, len(h.Events)
	if f.Since != 0 {
		from = h.indexAt(f.Since)
	}
	if f.Until != 0 {
		to = max(from, h.indexAt(f.Until))
	}
	keep := func(ev *Event) bool {
		switch {
		case kindOK != nil && !kindOK[ev.Kind]:
		case g.override && ev.Flags&FlagOverride == 0:
		case actorOK != nil && !actorOK[ev.Actor]:
		case actionOK != nil && !actionOK[ev.Action] && !taskOK[ev.Task]:
		default:
			return true
		}
		return false
	}
	if actionOK != nil {
		return h.selectSubject(actionOK, taskOK, from, to, keep)
	}
	out := make([]int32, 0, min(to-from, 4096))
	for i := from; i < to; i++ {
		if keep(&h.Events[i]) {
			out = append(out, int32(i))
		}
	}
	return out
}

// selectSubject walks only the lines of the matching actions and tasks
// (through their per-line links) instead of the whole history: a customer
// has a few hundred lines among a million.
func (h *History) selectSubject(actionOK, taskOK []bool, from, to int, keep func(*Event) bool) []int32 {
	var out []int32
	walk := func(first int, next []int32) {
		for i := first; i >= 0; i = int(next[i]) {
			if i >= from && i < to && keep(&h.Events[i]) {
				out = append(out, int32(i))
			}
		}
	}
	for a := 1; a < len(actionOK); a++ {
		if actionOK[a] {
			walk(h.first[a], h.next)
		}
	}
	for t := 1; t < len(taskOK); t++ {
		if taskOK[t] {
			walk(h.taskFirst[t], h.taskNext)
		}
	}
	slices.Sort(out)
	return slices.Compact(out) // a line of a matching action on a matching task is walked twice
}

// matchNames marks the names containing part (any case); nil when part is
// empty (everything matches).
func matchNames(names []string, part string) []bool {
	if part == "" {
		return nil
	}
	needle := strings.ToLower(part)
	ok := make([]bool, len(names))
	for i, n := range names {
		ok[i] = strings.Contains(strings.ToLower(n), needle)
	}
	return ok
}

// Span says where a line sits in its action's life: the first line, the
// last, one between, or the only one (or no action at all).
type Span int

// Span positions.
const (
	SpanNone Span = iota
	SpanOnly
	SpanFirst
	SpanMiddle
	SpanLast
)

// SpanOf places line i within its action's life.
func (h *History) SpanOf(i int) Span {
	a := h.Events[i].Action
	if a == 0 {
		return SpanNone
	}
	first, last := h.first[a], h.last[a]
	switch {
	case first == last:
		return SpanOnly
	case i == first:
		return SpanFirst
	case i == last:
		return SpanLast
	}
	return SpanMiddle
}

// Final is the state code action i reached with its last line.
func (h *History) Final(a int32) string { return h.States[h.final[a]] }

// NextOfAction is the position in sel after pos of the next line of the
// same action as the line at pos; ok is false when there is none.
func (h *History) NextOfAction(sel []int32, pos int, dir int) (int, bool) {
	if pos < 0 || pos >= len(sel) {
		return pos, false
	}
	a := h.Events[sel[pos]].Action
	if a == 0 {
		return pos, false
	}
	for p := pos + dir; p >= 0 && p < len(sel); p += dir {
		if h.Events[sel[p]].Action == a {
			return p, true
		}
	}
	return pos, false
}

// NextStop is the position in sel after pos of the next stop line,
// wrapping to the first; ok is false when sel holds no stop. It looks the
// stops up in sel (which is in history order) instead of walking sel.
func (h *History) NextStop(sel []int32, pos int) (int, bool) {
	var first = -1
	cur := int32(-1)
	if pos >= 0 && pos < len(sel) {
		cur = sel[pos]
	}
	for _, si := range h.stopIdx {
		p, found := slices.BinarySearch(sel, int32(si))
		if !found {
			continue // filtered out
		}
		if first < 0 {
			first = p
		}
		if int32(si) > cur {
			return p, true
		}
	}
	if first < 0 {
		return pos, false
	}
	return first, true
}

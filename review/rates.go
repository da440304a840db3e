package review

import (
	"sort"
	"time"

	"gatehouse/ledger"
)

// Measures are the counts the first production window is monitored by,
// beside the successful sends, for one span of time.
type Measures struct {
	Proposed           int `json:"proposed"`
	Attempts           int `json:"attempts"`
	Sent               int `json:"sent"`
	Denied             int `json:"denied"`
	DuplicateBlocks    int `json:"duplicate_blocks"`
	OwnershipConflicts int `json:"ownership_conflicts"`
	Unknown            int `json:"unknown"`
	Holds              int `json:"holds"`
	ManualOverrides    int `json:"manual_overrides"`
	Failed             int `json:"failed"`
	StaleApprovals     int `json:"stale_approvals"`
	Stops              int `json:"stops"`
	// LateEvidence counts what turned up about attempts already settled:
	// late reports and messages found after their attempt was settled as
	// not arrived.
	LateEvidence int `json:"late_evidence"`
	// NotPermitted counts the acts a registered ledger refused because
	// the actor may not do them (ledger.Permits).
	NotPermitted int `json:"not_permitted,omitempty"`
}

// DenialRate is the share of sends that reached the gate's material check
// and were denied there (denied / (denied + attempts started)), in percent.
func (m Measures) DenialRate() float64 {
	if m.Denied+m.Attempts == 0 {
		return 0
	}
	return 100 * float64(m.Denied) / float64(m.Denied+m.Attempts)
}

// Slots of the measures while counting, one per Measures field.
const (
	slotProposed = iota
	slotAttempts
	slotSent
	slotDenied
	slotDuplicateBlocks
	slotOwnershipConflicts
	slotUnknown
	slotHolds
	slotOverride
	slotFailed
	slotStaleApprovals
	slotStops
	slotLateEvidence
	slotNotPermitted
	numSlots
)

type slots [numSlots]int

func (c slots) measures() Measures {
	return Measures{c[slotProposed], c[slotAttempts], c[slotSent], c[slotDenied], c[slotDuplicateBlocks],
		c[slotOwnershipConflicts], c[slotUnknown], c[slotHolds], c[slotOverride], c[slotFailed], c[slotStaleApprovals], c[slotStops],
		c[slotLateEvidence], c[slotNotPermitted]}
}

// kindSlot is the measure a history line of kind k counts towards (-1:
// none; manual overrides are counted by their flag, whatever their kind).
func kindSlot(k ledger.EventKind) int8 {
	switch k {
	case ledger.EvProposed:
		return slotProposed
	case ledger.EvAttemptStarted:
		return slotAttempts
	case ledger.EvSent:
		return slotSent
	case ledger.EvDenied:
		return slotDenied
	case ledger.EvDuplicateBlock:
		return slotDuplicateBlocks
	case ledger.EvOwnershipConflict:
		return slotOwnershipConflicts
	case ledger.EvUnknown, ledger.EvRecoveredUnknown:
		return slotUnknown
	case ledger.EvHeld, ledger.EvRefusedStopped, ledger.EvContradiction:
		return slotHolds
	case ledger.EvFailed, ledger.EvNotDelivered:
		return slotFailed
	case ledger.EvApprovalStale:
		return slotStaleApprovals
	case ledger.EvStopped:
		return slotStops
	case ledger.EvLateOutcome, ledger.EvLateArrival:
		return slotLateEvidence
	case ledger.EvNotPermitted:
		return slotNotPermitted
	}
	return -1
}

// Measure is one named measure, for views that draw them one by one.
type Measure struct {
	Name string
	Get  func(Measures) int
}

// MeasureList is every measure in the order views show them.
var MeasureList = []Measure{
	{"sent", func(m Measures) int { return m.Sent }},
	{"attempts", func(m Measures) int { return m.Attempts }},
	{"denied", func(m Measures) int { return m.Denied }},
	{"duplicate blocks", func(m Measures) int { return m.DuplicateBlocks }},
	{"ownership conflicts", func(m Measures) int { return m.OwnershipConflicts }},
	{"unknown", func(m Measures) int { return m.Unknown }},
	{"holds", func(m Measures) int { return m.Holds }},
	{"manual overrides", func(m Measures) int { return m.ManualOverrides }},
	{"failed", func(m Measures) int { return m.Failed }},
	{"stale approvals", func(m Measures) int { return m.StaleApprovals }},
	{"late evidence", func(m Measures) int { return m.LateEvidence }},
	{"not permitted", func(m Measures) int { return m.NotPermitted }},
}

// RateBucket is the measures of one hour or day.
type RateBucket struct {
	Start time.Time
	Width time.Duration
	M     Measures
	// First and Last are the bucket's lines as indexes into Events
	// (Last exclusive), so a view can filter the timeline to it.
	First, Last int
}

// Rates counts the lines of Events[from:to] in buckets of width (an hour
// or a day, UTC), oldest first; hours or days without a line are present
// with zero counts so a chart keeps its time axis.
func (h *History) Rates(from, to int, width time.Duration) []RateBucket {
	if from >= to {
		return nil
	}
	start := h.Events[from].Time().Truncate(width)
	end := h.Events[to-1].Time().Truncate(width)
	n := int(end.Sub(start)/width) + 1
	out := make([]RateBucket, n)
	for i := range out {
		out[i] = RateBucket{Start: start.Add(time.Duration(i) * width), Width: width, First: -1}
	}
	w := int64(width)
	s := start.UnixNano()
	// Which measure each kind adds to, worked out once per kind rather
	// than once per line: a million lines must count within a frame.
	slot := make([]int8, len(h.Kinds))
	for k, kind := range h.Kinds {
		slot[k] = kindSlot(kind)
	}
	counts := make([]slots, n)
	for i := from; i < to; i++ {
		ev := &h.Events[i]
		// Clamped: lines of several writers may be out of time order by a tick.
		bi := min(max((ev.At-s)/w, 0), int64(n-1))
		b := &out[bi]
		if b.First < 0 {
			b.First = i
		}
		b.Last = i + 1
		if sl := slot[ev.Kind]; sl >= 0 {
			counts[bi][sl]++
		}
		if ev.Flags&FlagOverride != 0 {
			counts[bi][slotOverride]++
		}
	}
	for i := range out {
		out[i].M = counts[i].measures()
	}
	for i := range out {
		if out[i].First < 0 {
			// An empty bucket selects nothing: an empty range where it would be.
			at := h.indexAt(out[i].Start.UnixNano())
			out[i].First, out[i].Last = at, at
		}
	}
	return out
}

// indexAt is the index of the first line at or after ns.
func (h *History) indexAt(ns int64) int {
	return sort.Search(len(h.Events), func(i int) bool { return h.Events[i].At >= ns })
}

// Window is the index range [From, To) of the lines in [since, until); a
// zero time leaves that end open. Lines are in id order, which is time
// order for one writer; several writers may interleave by a clock tick.
func (h *History) Window(since, until time.Time) (from, to int) {
	from, to = 0, len(h.Events)
	if !since.IsZero() {
		from = h.indexAt(since.UnixNano())
	}
	if !until.IsZero() {
		to = max(from, h.indexAt(until.UnixNano()))
	}
	return from, to
}

package review

import (
	"strings"

	"gatehouse/ledger"
)

// Bucket is where an action stood at a moment, ordered so a reviewer's
// first question after a stop (what reached customers, what may have, what
// would have) is answered first.
type Bucket int

// Buckets at a stop.
const (
	Committed  Bucket = iota // sent
	InFlight                 // executing, unknown, or held over an open outcome: reconcile
	NotStarted               // approved, not started
	Proposed                 // only proposed: a draft or awaiting approval
	Held                     // held for another reason (a stop's queue, an operator, an owner)
	Denied                   // denied: a material field or the owner changed
	Cancelled                // withdrawn
	Failed                   // rejected permanently
	numBuckets
)

// Buckets lists every bucket in report order.
var Buckets = []Bucket{Committed, InFlight, NotStarted, Proposed, Held, Denied, Cancelled, Failed}

var bucketNames = [...]string{"committed", "in_flight", "approved_not_started", "only_proposed", "held", "denied", "cancelled", "failed"}
var bucketTitles = [...]string{"committed (sent)", "in flight (reconcile)", "approved, not started", "only proposed",
	"held", "denied", "cancelled", "failed"}

// Name is the bucket's JSON name.
func (b Bucket) Name() string { return bucketNames[b] }

// Title is the bucket in words.
func (b Bucket) Title() string { return bucketTitles[b] }

// BucketOf places a state code (as events.to_state writes it).
func BucketOf(code string) Bucket {
	st, cause, _ := strings.Cut(code, ":")
	switch ledger.State(st) {
	case ledger.StateSent:
		return Committed
	case ledger.StateExecuting, ledger.StateUnknown:
		return InFlight
	case ledger.StateHeld:
		if ledger.HoldCause(cause).OutcomeOpen() {
			return InFlight
		}
		return Held
	case ledger.StateApproved:
		return NotStarted
	case ledger.StateDrafting, ledger.StateAwaitingApproval:
		return Proposed
	case ledger.StateDenied:
		return Denied
	case ledger.StateCancelled:
		return Cancelled
	case ledger.StateFailed:
		return Failed
	}
	return Held
}

// Fold is the state of every action after the first n lines of the
// history: index by action, 0 for an action that did not exist yet.
type Fold struct {
	h        *History
	state    []uint8
	inferred []bool // the state rests on a line whose state was inferred
	last     []int  // index of the action's latest line within the fold, -1 if none
}

// FoldTo folds the first n lines (Events[:n]).
func (h *History) FoldTo(n int) Fold {
	f := Fold{h: h, state: make([]uint8, len(h.Keys)), inferred: make([]bool, len(h.Keys)), last: make([]int, len(h.Keys))}
	for i := range f.last {
		f.last[i] = -1
	}
	for i, ev := range h.Events[:n] {
		if ev.Action == 0 {
			continue
		}
		f.last[ev.Action] = i
		if ev.To != 0 {
			f.state[ev.Action] = ev.To
			f.inferred[ev.Action] = ev.Flags&FlagInferred != 0
		}
	}
	return f
}

// State is the state code of action i in the fold ("" if it did not exist).
func (f Fold) State(i int32) string { return f.h.States[f.state[i]] }

// Inferred reports whether action i's state rests on an inferred line.
func (f Fold) Inferred(i int32) bool { return f.inferred[i] }

// Exists reports whether action i had been proposed within the fold.
func (f Fold) Exists(i int32) bool { return f.state[i] != 0 }

// ByBucket lists the actions of each bucket, in key order.
func (f Fold) ByBucket() [numBuckets][]int32 {
	var out [numBuckets][]int32
	for _, i := range f.h.keyOrder() {
		if f.Exists(i) {
			b := BucketOf(f.State(i))
			out[b] = append(out[b], i)
		}
	}
	return out
}

// keyOrder is every action index sorted by key, for a deterministic
// report; sorted once by Load, so reports built at once only read it.
func (h *History) keyOrder() []int32 { return h.sorted }

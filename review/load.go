// Package review reconstructs a ledger's past from its history, for an
// incident review: the state of every action at any moment (a fold over the
// recorded events), the four buckets at a stop, measures per hour or day,
// and a report a team can file. It only reads the ledger.
package review

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"gatehouse/ledger"
)

// Event is one history line in the compact form a review keeps in memory
// for a million lines: the text is read back by id for the lines shown.
type Event struct {
	ID     int64
	At     int64 // Unix nanoseconds, UTC
	Actor  int32 // index into History.Actors
	Action int32 // index into History.Keys; 0 is "no action"
	Task   int32 // index into History.Tasks; 0 is "no task"
	Kind   uint8 // index into History.Kinds
	To     uint8 // index into History.States; 0 is "no change"
	Flags  uint8
}

// Event flags.
const (
	// FlagInferred: the line was written before lines carried their state;
	// its To was inferred from its kind and sentence.
	FlagInferred uint8 = 1 << iota
	// FlagOverride: a person's decision over the gate's (a hold released,
	// a destination said to have moved, an outcome established by hand).
	FlagOverride
)

// History is a ledger's history as a review reads it: every line oldest
// first, with the facts beside it from the same snapshot.
type History struct {
	Path   string
	Events []Event
	Actors []string
	Keys   []string // Keys[0] == ""
	Tasks  []string // Tasks[0] == ""
	Kinds  []ledger.EventKind
	States []string // state codes as events.to_state writes them; States[0] == ""
	Facts  ledger.ReviewFacts
	// Inferred counts lines whose state was inferred.
	Inferred int

	kindIdx, stateIdx         map[string]uint8
	actorIdx, keyIdx, taskIdx map[string]int32
	customers                 []string // per action index
	approvals                 map[int32][]ledger.ReviewApproval
	prevState                 []uint8 // fold scratch during loading
	stopIdx                   []int   // indexes of stop lines in Events
	resumeIdx                 []int
	sorted                    []int32 // action indexes in key order
	all                       []int32 // every line: the selection of the zero filter
	allSpans                  []ActionSpan
	// subjects is, per action, its key, customer and task in lower case,
	// what a customer/task filter matches, lowered once.
	subjects    []string
	first, last []int   // per action: its first and last line in Events
	next        []int32 // per line: the next line of its action (-1: none)
	// taskFirst and taskNext link each task's lines the same way.
	taskFirst []int
	taskNext  []int32
	final     []uint8 // per action: the state its last line left
}

func sortByKey(idx []int32, keys []string) {
	slices.SortFunc(idx, func(a, b int32) int { return strings.Compare(keys[a], keys[b]) })
}

// Load reads the whole history of l in one snapshot.
func Load(ctx context.Context, l *ledger.Ledger) (*History, error) {
	h := &History{Path: l.Path(), Keys: []string{""}, Tasks: []string{""}, States: []string{""},
		kindIdx: map[string]uint8{}, stateIdx: map[string]uint8{"": 0},
		actorIdx: map[string]int32{}, keyIdx: map[string]int32{"": 0}, taskIdx: map[string]int32{"": 0},
		prevState: []uint8{0}}
	facts, err := l.ReadReview(ctx, func(ln ledger.ReviewLine) error {
		h.add(ln)
		return nil
	})
	if err != nil {
		return nil, err
	}
	h.Facts = facts
	h.index()
	return h, nil
}

// add appends one line. Lines written before lines carried their state
// come with their sentence, from which inferState guesses.
func (h *History) add(ln ledger.ReviewLine) {
	ev := Event{ID: ln.ID, At: ln.At, Actor: internBytes(h.actorIdx, &h.Actors, ln.Actor),
		Action: internBytes(h.keyIdx, &h.Keys, ln.ActionKey), Task: internBytes(h.taskIdx, &h.Tasks, ln.TaskID),
		Kind: h.kind(ln.Kind), To: h.state(ln.ToState)}
	if int(ev.Action) >= len(h.prevState) {
		h.prevState = append(h.prevState, 0)
	}
	kind := h.Kinds[ev.Kind]
	if isOverride(kind, ln.Detail, ln.Message) {
		ev.Flags |= FlagOverride
	}
	if len(ln.Message) > 0 && ev.Action != 0 {
		// Only lines written before lines carried their state come with
		// their sentence.
		if to := inferState(kind, string(ln.Message), h.States[h.prevState[ev.Action]]); to != "" {
			ev.To = h.state([]byte(to))
			ev.Flags |= FlagInferred
		}
	}
	if ev.To != 0 {
		h.prevState[ev.Action] = ev.To
	}
	h.Events = append(h.Events, ev)
}

// index settles inference against the format change and builds the lookups
// the views use.
func (h *History) index() {
	for i := range h.Events {
		ev := &h.Events[i]
		if ev.Flags&FlagInferred != 0 {
			h.Inferred++
		}
		switch h.Kinds[ev.Kind] {
		case ledger.EvStopped:
			h.stopIdx = append(h.stopIdx, i)
		case ledger.EvResumed:
			h.resumeIdx = append(h.resumeIdx, i)
		}
	}
	h.prevState = nil
	h.first, h.last, h.final = make([]int, len(h.Keys)), make([]int, len(h.Keys)), make([]uint8, len(h.Keys))
	for i := range h.first {
		h.first[i] = -1
	}
	h.next = make([]int32, len(h.Events))
	h.taskFirst, h.taskNext = make([]int, len(h.Tasks)), make([]int32, len(h.Events))
	taskLast := make([]int, len(h.Tasks))
	for i := range h.taskFirst {
		h.taskFirst[i] = -1
	}
	for i, ev := range h.Events {
		h.taskNext[i] = -1
		if h.taskFirst[ev.Task] < 0 {
			h.taskFirst[ev.Task] = i
		} else {
			h.taskNext[taskLast[ev.Task]] = int32(i)
		}
		taskLast[ev.Task] = i
	}
	for i, ev := range h.Events {
		h.next[i] = -1
		if h.first[ev.Action] < 0 {
			h.first[ev.Action] = i
		} else {
			h.next[h.last[ev.Action]] = int32(i)
		}
		h.last[ev.Action] = i
		if ev.To != 0 {
			h.final[ev.Action] = ev.To
		}
	}
	h.sorted = make([]int32, 0, len(h.Keys))
	for i := 1; i < len(h.Keys); i++ {
		h.sorted = append(h.sorted, int32(i))
	}
	sortByKey(h.sorted, h.Keys)
	h.customers = make([]string, len(h.Keys))
	h.subjects = make([]string, len(h.Keys))
	for i, k := range h.Keys {
		a := h.Facts.Actions[k]
		h.customers[i] = a.Customer
		h.subjects[i] = strings.ToLower(k + "\x00" + a.Customer + "\x00" + a.TaskID)
	}
	h.all = make([]int32, len(h.Events))
	for i := range h.all {
		h.all[i] = int32(i)
	}
	h.allSpans = h.spans(h.all)
	h.approvals = map[int32][]ledger.ReviewApproval{}
	for _, ap := range h.Facts.Approvals {
		i := h.keyIdx[ap.ActionKey]
		h.approvals[i] = append(h.approvals[i], ap)
	}
}

// internBytes returns the index of b's text, adding it when new: the
// lookup by string(b) does not copy, so a million lines allocate only for
// the distinct names among them.
func internBytes(idx map[string]int32, list *[]string, b []byte) int32 {
	if i, ok := idx[string(b)]; ok {
		return i
	}
	s := string(b)
	i := int32(len(*list))
	*list = append(*list, s)
	idx[s] = i
	return i
}

func (h *History) kind(b []byte) uint8 {
	if i, ok := h.kindIdx[string(b)]; ok {
		return i
	}
	i := uint8(len(h.Kinds))
	h.Kinds = append(h.Kinds, ledger.EventKind(b))
	h.kindIdx[string(b)] = i
	return i
}

func (h *History) state(b []byte) uint8 {
	if i, ok := h.stateIdx[string(b)]; ok {
		return i
	}
	i := uint8(len(h.States))
	h.States = append(h.States, string(b))
	h.stateIdx[string(b)] = i
	return i
}

// isOverride tells a person's decision over the gate's. A reconciliation
// says in its detail who established the outcome; one written before
// details did, in its sentence.
func isOverride(kind ledger.EventKind, detail, message []byte) bool {
	switch kind {
	case ledger.EvHoldReleased, ledger.EvDestinationMoved:
		return true
	case ledger.EvReconciled:
		if len(detail) > 0 {
			var d struct{ By string }
			return json.Unmarshal(detail, &d) == nil && d.By == "person"
		}
		return strings.Contains(string(message), "checked the destination by hand")
	}
	return false
}

// inferState is the state a line written before schema 6 led its action
// to, read from its kind and, where the kind alone does not say, its
// sentence; "" when it changed no state. prev is the action's state before.
func inferState(kind ledger.EventKind, m, prev string) string {
	switch kind {
	case ledger.EvProposed:
		return string(ledger.StateDrafting)
	case ledger.EvRevised:
		if strings.Contains(m, "draft again") {
			return string(ledger.StateDrafting)
		}
	case ledger.EvSubmitted, ledger.EvCorrection:
		return string(ledger.StateAwaitingApproval)
	case ledger.EvApproved:
		return string(ledger.StateApproved)
	case ledger.EvAttemptStarted:
		return string(ledger.StateExecuting)
	case ledger.EvSent:
		return string(ledger.StateSent)
	case ledger.EvNotDelivered:
		return string(ledger.StateApproved)
	case ledger.EvFailed:
		return string(ledger.StateFailed)
	case ledger.EvUnknown, ledger.EvRecoveredUnknown:
		return string(ledger.StateUnknown)
	case ledger.EvDenied:
		return string(ledger.StateDenied)
	case ledger.EvCancelled, ledger.EvAudienceRemoved:
		return string(ledger.StateCancelled)
	case ledger.EvRefusedStopped:
		return heldCode(ledger.HoldStopped)
	case ledger.EvContradiction:
		return heldCode(ledger.HoldContradiction)
	case ledger.EvOwnershipConflict:
		if strings.Contains(m, "proposal was cancelled") {
			return string(ledger.StateCancelled)
		}
	case ledger.EvApprovalStale:
		if strings.Contains(m, "needs approval again") {
			return string(ledger.StateAwaitingApproval)
		}
	case ledger.EvHoldReleased:
		if i := strings.LastIndex(m, "; it is "); i >= 0 {
			return strings.TrimSuffix(strings.TrimSuffix(m[i+len("; it is "):], "."), " again")
		}
	case ledger.EvHeld:
		return heldCode(inferHoldCause(m, prev))
	}
	return ""
}

func inferHoldCause(m, prev string) ledger.HoldCause {
	switch {
	case prev == string(ledger.StateUnknown) || strings.Contains(m, "stays held"):
		return ledger.HoldUnknownOutcome
	case strings.Contains(m, "nothing arrived"):
		return ledger.HoldSafeToRetry
	case strings.Contains(m, "has no owner"):
		return ledger.HoldOwnerMissing
	case strings.Contains(m, "unavailable"):
		return ledger.HoldSourceUnavailable
	}
	return ledger.HoldOperator
}

func heldCode(c ledger.HoldCause) string { return string(ledger.StateHeld) + ":" + string(c) }

// Key is the action key of action index i.
func (h *History) Key(i int32) string { return h.Keys[i] }

// Customer is the customer of action index i ("" when unknown).
func (h *History) Customer(i int32) string { return h.customers[i] }

// Time is an event's moment.
func (e Event) Time() time.Time { return time.Unix(0, e.At).UTC() }

// KindOf is the kind of e.
func (h *History) KindOf(e Event) ledger.EventKind { return h.Kinds[e.Kind] }

// Stops are the indexes in Events of the stop lines, oldest first.
func (h *History) Stops() []int { return h.stopIdx }

// Text reads the sentences and reasons of the given lines back from the
// ledger, by id.
func Text(ctx context.Context, l *ledger.Ledger, ids []int64) (map[int64]ledger.Event, error) {
	evs, err := l.EventsByID(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("read history text: %w", err)
	}
	out := make(map[int64]ledger.Event, len(evs))
	for _, e := range evs {
		out[e.ID] = e
	}
	return out, nil
}

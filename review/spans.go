package review

import "strings"

// ActionSpan is one action's part of a timeline selection: the action's
// lines grouped, from its first selected line to its last.
type ActionSpan struct {
	Action      int32
	First, Last int // indexes into Events of its first and last selected line
	Lines       int // how many of its lines the selection holds
}

// Spans groups the selected lines by action, in the order of each
// action's first selected line; lines without an action are left out.
//
// The spans of every line are grouped once, at load, and shared: the
// result must not be modified.
func (h *History) Spans(sel []int32) []ActionSpan {
	if len(sel) == len(h.Events) && h.allSpans != nil {
		return h.allSpans // sel selects every line
	}
	return h.spans(sel)
}

func (h *History) spans(sel []int32) []ActionSpan {
	at := make([]int32, len(h.Keys)) // 1 + position in out, 0: none yet
	var out []ActionSpan
	for _, i := range sel {
		a := h.Events[i].Action
		if a == 0 {
			continue
		}
		if at[a] == 0 {
			out = append(out, ActionSpan{Action: a, First: int(i)})
			at[a] = int32(len(out))
		}
		sp := &out[at[a]-1]
		sp.Last = int(i)
		sp.Lines++
	}
	return out
}

// StatePath is the states an action went through over its whole history, in
// order ("drafting › approved › executing › sent"), repeats dropped.
func (h *History) StatePath(a int32) string {
	var parts []string
	for i := h.first[a]; i >= 0; i = int(h.next[i]) {
		if to := h.Events[i].To; to != 0 {
			if s := h.States[to]; len(parts) == 0 || parts[len(parts)-1] != s {
				parts = append(parts, s)
			}
		}
	}
	return strings.Join(parts, " › ")
}

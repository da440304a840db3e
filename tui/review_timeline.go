package tui

import (
	"context"
	"sort"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"

	"gatehouse/ledger"
	"gatehouse/review"
)

// timelineTab is the review's timeline: the lines of the history the
// filters select, one per row, or grouped one action per row (spans). It
// holds only the visible window's sentences; the rest are read as they
// scroll into view (Review.fetchText).
type timelineTab struct {
	sel  []int32 // the timeline lines the filter selects
	pos  listPos // over sel
	text map[int64]ledger.Event
	// spans shows the timeline one action per row (its lines grouped)
	// instead of one line per row.
	spans    bool
	spanList []review.ActionSpan
	spanPos  listPos
}

func (t *timelineTab) setRows(n int) {
	t.pos.setRows(n)
	t.spanPos.setRows(n)
}

func (t *timelineTab) addText(text map[int64]ledger.Event) {
	for id, e := range text {
		t.text[id] = e
	}
}

// applyFilter selects the lines again, keeping the selected line when it
// is still selected.
func (t *timelineTab) applyFilter(h *review.History, f review.Filter) {
	keep := int32(-1)
	if t.pos.cursor < len(t.sel) {
		keep = t.sel[t.pos.cursor]
	}
	t.sel = h.Select(f)
	t.pos.setTotal(len(t.sel))
	if keep >= 0 {
		// The first selected line at or after the one kept: a binary
		// search, sel being in history order.
		i := sort.Search(len(t.sel), func(i int) bool { return t.sel[i] >= keep })
		t.pos.move(min(i, len(t.sel)-1) - t.pos.cursor)
	}
	t.loadSpans(h)
}

// loadSpans groups the selection by action when the spans are shown.
func (t *timelineTab) loadSpans(h *review.History) {
	if !t.spans || h == nil {
		return
	}
	t.spanList = h.Spans(t.sel)
	t.spanPos.setTotal(len(t.spanList))
}

// missingText is the visible lines whose sentences are not read yet.
func (t *timelineTab) missingText(h *review.History) []int64 {
	if h == nil || t.spans {
		return nil
	}
	var ids []int64
	end := min(t.pos.top+t.pos.rows, len(t.sel))
	for _, i := range t.sel[t.pos.top:end] {
		if id := h.Events[i].ID; t.text[id].ID == 0 {
			ids = append(ids, id)
		}
	}
	return ids
}

// onClick selects the row clicked, counted from the list's first.
func (t *timelineTab) onClick(row int) {
	p := &t.pos
	if t.spans {
		p = &t.spanPos
	}
	if at := p.top + row; row >= 0 && at < min(p.top+p.rows, p.total) {
		p.move(at - p.cursor)
	}
}

// showAction puts the timeline on screen selecting one action's lines from the
// first after a moment (a history index; -1 for its last line).
func (t *timelineTab) showAction(rv *Review, key string, after int) tea.Cmd {
	rv.filter = review.Filter{Subject: key}
	t.spans = false
	rv.applyFilter()
	rv.tab = tabTimeline
	at := len(t.sel) - 1
	if after >= 0 {
		at = min(sort.Search(len(t.sel), func(i int) bool { return int(t.sel[i]) > after }), len(t.sel)-1)
	}
	t.pos.move(at - t.pos.cursor)
	return rv.fetchText()
}

func (t *timelineTab) onKey(rv *Review, msg tea.KeyPressMsg) tea.Cmd {
	k := Keys
	if key.Matches(msg, k.Spans) {
		t.spans = !t.spans
		t.loadSpans(rv.h)
		return rv.fetchText()
	}
	if t.spans {
		return t.onSpanKey(rv, msg)
	}
	switch {
	case t.pos.onKey(msg):
	case key.Matches(msg, k.KindFilter):
		rv.filter.Group = (rv.filter.Group + 1) % len(review.Groups)
		rv.applyFilter()
	case key.Matches(msg, k.ActorFilter):
		return rv.ask(promptActor, "actor: ", rv.filter.Actor)
	case key.Matches(msg, k.SubjectFilter):
		return rv.ask(promptSubject, "customer/task: ", rv.filter.Subject)
	case key.Matches(msg, k.Window):
		return rv.ask(promptWindow, "window: ", windowText(rv.filter))
	case key.Matches(msg, k.ClearFilters):
		rv.filter = review.Filter{}
		rv.applyFilter()
	case key.Matches(msg, k.NextInAction), key.Matches(msg, k.PrevInAction):
		dir := 1
		if key.Matches(msg, k.PrevInAction) {
			dir = -1
		}
		p, ok := rv.h.NextOfAction(t.sel, t.pos.cursor, dir)
		if !ok {
			return info("no other line of this action in the timeline as filtered")
		}
		t.pos.move(p - t.pos.cursor)
	case key.Matches(msg, k.NextStop):
		p, ok := rv.h.NextStop(t.sel, t.pos.cursor)
		if !ok {
			return info("no stop in the timeline as filtered")
		}
		t.pos.move(p - t.pos.cursor)
	default:
		return nil
	}
	return rv.fetchText()
}

// onSpanKey moves over the actions; enter shows the selected action's
// lines (the customer/task filter set to its key).
func (t *timelineTab) onSpanKey(rv *Review, msg tea.KeyPressMsg) tea.Cmd {
	switch {
	case t.spanPos.onKey(msg):
	case key.Matches(msg, Keys.Open) && t.spanPos.total > 0:
		sp := t.spanList[t.spanPos.cursor]
		rv.filter.Subject = rv.h.Key(sp.Action)
		t.spans = false
		rv.applyFilter()
		t.pos.move(-t.pos.total)
		return rv.fetchText()
	case key.Matches(msg, Keys.KindFilter), key.Matches(msg, Keys.ClearFilters),
		key.Matches(msg, Keys.ActorFilter), key.Matches(msg, Keys.SubjectFilter), key.Matches(msg, Keys.Window):
		t.spans = false // filters are set on the lines, then v groups them again
		cmd := t.onKey(rv, msg)
		t.spans = true
		t.loadSpans(rv.h)
		return cmd
	}
	return nil
}

// timelineFilters are the keys that set the timeline's filters.
func timelineFilters() []key.Binding {
	k := Keys
	return []key.Binding{k.KindFilter, k.ActorFilter, k.SubjectFilter, k.Window, k.ClearFilters}
}

// keys are the tab's own bindings for the help line.
func (t *timelineTab) keys() []key.Binding {
	k := Keys
	if t.spans {
		return append([]key.Binding{k.Spans, k.OpenLines}, timelineFilters()...)
	}
	return append([]key.Binding{k.Spans, k.NextInAction, k.NextStop}, timelineFilters()...)
}

// fetchText reads the sentences of the timeline's visible lines not read
// yet.
func (rv *Review) fetchText() tea.Cmd {
	ids := rv.timeline.missingText(rv.h)
	if len(ids) == 0 {
		return nil
	}
	rv.busy++
	l := rv.cfg.Ledger
	return rv.do(func(ctx context.Context) tea.Msg {
		text, err := review.Text(ctx, l, ids)
		return reviewTextMsg{text: text, err: err}
	})
}

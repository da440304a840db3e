package tui

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"

	"gatehouse/internal/keyname"
	"gatehouse/review"
)

// stopTab is the review's "at a stop": every action's state when a stop
// was pulled, by bucket, and what became of it after. The report is built
// off the screen's goroutine (Review.buildReport), one build at a time.
type stopTab struct {
	stop   int // the stop shown, from 1; 0 until loaded
	report *review.Report
	// The report's lines, the action each is about ("" for none) and how
	// each is drawn.
	lines, keys []string
	styles      []lineStyle
	pos         listPos
	building    bool // a report is being built
	rebuild     bool // the history changed while it was: build again
	stale       bool // the report is of an older read of the history
}

func (t *stopTab) onReport(rv *Review, msg reviewReportMsg) tea.Cmd {
	t.building = false
	var again tea.Cmd
	if t.rebuild {
		// The history was read again, or another stop chosen, while this
		// one was built: one more build, never two at once.
		t.rebuild = false
		again = rv.buildReport()
	}
	if msg.err != nil {
		return tea.Batch(fail(msg.err), again)
	}
	if msg.stop != t.stop {
		return again // another stop was chosen meanwhile
	}
	t.stale = false
	// The same stop built again over a longer history keeps the line the
	// reviewer was on (an action's, found by its key; a heading, by its
	// place) on the same row; another stop starts at its top.
	same := t.report != nil && stopNumber(t.report) == stopNumber(&msg.r)
	was, keep, nth := t.pos, "", 0
	if same && t.pos.cursor < len(t.keys) {
		keep = t.keys[t.pos.cursor]
		for i := t.pos.cursor - 1; keep != "" && i >= 0 && t.keys[i] == keep; i-- {
			nth++ // the action's second line
		}
	}
	t.report = &msg.r
	t.lines, t.keys, t.styles = msg.lines, msg.keys, msg.styles
	t.pos = listPos{rows: t.pos.rows}
	if same {
		if i := slices.Index(t.keys, keep); keep != "" && i >= 0 {
			was.cursor, was.top = i+nth, i+nth-(was.cursor-was.top)
		}
		t.pos.cursor, t.pos.top = was.cursor, was.top
	}
	t.pos.setTotal(len(t.lines))
	return again
}

// buildReport folds the history up to the chosen stop, off the screen's
// goroutine; one build at a time.
func (rv *Review) buildReport() tea.Cmd {
	st := &rv.atStop
	if st.building {
		st.rebuild = true
		return nil
	}
	st.building = true
	rv.busy++
	l, h, stop := rv.cfg.Ledger, rv.h, st.stop
	return rv.do(func(ctx context.Context) tea.Msg {
		r, err := review.Build(ctx, l, h, review.Options{Stop: stop})
		if err != nil {
			return reviewReportMsg{stop: stop, err: err}
		}
		lines, keys, styles := stopBody(&r)
		return reviewReportMsg{stop: stop, r: r, lines: lines, keys: keys, styles: styles}
	})
}

// stopNumber is the stop a report is of, 0 for the end of a history
// without one.
func stopNumber(r *review.Report) int {
	if r.Stop == nil {
		return 0
	}
	return r.Stop.Number
}

func (t *stopTab) onKey(rv *Review, msg tea.KeyPressMsg) tea.Cmd {
	switch {
	case t.pos.onKey(msg):
	case key.Matches(msg, Keys.Open) && t.pos.cursor < len(t.keys) && t.keys[t.pos.cursor] != "":
		// The action's lines in the timeline, from the first after the stop.
		after := -1
		if stops := rv.h.Stops(); t.stop > 0 && t.stop <= len(stops) {
			after = stops[t.stop-1]
		}
		return rv.timeline.showAction(rv, t.keys[t.pos.cursor], after)
	case key.Matches(msg, Keys.NextStop):
		n := len(rv.h.Stops())
		if n == 0 {
			return info("the history holds no stop")
		}
		t.stop = t.stop%n + 1
		return rv.buildReport()
	}
	return nil
}

// stopKeys are the tab's own bindings for the help line.
func stopKeys() []key.Binding { return []key.Binding{Keys.NextStop, Keys.OpenLines} }

func (t *stopTab) view(rv *Review) []string {
	r := t.report
	if r == nil {
		return []string{rv.th.Dim.Render("Folding the history up to the stop…")}
	}
	var head string
	if s := r.Stop; s != nil {
		head = fmt.Sprintf("Stop %d of %d at %s by %s: %s", s.Number, s.Of, s.At, s.Actor, s.Reason)
		if s.Resumed != nil {
			head += fmt.Sprintf(" · resumed %s by %s", s.Resumed.At, s.Resumed.Actor)
		} else {
			head += " · still stopped"
		}
	} else {
		head = "No stop in the history: the state at its end, " + r.Moment
	}
	var counts []string
	for _, c := range r.Counts {
		counts = append(counts, fmt.Sprintf("%s %d", c.Title, c.N))
	}
	lines := []string{rv.th.Warn.Render(fitLine(head, rv.width))}
	// The counts answer the first question after a stop: they wrap rather
	// than lose a bucket at 80 columns.
	lines = append(lines, packItems(counts, rv.width)...)
	end := min(t.pos.top+t.pos.rows, len(t.lines))
	for p := t.pos.top; p < end; p++ {
		l := fitLine(t.lines[p], rv.width)
		if p == t.pos.cursor {
			l = rv.th.Selected.Render(l)
		} else {
			l = styled(rv.th, t.styles[p], l)
		}
		lines = append(lines, l)
	}
	return lines
}

// stopBody lists each bucket's actions: then and now on one line, what
// happened after and whether the approval still rests on current values on
// the next.
//
// The lines stay plain (with a style to draw them in) and are styled when
// shown: a stop with 100,000 actions has 200,000 of them.
func stopBody(r *review.Report) ([]string, []string, []lineStyle) {
	var out, keys []string
	var styles []lineStyle
	for k, b := range r.Buckets {
		if len(b.Actions) == 0 {
			continue
		}
		out = append(out, fmt.Sprintf("%s: %d", r.Counts[k].Title, len(b.Actions)))
		keys, styles = append(keys, ""), append(styles, styleHeader)
		for _, a := range b.Actions {
			then := stateCode(a.State)
			if a.Inferred {
				then += "*"
			}
			line, style := fmt.Sprintf("  %s  %s → now %s", keyname.Name(a.Key, a.Task, 0), then, stateCode(a.Now)), stylePlain
			if a.ArrivedTwice {
				line, style = line+" · ARRIVED TWICE", styleBad
			}
			out = append(out, line)
			after := "nothing after"
			if len(a.After) > 0 {
				after = "after: " + strings.Join(a.After, ", ")
			}
			detail := fmt.Sprintf("    %s · tried after: %d", after, a.SendsTried)
			if a.Material != nil {
				detail += " · material: " + a.Material.Words(true)
			}
			out = append(out, detail)
			keys, styles = append(keys, a.Key, a.Key), append(styles, style, styleDim)
		}
	}
	if r.Inferred.Lines > 0 {
		out = append(out, fmt.Sprintf("* inferred from %d lines written before lines recorded their state", r.Inferred.Lines))
		keys, styles = append(keys, ""), append(styles, styleDim)
	}
	return out, keys, styles
}

// lineStyle is how a prepared line is drawn.
type lineStyle uint8

const (
	stylePlain lineStyle = iota
	styleHeader
	styleDim
	styleBad
)

func styled(th Theme, st lineStyle, s string) string {
	switch st {
	case styleHeader:
		return th.Header.Render(s)
	case styleBad:
		return th.Bad.Render(s)
	case styleDim:
		return th.Dim.Render(s)
	}
	return s
}

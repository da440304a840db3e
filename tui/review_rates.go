package tui

import (
	"fmt"
	"strings"
	"time"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"

	"gatehouse/review"
)

// ratesTab is the review's rates: the history counted per day or hour,
// over the timeline's time window, as sparklines and buckets; enter filters
// the timeline to a bucket.
type ratesTab struct {
	buckets []review.RateBucket
	// window is the time window the buckets were counted for.
	window [2]int64
	pos    listPos
	hourly bool
}

// count counts the buckets again when the filter's window changed (or
// again is set, or nothing was counted yet).
func (t *ratesTab) count(h *review.History, f review.Filter, again bool) {
	w := [2]int64{f.Since, f.Until}
	if h == nil || w == t.window && t.buckets != nil && !again {
		return
	}
	t.window = w
	width := 24 * time.Hour
	if t.hourly {
		width = time.Hour
	}
	from, to := 0, len(h.Events)
	if f.Since != 0 || f.Until != 0 {
		from, to = h.Window(nsTime(f.Since), nsTime(f.Until))
	}
	t.buckets = h.Rates(from, to, width)
	t.pos.setTotal(len(t.buckets))
}

// onClick selects the bucket clicked, counted from the first row; it
// reports whether a bucket was.
func (t *ratesTab) onClick(row int) bool {
	if at := t.pos.top + row; row >= 0 && at < min(t.pos.top+t.pos.rows, t.pos.total) {
		t.pos.move(at - t.pos.cursor)
		return true
	}
	return false
}

func (t *ratesTab) onKey(rv *Review, msg tea.KeyPressMsg) tea.Cmd {
	switch {
	case t.pos.onKey(msg):
	case key.Matches(msg, Keys.RateWidth):
		t.hourly = !t.hourly
		t.count(rv.h, rv.filter, true)
	case key.Matches(msg, Keys.Open) && t.pos.total > 0:
		b := t.buckets[t.pos.cursor]
		rv.filter.Since, rv.filter.Until = b.Start.UnixNano(), b.Start.Add(b.Width).UnixNano()
		rv.applyFilter()
		rv.tab = tabTimeline
		return tea.Batch(rv.fetchText(), info("timeline filtered to "+bucketLabel(b)))
	}
	return nil
}

// ratesKeys are the tab's own bindings for the help line.
func ratesKeys() []key.Binding { return []key.Binding{Keys.BucketToTimeline, Keys.RateWidth} }

// sparkBlocks draw a count relative to the largest in its row.
var sparkBlocks = []rune(" ▁▂▃▄▅▆▇█")

func sparkline(vals []int, w int) string {
	if len(vals) > w {
		vals = vals[len(vals)-w:]
	}
	peak := 0
	for _, v := range vals {
		peak = max(peak, v)
	}
	var b strings.Builder
	for _, v := range vals {
		i := 0
		if peak > 0 && v > 0 {
			i = max(1, v*(len(sparkBlocks)-1)/peak)
		}
		b.WriteRune(sparkBlocks[i])
	}
	return b.String()
}

func bucketLabel(b review.RateBucket) string {
	if b.Width < 24*60*60*1e9 {
		return b.Start.Format("2006-01-02 15:00")
	}
	return b.Start.Format("2006-01-02")
}

// sparkMeasures are the measures drawn as sparklines above the buckets.
var sparkMeasures = []string{"sent", "denied", "duplicate blocks", "unknown", "holds", "manual overrides", "late evidence"}

func (t *ratesTab) view(rv *Review) []string {
	width := "per day"
	if t.hourly {
		width = "per hour"
	}
	var total review.Measures
	for _, b := range t.buckets {
		total = addMeasures(total, b.M)
	}
	buckets := fmt.Sprintf("%d buckets", len(t.buckets))
	if len(t.buckets) == 1 {
		buckets = "1 bucket"
	}
	lines := []string{rv.th.Dim.Render(fitLine(fmt.Sprintf("%s · %s · denial rate %.1f%% over the %s", width, buckets,
		total.DenialRate(), windowOrAll(rv.filter)), rv.width))}
	sparkW := max(rv.width-26, 4)
	for _, name := range sparkMeasures {
		m := measureNamed(name)
		vals := make([]int, len(t.buckets))
		for i, b := range t.buckets {
			vals[i] = m.Get(b.M)
		}
		lines = append(lines, fitLine(fmt.Sprintf("%-17s %5d %s", name, m.Get(total), sparkline(vals, sparkW)), rv.width))
	}
	labelW := 10
	if t.hourly {
		labelW = 16
	}
	// The bar takes what the label and the counts leave.
	barW := min(max(rv.width-labelW-4-6-6*4-10, 0), 40)
	lines = append(lines, "", rv.th.Header.Render(fitLine(fmt.Sprintf("%-*s %4s %-*s %6s %4s %4s %4s %4s %4s %4s", labelW, "bucket", "sent",
		barW, "", "denied", "dup", "own", "unk", "hold", "ovr", "late"), rv.width)))
	peak := 0
	for _, b := range t.buckets {
		peak = max(peak, b.M.Sent)
	}
	end := min(t.pos.top+t.pos.rows, len(t.buckets))
	for p := t.pos.top; p < end; p++ {
		b := t.buckets[p]
		bar := ""
		if peak > 0 {
			bar = strings.Repeat("█", b.M.Sent*barW/peak)
		}
		denied := fmt.Sprintf("%d", b.M.Denied)
		if b.M.Denied > 0 {
			denied = fmt.Sprintf("%d/%.0f%%", b.M.Denied, b.M.DenialRate())
		}
		row := fitLine(fmt.Sprintf("%-*s %4d %-*s %6s %4d %4d %4d %4d %4d %4d", labelW, bucketLabel(b), b.M.Sent, barW, bar, denied,
			b.M.DuplicateBlocks, b.M.OwnershipConflicts, b.M.Unknown, b.M.Holds, b.M.ManualOverrides, b.M.LateEvidence), rv.width)
		if p == t.pos.cursor {
			row = rv.th.Selected.Render(row)
		}
		lines = append(lines, row)
	}
	return lines
}

func windowOrAll(f review.Filter) string {
	if w := windowText(f); w != "" {
		return "window " + w
	}
	return "whole history"
}

func measureNamed(name string) review.Measure {
	for _, m := range review.MeasureList {
		if m.Name == name {
			return m
		}
	}
	return review.MeasureList[0]
}

func addMeasures(a, b review.Measures) review.Measures {
	for _, m := range []struct{ dst, src *int }{{&a.Proposed, &b.Proposed}, {&a.Attempts, &b.Attempts}, {&a.Sent, &b.Sent},
		{&a.Denied, &b.Denied}, {&a.DuplicateBlocks, &b.DuplicateBlocks}, {&a.OwnershipConflicts, &b.OwnershipConflicts},
		{&a.Unknown, &b.Unknown}, {&a.Holds, &b.Holds}, {&a.ManualOverrides, &b.ManualOverrides}, {&a.Failed, &b.Failed},
		{&a.StaleApprovals, &b.StaleApprovals}, {&a.Stops, &b.Stops}, {&a.LateEvidence, &b.LateEvidence}} {
		*m.dst += *m.src
	}
	return a
}

package tui

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	tea "charm.land/bubbletea/v2"

	"gatehouse/internal/oswait"
	"gatehouse/review"
)

// The review follows a live ledger the way the inspector does: it waits
// for word of a change (a PostgreSQL notification from any host, or the
// poll interval; a lost notification costs at most one interval), asks the
// ledger's change counter, a single-row query, and reads the history again
// only when the counter moved. One read is in flight at most, and the next
// check waits the last read's cost (at least MinInterval) after it ends, so
// a ledger written many times a second is read about once a second, and a
// large one no more than half the time. The follower only reads: a review
// of a backup or a read-only copy stays as it was.

// follower is the review's state as it follows the ledger.
type follower struct {
	seen     int64         // the change counter read before the history in view
	loading  bool          // a read of the history is in flight
	polling  bool          // the follower's wait or change check is in flight
	gap      time.Duration // the wait after a read before the next check
	readAt   time.Time     // when the history in view was read (the ledger's clock)
	added    int           // lines the last read added
	watchErr string        // the follower's last error, said once
	reads    atomic.Int64  // reads of the history (tests count them)
	checks   atomic.Int64  // change checks (tests count them)
}

// load reads the history; auto says the follower asked.
func (rv *Review) load(auto bool) tea.Cmd {
	rv.watch.loading = true
	rv.watch.reads.Add(1)
	rv.busy++
	l := rv.cfg.Ledger
	return rv.do(func(ctx context.Context) tea.Msg {
		sw := oswait.StartStopwatch()
		// The counter first: the history read after it holds at least
		// what it counts, so a later counter is all a change check needs.
		n, err := l.Changes(ctx)
		if err != nil {
			return reviewLoadedMsg{err: fmt.Errorf("review: %w", err), took: sw.Elapsed(), auto: auto}
		}
		h, err := review.Load(ctx, l)
		return reviewLoadedMsg{h: h, n: n, err: err, took: sw.Elapsed(), auto: auto}
	})
}

// follow arms the follower unless it is armed already: right after a
// read, a pause of the read's cost and then a check; otherwise a wait for
// a change.
func (rv *Review) follow(afterRead bool) tea.Cmd {
	if rv.cfg.Poll < 0 || rv.watch.polling || rv.h == nil {
		return nil
	}
	rv.watch.polling = true
	l, poll, gap := rv.cfg.Ledger, rv.cfg.Poll, rv.watch.gap
	return rv.do(func(ctx context.Context) tea.Msg {
		if afterRead {
			_ = oswait.Pause(ctx, gap)
		} else {
			_ = l.WaitForChange(ctx, poll)
		}
		return pollMsg{}
	})
}

// checkChanges asks the ledger for its change counter.
func (rv *Review) checkChanges() tea.Cmd {
	l := rv.cfg.Ledger
	return rv.do(func(ctx context.Context) tea.Msg {
		n, err := l.Changes(ctx)
		return reviewChangesMsg{n: n, err: err}
	})
}

// onChanges reads the history again when the counter moved and no read is
// in flight (that read re-arms the follower when it ends); otherwise it
// waits again. An error is said once, and the follower goes on trying.
func (rv *Review) onChanges(msg reviewChangesMsg) tea.Cmd {
	rv.watch.polling = false
	rv.watch.checks.Add(1)
	if msg.err != nil {
		var said tea.Cmd
		if e := msg.err.Error(); e != rv.watch.watchErr {
			rv.watch.watchErr = e
			said = fail(fmt.Errorf("following the ledger: %w", msg.err))
		}
		return tea.Batch(said, rv.follow(false))
	}
	rv.watch.watchErr = ""
	switch {
	case rv.watch.loading:
		return nil
	case msg.n != rv.watch.seen:
		return rv.load(true)
	}
	return rv.follow(false)
}

// anchor is what the reviewer was looking at, kept across a read: the
// selected line and action, and where on the page each sat.
type anchor struct {
	line      int64 // the selected timeline line's id (0: none)
	lineRow   int   // its row on the page
	lineEnd   bool  // it was the newest line the filters select
	action    string
	actionRow int
	actionEnd bool
}

func (t *timelineTab) anchor(h *review.History) anchor {
	a := anchor{lineRow: t.pos.cursor - t.pos.top, lineEnd: t.pos.cursor >= t.pos.total-1,
		actionRow: t.spanPos.cursor - t.spanPos.top, actionEnd: t.spanPos.cursor >= t.spanPos.total-1}
	if t.pos.cursor < len(t.sel) {
		a.line = h.Events[t.sel[t.pos.cursor]].ID
	}
	if t.spans && t.spanPos.cursor < len(t.spanList) {
		a.action = h.Key(t.spanList[t.spanPos.cursor].Action)
	}
	return a
}

// restore puts the selections back after a read. A selection on the
// newest line (or action) moves to the newest, as a tail does, so new
// lines come into view; any other stays on its line, on the same row of
// the page, so a reviewer reading is not moved.
func (t *timelineTab) restore(h *review.History, a anchor) {
	switch {
	case a.lineEnd:
		t.pos.move(t.pos.total)
	case a.line != 0:
		// sel is in history order, which is id order.
		i := sort.Search(len(t.sel), func(i int) bool { return h.Events[t.sel[i]].ID >= a.line })
		t.pos.cursor = min(i, len(t.sel)-1)
		t.pos.top = t.pos.cursor - a.lineRow
		t.pos.move(0)
	}
	if !t.spans {
		return
	}
	switch {
	case a.actionEnd:
		t.spanPos.move(t.spanPos.total)
	case a.action != "":
		for i, sp := range t.spanList {
			if h.Key(sp.Action) == a.action {
				t.spanPos.cursor, t.spanPos.top = i, i-a.actionRow
				t.spanPos.move(0)
				break
			}
		}
	}
}

// followNote says, in the tab bar, whether the review follows the ledger
// and when it last read the history (UTC, as every time on the screen).
func (rv *Review) followNote() string {
	var parts []string
	if rv.cfg.Poll >= 0 {
		parts = append(parts, "following")
	}
	switch {
	case rv.watch.watchErr != "":
		parts = append(parts, "not readable, retrying")
	case !rv.watch.readAt.IsZero():
		read := "read " + rv.watch.readAt.UTC().Format("15:04:05")
		if rv.watch.added > 0 {
			read += fmt.Sprintf(" +%d", rv.watch.added)
		}
		parts = append(parts, read)
	}
	return strings.Join(parts, " · ")
}

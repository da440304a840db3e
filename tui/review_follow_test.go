package tui

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/charmbracelet/x/exp/teatest/v2"

	"gatehouse/internal/pgtest"
	"gatehouse/ledger"
)

// TestReviewFollowsAnotherWriter opens the review on a ledger, writes to it
// through a second handle (as another process would) and waits for the new
// lines on screen without a key pressed; the tab bar says the review
// follows and how many lines the read added.
func TestReviewFollowsAnotherWriter(t *testing.T) {
	l, _ := reviewLedger(t)
	other, err := ledger.Open(l.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	rv := NewReview(NewTheme(true), ReviewConfig{Ledger: l, Actor: "olga", Source: "ledger.db"})
	tm, rec := startApp(t, NewApp(NewTheme(true), rv), 100, 30)
	rec.waitText(t, tm, "following · read")
	rec.waitText(t, tm, "hold_released")
	proposeApproved(t, other, "T-7777", "cust-late", "late-workflow")
	// The four new lines, the newest selected (it was before them).
	rec.waitText(t, tm, "line 37 of 37")
	if s := rec.screen(); !strings.Contains(s, "late-workflow") || !regexp.MustCompile(`read \d\d:\d\d:\d\d \+\d`).MatchString(s) {
		t.Errorf("the new lines are not on screen, or the tab bar does not say the read added lines:\n%s", s)
	}
	tm.Send(press("q"))
	tm.WaitFinished(t, teatest.WithFinalTimeout(10*time.Second))
}

// stepFollower runs one round of the follower by hand, as its wait ending
// would: the change check and, if the ledger changed, the read.
func stepFollower(a *App, rv *Review) {
	_, cmd := a.Update(routedMsg{to: rv.ID(), msg: pollMsg{}})
	drive(a, cmd)
}

// TestReviewFollowKeepsThePlace: a read the follower makes keeps the
// reviewer on the line, action and report line they were on, on the same
// row of the page; a selection on the newest line moves to the newest, as
// a tail does.
func TestReviewFollowKeepsThePlace(t *testing.T) {
	a, rv, l := newTestReview(t, 100, 24)
	other, err := ledger.Open(l.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	write := func(task string) {
		t.Helper()
		proposeApproved(t, other, task, "cust-"+task, "late-workflow")
		stepFollower(a, rv)
	}
	selected := func() int64 { return rv.h.Events[rv.timeline.sel[rv.timeline.pos.cursor]].ID }

	typeKeys(a, "k", "k", "k", "k", "k") // reading, five lines above the newest
	id, row, lines := selected(), rv.timeline.pos.cursor-rv.timeline.pos.top, len(rv.h.Events)
	write("T-8001")
	if len(rv.h.Events) != lines+4 {
		t.Fatalf("the follower read %d lines, had %d; want 4 more", len(rv.h.Events), lines)
	}
	if selected() != id || rv.timeline.pos.cursor-rv.timeline.pos.top != row {
		t.Fatalf("the reviewer was moved: line %d on row %d, was %d on row %d", selected(), rv.timeline.pos.cursor-rv.timeline.pos.top, id, row)
	}
	if strings.Contains(screenText(a), "T-8001") {
		t.Errorf("the new lines pushed into the page being read:\n%s", screenText(a))
	}

	typeKeys(a, "G") // on the newest line: the tail
	write("T-8002")
	if rv.timeline.pos.cursor != len(rv.timeline.sel)-1 || !strings.Contains(screenText(a), "late-workflow") {
		t.Fatalf("at the tail, the selection stayed behind: %d of %d\n%s", rv.timeline.pos.cursor, len(rv.timeline.sel), screenText(a))
	}

	typeKeys(a, "v", "g", "j") // the second action
	key := rv.h.Key(rv.timeline.spanList[rv.timeline.spanPos.cursor].Action)
	write("T-8003")
	if got := rv.h.Key(rv.timeline.spanList[rv.timeline.spanPos.cursor].Action); got != key || rv.timeline.spanPos.cursor != 1 {
		t.Fatalf("spans: the selection moved from %s to %s", key, got)
	}

	typeKeys(a, "v", "tab", "tab", "down", "down", "down")
	keep, at := rv.atStop.keys[rv.atStop.pos.cursor], rv.atStop.pos.cursor
	write("T-8004")
	if rv.atStop.keys[rv.atStop.pos.cursor] != keep || rv.atStop.pos.cursor != at || rv.atStop.stale {
		t.Fatalf("at a stop: the selection moved from %s (%d) to %s (%d)", keep, at, rv.atStop.keys[rv.atStop.pos.cursor], rv.atStop.pos.cursor)
	}
	if strings.Contains(screenText(a), "history read again") {
		t.Errorf("the follower's reads fill the status line:\n%s", screenText(a))
	}
}

// TestReviewFollowKeepsThePlaceWithoutAStop: on a history without a stop
// the at-a-stop tab shows the state at its end, built again over each read;
// the reviewer's line stays where it was.
func TestReviewFollowKeepsThePlaceWithoutAStop(t *testing.T) {
	l := seedLedger(t)
	other, err := ledger.Open(l.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	rv := NewReview(NewTheme(true), quickFollow(ReviewConfig{Ledger: l, Actor: "olga", Source: "ledger.db"}))
	a := newDriven(rv, 100, 30)
	typeKeys(a, "tab", "tab", "down", "down", "down")
	if !strings.Contains(screenText(a), "No stop in the history") {
		t.Fatalf("not the state at the end:\n%s", screenText(a))
	}
	keep, at := rv.atStop.keys[rv.atStop.pos.cursor], rv.atStop.pos.cursor
	proposeApproved(t, other, "T-9001", "cust-new", "late-workflow")
	stepFollower(a, rv)
	if rv.atStop.stale || !strings.Contains(strings.Join(rv.atStop.keys, " "), "cust-new") {
		t.Fatalf("the state at the end was not built again over the new lines")
	}
	if rv.atStop.keys[rv.atStop.pos.cursor] != keep || rv.atStop.pos.cursor != at {
		t.Fatalf("the selection moved from %s (%d) to %s (%d)", keep, at, rv.atStop.keys[rv.atStop.pos.cursor], rv.atStop.pos.cursor)
	}
}

// TestReviewFollowerCoalesces: a change seen while a read is in flight
// starts no second read (the read in flight re-arms the follower when it
// ends), and reads on a ledger written without pause are spaced by the
// minimum interval.
func TestReviewFollowerCoalesces(t *testing.T) {
	_, rv, _ := newTestReview(t, 100, 30)
	rv.watch.loading = true
	if cmd := rv.onChanges(reviewChangesMsg{n: rv.watch.seen + 1}); cmd != nil {
		t.Fatal("a change seen during a read armed something")
	}
	rv.watch.loading = false

	l, _ := reviewLedger(t)
	other, err := ledger.Open(l.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	const gap = 200 * time.Millisecond
	rv = NewReview(NewTheme(true), ReviewConfig{Ledger: l, Source: "ledger.db", Poll: time.Millisecond, MinInterval: gap})
	tm, rec := startApp(t, NewApp(NewTheme(true), rv), 100, 30)
	rec.waitText(t, tm, "following · read")
	var writes atomic.Int64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { // a write every few milliseconds for two seconds
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := other.Claim(context.Background(), ledger.TaskRef{ID: fmt.Sprintf("busy-%d", i)}, "busy"); err != nil {
				t.Error(err)
				return
			}
			writes.Add(1)
		}
	}()
	time.Sleep(2 * time.Second)
	close(stop)
	<-done
	rec.waitText(t, tm, fmt.Sprintf("busy-%d", writes.Load()-1)) // the last write is read in the end
	tm.Send(press("q"))
	tm.WaitFinished(t, teatest.WithFinalTimeout(10*time.Second))
	// Two seconds at one read per 200ms at most, the first read and the
	// last one after the writes stopped.
	most := int64(2*time.Second/gap) + 3
	if n := rv.watch.reads.Load(); n < 3 || n > most {
		t.Fatalf("%d reads for %d writes in 2s, want between 3 and %d", n, writes.Load(), most)
	}
	t.Logf("%d writes, %d reads", writes.Load(), rv.watch.reads.Load())
}

// TestReviewFollowerLeavesACopyAsItWas: following a backup opened as the
// review command opens it checks its change counter many times and never
// writes the file or its WAL.
func TestReviewFollowerLeavesACopyAsItWas(t *testing.T) {
	path, before, l := reviewedCopy(t)
	rv := NewReview(NewTheme(true), ReviewConfig{Ledger: l, Source: "ledger.db", Poll: 5 * time.Millisecond, MinInterval: 5 * time.Millisecond})
	tm, rec := startApp(t, NewApp(NewTheme(true), rv), 100, 30)
	rec.waitText(t, tm, "following · read")
	for end := time.Now().Add(30 * time.Second); rv.watch.checks.Load() < 10; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("the follower checked the ledger %d times in 30s", rv.watch.checks.Load())
		}
	}
	tm.Send(press("q"))
	tm.WaitFinished(t, teatest.WithFinalTimeout(10*time.Second))
	if !l.ReadOnly() {
		t.Fatal("following opened the ledger for writing")
	}
	if after := fileBytes(t, path); !bytes.Equal(before[""], after[""]) || !bytes.Equal(before["-wal"], after["-wal"]) {
		t.Fatal("following changed the ledger or its WAL")
	}
}

// TestReviewFollowsPostgres: on PostgreSQL the review wakes on another
// host's write through LISTEN/NOTIFY, with a poll interval far longer than
// the test; and when the listening connection is lost (terminated on the
// server), it still notices writes by polling the change counter.
func TestReviewFollowsPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL")
	}
	loc := pgtest.Database(t)
	l, err := ledger.Open(loc)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	proposeApproved(t, l, "T-1", "cust-first", "first-workflow")
	other, err := ledger.Open(loc)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()

	// writeUntil writes a new task now and then (a notification sent
	// before the follower listens wakes no one) until the screen shows it.
	writeUntil := func(rec *recorder, tm *teatest.TestModel, who string) {
		t.Helper()
		stop, done := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(done)
			for i := 0; ; i++ {
				if _, err := other.Claim(context.Background(), ledger.TaskRef{ID: fmt.Sprintf("%s-%d", who, i)}, who); err != nil {
					t.Error(err)
					return
				}
				select {
				case <-stop:
					return
				case <-time.After(time.Second):
				}
			}
		}()
		rec.waitText(t, tm, who)
		close(stop)
		<-done
	}

	db, err := sql.Open("pgx", loc)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// listener runs q on the connection that listens for changes, once it
	// listens (the follower starts it when it first waits), and reports
	// whether there was one.
	listener := func(q string) {
		t.Helper()
		for end := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			var found bool
			if err := db.QueryRow(`SELECT count(*) > 0 FROM (SELECT ` + q + ` FROM pg_stat_activity
				WHERE datname = current_database() AND query = 'LISTEN gatehouse_changes') AS l`).Scan(&found); err != nil {
				t.Fatal(err)
			}
			if found {
				return
			}
			if time.Now().After(end) {
				t.Fatal("the review never listened for changes")
			}
		}
	}

	t.Run("Notified", func(t *testing.T) {
		rv := NewReview(NewTheme(true), ReviewConfig{Ledger: l, Source: "pg", Poll: time.Hour, MinInterval: 10 * time.Millisecond})
		tm, rec := startApp(t, NewApp(NewTheme(true), rv), 100, 30)
		rec.waitText(t, tm, "first-workflow")
		listener("pid") // waiting an hour, unless notified
		writeUntil(rec, tm, "notified")
		tm.Send(press("q"))
		tm.WaitFinished(t, teatest.WithFinalTimeout(10*time.Second))
	})
	t.Run("NotificationsLost", func(t *testing.T) {
		rv := NewReview(NewTheme(true), ReviewConfig{Ledger: l, Source: "pg", Poll: 100 * time.Millisecond, MinInterval: 10 * time.Millisecond})
		tm, rec := startApp(t, NewApp(NewTheme(true), rv), 100, 30)
		rec.waitText(t, tm, "first-workflow")
		listener("pg_terminate_backend(pid)")
		writeUntil(rec, tm, "polled")
		tm.Send(press("q"))
		tm.WaitFinished(t, teatest.WithFinalTimeout(10*time.Second))
	})
}

package ledger

import "fmt"

// CountRoundTrips makes l count the round trips its deciding transactions
// make to PostgreSQL, and returns how many so far.
func CountRoundTrips(l *Ledger) func() int64 {
	l.trips = &countTrips{}
	return func() int64 { return l.trips.n.Load() }
}

// LimitPages lets the ledger grow by at most n pages more on its write
// connection, as a full disk would: a write that needs more fails with
// SQLITE_FULL.
func LimitPages(l *Ledger, n int) error {
	var have int
	if err := l.w.QueryRow(`PRAGMA page_count`).Scan(&have); err != nil {
		return err
	}
	_, err := l.w.Exec(fmt.Sprintf(`PRAGMA max_page_count = %d`, have+n))
	return err
}

// OnGroup makes l tell formed the size of each group of writes before its
// transaction begins (see groupCommit).
func OnGroup(l *Ledger, formed func(n int)) { l.group.formed = formed }

// OnQueue makes l tell queued the length of its queue of grouped writes
// each time one joins it.
func OnQueue(l *Ledger, queued func(n int)) { l.group.queued = queued }

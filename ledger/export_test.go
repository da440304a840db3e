package ledger

// CountRoundTrips makes l count the round trips its deciding transactions
// make to PostgreSQL, and returns how many so far.
func CountRoundTrips(l *Ledger) func() int64 {
	l.trips = &countTrips{}
	return func() int64 { return l.trips.n.Load() }
}

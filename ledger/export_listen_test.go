package ledger

// Listening reports whether a PostgreSQL ledger has a listening connection
// now (tests wait for it to come back after it was lost).
func Listening(l *Ledger) bool {
	d := l.dialect
	if !d.isPostgres() || d.listen == nil {
		return false
	}
	d.listen.mu.Lock()
	defer d.listen.mu.Unlock()
	return d.listen.err == nil
}

// RelistenPause is relistenPause, for its table test.
var RelistenPause = relistenPause

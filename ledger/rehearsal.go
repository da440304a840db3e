package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"gatehouse/internal/clock"
)

// A rehearsal runs the gate on a pretend clock, and the workflows it runs
// read that clock from their environment. Anyone on the host can serve a
// clock, so a clock offered from outside is never evidence that a ledger is
// a rehearsal's: the ledger's own records say it (ledger_identity.rehearsal,
// written by the rehearsal that creates it, before any history), and only
// then may a process open it on the rehearsal's clock. A production
// ledger's times (leases, settle times, history) stay its own.

// rehearsalSchema is the schema version that brought the rehearsal mark:
// a ledger of an older schema was never marked.
const rehearsalSchema = 18

// ErrNotRehearsal means a rehearsal's clock was offered for a ledger whose
// records do not mark it as a rehearsal's; the ledger was not opened and
// nothing was recorded.
var ErrNotRehearsal = errors.New("not a rehearsal's ledger")

// ErrHasHistory means a ledger that already holds history was to be marked
// as a rehearsal's: a ledger that lived on real time never becomes one.
var ErrHasHistory = errors.New("the ledger already holds history")

// WithRehearsalClock makes the ledger read time from c, the clock of the
// rehearsal that created it. Open and OpenReadOnly refuse it with
// ErrNotRehearsal, before anything is written or any clock is read, unless
// the ledger's records mark it as a rehearsal's (see MarkRehearsal).
func WithRehearsalClock(c clock.Clock) Option {
	return func(o *options) { o.clock, o.rehearsalClock = c, true }
}

// Rehearsal names the scenario whose rehearsal created the ledger, as the
// ledger's records say; "" for every other ledger.
func (l *Ledger) Rehearsal() string {
	if name := l.rehearsal.Load(); name != nil {
		return *name
	}
	return ""
}

// MarkRehearsal records in the ledger that it is the ledger of a rehearsal
// of scenario, so that the processes the rehearsal runs may open it on the
// rehearsal's clock (WithRehearsalClock). A rehearsal marks the ledger it
// creates, before it writes anything else; a ledger that already holds
// history is refused (ErrHasHistory) and left as it is. Marking a ledger
// already marked changes nothing. Nothing unmarks a ledger.
func (l *Ledger) MarkRehearsal(ctx context.Context, scenario string) error {
	if strings.TrimSpace(scenario) == "" {
		return invalidf("mark a rehearsal's ledger: name its scenario")
	}
	var name string
	err := l.write(ctx, func(t *wtx) error {
		if err := t.QueryRow(`SELECT rehearsal FROM ledger_identity`).Scan(&name); err != nil {
			return fmt.Errorf("read the rehearsal mark: %w", err)
		}
		if name != "" {
			return nil
		}
		var used bool
		if err := t.QueryRow(`SELECT EXISTS (SELECT 1 FROM events) OR EXISTS (SELECT 1 FROM actions)
			OR EXISTS (SELECT 1 FROM tasks) OR EXISTS (SELECT 1 FROM actors)
			OR EXISTS (SELECT 1 FROM audience_releases) OR EXISTS (SELECT 1 FROM customers)`).Scan(&used); err != nil {
			return fmt.Errorf("look for history: %w", err)
		}
		if used {
			return fmt.Errorf("ledger %s: %w: only a new ledger becomes a rehearsal's; give the rehearsal a new file or schema", l.path, ErrHasHistory)
		}
		name = scenario
		if _, err := t.Exec(`UPDATE ledger_identity SET rehearsal = ?`, scenario); err != nil {
			return fmt.Errorf("mark the ledger as a rehearsal's: %w", err)
		}
		return nil
	})
	if err == nil {
		l.rehearsal.Store(&name)
	}
	return err
}

// loadRehearsal reads the rehearsal mark once, at open: it only ever goes
// from "" to a name, by MarkRehearsal on a ledger no process has used. A
// ledger of an older schema has none.
func (l *Ledger) loadRehearsal(ctx context.Context, db *sql.DB) {
	var name string
	if err := db.QueryRowContext(ctx, `SELECT rehearsal FROM ledger_identity`).Scan(&name); err == nil {
		l.rehearsal.Store(&name)
	}
}

// refuseUnlessRehearsal is Open's check of a rehearsal's clock: mark is
// what the ledger's records say (see sqliteRehearsal, pgRehearsal).
func refuseUnlessRehearsal(shown, mark string) error {
	if mark != "" {
		return nil
	}
	return fmt.Errorf("%w: the records of ledger %s do not mark it as one", ErrNotRehearsal, shown)
}

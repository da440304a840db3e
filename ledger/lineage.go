package ledger

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"gatehouse/destination"
)

// Lineage is where a ledger stands among its own copies. Every ledger has
// an identity (drawn once, carried by every Message-ID it draws) and a
// generation, which a restore starts anew: a backup put back is a time
// machine, and the world kept what the ledger sent after the backup.
type Lineage struct {
	ID         string
	Generation int64
	// BackupPoint is set on a copy written by ledger backup: the last
	// history line it holds, and when it was taken. 0 on a live ledger.
	BackupPoint int64
	BackupAt    time.Time
	// RestoredAt is when the ledger was last restored or marked restored.
	RestoredAt time.Time
	// Unverified counts the actions and releases a restore left to be
	// looked up at their destination before their first send.
	UnverifiedActions, UnverifiedReleases int
}

// Hold causes of a restored ledger.
const (
	// HoldFoundAfterRestore: after a restore, the destination's records hold
	// a message carrying the action's key. Its Message-ID was drawn after
	// the backup, so it cannot be proof of this action's delivery; it is
	// evidence for a person (release-hold to send anyway, cancel if it
	// arrived).
	HoldFoundAfterRestore HoldCause = "found_after_restore"
	// HoldUnverified: after a restore, the destination's records could not
	// be consulted (it keeps none, or the lookup failed); a person decides.
	HoldUnverified HoldCause = "unverified"
)

// EvRestored is the history line of a restore (or of mark-restored): what
// the ledger's generation became and what is now unverified.
const EvRestored EventKind = "restored"

// EvRestoreCheck is the history line of one look at a destination's
// records on behalf of an unverified action or release.
const EvRestoreCheck EventKind = "restore_check"

// ErrNewerHistory means a restore would discard history the ledger holds
// past the backup's point (sends among it); it is refused unless asked to
// discard it.
var ErrNewerHistory = errors.New("the ledger holds history newer than the backup")

// ErrNotVerifiedYet means a restored ledger's action or release was looked
// up and not found, but what the lost history sent may still land.
// It is a kind of ErrHeld: the action waits, nothing was sent.
var ErrNotVerifiedYet = fmt.Errorf("not verified since the restore (%w)", ErrHeld)

// ErrBackup means the ledger is a copy written by ledger backup, whatever
// put it where a ledger is expected (a hand copy over the live file, a
// script, a snapshot of the backup folder): a backup is never written as a
// live ledger, since it trusts a past the world has moved on from. It is
// read as any ledger; ledger restore puts it back, and ledger
// mark-restored (ToMarkRestored) tells a copy already in place what it is.
// Only SQLite ledgers have backups of their own: a PostgreSQL ledger is
// backed up with the server's tools (ErrPostgresBackup), whose copies
// carry no mark and are told with mark-restored.
var ErrBackup = errors.New("the ledger is a backup")

// ToMarkRestored lets Open open a ledger that is a backup put in place, so
// that MarkRestored can say what it is. It runs no recovery pass, and
// every other write stays refused with ErrBackup until the mark is given.
func ToMarkRestored() Option {
	return func(o *options) { o.openBackup, o.noRecover = true, true }
}

// asRestoreCopy opens restore's own copy of a backup, which it migrates
// and marks restored before it puts it in place.
func asRestoreCopy() Option {
	return func(o *options) { o.openBackup, o.writeBackup, o.noRecover = true, true, true }
}

// backupWriteKey marks a context whose write may change a backup: marking
// it restored, and a migration, which reads the mark itself.
type backupWriteKey struct{}

func writingBackup(ctx context.Context) context.Context {
	return context.WithValue(ctx, backupWriteKey{}, true)
}

func mayWriteBackup(ctx context.Context) bool {
	ok, _ := ctx.Value(backupWriteKey{}).(bool)
	return ok
}

// refuseBackup is the first read of every write transaction on SQLite:
// checked in the transaction that writes, not once at open, so that a
// backup copied over a ledger a long-running process holds open is
// refused too. A ledger without an identity row yet is not a backup.
func (t *wtx) refuseBackup() error {
	var point, at int64
	err := t.QueryRow(`SELECT backup_point, backup_at FROM ledger_identity`).Scan(&point, &at)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil
	case err != nil:
		return fmt.Errorf("read the ledger's backup mark: %w", err)
	case point == 0 && at == 0:
		return nil
	}
	return backupError(t.l.path, point, fromNS(at))
}

// refuseBackupBeforeMigration is refuseBackup for a file whose schema may
// predate lineage (which a backup's cannot: ledger backup marks only a
// copy that has it).
func (t *wtx) refuseBackupBeforeMigration() error {
	var n int
	if err := t.QueryRow(`SELECT count(*) FROM pragma_table_info('ledger_identity') WHERE name = 'backup_at'`).Scan(&n); err != nil || n == 0 {
		return err
	}
	return t.refuseBackup()
}

func backupError(path string, point int64, at time.Time) error {
	return fmt.Errorf("%w (written by ledger backup at history line %d%s) and is never written as a live ledger; nothing was recorded. "+
		"To put a backup back, run gatehouse ledger restore --ledger %s --from FILE; if this file was copied into place by hand, "+
		"run gatehouse ledger mark-restored --ledger %s --as WHO --reason WHY",
		ErrBackup, point, takenAt(at), path, path)
}

// Lineage reads the ledger's identity, generation and restore marks.
func (l *Ledger) Lineage(ctx context.Context) (Lineage, error) {
	var lin Lineage
	err := l.read(ctx, func(tx queryTx) (err error) {
		lin, err = readLineage(tx)
		return err
	})
	return lin, err
}

func readLineage(q queryer) (Lineage, error) {
	var lin Lineage
	var bat, rat int64
	if err := q.QueryRow(`SELECT id, generation, backup_point, backup_at, restored_at,
		(SELECT count(*) FROM unverified_actions), (SELECT count(*) FROM unverified_releases) FROM ledger_identity`).
		Scan(&lin.ID, &lin.Generation, &lin.BackupPoint, &bat, &rat, &lin.UnverifiedActions, &lin.UnverifiedReleases); err != nil {
		return lin, fmt.Errorf("read the ledger's lineage: %w", err)
	}
	lin.BackupAt, lin.RestoredAt = fromNS(bat), fromNS(rat)
	return lin, nil
}

// loadRestored remembers whether anything is unverified, so that a ledger
// that was never restored spends no read on it in a decision. A ledger is
// restored or marked restored while no process has it open (restore
// refuses otherwise; mark-restored tells the operator so), and a handle
// opened before that would not see it.
func (l *Ledger) loadRestored(ctx context.Context, db *sql.DB) {
	var n int
	var at int64
	if err := db.QueryRowContext(ctx, `SELECT (SELECT count(*) FROM unverified_actions) + (SELECT count(*) FROM unverified_releases),
		(SELECT restored_at FROM ledger_identity)`).Scan(&n, &at); err == nil {
		l.restored.Store(n > 0)
		l.everRestored.Store(at != 0)
	}
}

// hasLineage reports whether db's schema records lineage (a ledger opened
// read-only may predate it).
func hasLineage(ctx context.Context, db *sql.DB) bool {
	var n int
	err := db.QueryRowContext(ctx, `SELECT count(*) FROM pragma_table_info('ledger_identity') WHERE name = 'generation'`).Scan(&n)
	return err == nil && n > 0
}

// markBackup records in a copy written by Backup that it is one: the
// point (its last history line) and the time it was taken at.
func markBackup(ctx context.Context, db *sql.DB, at time.Time) (point int64, gen int64, err error) {
	if err := db.QueryRowContext(ctx, `SELECT COALESCE(max(id), 0) FROM events`).Scan(&point); err != nil {
		return 0, 0, err
	}
	if _, err := db.ExecContext(ctx, `UPDATE ledger_identity SET backup_point = ?, backup_at = ?`, point, ns(at)); err != nil {
		return 0, 0, fmt.Errorf("mark the copy as a backup: %w", err)
	}
	err = db.QueryRowContext(ctx, `SELECT generation FROM ledger_identity`).Scan(&gen)
	return point, gen, err
}

// RestoreMark is what a restore (or MarkRestored) left to be verified.
type RestoreMark struct {
	Generation         int64
	UnverifiedActions  int
	UnverifiedReleases int
}

// MarkRestored tells the ledger that it is a copy put back: its actions
// that had not ended (sent, cancelled, failed) and its audience releases
// may have been executed after the copy was taken, so each is looked up at
// its destination before its first send (see Execute and SendAudience).
// It starts a new generation and records it in the history, and a backup
// it is given stops being one. Restore calls it; a ledger put back by
// other means (a file copied by hand, a filesystem snapshot, pg_restore)
// needs it said, by `ledger mark-restored`, while no process has the
// ledger open (a backup copied into place is opened with ToMarkRestored).
func (l *Ledger) MarkRestored(ctx context.Context, actor, reason string) (RestoreMark, error) {
	if strings.TrimSpace(actor) == "" {
		return RestoreMark{}, invalidf("mark restored: say who (--as)")
	}
	var m RestoreMark
	err := l.write(writingBackup(ctx), func(t *wtx) error {
		if _, err := t.permit(actor, VerbMarkRestored, "", ""); err != nil {
			return err
		}
		var err error
		m, err = t.markRestored(actor, reason)
		return err
	})
	if err == nil {
		l.restored.Store(m.UnverifiedActions+m.UnverifiedReleases > 0)
		l.everRestored.Store(true)
	}
	return m, err
}

func (t *wtx) markRestored(actor, reason string) (RestoreMark, error) {
	var m RestoreMark
	now := ns(t.now())
	if _, err := t.Exec(`UPDATE ledger_identity SET generation = generation + 1, restored_at = ?, backup_point = 0, backup_at = 0`, now); err != nil {
		return m, fmt.Errorf("start a new generation: %w", err)
	}
	if err := t.QueryRow(`SELECT generation FROM ledger_identity`).Scan(&m.Generation); err != nil {
		return m, err
	}
	res, err := t.Exec(`INSERT INTO unverified_actions (action_key, since, generation)
		SELECT key, ?, ? FROM actions WHERE state NOT IN ('sent', 'cancelled', 'failed')
		ON CONFLICT (action_key) DO UPDATE SET since = excluded.since, generation = excluded.generation`, now, m.Generation)
	if err != nil {
		return m, fmt.Errorf("mark the actions unverified: %w", err)
	}
	n, _ := res.RowsAffected()
	m.UnverifiedActions = int(n)
	if res, err = t.Exec(`INSERT INTO unverified_releases (release_id, since, generation)
		SELECT id, ?, ? FROM audience_releases WHERE true
		ON CONFLICT (release_id) DO UPDATE SET since = excluded.since, generation = excluded.generation`, now, m.Generation); err != nil {
		return m, fmt.Errorf("mark the releases unverified: %w", err)
	}
	n, _ = res.RowsAffected()
	m.UnverifiedReleases = int(n)
	epochs, err := t.newestEpochs()
	if err != nil {
		return m, err
	}
	t.note(map[string]any{restoreEpochsDetail: epochs}, "")
	return m, t.event(actor, "", "", EvRestored, reason,
		"%s marked the ledger restored: generation %d begins. %d action(s) that had not ended and %d audience release(s) are unverified: "+
			"what the ledger sent after its copy was taken is unknown to it, so each is looked up at its destination before its first send, "+
			"and records that answer from another epoch than the newest it recorded for them (%s) prove nothing.",
		actor, m.Generation, m.UnverifiedActions, m.UnverifiedReleases, epochs)
}

// restoreEpochsDetail is the restore's history line's record of
// restoreEpochs.
const restoreEpochsDetail = "records_epochs"

// restoreEpochs is, for each destination identity, the epoch its records
// reported when the newest attempt the restored copy holds was handed to
// it: what they must still answer from after the restore for their
// silence to say that the lost history sent nothing there. A restore
// records it in its history line (markRestored), where the post-restore
// look reads it.
type restoreEpochs map[string]string

func (e restoreEpochs) String() string {
	if len(e) == 0 {
		return "none recorded"
	}
	ids := make([]string, 0, len(e))
	for id := range e {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for i, id := range ids {
		ids[i] = id + " " + orDash(e[id])
	}
	return strings.Join(ids, ", ")
}

// newestEpochs reads, from the copy being marked restored (so before its
// backup point), the epoch of each destination's newest attempt.
func (t *wtx) newestEpochs() (restoreEpochs, error) {
	rows, err := t.Query(`SELECT destination, max(id) FROM attempts WHERE destination <> '' GROUP BY destination`)
	if err != nil {
		return nil, fmt.Errorf("read the destinations' newest attempts: %w", err)
	}
	newest := map[string]int64{}
	for rows.Next() {
		var id string
		var at int64
		if err := rows.Scan(&id, &at); err != nil {
			rows.Close()
			return nil, err
		}
		newest[id] = at
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return nil, err
	}
	epochs := restoreEpochs{}
	for id, at := range newest {
		var epoch string
		if err := t.QueryRow(`SELECT epoch FROM attempts WHERE id = ?`, at).Scan(&epoch); err != nil {
			return nil, fmt.Errorf("read the epoch of attempt %d: %w", at, err)
		}
		epochs[id] = epoch
	}
	return epochs, nil
}

// restoreHistory is the restoreEpochs of every restore the ledger went
// through, oldest first. An action's first send after a restore may have
// been lost to any of them: a restore forgets what was sent after its
// backup, and a later backup carries the forgotten action on, unverified,
// into a later restore. Records prove its absence only if they still
// answer from the epoch each of those restores recorded: cleared between
// two restores, they may have dropped the very message the first one
// forgot, though they answer from the epoch the second one recorded.
type restoreHistory []restoreEpochs

// readRestoreEpochs reads what every restore recorded. A restore writes
// two history lines of its kind, and only markRestored's carries the
// epochs; a ledger whose restores all predate that gets one empty entry:
// no epoch is known.
func readRestoreEpochs(q queryer) (restoreHistory, error) {
	rows, err := q.Query(`SELECT detail FROM events WHERE action_key = '' AND kind = ? ORDER BY id`, string(EvRestored))
	if err != nil {
		return nil, fmt.Errorf("read the restores' epochs: %w", err)
	}
	defer rows.Close()
	var out restoreHistory
	restores := 0
	for rows.Next() {
		var detail string
		if err := rows.Scan(&detail); err != nil {
			return nil, fmt.Errorf("read the restores' epochs: %w", err)
		}
		var d map[string]restoreEpochs
		if detail != "" {
			if err := json.Unmarshal([]byte(detail), &d); err != nil {
				return nil, fmt.Errorf("read the restores' epochs: %w", err)
			}
		}
		if e, ok := d[restoreEpochsDetail]; ok {
			out = append(out, e)
		}
		restores++
	}
	if restores > 0 && len(out) == 0 {
		out = restoreHistory{nil}
	}
	return out, rows.Err()
}

// epochProblem is the first restore's epochProblem that is not "": records
// must answer from the epoch every restore recorded for them.
func (h restoreHistory) epochProblem(identity, now string) string {
	for i, e := range h {
		if p := e.epochProblem(identity, now); p != "" {
			if len(h) > 1 {
				p += fmt.Sprintf(" (restore %d of %d)", i+1, len(h))
			}
			return p
		}
	}
	return ""
}

// epochProblem says why records of identity answering from epoch now
// cannot establish what the lost history sent there, or "" when they can:
// they answer from the epoch the newest attempt before the backup point
// recorded. Records of another epoch were cleared or restarted since and
// prove nothing. Where no attempt there recorded an epoch, a reset cannot
// be ruled out, unless the records name no epoch at all (records that
// cannot forget, see destination.EpochReporter).
func (e restoreEpochs) epochProblem(identity, now string) string {
	then, ok := e[identity]
	switch {
	case ok && then == now, !ok && now == "":
		return ""
	case !ok:
		return fmt.Sprintf("the records of %s answer from epoch %s, and the ledger recorded no epoch of theirs before its backup point, so a reset of those records since cannot be ruled out",
			identity, now)
	}
	return fmt.Sprintf("the records of %s answer from epoch %s, but the newest the ledger recorded for them before its backup point is %s: they were cleared or restarted since, so finding nothing there proves nothing",
		identity, orDash(now), firstNonEmpty(then, "none recorded"))
}

// unverifiedAtBirth marks an action a restored ledger proposes for the
// first time unverified, as the restore marked those it held: the history
// the restore discarded may have proposed and sent the very same key (a
// webhook delivered again, a workflow run again), and nothing in the
// restored ledger can say it did not. Its first send looks the key up at
// its destination (see verifyRestored); what the lost history sent may
// land until the restore's time plus a lease and the settle time, as for
// the others.
func (t *wtx) unverifiedAtBirth(key string) error {
	if _, err := t.Exec(`INSERT INTO unverified_actions (action_key, since, generation)
		SELECT ?, restored_at, generation FROM ledger_identity`, key); err != nil {
		return fmt.Errorf("mark %s unverified since the restore: %w", key, err)
	}
	t.l.restored.Store(true) // a decision reads the marks from now on
	return nil
}

// unverifiedSince reports whether key is unverified since a restore, and
// since when; a ledger never restored answers without a read.
func (t *wtx) unverifiedSince(key string) (time.Time, bool, error) {
	if !t.l.restored.Load() {
		return time.Time{}, false, nil
	}
	var since int64
	err := t.QueryRow(`SELECT since FROM unverified_actions WHERE action_key = ?`, key).Scan(&since)
	if errors.Is(err, sql.ErrNoRows) {
		return time.Time{}, false, nil
	}
	return fromNS(since), err == nil, err
}

// verified ends key's unverified mark: checked clean, settled by its own
// attempt, or decided by a person.
func (t *wtx) verified(key string) error {
	if !t.l.restored.Load() {
		return nil
	}
	return t.later("verify "+key, `DELETE FROM unverified_actions WHERE action_key = ?`, key)
}

// refuseUnverified is the decision's guard: an unverified action starts
// no attempt (Execute looks it up first; see verifyRestored).
func (t *wtx) refuseUnverified(a *Action) error {
	since, ok, err := t.unverifiedSince(a.Key)
	if err != nil || !ok {
		return err
	}
	return &StateError{Key: a.Key, State: a.State, Err: ErrNotVerifiedYet,
		Hint: fmt.Sprintf("the ledger was restored at %s and %s has not been looked up at its destination since; a send through the gate does that first",
			clockTime(since), a.Key)}
}

// VerifyRestored is the look Execute takes before it decides, for callers
// of BeginAttempt, which refuses an action a restore left unverified
// (ErrNotVerifiedYet) and has no destination to look it up at: the same
// answers (held found_after_restore or unverified, not verified yet, or
// verified), with nothing sent. An action that is not unverified, or not
// approved for dest, is left as it is.
func (l *Ledger) VerifyRestored(ctx context.Context, req ExecuteRequest, dest destination.Destination) (Action, error) {
	return l.verifyRestored(ctx, req, dest)
}

// verifyRestored looks an unverified action's key up at the records of
// dest (the approved destination) before Execute decides:
//
//   - a message carrying the key → held, "found after restore", with what
//     was found (its Message-ID was drawn after the backup, so it is
//     evidence for a person, never proof);
//   - no records, or a lookup that fails → held for a person;
//   - nothing, from records of another epoch than the newest the ledger
//     recorded for them before its backup point (or, where it recorded
//     none, from records that name one) → held for a person: cleared
//     records prove nothing;
//   - nothing, while what the lost history sent may still land (the
//     restore plus a lease and dest's settle time: an attempt begun just
//     before the restore) → refused, nothing changed, the look recorded;
//   - nothing after that → the mark ends and the send goes on.
//
// Only an approved action sent to its approved destination, declaring its
// approved settle time, is looked up; anything else is left to the
// decision, which refuses it as it would.
func (l *Ledger) verifyRestored(ctx context.Context, req ExecuteRequest, dest destination.Destination) (Action, error) {
	if !l.restored.Load() {
		return Action{}, nil
	}
	var a Action
	var since time.Time
	var unverified bool
	var epochs restoreHistory
	var lease time.Duration
	if err := l.read(ctx, func(tx queryTx) error {
		var s int64
		err := tx.QueryRow(`SELECT since FROM unverified_actions WHERE action_key = ?`, req.Key).Scan(&s)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		unverified, since = true, fromNS(s)
		if a, err = getAction(tx, req.Key); err != nil {
			return err
		}
		if epochs, err = readRestoreEpochs(tx); err != nil {
			return err
		}
		lease, err = l.restoreLease(tx)
		return err
	}); err != nil || !unverified {
		return Action{}, err
	}
	ep := destination.Endpoint{Destination: a.Destination, Lookup: a.Lookup}
	if a.Destination == "" {
		ep = destination.EndpointOf(dest) // approved before destinations were bound: this send binds it
	}
	if a.State != StateApproved || dest.Identity() != ep.Destination || otherSettle(a.Key, a.Settle, destination.EndpointOf(dest)) != nil {
		return Action{}, nil
	}
	res, lookErr := lookUp(ctx, ownRecords(dest), ep, destination.LookupQuery{ActionKey: a.Key})
	epochProblem := ""
	if lookErr == nil {
		epochProblem = epochs.epochProblem(ep.Destination, res.Epoch)
	}
	until := since.Add(l.restoreSettle(lease, a.Settle, a.DestinationSettings, dest))
	var out Action
	err := l.write(ctx, func(t *wtx) error {
		cur, err := getAction(t, a.Key)
		if err != nil {
			return err
		}
		out = cur
		if _, still, err := t.unverifiedSince(a.Key); err != nil || !still || cur.Version != a.Version {
			return err // verified, or moved on, meanwhile: the decision judges it
		}
		return t.judgeRestored(&out, req.Executor, ep, res, lookErr, epochProblem, until)
	})
	return out, err
}

// restoreSettle is how long after a restore what the lost history sent may
// still land: an attempt begun just before the restore holds its lease
// (lost, see restoreLease), and a relay may hold its message for the
// settle time after that, the one approved (bound) and never a shorter
// one dest declares.
func (l *Ledger) restoreSettle(lease, bound time.Duration, settings string, dest destination.Destination) time.Duration {
	return lease + settleOf(bound, settings, destination.EndpointOf(dest))
}

// restoreLease is the longest lease an attempt the restore lost could have
// held. That attempt's own row is gone, so it is judged from what the
// ledger kept: the longest lease any of its attempts recorded, and never
// less than the default lease. The sending process's own lease
// ($GATEHOUSE_LEASE) counts only where it is longer: a process started with
// a short lease must not end the wait for another's attempt sooner.
func (l *Ledger) restoreLease(q queryer) (time.Duration, error) {
	var longest int64
	if err := q.QueryRow(`SELECT COALESCE(MAX(lease_until - started_at), 0) FROM attempts`).Scan(&longest); err != nil {
		return 0, fmt.Errorf("read the longest lease recorded: %w", err)
	}
	return max(l.lease, DefaultLease, time.Duration(longest)), nil
}

// judgeRestored records what one look at the records found for an
// unverified action and what follows from it; epochProblem, when not "",
// says why the records' silence proves nothing (see epochProblem).
func (t *wtx) judgeRestored(a *Action, actor string, ep destination.Endpoint, res destination.LookupResult, lookErr error, epochProblem string, until time.Time) error {
	var found []string
	for _, m := range res.Messages {
		if m.ActionKey == "" || m.ActionKey == a.Key {
			found = append(found, fmt.Sprintf("Message-ID %s to %s from %s", m.MessageID, strings.Join(m.Recipients, ", "), orDash(m.Sender)))
		}
	}
	switch {
	case len(found) > 0:
		reason := fmt.Sprintf("found after restore: %s holds %d message(s) carrying its key (%s); the ledger was restored from a copy older than that send, so this is evidence for a person, not proof",
			ep.Destination, len(found), strings.Join(found, "; "))
		return t.refuseWith(a, StateHeld, HoldFoundAfterRestore, actor, EvHeld,
			&StateError{Key: a.Key, State: a.State, Err: ErrHeld, Hint: reason},
			"%s tried to send %s after a restore; the gate looked its key up at %s first and found %s. Held for a person: cancel it if it arrived, release the hold to send it anyway.",
			actor, a.Key, ep.Destination, strings.Join(found, "; "))
	case lookErr != nil:
		reason := fmt.Sprintf("unverified after restore: the records of %s could not be consulted (%v); a person must check the destination", ep.Destination, lookErr)
		return t.refuseWith(a, StateHeld, HoldUnverified, actor, EvHeld,
			&StateError{Key: a.Key, State: a.State, Err: ErrHeld, Hint: reason},
			"%s tried to send %s after a restore, but %v; it is held until a person has checked the destination.", actor, a.Key, lookErr)
	case epochProblem != "":
		reason := fmt.Sprintf("unverified after restore: whether the lost history sent it cannot be established: %s. A person must check the destination", epochProblem)
		return t.refuseWith(a, StateHeld, HoldUnverified, actor, EvHeld,
			&StateError{Key: a.Key, State: a.State, Err: ErrHeld, Hint: reason},
			"%s tried to send %s after a restore; nothing carrying its key was found at %s, but whether the lost history sent it cannot be established: %s. It is held until a person has checked the destination.",
			actor, a.Key, ep.Destination, epochProblem)
	case t.now().Before(until):
		return t.refuseWith(a, "", "", actor, EvRestoreCheck,
			&StateError{Key: a.Key, State: a.State, Err: ErrNotVerifiedYet,
				Hint: fmt.Sprintf("not found at %s yet; looked at %s, but what was sent before the restore may still land until %s; send again after that",
					ep.Destination, clockTime(t.now()), clockTime(until))},
			"%s tried to send %s after a restore; nothing carrying its key was found at %s at %s, but a message sent before the restore may still land until %s; nothing was sent.",
			actor, a.Key, ep.Destination, clockTime(t.now()), clockTime(until))
	default:
		if err := t.verified(a.Key); err != nil {
			return err
		}
		return t.event(actor, a.TaskID, a.Key, EvRestoreCheck, "",
			"Nothing carrying %s was found at %s after the restore and its settle time; it is verified and may be sent.", a.Key, ep.Destination)
	}
}

// RestoreCheck is what an audience send found when it looked its release's
// recipients up after a restore.
type RestoreCheck struct {
	Checked, Found int
}

// verifyRelease looks every recipient of a release a restore left
// unverified up at the destination's records before the first batch: one
// whose key is found there is held, "found after restore" (proposed first
// if the restored ledger never saw it proposed), the others may be sent.
// Before the restore's settle time has passed the run is refused, nothing
// sent: what the lost history sent may still land. A destination without
// records, or records of another epoch than the restore recorded for them
// (see epochProblem), refuses the run until a person has checked it
// (AudienceSend.RestoreCheckedBy).
func (s *sendRun) verifyRelease(ctx context.Context, dest destination.Destination) (RestoreCheck, error) {
	var rc RestoreCheck
	l := s.l
	if !l.restored.Load() {
		return rc, nil
	}
	var sinceNS int64
	err := l.pool().QueryRowContext(ctx, `SELECT since FROM unverified_releases WHERE release_id = ?`, s.req.ReleaseID).Scan(&sinceNS)
	if errors.Is(err, sql.ErrNoRows) {
		return rc, nil
	}
	if err != nil {
		return rc, fmt.Errorf("send release %s: read its restore mark: %w", s.req.ReleaseID, err)
	}
	since := fromNS(sinceNS)
	var lease time.Duration
	if err := l.read(ctx, func(tx queryTx) (err error) {
		lease, err = l.restoreLease(tx)
		return err
	}); err != nil {
		return rc, fmt.Errorf("send release %s: %w", s.req.ReleaseID, err)
	}
	until := since.Add(l.restoreSettle(lease, s.rel.Settle, "", dest))
	rel := s.req.ReleaseID
	if by := strings.TrimSpace(s.req.RestoreCheckedBy); by != "" {
		return rc, l.write(ctx, func(t *wtx) error {
			if _, err := t.Exec(`DELETE FROM unverified_releases WHERE release_id = ?`, rel); err != nil {
				return err
			}
			return t.event(s.req.Actor, "", "", EvRestoreCheck, by,
				"%s sent release %s after a restore without looking its recipients up, on a person's word: %s.", s.req.Actor, rel, by)
		})
	}
	now := l.clock.Now()
	if now.Before(until) {
		err := &StateError{Key: "release " + rel, Err: ErrNotVerifiedYet,
			Hint: fmt.Sprintf("the ledger was restored at %s; what was sent before may still land until %s; run the send again after that",
				clockTime(since), clockTime(until))}
		return rc, errors.Join(err, l.write(ctx, func(t *wtx) error {
			return t.event(s.req.Actor, "", "", EvRestoreCheck, "",
				"%s tried to send release %s after a restore; its recipients are looked up at the destination once what was sent before the restore can no longer land (%s); nothing was sent.",
				s.req.Actor, rel, clockTime(until))
		}))
	}
	ep := destination.EndpointOf(dest)
	records := ownRecords(dest)
	if lk, _ := records.OpenRecords(ep); lk == nil {
		return rc, &StateError{Key: "release " + rel, Err: ErrHeld,
			Hint: fmt.Sprintf("the ledger was restored and %s keeps no records the gate can consult; a person must check what arrived, then send with --restore-checked-by REASON", ep.Destination)}
	}
	var epochs restoreHistory
	if err := l.read(ctx, func(tx queryTx) (err error) {
		epochs, err = readRestoreEpochs(tx)
		return err
	}); err != nil {
		return rc, fmt.Errorf("send release %s: %w", rel, err)
	}
	for after := 0; ; {
		page, err := l.audienceRows(ctx, rel, RowEligible, after, false, audiencePage, 0)
		if err != nil {
			return rc, err
		}
		type look struct {
			row   AudienceRow
			found []string
		}
		var looks []look
		for _, r := range page {
			after = r.Line
			if r.State == StateSent || r.State == StateCancelled || r.State == StateFailed {
				continue
			}
			res, err := lookUp(ctx, records, ep, destination.LookupQuery{ActionKey: r.ActionKey})
			if err != nil {
				return rc, &StateError{Key: "release " + rel, Err: ErrHeld,
					Hint: fmt.Sprintf("after the restore, the records of %s could not be consulted for %s (%v); nothing was sent; run again, or check by hand and send with --restore-checked-by REASON",
						ep.Destination, r.ActionKey, err)}
			}
			if problem := epochs.epochProblem(ep.Destination, res.Epoch); problem != "" {
				return rc, &StateError{Key: "release " + rel, Err: ErrHeld,
					Hint: fmt.Sprintf("after the restore, what the lost history sent to the recipients of release %s cannot be established: %s; nothing was sent; check by hand and send with --restore-checked-by REASON",
						rel, problem)}
			}
			lk := look{row: r}
			for _, m := range res.Messages {
				if m.ActionKey == "" || m.ActionKey == r.ActionKey {
					lk.found = append(lk.found, fmt.Sprintf("Message-ID %s to %s", m.MessageID, strings.Join(m.Recipients, ", ")))
				}
			}
			looks = append(looks, lk)
		}
		if err := l.write(ctx, func(t *wtx) error {
			for _, lk := range looks {
				if len(lk.found) == 0 {
					if err := t.verified(lk.row.ActionKey); err != nil {
						return err
					}
					continue
				}
				if err := s.holdFoundRecipient(t, lk.row, ep, lk.found); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			return rc, err
		}
		for _, lk := range looks {
			rc.Checked++
			if len(lk.found) > 0 {
				rc.Found++
			}
		}
		if len(page) < audiencePage {
			break
		}
	}
	return rc, l.write(ctx, func(t *wtx) error {
		if _, err := t.Exec(`DELETE FROM unverified_releases WHERE release_id = ?`, rel); err != nil {
			return err
		}
		return t.event(s.req.Actor, "", "", EvRestoreCheck, "",
			"%s looked up %d recipient(s) of release %s at %s after the restore: %d found and held for a person, %d not found and sent as usual.",
			s.req.Actor, rc.Checked, rel, ep.Destination, rc.Found, rc.Checked-rc.Found)
	})
}

// holdFoundRecipient holds one recipient whose key the records hold after
// a restore, proposing it first if the restored ledger never saw it.
func (s *sendRun) holdFoundRecipient(t *wtx, r AudienceRow, ep destination.Endpoint, found []string) error {
	if r.State == "" {
		nr, err := s.newRecipient(r)
		if err != nil {
			return err
		}
		if err := t.proposeAndApprove(nr.proposal, nr.approver, nr.material); err != nil {
			return err
		}
	}
	a, err := getAction(t, r.ActionKey)
	if err != nil {
		return err
	}
	switch a.State {
	case StateSent, StateCancelled, StateFailed, StateExecuting, StateUnknown:
		return nil // ended, or its own attempt's outcome is what settles it
	case StateHeld:
		if a.HoldCause.outcomeOpen() {
			return nil
		}
	}
	reason := fmt.Sprintf("found after restore: %s holds %s carrying its key; the ledger was restored from a copy older than that send, so this is evidence for a person, not proof",
		ep.Destination, strings.Join(found, "; "))
	if err := t.transition(&a, StateHeld, reason, HoldFoundAfterRestore); err != nil {
		return err
	}
	return t.event(s.req.Actor, a.TaskID, a.Key, EvHeld, "",
		"After the restore, the audience send looked %s up at %s and found %s. Held for a person: cancel it if it arrived, release the hold to send it anyway.",
		a.Key, ep.Destination, strings.Join(found, "; "))
}

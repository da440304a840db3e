package ledger

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Recover finds attempts left in flight by executors that are gone (their
// process on this host has exited, or their lease has run out) and marks
// their outcome unknown. Nothing is re-sent: the actions wait for Reconcile.
// Open calls it; long-running processes may call it periodically. It returns
// the keys it marked.
func (l *Ledger) Recover(ctx context.Context) ([]string, error) {
	var marked []string
	err := l.writeRelaxed(ctx, func(t *wtx) error {
		marked = nil
		stale, err := staleAttempts(t, t.now())
		if err != nil {
			return err
		}
		for _, at := range stale {
			if err := t.recoverAttempt(at); err != nil {
				return err
			}
			marked = append(marked, at.ActionKey)
		}
		return nil
	})
	return marked, err
}

// RecoveryDue lists the attempts Recover would mark unknown now: in flight,
// with their executor gone or their lease run out. It only reads, so a
// reader can say that recovery is due without performing it.
func (l *Ledger) RecoveryDue(ctx context.Context) ([]Attempt, error) {
	var due []Attempt
	err := l.read(ctx, func(tx queryTx) (err error) {
		due, err = staleAttempts(tx, l.clock.Now().UTC())
		return err
	})
	return due, err
}

// staleAttempts are the attempts in flight whose executor is gone or whose
// lease ended before now.
func staleAttempts(q queryer, now time.Time) ([]Attempt, error) {
	rows, err := q.Query(`SELECT ` + attemptCols + ` FROM attempts WHERE outcome = ''`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var stale []Attempt
	for rows.Next() {
		at, err := scanAttempt(rows)
		if err != nil {
			return nil, err
		}
		if at.LeaseUntil.Before(now) || holderDead(at.Holder) {
			stale = append(stale, at)
		}
	}
	return stale, rows.Err()
}

func (t *wtx) recoverAttempt(at Attempt) error {
	why := "its lease ran out"
	if holderDead(at.Holder) {
		why = "its executor process " + at.Holder + " is gone"
	}
	if _, err := t.Exec(`UPDATE attempts SET outcome = 'unknown', outcome_at = ?, response = ? WHERE id = ?`,
		ns(t.now()), "no outcome recorded: "+why, at.ID); err != nil {
		return err
	}
	a, err := getAction(t, at.ActionKey)
	if err != nil {
		return err
	}
	if err := t.transition(&a, StateUnknown, fmt.Sprintf("attempt %d has no recorded outcome: %s", at.Number, why), ""); err != nil {
		return err
	}
	return t.event("gatehouse", a.TaskID, a.Key, EvRecoveredUnknown, "",
		"On restart the ledger found attempt %d of %s without an outcome (%s); the message may have arrived, so it is marked unknown and will not be re-sent until reconciled.",
		at.Number, a.Key, why)
}

// holderDead reports whether the executor process named by holder
// (see processHolder) is certainly gone. Only a process in this host's
// current boot and PID namespace can be checked; any other holder is left to
// its lease.
func holderDead(holder string) bool {
	i := strings.LastIndexByte(holder, ':')
	if i < 0 || holder[:i] != processSpace() {
		return false
	}
	pid, err := strconv.Atoi(holder[i+1:])
	if err != nil || pid <= 0 || pid == os.Getpid() {
		return false
	}
	err = syscall.Kill(pid, 0)
	return errors.Is(err, syscall.ESRCH)
}

// ExecutorHost names where an attempt's executor runs, from its holder:
// the host name and the process id there ("" and 0 when the holder says
// nothing readable). With several hosts sharing a ledger it tells an
// operator which host an attempt in flight is waiting on.
func (at Attempt) ExecutorHost() (host string, pid int) {
	i := strings.LastIndexByte(at.Holder, ':')
	if i < 0 {
		return "", 0
	}
	pid, _ = strconv.Atoi(at.Holder[i+1:])
	host, _, _ = strings.Cut(at.Holder[:i], "/")
	return host, pid
}

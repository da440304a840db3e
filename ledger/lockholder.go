package ledger

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/mattn/go-sqlite3"

	"gatehouse/internal/oswait"
	"gatehouse/internal/redact"
)

// lockHolderNotice is the line a waiting write prints: who holds the
// ledger's write lock and what it is doing, as far as can be read.
func (l *Ledger) lockHolderNotice() string {
	if l.dialect.isPostgres() {
		return l.pgLockHolderNotice()
	}
	pid, ok := writeLockHolder(l.path)
	if !ok {
		return fmt.Sprintf("waiting for the write lock of %s, held by another process (or its turn); it goes on as soon as the lock is free", l.path)
	}
	host, _ := os.Hostname()
	return fmt.Sprintf("waiting for the write lock of %s, held by pid %d on %s%s; it goes on as soon as the lock is free (Ctrl-C ends the wait, nothing recorded)",
		l.path, pid, host, doing(processCommand(pid)))
}

func doing(cmd string) string {
	if cmd == "" {
		return ""
	}
	return " (" + cmd + ")"
}

// writeLockHolder is the process holding SQLite's WAL write lock on the
// ledger at path: the lock on the first lock slot of its -shm index.
func writeLockHolder(path string) (int, bool) {
	f, err := os.Open(path + "-shm")
	if err != nil {
		return 0, false
	}
	defer f.Close()
	lk := syscall.Flock_t{Type: syscall.F_WRLCK, Whence: io.SeekStart, Start: 120, Len: 1}
	if err := syscall.FcntlFlock(f.Fd(), syscall.F_GETLK, &lk); err != nil || lk.Type == syscall.F_UNLCK || lk.Pid <= 0 {
		return 0, false
	}
	return int(lk.Pid), true
}

// awaitWriteLock waits, interruptibly, while another process holds the
// SQLite ledger's write lock: BEGIN IMMEDIATE would wait for it inside
// SQLite's busy handler, where neither SIGINT nor SIGTERM can end the wait.
// A lock taken between this look and BEGIN is waited for there, as before.
//
// After a second it answers "busy" as SQLite would, so that the caller's
// retry budget (writeWith) still bounds the whole wait.
func awaitWriteLock(ctx context.Context, path string) error {
	if ctx.Done() == nil {
		return nil
	}
	budget := oswait.NewBudget(time.Second)
	for {
		if _, held := writeLockHolder(path); !held {
			return nil
		}
		if budget.Spent() {
			return sqlite3.Error{Code: sqlite3.ErrBusy}
		}
		if err := oswait.Pause(ctx, 2*time.Millisecond); err != nil {
			return err
		}
	}
}

// processCommand is pid's command line, each argument with any credential
// masked, or "" when it cannot be read.
func processCommand(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || len(b) == 0 {
		return ""
	}
	args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
	for i, a := range args {
		if _, v, ok := strings.Cut(a, "="); ok && strings.HasPrefix(a, "--") {
			args[i] = a[:len(a)-len(v)] + redact.Location(v)
		} else {
			args[i] = redact.Location(a)
		}
	}
	s := strings.Join(args, " ")
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// pgLockHolderNotice names the session holding the ledger's deciding lock
// on PostgreSQL: its backend pid, client address, application and what it
// is running.
func (l *Ledger) pgLockHolderNotice() string {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var pid int
	var client, app, state string
	err := l.r.QueryRowContext(ctx, `SELECT a.pid, COALESCE(host(a.client_addr), 'a local socket'), a.application_name, COALESCE(a.state, '')
		FROM pg_locks k JOIN pg_stat_activity a ON a.pid = k.pid
		WHERE k.locktype = 'advisory' AND k.granted AND k.classid = 0 AND k.objid = $1 LIMIT 1`, uint32(writeLockKey)).
		Scan(&pid, &client, &app, &state)
	if err != nil {
		return fmt.Sprintf("waiting for the ledger's deciding lock on %s, held by another session; it goes on as soon as the lock is free", l.path)
	}
	return fmt.Sprintf("waiting for the ledger's deciding lock on %s, held by server backend %d of %s (%s, %s); it goes on as soon as the lock is free (Ctrl-C ends the wait, nothing recorded)",
		l.path, pid, client, orDash(app), state)
}

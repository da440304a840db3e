package ledger

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

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
// ledger at path (the first lock slot of its -shm index), read from
// /proc/locks. Never by opening the -shm: closing any descriptor of a file
// drops every POSIX lock this process holds on it, SQLite's own included.
func writeLockHolder(path string) (int, bool) {
	fi, err := os.Stat(path + "-shm")
	if err != nil {
		return 0, false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	locks, err := os.ReadFile("/proc/locks")
	if err != nil {
		return 0, false
	}
	ino := strconv.FormatUint(st.Ino, 10)
	for _, line := range strings.Split(string(locks), "\n") {
		// "1: POSIX  ADVISORY  WRITE 12345 fd:01:6553 120 120"
		f := strings.Fields(line)
		if len(f) < 8 || f[1] != "POSIX" || f[3] != "WRITE" {
			continue
		}
		if dev := strings.Split(f[5], ":"); len(dev) != 3 || dev[2] != ino {
			continue
		}
		start, err1 := strconv.ParseInt(f[6], 10, 64)
		end, err2 := strconv.ParseInt(f[7], 10, 64)
		if err1 != nil || err2 != nil && f[7] != "EOF" || start > 120 || err2 == nil && end < 120 {
			continue
		}
		if pid, err := strconv.Atoi(f[4]); err == nil && pid > 0 && pid != os.Getpid() {
			return pid, true
		}
	}
	return 0, false
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
	ctx, cancel := oswait.WithTimeout(context.Background(), 2*time.Second)
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

//go:build unix

package ledger_test

import (
	"syscall"
	"time"
)

// cpuNow is the CPU time (user and system) this process has used.
func cpuNow() time.Duration {
	user, sys := cpuSplit()
	return user + sys
}

// sysNow is the part of cpuNow spent in the kernel (for SQLite, mostly
// writing WAL frames and checkpointing).
func sysNow() time.Duration {
	_, sys := cpuSplit()
	return sys
}

func cpuSplit() (user, sys time.Duration) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, 0
	}
	return time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano())
}

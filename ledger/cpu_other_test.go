//go:build !unix

package ledger_test

import "time"

// cpuNow is not measured here: the benchmark reports 0 CPU.
func cpuNow() time.Duration { return 0 }

// sysNow is not measured here either.
func sysNow() time.Duration { return 0 }

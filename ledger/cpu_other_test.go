//go:build !unix

package ledger_test

import "time"

// cpuNow is not measured here: the benchmark reports 0 CPU.
func cpuNow() time.Duration { return 0 }

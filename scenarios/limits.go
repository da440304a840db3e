package scenarios

import (
	"fmt"
	"io"
	"os"
)

// Limits of a scenario file. A scenario is a page a trainer reads: the
// built-ins are a few kilobytes and fifteen steps. The limits are far above
// any scenario a person writes and low enough that a file past them is
// refused at once, having read no more than the limit: parsing YAML costs
// a few hundred bytes of memory per byte of input, so an unbounded file
// could take the machine's memory before a single problem was reported.
const (
	// MaxFileBytes is the largest scenario file read (256 KiB).
	MaxFileBytes = 256 << 10
	// MaxSteps is the most steps a scenario may have, counting each
	// branch of a parallel step.
	MaxSteps = 2000
)

// ReadFile reads a scenario file, refusing one over MaxFileBytes as a
// Problem that names the file and the limit. It never reads more than
// MaxFileBytes+1 bytes, whatever the file's size.
func ReadFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read scenario: %w", err)
	}
	defer f.Close()
	return readLimited(path, f)
}

// readLimited reads r to its end or to one byte past MaxFileBytes.
func readLimited(file string, r io.Reader) ([]byte, error) {
	src, err := io.ReadAll(io.LimitReader(r, MaxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read scenario: %w", err)
	}
	if len(src) > MaxFileBytes {
		return nil, Problems{tooLarge(file)}
	}
	return src, nil
}

func tooLarge(file string) Problem {
	return Problem{File: file, Pos: Pos{1, 1},
		Msg:  fmt.Sprintf("the file is over the limit of %d bytes (256 KiB) for a scenario", MaxFileBytes),
		Hint: "a scenario is a page a trainer reads; split it into several scenarios"}
}

// stepCount counts the steps of sc the way MaxSteps does, and the first
// step (by its name, steps[N]) past the limit.
func stepCount(sc *Scenario) (n int, over string, pos Pos) {
	for i, s := range sc.Steps {
		n += max(1, len(s.Parallel))
		if n > MaxSteps && over == "" {
			over, pos = fmt.Sprintf("steps[%d]", i+1), s.Pos
		}
	}
	return n, over, pos
}

// stepLimit reports a scenario over MaxSteps, at the first step past it.
// It reports whether the scenario is within the limit; past it, the steps
// themselves are not checked (thousands of problems would hide the one
// that matters).
func (v *validator) stepLimit() bool {
	n, over, pos := stepCount(v.sc)
	if n <= MaxSteps {
		return true
	}
	v.problem(pos, "split it into several scenarios", "%s: the scenario has %d steps, over the limit of %d steps per scenario (each branch of a parallel step counts)", over, n, MaxSteps)
	return false
}

package scenarios

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// endless is a file without end: every read fills the buffer.
type endless struct{ read int64 }

func (e *endless) Read(b []byte) (int, error) {
	for i := range b {
		b[i] = '#'
	}
	e.read += int64(len(b))
	return len(b), nil
}

// TestScenarioFileLimit: a scenario source larger than MaxFileBytes is
// refused naming the file and the limit, having read no more than the
// limit and one byte; a file of exactly the limit is read and parsed.
func TestScenarioFileLimit(t *testing.T) {
	src := &endless{}
	_, err := readLimited("huge.yaml", src)
	var probs Problems
	if !errors.As(err, &probs) || len(probs) != 1 || !strings.Contains(probs.Error(), "huge.yaml:1:1") ||
		!strings.Contains(probs.Error(), fmt.Sprint(MaxFileBytes)) || !strings.Contains(probs.Error(), "256 KiB") {
		t.Fatalf("an endless source: %v, want one problem naming huge.yaml and the limit", err)
	}
	if src.read > MaxFileBytes+1 {
		t.Fatalf("read %d bytes of an endless source, want at most %d", src.read, MaxFileBytes+1)
	}

	dir := t.TempDir()
	valid := steps(1)
	exact := valid + "#" + strings.Repeat("x", MaxFileBytes-len(valid)-2) + "\n"
	if len(exact) != MaxFileBytes {
		t.Fatalf("built %d bytes", len(exact))
	}
	for name, body := range map[string]string{"exact.yaml": exact, "over.yaml": exact + "\n"} {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := ParseFile(path)
		if over := name == "over.yaml"; over != (err != nil) || (over && !strings.Contains(err.Error(), "over the limit of 262144 bytes")) {
			t.Errorf("%s (%d bytes): %v", name, len(body), err)
		}
	}
	// A file far past the limit costs no more to refuse: a sparse 48 MB one.
	big := filepath.Join(dir, "big.yaml")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	f.Truncate(48 << 20)
	f.Close()
	if _, err := ParseFile(big); !errors.As(err, &probs) || !strings.Contains(err.Error(), "big.yaml:1:1") {
		t.Fatalf("48 MB file: %v", err)
	}
}

// steps is a valid scenario with n claim steps.
func steps(n int) string {
	var b strings.Builder
	b.WriteString(`name: many
title: Many steps
description: as many as asked
world:
  customers: [{id: cust-ada, email: ada@example.com}]
  tasks: [{id: t-1, customer: cust-ada, subject: Hello, owner: wf}]
  actors: [{id: wf, kind: workflow}]
steps:
`)
	for range n {
		b.WriteString("  - {do: claim, task: t-1, actor: wf}\n")
	}
	b.WriteString("expect:\n  arrivals: {total: 0}\n")
	return b.String()
}

// TestScenarioStepLimit: MaxSteps steps are accepted; one more is one
// problem at the first step past the limit, naming it, the count and the
// limit; each branch of a parallel step counts.
func TestScenarioStepLimit(t *testing.T) {
	if _, err := Parse("ok.yaml", []byte(steps(MaxSteps))); err != nil {
		t.Fatalf("%d steps: %v", MaxSteps, err)
	}
	_, err := Parse("many.yaml", []byte(steps(MaxSteps+1)))
	var probs Problems
	want := fmt.Sprintf("many.yaml:%d:5: steps[%d]: the scenario has %d steps, over the limit of %d steps per scenario", 9+MaxSteps, MaxSteps+1, MaxSteps+1, MaxSteps)
	if !errors.As(err, &probs) || len(probs) != 1 || !strings.Contains(err.Error(), want) {
		t.Fatalf("%d steps: %v\nwant one problem: %s", MaxSteps+1, err, want)
	}
	par := strings.Replace(steps(MaxSteps-1), "steps:\n", "steps:\n  - parallel:\n      - {do: claim, task: t-1, actor: wf}\n      - {do: claim, task: t-1, actor: wf}\n    expect_all: [ok, ok]\n", 1)
	if _, err := Parse("par.yaml", []byte(par)); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("has %d steps", MaxSteps+1)) {
		t.Fatalf("a parallel step of two branches and %d more: %v, want refused as %d steps", MaxSteps-1, err, MaxSteps+1)
	}
}

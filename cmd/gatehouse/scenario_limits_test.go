package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gatehouse/scenarios"
)

// TestScenarioLimitsThroughTheCLI: a scenario file over the size limit (a
// 48 MB one, sparse, so the test costs nothing) and one over the step limit
// are refused by scenarios validate, scenarios show, rehearse and the app's
// --dir listing alike: exit 2, naming the file and the limit. The size is
// refused having read no more than the limit (scenarios'
// TestScenarioFileLimit reads an endless source).
func TestScenarioLimitsThroughTheCLI(t *testing.T) {
	for _, tc := range []struct {
		name, want string
		write      func(path string) error
	}{
		{"big.yaml", fmt.Sprintf("big.yaml:1:1: the file is over the limit of %d bytes (256 KiB)", scenarios.MaxFileBytes), func(path string) error {
			f, err := os.Create(path)
			if err != nil {
				return err
			}
			defer f.Close()
			return f.Truncate(48 << 20)
		}},
		{"many.yaml", fmt.Sprintf("over the limit of %d steps per scenario", scenarios.MaxSteps), func(path string) error {
			var b strings.Builder
			b.WriteString("name: many\ntitle: Many\ndescription: many\nworld:\n  customers: [{id: cust-ada, email: ada@example.com}]\n" +
				"  tasks: [{id: t-1, customer: cust-ada, subject: Hello, owner: wf}]\n  actors: [{id: wf, kind: workflow}]\nsteps:\n")
			for range scenarios.MaxSteps + 1 {
				b.WriteString("  - {do: claim, task: t-1, actor: wf}\n")
			}
			b.WriteString("expect:\n  arrivals: {total: 0}\n")
			return os.WriteFile(path, []byte(b.String()), 0o644)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			file := filepath.Join(dir, tc.name)
			if err := tc.write(file); err != nil {
				t.Fatal(err)
			}
			for _, args := range [][]string{{"scenarios", "validate", file}, {"rehearse", file}, {"app", "--dir", dir}, {"scenarios", "show", file}} {
				if tc.name == "many.yaml" && args[1] == "show" {
					continue // show prints a file within the size limit as it is
				}
				var out, errOut bytes.Buffer
				code := run(args, &out, &errOut)
				if code != exitUsage || !strings.Contains(errOut.String(), tc.want) || !strings.Contains(errOut.String(), file) {
					t.Errorf("%s: exit %d, want %d naming %s and %q\nstdout: %.300s\nstderr: %.600s", strings.Join(args[:2], " "), code, exitUsage, file, tc.want, out.String(), errOut.String())
				}
			}
		})
	}
}

package scenarios

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/")

// TestMalformedFiles checks that every class of malformed file is rejected
// before anything runs, with exact file:line:col messages.
func TestMalformedFiles(t *testing.T) {
	for _, name := range []string{"UnknownKey", "UnknownVerb", "UndefinedRefs", "TypeError", "BadSyntax", "AudienceRefs", "WorkflowProblems", "PauseProblems"} {
		t.Run(name, func(t *testing.T) {
			file := filepath.Join("testdata", kebab(name)+".yaml")
			_, err := ParseFile(file)
			if err == nil {
				t.Fatalf("%s: accepted, want problems", file)
			}
			golden := strings.TrimSuffix(file, ".yaml") + ".golden"
			got := err.Error() + "\n"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, rerr := os.ReadFile(golden)
			if rerr != nil {
				t.Fatalf("read golden (run with -update): %v", rerr)
			}
			if got != string(want) {
				t.Errorf("problems differ\n got: %s\nwant: %s", got, want)
			}
		})
	}
}

func kebab(s string) string {
	var b strings.Builder
	for i, r := range s {
		if r >= 'A' && r <= 'Z' {
			if i > 0 {
				b.WriteByte('-')
			}
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}

func TestBuiltinsValidate(t *testing.T) {
	all, err := Builtin()
	if err != nil {
		t.Fatal(err)
	}
	if len(all) < 12 {
		t.Fatalf("%d built-in scenarios, want at least 12", len(all))
	}
	for _, sc := range all {
		if strings.TrimSpace(sc.Description) == "" {
			t.Errorf("%s has no description", sc.Name)
		}
	}
}

package scenarios_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"gatehouse/scenarios"
)

// FuzzParse feeds arbitrary bytes to the scenario parser. Whatever the input,
// Parse must not panic, and a refusal must be Problems, each naming the file
// and a real position in it, so an author can always find what is wrong.
// Seeds: testdata/fuzz/FuzzParse, plus every built-in scenario and every
// malformed test file, added here so the corpus follows the files.
func FuzzParse(f *testing.F) {
	for _, glob := range []string{"builtin/*.yaml", "testdata/*.yaml"} {
		files, err := filepath.Glob(glob)
		if err != nil {
			f.Fatal(err)
		}
		for _, file := range files {
			src, err := os.ReadFile(file)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(src)
		}
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		sc, err := scenarios.Parse("fuzz.yaml", src)
		if err == nil {
			if sc == nil {
				t.Fatal("no error and no scenario")
			}
			return
		}
		var ps scenarios.Problems
		if !errors.As(err, &ps) || len(ps) == 0 {
			t.Fatalf("refusal is %T, not Problems: %v", err, err)
		}
		// A position may point just past the last line (an unexpected end
		// of file), never further. Lines as YAML counts them, and editors
		// show them: LF, CRLF and a lone CR each end one.
		unix := bytes.ReplaceAll(bytes.ReplaceAll(src, []byte("\r\n"), []byte("\n")), []byte("\r"), []byte("\n"))
		lines := bytes.Count(unix, []byte("\n")) + 2
		for _, p := range ps {
			if p.File != "fuzz.yaml" || p.Msg == "" || p.Pos.Line < 1 || p.Pos.Col < 1 || p.Pos.Line > lines {
				t.Fatalf("problem without a usable position in a %d-line file: %+v", lines-1, p)
			}
		}
	})
}

package scenarios

import (
	"bytes"
	"context"
	"testing"
)

func TestBuiltinsPass(t *testing.T) {
	all, err := Builtin()
	if err != nil {
		t.Fatal(err)
	}
	for _, sc := range all {
		t.Run(sc.Name, func(t *testing.T) {
			t.Parallel()
			rep, err := RunAll(context.Background(), sc, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if !rep.Passed {
				var b bytes.Buffer
				WriteText(&b, []Report{rep})
				t.Fatalf("scenario failed:\n%s", b.String())
			}
		})
	}
}

package scenarios

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// TestLoaderVariablesAreRefused: a scenario may not hand a run a variable
// that makes a loader or an interpreter run code of its choosing before
// the program's own, whether it sets it or inherits it. Each listed name,
// and the LD_/DYLD_ families in any spelling, is refused with the file,
// line and field.
func TestLoaderVariablesAreRefused(t *testing.T) {
	names := append([]string{"LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "ld_preload", "DYLD_INSERT_LIBRARIES"}, codeStartNames...)
	for _, field := range []string{"env", "inherit_env"} {
		for _, name := range names {
			t.Run(field+"/"+name, func(t *testing.T) {
				value := fmt.Sprintf("{%s: /tmp/evil.so}", name)
				verb := "cannot be set"
				if field == "inherit_env" {
					value, verb = fmt.Sprintf("[%s]", name), "cannot be inherited"
				}
				file := writeScenario(t, `name: preload
title: A run that would preload code
description: refused
world:
  customers: [{id: cust-ada, email: ada@example.com}]
  tasks: [{id: t-1, customer: cust-ada, subject: Hello, owner: wf}]
  actors: [{id: wf, kind: workflow}]
steps:
  - do: run_workflow
    actor: wf
    command: [touch, ran]
    `+field+`: `+value+`
`)
				_, err := ParseFile(file)
				if err == nil {
					t.Fatalf("%s: %s accepted", field, name)
				}
				want := fmt.Sprintf("%s:12:", filepath.Base(file))
				if msg := err.Error(); !strings.Contains(msg, want) || !strings.Contains(msg, field+": "+name+" "+verb) {
					t.Fatalf("refusal does not name the line and field (%s, %s %s):\n%s", want, name, verb, msg)
				}
			})
		}
	}
	for _, ok := range []string{"LANG", "TEAM", "LDAP_URL", "PYTHONUNBUFFERED"} {
		if StartsCode(ok) {
			t.Errorf("%s is refused but starts no code", ok)
		}
	}
}

package scenarios

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// TestLoaderVariablesAreRefused: a scenario may not hand a run a variable
// that makes a loader or an interpreter run code of its choosing before
// the program's own, whether it sets it or inherits it. Each refused name,
// a new member of every refused family and the members the families were
// made for (PYTHONUSERBASE, PERLLIB, _JAVA_OPTIONS, JDK_JAVA_OPTIONS,
// LUA_INIT), in any spelling, is refused with the file, line and field; a
// workflow's own settings are not.
func TestLoaderVariablesAreRefused(t *testing.T) {
	names := []string{"LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "ld_preload", "DYLD_INSERT_LIBRARIES",
		"PYTHONUSERBASE", "PYTHONWARNINGS", "pythonpath", "PERLLIB", "_JAVA_OPTIONS", "JDK_JAVA_OPTIONS",
		"LUA_INIT", "BASH_FUNC_x", "NPM_CONFIG_NODE_OPTIONS", "npm_config_script_shell", "GIT_CONFIG_COUNT",
		"OPENSSL_CONF", "XDG_CONFIG_HOME", "R_PROFILE_USER", "DOTNET_STARTUP_HOOKS", "CORECLR_PROFILER_PATH",
		"COR_PROFILER_PATH", "ERL_AFLAGS", "JULIA_DEPOT_PATH", "GUILE_LOAD_PATH", "MAKEFLAGS"}
	for _, c := range codeStarts {
		names = append(names, c.name) // a family's prefix alone is one of its names
		if c.family {
			names = append(names, c.name+"ANY_NEW_ONE")
		}
	}
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
	for _, ok := range []string{"LANG", "TEAM", "ACK_APPROVER", "LDAP_URL", "ENVIRONMENT", "TZ", "CC",
		"MALLOC_ARENA_MAX", "SSL_CERT_FILE", "PS", "LC_ALL", "GATE_MODE"} {
		if StartsCode(ok) {
			t.Errorf("%s is refused but starts no code", ok)
		}
	}
}

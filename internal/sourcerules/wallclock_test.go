package sourcerules

import (
	"go/ast"
	"go/types"
	"sort"
	"strings"
	"testing"
)

// wallClockFuncs are the functions that read or wait on the wall clock.
var wallClockFuncs = map[string]map[string]bool{
	"time": {"Now": true, "Sleep": true, "After": true, "AfterFunc": true, "NewTimer": true,
		"NewTicker": true, "Tick": true, "Since": true, "Until": true},
	"context": {"WithTimeout": true, "WithDeadline": true, "WithTimeoutCause": true, "WithDeadlineCause": true},
}

// wallClockAllowed are the places that may read the wall clock: the
// clock's own implementation, the named helper for OS-level waits, and the
// command's wiring (which starts the real clock and prints real times).
func wallClockAllowed(pkgPath, file string) bool {
	switch {
	case pkgPath == "gatehouse/internal/clock":
		return true
	case pkgPath == "gatehouse/internal/oswait":
		return true
	case strings.HasPrefix(pkgPath, "gatehouse/cmd/"):
		return true
	case pkgPath == "gatehouse/internal/pgtest":
		return true // test infrastructure waiting on a server process it started
	}
	return false
}

// TestWallClockOnlyWhereNamed lists every use of the wall clock in the
// module's non-test code and fails on each one outside the clock
// implementation, package oswait and cmd wiring: domain time must come
// from clock.Clock so that a fake clock controls all of it.
func TestWallClockOnlyWhereNamed(t *testing.T) {
	m := loadModule(t)
	var allowed []string
	for _, p := range m.pkgs {
		for _, f := range p.files {
			ast.Inspect(f, func(n ast.Node) bool {
				id, ok := n.(*ast.Ident)
				if !ok {
					return true
				}
				fn, ok := p.info.Uses[id].(*types.Func)
				if !ok || fn.Pkg() == nil || !wallClockFuncs[fn.Pkg().Path()][fn.Name()] {
					return true
				}
				if sig, _ := fn.Type().(*types.Signature); sig != nil && sig.Recv() != nil {
					return true // a method (a Timer's Stop, say), not the package function
				}
				site := m.rel(id.Pos())
				_, name := enclosingFunc(f, id.Pos())
				if name == "" {
					name = "(package level)"
				}
				use := site + " " + fn.Pkg().Name() + "." + fn.Name() + " in " + p.path + "." + name
				if wallClockAllowed(p.path, site[:strings.LastIndex(site, ":")]) {
					allowed = append(allowed, use)
					return true
				}
				t.Errorf("%s reads the wall clock; take domain time from clock.Clock, or wait through internal/oswait when the OS must be waited on in real time", use)
				return true
			})
		}
	}
	sort.Strings(allowed)
	for _, u := range allowed {
		t.Logf("allowed: %s", u)
	}
}

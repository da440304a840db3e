package sourcerules

import (
	"bufio"
	"go/ast"
	"go/constant"
	"go/types"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"gatehouse/destination"
	smtpdest "gatehouse/destination/smtp"
)

// inventoryKinds are the kinds docs/inputs.md classifies an input as.
var inventoryKinds = map[string]bool{"approval": true, "ledger": true, "process": true, "request": true}

// inventory is docs/inputs.md read as its tables: each section's inputs
// (the backticked names in a row's first cell) with the row's kind.
type inventory map[string]map[string]string

var backticked = regexp.MustCompile("`([^`]+)`")

func readInventory(t *testing.T, root string) inventory {
	t.Helper()
	path := filepath.Join(root, "docs", "inputs.md")
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("the inventory of inputs: %v", err)
	}
	defer f.Close()
	inv := inventory{}
	section := ""
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if h, ok := strings.CutPrefix(line, "## "); ok {
			section = h
			inv[section] = map[string]string{}
			continue
		}
		if section == "" || !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) < 4 {
			t.Errorf("%s:%d: a row has %d cells; want input, kind, read by, why", path, n, len(cells))
			continue
		}
		kind := strings.TrimSpace(cells[1])
		if !inventoryKinds[kind] {
			t.Errorf("%s:%d: kind %q: want approval, ledger, process or request", path, n, kind)
		}
		for _, m := range backticked.FindAllStringSubmatch(cells[0], -1) {
			inv[section][m[1]] = kind
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return inv
}

// envReaders are the functions that read the environment by name.
var envReaders = map[string]map[string]bool{
	"os":      {"Getenv": true, "LookupEnv": true, "Environ": true, "ExpandEnv": true},
	"syscall": {"Getenv": true, "Environ": true},
}

// dynamicEnvReads are the places that read a variable whose name is not in
// the code, each with the inventory row that covers it.
var dynamicEnvReads = map[string]string{
	"gatehouse/scenarios.Run.workflowEnv": "inherit_env:",
}

// TestEveryEnvironmentReadIsInTheInventory lists every variable the module's
// code reads from the environment and fails on one that docs/inputs.md does
// not classify, and on a row naming a variable nothing reads: what the
// executing process supplies may only make the gate more careful, and a
// reviewer can only check that for inputs someone listed.
func TestEveryEnvironmentReadIsInTheInventory(t *testing.T) {
	m := loadModule(t)
	inv := readInventory(t, m.root)["Environment"]
	if len(inv) == 0 {
		t.Fatal("docs/inputs.md has no Environment table")
	}
	read := map[string]bool{}
	for _, p := range m.pkgs {
		for _, f := range p.files {
			ast.Inspect(f, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				fn := calledFunc(p.info, call)
				if fn == nil || fn.Pkg() == nil || !envReaders[fn.Pkg().Path()][fn.Name()] {
					return true
				}
				site := m.rel(call.Pos())
				_, name := enclosingFunc(f, call.Pos())
				names := envNames(p.info, f, call)
				if names == nil {
					row, ok := dynamicEnvReads[p.path+"."+name]
					if !ok {
						t.Errorf("%s: %s.%s in %s reads a variable whose name is not a constant; name it, or add the function to dynamicEnvReads with the inventory row that covers it", site, fn.Pkg().Name(), fn.Name(), name)
						return true
					}
					names = []string{row}
				}
				for _, v := range names {
					read[v] = true
					if _, ok := inv[v]; !ok {
						t.Errorf("%s: %s reads $%s, which docs/inputs.md does not list: add its row (approval, ledger, process or request) saying why it cannot weaken a rule", site, name, strings.TrimPrefix(v, "$"))
					}
				}
				return true
			})
		}
	}
	for v := range inv {
		if !read[v] && !strings.Contains(v, "PG") {
			t.Errorf("docs/inputs.md lists %s, which no code reads any more: remove its row", v)
		}
	}
}

// calledFunc is the package-level function a call names, if any.
func calledFunc(info *types.Info, call *ast.CallExpr) *types.Func {
	var id *ast.Ident
	switch fun := call.Fun.(type) {
	case *ast.Ident:
		id = fun
	case *ast.SelectorExpr:
		id = fun.Sel
	default:
		return nil
	}
	fn, ok := info.Uses[id].(*types.Func)
	if !ok {
		return nil
	}
	if sig, _ := fn.Type().(*types.Signature); sig != nil && sig.Recv() != nil {
		return nil
	}
	return fn
}

// envNames are the variables a call reads, as inventory names ("$NAME"):
// its argument's constant value, or each constant of the literal a range
// variable argument ranges over. nil when the names are not in the code.
func envNames(info *types.Info, f *ast.File, call *ast.CallExpr) []string {
	if len(call.Args) != 1 {
		return nil // os.Environ: every variable
	}
	arg := call.Args[0]
	if v := info.Types[arg].Value; v != nil && v.Kind() == constant.String {
		return []string{"$" + constant.StringVal(v)}
	}
	id, ok := arg.(*ast.Ident)
	if !ok {
		return nil
	}
	obj := info.Uses[id]
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		rs, ok := n.(*ast.RangeStmt)
		if !ok || rs.Value == nil {
			return true
		}
		vid, ok := rs.Value.(*ast.Ident)
		if !ok || info.Defs[vid] != obj {
			return true
		}
		lit, ok := rs.X.(*ast.CompositeLit)
		if !ok {
			return false
		}
		for _, e := range lit.Elts {
			v := info.Types[e].Value
			if v == nil || v.Kind() != constant.String {
				out = nil
				return false
			}
			out = append(out, "$"+constant.StringVal(v))
		}
		return false
	})
	return out
}

// TestEveryURLParameterIsInTheInventory fails on a destination URL
// parameter docs/inputs.md does not classify, and on a row naming one no
// destination accepts.
func TestEveryURLParameterIsInTheInventory(t *testing.T) {
	m := loadModule(t)
	inv := readInventory(t, m.root)["Destination URL parameters"]
	if len(inv) == 0 {
		t.Fatal("docs/inputs.md has no Destination URL parameters table")
	}
	accepted := map[string]bool{"?search_path": true} // a PostgreSQL ledger location's schema
	for _, p := range append(append([]string(nil), smtpdest.Params...), destination.ProfileParams...) {
		accepted["?"+p] = true
	}
	var names []string
	for p := range accepted {
		names = append(names, p)
	}
	sort.Strings(names)
	for _, p := range names {
		if _, ok := inv[p]; !ok {
			t.Errorf("destination URLs accept %s, which docs/inputs.md does not list: add its row saying whether it is bound at approval", p)
		}
	}
	for p := range inv {
		if !accepted[p] {
			t.Errorf("docs/inputs.md lists %s, which no destination accepts any more: remove its row", p)
		}
	}
}

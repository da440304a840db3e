package sourcerules

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// pkg is one type-checked package of the module, without its test files.
type pkg struct {
	path  string
	files []*ast.File
	info  *types.Info
}

// module is every package of the module, loaded once per test binary.
type module struct {
	root string
	fset *token.FileSet
	pkgs []*pkg
}

var (
	loadOnce sync.Once
	loaded   *module
	loadErr  error
)

// loadModule type-checks the module's non-test files against the export
// data `go list -export` produces, which is what go/packages does without
// needing golang.org/x/tools.
func loadModule(t *testing.T) *module {
	t.Helper()
	loadOnce.Do(func() { loaded, loadErr = load() })
	if loadErr != nil {
		t.Fatal(loadErr)
	}
	return loaded
}

type listed struct {
	ImportPath string
	Dir        string
	Export     string
	GoFiles    []string
	CgoFiles   []string
	Standard   bool
	Module     *struct{ Path, Dir string }
}

func load() (*module, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return nil, fmt.Errorf("go env GOMOD: %w", err)
	}
	root := filepath.Dir(strings.TrimSpace(string(out)))
	cmd := exec.Command("go", "list", "-export", "-deps", "-json=ImportPath,Dir,Export,GoFiles,CgoFiles,Standard,Module", "./...")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	raw, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list -export: %w: %s", err, stderr.String())
	}
	exports := map[string]string{}
	var own []listed
	dec := json.NewDecoder(bytes.NewReader(raw))
	for {
		var p listed
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("decode go list output: %w", err)
		}
		exports[p.ImportPath] = p.Export
		if p.Module != nil && p.Module.Dir == root {
			own = append(own, p)
		}
	}
	m := &module{root: root, fset: token.NewFileSet()}
	imp := importer.ForCompiler(m.fset, "gc", func(path string) (io.ReadCloser, error) {
		f, ok := exports[path]
		if !ok || f == "" {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(f)
	})
	for _, p := range own {
		tp, err := m.check(p, imp)
		if err != nil {
			return nil, err
		}
		m.pkgs = append(m.pkgs, tp)
	}
	return m, nil
}

func (m *module) check(p listed, imp types.Importer) (*pkg, error) {
	out := &pkg{path: p.ImportPath, info: &types.Info{
		Types: map[ast.Expr]types.TypeAndValue{}, Uses: map[*ast.Ident]types.Object{},
		Selections: map[*ast.SelectorExpr]*types.Selection{}, Defs: map[*ast.Ident]types.Object{},
	}}
	for _, name := range append(append([]string(nil), p.GoFiles...), p.CgoFiles...) {
		f, err := parser.ParseFile(m.fset, filepath.Join(p.Dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, fmt.Errorf("parse %s: %w", name, err)
		}
		out.files = append(out.files, f)
	}
	conf := types.Config{Importer: imp, FakeImportC: true, Error: func(error) {}}
	if _, err := conf.Check(p.ImportPath, m.fset, out.files, out.info); err != nil && len(p.CgoFiles) == 0 {
		return nil, fmt.Errorf("type-check %s: %w", p.ImportPath, err)
	}
	return out, nil
}

// rel is a position as a path relative to the module root.
func (m *module) rel(pos token.Pos) string {
	p := m.fset.Position(pos)
	if r, err := filepath.Rel(m.root, p.Filename); err == nil {
		p.Filename = filepath.ToSlash(r)
	}
	return fmt.Sprintf("%s:%d", p.Filename, p.Line)
}

// enclosingFunc names the function declaration around pos in f:
// "Recv.Name" for a method, "Name" for a function, "" at package level.
func enclosingFunc(f *ast.File, pos token.Pos) (*ast.FuncDecl, string) {
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || pos < fd.Pos() || pos > fd.End() {
			continue
		}
		if fd.Recv == nil || len(fd.Recv.List) == 0 {
			return fd, fd.Name.Name
		}
		return fd, recvName(fd.Recv.List[0].Type) + "." + fd.Name.Name
	}
	return nil, ""
}

func recvName(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.StarExpr:
		return recvName(e.X)
	case *ast.IndexExpr:
		return recvName(e.X)
	case *ast.Ident:
		return e.Name
	}
	return "?"
}

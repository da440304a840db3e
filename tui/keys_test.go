package tui

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"charm.land/bubbles/v2/key"
)

// TestNoKeyStringsOutsideTheKeymap: keys.go is the one keymap. Elsewhere in
// the package's code no key message is compared with a string (use
// key.Matches and a binding of Keys), no string literal is a key's name
// ("enter", "ctrl+c"; one-character names such as "?" are also prose and
// are caught by the comparison rule), and no binding is made or
// relabelled (add one to the keymap).
func TestNoKeyStringsOutsideTheKeymap(t *testing.T) {
	names := map[string]bool{}
	km := reflect.ValueOf(DefaultKeyMap())
	for i := range km.NumField() {
		b := km.Field(i).Interface().(key.Binding)
		for _, k := range append(b.Keys(), b.Help().Key) {
			names[k] = true
		}
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if name == "keys.go" || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.BasicLit:
				if n.Kind != token.STRING {
					return true
				}
				if s, err := strconv.Unquote(n.Value); err == nil && names[s] && len([]rune(s)) > 1 {
					t.Errorf("%s: the key %q is spelled outside keys.go; use a binding of Keys", fset.Position(n.Pos()), s)
				}
			case *ast.BinaryExpr:
				if (n.Op == token.EQL || n.Op == token.NEQ) && (isStringCall(n.X) || isStringCall(n.Y)) {
					t.Errorf("%s: a key message compared with a string; use key.Matches", fset.Position(n.Pos()))
				}
			case *ast.SwitchStmt:
				if isStringCall(n.Tag) {
					t.Errorf("%s: a switch on a key message's string; use key.Matches", fset.Position(n.Pos()))
				}
			case *ast.CallExpr:
				var fn string
				switch f := n.Fun.(type) {
				case *ast.Ident:
					fn = f.Name
				case *ast.SelectorExpr:
					fn = f.Sel.Name
				}
				switch fn {
				case "bind", "NewBinding", "WithKeys", "SetHelp", "SetKeys":
					t.Errorf("%s: %s outside keys.go; add the binding to the keymap", fset.Position(n.Pos()), fn)
				}
			}
			return true
		})
	}
}

// isStringCall reports whether e is a call x.String(), how a key message
// is turned into its key name.
func isStringCall(e ast.Expr) bool {
	c, ok := e.(*ast.CallExpr)
	if !ok || len(c.Args) != 0 {
		return false
	}
	sel, ok := c.Fun.(*ast.SelectorExpr)
	return ok && sel.Sel.Name == "String"
}

// TestHelpTextsFollowTheKeymap: a sentence that names a key names the one
// the keymap binds, so rebinding a key changes what the screens say.
func TestHelpTextsFollowTheKeymap(t *testing.T) {
	saved := Keys
	t.Cleanup(func() { Keys = saved })
	Keys.Confirm = key.NewBinding(key.WithKeys("y"), key.WithHelp("y", "confirm"))
	f := &form{title: "Hold", input: newInput("> ", "")}
	if v := f.view(NewTheme(true), 60); !strings.Contains(v, "y confirms") {
		t.Errorf("the form does not follow the keymap:\n%s", v)
	}
	Keys.Rehearse = key.NewBinding(key.WithKeys("o"), key.WithHelp("o", "rehearse"))
	a := newDriven(newTestHome(t), 80, 24)
	if s := screenText(a); !strings.Contains(s, "o rehearses one, d shows the takeover demo") {
		t.Errorf("the home screen does not follow the keymap:\n%s", s)
	}
}

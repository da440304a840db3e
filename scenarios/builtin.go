package scenarios

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"
)

//go:embed builtin/*.yaml
var builtinFS embed.FS

// Builtin returns every built-in scenario, parsed and validated, sorted by
// name. A built-in that does not validate is a programming error reported
// here rather than at run time.
func Builtin() ([]*Scenario, error) {
	files, err := fs.Glob(builtinFS, "builtin/*.yaml")
	if err != nil {
		return nil, err
	}
	var out []*Scenario
	for _, f := range files {
		sc, err := loadBuiltin(f)
		if err != nil {
			return nil, err
		}
		out = append(out, sc)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func loadBuiltin(file string) (*Scenario, error) {
	src, err := builtinFS.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("built-in scenario %s: %w", file, err)
	}
	sc, err := Parse(file, src)
	if err == nil && sc.RunsCommands() {
		// Built-ins are rehearsed by anyone who installs gatehouse, with no
		// file of theirs to read first: they must never start a program.
		return nil, fmt.Errorf("built-in scenario %s starts commands (%s); only a team's own files may", file, strings.Join(sc.Commands(), "; "))
	}
	return sc, err
}

// BuiltinSource returns the YAML text of a built-in scenario, so it can be
// read as an example.
func BuiltinSource(name string) ([]byte, error) {
	return builtinFS.ReadFile(path.Join("builtin", name+".yaml"))
}

// Lookup returns the built-in scenario with this name.
func Lookup(name string) (*Scenario, error) {
	all, err := Builtin()
	if err != nil {
		return nil, err
	}
	var names []string
	for _, sc := range all {
		if sc.Name == name {
			return sc, nil
		}
		names = append(names, sc.Name)
	}
	return nil, fmt.Errorf("no built-in scenario %q (%s)", name, suggest(name, names))
}

package scenarios

import (
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
)

// decoder turns a YAML AST into scenario values strictly: every key must be
// known and every value must have the expected shape, and each mistake is
// recorded with the position of the offending node rather than aborting, so
// an author sees all of them at once.
type decoder struct {
	file  string
	probs Problems
}

var (
	posType    = reflect.TypeOf(Pos{})
	keyPosType = reflect.TypeOf(map[string]Pos{})
)

// parseYAML parses src into its single document body, or reports a syntax
// problem at the position the parser names.
func parseYAML(file string, src []byte) (ast.Node, error) {
	f, err := parser.ParseBytes(src, 0)
	if err != nil {
		return nil, Problems{syntaxProblem(file, err)}
	}
	if len(f.Docs) == 0 || f.Docs[0].Body == nil {
		return nil, Problems{{File: file, Pos: Pos{1, 1}, Msg: "the file is empty", Hint: "a scenario needs name, title, description, world, steps and expect"}}
	}
	if len(f.Docs) > 1 {
		return nil, Problems{{File: file, Pos: posOf(f.Docs[1]), Msg: "more than one YAML document", Hint: "put one scenario per file"}}
	}
	return f.Docs[0].Body, nil
}

func syntaxProblem(file string, err error) Problem {
	var ye yaml.Error
	if errors.As(err, &ye) && ye.GetToken() != nil {
		p := ye.GetToken().Position
		return Problem{File: file, Pos: Pos{p.Line, p.Column}, Msg: "YAML syntax: " + ye.GetMessage(),
			Hint: "check indentation, colons and quotes around this point"}
	}
	return Problem{File: file, Pos: Pos{1, 1}, Msg: "YAML syntax: " + err.Error()}
}

// docPos is where a document starts: its `---`, else its body. (A
// document's own GetToken reads its body, which an empty one lacks.)
func docPos(d *ast.DocumentNode) Pos {
	if d.Start != nil && d.Start.Position != nil {
		return Pos{d.Start.Position.Line, d.Start.Position.Column}
	}
	if d.Body != nil {
		return posOf(d.Body)
	}
	return Pos{1, 1}
}

func posOf(n ast.Node) Pos {
	if d, ok := n.(*ast.DocumentNode); ok {
		return docPos(d)
	}
	tk := n.GetToken()
	if tk == nil || tk.Position == nil {
		return Pos{1, 1}
	}
	return Pos{tk.Position.Line, tk.Position.Column}
}

func (d *decoder) fail(n ast.Node, hint, format string, a ...any) {
	d.probs = append(d.probs, Problem{File: d.file, Pos: posOf(n), Msg: fmt.Sprintf(format, a...), Hint: hint})
}

// unwrap looks through tags and anchors to the value itself.
func unwrap(n ast.Node) ast.Node {
	for {
		switch t := n.(type) {
		case *ast.TagNode:
			n = t.Value
		case *ast.AnchorNode:
			n = t.Value
		case *ast.DocumentNode:
			n = t.Body
		default:
			return n
		}
	}
}

// pairs returns the key/value pairs of a mapping (a single pair parses as a
// MappingValueNode on its own).
func pairs(n ast.Node) ([]*ast.MappingValueNode, bool) {
	switch t := n.(type) {
	case *ast.MappingNode:
		return t.Values, true
	case *ast.MappingValueNode:
		return []*ast.MappingValueNode{t}, true
	}
	return nil, false
}

func isNull(n ast.Node) bool {
	_, ok := n.(*ast.NullNode)
	return n == nil || ok
}

// scalarText is the text of a scalar, whatever YAML type it parsed as, so
// that `value: no` and `value: 3` are both text where text is wanted.
func scalarText(n ast.Node) (string, bool) {
	switch t := n.(type) {
	case *ast.StringNode:
		return t.Value, true
	case *ast.LiteralNode:
		return t.Value.Value, true
	case *ast.IntegerNode, *ast.FloatNode, *ast.BoolNode, *ast.InfinityNode, *ast.NanNode:
		return n.GetToken().Value, true
	}
	return "", false
}

// decode fills v from n, recording a problem for every mismatch.
func (d *decoder) decode(name string, n ast.Node, v reflect.Value) {
	n = unwrap(n)
	if _, ok := n.(*ast.AliasNode); ok {
		d.fail(n, "write the value out; aliases are not supported in scenarios", "%s: YAML aliases (*name) are not supported", name)
		return
	}
	if isNull(n) {
		return // absent value: keep the zero value; required fields are checked later
	}
	switch v.Kind() {
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		d.decode(name, n, v.Elem())
	case reflect.Struct:
		d.decodeStruct(name, n, v)
	case reflect.Slice:
		d.decodeSlice(name, n, v)
	case reflect.Map:
		d.decodeMap(name, n, v)
	case reflect.String:
		s, ok := scalarText(n)
		if !ok {
			d.fail(n, "write a single value, quoted if it contains ':' or '#'", "%s: want text, got %s", name, describe(n))
			return
		}
		v.SetString(s)
	case reflect.Int:
		d.decodeInt(name, n, v)
	default:
		panic("scenarios: no decoder for " + v.Type().String())
	}
}

func (d *decoder) decodeInt(name string, n ast.Node, v reflect.Value) {
	s, ok := scalarText(n)
	i, err := strconv.Atoi(s)
	if _, isInt := n.(*ast.IntegerNode); !ok || !isInt || err != nil {
		d.fail(n, "write a whole number such as 0, 1 or 2", "%s: want a whole number, got %s", name, describe(n))
		return
	}
	v.SetInt(int64(i))
}

func (d *decoder) decodeSlice(name string, n ast.Node, v reflect.Value) {
	seq, ok := n.(*ast.SequenceNode)
	if !ok {
		d.fail(n, "start each item on its own line with '- '", "%s: want a list, got %s", name, describe(n))
		return
	}
	out := reflect.MakeSlice(v.Type(), len(seq.Values), len(seq.Values))
	for i, item := range seq.Values {
		d.decode(fmt.Sprintf("%s[%d]", name, i+1), item, out.Index(i))
		if isNull(unwrap(item)) {
			setNullItemPos(seq, i, out.Index(i))
		}
	}
	v.Set(out)
}

// setNullItemPos places an empty list item ("-" and nothing after it) at its
// hyphen, so problems found in it later still have a line and column.
func setNullItemPos(seq *ast.SequenceNode, i int, v reflect.Value) {
	if v.Kind() != reflect.Struct || i >= len(seq.Entries) || seq.Entries[i].Start == nil {
		return
	}
	f := v.FieldByName("Pos")
	if !f.IsValid() || f.Type() != posType || seq.Entries[i].Start.Position == nil {
		return
	}
	p := seq.Entries[i].Start.Position
	f.Set(reflect.ValueOf(Pos{p.Line, p.Column}))
}

func (d *decoder) decodeMap(name string, n ast.Node, v reflect.Value) {
	ps, ok := pairs(n)
	if !ok {
		d.fail(n, "write one 'key: value' per line", "%s: want a mapping, got %s", name, describe(n))
		return
	}
	out := reflect.MakeMapWithSize(v.Type(), len(ps))
	for _, p := range ps {
		key, _ := scalarText(p.Key)
		val := reflect.New(v.Type().Elem()).Elem()
		d.decode(name+"."+key, p.Value, val)
		out.SetMapIndex(reflect.ValueOf(key), val)
	}
	v.Set(out)
}

func (d *decoder) decodeStruct(name string, n ast.Node, v reflect.Value) {
	ps, ok := pairs(n)
	if !ok {
		d.fail(n, "write one 'key: value' per line", "%s: want a mapping, got %s", name, describe(n))
		return
	}
	fields := yamlFields(v.Type())
	keyPos := map[string]Pos{}
	for _, p := range ps {
		key, _ := scalarText(p.Key)
		idx, ok := fields[key]
		if !ok {
			d.fail(p.Key, suggest(key, sortedKeys(fields)), "%s: unknown key %q", name, key)
			continue
		}
		keyPos[key] = posOf(unwrap(p.Value))
		if isNull(unwrap(p.Value)) {
			keyPos[key] = posOf(p.Key)
		}
		d.decode(joinName(name, key), p.Value, v.Field(idx))
	}
	for i := 0; i < v.NumField(); i++ {
		switch v.Type().Field(i).Type {
		case posType:
			v.Field(i).Set(reflect.ValueOf(posOf(n)))
		case keyPosType:
			v.Field(i).Set(reflect.ValueOf(keyPos))
		}
	}
}

func joinName(parent, key string) string {
	if parent == "" {
		return key
	}
	return parent + "." + key
}

// yamlFields maps yaml key names to struct field indexes.
func yamlFields(t reflect.Type) map[string]int {
	out := map[string]int{}
	for i := 0; i < t.NumField(); i++ {
		tag := t.Field(i).Tag.Get("yaml")
		if tag != "" && tag != "-" {
			out[tag] = i
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// describe names a node's shape in words an author recognises.
func describe(n ast.Node) string {
	switch t := n.(type) {
	case *ast.SequenceNode:
		return "a list"
	case *ast.MappingNode, *ast.MappingValueNode:
		return "a mapping"
	case *ast.StringNode:
		return strconv.Quote(t.Value)
	}
	if s, ok := scalarText(n); ok {
		return s
	}
	return strings.ToLower(n.Type().String())
}

// suggest proposes the closest known word, or lists them all.
func suggest(got string, known []string) string {
	best, bestD := "", 4
	for _, k := range known {
		if dist := editDistance(got, k); dist < bestD {
			best, bestD = k, dist
		}
	}
	if best != "" {
		return fmt.Sprintf("did you mean %q?", best)
	}
	return "known: " + strings.Join(known, ", ")
}

// editDistance is the Levenshtein distance, for "did you mean" hints.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

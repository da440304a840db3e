package sourcerules

import (
	"bufio"
	"bytes"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// layers is the package map of README.md and docs/design.md as a rule: each
// of the module's packages (or folders of packages, ending in "/...") may
// import only the module's packages named for it. Data flows one way —
// scenario → gate → destination — so the destination contract and its
// backends know nothing of the ledger, and nothing below the ledger knows
// the fakes. A package missing here fails the test: a new package takes its
// place in the map deliberately.
var layers = map[string][]string{
	"gatehouse/internal/clock":       nil,
	"gatehouse/internal/testids":     nil,
	"gatehouse/internal/mailheader":  nil,
	"gatehouse/internal/oswait":      nil,
	"gatehouse/internal/textenc":     nil,
	"gatehouse/internal/pgtest":      nil,
	"gatehouse/internal/sourcerules": nil,
	"gatehouse/internal/redact":      nil,
	"gatehouse/internal/wrap":        nil,
	// mailaddr is the one normaliser of address identity that the ledger,
	// the destinations and the test mailbox share.
	"gatehouse/internal/mailaddr": nil,
	// keyname names keys by the ledger's own parse of them.
	"gatehouse/internal/keyname": {"gatehouse/ledger"},

	"gatehouse/destination":            {"gatehouse/internal/mailaddr", "gatehouse/internal/mailheader", "gatehouse/internal/oswait"},
	"gatehouse/destination/mailrender": {"gatehouse/destination", "gatehouse/internal/mailheader"},
	"gatehouse/destination/smtp":       {"gatehouse/destination", "gatehouse/destination/mailrender", "gatehouse/internal/clock", "gatehouse/internal/oswait", "gatehouse/internal/redact"},
	"gatehouse/destination/file":       {"gatehouse/destination", "gatehouse/destination/mailrender", "gatehouse/internal/clock"},
	"gatehouse/destination/fake":       {"gatehouse/destination", "gatehouse/internal/clock"},
	"gatehouse/destination/httpdest":   {"gatehouse/destination", "gatehouse/internal/clock", "gatehouse/internal/oswait"},
	"gatehouse/destination/registry":   {"gatehouse/destination", "gatehouse/destination/smtp", "gatehouse/destination/file", "gatehouse/destination/fake", "gatehouse/destination/httpdest"},
	"gatehouse/fakes":                  {"gatehouse/internal/clock", "gatehouse/internal/oswait"},
	"gatehouse/testmailbox":            {"gatehouse/internal/clock", "gatehouse/internal/mailaddr", "gatehouse/internal/mailheader", "gatehouse/internal/oswait"},
	"gatehouse/ledger/audiencefile":    {"gatehouse/internal/mailaddr", "gatehouse/internal/textenc"},
	"gatehouse/ledger":                 {"gatehouse/destination", "gatehouse/internal/clock", "gatehouse/internal/mailaddr", "gatehouse/internal/oswait", "gatehouse/internal/redact", "gatehouse/ledger/audiencefile"},
	"gatehouse/ledger/crmfile":         {"gatehouse/internal/mailaddr", "gatehouse/ledger"},
	"gatehouse/ledger/answer":          {"gatehouse/ledger"},
	"gatehouse/review":                 {"gatehouse/ledger"},
	"gatehouse/review/reviewtest":      {"gatehouse/ledger"},
	"gatehouse/scenarios":              {"gatehouse/destination", "gatehouse/destination/httpdest", "gatehouse/destination/smtp", "gatehouse/fakes", "gatehouse/internal/...", "gatehouse/ledger", "gatehouse/testmailbox"},
	"gatehouse/tui":                    {"gatehouse/destination", "gatehouse/internal/...", "gatehouse/ledger", "gatehouse/ledger/answer", "gatehouse/review", "gatehouse/scenarios", "gatehouse/testmailbox"},
	"gatehouse/proof":                  {"gatehouse/..."},
	"gatehouse/cmd/gatehouse":          {"gatehouse/..."},
}

func allowed(list []string, imp string) bool {
	for _, a := range list {
		if a == imp || strings.HasSuffix(a, "/...") && strings.HasPrefix(imp, strings.TrimSuffix(a, "...")) {
			return true
		}
	}
	return false
}

// goList runs go list over the module and returns, per package, the words
// the template printed after its import path.
func goList(t *testing.T, args ...string) map[string][]string {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list"}, args...)...)
	cmd.Dir = moduleRoot(t)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %v: %v\n%s", args, err, stderr.String())
	}
	got := map[string][]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) > 0 {
			got[f[0]] = f[1:]
		}
	}
	return got
}

// TestPackageGraphFollowsTheMap fails on every import between the module's
// packages (non-test files) that the package map does not allow, and on a
// package the map does not place.
func TestPackageGraphFollowsTheMap(t *testing.T) {
	imports := goList(t, "-f", "{{.ImportPath}} {{join .Imports \" \"}}", "./...")
	var unplaced []string
	for pkg, imps := range imports {
		list, ok := layers[pkg]
		if !ok {
			unplaced = append(unplaced, pkg)
			continue
		}
		for _, imp := range imps {
			if strings.HasPrefix(imp, "gatehouse/") && !allowed(list, imp) {
				t.Errorf("%s imports %s, which the package map does not allow (internal/sourcerules/graph_test.go, README.md)", pkg, imp)
			}
		}
	}
	sort.Strings(unplaced)
	for _, p := range unplaced {
		t.Errorf("package %s has no place in the package map (internal/sourcerules/graph_test.go): add it, with what it may import", p)
	}
}

// TestLeavesLinkNoStorageEngine: the destination contract and its backends,
// the fakes and the test mailbox build without the ledger, and so without
// its storage engines. The test mailbox keeps its own SQLite store
// (testmailbox/store.go), so go-sqlite3 is allowed there and only there.
func TestLeavesLinkNoStorageEngine(t *testing.T) {
	deps := goList(t, "-f", "{{.ImportPath}} {{join .Deps \" \"}}", "./destination/...", "./fakes", "./testmailbox", "./internal/clock")
	for pkg, ds := range deps {
		for _, d := range ds {
			switch {
			case d == "gatehouse/ledger" || strings.HasPrefix(d, "gatehouse/ledger/"):
				t.Errorf("%s links %s", pkg, d)
			case strings.HasPrefix(d, "github.com/jackc/pgx"):
				t.Errorf("%s links PostgreSQL's driver %s", pkg, d)
			case d == "github.com/mattn/go-sqlite3" && pkg != "gatehouse/testmailbox":
				t.Errorf("%s links SQLite's driver", pkg)
			}
		}
	}
	if len(deps) < 8 {
		t.Fatalf("go list named %d packages, want the destination packages, fakes, testmailbox and the clock", len(deps))
	}
}

// moduleRoot is the directory of the module's go.mod.
func moduleRoot(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	return filepath.Dir(strings.TrimSpace(string(out)))
}

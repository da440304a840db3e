package main

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRehearseCommand(t *testing.T) {
	bad := filepath.Join("..", "..", "scenarios", "testdata", "wrong-expectation.yaml")
	malformed := filepath.Join("..", "..", "scenarios", "testdata", "unknown-verb.yaml")
	runs := filepath.Join("..", "..", "examples", "ack-takeover.yaml")
	for _, tc := range []struct {
		name     string
		args     []string
		code     int
		contains string
	}{
		{"BuiltinPasses", []string{"rehearse", "webhook-twice"}, 0, "1 of 1 scenarios passed"},
		{"WrongExpectationFails", []string{"rehearse", bad}, 1, "FAIL  arrivals.total: expected 2, got 1"},
		{"MalformedFileIsUsageError", []string{"rehearse", malformed}, 2, `unknown verb "sned"`},
		{"NoScenario", []string{"rehearse"}, 2, "--all"},
		{"UnknownBuiltin", []string{"rehearse", "no-such"}, 2, "no built-in scenario"},
		{"List", []string{"scenarios", "list"}, 0, "overlapping-reply"},
		{"ValidateBad", []string{"scenarios", "validate", malformed}, 2, "unknown-verb.yaml:8:9"},
		{"ValidateGood", []string{"scenarios", "validate", bad}, 0, ": ok"},
		{"ValidateSaysItRunsCommands", []string{"scenarios", "validate", runs}, 0,
			"ack-takeover.yaml: runs 1 command(s) on this machine when rehearsed (each in the folder of the file unless it names dir:):\n  $ ./ack.sh t-4201 cust-ada enquiry-4201 ada@example.com\n"},
		{"ShowFileSaysItRunsCommands", []string{"scenarios", "show", runs}, 0, "runs 1 command(s) on this machine"},
		{"ShowFilePrintsIt", []string{"scenarios", "show", runs}, 0, "name: ack-takeover\n"},
		{"ShowInvalidFile", []string{"scenarios", "show", malformed}, 0, "unknown-verb.yaml: not a valid scenario; run: gatehouse scenarios validate"},
		{"ShowMissingFile", []string{"scenarios", "show", "no-such.yaml"}, 2, "no-such.yaml: no such file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := run(tc.args, &out, &errOut)
			if code != tc.code {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tc.code, out.String(), errOut.String())
			}
			if all := out.String() + errOut.String(); !strings.Contains(all, tc.contains) {
				t.Fatalf("output lacks %q:\n%s", tc.contains, all)
			}
		})
	}
}

func TestRehearseAllJSONAndJUnit(t *testing.T) {
	junit := filepath.Join(t.TempDir(), "junit.xml")
	var out, errOut bytes.Buffer
	if code := run([]string{"rehearse", "--all", "--json", "--junit", junit}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out.String(), errOut.String())
	}
	var doc struct {
		Passed    bool              `json:"passed"`
		Scenarios []json.RawMessage `json:"scenarios"`
	}
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil || !doc.Passed || len(doc.Scenarios) < 12 {
		t.Fatalf("json: %v passed=%v scenarios=%d", err, doc.Passed, len(doc.Scenarios))
	}
	raw, err := os.ReadFile(junit)
	if err != nil {
		t.Fatal(err)
	}
	var ju struct {
		Failures int `xml:"failures,attr"`
		Suites   []struct {
			Name string `xml:"name,attr"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal(raw, &ju); err != nil || ju.Failures != 0 || len(ju.Suites) != len(doc.Scenarios) {
		t.Fatalf("junit: %v %+v", err, ju)
	}
}

// TestRehearseOwnWorkflow: `gatehouse rehearse FILE` runs a team's workflow
// against the rehearsal and exits as the expectations say: 0 for the
// example that handles a webhook twice, 1 for the careless variant, whose
// second arrival is named.
func TestRehearseOwnWorkflow(t *testing.T) {
	bin := gatehouseBinary(t)
	t.Setenv("PATH", filepath.Dir(bin)+string(os.PathListSeparator)+os.Getenv("PATH"))
	for _, tc := range []struct {
		Name     string
		File     string
		Code     int
		Contains string
	}{
		{"WebhookTwice", "ack-webhook-twice.yaml", 0, "expect_exits: 0, 10"},
		{"Careless", "careless-accept-then-drop.yaml", 1, "FAIL  arrivals.total: expected 1, got 2"},
	} {
		t.Run(tc.Name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := run([]string{"rehearse", filepath.Join("..", "..", "examples", tc.File)}, &out, &errOut)
			if code != tc.Code || !strings.Contains(out.String(), tc.Contains) {
				t.Fatalf("exit %d, want %d with %q\nstdout: %s\nstderr: %s", code, tc.Code, tc.Contains, out.String(), errOut.String())
			}
		})
	}
}

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"gatehouse/review"
)

func reviewCmd(args ...string) result {
	var out, errOut bytes.Buffer
	code := run(append([]string{"review"}, args...), &out, &errOut)
	return result{code: code, stdout: out.String(), stderr: errOut.String()}
}

// rehearsedStop keeps the ledger of the built-in scenario that ends with a
// stop, the path the README demonstrates.
func rehearsedStop(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "keep.db")
	var out, errOut bytes.Buffer
	if code := run([]string{"rehearse", "stop-for-review", "--ledger", path}, &out, &errOut); code != 0 {
		t.Fatalf("rehearse: exit %d\n%s%s", code, out.String(), errOut.String())
	}
	return path
}

// TestReviewOfARehearsedStop: rehearse stop-for-review --ledger keep.db, then
// review --ledger keep.db --format json|md: one action in each of the four
// buckets, the queued send tried after the stop, the stop not resumed.
func TestReviewOfARehearsedStop(t *testing.T) {
	path := rehearsedStop(t)
	r := reviewCmd("--ledger", path, "--format", "json")
	wantExit(t, r, exitOK)
	var rep review.Report
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("json: %v\n%s", err, r.stdout)
	}
	want := map[string]int{"committed": 1, "in_flight": 1, "approved_not_started": 1, "only_proposed": 1}
	for _, c := range rep.Counts {
		if c.N != want[c.Bucket] {
			t.Errorf("bucket %s: %d, want %d", c.Bucket, c.N, want[c.Bucket])
		}
	}
	if rep.Stop == nil || rep.Stop.Actor != "lead" || rep.Stop.Resumed != nil {
		t.Fatalf("stop: %+v", rep.Stop)
	}
	notStarted := rep.Buckets[2].Actions[0]
	if notStarted.Now != "held:stopped" || notStarted.SendsTried != 1 || strings.Join(notStarted.After, ",") != "refused_stopped" {
		t.Errorf("approved, not started: %+v", notStarted)
	}
	if len(rep.Unknown) != 1 || !strings.Contains(rep.Unknown[0].Evidence, "lease ran out") {
		t.Errorf("unknown outcomes: %+v", rep.Unknown)
	}

	out := filepath.Join(t.TempDir(), "review.md")
	wantExit(t, reviewCmd("--ledger", path, "--format", "md", "-o", out), exitOK)
	md, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"| committed (sent) | 1 |", "| in flight (reconcile) | 1 |", "| approved, not started | 1 |",
		"| only proposed | 1 |", "Not resumed: execution is still stopped."} {
		if !strings.Contains(string(md), line) {
			t.Errorf("report lacks %q", line)
		}
	}
}

// TestReviewErrors: every way the command line or the ledger can be wrong
// says so in one line with the exit code that names it.
func TestReviewErrors(t *testing.T) {
	path := rehearsedStop(t)
	missing := filepath.Join(t.TempDir(), "none.db")
	tests := []struct {
		Name   string
		Args   []string
		Code   int
		Stderr string
	}{
		{"NoLedger", []string{"--format", "md"}, exitUsage, "review needs --ledger PATH"},
		{"UnknownFormat", []string{"--ledger", path, "--format", "xml"}, exitUsage, `--format "xml": write md or json`},
		{"BadSince", []string{"--ledger", path, "--format", "md", "--since", "yesterday"}, exitUsage, `--since: "yesterday" is not a moment`},
		{"BadUntil", []string{"--ledger", path, "--format", "md", "--until", "03/02/2026"}, exitUsage, "--until:"},
		{"UntilBeforeSince", []string{"--ledger", path, "--format", "md", "--since", "2026-03-02", "--until", "2026-03-01"}, exitUsage, "--until must be after --since"},
		{"NegativeStop", []string{"--ledger", path, "--format", "md", "--stop", "-1"}, exitUsage, "stops are counted from 1"},
		{"ReportFlagWithoutFormat", []string{"--ledger", path, "--stop", "1"}, exitUsage, "add --format md or --format json"},
		{"NoSuchStop", []string{"--ledger", path, "--format", "md", "--stop", "2"}, exitOther, "no such stop: stop 2 (the history holds 1)"},
		{"OutputDirMissing", []string{"--ledger", path, "--format", "md", "-o", filepath.Join(missing, "x", "r.md")}, exitOther, "write report:"},
		{"MissingLedger", []string{"--ledger", missing, "--format", "md"}, exitOther, "no ledger at " + missing},
		{"MissingLedgerScreen", []string{"--ledger", missing}, exitOther, "no ledger at " + missing},
	}
	for _, tc := range tests {
		t.Run(tc.Name, func(t *testing.T) {
			r := reviewCmd(tc.Args...)
			wantExit(t, r, tc.Code, tc.Stderr)
			if n := strings.Count(strings.TrimSpace(r.stderr), "\n"); n != 0 {
				t.Errorf("stderr is %d lines: %s", n+1, r.stderr)
			}
		})
	}
}

// TestReviewOlderSchemaNamesMigrate: a ledger from before histories carried
// states is refused read-only with the migrate command, and after the
// migration its report marks what it inferred.
func TestReviewOlderSchemaNamesMigrate(t *testing.T) {
	e := newGateEnv(t)
	schemaV2(t, e.ledger)
	r := reviewCmd("--ledger", e.ledger, "--format", "md")
	wantExit(t, r, exitOther, "run: gatehouse ledger migrate --ledger "+e.ledger)
	wantExit(t, ledgerCmd("migrate", "--ledger", e.ledger), exitOK)
	wantExit(t, reviewCmd("--ledger", e.ledger, "--format", "md"), exitOK)
}

// TestReviewScreenOpenLeavesLedgerUnchanged: what the review screen opens,
// reads (history, facts, sentences, the report at a stop) and closes
// without operating mode leaves the ledger and its WAL as they were, also
// beside a live writer.
func TestReviewScreenOpenLeavesLedgerUnchanged(t *testing.T) {
	path := rehearsedStop(t)
	startHolder(t, path)
	dir, name := filepath.Dir(path), filepath.Base(path)
	before := dirFiles(t, dir)
	l, err := openInspected(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	h, err := review.Load(ctx, l)
	if err == nil {
		_, err = review.Build(ctx, l, h, review.Options{})
	}
	if err == nil {
		_, err = review.Text(ctx, l, []int64{1, 2, 3})
	}
	if !l.ReadOnly() {
		t.Error("the review opened the ledger for writing")
	}
	l.Close()
	if err != nil {
		t.Fatal(err)
	}
	sameLedgerAndWAL(t, before, dirFiles(t, dir), name, "review")
}

// TestReviewFlagTableMatchesTheBinary: docs/cli.md's review table names
// exactly the flags the command has.
func TestReviewFlagTableMatchesTheBinary(t *testing.T) {
	raw, err := os.ReadFile("../../docs/cli.md")
	if err != nil {
		t.Fatal(err)
	}
	documented := flagTable(t, string(raw), "## `gatehouse review`")
	var got []string
	for flag := range documented {
		got = append(got, strings.TrimSuffix(strings.SplitN(flag, "`", 2)[0], ","))
	}
	var want []string
	newReviewCmd().Flags().VisitAll(func(f *pflag.Flag) { want = append(want, "--"+f.Name) })
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("docs/cli.md lists %v, the binary has %v", got, want)
	}
}

// TestMetricsCountManualOverrides: a hold released by a person is a manual
// override in gate metrics, next to stale proposals and unmatched
// identities per release (here: none and none).
func TestMetricsCountManualOverrides(t *testing.T) {
	e := newGateEnv(t)
	key := e.approved("enq-ovr", "alice", "crm.consent=yes")
	e.must("hold", "--key", key, "--as", "ops", "--reason", "legal review")
	e.must("release-hold", "--key", key, "--as", "ops", "--reason", "cleared")
	r := e.gate("metrics", "--json")
	wantExit(t, r, exitOK)
	var m struct {
		ManualOverrides    int            `json:"manual_overrides"`
		StaleProposals     int            `json:"stale_proposals"`
		UnmatchedByRelease map[string]int `json:"unmatched_by_release"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &m); err != nil {
		t.Fatal(err)
	}
	if m.ManualOverrides != 1 || m.StaleProposals != 0 || len(m.UnmatchedByRelease) != 0 {
		t.Fatalf("metrics: %+v", m)
	}
	text := e.must("metrics").stdout
	if !regexp.MustCompile(`(?m)^manual overrides:\s+1$`).MatchString(text) || !regexp.MustCompile(`(?m)^unmatched identities:\s+-$`).MatchString(text) {
		t.Fatalf("metrics text:\n%s", text)
	}
}

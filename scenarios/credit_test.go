package scenarios

import (
	"slices"
	"strings"
	"testing"
)

// TestRowsCreditWhoDidWhat: a row names who proposed the action, whose act
// put it in its state and who owns the task now, each in its place, never
// the owner for what someone else or the gate did (issue 28's examples).
func TestRowsCreditWhoDidWhat(t *testing.T) {
	tests := []struct {
		scenario, row                string
		state, proposedBy, by, owner string
		text                         []string // lines of the row's text block, in order
	}{
		{"audience-messy-file", "c-eve", "cancelled", "", "removed by lead", "notice-bot",
			[]string{"state cancelled", "removed by lead", "never proposed", "task owner now notice-bot"}},
		{"audience-messy-file", "c-ben", "denied", "notice-bot", "denied by the gate at notice-bot's send", "notice-bot",
			[]string{"state denied", "denied by the gate at", "notice-bot's send", "proposed by notice-bot", "task owner now notice-bot"}},
		{"overlapping-reply", "ack", "cancelled", "wf-ack", "cancelled by the gate at wf-ack's send", "sam",
			[]string{"state cancelled", "cancelled by the gate at", "wf-ack's send", "proposed by wf-ack", "task owner now sam"}},
		{"overlapping-reply", "answer", "sent", "sam", "sent by sam", "sam",
			[]string{"state sent", "sent by sam", "task owner now sam"}},
	}
	reps := map[string]Report{}
	for _, tc := range tests {
		t.Run(tc.scenario+"/"+tc.row, func(t *testing.T) {
			rep, ok := reps[tc.scenario]
			if !ok {
				sc, err := Lookup(tc.scenario)
				if err != nil {
					t.Fatal(err)
				}
				rep = mustRun(t, sc, Options{})
				reps[tc.scenario] = rep
			}
			var row *Row
			for i := range rep.Rows {
				if rep.Rows[i].Name == tc.row {
					row = &rep.Rows[i]
				}
			}
			if row == nil {
				t.Fatalf("no row %s in %+v", tc.row, rep.Rows)
			}
			if row.State != tc.state || row.ProposedBy != tc.proposedBy || row.By != tc.by || row.Owner != tc.owner {
				t.Errorf("row %s: state %q, proposed by %q, %q, owner %q; want %q, %q, %q, %q", tc.row,
					row.State, row.ProposedBy, row.By, row.Owner, tc.state, tc.proposedBy, tc.by, tc.owner)
			}
			var b strings.Builder
			writeColumns(&b, []Row{*row}, SideBySide)
			var left []string
			for _, l := range strings.Split(b.String(), "\n") {
				if c, _, ok := strings.Cut(l, "│"); ok {
					if c = strings.TrimSpace(c); c != "" && c != "INTENDED ACTIONS" {
						left = append(left, c)
					}
				}
			}
			if strings.Join(left, "|") != strings.Join(tc.text, "|") {
				t.Errorf("text block says %q, want %q", left, tc.text)
			}
		})
	}
}

// TestStepSentenceSpeaksTheGatesWords: where the gate reads consent as a
// class (an audience release), a step that sets it names the class its
// denial will use; where it compares the word as written, the sentence
// adds nothing.
func TestStepSentenceSpeaksTheGatesWords(t *testing.T) {
	tests := []struct {
		scenario, label, denial string
	}{
		{"audience-messy-file", "set c-ben consent = withdrawn (the gate reads unsubscribed)", `"yes" → "unsubscribed"`},
		{"changed-material-state", "set cust-ada consent = no", `"yes" → "no"`},
	}
	for _, tc := range tests {
		t.Run(tc.scenario, func(t *testing.T) {
			sc, err := Lookup(tc.scenario)
			if err != nil {
				t.Fatal(err)
			}
			rep := mustRun(t, sc, Options{})
			var labels []string
			for _, s := range rep.Steps {
				labels = append(labels, s.Label)
			}
			if !slices.Contains(labels, tc.label) {
				t.Errorf("steps %q lack %q", labels, tc.label)
			}
			denied := false
			for _, r := range rep.Rows {
				denied = denied || (r.State == "denied" && strings.Contains(r.Reason, tc.denial))
			}
			if !denied {
				t.Errorf("no denial says %s: %+v", tc.denial, rep.Rows)
			}
		})
	}
}

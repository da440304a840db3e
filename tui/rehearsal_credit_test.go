package tui

import (
	"slices"
	"strings"
	"testing"
)

// TestRehearsalCreditsWhoDidWhat: a rehearsal's row reads state, whose act
// it was, owner now, and the detail says the act in words, who proposed
// the action and who owns the task: a recipient lead removed is not
// credited to the release's owner, a proposal the gate cancelled at
// wf-ack's send is not credited to sam, who took the task over (issue 28).
func TestRehearsalCreditsWhoDidWhat(t *testing.T) {
	tests := []struct {
		scenario string
		steps    int
		rows     map[string][]string // the first row's cells, by action
		detail   []string            // in the first row's detail
	}{
		{"audience-messy-file", 6, map[string][]string{
			"c-eve": {"c-eve", "cancelled", "lead", "notice-bot"},
			"c-ben": {"c-ben", "denied", "gate", "notice-bot"},
			"c-ada": {"c-ada", "sent", "notice-bot", "notice-bot"},
		}, []string{"state      cancelled: removed by lead at 09:00:01", "(owner now notice-bot)", "proposed   by nobody"}},
		{"overlapping-reply", 8, map[string][]string{
			"ack":    {"ack", "cancelled", "gate", "sam"},
			"answer": {"answer", "sent", "sam", "sam"},
		}, []string{"state      cancelled by the gate at wf-ack's send at 09:00:04", "(owner now sam)", "proposed   by wf-ack at 09:00:00"}},
	}
	for _, tc := range tests {
		t.Run(tc.scenario, func(t *testing.T) {
			a := newDriven(newTestRehearsal(t, tc.scenario), 200, 60)
			for range tc.steps {
				typeKeys(a, "n")
			}
			s := screenText(a)
			for name, want := range tc.rows {
				var got []string
				for _, l := range strings.Split(s, "\n") {
					if f := strings.Fields(l); len(f) >= len(want) && f[0] == name {
						got = f[:len(want)]
						break
					}
				}
				if !slices.Equal(got, want) {
					t.Errorf("row %s reads %q, want %q:\n%s", name, got, want, s)
				}
			}
			typeKeys(a, "enter")
			s = screenText(a)
			for _, want := range tc.detail {
				if !strings.Contains(s, want) {
					t.Errorf("detail lacks %q:\n%s", want, s)
				}
			}
		})
	}
}

// TestNextStepSpeaksTheGatesWords: the preview of a consent change in an
// audience rehearsal names the class the gate's denial will use.
func TestNextStepSpeaksTheGatesWords(t *testing.T) {
	a := newDriven(newTestRehearsal(t, "audience-messy-file"), 200, 60)
	typeKeys(a, "n", "n", "n")
	if s := screenText(a); !strings.Contains(s, `c-ben: consent becomes "withdrawn", which the gate reads as unsubscribed`) {
		t.Errorf("the preview does not say how the gate reads the value:\n%s", s)
	}
}

package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/charmbracelet/x/ansi"
)

// TestRehearseReportFitsTheWidth: the text report is as wide as --width,
// else $COLUMNS, else 80 (a test's stdout is no terminal): side by side
// from 110 columns, each action stacked below that, and no line wider.
func TestRehearseReportFitsTheWidth(t *testing.T) {
	tests := []struct {
		name    string
		columns string
		args    []string
		width   int
		side    bool
	}{
		{"COLUMNS80", "80", nil, 80, false},
		{"NoColumnsIs80", "", nil, 80, false},
		{"COLUMNS160", "160", nil, 160, true},
		{"WidthFlagWins", "160", []string{"--width", "100"}, 100, false},
		{"WidthFlagSideBySide", "", []string{"--width", "110"}, 110, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("COLUMNS", tc.columns)
			for _, sc := range []string{"interrupted-before-accept", "audience-messy-file", "deliberate-correction"} {
				var out, errOut bytes.Buffer
				if code := run(append([]string{"rehearse", sc}, tc.args...), &out, &errOut); code != 0 {
					t.Fatalf("%s: exit %d: %s", sc, code, errOut.String())
				}
				text := out.String()
				for i, l := range strings.Split(text, "\n") {
					if w := ansi.StringWidth(l); w > tc.width {
						t.Errorf("%s: line %d is %d columns, more than %d: %q", sc, i+1, w, tc.width, l)
					}
				}
				if side := strings.Contains(text, "│ ATTEMPTS"); side != tc.side {
					t.Errorf("%s: side by side = %v at %d columns:\n%s", sc, side, tc.width, text)
				}
				if !tc.side && !strings.Contains(text, "  intended  state ") {
					t.Errorf("%s: no stacked blocks:\n%s", sc, text)
				}
			}
		})
	}
}

package wrap

import (
	"strings"
	"testing"
)

func TestWords(t *testing.T) {
	tests := []struct {
		name  string
		text  string
		width int
		want  []string
	}{
		{"KeysStayWhole", "held because T-4711 and gh1:cust-42 wait", 14, []string{"held because", "T-4711 and", "gh1:cust-42", "wait"}},
		{"SpacesCountOnce", "a  b\n\tc", 10, []string{"a b c"}},
		{"LongWordCutHard", "abcdefghij", 4, []string{"abcd", "efgh", "ij"}},
		{"Empty", "", 10, []string{""}},
		{"WideCharacters", "日本語 日本語", 6, []string{"日本語", "日本語"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Words(tt.text, tt.width); strings.Join(got, "|") != strings.Join(tt.want, "|") {
				t.Fatalf("Words(%q, %d) = %q, want %q", tt.text, tt.width, got, tt.want)
			}
		})
	}
}

func TestHangingIndentsUnderTheText(t *testing.T) {
	got := Hanging("  PASS  ", "arrivals.total: expected 1, got 2 (examples/careless.yaml:35:12)", 40)
	want := []string{"  PASS  arrivals.total: expected 1, got", "        2 (examples/careless.yaml:35:12)"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("Hanging = %q, want %q", got, want)
	}
}

package smtp

import (
	"strings"
	"testing"
)

// TestParamsAreWhatTheURLAccepts keeps Params, which docs/inputs.md is
// checked against, the same list as the parser's: each is known to it,
// and a name outside it is refused as unknown.
func TestParamsAreWhatTheURLAccepts(t *testing.T) {
	for _, p := range append([]string{"nosuch"}, Params...) {
		_, err := New("smtp://127.0.0.1:25?" + p + "=x")
		unknown := err != nil && strings.Contains(err.Error(), "unknown parameter")
		if known := p != "nosuch"; known == unknown {
			t.Errorf("parameter %q: known to Params %v, refused as unknown %v (%v)", p, known, unknown, err)
		}
	}
}

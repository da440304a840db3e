// Package idmask hides the random parts of the Message-IDs the gate draws
// (ledger.NewTransportID), so that a screen or a report can be compared
// with a golden file, or with the same rehearsal on another store, while
// the rest of the text still counts to the character: each hidden
// character becomes one '#', and a Message-ID cut short by a column is
// hidden as far as it goes.
package idmask

import (
	"regexp"
	"strings"
)

// drawn matches a drawn Message-ID, whole or cut: "gh-", the random part
// (lower-case base32), and optionally the attempt and "@" with the
// ledger's name (hex).
var drawn = regexp.MustCompile(`gh-[a-z2-7]{4,20}(-a[0-9]+)?(@[0-9a-f]*)?`)

// Mask returns s with the random part and the ledger's name of every drawn
// Message-ID replaced by '#', character for character.
func Mask(s string) string {
	return drawn.ReplaceAllStringFunc(s, func(id string) string {
		random, rest, _ := strings.Cut(id[len("gh-"):], "-a")
		out := "gh-" + strings.Repeat("#", len(random))
		if rest == "" {
			return out
		}
		attempt, ledger, at := strings.Cut(rest, "@")
		out += "-a" + attempt
		if at {
			out += "@" + strings.Repeat("#", len(ledger))
		}
		return out
	})
}

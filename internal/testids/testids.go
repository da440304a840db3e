// Package testids is what tests need of the Message-IDs the gate draws at
// random (ledger.NewTransportID): Mask hides their random parts, so that a
// screen or a report can be compared with a golden file, or with the same
// rehearsal on another store, while the rest of the text still counts to
// the character; Fixed names a message before it is sent, the same every
// time.
package testids

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
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

// Fixed is a Message-ID that stays the same for one key and attempt, in the
// form the gate used before it drew them, for tests that name a message
// before sending it.
func Fixed(key string, attempt int) string {
	sum := sha256.Sum256([]byte(key))
	return fmt.Sprintf("gh-%s-a%d@gatehouse.invalid", hex.EncodeToString(sum[:10]), attempt)
}

package ledger

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// Digest is the content digest an approval binds to. It covers recipient,
// subject, body and target after normalising formatting: letter case of the
// address, surrounding space, line endings and runs of white space. So a
// re-wrapped paragraph keeps its approval, while any changed word, recipient
// or target does not.
func Digest(recipient, subject, body, target string) string {
	h := sha256.New()
	for _, part := range []string{
		strings.ToLower(strings.TrimSpace(recipient)),
		normalizeText(subject),
		normalizeText(body),
		strings.TrimSpace(target),
	} {
		h.Write([]byte(part))
		h.Write([]byte{0})
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

func normalizeText(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

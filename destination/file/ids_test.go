package file

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
)

// fixedTransportID is a Message-ID that stays the same for one key and
// attempt, for tests that name a message before sending it; the gate
// itself draws its ids at random (ledger.NewTransportID).
func fixedTransportID(key string, attempt int) string {
	sum := sha256.Sum256([]byte(key))
	return fmt.Sprintf("gh-%s-a%d@gatehouse.invalid", hex.EncodeToString(sum[:10]), attempt)
}

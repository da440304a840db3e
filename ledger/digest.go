package ledger

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"gatehouse/destination"
	"gatehouse/internal/mailaddr"
)

// Digest is the content digest approvals recorded before destinations were
// bound (schema version 3 and earlier). It covers recipient, subject, body
// and target after normalising formatting: letter case of the address,
// surrounding space, line endings and runs of white space. The address is
// folded (mailaddr.Folded), not reduced to its identity: a digest recorded
// by an older gate recomputes equal, and another spelling of the recipient
// asks for approval again. So a re-wrapped
// paragraph keeps its approval, while any changed word, recipient or target
// does not.
func Digest(recipient, subject, body, target string) string {
	return digestOf(mailaddr.Folded(recipient), destination.NormalizeText(subject), destination.NormalizeText(body),
		strings.TrimSpace(target))
}

// Content is everything an approval binds besides the owner and the
// material snapshot.
type Content struct {
	Recipient     string
	RecipientName string
	Sender        string
	Destination   string
	// Lookup is where the destination's records are consulted: approved
	// too, because pointing reconciliation at other records could prove a
	// sent message "absent".
	Lookup  string
	Subject string
	Body    string
	Target  string
	// Request is the canonical request of an action that is an HTTP
	// request ("" for a message).
	Request string
}

// Digest is the approval digest of the content: recipient (and its display
// name), sender, destination and its records endpoint, and content, with the same formatting
// tolerance as the package-level Digest. Content without a destination is
// a row recorded before destinations were bound and keeps that digest.
func (c Content) Digest() string {
	if c.Request != "" {
		// A request is bound as the provider will receive it: its
		// canonical JSON, where JSON formatting and key order are already
		// gone and every value counts, with where it goes and how that
		// destination's duplicate control reconciles it.
		d := digestOf("v3", mailaddr.Folded(c.Recipient), strings.TrimSpace(c.Destination),
			strings.TrimSpace(c.Lookup), c.Request, strings.TrimSpace(c.Target))
		return "sha256:v3:" + strings.TrimPrefix(d, "sha256:")
	}
	if c.Destination == "" && c.Sender == "" && c.RecipientName == "" {
		return Digest(c.Recipient, c.Subject, c.Body, c.Target)
	}
	d := digestOf("v2",
		mailaddr.Folded(c.Recipient), destination.NormalizeText(c.RecipientName),
		mailaddr.Folded(c.Sender), strings.TrimSpace(c.Destination), strings.TrimSpace(c.Lookup),
		destination.NormalizeText(c.Subject), destination.NormalizeText(c.Body), strings.TrimSpace(c.Target))
	return "sha256:v2:" + strings.TrimPrefix(d, "sha256:")
}

func digestOf(parts ...string) string {
	h := sha256.New()
	for _, part := range parts {
		h.Write([]byte(part))
		h.Write([]byte{0})
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

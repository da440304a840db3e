package ledger

import (
	"fmt"
	"net/mail"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxBodyBytes is the largest message body the gate accepts: the test
// mailbox's advertised SIZE. A larger body could never be delivered, so it
// is refused when proposed rather than failing at every send.
const MaxBodyBytes = 10 << 20

// FieldError is a request refused at the door: which field, and why. It
// wraps ErrInvalid; nothing was recorded.
type FieldError struct {
	Field  string // e.g. "recipient", "subject", "customer"
	Value  string // the offending value, quoted in the message (cut when long)
	Reason string
}

func (e *FieldError) Error() string {
	if e.Value == "" {
		return fmt.Sprintf("%s: %s", e.Field, e.Reason)
	}
	return fmt.Sprintf("%s %s: %s", e.Field, quoteShort(e.Value), e.Reason)
}

// Unwrap makes errors.Is(err, ErrInvalid) true.
func (e *FieldError) Unwrap() error { return ErrInvalid }

func quoteShort(s string) string {
	if len(s) > 60 {
		s = truncate(s, 60)
	}
	return fmt.Sprintf("%q", s)
}

// ValidateKeyFact refuses a business fact that would make a key ambiguous or
// unreadable: empty, white space or control characters.
func ValidateKeyFact(field, v string) error {
	if v == "" {
		return &FieldError{Field: field, Reason: "is empty"}
	}
	for _, r := range v {
		if unicode.IsSpace(r) || unicode.IsControl(r) {
			return &FieldError{Field: field, Value: v, Reason: "contains white space or a control character; key facts are single words"}
		}
	}
	if !utf8.ValidString(v) {
		return &FieldError{Field: field, Value: v, Reason: "is not valid UTF-8"}
	}
	return nil
}

// ValidateHeaderText refuses text that becomes a header line but contains
// CR, LF or another control character (which could forge a header).
func ValidateHeaderText(field, v string) error {
	if !utf8.ValidString(v) {
		return &FieldError{Field: field, Value: v, Reason: "is not valid UTF-8"}
	}
	for _, r := range v {
		if unicode.IsControl(r) {
			return &FieldError{Field: field, Value: v, Reason: fmt.Sprintf("contains the control character %U; it would break the header line", r)}
		}
	}
	return nil
}

// ValidateAddress accepts exactly one bare address ("ada@example.com"): no
// display name, no angle brackets, no list. What the approver sees is then
// what the envelope carries.
func ValidateAddress(field, v string) error {
	if err := ValidateHeaderText(field, v); err != nil {
		return err
	}
	if strings.TrimSpace(v) == "" {
		return &FieldError{Field: field, Reason: "is empty"}
	}
	a, err := mail.ParseAddress(v)
	if err != nil {
		return &FieldError{Field: field, Value: v, Reason: "is not one email address"}
	}
	if a.Name != "" || a.Address != v {
		return &FieldError{Field: field, Value: v, Reason: "must be one bare address such as ada@example.com (a display name has its own field)"}
	}
	return nil
}

// ValidateDisplayName accepts a display name that cannot pose as an
// address.
func ValidateDisplayName(field, v string) error {
	if err := ValidateHeaderText(field, v); err != nil {
		return err
	}
	if strings.ContainsAny(v, "@<>") {
		return &FieldError{Field: field, Value: v, Reason: "may not contain @, < or >"}
	}
	return nil
}

// ValidateBody refuses a body that cannot be delivered as it is: over
// MaxBodyBytes, not UTF-8, or with NUL bytes.
func ValidateBody(field, v string) error {
	if len(v) > MaxBodyBytes {
		return &FieldError{Field: field, Reason: fmt.Sprintf("is %d bytes, over the limit of %d (10 MiB)", len(v), MaxBodyBytes)}
	}
	if !utf8.ValidString(v) {
		return &FieldError{Field: field, Reason: "is not valid UTF-8; convert it to UTF-8 first"}
	}
	if strings.IndexByte(v, 0) >= 0 {
		return &FieldError{Field: field, Reason: "contains a NUL byte"}
	}
	return nil
}

// validateContent checks everything of a message that reaches a header or
// the body.
func validateContent(c Content) error {
	checks := []error{
		ValidateAddress("recipient", c.Recipient),
		ValidateDisplayName("recipient name", c.RecipientName),
		ValidateHeaderText("subject", c.Subject),
		ValidateBody("body", c.Body),
	}
	if c.Sender != "" {
		checks = append(checks, ValidateAddress("sender", c.Sender))
	}
	for _, err := range checks {
		if err != nil {
			return err
		}
	}
	return nil
}

package ledger

import (
	"fmt"
	"strings"
)

// ConsentClass is what a customer's consent means for a notice, whatever
// words the CRM used for it. The gate approves and re-reads the class, never
// the raw word, so a CRM re-exported in another vocabulary does not deny a
// release approved before.
type ConsentClass string

// Consent classes, from most to least permissive.
const (
	// ConsentOptedIn: the customer agreed to receive notices.
	ConsentOptedIn ConsentClass = "opted_in"
	// ConsentImplicit: subscribed without an explicit opt-in, where the
	// source's own vocabulary says so (Braze email_subscribe=subscribed).
	// Eligible only for releases that say so.
	ConsentImplicit ConsentClass = "implicit"
	// ConsentPending: asked to subscribe, not yet confirmed (double opt-in).
	ConsentPending ConsentClass = "pending"
	// ConsentUnknown: the source's value was not understood. Never eligible,
	// and never silently: imports count and list it.
	ConsentUnknown ConsentClass = "unknown"
	// ConsentUnsubscribed: the customer opted out.
	ConsentUnsubscribed ConsentClass = "unsubscribed"
	// ConsentSuppressed: bounced, cleaned, marked as spam or on a
	// suppression list: never send.
	ConsentSuppressed ConsentClass = "suppressed"
)

// ConsentClasses lists every class in the order summaries show them.
var ConsentClasses = []ConsentClass{ConsentOptedIn, ConsentImplicit, ConsentPending, ConsentUnknown, ConsentUnsubscribed, ConsentSuppressed}

// ParseConsentClass reads a class name as written on a command line
// ("opted_in", "opted-in", "Implicit"…). "unknown" is not accepted: it is
// what the importer says, never what a person maps a value to.
func ParseConsentClass(s string) (ConsentClass, bool) {
	c := ConsentClass(NormalizeConsentWord(s))
	switch c {
	case ConsentOptedIn, ConsentImplicit, ConsentPending, ConsentUnsubscribed, ConsentSuppressed:
		return c, true
	}
	return "", false
}

// Withdrawn reports whether the class says the customer must not be sent
// to until they subscribe again (unsubscribed or suppressed). An import
// that would move such a customer to another class is a resubscribe.
func (c ConsentClass) Withdrawn() bool {
	return c == ConsentUnsubscribed || c == ConsentSuppressed
}

// MaterialValue is the class as an approval records the material field
// crm.consent and as the send re-reads it. The opted-in class is written
// "yes", the value every approval recorded before classes existed, so
// those approvals stay valid.
func (c ConsentClass) MaterialValue() string {
	if c == ConsentOptedIn || c == "" {
		return "yes"
	}
	return string(c)
}

// NormalizeConsentWord lower-cases a CRM value or column name and writes
// spaces and hyphens as underscores: "Opted In" and "opted-in" are
// "opted_in".
func NormalizeConsentWord(s string) string {
	s = strings.ToLower(strings.TrimSpace(s))
	return strings.Join(strings.FieldsFunc(s, func(r rune) bool { return r == ' ' || r == '-' || r == '_' || r == '\t' }), "_")
}

// genericConsent is the vocabulary of a plain consent or status column
// (Mailchimp's status uses it too). "implicit" appears only as its own
// name: a generic "subscribed" is consent.
var genericConsent = map[string]ConsentClass{
	"subscribed": ConsentOptedIn, "opted_in": ConsentOptedIn, "opt_in": ConsentOptedIn, "optin": ConsentOptedIn,
	"yes": ConsentOptedIn, "y": ConsentOptedIn, "true": ConsentOptedIn, "1": ConsentOptedIn, "granted": ConsentOptedIn,
	"implicit": ConsentImplicit,
	"pending":  ConsentPending, "unconfirmed": ConsentPending,
	"unsubscribed": ConsentUnsubscribed, "opted_out": ConsentUnsubscribed, "opt_out": ConsentUnsubscribed,
	"optout": ConsentUnsubscribed, "no": ConsentUnsubscribed, "n": ConsentUnsubscribed, "false": ConsentUnsubscribed,
	"0": ConsentUnsubscribed, "withdrawn": ConsentUnsubscribed, "revoked": ConsentUnsubscribed, "declined": ConsentUnsubscribed,
	"cleaned": ConsentSuppressed, "bounced": ConsentSuppressed, "hard_bounced": ConsentSuppressed, "spam": ConsentSuppressed,
	"complained": ConsentSuppressed, "suppressed": ConsentSuppressed, "blocked": ConsentSuppressed,
}

// ClassifyConsent reads a value of a plain consent or status column.
// A value it does not know is ConsentUnknown.
func ClassifyConsent(value string) ConsentClass {
	if c, ok := genericConsent[NormalizeConsentWord(value)]; ok {
		return c
	}
	return ConsentUnknown
}

// Class is the customer's consent class: ConsentClass when the importer set
// it, otherwise read from Consent in the generic vocabulary; a suppressed
// customer is always ConsentSuppressed.
func (c Customer) Class() ConsentClass {
	switch {
	case c.Suppressed:
		return ConsentSuppressed
	case c.ConsentClass != "":
		return c.ConsentClass
	}
	return ClassifyConsent(c.Consent)
}

// EligibleFor reports whether the customer may receive a notice of a
// release that does (allowImplicit) or does not take implicit consent,
// and why not.
func (c Customer) EligibleFor(allowImplicit bool) (bool, string) {
	evidence := firstNonEmpty(c.Consent, "unset")
	switch class := c.Class(); class {
	case ConsentOptedIn:
		return true, ""
	case ConsentImplicit:
		if allowImplicit {
			return true, ""
		}
		return false, fmt.Sprintf("implicit consent only (%s); the release takes opted-in customers", evidence)
	case ConsentSuppressed:
		if c.Suppressed { // on a suppression list, whatever the consent says
			return false, "suppressed"
		}
		return false, fmt.Sprintf("suppressed (%s)", evidence)
	case ConsentUnsubscribed:
		return false, fmt.Sprintf("no consent (%s)", evidence)
	case ConsentPending:
		return false, fmt.Sprintf("consent pending (%s)", evidence)
	default:
		return false, fmt.Sprintf("consent unknown (%s)", evidence)
	}
}

// Eligible is EligibleFor a release that takes opted-in customers only.
func (c Customer) Eligible() (bool, string) { return c.EligibleFor(false) }

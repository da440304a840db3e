// Package mailaddr is the one place gatehouse decides when two spellings of
// an address name one mailbox. A customer's address reaches the gate as a
// CRM, an audience file or a proposal wrote it, and one mailbox has many
// spellings: letter case, space around it, an international domain as a
// U-label (exämple.org), its decomposed form (NFD), an A-label
// (xn--exmple-cua.org) in any case, or in fullwidth characters
// (ｅxample.org). Compared as text they are different customers' addresses
// and each gets its own notice; compared by Identity they are one.
//
// Identity is for comparing only: a message goes to the address as its
// file or proposal wrote it. The ledger (an audience's one notice per
// address, approval binding, reconciliation's recipient match), the
// destinations and the test mailbox (its per-address counts and queries by
// recipient) all compare through this package, so that no two of them can
// disagree on what one mailbox is.
package mailaddr

import (
	"errors"
	"fmt"
	"strings"

	"golang.org/x/net/idna"
	"golang.org/x/text/unicode/norm"
)

// LocalPart says whether the local part of an address (what comes before
// its last @) keeps its letter case when addresses are compared. RFC 5321
// lets a server tell Ada@ from ada@; hardly any does, and a CRM that holds
// both usually holds one person twice, so folding is the default.
type LocalPart int

const (
	// FoldLocalPart compares Ada@Example.org and ada@example.org as one
	// address.
	FoldLocalPart LocalPart = iota
	// CaseSensitiveLocalPart compares them as two; the domain is folded
	// still (DNS names have no case).
	CaseSensitiveLocalPart
)

// ErrNoDomain means an address has no @, so it names no mailbox anywhere.
var ErrNoDomain = errors.New("no @domain")

// Error says why an address has no identity: its domain is not a domain
// name that UTS #46 can map (a disallowed character, a hyphen where a
// label may not have one, an A-label that does not decode).
type Error struct {
	Address string
	Err     error
}

func (e *Error) Error() string {
	return fmt.Sprintf("address %q cannot be told apart from other addresses: %v", e.Address, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// Identity is the form under which every spelling of one mailbox compares
// equal: surrounding space dropped; the domain mapped by UTS #46 and
// written as A-labels (idna.Lookup: letter case, fullwidth forms, NFC and
// A-labels in any case all fold to one spelling); the local part in NFC
// (RFC 6532 asks senders for it; a decomposed ä is the same letter) and
// lower-cased unless local is CaseSensitiveLocalPart. The local part is
// otherwise left alone: only its server may say what it means, so a
// fullwidth or otherwise unusual local part stays another mailbox.
//
// An address whose domain cannot be mapped has no identity: the error says
// why, and the caller must not treat it as any other address (an audience
// excludes it, saying so).
func Identity(addr string, local LocalPart) (string, error) {
	addr = strings.TrimSpace(addr)
	at := strings.LastIndexByte(addr, '@')
	if at < 0 {
		return "", &Error{Address: addr, Err: ErrNoDomain}
	}
	domain, err := domainIdentity(addr[at+1:])
	if err != nil {
		return "", &Error{Address: addr, Err: err}
	}
	mailbox := norm.NFC.String(addr[:at])
	if local != CaseSensitiveLocalPart {
		mailbox = strings.ToLower(mailbox)
	}
	return mailbox + "@" + domain, nil
}

// domainIdentity maps a domain as a resolver would look it up. A domain
// literal ([192.0.2.1], [IPv6:…]) is no name: only its letter case folds.
func domainIdentity(domain string) (string, error) {
	if strings.HasPrefix(domain, "[") && strings.HasSuffix(domain, "]") {
		return strings.ToLower(domain), nil
	}
	if domain == "" {
		return "", ErrNoDomain
	}
	a, err := idna.Lookup.ToASCII(domain)
	if err != nil {
		return "", fmt.Errorf("its domain %q cannot be mapped as an international domain name (UTS #46): %w", domain, err)
	}
	// A trailing dot (any full stop UTS #46 maps to one) names the same
	// domain from the root: example.org. is example.org.
	if a = strings.TrimSuffix(a, "."); a == "" {
		return "", ErrNoDomain
	}
	return a, nil
}

// Same reports whether a and b name one mailbox, local parts folded. Two
// addresses of which one has no identity are the same only when they are
// spelled the same (Folded): such an address is never taken for another.
func Same(a, b string) bool {
	ia, errA := Identity(a, FoldLocalPart)
	ib, errB := Identity(b, FoldLocalPart)
	if errA != nil || errB != nil {
		return Folded(a) == Folded(b)
	}
	return ia == ib
}

// Key is Identity, local parts folded, for a caller that must file every
// address somewhere (a mailbox counting what arrived per address): an
// address without an identity is filed under its Folded spelling, which an
// address with an identity shares only when it is spelled the same.
func Key(addr string) string {
	if id, err := Identity(addr, FoldLocalPart); err == nil {
		return id
	}
	return Folded(addr)
}

// Folded is an address with surrounding space dropped and every letter
// lower-cased, and nothing else: the spelling content digests have always
// covered. It is not an identity (exämple.org and xn--exmple-cua.org fold
// apart); digests keep it so that an approval recorded before Identity
// existed still matches the action it approved, and a changed spelling
// still asks for a new approval.
func Folded(addr string) string {
	return strings.ToLower(strings.TrimSpace(addr))
}

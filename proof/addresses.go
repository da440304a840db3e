package proof

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"golang.org/x/net/idna"
	"golang.org/x/text/unicode/norm"

	"gatehouse/destination"
	"gatehouse/testmailbox"
)

// AddressVerdict is what CheckAddresses found: an audience's promise is
// one notice per address, so arrivals are counted per address (as the
// release compares addresses), whatever customer or action they came from.
type AddressVerdict struct {
	Eligible  int // addresses that had at least one customer able to receive the notice
	Addresses int // distinct addresses that received something
	Arrivals  int // messages the mailbox holds

	Twice      []string // an address that received more than one notice
	Missed     []string // an eligible address that received none
	Unexpected []string // an address that received a notice though no customer with it could
}

// OK reports whether every address received at most one notice and every
// eligible address exactly one.
func (v AddressVerdict) OK() bool {
	return len(v.Twice) == 0 && len(v.Missed) == 0 && len(v.Unexpected) == 0
}

func (v AddressVerdict) String() string {
	s := fmt.Sprintf("eligible addresses %d, addresses reached %d, arrivals %d: twice %d, missed %d, unexpected %d",
		v.Eligible, v.Addresses, v.Arrivals, len(v.Twice), len(v.Missed), len(v.Unexpected))
	for _, l := range []struct {
		name string
		list []string
	}{{"twice", v.Twice}, {"missed", v.Missed}, {"unexpected", v.Unexpected}} {
		if len(l.list) > 0 {
			s += fmt.Sprintf("\n  %s: %s", l.name, strings.Join(first(l.list, 10), "; "))
		}
	}
	return s
}

// CheckAddresses counts what the mailbox holds per address (AddressKey,
// with the release's local-part flag) against eligible: the addresses the
// test's own model says must receive the notice, each as AddressKey writes
// it. It reads every stored message (a COUNT per address would miss an
// address the model does not know).
func CheckAddresses(ctx context.Context, mb *testmailbox.Mailbox, eligible map[string]bool, local destination.LocalPart) (AddressVerdict, error) {
	v := AddressVerdict{Eligible: len(eligible)}
	_, msgs, err := mb.List(ctx, testmailbox.Filter{})
	if err != nil {
		return v, err
	}
	v.Arrivals = len(msgs)
	got := map[string]int{}
	for _, m := range msgs {
		for _, to := range m.To {
			key, _ := AddressKey(to, local)
			got[key]++
		}
	}
	v.Addresses = len(got)
	for addr, n := range got {
		switch {
		case !eligible[addr]:
			v.Unexpected = append(v.Unexpected, fmt.Sprintf("%s: %d notice(s)", addr, n))
		case n > 1:
			v.Twice = append(v.Twice, fmt.Sprintf("%s: %d notices", addr, n))
		}
	}
	for addr := range eligible {
		if got[addr] == 0 {
			v.Missed = append(v.Missed, addr)
		}
	}
	for _, l := range [][]string{v.Twice, v.Missed, v.Unexpected} {
		sort.Strings(l)
	}
	return v, nil
}

// AddressKey is the checker's own reading of when two addresses are one
// mailbox, written out here rather than borrowed from the code it checks
// (internal/mailaddr), so that a defect there cannot hide in both: space
// around it never counts; the domain is read as a resolver would look it
// up (UTS #46, golang.org/x/net/idna) and written back as Unicode, where
// mailaddr writes A-labels, so letter case, fullwidth forms, NFD and
// A-labels in any case never count; the local part is read in NFC and its
// letter case counts only when local says so. ok is false for an address
// whose domain cannot be read: no customer with it may receive a notice,
// since nobody can tell whether another customer's address is the same
// mailbox (the key is then the address trimmed and lower-cased).
func AddressKey(addr string, local destination.LocalPart) (key string, ok bool) {
	addr = strings.TrimSpace(addr)
	at := strings.LastIndex(addr, "@")
	if at < 0 {
		return addr, false
	}
	domain, err := idna.Lookup.ToUnicode(addr[at+1:])
	if err != nil {
		return strings.ToLower(addr), false
	}
	mailbox := norm.NFC.String(addr[:at])
	if local != destination.CaseSensitiveLocalPart {
		mailbox = strings.ToLower(mailbox)
	}
	return mailbox + "@" + domain, true
}

package mailaddr_test

import (
	"errors"
	"testing"

	"gatehouse/internal/mailaddr"
)

// TestIdentityFoldsEverySpelling: each family of spellings of one mailbox
// has one identity, the A-label form, and the address as written is
// never what the comparison keeps.
func TestIdentityFoldsEverySpelling(t *testing.T) {
	families := []struct {
		Name      string
		Identity  string
		Spellings []string
	}{
		{"IDN", "ada@xn--exmple-cua.org", []string{
			"ada@xn--exmple-cua.org", // A-label
			"ADA@XN--EXMPLE-CUA.ORG", // A-label, upper case
			"Ada@Xn--Exmple-Cua.Org", // A-label, mixed case
			"ada@exämple.org",        // U-label, NFC
			"ada@exa\u0308mple.org",  // U-label, NFD
			"ADA@EXÄMPLE.ORG",        // U-label, upper case
			" ada@exämple.org\t",     // space around it
			"ada@ｅｘäｍｐｌｅ.ｏｒｇ",        // fullwidth letters
			"ada@exämple\uff0eorg",   // fullwidth full stop
			"ada@exämple\u3002org",   // ideographic full stop
			"ada@ＥＸＡ\u0308ＭＰＬＥ.ＯＲＧ",  // fullwidth, upper case, NFD
		}},
		{"Fullwidth", "ada@example.org", []string{
			"ada@example.org", "ADA@Example.ORG", "ada@ｅxample.org", "ada@ｅｘａｍｐｌｅ．ｏｒｇ", "ada@ＥＸＡＭＰＬＥ.ORG",
			"ada@example.org.", "ADA@EXAMPLE.ORG.", "ada@example.org\u3002", // from the root
		}},
		{"LocalPartNFC", "jürgen@example.org", []string{
			"jürgen@example.org", "ju\u0308rgen@example.org", "JÜRGEN@example.org", "JU\u0308RGEN@EXAMPLE.ORG",
		}},
		{"DomainLiteral", "ada@[ipv6:2001:db8::1]", []string{"ada@[IPv6:2001:DB8::1]", "Ada@[ipv6:2001:db8::1]"}},
	}
	for _, f := range families {
		t.Run(f.Name, func(t *testing.T) {
			for _, s := range f.Spellings {
				got, err := mailaddr.Identity(s, mailaddr.FoldLocalPart)
				if err != nil || got != f.Identity {
					t.Errorf("Identity(%q) = %q, %v; want %q", s, got, err, f.Identity)
				}
				if !mailaddr.Same(s, f.Spellings[0]) {
					t.Errorf("Same(%q, %q) = false", s, f.Spellings[0])
				}
				if k := mailaddr.Key(s); k != f.Identity {
					t.Errorf("Key(%q) = %q, want %q", s, k, f.Identity)
				}
			}
		})
	}
}

// TestIdentityKeepsMailboxesApart: what is another mailbox stays another.
func TestIdentityKeepsMailboxesApart(t *testing.T) {
	for _, p := range [][2]string{
		{"ada@exämple.org", "ada@example.org"},       // ä is not a
		{"ada@xn--exmple-cua.org", "ada@exmple.org"}, // the A-label is not its ASCII part
		{"ada@example.org", "bea@example.org"},
		{"ａda@example.org", "ada@example.org"}, // a fullwidth local part is the server's to read
		{"ada@example.org", "ada@example.org.evil"},
		{"ada@sub.example.org", "ada@example.org"},
	} {
		if mailaddr.Same(p[0], p[1]) {
			t.Errorf("Same(%q, %q) = true", p[0], p[1])
		}
	}
}

// TestIdentityLocalPartCase: a release that keeps local parts
// case-sensitive tells Ada@ from ada@ while it still folds the domain.
func TestIdentityLocalPartCase(t *testing.T) {
	a, errA := mailaddr.Identity("Ada@EXÄMPLE.org", mailaddr.CaseSensitiveLocalPart)
	b, errB := mailaddr.Identity("ada@xn--exmple-cua.org", mailaddr.CaseSensitiveLocalPart)
	c, errC := mailaddr.Identity("Ada@XN--EXMPLE-CUA.ORG", mailaddr.CaseSensitiveLocalPart)
	if errA != nil || errB != nil || errC != nil || a == b || a != c || a != "Ada@xn--exmple-cua.org" {
		t.Fatalf("case-sensitive identities %q %q %q (%v %v %v)", a, b, c, errA, errB, errC)
	}
}

// TestIdentityRefusesWhatItCannotMap: an address with no domain, or a
// domain UTS #46 cannot map, has no identity, and the error names it; Same
// then takes it only for its own spelling.
func TestIdentityRefusesWhatItCannotMap(t *testing.T) {
	for _, s := range []string{
		"ada",                   // no domain
		"ada@",                  // empty domain
		"ada@xn--a.org",         // an A-label that does not decode
		"ada@xn--example-.org",  // nor this one
		"ada@-example.org",      // a leading hyphen
		"ada@exa_mple.org",      // not a host name character
		"ada@ex\u200dample.org", // a joiner where none may stand
		"ada@xn--ls8h.la\u202e", // a direction override
		"ada@example.org\ufffd", // a replacement character
	} {
		got, err := mailaddr.Identity(s, mailaddr.FoldLocalPart)
		var me *mailaddr.Error
		if err == nil || !errors.As(err, &me) {
			t.Errorf("Identity(%q) = %q, %v; want a *mailaddr.Error", s, got, err)
			continue
		}
		if mailaddr.Same(s, "ada@example.org") {
			t.Errorf("Same(%q, ada@example.org) = true", s)
		}
		if !mailaddr.Same(s, " "+s) || mailaddr.Key(s) != mailaddr.Folded(s) {
			t.Errorf("%q is not filed under its own spelling: key %q", s, mailaddr.Key(s))
		}
	}
}

// TestIdentityOfASCIIAddresses: what the gate always folded still folds,
// to the same form (surrounding space and letter case never count, the
// local part's only when the release says so), and Folded is the trimmed,
// lower-cased spelling that recorded digests were computed from.
func TestIdentityOfASCIIAddresses(t *testing.T) {
	tests := []struct {
		Name     string
		A, B     string
		Local    mailaddr.LocalPart
		Same     bool
		Identity string // Identity(A, Local)
	}{
		{"TrailingSpace", "ada@example.org ", "ada@example.org", mailaddr.FoldLocalPart, true, "ada@example.org"},
		{"DomainCase", "ada@Example.ORG", "ada@example.org", mailaddr.FoldLocalPart, true, "ada@example.org"},
		{"LocalCaseFolded", "Ada@Example.org", "ada@example.org", mailaddr.FoldLocalPart, true, "ada@example.org"},
		{"LocalCaseKept", "Ada@Example.org", "ada@example.org", mailaddr.CaseSensitiveLocalPart, false, "Ada@example.org"},
		{"DomainCaseWithLocalCaseKept", " ada@EXAMPLE.org\t", "ada@example.org", mailaddr.CaseSensitiveLocalPart, true, "ada@example.org"},
		{"LastAtSplits", `"a@b"@Example.org`, `"a@b"@example.org`, mailaddr.CaseSensitiveLocalPart, true, `"a@b"@example.org`},
		{"UnicodeLocalPartFolded", "ÄDA@example.org", "äda@example.org", mailaddr.FoldLocalPart, true, "äda@example.org"},
		{"OtherAddress", "ada@example.org", "bea@example.org", mailaddr.FoldLocalPart, false, "ada@example.org"},
	}
	for _, tt := range tests {
		t.Run(tt.Name, func(t *testing.T) {
			a, errA := mailaddr.Identity(tt.A, tt.Local)
			b, errB := mailaddr.Identity(tt.B, tt.Local)
			if errA != nil || errB != nil || (a == b) != tt.Same || a != tt.Identity {
				t.Fatalf("Identity(%q) = %q, of %q = %q (%v, %v): want same %v, %q", tt.A, a, tt.B, b, errA, errB, tt.Same, tt.Identity)
			}
			if tt.Local == mailaddr.FoldLocalPart {
				if mailaddr.Same(tt.A, tt.B) != tt.Same {
					t.Fatalf("Same(%q, %q) = %v", tt.A, tt.B, !tt.Same)
				}
				if f := mailaddr.Folded(tt.A); f != a {
					t.Fatalf("Folded(%q) = %q; an ASCII address folds to its identity", tt.A, f)
				}
			}
		})
	}
}

package tui

import (
	"context"
	"strings"
	"testing"

	"gatehouse/ledger"
)

// TestInspectorSaysWhoOperatesAndWhatTheyMayNot: on a registered ledger
// the inspector names the operator's kind and roles, and an operation the
// operator may not do is refused before its confirmation opens, in the
// CLI's words, with nothing tried; one they may do opens as before.
func TestInspectorSaysWhoOperatesAndWhatTheyMayNot(t *testing.T) {
	l := seedLedger(t)
	ctx := context.Background()
	for _, a := range []ledger.Actor{
		{ID: "root", Kind: ledger.KindPerson, Roles: []ledger.Role{ledger.RoleAdmin, ledger.RoleStop}},
		{ID: "olga", Kind: ledger.KindPerson, Roles: []ledger.Role{ledger.RoleOperate, ledger.RoleReview}},
	} {
		if _, err := l.AddActor(ctx, "root", a); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Require(ctx, "root", nil); err != nil {
		t.Fatal(err)
	}
	a := newDriven(newTestInspector(l), 120, 30)
	if s := screenText(a); !strings.Contains(s, "as olga · person · operate, review") {
		t.Fatalf("the inspector does not say who operates:\n%s", s)
	}
	before, err := l.StopState(ctx)
	if err != nil {
		t.Fatal(err)
	}
	typeKeys(a, "S")
	s := screenText(a)
	if !strings.Contains(s, "not permitted") || !strings.Contains(s, "exits 21") || strings.Contains(s, "STOP all execution?") {
		t.Fatalf("a stop by an operator without the stop role is not refused before it is asked:\n%s", s)
	}
	if after, _ := l.StopState(ctx); after.Stopped != before.Stopped {
		t.Fatal("the refused stop changed the switch")
	}
	typeKeys(a, "tab", "tab") // Holds & unknown: h is within olga's operate role
	typeKeys(a, "h")
	if s := screenText(a); !strings.Contains(s, "Hold") || !strings.Contains(s, "?") {
		t.Fatalf("an operation the operator may do does not ask for confirmation:\n%s", s)
	}
}

// TestInspectorOnAnOpenLedgerSaysAnyNameIsTaken: an open ledger checks no
// one, and the inspector says so rather than showing roles it does not have.
func TestInspectorOnAnOpenLedgerSaysAnyNameIsTaken(t *testing.T) {
	a := newDriven(newTestInspector(seedLedger(t)), 120, 30)
	if s := screenText(a); !strings.Contains(s, "as olga · open ledger") {
		t.Fatalf("the inspector does not say the ledger is open:\n%s", s)
	}
}

package fakes

import (
	"errors"
	"testing"
)

func TestSourcesGoDownAndChangeOnCue(t *testing.T) {
	crm := NewCRM()
	crm.AddCustomer("cust-ada", "ada@example.com", map[string]string{"consent": "yes"})
	desk := NewHelpdesk()
	desk.AddTask("t-1", "cust-ada", "Where is my order?", "", "")
	for _, tc := range []struct {
		name  string
		read  func() (string, error)
		set   func() error
		down  func(bool)
		value string
	}{
		{"CRM", func() (string, error) { return crm.Read("cust-ada", "consent") },
			func() error { return crm.Set("cust-ada", "consent", "no") }, crm.SetAvailable, "no"},
		{"Helpdesk", func() (string, error) { return desk.Read("t-1", FieldStatus) },
			func() error { return desk.Set("t-1", FieldStatus, "waiting") }, desk.SetAvailable, "waiting"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.set(); err != nil {
				t.Fatal(err)
			}
			tc.down(false)
			if _, err := tc.read(); !errors.Is(err, ErrSourceDown) {
				t.Fatalf("read while down: %v, want ErrSourceDown", err)
			}
			tc.down(true)
			if v, err := tc.read(); err != nil || v != tc.value {
				t.Fatalf("read = %q, %v; want %q", v, err, tc.value)
			}
		})
	}
	if _, err := crm.Read("nobody", "consent"); !errors.Is(err, ErrNoRecord) {
		t.Fatalf("unknown customer: %v", err)
	}
	if err := desk.AddViewer("t-1", "sam"); err != nil {
		t.Fatal(err)
	}
	desk.AddViewer("t-1", "ann")
	if v, _ := desk.Read("t-1", FieldViewers); v != "ann,sam" {
		t.Fatalf("viewers = %q", v)
	}
}

package tui

import (
	"context"
	"strings"
	"testing"

	"gatehouse/destination/fake"
	"gatehouse/fakes"
	"gatehouse/ledger"
)

// fakeArrivals shows what a fake.Destination holds, stamped with the
// ledger's fake clock so the screen is stable.
type fakeArrivals struct {
	dest *fake.Destination
	clk  *fakes.Clock
}

func (f fakeArrivals) Arrivals(context.Context) ([]Arrival, error) {
	var out []Arrival
	for _, m := range f.dest.Arrived() {
		out = append(out, Arrival{ActionKey: m.ActionKey, MessageID: m.TransportID, To: m.To,
			Subject: m.Subject, At: f.clk.Now()})
	}
	return out, nil
}

func newTestDemo(t testing.TB) (*Demo, *ledger.Ledger) {
	l, clk := openLedger(t)
	if err := RegisterDemoCast(context.Background(), l); err != nil {
		t.Fatal(err)
	}
	dest := fake.New()
	return NewDemo(NewTheme(true), DemoConfig{Ledger: l, Dest: dest, Mailbox: fakeArrivals{dest, clk}}), l
}

func TestDemoScript(t *testing.T) {
	d, _ := newTestDemo(t)
	a := newDriven(d, 80, 24)
	for range demoSteps {
		typeKeys(a, "space")
	}
	s := screenText(a)
	for _, want := range []string{"Step 6 of 6", "Mailbox — what actually arrived (1)", "About your damaged"} {
		if !strings.Contains(s, want) {
			t.Errorf("screen lacks %q", want)
		}
	}
}

func TestDemoKeys(t *testing.T) {
	tests := []struct {
		name string
		keys []string
		want []string
	}{
		{"SpaceAdvances", []string{"space"}, []string{"Step 1 of 6", "reply_ack: approved"}},
		{"NAdvances", []string{"n", "n"}, []string{"Step 2 of 6", "looking: yes (advisory)"}},
		{"PastTheEnd", []string{"n", "n", "n", "n", "n", "n", "n"}, []string{"The demonstration is over"}},
		{"WorkflowActsOnlyByScript", []string{"v"}, []string{"tab to a staff pane"}},
		{"StaffViews", []string{"tab", "v"}, []string{"bea opens the task", "looking: yes (advisory)"}},
		{"TakeOverAsksReason", []string{"n", "tab", "tab", "t", "enter"}, []string{"carl takes over", "a reason is required"}},
		{"TakeOverByKey", []string{"n", "tab", "tab", "t", "u", "r", "g", "e", "n", "t", "enter"},
			[]string{"carl takes ownership: urgent", "✉ carl took over"}},
		{"TakeOverCancelled", []string{"n", "tab", "t", "esc"}, []string{"cancelled: bea takes over"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, _ := newTestDemo(t)
			a := newDriven(d, 100, 30)
			typeKeys(a, tc.keys...)
			s := screenText(a)
			for _, w := range tc.want {
				if !strings.Contains(s, w) {
					t.Errorf("screen lacks %q:\n%s", w, s)
				}
			}
		})
	}
}

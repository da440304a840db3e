package proof_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"gatehouse/destination"
	"gatehouse/destination/httpdest"
	"gatehouse/destination/registry"
	"gatehouse/fakes"
	"gatehouse/ledger"
)

// gatedOutside is one refund proposed and approved through the gate to
// the provider written outside the project (testdata/provider.py).
type gatedOutside struct {
	t     *testing.T
	p     *outsideProvider
	l     *ledger.Ledger
	clock *fakes.Clock
	d     *httpdest.Destination
	key   string
}

// The provider's own duplicate control, declared as its URL would: its
// key header and window, the external_id that is both the reference and
// the key the gate writes, the search by it, its id field.
const outsideProfile = "dup=idempotency-key&window=24h&ref=external_id&refid=external_id&search=/refunds&id=id"

func gateOutside(t *testing.T) *gatedOutside {
	t.Helper()
	ctx := context.Background()
	g := &gatedOutside{t: t, p: startOutsideProvider(t), clock: fakes.NewClock(time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC))}
	var err error
	if g.d, err = httpdest.New(g.p.URL + "?" + outsideProfile); err != nil {
		t.Fatal(err)
	}
	if g.l, err = ledger.Open(filepath.Join(t.TempDir(), "ledger.db"), ledger.WithClock(g.clock)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.l.Close() })
	req, err := destination.ParseRequest([]byte(`{"method": "POST", "path": "/refunds", "body": {"payment": "pay_1", "amount": 1250, "currency": "eur"}}`))
	if err != nil {
		t.Fatal(err)
	}
	canon, err := req.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	ep := destination.EndpointOf(g.d)
	if _, err := g.l.Claim(ctx, ledger.TaskRef{ID: "task-1"}, "wf-refund"); err != nil {
		t.Fatal(err)
	}
	a, err := g.l.Propose(ctx, ledger.Proposal{Task: ledger.TaskRef{ID: "task-1"}, Customer: "cust-1", Event: "return-1", ActionType: "refund",
		Target: "order-1", Destination: ep.Destination, Lookup: ep.Lookup, Request: canon, Actor: "wf-refund"})
	if err != nil {
		t.Fatal(err)
	}
	g.key = a.Key
	if _, err := g.l.Approve(ctx, a.Key, "lead", nil); err != nil {
		t.Fatal(err)
	}
	return g
}

func (g *gatedOutside) send() (ledger.Result, error) {
	return g.l.Execute(context.Background(), ledger.ExecuteRequest{Key: g.key, Executor: "wf-refund"}, g.d)
}

func (g *gatedOutside) reconcile() (ledger.Action, error) {
	return g.l.Reconcile(context.Background(), ledger.ReconcileRequest{Key: g.key, Actor: "wf-refund", Open: registry.Records()})
}

func (g *gatedOutside) dropNext() {
	g.t.Helper()
	if resp, b, err := g.p.post(g.t, "/control/drop-next", "", []byte(`{"count": 1}`)); err != nil || resp.StatusCode != 200 {
		g.t.Fatalf("arm the drop: %v %s", err, b)
	}
}

// TestGatedRefundAtTheOutsideProvider: a provider written outside the
// project, with its own idempotency (the body compared byte for byte),
// receives exactly one refund through the gate after its response is
// dropped: within its key window the reconcile makes the next send a
// probe with the very bytes and key of the first, which it replays; past
// the window the gate finds the refund by its reference instead, and
// writes nothing more.
func TestGatedRefundAtTheOutsideProvider(t *testing.T) {
	t.Run("probed within the window", func(t *testing.T) {
		g := gateOutside(t)
		g.dropNext()
		if _, err := g.send(); !errors.Is(err, ledger.ErrUnknownOutcome) {
			t.Fatalf("send with a dropped response: %v, want unknown", err)
		}
		if _, err := g.reconcile(); !errors.Is(err, ledger.ErrHeld) {
			t.Fatalf("reconcile: %v, want held for the probe", err)
		}
		res, err := g.send()
		if err != nil {
			t.Fatalf("probe: %v", err)
		}
		rec := g.p.records(t)
		if res.Action.State != ledger.StateSent || !res.Receipt.Replayed || rec.Count != 1 || rec.Requests != 2 {
			t.Fatalf("after the probe: %s, replayed %v, %d refunds of %d requests; want sent, replayed, 1 of 2",
				res.Action.State, res.Receipt.Replayed, rec.Count, rec.Requests)
		}
		if res.Attempt.DestinationID != rec.Records[0].ID && res.Receipt.DestinationID != rec.Records[0].ID {
			t.Fatalf("the provider's id %s is not the gate's %s", rec.Records[0].ID, res.Receipt.DestinationID)
		}
	})
	t.Run("found by reference past the window", func(t *testing.T) {
		g := gateOutside(t)
		g.dropNext()
		g.send()
		g.clock.Advance(25 * time.Hour)
		a, err := g.reconcile()
		if err != nil || a.State != ledger.StateSent {
			t.Fatalf("reconcile past the window: %s (%s), %v; want sent, found by reference", a.State, a.Reason, err)
		}
		if rec := g.p.records(t); rec.Count != 1 || rec.Requests != 1 {
			t.Fatalf("%d refunds of %d requests; want the one, and nothing written again", rec.Count, rec.Requests)
		}
	})
}

package proof_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"gatehouse/destination"
	"gatehouse/destination/httpdest"
	"gatehouse/fakes"
	"gatehouse/ledger"
	"gatehouse/proof"
)

// payWorld is the destination of an HTTP crash-matrix world: a payments
// fake served on loopback in the test process, declared to the gate under
// one duplicate control. The executor processes reach it by its URL.
type payWorld struct {
	pay *fakes.Payments
	srv *httptest.Server
	// clock is the fake's clock when the world moves it (the finish "a day
	// later"); nil when the fake keeps real time, as the processes do.
	clock   *fakes.Clock
	profile string
	// payments maps each refund's payment to its action key: a profile
	// without a reference writes no action key into the refund, and the
	// checker still counts records at the provider per action key.
	payments map[string]string
}

func (p *payWorld) target() string { return p.srv.URL + "?" + p.profile }

func (p *payWorld) endpoint(t *testing.T) destination.Endpoint {
	d, err := httpdest.New(p.target())
	must(t, err)
	return destination.EndpointOf(d)
}

// arrivals counts the refunds the fake holds per action key: by the
// metadata.gatehouse_key the gate wrote where the profile has a
// reference, by the refunded payment otherwise.
func (p *payWorld) arrivals() proof.Arrivals {
	a := proof.Arrivals{}
	for _, r := range p.pay.Records().Records {
		k := r.Refund.Metadata[fakes.GatehouseKeyField]
		if k == "" {
			k = p.payments[r.Refund.Payment]
		}
		a[k]++
	}
	return a
}

// payOptions is how one HTTP world's fake behaves and what the gate is
// told about it.
type payOptions struct {
	profile string
	opts    fakes.PaymentsOptions
	faults  []fakes.PaymentsFault
	// movable: the fake runs on a clock the world moves (from now),
	// instead of real time.
	movable bool
}

func newPayWorld(t *testing.T, o payOptions) *world {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	pw := &payWorld{profile: o.profile, payments: map[string]string{}}
	if o.movable {
		pw.clock = fakes.NewClock(time.Now())
	}
	pw.pay = fakes.NewPayments(pw.clock, o.opts)
	pw.srv = httptest.NewServer(pw.pay.Handler())
	t.Cleanup(func() {
		pw.pay.Close()
		pw.srv.Close()
	})
	for _, f := range o.faults {
		must(t, pw.pay.QueueFault(f))
	}
	return &world{t: t, ctx: ctx, path: filepath.Join(t.TempDir(), "ledger.db"), pay: pw}
}

// approvedRefunds records a task owned by owner with n approved refunds,
// one per customer and payment, as a workflow would before executing.
func (w *world) approvedRefunds(owner string, n int) {
	l := w.open()
	defer l.Close()
	w.task, w.owner = "task-1", owner
	_, err := l.Claim(w.ctx, ledger.TaskRef{ID: w.task, Customer: "acme"}, owner)
	must(w.t, err)
	ep := w.destination()
	for i := 1; i <= n; i++ {
		payment := fmt.Sprintf("pay_c%d", i)
		req, err := destination.ParseRequest([]byte(fmt.Sprintf(`{"method": "POST", "path": "/v1/refunds",
			"body": {"payment": %q, "amount": %d, "currency": "eur", "reason": "requested_by_customer"}}`, payment, 1000+i)))
		must(w.t, err)
		canon, err := req.Canonical()
		must(w.t, err)
		a, err := l.Propose(w.ctx, ledger.Proposal{Task: ledger.TaskRef{ID: w.task}, Customer: fmt.Sprintf("c%d", i), Event: "return-1",
			ActionType: "refund", Target: "order-" + payment, Destination: ep.Destination, Lookup: ep.Lookup, Request: canon, Actor: owner})
		must(w.t, err)
		_, err = l.Approve(w.ctx, a.Key, "lead", consentYes)
		must(w.t, err)
		w.keys = append(w.keys, a.Key)
		w.pay.payments[payment] = a.Key
	}
}

// dayLater is how long after the crash the finish runs in the worlds
// past the key window: longer than the 24 h the provider keeps a key.
const dayLater = 25 * time.Hour

// Profiles of the crash matrix's payments provider.
const (
	crashKeys      = "dup=idempotency-key"
	crashKeysRef   = "dup=idempotency-key&ref=metadata.gatehouse_key&search=/v1/refunds"
	crashStripe    = "dup=idempotency-key&stores5xx=true&ref=metadata.gatehouse_key&search=/v1/refunds&lag=300ms&settle=500ms"
	crashReference = "dup=reference&ref=metadata.gatehouse_key&search=/v1/refunds&lag=300ms&settle=500ms"
	crashNone      = "dup=none"
)

// dropFirst loses the response to the first refund request after the
// provider created it: the executor's outcome for it is unknown even
// when nothing kills the process.
var dropFirst = []fakes.PaymentsFault{{Kind: fakes.PayCommitThenDrop, Count: 1}}

func refundExec(w *world) proc { return proc{Role: "send", Env: w.env("PROOF_ACTOR=" + w.owner)} }

func refundFinish(w *world) proc {
	return proc{Role: "finish", Env: w.env("PROOF_ACTOR=" + w.owner), KillAt: -1}
}

// httpWorkflows are the crash matrix's refunds, one per duplicate
// control: three refunds through one executor, whose every boundary is a
// kill point, then a fresh process that recovers, reconciles by the
// profile and finishes.
var httpWorkflows = []workflow{
	{
		// The provider keeps keys and the finish comes within the window:
		// an interrupted attempt is probed with its own bytes and key,
		// which the provider answers from what it stored, or executes
		// for the first time if the bytes never arrived.
		Name: "RefundKeyWithinWindow",
		World: func(t *testing.T) *world {
			return newPayWorld(t, payOptions{profile: crashKeys, faults: dropFirst})
		},
		Setup:  func(w *world) { w.approvedRefunds("wf-refund", 3) },
		Exec:   refundExec,
		Finish: refundFinish,
	},
	{
		// The finish comes a day later: the provider has forgotten the
		// key, so a probe would be a new refund; the reference finds the
		// one the provider made, or proves there is none, and only then
		// does a retry go, under the next key generation.
		Name: "RefundKeyPastWindow",
		World: func(t *testing.T) *world {
			return newPayWorld(t, payOptions{profile: crashKeysRef, faults: dropFirst, movable: true})
		},
		Setup:        func(w *world) { w.approvedRefunds("wf-refund", 3) },
		Exec:         refundExec,
		BeforeFinish: func(w *world) { w.pay.clock.Advance(dayLater) },
		Finish: func(w *world) proc {
			return proc{Role: "finish", Env: w.env("PROOF_ACTOR="+w.owner, "PROOF_CLOCK_OFFSET="+dayLater.String()), KillAt: -1}
		},
	},
	{
		// Past the window and without a reference, nothing the gate can
		// ask tells whether the refund was made: a person's, never a
		// second write.
		Name: "RefundKeyPastWindowNoReference",
		World: func(t *testing.T) *world {
			return newPayWorld(t, payOptions{profile: crashKeys, faults: dropFirst, movable: true})
		},
		Setup:        func(w *world) { w.approvedRefunds("wf-refund", 3) },
		Exec:         refundExec,
		BeforeFinish: func(w *world) { w.pay.clock.Advance(dayLater) },
		Finish: func(w *world) proc {
			return proc{Role: "finish", Env: w.env("PROOF_ACTOR="+w.owner, "PROOF_CLOCK_OFFSET="+dayLater.String()), KillAt: -1}
		},
		PersonHolds: true,
	},
	{
		// The provider stores its 500 under the key: the probe would be
		// answered the same 500, so the reference decides, "not found
		// yet" within the search lag, absent only after it.
		Name: "RefundStored500",
		World: func(t *testing.T) *world {
			return newPayWorld(t, payOptions{profile: crashStripe, opts: fakes.PaymentsOptions{Store5xx: true, SearchLag: 300 * time.Millisecond},
				faults: []fakes.PaymentsFault{{Kind: fakes.PayError500, Count: 1}}})
		},
		Setup:  func(w *world) { w.approvedRefunds("wf-refund", 3) },
		Exec:   refundExec,
		Finish: refundFinish,
	},
	{
		// No keys, a reference whose search lags: "not found yet" is
		// re-checked once the lag is over, never taken for absence.
		Name: "RefundReferenceWithLag",
		World: func(t *testing.T) *world {
			return newPayWorld(t, payOptions{profile: crashReference, faults: dropFirst,
				opts: fakes.PaymentsOptions{Keys: fakes.PaymentsNoKeys, SearchLag: 300 * time.Millisecond}})
		},
		Setup:  func(w *world) { w.approvedRefunds("wf-refund", 3) },
		Exec:   refundExec,
		Finish: refundFinish,
	},
	{
		// No duplicate control at all: an interrupted attempt is held for
		// a person, always.
		Name: "RefundNoControl",
		World: func(t *testing.T) *world {
			return newPayWorld(t, payOptions{profile: crashNone, faults: dropFirst, opts: fakes.PaymentsOptions{Keys: fakes.PaymentsNoKeys}})
		},
		Setup:       func(w *world) { w.approvedRefunds("wf-refund", 3) },
		Exec:        refundExec,
		Finish:      refundFinish,
		PersonHolds: true,
	},
}

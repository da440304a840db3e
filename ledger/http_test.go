package ledger_test

import (
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"gatehouse/destination"
	"gatehouse/destination/httpdest"
	"gatehouse/destination/registry"
	"gatehouse/fakes"
	"gatehouse/ledger"
)

// Profiles of the payments provider, as destination URLs declare them.
const (
	keysOnly     = "dup=idempotency-key"
	keysAndRef   = "dup=idempotency-key&ref=metadata.gatehouse_key&search=/v1/refunds"
	stripeLike   = "dup=idempotency-key&stores5xx=true&ref=metadata.gatehouse_key&search=/v1/refunds&lag=30s"
	referenceLag = "dup=reference&ref=metadata.gatehouse_key&search=/v1/refunds&lag=30s"
	noControl    = "dup=none"
)

const refundFile = `{"method": "POST", "path": "/v1/refunds",
	"body": {"payment": "pay_3MtwBwLkdIwHu7ix", "amount": 1250, "currency": "eur", "reason": "requested_by_customer"}}`

// refundWorld is a world whose action is a refund at a payments provider.
type refundWorld struct {
	*world
	pay  *payments
	dest *httpdest.Destination
	key  string
}

// newRefund proposes and approves one refund to pay under the profile.
func newRefund(t *testing.T, query string) *refundWorld {
	t.Helper()
	w := newWorld(t)
	pay := startPayments(t, w.clock)
	d, err := httpdest.New(pay.url(query))
	w.must(err)
	d.Clock = w.clock
	rw := &refundWorld{world: w, pay: pay, dest: d}
	_, err = w.l.Claim(w.ctx, ledger.TaskRef{ID: "task-7"}, "wf-refund")
	w.must(err)
	a, err := w.l.Propose(w.ctx, rw.proposal(refundFile))
	w.must(err)
	rw.key = a.Key
	_, err = w.l.Approve(w.ctx, a.Key, "lead", paymentCaptured)
	w.must(err)
	return rw
}

var paymentCaptured = []ledger.MaterialRead{{Source: "payments", Field: "payment_state", Value: "captured"}}

func (rw *refundWorld) proposal(file string) ledger.Proposal {
	rw.t.Helper()
	req, err := destination.ParseRequest([]byte(file))
	rw.must(err)
	canon, err := req.Canonical()
	rw.must(err)
	ep := destination.EndpointOf(rw.dest)
	return ledger.Proposal{Task: ledger.TaskRef{ID: "task-7", Customer: "cust-42"}, Customer: "cust-42", Event: "return-88",
		ActionType: "refund", Target: "order-1001", Destination: ep.Destination, Lookup: ep.Lookup, Request: canon, Actor: "wf-refund"}
}

func (rw *refundWorld) send() (ledger.Result, error) {
	return rw.l.Execute(rw.ctx, ledger.ExecuteRequest{Key: rw.key, Executor: "wf-refund", Reread: paymentCaptured}, rw.dest)
}

func (rw *refundWorld) reconcile() (ledger.Action, error) {
	return rw.l.Reconcile(rw.ctx, ledger.ReconcileRequest{Key: rw.key, Actor: "wf-refund", Open: registry.Records()})
}

func (rw *refundWorld) action() ledger.Action {
	rw.t.Helper()
	a, err := rw.l.Action(rw.ctx, rw.key)
	rw.must(err)
	return a
}

func (rw *refundWorld) attempts() []ledger.Attempt {
	rw.t.Helper()
	atts, err := rw.l.Attempts(rw.ctx, rw.key)
	rw.must(err)
	return atts
}

// refunds is how many refunds the provider holds: the world has one
// action, and a profile without a reference writes no action key into
// the refund to count it by.
func (rw *refundWorld) refunds() int { return rw.pay.refunds() }

func (rw *refundWorld) wantState(st ledger.State, cause ledger.HoldCause) {
	rw.t.Helper()
	if a := rw.action(); a.State != st || a.HoldCause != cause {
		rw.t.Fatalf("action is %s/%s (%s), want %s/%s", a.State, a.HoldCause, a.Reason, st, cause)
	}
}

// TestRefundRecordsTheBytesAndTheProvidersID: a refund is sent once; the
// attempt records the exact bytes the provider received, its key and
// generation, and the provider's id of the refund as the destination
// action id.
func TestRefundRecordsTheBytesAndTheProvidersID(t *testing.T) {
	rw := newRefund(t, keysAndRef)
	res, err := rw.send()
	rw.must(err)
	if res.Action.State != ledger.StateSent || rw.refunds() != 1 {
		t.Fatalf("state %s, %d refunds", res.Action.State, rw.refunds())
	}
	at := rw.attempts()[0]
	if at.KeyGeneration != 1 || !strings.HasPrefix(at.ProviderKey, "gh_") || at.MessageID != at.ProviderKey {
		t.Fatalf("attempt key %q generation %d message id %q", at.ProviderKey, at.KeyGeneration, at.MessageID)
	}
	if !strings.HasPrefix(at.DestinationID, "re_") || at.HTTPStatus != 201 {
		t.Fatalf("destination action id %q, status %d", at.DestinationID, at.HTTPStatus)
	}
	for _, s := range []string{"POST /v1/refunds HTTP/1.1\r\n", "Idempotency-Key: " + at.ProviderKey + "\r\n",
		`"amount":1250`, `"gatehouse_key":"` + rw.key + `"`, `"gatehouse_ref":"` + at.ProviderKey + `"`} {
		if !strings.Contains(at.Wire, s) {
			t.Errorf("recorded bytes lack %q:\n%s", s, at.Wire)
		}
	}
	if strings.Contains(at.ProviderKey, rw.key) {
		t.Fatalf("the provider key %s shows the action key", at.ProviderKey)
	}
}

// TestProviderKeyCannotBeComputedFromTheActionKey: two ledgers give the
// same action key (and generation) different provider keys, and one
// ledger gives each generation its own.
func TestProviderKeyCannotBeComputedFromTheActionKey(t *testing.T) {
	a, b := newRefund(t, keysOnly), newRefund(t, keysOnly)
	_, err := a.send()
	a.must(err)
	_, err = b.send()
	b.must(err)
	ka, kb := a.attempts()[0].ProviderKey, b.attempts()[0].ProviderKey
	if a.key != b.key || ka == kb {
		t.Fatalf("action keys %s %s, provider keys %s %s: want one action key, two provider keys", a.key, b.key, ka, kb)
	}
	secret := []byte("0123456789abcdef0123456789abcdef")
	if ledger.ProviderKey(secret, a.key, 1, 255) == ledger.ProviderKey(secret, a.key, 2, 255) {
		t.Fatal("two generations drew one key")
	}
}

// TestApprovalBindsTheRequestNotItsFormatting: reformatted JSON keeps the
// approval; a changed amount or account needs a new one, and the history
// says which field changed.
func TestApprovalBindsTheRequestNotItsFormatting(t *testing.T) {
	rw := newRefund(t, keysOnly)
	reformatted := `{"path": "/v1/refunds", "method": "post", "body": {"reason": "requested_by_customer", "currency": "eur",
		"amount": 1250, "payment": "pay_3MtwBwLkdIwHu7ix"}}`
	a, err := rw.l.Propose(rw.ctx, rw.proposal(reformatted))
	rw.must(err)
	if a.State != ledger.StateApproved {
		t.Fatalf("reformatted request: %s, want approved still", a.State)
	}
	for what, file := range map[string]string{"amount": strings.Replace(refundFile, "1250", "12500", 1),
		"payment": strings.Replace(refundFile, "pay_3MtwBwLkdIwHu7ix", "pay_other", 1)} {
		a, err := rw.l.Propose(rw.ctx, rw.proposal(file))
		rw.must(err)
		if a.State != ledger.StateDrafting || !strings.Contains(a.Reason, what) {
			t.Fatalf("changed %s: %s (%s), want a draft naming it", what, a.State, a.Reason)
		}
		_, err = rw.send()
		if !errors.Is(err, ledger.ErrApprovalStale) && !errors.Is(err, ledger.ErrWrongState) {
			t.Fatalf("send after a changed %s: %v", what, err)
		}
	}
	if rw.pay.writes() != 0 {
		t.Fatalf("%d writes reached the provider", rw.pay.writes())
	}
}

// TestDroppedResponseIsProbedWithinTheWindow: the provider created the
// refund and the response was lost; reconciliation within the key window
// makes the next send a probe, the same bytes under the same key, which
// the provider answers from what it stored: one refund, sent, with its id.
func TestDroppedResponseIsProbedWithinTheWindow(t *testing.T) {
	for _, c := range []struct {
		fault    fakes.PaymentsFaultKind
		replayed bool
	}{{fakes.PayCommitThenDrop, true}, {fakes.PayDropBeforeCommit, false}} {
		t.Run(string(c.fault), func(t *testing.T) {
			rw := newRefund(t, keysOnly)
			rw.pay.fault(t, c.fault)
			if _, err := rw.send(); !errors.Is(err, ledger.ErrUnknownOutcome) {
				t.Fatalf("send: %v, want unknown", err)
			}
			if _, err := rw.send(); !errors.Is(err, ledger.ErrUnknownOutcome) {
				t.Fatalf("a second send before reconciling: %v, want refused as unknown", err)
			}
			if _, err := rw.reconcile(); !errors.Is(err, ledger.ErrHeld) {
				t.Fatalf("reconcile: %v, want held for the probe", err)
			}
			rw.wantState(ledger.StateHeld, ledger.HoldProbeDue)
			if _, err := rw.l.ReleaseHold(rw.ctx, rw.key, "lead", "looks fine"); err == nil {
				t.Fatal("a probe's hold was released without an outcome")
			}
			res, err := rw.send()
			rw.must(err)
			atts := rw.attempts()
			if res.Action.State != ledger.StateSent || rw.refunds() != 1 || len(atts) != 2 {
				t.Fatalf("after the probe: %s, %d refunds, %d attempts; want sent, 1, 2", res.Action.State, rw.refunds(), len(atts))
			}
			if atts[0].Wire != atts[1].Wire || atts[0].ProviderKey != atts[1].ProviderKey {
				t.Fatal("the probe did not repeat the first attempt's bytes under its key")
			}
			if res.Receipt.Replayed != c.replayed || !atts[0].Reconciled || atts[1].DestinationID == "" {
				t.Fatalf("replayed %v (want %v), first attempt reconciled %v, id %q", res.Receipt.Replayed, c.replayed, atts[0].Reconciled, atts[1].DestinationID)
			}
			m, err := rw.l.Metrics(rw.ctx)
			rw.must(err)
			if m.Confirmed != 1 {
				t.Fatalf("%d confirmed outcomes, want 1", m.Confirmed)
			}
			if v, err := rw.l.Check(rw.ctx); err != nil || len(v) > 0 {
				t.Fatalf("ledger check: %v %v", v, err)
			}
		})
	}
}

// TestProbePassesTheChecksOfASend: a probe is a send: the stop switch, a
// changed material field or another owner refuse it, and the refusal
// leaves the earlier attempt's outcome open (held for the probe, never
// approved or denied over it); once the refusal clears, it goes.
func TestProbePassesTheChecksOfASend(t *testing.T) {
	rw := newRefund(t, keysAndRef)
	rw.pay.fault(t, fakes.PayCommitThenDrop)
	rw.send()
	rw.reconcile()
	rw.must(rw.l.Stop(rw.ctx, "ops", "incident"))
	if _, err := rw.send(); !errors.Is(err, ledger.ErrStopped) {
		t.Fatalf("probe while stopped: %v", err)
	}
	rw.wantState(ledger.StateHeld, ledger.HoldProbeDue)
	rw.must(rw.l.Resume(rw.ctx, "ops", "over"))
	rw.wantState(ledger.StateHeld, ledger.HoldProbeDue)
	_, err := rw.l.Execute(rw.ctx, ledger.ExecuteRequest{Key: rw.key, Executor: "wf-refund",
		Reread: []ledger.MaterialRead{{Source: "payments", Field: "payment_state", Value: "disputed"}}}, rw.dest)
	if !errors.Is(err, ledger.ErrDenied) {
		t.Fatalf("probe with a changed payment state: %v, want denied", err)
	}
	rw.wantState(ledger.StateHeld, ledger.HoldProbeDue)
	if rw.pay.writes() != 1 {
		t.Fatalf("%d writes reached the provider, want only the first", rw.pay.writes())
	}
	_, err = rw.send()
	rw.must(err)
	if rw.refunds() != 1 {
		t.Fatalf("%d refunds", rw.refunds())
	}
}

// TestPastTheWindowNeverProbes: once the provider may have forgotten the
// key, the same key is a new request: reconciliation asks the reference
// (found: sent with the provider's id), or, where there is none, holds for
// a person; a probe already due is refused too.
func TestPastTheWindowNeverProbes(t *testing.T) {
	t.Run("found by reference", func(t *testing.T) {
		rw := newRefund(t, keysAndRef)
		rw.pay.fault(t, fakes.PayCommitThenDrop)
		rw.send()
		rw.clock.Advance(25 * time.Hour)
		a, err := rw.reconcile()
		rw.must(err)
		at := rw.attempts()[0]
		if a.State != ledger.StateSent || !strings.HasPrefix(at.DestinationID, "re_") || rw.refunds() != 1 || rw.pay.writes() != 1 {
			t.Fatalf("%s (%s), id %q, %d refunds, %d writes", a.State, a.Reason, at.DestinationID, rw.refunds(), rw.pay.writes())
		}
	})
	t.Run("no reference", func(t *testing.T) {
		rw := newRefund(t, keysOnly)
		rw.pay.fault(t, fakes.PayCommitThenDrop)
		rw.send()
		rw.clock.Advance(25 * time.Hour)
		a, err := rw.reconcile()
		if !errors.Is(err, ledger.ErrHeld) {
			t.Fatalf("reconcile: %v", err)
		}
		rw.wantState(ledger.StateHeld, ledger.HoldUnknownOutcome)
		// The hold says both why no probe and why no search.
		for _, want := range []string{"key window ended", "keeps no records"} {
			if !strings.Contains(a.Reason, want) {
				t.Errorf("the hold's reason lacks %q: %s", want, a.Reason)
			}
		}
	})
	t.Run("probe due, then the window ends", func(t *testing.T) {
		rw := newRefund(t, keysAndRef)
		rw.pay.fault(t, fakes.PayCommitThenDrop)
		rw.send()
		rw.reconcile()
		rw.wantState(ledger.StateHeld, ledger.HoldProbeDue)
		rw.clock.Advance(24 * time.Hour)
		if _, err := rw.send(); !errors.Is(err, ledger.ErrUnknownOutcome) {
			t.Fatalf("stale probe: %v", err)
		}
		rw.wantState(ledger.StateUnknown, "")
		if rw.pay.writes() != 1 {
			t.Fatalf("%d writes", rw.pay.writes())
		}
	})
}

// TestStored500IsReconciledByReference: a provider that stores its 500
// under the key answers it for ever; reconciliation does not probe, asks
// the reference, says "not found yet" within the search lag, and proves
// absence only after it. The retry then moves to the next key generation:
// one refund, never two.
func TestStored500IsReconciledByReference(t *testing.T) {
	rw := newRefund(t, stripeLike)
	rw.pay.SetStore5xx(true)
	rw.must(rw.pay.SetSearchLag(30 * time.Second))
	rw.pay.fault(t, fakes.PayError500)
	if _, err := rw.send(); !errors.Is(err, ledger.ErrUnknownOutcome) {
		t.Fatalf("send: %v, want unknown (the 500 is stored under the key)", err)
	}
	first := rw.attempts()[0]
	if first.HTTPStatus != 500 {
		t.Fatalf("status %d", first.HTTPStatus)
	}
	if _, err := rw.reconcile(); !errors.Is(err, ledger.ErrHeld) {
		t.Fatalf("reconcile within the lag: %v", err)
	}
	rw.wantState(ledger.StateHeld, ledger.HoldNotFoundYet)
	rw.settled(rw.key)
	rw.reconcile()
	rw.wantState(ledger.StateHeld, ledger.HoldSafeToRetry)
	_, err := rw.l.ReleaseHold(rw.ctx, rw.key, "lead", "no refund at the provider")
	rw.must(err)
	res, err := rw.send()
	rw.must(err)
	second := rw.attempts()[1]
	if res.Action.State != ledger.StateSent || rw.refunds() != 1 || second.KeyGeneration != 2 || second.ProviderKey == first.ProviderKey {
		t.Fatalf("%s, %d refunds, generation %d", res.Action.State, rw.refunds(), second.KeyGeneration)
	}
	// The old key still answers its 500: a retry under it would never
	// have gone through.
	if got := rw.pay.post(t, first.ProviderKey, []byte(first.Wire[strings.Index(first.Wire, "\r\n\r\n")+4:])); got != 500 {
		t.Fatalf("the first key answers %d, want its stored 500", got)
	}
}

// TestReferenceIsNotFoundYetWithinTheLag: a provider without keys, whose
// search lags: a refund created but not visible yet is "not found yet"
// (held, re-checked), never absent; after the lag it is found: sent.
func TestReferenceIsNotFoundYetWithinTheLag(t *testing.T) {
	rw := newRefund(t, referenceLag)
	rw.must(rw.pay.SetKeys(fakes.PaymentsNoKeys))
	rw.must(rw.pay.SetSearchLag(30 * time.Second))
	rw.pay.fault(t, fakes.PayCommitThenDrop)
	rw.send()
	rw.reconcile()
	rw.wantState(ledger.StateHeld, ledger.HoldNotFoundYet)
	rw.clock.Advance(31 * time.Second)
	a, err := rw.reconcile()
	rw.must(err)
	if a.State != ledger.StateSent || rw.refunds() != 1 {
		t.Fatalf("%s, %d refunds", a.State, rw.refunds())
	}
}

// TestNoDuplicateControlHoldsForAPerson: without a key or a reference,
// an unknown outcome is a person's, always.
func TestNoDuplicateControlHoldsForAPerson(t *testing.T) {
	rw := newRefund(t, noControl)
	rw.must(rw.pay.SetKeys(fakes.PaymentsNoKeys))
	rw.pay.fault(t, fakes.PayCommitThenDrop)
	rw.send()
	rw.settled(rw.key)
	if _, err := rw.reconcile(); !errors.Is(err, ledger.ErrHeld) {
		t.Fatalf("reconcile: %v", err)
	}
	rw.wantState(ledger.StateHeld, ledger.HoldUnknownOutcome)
}

// TestKeyReusedWithAnotherBodyIsHeld: someone who saw the gate's key on
// the wire writes another refund under it; the gate's retry under the key
// is answered 422 idempotency_error: a contradiction, held, never retried.
func TestKeyReusedWithAnotherBodyIsHeld(t *testing.T) {
	rw := newRefund(t, keysAndRef)
	rw.pay.fault(t, fakes.PayError429)
	if _, err := rw.send(); !errors.Is(err, ledger.ErrNotDelivered) {
		t.Fatalf("429: %v, want not delivered (approved again)", err)
	}
	key := rw.attempts()[0].ProviderKey
	if got := rw.pay.post(t, key, []byte(`{"payment": "pay_thief", "amount": 99900, "currency": "eur"}`)); got != 201 {
		t.Fatalf("the other write: %d", got)
	}
	if _, err := rw.send(); !errors.Is(err, ledger.ErrHeld) {
		t.Fatalf("retry under a reused key: %v, want held", err)
	}
	rw.wantState(ledger.StateHeld, ledger.HoldContradiction)
	if _, err := rw.send(); err == nil {
		t.Fatal("a contradiction was retried")
	}
	// Only the other write's refund: the gate's 422 created nothing, and
	// the contradiction was not sent again (the gate wrote twice: the 429
	// and the 422; the other write carries no action key).
	if n := rw.refunds(); n != 1 || rw.pay.writes() != 2 || rw.pay.Records().PerKey[rw.key] != 0 {
		t.Fatalf("%d refunds, %d gated writes; want the other write's 1, and 2", n, rw.pay.writes())
	}
}

// TestConcurrentRequestAtTheProviderIsUnknown: the provider is still
// processing the first write (its response held) when the executor's
// budget ends: unknown. The probe meanwhile is answered 409, in flight at
// the provider: unknown again, nothing created. Once the provider has
// answered, the next probe gets the stored result: one refund.
func TestConcurrentRequestAtTheProviderIsUnknown(t *testing.T) {
	rw := newRefund(t, keysAndRef)
	rw.l.Close()
	rw.open(ledger.WithLease(800 * time.Millisecond))
	rw.must(rw.pay.QueueFault(fakes.PaymentsFault{Kind: fakes.PayDelay}))
	if _, err := rw.send(); !errors.Is(err, ledger.ErrUnknownOutcome) {
		t.Fatalf("send whose response is held past its budget: %v", err)
	}
	rw.must(rw.pay.WaitHeld(rw.ctx, 1))
	rw.reconcile()
	rw.wantState(ledger.StateHeld, ledger.HoldProbeDue)
	if _, err := rw.send(); !errors.Is(err, ledger.ErrUnknownOutcome) {
		t.Fatalf("probe while the first is processed: %v, want unknown", err)
	}
	if at := rw.attempts()[1]; at.HTTPStatus != 409 || rw.refunds() != 1 {
		t.Fatalf("probe answered %d, %d refunds; want 409 and the first's one", at.HTTPStatus, rw.refunds())
	}
	rw.pay.Release()
	for rw.pay.Held() > 0 {
		// The held response is being written; the fake marks its key done
		// under the same lock that drops the count.
		runtime.Gosched()
	}
	rw.reconcile()
	res, err := rw.send()
	rw.must(err)
	if !res.Receipt.Replayed || rw.refunds() != 1 || res.Action.State != ledger.StateSent {
		t.Fatalf("third probe: replayed %v, %d refunds, %s", res.Receipt.Replayed, rw.refunds(), res.Action.State)
	}
}

// TestLookalikeRecordsAreContradictions: records that carry the action key
// (anyone can compute it) but not the attempt's provider-facing key, or
// the key but another amount (someone who saw it on the wire), are never
// proof that the refund was made: held as a contradiction for a person.
func TestLookalikeRecordsAreContradictions(t *testing.T) {
	for _, c := range []struct{ name, ref, amount string }{
		{"another key", "gh_forged", "1250"},
		{"the key, another amount", "", "99900"},
	} {
		t.Run(c.name, func(t *testing.T) {
			rw := newRefund(t, referenceLag)
			rw.must(rw.pay.SetKeys(fakes.PaymentsNoKeys))
			rw.pay.fault(t, fakes.PayDropBeforeCommit)
			if _, err := rw.send(); !errors.Is(err, ledger.ErrUnknownOutcome) {
				t.Fatalf("send: %v", err)
			}
			ref := c.ref
			if ref == "" {
				ref = rw.attempts()[0].ProviderKey
			}
			forged := `{"payment": "pay_3MtwBwLkdIwHu7ix", "amount": ` + c.amount + `, "currency": "eur",
				"metadata": {"gatehouse_key": "` + rw.key + `", "gatehouse_ref": "` + ref + `"}}`
			if got := rw.pay.post(t, "", []byte(forged)); got != 201 {
				t.Fatalf("the look-alike: %d", got)
			}
			rw.settled(rw.key)
			rw.reconcile()
			rw.wantState(ledger.StateHeld, ledger.HoldContradiction)
		})
	}
}

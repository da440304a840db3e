// Package proof holds the evidence behind the gate's promise: a crash matrix
// that kills real executor processes at every step boundary of a send, a
// takeover and an audience send, a multi-process stress run, and the checker
// both use to count the two failure kinds that matter:
//
//   - a duplicate: more than one arrival at the destination for one action
//     key, counted by the destination itself (the test mailbox), never by
//     what the sender believes it sent;
//   - a loss: an intended action that ends neither confirmed sent (with its
//     arrival) nor held for a person, nor refused by the gate with a
//     recorded reason.
//
// The checker is a library so that a test double that sends twice can be
// run through exactly the same code as the real runs (see TestCheckerCatches).
package proof

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"gatehouse/ledger"
	"gatehouse/testmailbox"
)

// Arrivals counts the messages a destination holds, per action key.
type Arrivals map[string]int

// MailboxArrivals reads every stored message of the test mailbox (the Go API
// with no limit, so no page can hide a second arrival) and counts them per
// action key. Messages without a key are counted under "".
func MailboxArrivals(ctx context.Context, mb *testmailbox.Mailbox) (Arrivals, error) {
	_, msgs, err := mb.List(ctx, testmailbox.Filter{})
	if err != nil {
		return nil, err
	}
	a := Arrivals{}
	for _, m := range msgs {
		a[m.ActionKey]++
	}
	return a, nil
}

// Total is the number of arrivals.
func (a Arrivals) Total() int {
	n := 0
	for _, c := range a {
		n += c
	}
	return n
}

// Verdict is what the checker found for one run. The run is sound when
// Duplicates, Losses and Contradictions are all empty.
type Verdict struct {
	Intended  int // actions the workflows meant to take
	Confirmed int // ledger says sent, and exactly one arrival
	Held      int // waiting for a person (held or unknown), at most one arrival
	Refused   int // denied, cancelled or failed with a recorded reason, nothing arrived
	Arrivals  int // every message the destination holds

	// Duplicates lists keys with more than one arrival.
	Duplicates []string
	// Losses lists intended keys that are neither confirmed, held nor
	// refused with a reason, each with why.
	Losses []string
	// Contradictions lists keys where the ledger and the destination
	// disagree in a way that is neither of the above (something arrived for
	// a key the gate refused, or for a key nobody intended).
	Contradictions []string
}

// OK reports whether the run shows neither failure kind.
func (v Verdict) OK() bool {
	return len(v.Duplicates) == 0 && len(v.Losses) == 0 && len(v.Contradictions) == 0
}

// String is the one-line summary the tests log.
func (v Verdict) String() string {
	s := fmt.Sprintf("intended=%d confirmed=%d held=%d refused=%d arrivals=%d duplicates=%d losses=%d contradictions=%d",
		v.Intended, v.Confirmed, v.Held, v.Refused, v.Arrivals, len(v.Duplicates), len(v.Losses), len(v.Contradictions))
	for _, l := range [][]string{v.Duplicates, v.Losses, v.Contradictions} {
		if len(l) > 0 {
			s += "\n  " + strings.Join(first(l, 10), "\n  ")
		}
	}
	return s
}

func first(l []string, n int) []string {
	if len(l) <= n {
		return l
	}
	return append(l[:n:n], fmt.Sprintf("… and %d more", len(l)-n))
}

// Check compares the ledger's account of every intended action with what
// arrived. intended may repeat keys (several workflows racing on one key
// intend one business action); each key is judged once.
func Check(ctx context.Context, l *ledger.Ledger, intended []string, arrived Arrivals) (Verdict, error) {
	keys := map[string]bool{}
	for _, k := range intended {
		keys[k] = true
	}
	v := Verdict{Intended: len(keys), Arrivals: arrived.Total()}
	for _, k := range sortedKeys(keys) {
		n := arrived[k]
		if n > 1 {
			v.Duplicates = append(v.Duplicates, fmt.Sprintf("%s: %d arrivals", k, n))
		}
		a, err := l.Action(ctx, k)
		if errors.Is(err, ledger.ErrNotFound) {
			v.Losses = append(v.Losses, k+": intended but never recorded by the gate")
			continue
		}
		if err != nil {
			return v, err
		}
		switch a.State {
		case ledger.StateSent:
			if n == 0 {
				v.Losses = append(v.Losses, k+": the ledger says sent but nothing arrived")
				continue
			}
			v.Confirmed++
		case ledger.StateHeld, ledger.StateUnknown:
			v.Held++
		case ledger.StateDenied, ledger.StateCancelled, ledger.StateFailed:
			if n > 0 {
				v.Contradictions = append(v.Contradictions, fmt.Sprintf("%s: %s (%s) but %d arrived", k, a.State, a.Reason, n))
				continue
			}
			v.Refused++
		default:
			v.Losses = append(v.Losses, fmt.Sprintf("%s: stranded in %s (%s), neither confirmed nor held", k, a.State, a.Reason))
		}
	}
	for k, n := range arrived {
		if !keys[k] {
			v.Contradictions = append(v.Contradictions, fmt.Sprintf("%q: %d arrival(s) nobody intended", k, n))
		}
	}
	sort.Strings(v.Contradictions)
	return v, nil
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

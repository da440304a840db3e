package proof_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"gatehouse/destination"
	"gatehouse/destination/registry"
	smtpdest "gatehouse/destination/smtp"
	"gatehouse/ledger"
	"gatehouse/proof"
)

// Stress shape. Every fifth action of every worker is the same business
// action in all workers (a shared key, raced by all eight processes at about
// the same moment); the rest are the worker's own.
const (
	stressWorkers   = 8
	stressTasks     = 16
	stressSharedMod = 5    // 1 in 5 actions (20%) races on a shared key
	takeoverP       = 0.01 // per action: a person takes the task over and hands it back
	materialP       = 0.03 // per action: consent re-read as changed at send time
	stressSeed      = 20260302
)

// stressFaults make the mailbox itself misbehave now and then, with seeded
// draws: a stored message whose reply is lost (unknown outcome, to be
// reconciled, never re-sent) and a temporary rejection (retried).
var stressFaults = []string{"accept_then_drop:p=0.01:seed=7", "reject_temporary:p=0.01:seed=11"}

// stressProposal is action i of worker w; the parent derives the same
// proposals to know every intended key.
func stressProposal(w, i int) ledger.Proposal {
	cust, event := fmt.Sprintf("c-w%d-%d", w, i), fmt.Sprintf("ev-w%d-%d", w, i)
	if i%stressSharedMod == 0 {
		cust, event = fmt.Sprintf("c-shared-%d", i), fmt.Sprintf("ev-shared-%d", i)
	}
	task := fmt.Sprintf("task-%02d", i%stressTasks)
	return ledger.Proposal{Task: ledger.TaskRef{ID: task}, Customer: cust, Event: event, ActionType: "reply_ack",
		Target: task, Recipient: cust + "@example.org", Subject: "We received your enquiry",
		Body: "We will answer within a working day.", Actor: "wf"}
}

// workerStats is what one worker process did, printed as one JSON line.
type workerStats struct {
	Actions   int            `json:"actions"`
	Sent      int            `json:"sent"`
	Takeovers int            `json:"takeovers"`
	Changes   int            `json:"material_changes"`
	Refusals  map[string]int `json:"refusals"`
	Errors    []string       `json:"errors"`
}

// playStress is one worker: n actions, each proposed (idempotent), approved
// when it needs it, and executed as the workflow "wf" that owns every task,
// with seeded takeovers and material changes. A temporary failure is
// retried a bounded number of times, as a workflow would.
func playStress(ctx context.Context, l *ledger.Ledger, dest destination.Destination) error {
	w, _ := strconv.Atoi(os.Getenv("PROOF_WORKER"))
	n, _ := strconv.Atoi(os.Getenv("PROOF_N"))
	rng := rand.New(rand.NewPCG(stressSeed, uint64(w)))
	st := workerStats{Refusals: map[string]int{}}
	refuse := func(err error) {
		for _, s := range []error{ledger.ErrDuplicate, ledger.ErrInFlight, ledger.ErrCancelled, ledger.ErrOwnershipConflict,
			ledger.ErrDenied, ledger.ErrHeld, ledger.ErrUnknownOutcome, ledger.ErrNotDelivered, ledger.ErrFailed,
			ledger.ErrWrongState, ledger.ErrApprovalStale} {
			if errors.Is(err, s) {
				st.Refusals[s.Error()]++
				return
			}
		}
		st.Errors = append(st.Errors, err.Error())
	}
	for i := range n {
		p := stressProposal(w, i)
		p.Destination, p.Lookup = dest.Identity(), destination.EndpointOf(dest).Lookup
		st.Actions++
		a, err := l.Propose(ctx, p)
		if err != nil {
			refuse(err)
			continue
		}
		switch a.State {
		case ledger.StateDrafting, ledger.StateAwaitingApproval, ledger.StateDenied:
			if _, err := l.Approve(ctx, a.Key, "lead", consentYes); err != nil {
				refuse(err)
				continue
			}
		}
		// A takeover lands between approval and execution: the gate must
		// stop the workflow's send (the owner changed after approval), here
		// and in any other worker racing on the task meanwhile.
		takeover := rng.Float64() < takeoverP
		if takeover {
			st.Takeovers++
			if _, err := l.TakeOver(ctx, p.Task, fmt.Sprintf("ops-%d", w), "stress: a person steps in"); err != nil {
				refuse(err)
			}
		}
		reread := consentYes
		if rng.Float64() < materialP {
			st.Changes++
			reread = []ledger.MaterialRead{{Source: "crm", Field: "consent", Value: "withdrawn"}}
		}
		for range 5 {
			_, err = l.Execute(ctx, ledger.ExecuteRequest{Key: a.Key, Executor: "wf", Reread: reread}, dest)
			if !errors.Is(err, ledger.ErrNotDelivered) {
				break
			}
			st.Refusals["retried: "+ledger.ErrNotDelivered.Error()]++
		}
		if err == nil {
			st.Sent++
		} else {
			refuse(err)
		}
		if takeover {
			if _, err := l.TakeOver(ctx, p.Task, "wf", "stress: handed back to the workflow"); err != nil {
				refuse(err)
			}
		}
	}
	return json.NewEncoder(os.Stdout).Encode(st)
}

func stressSize() (workers, n int) {
	if *long || os.Getenv("PROOF_LONG") != "" {
		return stressWorkers, 2000
	}
	return stressWorkers, 100
}

// TestStress races eight OS processes on one ledger file and one SMTP
// mailbox. Afterwards the ledger recovers and reconciles the unknown outcomes
// the mailbox's faults caused, and the checker must find no duplicate and no
// loss. -proof.long (or PROOF_LONG=1) runs 8 × 2,000 actions for make soak.
func TestStress(t *testing.T) {
	workers, n := stressSize()
	ctx, cancel := context.WithTimeout(context.Background(), 55*time.Minute)
	defer cancel()
	mb := startMailbox(t, stressFaults...)
	path := filepath.Join(t.TempDir(), "ledger.db")
	l, err := ledger.Open(path)
	must(t, err)
	for i := range stressTasks {
		_, err := l.Claim(ctx, ledger.TaskRef{ID: fmt.Sprintf("task-%02d", i)}, "wf")
		must(t, err)
	}
	must(t, l.Close())

	var intended []string
	for w := range workers {
		for i := range n {
			intended = append(intended, stressProposal(w, i).Key())
		}
	}

	results := make([]procResult, workers)
	var wg sync.WaitGroup
	began := time.Now()
	for w := range workers {
		wg.Go(func() {
			results[w] = run(t, proc{Role: "stress", KillAt: -1, Bound: 50 * time.Minute, Env: []string{"PROOF_LEDGER=" + path,
				"PROOF_TARGET=" + mb.Target(), "PROOF_WORKER=" + strconv.Itoa(w), "PROOF_N=" + strconv.Itoa(n)}})
		})
	}
	wg.Wait()
	elapsed := time.Since(began)

	total := workerStats{Refusals: map[string]int{}}
	for w, r := range results {
		var st workerStats
		if err := json.Unmarshal([]byte(strings.TrimSpace(r.Stdout)), &st); err != nil {
			t.Fatalf("worker %d output %q: %v", w, r.Stdout, err)
		}
		total.Actions += st.Actions
		total.Sent += st.Sent
		total.Takeovers += st.Takeovers
		total.Changes += st.Changes
		for k, v := range st.Refusals {
			total.Refusals[k] += v
		}
		total.Errors = append(total.Errors, st.Errors...)
	}
	if len(total.Errors) > 0 {
		t.Errorf("%d infrastructure errors reached a caller, first: %s", len(total.Errors), total.Errors[0])
	}

	// The workflow's restart: recovery ran in Open; reconcile every unknown
	// outcome from the mailbox's own records, never by re-sending.
	l, err = ledger.Open(path)
	must(t, err)
	defer l.Close()
	sd, err := smtpdest.New(mb.Target())
	must(t, err)
	dest := sd.Gate()
	_, unknown, err := l.ListActions(ctx, ledger.ActionFilter{States: []ledger.State{ledger.StateUnknown}, Limit: 100000})
	must(t, err)
	for _, a := range unknown {
		if _, err := l.Reconcile(ctx, ledger.ReconcileRequest{Key: a.Key, Actor: "ops", Open: registry.Records()}); err != nil {
			t.Errorf("reconcile %s: %v", a.Key, err)
		}
	}
	// A workflow re-queues what an ownership conflict left approved (the
	// task was briefly someone else's): execute it once more as the owner.
	// The gate decides again: sent, or denied because the approval was
	// bound to the other owner.
	_, pending, err := l.ListActions(ctx, ledger.ActionFilter{States: []ledger.State{ledger.StateApproved}, Limit: 100000})
	must(t, err)
	for _, a := range pending {
		_, err := l.Execute(ctx, ledger.ExecuteRequest{Key: a.Key, Executor: "wf", Reread: consentYes}, dest)
		if err != nil && !expectedRefusal(err) {
			t.Errorf("re-queued %s: %v", a.Key, err)
		}
	}
	arr, err := proof.MailboxArrivals(ctx, mb)
	must(t, err)
	v, err := proof.Check(ctx, l, intended, arr)
	must(t, err)
	st, err := mb.Stats(ctx)
	must(t, err)
	m, err := l.Metrics(ctx)
	must(t, err)

	t.Logf("stress: %d processes × %d actions = %d (%d distinct keys) in %v: %.0f actions/s, %.0f confirmed sends/s",
		workers, n, total.Actions, v.Intended, elapsed.Round(time.Millisecond),
		float64(total.Actions)/elapsed.Seconds(), float64(v.Confirmed)/elapsed.Seconds())
	t.Logf("stress: takeovers=%d material changes=%d unknown reconciled=%d re-queued after a conflict=%d faults fired=%v refusals=%v",
		total.Takeovers, total.Changes, len(unknown), len(pending), st.FaultsFired, total.Refusals)
	t.Logf("stress: ledger attempts=%d confirmed=%d duplicate blocks=%d denials=%d ownership conflicts=%d; mailbox stored=%d duplicates=%d",
		m.Attempts, m.Confirmed, m.DuplicateBlocks, m.Denials, m.OwnershipConflicts, st.Stored, st.Duplicates)
	t.Logf("stress verdict: %s", v)
	if !v.OK() {
		t.Errorf("stress run broke the promise: %s", v)
	}
	if st.Duplicates != 0 {
		t.Errorf("mailbox flagged %d duplicate arrivals", st.Duplicates)
	}
	// The shared keys must really have been raced: without duplicate blocks
	// the test proves nothing about concurrency.
	if m.DuplicateBlocks == 0 {
		t.Errorf("no duplicate blocks: the shared keys were not raced")
	}
}

package proof_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"gatehouse/destination"
	smtpdest "gatehouse/destination/smtp"
	"gatehouse/ledger"
	"gatehouse/proof"
	"gatehouse/testmailbox"
)

// world is one crash-matrix run: a fresh ledger file and a fresh mailbox in
// the test process, shared with the executor processes through their
// environment.
type world struct {
	t      *testing.T
	ctx    context.Context
	path   string
	mb     *testmailbox.Mailbox
	keys   []string
	task   string
	owner  string
	releas string
	// pay is the payments fake of an HTTP world (nil for a mailbox's),
	// declared to the gate under profile; see crash_http_test.go.
	pay *payWorld
	// slow, when set by a set-up, says why its timing did not hold on a
	// loaded machine (a send's budget spent before its hand-over): the
	// matrix sets the world up again.
	slow string
}

func newWorld(t *testing.T, faults ...string) *world {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return &world{t: t, ctx: ctx, path: filepath.Join(t.TempDir(), "ledger.db"), mb: startMailbox(t, faults...)}
}

func (w *world) env(extra ...string) []string {
	return append([]string{"PROOF_LEDGER=" + w.path, "PROOF_TARGET=" + w.target(), "PROOF_LEASE=" + proofLease.String(),
		"PROOF_KEYS=" + strings.Join(w.keys, ","), "PROOF_TASK=" + w.task, "PROOF_RELEASE=" + w.releas}, extra...)
}

// proofLease is the lease the proofs' processes run with: a killed
// executor's attempt can be concluded absent only once it has run out
// (plus the mailbox's settle time, see target), so it is short — but not
// so short that a loaded machine spends a send's budget (three quarters
// of it) before the hand-over, which leaves a recipient unsent and reads
// as a loss.
const proofLease = 1500 * time.Millisecond

// target is the mailbox's target with a short settle time: the test
// mailbox stores a message before it answers, so nothing lands late.
func (w *world) target() string {
	if w.pay != nil {
		return w.pay.target()
	}
	return w.mb.Target() + "&settle=100ms"
}

// destination is the endpoint of the mailbox every send goes to.
func (w *world) destination() destination.Endpoint {
	if w.pay != nil {
		return w.pay.endpoint(w.t)
	}
	d, err := smtpdest.New(w.target())
	must(w.t, err)
	return destination.EndpointOf(d.Gate())
}

func (w *world) open() *ledger.Ledger {
	l, err := ledger.Open(w.path)
	must(w.t, err)
	return l
}

// approvedActions records a task owned by owner with n approved actions to
// distinct recipients (c1@…, c2@…), as a workflow would before executing.
func (w *world) approvedActions(owner string, n int) {
	l := w.open()
	defer l.Close()
	w.task, w.owner = "task-1", owner
	_, err := l.Claim(w.ctx, ledger.TaskRef{ID: w.task, Customer: "acme"}, owner)
	must(w.t, err)
	ep := w.destination()
	for i := 1; i <= n; i++ {
		p := ledger.Proposal{Task: ledger.TaskRef{ID: w.task}, Customer: fmt.Sprintf("c%d", i), Event: "enq-1",
			ActionType: "reply_ack", Target: w.task, Recipient: fmt.Sprintf("c%d@example.org", i),
			Destination: ep.Destination, Lookup: ep.Lookup, Settle: &ep.Settle,
			Subject: "We received your enquiry", Body: "We will answer within a day.", Actor: owner}
		a, err := l.Propose(w.ctx, p)
		must(w.t, err)
		_, err = l.Approve(w.ctx, a.Key, "lead", consentYes)
		must(w.t, err)
		w.keys = append(w.keys, a.Key)
	}
}

// audienceRelease records an approved release of n eligible customers.
func (w *world) audienceRelease(n int) {
	l := w.open()
	defer l.Close()
	w.releas, w.owner = "spring", "wf-notice"
	var cs []ledger.Customer
	csv := "customer_id\n"
	for i := 1; i <= n; i++ {
		id := fmt.Sprintf("r%d", i)
		cs = append(cs, ledger.Customer{ID: id, Email: id + "@example.org", Consent: "yes"})
		csv += id + "\n"
	}
	must(w.t, l.UpsertCustomers(w.ctx, cs))
	_, err := l.ImportAudience(w.ctx, ledger.AudienceImport{ReleaseID: w.releas, SourceName: "spring.csv",
		Source: strings.NewReader(csv), ActionType: "notice", Subject: "Opening hours change",
		Body: "Our opening hours change on 1 April.", Actor: "ops"}, l.Customers())
	must(w.t, err)
	must(w.t, l.ApproveAudienceAt(w.ctx, w.releas, "lead", w.destination(), ""))
	rows, err := l.AudienceRows(w.ctx, w.releas, ledger.RowEligible, n, 0)
	must(w.t, err)
	for _, r := range rows {
		w.keys = append(w.keys, r.ActionKey)
	}
	if len(w.keys) != n {
		w.t.Fatalf("release has %d eligible recipients, want %d", len(w.keys), n)
	}
}

// verdict counts what arrived and judges every intended action.
func (w *world) verdict() proof.Verdict {
	l, err := ledger.Open(w.path, ledger.WithoutRecovery())
	must(w.t, err)
	defer l.Close()
	if w.pay != nil {
		v, err := proof.Check(w.ctx, l, w.keys, w.pay.arrivals())
		must(w.t, err)
		return v
	}
	arr, err := proof.MailboxArrivals(w.ctx, w.mb)
	must(w.t, err)
	v, err := proof.Check(w.ctx, l, w.keys, arr)
	must(w.t, err)
	// The mailbox flags a second arrival for a key on its own; its count
	// must agree with the checker's.
	st, err := w.mb.Stats(w.ctx)
	must(w.t, err)
	if st.DuplicateActionKeys != int64(len(v.Duplicates)) {
		w.t.Errorf("mailbox flags %d duplicate keys, checker %d", st.DuplicateActionKeys, len(v.Duplicates))
	}
	return v
}

// workflow is one flow of the crash matrix: how to set up a fresh world, the
// executor whose every boundary is a kill point, and the fresh process that
// recovers and continues afterwards.
type workflow struct {
	Name   string
	Faults []string
	Setup  func(w *world)
	Exec   func(w *world) proc
	Finish func(w *world) proc
	// World makes the fresh world (newWorld with Faults when nil).
	World func(t *testing.T) *world
	// BeforeFinish runs between the killed executor and the finish: the
	// time that passes before someone picks the run up.
	BeforeFinish func(w *world)
	// PersonHolds: the destination cannot always say what an interrupted
	// attempt did, and such an action ends held for a person — counted
	// apart, never as a loss.
	PersonHolds bool
}

// workflows are the mailbox's and the HTTP destination's (crash_http_test.go).
var workflows = append(append([]workflow{}, mailWorkflows...), httpWorkflows...)

var mailWorkflows = []workflow{
	{
		Name:   "Send",
		Setup:  func(w *world) { w.approvedActions("wf-ack", 3) },
		Exec:   func(w *world) proc { return proc{Role: "send", Env: w.env("PROOF_ACTOR=" + w.owner)} },
		Finish: func(w *world) proc { return proc{Role: "finish", Env: w.env("PROOF_ACTOR=" + w.owner), KillAt: -1} },
	},
	{
		// The mailbox stores the second message and drops the connection
		// before its reply: the executor records an unknown outcome.
		Name:   "SendAcceptThenDrop",
		Faults: []string{"accept_then_drop:count=1:to=c2@example.org"},
		Setup:  func(w *world) { w.approvedActions("wf-ack", 3) },
		Exec:   func(w *world) proc { return proc{Role: "send", Env: w.env("PROOF_ACTOR=" + w.owner)} },
		Finish: func(w *world) proc { return proc{Role: "finish", Env: w.env("PROOF_ACTOR=" + w.owner), KillAt: -1} },
	},
	{
		// The workflow's executor is killed after the mailbox accepted its
		// first message; then alice takes the task over (the executor whose
		// boundaries are the kill points), and after her crash a fresh
		// process acting for her finishes.
		Name: "Takeover",
		Setup: func(w *world) {
			w.approvedActions("wf-ack", 3)
			dead := run(w.t, proc{Role: "send", Env: w.env("PROOF_ACTOR=wf-ack"), KillAt: 1})
			switch got := dead.Marks[len(dead.Marks)-1]; got {
			case "a1/handed-over:accepted":
			case "a1/handed-over:not_delivered":
				// Its budget ran out before the hand-over: the machine
				// was too loaded for the proofs' short lease.
				w.slow = "the previous owner's first send was not handed over within its budget"
			default:
				w.t.Fatalf("previous owner died at %s", got)
			}
		},
		Exec:   func(w *world) proc { return proc{Role: "takeover", Env: w.env("PROOF_ACTOR=alice")} },
		Finish: func(w *world) proc { return proc{Role: "finish", Env: w.env("PROOF_ACTOR=alice"), KillAt: -1} },
	},
	{
		Name:  "AudienceSend",
		Setup: func(w *world) { w.audienceRelease(4) },
		Exec:  func(w *world) proc { return proc{Role: "audience", Env: w.env("PROOF_ACTOR=" + w.owner)} },
		Finish: func(w *world) proc {
			return proc{Role: "finish-audience", Env: w.env("PROOF_ACTOR=" + w.owner), KillAt: -1}
		},
	},
}

// TestCrashMatrix kills a real executor process with SIGKILL at every step
// boundary of each workflow, lets a fresh process recover and continue, and
// checks that no action key arrived twice and no intended action was lost.
// The boundaries are not listed by hand: a run without a kill reports them,
// and then each one becomes a kill point of its own run.
func TestCrashMatrix(t *testing.T) {
	var mu sync.Mutex
	var points, runs, dups, losses, personHolds int
	for _, wf := range workflows {
		fresh := func(t *testing.T) *world {
			if wf.World != nil {
				return wf.World(t)
			}
			return newWorld(t, wf.Faults...)
		}
		finish := func(w *world) proof.Verdict {
			if wf.BeforeFinish != nil {
				wf.BeforeFinish(w)
			}
			run(w.t, wf.Finish(w))
			return w.verdict()
		}
		// done says whether every action ended where it must: confirmed,
		// or (where the destination cannot tell) held for a person.
		done := func(v proof.Verdict) bool {
			if wf.PersonHolds {
				return v.Confirmed+v.Held == v.Intended && v.Refused == 0
			}
			return v.Confirmed == v.Intended
		}
		// setUp is a fresh world set up, again (three times at most)
		// where the set-up's timing did not hold.
		setUp := func(t *testing.T) *world {
			for try := 1; ; try++ {
				w := fresh(t)
				wf.Setup(w)
				if w.slow == "" {
					return w
				}
				if try == 3 {
					t.Fatalf("set-up, three times: %s", w.slow)
				}
				t.Logf("set-up again: %s", w.slow)
			}
		}
		t.Run(wf.Name, func(t *testing.T) {
			t.Parallel()
			// The uninterrupted run: every action must be confirmed, or
			// held where the profile says so.
			w := setUp(t)
			p := wf.Exec(w)
			p.KillAt = -1
			boundaries := run(t, p).Marks
			v := finish(w)
			if !v.OK() || !done(v) {
				t.Fatalf("uninterrupted run: %s", v)
			}
			t.Logf("%s: %d kill points: %s", wf.Name, len(boundaries), strings.Join(boundaries, " "))
			for i, b := range boundaries {
				t.Run(strings.NewReplacer("/", "_", ":", "_").Replace(b), func(t *testing.T) {
					w := setUp(t)
					p := wf.Exec(w)
					p.KillAt = i
					res := run(t, p)
					if last := res.Marks[len(res.Marks)-1]; last != b {
						t.Fatalf("killed at %s, want %s", last, b)
					}
					v := finish(w)
					t.Logf("killed at %s: %s", b, v)
					mu.Lock()
					points++
					runs++
					dups += len(v.Duplicates)
					losses += len(v.Losses)
					personHolds += v.Held
					mu.Unlock()
					if !v.OK() {
						t.Errorf("killed at %s: %s", b, v)
					}
					// Every action ends confirmed: after a crash nothing is
					// left for a person, because the mailbox (or the
					// provider's key, or its reference) can be consulted —
					// except at a provider with no duplicate control.
					if !done(v) {
						t.Errorf("killed at %s: %d of %d confirmed, %d held: %s", b, v.Confirmed, v.Intended, v.Held, v)
					}
				})
			}
		})
	}
	t.Cleanup(func() {
		t.Logf("crash matrix: %d workflows, %d kill points, %d killed runs (+%d uninterrupted), %d duplicates, %d losses, %d held for a person",
			len(workflows), points, runs, len(workflows), dups, losses, personHolds)
	})
}

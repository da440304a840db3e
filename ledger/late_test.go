package ledger_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"gatehouse/destination"
	"gatehouse/destination/fake"
	"gatehouse/ledger"
)

// begin starts an attempt of key and returns the message it would hand
// over, as a destination would store it if it landed.
func (w *world) begin(key string) (ledger.Attempt, destination.Message) {
	w.t.Helper()
	att, msg, err := w.l.BeginAttempt(w.ctx, ledger.ExecuteRequest{Key: key, Executor: "wf-ack", Reread: consentYes,
		Endpoint: destination.EndpointOf(w.dest)})
	w.must(err)
	return att, msg
}

// reconciledAbsent leaves key's first attempt settled as not arrived by
// reconciliation: its executor stood still after recording the intent,
// recovery made it unknown once its lease ran out, and after the settle
// time the records held nothing. It returns the attempt's message, which
// has not landed (yet).
func (w *world) reconciledAbsent(key string) destination.Message {
	w.t.Helper()
	_, msg := w.begin(key)
	w.clock.Advance(3 * time.Minute) // the lease is over
	_, err := w.l.Recover(w.ctx)
	w.must(err)
	w.settled(key)
	a, err := w.reconcile(key, "ops")
	if a.State != ledger.StateHeld || a.HoldCause != ledger.HoldSafeToRetry {
		w.t.Fatalf("reconcile after the settle time: %s/%s, %v; want held safe_to_retry", a.State, a.HoldCause, err)
	}
	return msg
}

// lateLines is the action's late evidence lines.
func lateLines(t *testing.T, w *world, key string) []ledger.Event {
	t.Helper()
	evs, err := w.l.History(w.ctx, ledger.HistoryFilter{ActionKey: key})
	w.must(err)
	var out []ledger.Event
	for _, e := range evs {
		if e.Kind == ledger.EvLateArrival || e.Kind == ledger.EvLateOutcome {
			out = append(out, e)
		}
	}
	return out
}

func findingsOf(t *testing.T, w *world, rule string) []ledger.Finding {
	t.Helper()
	fs, err := w.l.Findings(w.ctx)
	w.must(err)
	var out []ledger.Finding
	for _, f := range fs {
		if f.Rule == rule {
			out = append(out, f)
		}
	}
	return out
}

// TestLateArrivalIsRecordedOnceAndCounted: an attempt settled as not
// arrived whose message turns up in its destination's records after a
// second attempt was sent is one late evidence line naming attempt 1 and
// its Message-ID, however it is found and however often the records are
// read again; it is counted in the metrics, named by the findings, and the
// action, still sent, arrived twice.
func TestLateArrivalIsRecordedOnceAndCounted(t *testing.T) {
	for _, tc := range []struct {
		name string
		// setUp leaves the action with attempt 1 settled as not arrived
		// and attempt 2 about to be looked at; it returns attempt 1's
		// message, which has landed by then.
		setUp func(w *world, key string) destination.Message
		// look reads the records as the case does.
		look func(w *world, key string)
	}{
		{"ReconcileOfTheSentAction",
			func(w *world, key string) destination.Message {
				msg := w.reconciledAbsent(key)
				_, err := w.l.ReleaseHold(w.ctx, key, "lead", "nothing arrived")
				w.must(err)
				_, err = w.execute(key, "wf-ack", consentYes)
				w.must(err)
				w.dest.Inject(msg) // attempt 1 lands after all
				return msg
			},
			func(w *world, key string) {
				a, err := w.reconcile(key, "ops")
				w.must(err)
				if a.State != ledger.StateSent {
					w.t.Fatalf("a reconcile of a sent action left it %s", a.State)
				}
			}},
		{"ReconcileOfTheLaterAttempt",
			func(w *world, key string) destination.Message {
				// The destination said attempt 1 did not arrive (its
				// deadline hit the final dot), but the write finished.
				_, msg := w.begin(key)
				w.dest.Inject(msg)
				_, err := w.l.RecordOutcome(w.ctx, msg.TransportID, destination.OutcomeNotDelivered, "deadline passed at the final dot")
				w.must(err)
				w.dest.Script(destination.OutcomeUnknown) // attempt 2 is stored, its sender cannot know
				if _, err := w.execute(key, "wf-ack", consentYes); !errors.Is(err, ledger.ErrUnknownOutcome) {
					w.t.Fatalf("attempt 2: %v, want unknown", err)
				}
				return msg
			},
			func(w *world, key string) {
				// Attempt 1's message is its own, not a contradiction of
				// attempt 2, whose own message settles it as sent.
				a, err := w.reconcile(key, "ops")
				if err != nil || a.State != ledger.StateSent {
					w.t.Fatalf("reconcile of attempt 2: %s/%s %q, %v; want sent", a.State, a.HoldCause, a.Reason, err)
				}
			}},
		{"RecordsCheck",
			func(w *world, key string) destination.Message {
				msg := w.reconciledAbsent(key)
				_, err := w.l.ReleaseHold(w.ctx, key, "lead", "nothing arrived")
				w.must(err)
				_, err = w.execute(key, "wf-ack", consentYes)
				w.must(err)
				w.dest.Inject(msg)
				return msg
			},
			func(w *world, key string) {
				rc, err := w.l.RecheckRecords(w.ctx, records(w.dest), "gatehouse")
				w.must(err)
				if len(rc.Unreadable) != 0 {
					w.t.Fatalf("unreadable: %+v", rc.Unreadable)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			a := w.approved("wf-ack")
			msg := tc.setUp(w, a.Key)
			if lines := lateLines(t, w, a.Key); len(lines) != 0 {
				t.Fatalf("late evidence before anyone looked: %v", lines)
			}
			for range 3 { // found once, however often the records are read
				tc.look(w, a.Key)
			}
			lines := lateLines(t, w, a.Key)
			if len(lines) != 1 || lines[0].Kind != ledger.EvLateArrival {
				t.Fatalf("late evidence lines %v, want one late_arrival", lines)
			}
			for _, want := range []string{"Attempt 1 of " + a.Key + " arrived after all", msg.MessageID(), "settled as not_delivered",
				"The customer has it twice: attempts 1 and 2 arrived"} {
				if !strings.Contains(lines[0].Message, want) {
					t.Errorf("the line does not say %q:\n%s", want, lines[0].Message)
				}
			}
			got, err := w.l.Action(w.ctx, a.Key)
			w.must(err)
			if got.State != ledger.StateSent || !got.ArrivedTwice() || got.Arrivals() != 2 {
				t.Fatalf("action %s, %d arrivals; want sent, arrived twice", got.State, got.Arrivals())
			}
			atts, err := w.l.Attempts(w.ctx, a.Key)
			w.must(err)
			if atts[0].Outcome != destination.OutcomeNotDelivered || atts[0].ArrivedLate.IsZero() || !atts[1].ArrivedLate.IsZero() {
				t.Fatalf("attempts %+v: want attempt 1 still settled as not delivered, marked as arrived late", atts)
			}
			m, err := w.l.Metrics(w.ctx)
			w.must(err)
			if m.LateEvidence != 1 || m.ArrivedTwice != 1 {
				t.Fatalf("metrics: late evidence %d, arrived twice %d; want 1 and 1", m.LateEvidence, m.ArrivedTwice)
			}
			if f := findingsOf(t, w, ledger.RuleLateEvidence); len(f) != 1 || f[0].Key != a.Key || f[0].Attempt != 1 {
				t.Fatalf("late evidence findings %v, want attempt 1 of %s", f, a.Key)
			}
			if f := findingsOf(t, w, ledger.RuleArrivedTwice); len(f) != 1 || !strings.Contains(f[0].Detail, "attempts 1 and 2 arrived") {
				t.Fatalf("arrived twice findings %v", f)
			}
			if vs, err := w.l.Check(w.ctx); err != nil || len(vs) != 0 {
				t.Fatalf("check: %v %v", vs, err)
			}
			if n := w.dest.Arrivals(a.Key); n != 2 {
				t.Fatalf("the destination holds %d messages, want the 2 the ledger now knows of", n)
			}
		})
	}
}

// TestLateArrivalBeforeARetryIsNeverSentAgain: once an attempt settled as
// not arrived is known to have arrived, the gate sends the action no more:
// an action it would send next is held (arrived_late, which a release
// cannot lift), and any other refuses every later attempt as a duplicate.
func TestLateArrivalBeforeARetryIsNeverSentAgain(t *testing.T) {
	for _, tc := range []struct {
		name string
		// setUp leaves attempt 1 settled as not arrived with its message
		// landed, then reads the records as the case does.
		setUp func(w *world, key string)
		cause ledger.HoldCause // the hold it leaves
	}{
		{"HeldSafeToRetry", func(w *world, key string) {
			w.dest.Inject(w.reconciledAbsent(key)) // it lands before anyone released the hold
			_, err := w.reconcile(key, "ops")
			w.must(err)
		}, ledger.HoldArrivedLate},
		{"LaterAttemptAbsent", func(w *world, key string) {
			_, msg := w.begin(key)
			w.dest.Inject(msg)
			_, err := w.l.RecordOutcome(w.ctx, msg.TransportID, destination.OutcomeNotDelivered, "deadline passed at the final dot")
			w.must(err)
			_, msg2 := w.begin(key) // attempt 2: nothing of it lands
			_, err = w.l.RecordOutcome(w.ctx, msg2.TransportID, destination.OutcomeUnknown, "connection lost")
			w.must(err)
			w.settled(key)
			a, err := w.reconcile(key, "ops")
			if !strings.Contains(a.Reason, "attempt 1 arrived after all") {
				w.t.Fatalf("reconcile of an absent attempt 2: %s/%s %q, %v", a.State, a.HoldCause, a.Reason, err)
			}
		}, ledger.HoldArrivedLate},
		{"ApprovedFoundByTheRecordsCheck", func(w *world, key string) {
			_, msg := w.begin(key)
			w.dest.Inject(msg)
			_, err := w.l.RecordOutcome(w.ctx, msg.TransportID, destination.OutcomeNotDelivered, "deadline passed at the final dot")
			w.must(err)
			_, err = w.l.RecheckRecords(w.ctx, records(w.dest), "gatehouse")
			w.must(err)
		}, ledger.HoldArrivedLate},
		{"HeldByAPerson", func(w *world, key string) {
			_, msg := w.begin(key)
			w.dest.Inject(msg)
			_, err := w.l.RecordOutcome(w.ctx, msg.TransportID, destination.OutcomeNotDelivered, "deadline passed at the final dot")
			w.must(err)
			_, err = w.l.Hold(w.ctx, key, "lead", "checking with the customer")
			w.must(err)
			_, err = w.l.RecheckRecords(w.ctx, records(w.dest), "gatehouse")
			w.must(err)
		}, ledger.HoldOperator},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			a := w.approved("wf-ack")
			tc.setUp(w, a.Key)
			got, err := w.l.Action(w.ctx, a.Key)
			w.must(err)
			if got.State != ledger.StateHeld || got.HoldCause != tc.cause || got.Arrivals() != 1 || got.ArrivedTwice() {
				t.Fatalf("action %s/%s with %d arrivals; want held %s, 1 arrival", got.State, got.HoldCause, got.Arrivals(), tc.cause)
			}
			if lines := lateLines(t, w, a.Key); len(lines) != 1 || !strings.Contains(lines[0].Message, "will not send it again") {
				t.Fatalf("late evidence %v", lines)
			}
			_, err = w.l.ReleaseHold(w.ctx, a.Key, "lead", "retry")
			switch tc.cause {
			case ledger.HoldArrivedLate:
				if !errors.Is(err, ledger.ErrDuplicate) {
					t.Fatalf("release of an arrived_late hold: %v, want refused as a duplicate", err)
				}
			default:
				w.must(err)
			}
			calls := w.dest.Calls()
			if _, err := w.execute(a.Key, "wf-ack", consentYes); err == nil {
				t.Fatal("the gate sent an action whose message had arrived")
			}
			if w.dest.Calls() != calls {
				t.Fatal("the destination was called again")
			}
			if vs, err := w.l.Check(w.ctx); err != nil || len(vs) != 0 {
				t.Fatalf("check: %v %v", vs, err)
			}
		})
	}
}

// TestRecheckRecordsSaysWhatItCouldNotRead: records that fail are named
// per attempt and change nothing; a destination that keeps no records is
// counted apart; once the records answer again the next check finds what
// the first could not.
func TestRecheckRecordsSaysWhatItCouldNotRead(t *testing.T) {
	w := newWorld(t)
	a := w.approved("wf-ack")
	_, msg := w.begin(a.Key)
	w.dest.Inject(msg)
	_, err := w.l.RecordOutcome(w.ctx, msg.TransportID, destination.OutcomeNotDelivered, "deadline passed at the final dot")
	w.must(err)
	// A second action whose destination keeps no records.
	blind := &fake.Destination{Name: "fake://relay"}
	p := ackProposal("wf-ack")
	p.Event, p.Destination = "enquiry-1002", blind.Identity()
	b, err := w.l.Propose(w.ctx, p)
	w.must(err)
	_, err = w.l.Approve(w.ctx, b.Key, "lead", consentYes)
	w.must(err)
	blind.Script(destination.OutcomeNotDelivered)
	_, err = w.l.Execute(w.ctx, ledger.ExecuteRequest{Key: b.Key, Executor: "wf-ack", Reread: consentYes}, fake.Blind{D: blind})
	if !errors.Is(err, ledger.ErrNotDelivered) {
		t.Fatalf("send to the blind relay: %v", err)
	}

	w.dest.SetLookupDown(true)
	rc, err := w.l.RecheckRecords(w.ctx, records(w.dest), "gatehouse")
	w.must(err)
	if len(rc.Unreadable) != 1 || rc.Unreadable[0].Key != a.Key || rc.Unreadable[0].Attempt != 1 ||
		!errors.Is(rc.Unreadable[0].Err, destination.ErrLookupUnavailable) {
		t.Fatalf("unreadable %+v, want attempt 1 of %s", rc.Unreadable, a.Key)
	}
	if rc.NoRecords != 1 || rc.Read != 0 || len(rc.Found) != 0 {
		t.Fatalf("records check %+v, want 1 without records, none read or found", rc)
	}
	if lines := lateLines(t, w, a.Key); len(lines) != 0 {
		t.Fatalf("records that could not be read made evidence: %v", lines)
	}

	w.dest.SetLookupDown(false)
	rc, err = w.l.RecheckRecords(w.ctx, records(w.dest), "gatehouse")
	w.must(err)
	if len(rc.Unreadable) != 0 || rc.Read != 1 || len(rc.Found) != 1 || rc.Found[0].Key != a.Key || rc.Found[0].Attempt != 1 {
		t.Fatalf("records check once they answer: %+v", rc)
	}
	if !strings.Contains(rc.Found[0].Detail, msg.MessageID()) {
		t.Errorf("the finding does not name the message: %s", rc.Found[0].Detail)
	}
	if f := findingsOf(t, w, ledger.RuleLateEvidence); len(f) != 1 || f[0].Key != a.Key {
		t.Fatalf("findings after the records check: %v", f)
	}
}

// TestMigrationMarksTheLateAcceptancesOfOlderLedgers: a ledger written
// before schema 14 kept a late 250 only as its history line; migrating it
// marks the attempt that line names as arrived late, so its action is
// known to have arrived (and is never attempted again), and check agrees.
func TestMigrationMarksTheLateAcceptancesOfOlderLedgers(t *testing.T) {
	w := newWorld(t)
	a := w.approved("wf-ack")
	msg := w.reconciledAbsent(a.Key)
	_, err := w.l.ReleaseHold(w.ctx, a.Key, "lead", "nothing arrived")
	w.must(err)
	_, err = w.execute(a.Key, "wf-ack", consentYes)
	w.must(err)
	_, err = w.l.RecordOutcome(w.ctx, msg.TransportID, destination.OutcomeAccepted, "250 at last")
	w.must(err)
	w.l.Close()

	db := rawLedger(t, w)
	downgrade := []string{`DROP INDEX actions_late_arrivals`, `ALTER TABLE actions DROP COLUMN late_arrivals`,
		`ALTER TABLE attempts DROP COLUMN arrived_late`, `DROP TABLE unverified_actions`, `DROP TABLE unverified_releases`,
		`ALTER TABLE ledger_identity DROP COLUMN generation`, `ALTER TABLE ledger_identity DROP COLUMN backup_point`,
		`ALTER TABLE ledger_identity DROP COLUMN backup_at`, `ALTER TABLE ledger_identity DROP COLUMN restored_at`,
		`ALTER TABLE audience_releases DROP COLUMN case_sensitive_local_part`, `DROP INDEX IF EXISTS audience_rows_address`,
		`ALTER TABLE audience_rows DROP COLUMN address`, `ALTER TABLE audience_rows DROP COLUMN carrier_line`,
		`ALTER TABLE actions DROP COLUMN request`, `ALTER TABLE attempts DROP COLUMN wire`, `ALTER TABLE attempts DROP COLUMN provider_key`,
		`ALTER TABLE attempts DROP COLUMN key_generation`, `ALTER TABLE attempts DROP COLUMN http_status`,
		`ALTER TABLE attempts DROP COLUMN destination_action_id`, `ALTER TABLE ledger_identity DROP COLUMN key_secret`, `ALTER TABLE ledger_identity DROP COLUMN rehearsal`, `DROP TABLE policies`, `DROP TABLE actor_mode`, `DROP TABLE actor_tokens`, `DROP TABLE actors`, `ALTER TABLE approvals DROP COLUMN policy_version`, `ALTER TABLE actions DROP COLUMN settle`, `ALTER TABLE approvals DROP COLUMN settle`, `ALTER TABLE audience_releases DROP COLUMN settle`, `PRAGMA user_version = 12`}
	if onPostgres() {
		downgrade[len(downgrade)-1] = `UPDATE gatehouse_schema SET version = 12`
	}
	for _, q := range downgrade {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if from, to, err := ledger.Migrate(w.ctx, w.path); err != nil || from != 12 || to < 17 {
		t.Fatalf("migrate: %d -> %d, %v", from, to, err)
	}
	w.open()
	got, err := w.l.Action(w.ctx, a.Key)
	w.must(err)
	if got.LateArrivals != 1 || !got.ArrivedTwice() {
		t.Fatalf("after the migration: %d late arrivals, arrived twice %v; want 1, true", got.LateArrivals, got.ArrivedTwice())
	}
	atts, err := w.l.Attempts(w.ctx, a.Key)
	w.must(err)
	if atts[0].ArrivedLate.IsZero() || !atts[1].ArrivedLate.IsZero() {
		t.Fatalf("attempts after the migration: %+v; want attempt 1 marked, attempt 2 not", atts)
	}
	if vs, err := w.l.Check(w.ctx); err != nil || len(vs) != 0 {
		t.Fatalf("check: %v %v", vs, err)
	}
}

// TestAudienceReRunReadsTheRecordsBeforeItRetries: a recipient held as
// safe to retry (reconciliation found nothing after the settle time) whose
// message then lands is not released and sent again by the next run of the
// release: the run's reconcile reads its records again, finds the message,
// and the recipient is held as arrived late; everyone else is sent once.
func TestAudienceReRunReadsTheRecordsBeforeItRetries(t *testing.T) {
	w := newWorld(t)
	importMessy(t, w, "rel-1")
	w.must(w.l.ApproveAudience(w.ctx, "rel-1", "lead", fake.DefaultName, ""))
	rows, err := w.l.AudienceRows(w.ctx, "rel-1", ledger.RowEligible, 0, 0)
	w.must(err)
	// A first run recorded the first recipient's intent and stopped there.
	_, err = w.l.Claim(w.ctx, ledger.TaskRef{ID: "release:rel-1"}, "notice-bot")
	w.must(err)
	r := rows[0]
	p := ledger.Proposal{Task: ledger.TaskRef{ID: "release:rel-1"}, Customer: r.CustomerID, Event: "rel-1", ActionType: "notice",
		Target: "audience", Recipient: r.Email, Subject: "Opening hours change", Body: "Our opening hours change on 1 April.",
		Actor: "notice-bot", Destination: fake.DefaultName}
	_, err = w.l.Propose(w.ctx, p)
	w.must(err)
	_, err = w.l.Approve(w.ctx, p.Key(), "lead", consentYes)
	w.must(err)
	_, msg, err := w.l.BeginAttempt(w.ctx, ledger.ExecuteRequest{Key: p.Key(), Executor: "notice-bot", Reread: consentYes,
		Endpoint: destination.EndpointOf(w.dest)})
	w.must(err)
	w.clock.Advance(5 * time.Minute) // its lease and settle time are over
	_, err = w.l.Recover(w.ctx)
	w.must(err)
	if a, _ := w.reconcile(p.Key(), "ops"); a.HoldCause != ledger.HoldSafeToRetry {
		t.Fatalf("reconcile: %s/%s, want held safe to retry", a.State, a.HoldCause)
	}
	w.dest.Inject(msg) // it lands before the release is run again

	s, err := w.l.SendAudience(w.ctx, ledger.AudienceSend{ReleaseID: "rel-1", Actor: "notice-bot"}, w.dest, testCRM())
	w.must(err)
	for _, row := range rows {
		if n := w.dest.Arrivals(row.ActionKey); n != 1 {
			t.Errorf("%s arrived %d times, want 1", row.ActionKey, n)
		}
	}
	a, err := w.l.Action(w.ctx, p.Key())
	w.must(err)
	if a.State != ledger.StateHeld || a.HoldCause != ledger.HoldArrivedLate || a.LateArrivals != 1 {
		t.Fatalf("the recipient whose message landed: %s/%s, %d late arrivals; want held arrived_late, 1", a.State, a.HoldCause, a.LateArrivals)
	}
	if s.Confirmed != 2 || s.Held != 1 {
		t.Fatalf("summary: %d confirmed, %d held; want 2 and 1", s.Confirmed, s.Held)
	}
}

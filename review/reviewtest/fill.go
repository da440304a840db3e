// Package reviewtest builds large ledgers for the review's benchmarks:
// proposing 100,000 actions through the gate would take minutes, so the
// rows go straight into the ledger's own schema in one transaction, with
// the history a gate would have written (ten lines per action).
package reviewtest

import (
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"time"

	_ "github.com/mattn/go-sqlite3" // the driver the ledger registers too

	"gatehouse/ledger"
)

// Start is the first moment of a filled ledger; its history spans 30 days.
var Start = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)

// LinesPerAction is how many history lines Fill writes per action.
const LinesPerAction = 10

// Fill creates a ledger at path with n actions on 1,000 tasks and
// n×LinesPerAction history lines, and one stop at 60% of the history
// (resumed at 61%). Most actions are sent; every 50th is denied, every
// 97th has an unknown outcome, every 41st waits for approval.
func Fill(path string, n int) error {
	l, err := ledger.Open(path) // creates the schema
	if err != nil {
		return err
	}
	l.Close()
	db, err := sql.Open("sqlite3", path)
	if err != nil {
		return err
	}
	defer db.Close()
	tx, err := db.Begin()
	if err != nil {
		return err
	}
	defer tx.Rollback()
	span := int64(30 * 24 * time.Hour)
	step := span / int64(n)
	start := Start.UnixNano()
	for i := range 1000 {
		if _, err := tx.Exec(`INSERT INTO tasks (id, customer, subject, owner, created_at, updated_at)
			VALUES (?, ?, 'Where is my order?', 'ack-workflow', ?, ?)`, fmt.Sprintf("T-%04d", i), fmt.Sprintf("cust-%04d", i), start, start); err != nil {
			return err
		}
	}
	f, err := newFiller(tx)
	if err != nil {
		return err
	}
	for i := range n {
		at := start + int64(i)*step
		if i == n*6/10 || i == n*61/100 {
			kind, msg := ledger.EvStopped, "lead stopped all execution because: wrong template."
			if i != n*6/10 {
				kind, msg = ledger.EvResumed, "lead resumed execution because: fixed."
			}
			if _, err := f.ev.Exec(at, "lead", "", "", string(kind), msg, "bench", "", ""); err != nil {
				return err
			}
		}
		if err := f.action(i, at, step); err != nil {
			return err
		}
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	// Fold the bulk insert into the main file, as a long-running ledger's
	// checkpoints would have.
	_, err = db.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`)
	return err
}

type filler struct{ act, ev, ap, att, chk *sql.Stmt }

func newFiller(tx *sql.Tx) (*filler, error) {
	var f filler
	for _, s := range []struct {
		dst *(*sql.Stmt)
		q   string
	}{
		{&f.act, `INSERT INTO actions (key, task_id, customer, event, action_type, target, revision, recipient, subject, body, digest,
			state, hold_cause, proposed_by, destination, sender, created_at, updated_at)
			VALUES (?, ?, ?, ?, 'reply_ack', ?, 0, ?, 'We have your enquiry', 'Hello', 'sha256:00', ?, '', 'ack-workflow',
			'smtp://mail.example.test:25', 'gatehouse@localhost', ?, ?)`},
		{&f.ev, `INSERT INTO events (at, actor, task_id, action_key, kind, message, reason, to_state, detail) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`},
		{&f.ap, `INSERT INTO approvals (action_key, approver, digest, recipient, target, destination, sender, owner, material, at)
			VALUES (?, 'lead', 'sha256:00', ?, ?, 'smtp://mail.example.test:25', 'gatehouse@localhost', 'ack-workflow', '[{"Source":"crm","Field":"consent","Value":"yes","Unavailable":false}]', ?)`},
		{&f.att, `INSERT INTO attempts (action_key, number, transport_id, executor, holder, started_at, lease_until, outcome, outcome_at,
			destination, message_id, recipient, sender) VALUES (?, 1, ?, 'ack-workflow', 'bench', ?, ?, ?, ?, 'smtp://mail.example.test:25', ?, ?, 'gatehouse@localhost')`},
		{&f.chk, `INSERT INTO material_checks (action_key, attempt, at, source, field, approved, read_value, matched, unavailable)
			VALUES (?, 1, ?, 'crm', 'consent', 'yes', ?, ?, 0)`},
	} {
		st, err := tx.Prepare(s.q)
		if err != nil {
			return nil, err
		}
		*s.dst = st
	}
	return &f, nil
}

// action writes one action, its approval, attempt, check and ten lines.
func (f *filler) action(i int, at, step int64) error {
	task, cust := fmt.Sprintf("T-%04d", i%1000), fmt.Sprintf("cust-%04d", i%1000)
	event := fmt.Sprintf("enquiry-%d", i)
	k := ledger.Key(cust, event, "reply_ack", task, 0)
	to := cust + "@example.test"
	final, outcome, last := "sent", "accepted", ledger.EvSent
	switch {
	case i%50 == 0:
		final, last = "denied", ledger.EvDenied
	case i%97 == 0:
		final, outcome, last = "unknown", "unknown", ledger.EvUnknown
	case i%41 == 0:
		final, last = "awaiting_approval", ledger.EvSubmitted
	}
	if _, err := f.act.Exec(k, task, cust, event, task, to, final, at, at); err != nil {
		return err
	}
	d := step / LinesPerAction
	lines := []struct {
		kind     ledger.EventKind
		actor    string
		to, msg  string
		detailed bool
	}{
		{ledger.EvViewing, "bea", "", "bea is viewing task " + task + ".", false},
		{ledger.EvProposed, "ack-workflow", "drafting", "ack-workflow proposed reply_ack to " + to + " (draft).", false},
		{ledger.EvProposalRepeated, "ack-workflow", "", "ack-workflow proposed " + k + " again with the same content.", false},
		{ledger.EvSubmitted, "ack-workflow", "awaiting_approval", "ack-workflow submitted " + k + " for approval.", false},
		{ledger.EvApproved, "lead", "approved", "lead approved " + k + " (crm.consent=yes).", true},
		{ledger.EvAttemptStarted, "ack-workflow", "executing", "ack-workflow started attempt 1 of " + k + ".", true},
		{last, "ack-workflow", final, "Attempt 1 of " + k + ": " + final + ".", false},
		{ledger.EvDuplicateBlock, "ack-workflow", "", "The gate blocked a second execution of " + k + ".", false},
		{ledger.EvLeft, "bea", "", "bea left task " + task + ".", false},
		{ledger.EvProposalRepeated, "ack-workflow", "", "ack-workflow proposed " + k + " again with the same content.", false},
	}
	switch final {
	case "denied":
		lines[5] = lines[2]
		lines[6].msg = "The gate denied ack-workflow's send of " + k + ": crm.consent changed."
	case "awaiting_approval":
		lines[4], lines[5], lines[6] = lines[2], lines[2], lines[2]
	}
	for j, ln := range lines {
		detail := ""
		if ln.detailed {
			detail = `{"destination":"smtp://mail.example.test:25"}`
		}
		if _, err := f.ev.Exec(at+int64(j)*d, ln.actor, task, k, string(ln.kind), ln.msg, "", ln.to, detail); err != nil {
			return err
		}
	}
	if final == "awaiting_approval" {
		return nil
	}
	if _, err := f.ap.Exec(k, to, task, at+4*d); err != nil {
		return err
	}
	read, matched := "yes", 1
	if final == "denied" {
		read, matched = "no", 0
	}
	if _, err := f.chk.Exec(k, at+5*d, read, matched); err != nil {
		return err
	}
	if final == "denied" {
		return nil
	}
	id := transportID(k)
	_, err := f.att.Exec(k, id, at+5*d, at+5*d, outcome, at+6*d, id, to)
	return err
}

// transportID is a fixed Message-ID for the filled attempt of k, so that a
// filled ledger and the reports made of it are the same every time; the
// gate itself draws its ids at random (ledger.NewTransportID).
func transportID(k string) string {
	sum := sha256.Sum256([]byte(k))
	return fmt.Sprintf("gh-%s-a1@gatehouse.invalid", hex.EncodeToString(sum[:10]))
}

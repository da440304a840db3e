package proof_test

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"gatehouse/destination"
	smtpdest "gatehouse/destination/smtp"
	"gatehouse/ledger"
	"gatehouse/ledger/answer"
	"gatehouse/testmailbox"
)

// The nemeses of what the executing process supplies (DESIGN.md invariant
// 14): a clock from its environment, a settle time named in the URL it
// sends to, a backup it copies into place; and records cleared behind the
// ledger's back before a restore. Each may make the gate more careful,
// never less. Each nemesis plays the sequence that sent a message twice
// when the gate trusted what it was handed, states what the gate must do
// instead (refuse, or hold for a person), and records a problem when it
// does not; the duplicate it leads to is then counted by the checker like
// any other.

// onlySupplied picks one of these nemeses to run alone, to show what each
// finds by itself.
var onlySupplied = flag.String("proof.nemesis", "", "run only this one of the operation search's nemeses of what a process supplies: "+
	strings.Join(suppliedNemeses, ", ")+" (default: all)")

// suppliedNemeses are the names -proof.nemesis takes.
var suppliedNemeses = []string{"forged-clock", "settle-at-send", "backup-copied", "records-cleared"}

// supplied reports whether the nemesis name runs in this search.
func supplied(name string) bool { return *onlySupplied == "" || *onlySupplied == name }

// suppliedOdds: each of these nemeses fires on one step in suppliedOdds.
const suppliedOdds = 118

// stepSupplied fires, now and then, one of the nemeses of what a process
// supplies, after the step's operation. They draw from a stream of their
// own (of the same seed), so the search's other draws are what they were
// without them; a search run against a double (TestSearchCatchesTheOldDefects)
// runs without them, as the old defects were found.
func (w *searchWorld) stepSupplied(key string) {
	if w.supplying == nil {
		return
	}
	switch w.supplying.IntN(suppliedOdds) {
	case 0:
		w.opForgedClock(key)
	case 1:
		w.opSettleNamedAtSend(key)
	case 2:
		w.opBackupCopiedUnmarked(key)
	case 3:
		w.opRecordsClearedBeforeRestore(key)
	}
}

// checkSuppliedFlag refuses a -proof.nemesis that names none of them.
func checkSuppliedFlag(t *testing.T) {
	if *onlySupplied != "" && !slices.Contains(suppliedNemeses, *onlySupplied) {
		t.Fatalf("-proof.nemesis=%s: want one of %s", *onlySupplied, strings.Join(suppliedNemeses, ", "))
	}
}

// ---- merge adaptors ---------------------------------------------------
//
// The four functions below are the one place these nemeses decide what
// the gate's answer to them looks like. They are written against the
// answers the gate gives today for the nearest refusals; adjust them here,
// and only here, should the gate's answer come out otherwise.

// forgedClockRefused: a gate verb run with $GATEHOUSE_REHEARSAL_CLOCK on a
// ledger not marked as a rehearsal's refuses to start: exit 2, naming the
// variable, nothing recorded.
func forgedClockRefused(code int, out string) bool {
	return code == answer.Usage && strings.Contains(out, rehearsalClockEnv)
}

// settleRefused: a send whose destination names another settle time (or
// any other records parameter) than the approved one is refused as not
// the approved destination: exit 17, nothing recorded but the refusal.
func settleRefused(err error) bool {
	return err != nil && answer.Code(err) == answer.WrongDestination
}

// backupRefused: a ledger file that is a backup refuses to be written as a
// live ledger, whether at open or at the write, saying to run `ledger
// restore` or `ledger mark-restored` (ledger.ErrBackup).
func backupRefused(err error) bool {
	return errors.Is(err, ledger.ErrBackup)
}

// heldCannotBeEstablished: a send after a restore, whose destination's
// records are of another epoch than the newest one recorded before the
// backup, is held for a person: the records prove nothing.
func heldCannotBeEstablished(err error, a ledger.Action) bool {
	return errors.Is(err, ledger.ErrHeld) && a.State == ledger.StateHeld && a.HoldCause == ledger.HoldUnverified
}

// ---- a clock from the environment --------------------------------------

// forgedAhead is how far ahead of the world the forged clock runs: far past
// any lease and settle time of the search.
const forgedAhead = 2 * time.Hour

// rehearsalClockEnv is the variable a rehearsal hands its clock to the
// workflows it runs in.
const rehearsalClockEnv = "GATEHOUSE_REHEARSAL_CLOCK"

// forgedClock serves, on loopback, what a rehearsal's clock serves: a time
// (the world's, forgedAhead on) and the ledger it belongs to (the search's,
// which no rehearsal made). Anyone on the host can serve this.
func (w *searchWorld) forgedClock() string {
	if w.forged != nil {
		return w.forged.URL
	}
	// httptest listens on 127.0.0.1: the loopback a rehearsal's clock is
	// served on.
	w.forged = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) {
		rw.Header().Set("Content-Type", "application/json")
		json.NewEncoder(rw).Encode(map[string]any{"now": w.clock.Now().Add(forgedAhead), "ledger": w.path})
	}))
	w.t.Cleanup(w.forged.Close)
	return w.forged.URL
}

// opForgedClock is a workflow process whose environment carries a clock
// two hours ahead, while another executor's attempt is in flight behind a
// relay that holds its final dot: it runs `gate reconcile`, `gate
// release-hold` and `gate send` on the action. Trusted, the clock says the
// attempt's lease and settle time are long over: "did not arrive; safe to
// retry", released, sent again, and the held message lands after: two
// arrivals. The gate must refuse to start every one of them (the ledger
// is not a rehearsal's). It needs the built binary: the clock is read from
// a process's environment.
func (w *searchWorld) opForgedClock(key string) {
	if !supplied("forged-clock") {
		return
	}
	if w.bin == "" {
		return
	}
	if key = w.approvedKey(key); key == "" || !w.sendable(key) || !w.approveAfresh(key) {
		return
	}
	budget := searchLease * 3 / 4
	hold := budget + time.Duration(1+w.supplying.IntN(int((searchLease+w.settle-budget)/time.Second)))*time.Second
	if _, ok, _ := w.sendThroughHoldingRelay(key, w.relay, hold); !ok {
		return
	}
	w.nemesis("forged clock in a process's environment")
	env := rehearsalClockEnv + "=" + w.forgedClock()
	mat := w.reread(key, false)
	for _, args := range [][]string{
		{"gate", "reconcile", "--ledger", w.path, "--key", key, "--as", "ops"},
		{"gate", "release-hold", "--ledger", w.path, "--key", key, "--as", "ops", "--reason", "reconcile said safe to retry"},
		{"gate", "send", "--ledger", w.path, "--key", key, "--as", w.owner(w.action(key).TaskID), "--material", "crm.consent=" + mat[0].Value},
	} {
		before := w.action(key)
		last := w.lastLine()
		code, out := w.runBinaryWith([]string{env}, args...)
		after := w.action(key)
		w.logf("gate %s %s with a clock %s ahead in its environment: %s/%s → %s/%s: exit %d",
			args[1], key, forgedAhead, before.State, before.HoldCause, after.State, after.HoldCause, code)
		if forgedClockRefused(code, out) {
			w.count["forged clock: refused"]++
			if after.Version != before.Version || w.lastLine() != last {
				w.problem("gate %s of %s refused the forged clock (exit %d) but recorded something: %s/%s v%d → %s/%s v%d",
					args[1], key, code, before.State, before.HoldCause, before.Version, after.State, after.HoldCause, after.Version)
			}
			continue
		}
		w.count["forged clock: honoured"]++
		w.problem("gate %s of %s ran on a clock %s ahead from $%s on a ledger no rehearsal made: exit %d, %s/%s → %s/%s: %s",
			args[1], key, forgedAhead, rehearsalClockEnv, code, before.State, before.HoldCause, after.State, after.HoldCause, lastLine(out))
	}
}

// runBinaryWith is runBinary with env added to the process's environment.
func (w *searchWorld) runBinaryWith(env []string, args ...string) (int, string) {
	w.binEnv = env
	defer func() { w.binEnv = nil }()
	return w.runBinary(args...)
}

// lastLine is the last line a process wrote: where the gate says what it did.
func lastLine(s string) string {
	s = strings.TrimSpace(s)
	return s[strings.LastIndex(s, "\n")+1:]
}

// ---- a settle time named at send ----------------------------------------

// namedSettle is the settle time the send names, shorter than the
// destination's own: a relay may still land the message long after it.
const namedSettle = time.Second

// settleNamedAtSend is the relay reached through the approved target with
// its own settle parameter added: the same identity, the same records,
// another settle time.
func (w *searchWorld) settleNamedAtSend() destination.Destination {
	if w.namedSettle != nil {
		return w.namedSettle
	}
	target := w.mb.Target() + "&settle=" + namedSettle.String()
	sd, err := smtpdest.New(target, smtpdest.WithDataTimeout(100*time.Millisecond))
	if err != nil {
		w.t.Fatalf("%s: %v", target, err)
	}
	ld, ok := sd.Looking()
	if !ok {
		w.t.Fatalf("%s names no records", target)
	}
	w.namedSettle = ld
	return ld
}

// opSettleNamedAtSend is a send to the approved mailbox whose URL adds
// settle=1s, through a relay that holds the final dot past the lease plus
// that second (and within the destination's own settle time). Trusted, the
// attempt records a settle time of one second: a reconcile once it passed,
// while the relay still holds the message, says "safe to retry", the
// retry arrives, and so does the held one. The gate must refuse the send
// as not the approved destination, recording nothing but the refusal.
func (w *searchWorld) opSettleNamedAtSend(key string) {
	if !supplied("settle-at-send") {
		return
	}
	if key = w.approvedKey(key); key == "" || !w.sendable(key) || !w.approveAfresh(key) {
		return
	}
	dest := w.settleNamedAtSend()
	// Past the lease and the named settle time, within the destination's
	// own settle time.
	least := searchLease + namedSettle + time.Second
	hold := least + time.Duration(w.supplying.IntN(int((searchLease+w.settle-least)/time.Second)+1))*time.Second
	before := w.action(key)
	attempts := w.lastAttempt(key)
	w.nemesis("send names another settle time")
	h, ok, err := w.sendThroughHoldingRelay(key, dest, hold)
	if settleRefused(err) {
		w.count["settle named at send: refused"]++
		if after := w.action(key); after.State != before.State || after.HoldCause != before.HoldCause || w.lastAttempt(key) != attempts {
			w.problem("the send of %s naming settle=%s was refused (%v) but changed %s/%s into %s/%s (attempts %d → %d)",
				key, namedSettle, err, before.State, before.HoldCause, after.State, after.HoldCause, attempts, w.lastAttempt(key))
		}
		return
	}
	if !ok {
		return // refused for another reason, or never reached the final dot: checked where it was sent
	}
	w.count["settle named at send: taken"]++
	w.problem("the send of %s naming settle=%s at %s was not refused: attempt %d settles at %s, %s after its lease",
		key, namedSettle, destination.EndpointOf(dest).Destination, h.att.Number, h.att.SettlesAt.Format(time.TimeOnly), namedSettle)
	// Someone reconciles once the named settle time passed, while the
	// relay still holds the message, as a workflow polling would.
	w.advance(h.begun.Add(least).Sub(w.clock.Now()))
	w.retryWhileHeld(key, "once the settle time named at send passed")
}

// ---- a backup copied into place ------------------------------------------

// opBackupCopiedUnmarked is an operator who puts the tool's own backup back
// by hand (rm the WAL, cp the backup over the ledger) and does not run
// mark-restored: the ledger takes a backup, sends an approved action, is
// overwritten by the backup, and a workflow sends the action again. The
// copy still carries the marks of a backup, which no live ledger has: the
// gate must refuse to write it, and the operator then does what the
// refusal says (`ledger restore --discard-newer` from the backup). Trusted
// as live, the copy sends again what the lost history sent. SQLite only:
// a PostgreSQL ledger has no file to copy.
func (w *searchWorld) opBackupCopiedUnmarked(key string) {
	if !supplied("backup-copied") {
		return
	}
	if !w.file || w.paused != nil {
		return
	}
	if key = w.approvedKey(key); key == "" || !w.sendable(key) || !w.approveAfresh(key) {
		return
	}
	bk := filepath.Join(w.dir, "copied-by-hand.db")
	w.backupTo(bk)
	if w.sendForgotten(key) != ledger.StateSent {
		return // nothing for the copy to forget
	}
	w.nemesis("backup copied into place, not marked restored")
	lin := w.beforePutBack()
	if err := copyBackupByHand(bk, w.path); err != nil {
		w.t.Fatalf("copy %s over the ledger: %v", bk, err)
	}
	l, err := w.open()
	if backupRefused(err) {
		w.count["backup copied into place: refused at open"]++
		w.logf("copy %s over the ledger by hand; open → %v", filepath.Base(bk), errWord(err))
		w.restoreAsTold(bk, lin)
		return
	}
	if err != nil {
		w.t.Fatalf("open the ledger copied from %s: %v", bk, err)
	}
	w.l = l
	// From here the ledger lives as the copy made it (a past the world
	// moved on from, unless the gate refuses to write it): what it sends is
	// remembered from here on, as after a restore.
	w.life++
	w.scanned = w.lastLine()
	w.restoredAt = w.clock.Now()
	// A workflow sends what it finds approved in the copy.
	if k := w.approvedKey(key); k != "" {
		key = k
	}
	before, last := w.action(key), w.lastLine()
	executor := w.owner(before.TaskID)
	if executor == "" {
		executor = "wf-1" // a task nobody owns: the gate holds the action, a write too
	}
	_, err = w.l.Execute(w.ctx, ledger.ExecuteRequest{Key: key, Executor: executor, Reread: w.reread(key, false)}, w.dest)
	after := w.action(key)
	w.count["send"]++
	w.logf("copy %s over the ledger by hand; send %s by %s %s → %s: %v", filepath.Base(bk), key, executor, before.State, after.State, errWord(err))
	written := after.Version != before.Version || w.lastLine() != last
	if backupRefused(err) {
		w.count["backup copied into place: write refused"]++
		if written {
			w.problem("the send of %s on a backup copied into place was refused (%v) but recorded something", key, err)
		}
		if err := w.l.Close(); err != nil {
			w.t.Fatalf("close the copied backup: %v", err)
		}
		w.restoreAsTold(bk, lin)
		return
	}
	if written {
		w.count["backup copied into place: written"]++
		w.problem("a backup copied into place by hand and not marked restored was written as a live ledger: send %s by %s %s → %s: %v",
			key, executor, before.State, after.State, errWord(err))
	}
	w.checkAgreement("send", key, err, after)
}

// approveAfresh is a person approving approved key again on the material
// as it reads now and the task's owner now, so that the nemesis's send is
// not refused as stale; it reports whether the action is approved after.
func (w *searchWorld) approveAfresh(key string) bool {
	mat := w.reread(key, false)
	_, err := w.l.Approve(w.ctx, key, "lead", mat)
	w.count["approve"]++
	w.logf("approve %s afresh (consent %s) → %v", key, mat[0].Value, errWord(err))
	return err == nil && w.action(key).State == ledger.StateApproved
}

// sendable reports whether a send of approved key could go out now: the
// stop switch is off and its task has an owner. These nemeses wait for
// such a moment: a send the stop switch refuses would show nothing.
func (w *searchWorld) sendable(key string) bool {
	sw, err := w.l.StopState(w.ctx)
	if err != nil {
		w.t.Fatal(err)
	}
	return !sw.Stopped && w.owner(w.action(key).TaskID) != ""
}

// backupTo takes a backup with the ledger's own online copy to dst,
// replacing the one there.
func (w *searchWorld) backupTo(dst string) ledger.BackupInfo {
	info, err := w.l.Backup(w.ctx, dst, true)
	if err != nil {
		w.t.Fatalf("backup to %s: %v", dst, err)
	}
	w.logf("backup %s: history line %d, generation %d, %d actions", filepath.Base(dst), info.Point, info.Generation, info.Actions)
	return info
}

// sendForgotten sends approved key after the backup: the send a restore
// makes the ledger forget. It returns the state the send left.
func (w *searchWorld) sendForgotten(key string) ledger.State {
	a := w.action(key)
	_, err := w.l.Execute(w.ctx, ledger.ExecuteRequest{Key: key, Executor: w.owner(a.TaskID), Reread: w.reread(key, false)}, w.dest)
	after := w.action(key)
	w.count["send"]++
	w.logf("send %s by %s after the backup %s → %s: %v", key, w.owner(a.TaskID), a.State, after.State, errWord(err))
	w.checkAgreement("send", key, err, after)
	return after.State
}

// beforePutBack remembers this life's attempts, lets a moment pass (two
// restores never begin a generation at the same instant) and closes the
// ledger, as the workflows stop for a restore; it returns the lineage the
// ledger had.
func (w *searchWorld) beforePutBack() ledger.Lineage {
	lin, err := w.l.Lineage(w.ctx)
	if err != nil {
		w.t.Fatal(err)
	}
	w.remember()
	w.advance(time.Second)
	if err := w.l.Close(); err != nil {
		w.t.Fatalf("close the ledger before putting a backup back: %v", err)
	}
	return lin
}

// restoreAsTold is `ledger restore --discard-newer` from the backup at
// from, then the ledger opened again; lin is the lineage before the backup
// was put back.
func (w *searchWorld) restoreAsTold(from string, lin ledger.Lineage) {
	info, err := ledger.RestoreWith(w.ctx, w.path, from, ledger.RestoreOptions{Actor: "ops", Reason: "the search restores",
		DiscardNewer: true, Clock: w.clock})
	w.logf("restore --discard-newer from %s → %v (discarded %s; %d unverified)", filepath.Base(from), errWord(err), info.Discarded,
		info.Mark.UnverifiedActions)
	if err != nil {
		w.t.Fatalf("restore --discard-newer from %s: %v", from, err)
	}
	if w.l, err = w.open(); err != nil {
		w.t.Fatalf("open the ledger after the restore: %v", err)
	}
	after, err := w.l.Lineage(w.ctx)
	if err != nil {
		w.t.Fatal(err)
	}
	if after.Generation <= lin.Generation {
		w.problem("restore from %s left generation %d, the ledger it replaced had %d: generations repeat", from, after.Generation, lin.Generation)
	}
	w.life++
	w.scanned = w.lastLine()
	w.restoredAt = w.clock.Now()
}

// ---- records cleared before a restore ------------------------------------

// opRecordsClearedBeforeRestore: the ledger takes a backup, sends an
// approved action (its message arrives), the mailbox's store is cleared (a
// new epoch), the backup is put back with --discard-newer, and once the
// restore's settle time has passed a workflow sends the action again. The
// cleared records find nothing of the forgotten send; records of another
// epoch than the one recorded before the backup prove nothing, so the gate
// must hold the action for a person, never send it again. SQLite only:
// restores are.
func (w *searchWorld) opRecordsClearedBeforeRestore(key string) {
	if !supplied("records-cleared") {
		return
	}
	if !w.file || w.paused != nil {
		return
	}
	if key = w.approvedKey(key); key == "" || !w.sendable(key) || !w.approveAfresh(key) {
		return
	}
	w.nemesis("records cleared before a restore")
	bk := filepath.Join(w.dir, "before-the-clear.db")
	w.backupTo(bk)
	w.sendForgotten(key)
	w.clearRecords()
	w.restoreAsTold(bk, w.beforePutBack())
	// Past the restore's settle time: what the forgotten history sent has
	// landed, or never will.
	w.advance(searchLease + w.settle + time.Second)
	before := w.action(key)
	if before.State != ledger.StateApproved {
		return
	}
	attempts := w.lastAttempt(key)
	_, err := w.l.Execute(w.ctx, ledger.ExecuteRequest{Key: key, Executor: w.owner(before.TaskID), Reread: w.reread(key, false)}, w.dest)
	after := w.action(key)
	w.count["send"]++
	w.logf("send %s after the restore, the records cleared since the backup %s → %s/%s: %v", key, before.State, after.State, after.HoldCause, errWord(err))
	switch {
	case heldCannotBeEstablished(err, after):
		w.count["records cleared before a restore: held"]++
	case w.lastAttempt(key) > attempts:
		w.count["records cleared before a restore: sent again"]++
		w.problem("%s was sent again after a restore (attempt %d, %s → %s: %v), although the records were cleared since the backup: another epoch proves nothing",
			key, w.lastAttempt(key), before.State, after.State, errWord(err))
		w.checkAgreement("send", key, err, after)
	default:
		w.checkAgreement("send", key, err, after)
	}
}

// clearRecords clears the mailbox's store (a new epoch), keeping what it
// held for the checker: the world still knows what arrived.
func (w *searchWorld) clearRecords() {
	n, err := w.arrived.clear(w.ctx)
	if err != nil {
		w.t.Fatalf("clear the mailbox: %v", err)
	}
	// The foreign messages and look-alikes went with the rest: a
	// reconcile can no longer meet them.
	clear(w.foreign)
	w.logf("the mailbox's store is cleared (%d messages, a new epoch)", n)
}

// clearedMailbox is the search's mailbox as the checker and the persons
// of the search read it: what its store holds now, and what it held before
// each clear. A clear makes the records forget; the world still knows what
// arrived.
type clearedMailbox struct {
	mb   *testmailbox.Mailbox
	kept []testmailbox.Message // cleared arrivals with their raw bytes, as ids -1, -2, …
	byID map[string][]int      // Message-ID → places in kept
}

// clear keeps every stored message, then clears the store.
func (c *clearedMailbox) clear(ctx context.Context) (int, error) {
	_, msgs, err := c.mb.List(ctx, testmailbox.Filter{})
	if err != nil {
		return 0, err
	}
	for _, m := range msgs {
		full, err := c.mb.Get(ctx, m.ID)
		if err != nil {
			return 0, err
		}
		full.ID = -int64(len(c.kept) + 1)
		if c.byID == nil {
			c.byID = map[string][]int{}
		}
		c.byID[full.MessageID] = append(c.byID[full.MessageID], len(c.kept))
		c.kept = append(c.kept, full)
	}
	return c.mb.Clear(ctx)
}

// List implements proof.Store: the kept messages first, then the store's.
// It filters by Message-ID only, all the search's checks ask.
func (c *clearedMailbox) List(ctx context.Context, f testmailbox.Filter) (int, []testmailbox.Message, error) {
	if f.To != "" || f.ActionKey != "" || f.Limit != 0 || f.Offset != 0 {
		return 0, nil, fmt.Errorf("the cleared messages are listed by Message-ID only, not by %+v", f)
	}
	_, live, err := c.mb.List(ctx, f)
	if err != nil {
		return 0, nil, err
	}
	var out []testmailbox.Message
	keep := func(m testmailbox.Message) {
		m.Raw = nil
		out = append(out, m)
	}
	if f.MessageID == "" {
		for _, m := range c.kept {
			keep(m)
		}
	} else {
		for _, i := range c.byID[strings.Trim(f.MessageID, "<>")] {
			keep(c.kept[i])
		}
	}
	out = append(out, live...)
	return len(out), out, nil
}

// Get implements proof.Store.
func (c *clearedMailbox) Get(ctx context.Context, id int64) (testmailbox.Message, error) {
	if id < 0 && int(-id) <= len(c.kept) {
		return c.kept[-id-1], nil
	}
	return c.mb.Get(ctx, id)
}

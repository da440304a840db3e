package review

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"gatehouse/ledger"
)

// Options choose what a report covers.
type Options struct {
	Since, Until time.Time // the window; zero leaves an end open
	// Stop is the stop to reconstruct, counted from 1 over the whole
	// history; 0 takes the last stop in the window. Without a stop the
	// buckets describe the end of the window.
	Stop int
}

// ErrNoSuchStop is returned for a Stop the history does not hold.
var ErrNoSuchStop = errors.New("no such stop")

// TimeFormat is how a report writes moments: UTC, to the second.
const TimeFormat = "2006-01-02 15:04:05Z"

func fmtTime(ns int64) string { return time.Unix(0, ns).UTC().Format(TimeFormat) }

// Report is the review of one window of a ledger's history, as a team files
// it: the same content as Markdown or JSON.
type Report struct {
	Ledger string `json:"ledger"`
	// Rehearsal names the scenario whose rehearsal created the ledger
	// (its records say so): its times are the rehearsal's pretend clock's.
	Rehearsal string  `json:"rehearsal,omitempty"`
	Window    Window  `json:"window"`
	Stop      *Stop   `json:"stop"`
	Moment    string  `json:"moment"` // the moment the buckets describe
	Counts    []Count `json:"bucket_counts"`
	// Buckets holds every action that existed at the moment, by bucket.
	Buckets        []BucketActions `json:"buckets"`
	Unknown        []Unknown       `json:"unknown_outcomes"`
	Overrides      []Override      `json:"manual_overrides"`
	LateEvidence   []LateLine      `json:"late_evidence"`
	ArrivedTwice   []Twice         `json:"arrived_twice"`
	Days           []Day           `json:"per_day"`
	Total          Measures        `json:"total"`
	StaleProposals []string        `json:"stale_proposals"`
	Unmatched      []Unmatched     `json:"unmatched_identities"`
	Inferred       Inferred        `json:"inferred"`
}

// Window is the span a report covers.
type Window struct {
	Since  string `json:"since"`
	Until  string `json:"until"`
	Events int    `json:"events"`
}

// Stop is the stop a report reconstructs.
type Stop struct {
	Number  int     `json:"number"`
	Of      int     `json:"of"`
	EventID int64   `json:"event_id"`
	At      string  `json:"at"`
	Actor   string  `json:"actor"`
	Reason  string  `json:"reason"`
	Resumed *Resume `json:"resumed"`
}

// Resume is when execution resumed after the stop.
type Resume struct {
	At     string `json:"at"`
	Actor  string `json:"actor"`
	Reason string `json:"reason"`
}

// Count is the size of one bucket.
type Count struct {
	Bucket string `json:"bucket"`
	Title  string `json:"title"`
	N      int    `json:"n"`
}

// BucketActions lists one bucket's actions.
type BucketActions struct {
	Bucket  string         `json:"bucket"`
	Actions []ActionAtStop `json:"actions"`
}

// ActionAtStop is one action at the moment, and what happened to it after.
type ActionAtStop struct {
	Key      string `json:"key"`
	Task     string `json:"task"`
	Customer string `json:"customer"`
	State    string `json:"state"`
	Inferred bool   `json:"inferred"`
	// Now is its state at the end of the window.
	Now string `json:"now"`
	// After lists the kinds of its history lines after the moment, in
	// order, repeats counted ("refused_stopped×2").
	After []string `json:"after"`
	// SendsTried counts the tries that met the gate after the moment: an
	// attempt started, or a send (or proposal) refused by the stop, as a
	// duplicate, denied, or refused for its destination, approval or owner.
	SendsTried int `json:"sends_tried_after"`
	// Material compares the approval's material values with the latest
	// ones the ledger read for the customer (not for sent actions).
	Material *Material `json:"material,omitempty"`
	// ArrivedTwice: the customer is known to have its message more than
	// once, as the ledger knows it now (see Report.ArrivedTwice).
	ArrivedTwice bool `json:"arrived_twice"`
}

// Material is whether an approval still rests on current values.
type Material struct {
	// Status: same, changed, not_reread, no_approval, no_fields,
	// unreadable (the snapshot could not be decoded).
	Status  string   `json:"status"`
	Changed []Change `json:"changed,omitempty"`
}

// Change is one material field whose latest read differs from the approval.
type Change struct {
	Field    string `json:"field"`
	Approved string `json:"approved"`
	Latest   string `json:"latest"`
	ReadAt   string `json:"read_at"`
}

// Unknown is an outcome in flight at the moment, with its evidence.
type Unknown struct {
	Key         string `json:"key"`
	Attempt     int    `json:"attempt"`
	Destination string `json:"destination"`
	MessageID   string `json:"message_id"`
	Started     string `json:"started"`
	Outcome     string `json:"outcome"`
	Reconciled  bool   `json:"reconciled"`
	Evidence    string `json:"evidence"`
}

// Override is a person's decision over the gate's.
type Override struct {
	EventID int64  `json:"event_id"`
	At      string `json:"at"`
	Actor   string `json:"actor"`
	Kind    string `json:"kind"`
	Key     string `json:"key"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

// LateLine is one line of late evidence in the window: a report or a
// message that turned up after its attempt was settled.
type LateLine struct {
	EventID int64  `json:"event_id"`
	At      string `json:"at"`
	Kind    string `json:"kind"`
	Key     string `json:"key"`
	Attempt int    `json:"attempt"`
	Message string `json:"message"`
}

// Twice is an action known to have arrived more than once, as the ledger
// knows it when the report is built: a fact about the world, whatever the
// window (its state stays what it is).
type Twice struct {
	Key      string `json:"key"`
	State    string `json:"state"`
	Attempts []int  `json:"attempts"` // the attempts that arrived
}

// Day is the measures of one UTC day.
type Day struct {
	Day        string  `json:"day"`
	DenialRate float64 `json:"denial_rate_percent"`
	Measures
}

// Unmatched is a release's count of source rows matching no customer.
type Unmatched struct {
	Release string `json:"release"`
	Rows    int    `json:"rows"`
}

// Inferred says what the report reconstructed from history written before
// lines carried their states.
type Inferred struct {
	Lines   int   `json:"lines"`
	Actions int   `json:"actions"`
	Before  int64 `json:"before_event_id,omitempty"`
}

// Build reviews the window opts selects. l reads back the sentences of the
// lines the report quotes.
func Build(ctx context.Context, l *ledger.Ledger, h *History, opts Options) (Report, error) {
	from, to := h.Window(opts.Since, opts.Until)
	r := Report{Ledger: ledgerName(h.Path), Rehearsal: l.Rehearsal(), Window: Window{Events: to - from}}
	r.Window.Since, r.Window.Until = windowEnds(h, opts, from, to)
	moment, err := r.chooseStop(ctx, l, h, opts, from, to)
	if err != nil {
		return r, err
	}
	at := h.FoldTo(moment)
	end := h.FoldTo(to)
	r.Moment = r.Window.Until
	if moment > 0 && r.Stop != nil {
		r.Moment = r.Stop.At
	}
	after := h.afterMoment(moment, to)
	byBucket := at.ByBucket()
	for _, b := range Buckets {
		r.Counts = append(r.Counts, Count{Bucket: b.Name(), Title: b.Title(), N: len(byBucket[b])})
		ba := BucketActions{Bucket: b.Name(), Actions: []ActionAtStop{}}
		for _, i := range byBucket[b] {
			ba.Actions = append(ba.Actions, h.actionAt(i, b, at, end, after[i], moment))
		}
		r.Buckets = append(r.Buckets, ba)
	}
	if r.Unknown, err = h.unknowns(ctx, l, byBucket[InFlight], moment); err != nil {
		return r, err
	}
	if r.Overrides, err = h.overrides(ctx, l, from, to); err != nil {
		return r, err
	}
	if r.LateEvidence, err = h.lateLines(ctx, l, from, to); err != nil {
		return r, err
	}
	if r.ArrivedTwice, err = h.arrivedTwice(ctx, l); err != nil {
		return r, err
	}
	r.Days, r.Total = h.days(from, to)
	r.StaleProposals = h.staleProposals(end, to)
	r.Unmatched = []Unmatched{}
	for _, rel := range sortedKeys(h.Facts.Metrics.UnmatchedByRelease) {
		r.Unmatched = append(r.Unmatched, Unmatched{Release: rel, Rows: h.Facts.Metrics.UnmatchedByRelease[rel]})
	}
	r.Inferred = h.inferredNote(at, end)
	return r, nil
}

func windowEnds(h *History, opts Options, from, to int) (since, until string) {
	switch {
	case !opts.Since.IsZero():
		since = opts.Since.UTC().Format(TimeFormat)
	case from < to:
		since = fmtTime(h.Events[from].At)
	}
	switch {
	case !opts.Until.IsZero():
		until = opts.Until.UTC().Format(TimeFormat)
	case from < to:
		until = fmtTime(h.Events[to-1].At)
	}
	return since, until
}

// chooseStop sets r.Stop and returns the fold length of the moment: the
// lines up to and including the stop, or the window's end.
func (r *Report) chooseStop(ctx context.Context, l *ledger.Ledger, h *History, opts Options, from, to int) (int, error) {
	stops := h.Stops()
	n := opts.Stop
	if n == 0 {
		for k, i := range stops {
			if i >= from && i < to {
				n = k + 1
			}
		}
		if n == 0 {
			return to, nil
		}
	}
	if n < 1 || n > len(stops) {
		return 0, fmt.Errorf("%w: stop %d (the history holds %d)", ErrNoSuchStop, n, len(stops))
	}
	i := stops[n-1]
	ids := []int64{h.Events[i].ID}
	resume := -1
	for _, j := range h.resumeIdx {
		if j > i {
			resume = j
			ids = append(ids, h.Events[j].ID)
			break
		}
	}
	text, err := Text(ctx, l, ids)
	if err != nil {
		return 0, err
	}
	ev := h.Events[i]
	r.Stop = &Stop{Number: n, Of: len(stops), EventID: ev.ID, At: fmtTime(ev.At), Actor: h.Actors[ev.Actor], Reason: text[ev.ID].Reason}
	if resume >= 0 {
		re := h.Events[resume]
		r.Stop.Resumed = &Resume{At: fmtTime(re.At), Actor: h.Actors[re.Actor], Reason: text[re.ID].Reason}
	}
	return i + 1, nil
}

// afterMoment collects, per action, the indexes of its lines in
// Events[moment:to].
func (h *History) afterMoment(moment, to int) map[int32][]int {
	out := map[int32][]int{}
	for i := moment; i < to; i++ {
		if a := h.Events[i].Action; a != 0 {
			out[a] = append(out[a], i)
		}
	}
	return out
}

// triedKinds are the history lines a try to send leaves on its action.
var triedKinds = map[ledger.EventKind]bool{ledger.EvAttemptStarted: true, ledger.EvRefusedStopped: true,
	ledger.EvDuplicateBlock: true, ledger.EvDenied: true, ledger.EvWrongDestination: true, ledger.EvApprovalStale: true,
	ledger.EvOwnershipConflict: true}

func (h *History) actionAt(i int32, b Bucket, at, end Fold, after []int, moment int) ActionAtStop {
	fa := h.Facts.Actions[h.Keys[i]]
	a := ActionAtStop{Key: h.Keys[i], Task: fa.TaskID, Customer: fa.Customer, State: at.State(i),
		Inferred: at.Inferred(i), Now: end.State(i), After: []string{}}
	for k := 0; k < len(after); {
		kind := h.Kinds[h.Events[after[k]].Kind]
		n := 1
		for k+n < len(after) && h.Kinds[h.Events[after[k+n]].Kind] == kind {
			n++
		}
		if triedKinds[kind] {
			a.SendsTried += n
		}
		if n > 1 {
			a.After = append(a.After, fmt.Sprintf("%s×%d", kind, n))
		} else {
			a.After = append(a.After, string(kind))
		}
		k += n
	}
	if b != Committed {
		a.Material = h.material(i, fa.Customer, moment)
	}
	a.ArrivedTwice = fa.ArrivedTwice()
	return a
}

// material compares the approval in force at the moment with the latest
// values the ledger read for the customer.
func (h *History) material(i int32, customer string, moment int) *Material {
	var ap *ledger.ReviewApproval
	limit := int64(1<<63 - 1)
	if moment > 0 && moment <= len(h.Events) {
		limit = h.Events[moment-1].At
	}
	for k := range h.approvals[i] {
		if h.approvals[i][k].At.UnixNano() <= limit {
			ap = &h.approvals[i][k]
		}
	}
	if ap == nil {
		return &Material{Status: "no_approval"}
	}
	fields, err := ap.MaterialOf()
	switch {
	case err != nil:
		return &Material{Status: "unreadable"}
	case len(fields) == 0:
		return &Material{Status: "no_fields"}
	}
	m := &Material{Status: "same"}
	reads := h.Facts.LatestReads[customer]
	reread := 0
	for _, f := range fields {
		c, ok := reads[f.Name()]
		if !ok {
			continue
		}
		reread++
		latest := c.Read
		if c.Unavailable {
			latest = "?unavailable"
		}
		if latest != f.Value {
			m.Status = "changed"
			m.Changed = append(m.Changed, Change{Field: f.Name(), Approved: f.Value, Latest: latest, ReadAt: c.At.UTC().Format(TimeFormat)})
		}
	}
	if reread == 0 {
		m.Status = "not_reread"
	}
	return m
}

// unknowns lists the last attempt of each action in flight at the moment,
// read from the ledger (only these attempts are needed).
func (h *History) unknowns(ctx context.Context, l *ledger.Ledger, inFlight []int32, moment int) ([]Unknown, error) {
	out := []Unknown{}
	limit := int64(1<<63 - 1)
	if moment > 0 && moment <= len(h.Events) {
		limit = h.Events[moment-1].At
	}
	for _, i := range inFlight {
		atts, err := l.Attempts(ctx, h.Keys[i])
		if err != nil {
			return nil, fmt.Errorf("read attempts of %s: %w", h.Keys[i], err)
		}
		var last *ledger.Attempt
		for k := range atts {
			if atts[k].StartedAt.UnixNano() <= limit {
				last = &atts[k]
			}
		}
		if last == nil {
			continue
		}
		out = append(out, Unknown{Key: h.Keys[i], Attempt: last.Number, Destination: last.Destination, MessageID: last.MessageID,
			Started: last.StartedAt.UTC().Format(TimeFormat), Outcome: string(last.Outcome), Reconciled: last.Reconciled,
			Evidence: orNone(last.Response)})
	}
	return out, nil
}

func (h *History) overrides(ctx context.Context, l *ledger.Ledger, from, to int) ([]Override, error) {
	ids, text, err := h.quote(ctx, l, from, to, func(ev Event) bool { return ev.Flags&FlagOverride != 0 })
	if err != nil {
		return nil, err
	}
	out := []Override{}
	for _, id := range ids {
		e := text[id]
		kind := string(e.Kind)
		if e.Kind == ledger.EvReconciled {
			kind = "resolved_by_person"
		}
		why := e.Reason
		if why == "" {
			why = e.Message // a resolution written before schema 6 kept its reason in its sentence only
		}
		out = append(out, Override{EventID: id, At: e.At.UTC().Format(TimeFormat), Actor: e.Actor, Kind: kind,
			Key: e.ActionKey, Reason: why, Message: e.Message})
	}
	return out, nil
}

// quote reads the full text of the lines of Events[from:to] that keep
// selects, in order (none read when none is selected).
func (h *History) quote(ctx context.Context, l *ledger.Ledger, from, to int, keep func(Event) bool) ([]int64, map[int64]ledger.Event, error) {
	var ids []int64
	for _, ev := range h.Events[from:to] {
		if keep(ev) {
			ids = append(ids, ev.ID)
		}
	}
	if len(ids) == 0 {
		return nil, nil, nil
	}
	text, err := Text(ctx, l, ids)
	return ids, text, err
}

// lateLines quotes the late evidence lines of Events[from:to].
func (h *History) lateLines(ctx context.Context, l *ledger.Ledger, from, to int) ([]LateLine, error) {
	ids, text, err := h.quote(ctx, l, from, to, func(ev Event) bool {
		k := h.Kinds[ev.Kind]
		return k == ledger.EvLateOutcome || k == ledger.EvLateArrival
	})
	if err != nil {
		return nil, err
	}
	out := []LateLine{}
	for _, id := range ids {
		e := text[id]
		out = append(out, LateLine{EventID: id, At: e.At.UTC().Format(TimeFormat), Kind: string(e.Kind), Key: e.ActionKey,
			Attempt: e.AttemptNumber(), Message: e.Message})
	}
	return out, nil
}

// arrivedTwice lists, in key order, the actions known to have arrived
// more than once, with the attempts that did (read only for them).
func (h *History) arrivedTwice(ctx context.Context, l *ledger.Ledger) ([]Twice, error) {
	out := []Twice{}
	for _, i := range h.keyOrder() {
		fa := h.Facts.Actions[h.Keys[i]]
		if !fa.ArrivedTwice() {
			continue
		}
		atts, err := l.Attempts(ctx, fa.Key)
		if err != nil {
			return nil, fmt.Errorf("read attempts of %s: %w", fa.Key, err)
		}
		tw := Twice{Key: fa.Key, State: string(fa.State), Attempts: []int{}}
		for _, at := range atts {
			if at.Arrived() {
				tw.Attempts = append(tw.Attempts, at.Number)
			}
		}
		out = append(out, tw)
	}
	return out, nil
}

func (h *History) days(from, to int) ([]Day, Measures) {
	out := []Day{}
	var total Measures
	for _, b := range h.Rates(from, to, 24*time.Hour) {
		if b.First == b.Last {
			continue
		}
		out = append(out, Day{Day: b.Start.Format("2006-01-02"), DenialRate: round1(b.M.DenialRate()), Measures: b.M})
		total = total.add(b.M)
	}
	return out, total
}

func (m Measures) add(o Measures) Measures {
	return Measures{m.Proposed + o.Proposed, m.Attempts + o.Attempts, m.Sent + o.Sent, m.Denied + o.Denied,
		m.DuplicateBlocks + o.DuplicateBlocks, m.OwnershipConflicts + o.OwnershipConflicts, m.Unknown + o.Unknown,
		m.Holds + o.Holds, m.ManualOverrides + o.ManualOverrides, m.Failed + o.Failed, m.StaleApprovals + o.StaleApprovals,
		m.Stops + o.Stops, m.LateEvidence + o.LateEvidence, m.NotPermitted + o.NotPermitted}
}

// staleProposals are actions only proposed at the window's end whose latest
// line is older than ledger.StaleAfter by then.
func (h *History) staleProposals(end Fold, to int) []string {
	out := []string{}
	if to == 0 {
		return out
	}
	cut := h.Events[to-1].At - int64(ledger.StaleAfter)
	for _, i := range h.keyOrder() {
		if end.Exists(i) && BucketOf(end.State(i)) == Proposed && end.last[i] >= 0 && h.Events[end.last[i]].At < cut {
			out = append(out, h.Keys[i])
		}
	}
	return out
}

func (h *History) inferredNote(folds ...Fold) Inferred {
	in := Inferred{Lines: h.Inferred}
	if h.Inferred == 0 {
		return in
	}
	in.Before = h.Facts.FoldedFrom
	seen := map[int32]bool{}
	for _, f := range folds {
		for i := range f.inferred {
			if f.inferred[i] {
				seen[int32(i)] = true
			}
		}
	}
	in.Actions = len(seen)
	return in
}

func round1(f float64) float64 { return float64(int(f*10+0.5)) / 10 }

func orNone(s string) string {
	if strings.TrimSpace(s) == "" {
		return "none recorded"
	}
	return s
}

func sortedKeys(m map[string]int) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// ledgerName is how a report names its ledger: a file by its base name (the
// report travels to a ticket, the directory means nothing there), a
// PostgreSQL ledger by its location, whose password Path already hid.
func ledgerName(path string) string {
	if ledger.IsPostgres(path) {
		return path
	}
	return filepath.Base(path)
}

package testmailbox

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"
)

// FaultKind names one way the mailbox can misbehave on purpose.
type FaultKind string

// Fault kinds. Message faults act at the DATA stage, where a sender's
// knowledge of the outcome is lost: hold_354 when the DATA command comes,
// stall_body while the message is read, the others once the whole message
// has been read.
const (
	// FaultAcceptThenDrop stores the message, then closes the connection
	// without the final reply: the mailbox has it, the sender cannot know.
	FaultAcceptThenDrop FaultKind = "accept_then_drop"
	// FaultDelayReply stores the message, then answers 250 only after
	// Fault.Duration, typically past the sender's timeout.
	FaultDelayReply FaultKind = "delay_reply"
	// FaultRejectTemporary answers 451 and stores nothing.
	FaultRejectTemporary FaultKind = "reject_temporary"
	// FaultRejectPermanent answers 550 and stores nothing.
	FaultRejectPermanent FaultKind = "reject_permanent"
	// FaultDown closes the SMTP listener, so connections are refused, for
	// Fault.Duration or (when zero) until the fault is cleared.
	FaultDown FaultKind = "down"
	// FaultHold354 answers the DATA command with 354 only after
	// Fault.Duration, so the sender waits before it may hand over the
	// message, as behind a paused or slow path. Nothing is read or stored
	// meanwhile; afterwards the message goes through as normal. It acts
	// on DATA only (BDAT has no 354). After STARTTLS the mailbox cannot
	// read the reply it holds: it holds the first reply after RCPT that
	// answers a command the session was not called for, which is the 354
	// unless the sender sends NOOP, VRFY or the like before DATA.
	FaultHold354 FaultKind = "hold_354"
	// FaultStallBody stops reading the message after its first line (at
	// most stallAfter bytes) for Fault.Duration, then reads the rest,
	// stores it and answers as normal. Nothing is stored during the stall,
	// nor at all when the mailbox closes during it.
	FaultStallBody FaultKind = "stall_body"
	// FaultHoldThenStore reads the whole message, keeps it out of the
	// store for Fault.Duration, then stores it (stamped with the time it
	// is stored) and answers 250, like a relay holding the final dot: a
	// look at the records during the hold finds nothing. The message is
	// stored after the hold even when the sender has gone away, and at
	// once when the mailbox closes during the hold, as a relay's queue
	// outlives the connection it came on.
	FaultHoldThenStore FaultKind = "hold_then_store"
)

// FaultKinds lists every fault kind, in the order stats report them. New
// kinds are appended, so the order stays stable.
var FaultKinds = []FaultKind{FaultAcceptThenDrop, FaultDelayReply, FaultRejectTemporary, FaultRejectPermanent, FaultDown,
	FaultHold354, FaultStallBody, FaultHoldThenStore}

// faultPoint is where in an SMTP transaction a kind of fault acts. A
// message meets at most one fault at each point.
type faultPoint int

const (
	atListener    faultPoint = iota // down: no message involved
	atDataCommand                   // hold_354: DATA given, 354 not yet sent
	inBody                          // stall_body: while the message is read
	atEndOfData                     // the rest: the whole message read
)

// point tells where faults of kind k act.
func (k FaultKind) point() faultPoint {
	switch k {
	case FaultDown:
		return atListener
	case FaultHold354:
		return atDataCommand
	case FaultStallBody:
		return inBody
	}
	return atEndOfData
}

// timedWhat says what the duration of a kind that requires one measures,
// for error messages; "" for kinds that do not require one.
func (k FaultKind) timedWhat() string {
	switch k {
	case FaultDelayReply:
		return "how late the reply comes"
	case FaultHold354:
		return "how long the 354 is held"
	case FaultStallBody:
		return "how long reading stalls"
	case FaultHoldThenStore:
		return "how long the message is held before it is stored"
	}
	return ""
}

// Fault is one injected misbehaviour and the messages it applies to.
//
// A message fault (every kind but down) fires on the next messages whose
// envelope recipients include To (any message when To is empty), each with
// probability P (always when P is 0), at most Count times (without end when
// Count is 0). The draws come from a generator seeded with Seed, so the same
// seed and the same sequence of matching messages fire on the same messages.
// When several faults match a message at the same point (the DATA
// command, the body or the end of the message; see the fault kinds), the
// first in the list fires; faults acting at different points may both
// fire on one message, e.g. hold_354 and then reject_temporary.
type Fault struct {
	Kind FaultKind `json:"kind"`
	// Duration is required by delay_reply (how late the reply comes),
	// hold_354 (how long the 354 is held), stall_body (how long reading
	// stalls) and hold_then_store (how long the message is held before it
	// is stored); for down it is how long the listener stays closed
	// (zero: until cleared). It runs on the mailbox's clock.
	Duration time.Duration `json:"-"`
	Count    int           `json:"count,omitempty"`
	To       string        `json:"to,omitempty"`
	P        float64       `json:"p,omitempty"`
	Seed     int64         `json:"seed,omitempty"`
}

// faultJSON is Fault on the wire: the duration as Go duration text ("3s").
type faultJSON struct {
	Kind     FaultKind `json:"kind"`
	Duration string    `json:"duration,omitempty"`
	Count    int       `json:"count,omitempty"`
	To       string    `json:"to,omitempty"`
	P        float64   `json:"p,omitempty"`
	Seed     int64     `json:"seed,omitempty"`
}

// MarshalJSON writes the duration as text, e.g. {"kind":"delay_reply","duration":"3s"}.
func (f Fault) MarshalJSON() ([]byte, error) {
	j := faultJSON{Kind: f.Kind, Count: f.Count, To: f.To, P: f.P, Seed: f.Seed}
	if f.Duration != 0 {
		j.Duration = f.Duration.String()
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads the form MarshalJSON writes; unknown fields are errors
// so that a typo cannot silently widen a fault.
func (f *Fault) UnmarshalJSON(b []byte) error {
	var j faultJSON
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&j); err != nil {
		return fmt.Errorf("fault: %w", err)
	}
	*f = Fault{Kind: j.Kind, Count: j.Count, To: j.To, P: j.P, Seed: j.Seed}
	if j.Duration != "" {
		d, err := time.ParseDuration(j.Duration)
		if err != nil {
			return fmt.Errorf("fault %s: field \"duration\": %q is not a duration like 500ms or 3s", j.Kind, j.Duration)
		}
		f.Duration = d
	}
	return nil
}

// Validate reports the first field that makes the fault meaningless.
func (f Fault) Validate() error {
	switch f.Kind {
	case FaultAcceptThenDrop, FaultRejectTemporary, FaultRejectPermanent:
		if f.Duration != 0 {
			return fmt.Errorf("fault %s: field \"duration\": not used by this kind", f.Kind)
		}
	case FaultDelayReply, FaultHold354, FaultStallBody, FaultHoldThenStore:
		if err := f.validateDuration(); err != nil {
			return err
		}
	case FaultDown:
		if f.Duration < 0 {
			return fmt.Errorf("fault down: field \"duration\": must not be negative")
		}
		switch {
		case f.Count != 0:
			return fmt.Errorf("fault down: field \"count\": down applies to the listener, not to messages")
		case f.To != "":
			return fmt.Errorf("fault down: field \"to\": down applies to the listener, not to messages")
		case f.P != 0:
			return fmt.Errorf("fault down: field \"p\": down applies to the listener, not to messages")
		}
		return nil
	case "":
		return fmt.Errorf("fault: field \"kind\": missing")
	default:
		return fmt.Errorf("fault: field \"kind\": unknown kind %q (want one of %s)", f.Kind, kindList())
	}
	if f.Count < 0 {
		return fmt.Errorf("fault %s: field \"count\": must not be negative", f.Kind)
	}
	if f.P < 0 || f.P > 1 {
		return fmt.Errorf("fault %s: field \"p\": %v is not a probability in [0, 1]", f.Kind, f.P)
	}
	return nil
}

// validateDuration checks the duration of a kind that requires one.
func (f Fault) validateDuration() error {
	switch {
	case f.Duration == 0:
		return fmt.Errorf("fault %s: field \"duration\": required (%s), e.g. %s=3s", f.Kind, f.Kind.timedWhat(), f.Kind)
	case f.Duration < 0:
		return fmt.Errorf("fault %s: field \"duration\": %s is negative; want a positive duration (%s), e.g. %s=3s",
			f.Kind, f.Duration, f.Kind.timedWhat(), f.Kind)
	}
	return nil
}

func kindList() string {
	s := make([]string, len(FaultKinds))
	for i, k := range FaultKinds {
		s[i] = string(k)
	}
	return strings.Join(s, ", ")
}

// String renders the fault in the spec format ParseFault reads.
func (f Fault) String() string {
	var b strings.Builder
	b.WriteString(string(f.Kind))
	if f.Duration != 0 {
		b.WriteString("=" + f.Duration.String())
	}
	if f.Count != 0 {
		b.WriteString(":count=" + strconv.Itoa(f.Count))
	}
	if f.To != "" {
		b.WriteString(":to=" + f.To)
	}
	if f.P != 0 {
		b.WriteString(":p=" + strconv.FormatFloat(f.P, 'g', -1, 64))
	}
	if f.Seed != 0 {
		b.WriteString(":seed=" + strconv.FormatInt(f.Seed, 10))
	}
	return b.String()
}

// ParseFault reads a fault spec, the textual form used by command-line flags:
//
//	spec  = kind ["=" duration] *(":" field "=" value)
//	kind  = accept_then_drop | delay_reply | reject_temporary | reject_permanent | down
//	      | hold_354 | stall_body | hold_then_store
//	field = count  the next N matching messages (positive integer; default: no end)
//	      | to     only messages with this envelope recipient (case-insensitive)
//	      | p      probability of firing per matching message (0 < p <= 1; default 1)
//	      | seed   seed of the probability draws (integer; default 0)
//
// The duration (Go syntax: 500ms, 3s, 1m) is required by delay_reply (how
// late the reply comes), hold_354 (how long the 354 is held), stall_body
// (how long reading stalls) and hold_then_store (how long the message is
// held before it is stored), and optional for down (how long the listener
// stays closed; without it, until the fault is cleared). down takes no
// fields. Examples:
//
//	accept_then_drop:count=1
//	delay_reply=3s:to=bob@example.com
//	reject_temporary:p=0.3:seed=7
//	down=5s
//	hold_354=3s:count=1:to=ben@example.com
//	hold_then_store=10s:count=1
//
// A parse error names the spec and the field that is wrong.
func ParseFault(spec string) (Fault, error) {
	parts := strings.Split(strings.TrimSpace(spec), ":")
	head := parts[0]
	var f Fault
	kind, dur, hasDur := strings.Cut(head, "=")
	f.Kind = FaultKind(kind)
	if hasDur {
		d, err := time.ParseDuration(dur)
		if err != nil {
			return Fault{}, fmt.Errorf("fault spec %q: duration %q: not a duration like 500ms or 3s", spec, dur)
		}
		f.Duration = d
	}
	seen := map[string]bool{}
	for _, p := range parts[1:] {
		name, val, ok := strings.Cut(p, "=")
		if !ok || val == "" {
			return Fault{}, fmt.Errorf("fault spec %q: field %q: want name=value", spec, p)
		}
		if seen[name] {
			return Fault{}, fmt.Errorf("fault spec %q: field %q: given twice", spec, name)
		}
		seen[name] = true
		switch name {
		case "count":
			n, err := strconv.Atoi(val)
			if err != nil || n <= 0 {
				return Fault{}, fmt.Errorf("fault spec %q: field \"count\": %q is not a positive integer", spec, val)
			}
			f.Count = n
		case "to":
			f.To = val
		case "p":
			x, err := strconv.ParseFloat(val, 64)
			if err != nil || x <= 0 || x > 1 {
				return Fault{}, fmt.Errorf("fault spec %q: field \"p\": %q is not a probability in (0, 1]", spec, val)
			}
			f.P = x
		case "seed":
			n, err := strconv.ParseInt(val, 10, 64)
			if err != nil {
				return Fault{}, fmt.Errorf("fault spec %q: field \"seed\": %q is not an integer", spec, val)
			}
			f.Seed = n
		default:
			return Fault{}, fmt.Errorf("fault spec %q: field %q: unknown (want count, to, p or seed)", spec, name)
		}
	}
	if err := f.Validate(); err != nil {
		return Fault{}, fmt.Errorf("fault spec %q: %w", spec, err)
	}
	return f, nil
}

// FaultStatus is a configured fault and what it has done so far.
type FaultStatus struct {
	Fault
	// Fired counts how often this fault fired since it was set.
	Fired int64 `json:"fired"`
	// Remaining is how many more times it will fire; -1 means no end.
	Remaining int `json:"remaining"`
	// Until is when a timed down fault ends (the listener comes back up);
	// zero for every other fault.
	Until time.Time `json:"until,omitzero"`
}

// MarshalJSON flattens the fault and its counters into one object.
func (s FaultStatus) MarshalJSON() ([]byte, error) {
	b, err := json.Marshal(s.Fault)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	m["fired"] = s.Fired
	m["remaining"] = s.Remaining
	if !s.Until.IsZero() {
		m["until"] = s.Until
	}
	return json.Marshal(m)
}

// activeFault is a fault with its firing state.
type activeFault struct {
	Fault
	rng       *rand.Rand
	fired     int64
	remaining int       // -1: no end
	until     time.Time // when a timed down ends, once it has started
}

// faultSet holds the configured faults; it is safe for concurrent sessions.
type faultSet struct {
	mu     sync.Mutex
	active []*activeFault
	fired  map[FaultKind]int64
}

func newFaultSet() *faultSet {
	return &faultSet{fired: map[FaultKind]int64{}}
}

func activate(f Fault) *activeFault {
	a := &activeFault{Fault: f, remaining: -1}
	if f.Count > 0 {
		a.remaining = f.Count
	}
	seed := uint64(f.Seed)
	a.rng = rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	return a
}

// replace swaps the whole set (counters of fired faults are kept).
func (s *faultSet) replace(faults []Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.active = s.active[:0:0]
	for _, f := range faults {
		s.active = append(s.active, activate(f))
	}
}

func (s *faultSet) add(f Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.active = append(s.active, activate(f))
}

// removeDown drops every down fault (used when a timed down ends).
func (s *faultSet) removeDown() {
	s.mu.Lock()
	defer s.mu.Unlock()
	kept := s.active[:0:0]
	for _, a := range s.active {
		if a.Kind != FaultDown {
			kept = append(kept, a)
		}
	}
	s.active = kept
}

// down reports the down fault in force, if any.
func (s *faultSet) down() (Fault, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range s.active {
		if a.Kind == FaultDown {
			return a.Fault, true
		}
	}
	return Fault{}, false
}

// countDown records that a down fault took the listener down.
func (s *faultSet) countDown() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fired[FaultDown]++
	for _, a := range s.active {
		if a.Kind == FaultDown {
			a.fired++
			return
		}
	}
}

// downUntil records when the down fault in force ends.
func (s *faultSet) downUntil(t time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range s.active {
		if a.Kind == FaultDown {
			a.until = t
			return
		}
	}
}

// pick decides which fault acting at point p, if any, fires for a message
// with these recipients, and counts it. The zero Fault means none.
func (s *faultSet) pick(p faultPoint, rcpts []string) Fault {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, a := range s.active {
		if a.Kind.point() != p || a.remaining == 0 {
			continue
		}
		if a.To != "" && !hasRecipient(rcpts, a.To) {
			continue
		}
		if a.P > 0 && a.rng.Float64() >= a.P {
			continue
		}
		a.fired++
		s.fired[a.Kind]++
		if a.remaining > 0 {
			a.remaining--
			if a.remaining == 0 {
				s.active = append(s.active[:i:i], s.active[i+1:]...)
			}
		}
		return a.Fault
	}
	return Fault{}
}

func hasRecipient(rcpts []string, want string) bool {
	want = normAddr(want)
	for _, r := range rcpts {
		if normAddr(r) == want {
			return true
		}
	}
	return false
}

func (s *faultSet) status() []FaultStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]FaultStatus, 0, len(s.active))
	for _, a := range s.active {
		out = append(out, FaultStatus{Fault: a.Fault, Fired: a.fired, Remaining: a.remaining, Until: a.until})
	}
	return out
}

func (s *faultSet) firedCounts() map[FaultKind]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[FaultKind]int64, len(FaultKinds))
	for _, k := range FaultKinds {
		out[k] = s.fired[k]
	}
	return out
}

func (s *faultSet) resetCounts() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fired = map[FaultKind]int64{}
}

// UnmarshalJSON reads the form MarshalJSON writes.
func (s *FaultStatus) UnmarshalJSON(b []byte) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return fmt.Errorf("fault status: %w", err)
	}
	var st FaultStatus
	for name, dst := range map[string]any{"fired": &st.Fired, "remaining": &st.Remaining, "until": &st.Until} {
		if v, ok := m[name]; ok {
			if err := json.Unmarshal(v, dst); err != nil {
				return fmt.Errorf("fault status: field %q: %w", name, err)
			}
			delete(m, name)
		}
	}
	rest, err := json.Marshal(m)
	if err != nil {
		return err
	}
	if err := st.Fault.UnmarshalJSON(rest); err != nil {
		return err
	}
	*s = st
	return nil
}

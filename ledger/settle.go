package ledger

import (
	"time"

	"gatehouse/destination"
)

// SettleUnbound is the settle time of an action or an approval recorded
// before approvals bound one (or proposed by a caller that stated none).
const SettleUnbound time.Duration = -1

// settle is how the proposal's settle time is recorded: SettleUnbound when
// it states none.
func (p Proposal) settle() time.Duration {
	if p.Settle == nil {
		return SettleUnbound
	}
	return *p.Settle
}

// settleOf is the settle time an attempt handed to ep under a binding of
// bound settles on. A bound one is the approval's, whatever ep declares
// (a send declaring another was refused before). An unbound one is read
// as the longest of the least the destination's kind declares when its
// URL names none, the settle time the proposal recorded in its connection
// settings (settings; see destination.RecordedSettle), and what ep
// declares: what the executing process supplies may make the gate wait
// longer, never shorter.
func settleOf(bound time.Duration, settings string, ep destination.Endpoint) time.Duration {
	if bound >= 0 {
		return bound
	}
	return max(ep.Settle, ep.DefaultSettle, destination.RecordedSettle(settings), 0)
}

// otherSettle is the refusal of a send whose destination declares another
// settle time than the one bound, or nil: a shorter one would let
// reconciliation call a message absent while a relay still holds it, and
// a longer one is a change of what was approved too (propose it again).
func otherSettle(key string, bound time.Duration, ep destination.Endpoint) *DestinationError {
	if bound < 0 || ep.Settle == bound {
		return nil
	}
	return &DestinationError{Key: key, Field: fieldSettle, Recorded: bound.String(), Named: ep.Settle.String()}
}

// fieldSettle names the settle time in a DestinationError.
const fieldSettle = "settle time"

// namedAs introduces what a refused send named, by the field it differs
// in, in a history line.
var namedAs = map[string]string{"destination": "to", "sender": "from", "records endpoint": "with records at",
	fieldSettle: "with a settle time of"}

// settleDescription says a recorded settle time in a history line.
func settleDescription(d time.Duration) string {
	if d < 0 {
		return "none recorded"
	}
	return d.String()
}

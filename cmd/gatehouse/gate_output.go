package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"gatehouse/ledger"
)

// The views below are the stable shape of `gate --json` output: small
// structs with snake_case names, so that a change inside the ledger does not
// silently change what workflows parse.

const textTime = "2006-01-02 15:04:05"

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Local().Format(textTime)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// actionView is one business action.
type actionView struct {
	Key           string `json:"key"`
	Task          string `json:"task"`
	State         string `json:"state"`
	Reason        string `json:"reason"`
	HoldCause     string `json:"hold_cause,omitempty"`
	Customer      string `json:"customer"`
	Event         string `json:"event"`
	ActionType    string `json:"action_type"`
	Target        string `json:"target"`
	Revision      int    `json:"revision"`
	Recipient     string `json:"recipient"`
	RecipientName string `json:"recipient_name,omitempty"`
	Sender        string `json:"sender"`
	Destination   string `json:"destination"`
	Lookup        string `json:"lookup,omitempty"`
	Subject       string `json:"subject"`
	// Request is the HTTP request the action is, as the provider will
	// receive it (absent for a message).
	Request    *requestView `json:"request,omitempty"`
	Digest     string       `json:"digest"`
	ProposedBy string       `json:"proposed_by"`
	Corrects   string       `json:"corrects,omitempty"`
	UpdatedAt  time.Time    `json:"updated_at"`
	// LateArrivals counts the attempts settled as not arrived that
	// arrived after all; ArrivedTwice says the customer has the message
	// more than once. The state stays what it is.
	LateArrivals int  `json:"late_arrivals"`
	ArrivedTwice bool `json:"arrived_twice"`
}

func newActionView(a ledger.Action) actionView {
	return actionView{Key: a.Key, Task: a.TaskID, State: string(a.State), Reason: a.Reason,
		HoldCause: string(a.HoldCause), Customer: a.Customer, Event: a.Event, ActionType: a.ActionType,
		Target: a.Target, Revision: a.Revision, Recipient: a.Recipient, RecipientName: a.RecipientName,
		Sender: a.Sender, Destination: a.Destination, Lookup: a.Lookup, Subject: a.Subject,
		Request: newRequestView(a.Request), Digest: a.Digest, ProposedBy: a.ProposedBy, Corrects: a.Corrects, UpdatedAt: a.UpdatedAt,
		LateArrivals: a.LateArrivals, ArrivedTwice: a.ArrivedTwice()}
}

func (a actionView) text(w io.Writer) {
	rows := [][2]string{{"key", a.Key}, {"task", a.Task}, {"state", a.State}, {"reason", orDash(a.Reason)}}
	if a.HoldCause != "" {
		rows = append(rows, [2]string{"hold cause", a.HoldCause})
	}
	recipient := a.Recipient
	if a.RecipientName != "" {
		recipient = fmt.Sprintf("%s (%s)", a.Recipient, a.RecipientName)
	}
	if a.Request != nil {
		// The approval surface shows the write itself, below these rows.
		rows = append(rows, [][2]string{{"recipient", orDash(recipient)}, {"destination", orDash(a.Destination)},
			{"duplicate control", orDash(a.Lookup)}, {"proposed by", a.ProposedBy}, {"updated", fmtTime(a.UpdatedAt)}}...)
	} else {
		rows = append(rows, [][2]string{{"recipient", recipient}, {"sender", orDash(a.Sender)},
			{"destination", orDash(a.Destination)}, {"subject", orDash(a.Subject)},
			{"proposed by", a.ProposedBy}, {"updated", fmtTime(a.UpdatedAt)}}...)
	}
	if a.Corrects != "" {
		rows = append(rows, [2]string{"corrects", a.Corrects})
	}
	switch {
	case a.ArrivedTwice:
		rows = append(rows, [2]string{"ARRIVED TWICE", "the customer has the message more than once (late evidence in its history); the state stays " + a.State})
	case a.LateArrivals > 0:
		rows = append(rows, [2]string{"arrived late", "an attempt settled as not arrived arrived after all; it will not be sent again"})
	}
	for _, r := range rows {
		fmt.Fprintf(w, "%s:\t%s\n", r[0], r[1])
	}
	if a.Request != nil {
		a.Request.text(w)
	}
}

// keyView prints only the key as text, so `KEY=$(gatehouse gate propose …)`
// works, and the whole action as JSON.
type keyView struct{ actionView }

func (k keyView) text(w io.Writer) { fmt.Fprintln(w, k.Key) }

// taskView is one task and its owner.
type taskView struct {
	ID       string `json:"id"`
	Customer string `json:"customer"`
	Subject  string `json:"subject"`
	Status   string `json:"status"`
	Owner    string `json:"owner"`
}

func newTaskView(t ledger.Task) taskView {
	return taskView{ID: t.ID, Customer: t.Customer, Subject: t.Subject, Status: t.Status, Owner: t.Owner}
}

func (t taskView) text(w io.Writer) {
	fmt.Fprintf(w, "task:\t%s\nstatus:\t%s\nowner:\t%s\n", t.ID, t.Status, orDash(t.Owner))
}

// sendView is the result of one send, refused or not.
type sendView struct {
	Key         string `json:"key"`
	State       string `json:"state"`
	Reason      string `json:"reason"`
	Outcome     string `json:"outcome,omitempty"`
	Attempt     int    `json:"attempt,omitempty"`
	TransportID string `json:"transport_id,omitempty"`
	MessageID   string `json:"message_id,omitempty"`
	Destination string `json:"destination,omitempty"`
	Response    string `json:"response,omitempty"`
}

func (s sendView) text(w io.Writer) {
	fmt.Fprintf(w, "key:\t%s\nstate:\t%s\nreason:\t%s\n", s.Key, s.State, orDash(s.Reason))
	if s.Attempt > 0 {
		fmt.Fprintf(w, "attempt:\t%d\ndestination:\t%s\nmessage id:\t%s\noutcome:\t%s\n", s.Attempt, s.Destination, s.MessageID, orDash(s.Outcome))
	}
}

// approvalView is one approval and whether it still holds.
type approvalView struct {
	Approver    string         `json:"approver"`
	At          time.Time      `json:"at"`
	Recipient   string         `json:"recipient"`
	Sender      string         `json:"sender"`
	Destination string         `json:"destination"`
	Owner       string         `json:"owner"`
	Valid       bool           `json:"valid"`
	Invalidated string         `json:"invalidated,omitempty"`
	Material    []materialView `json:"material"`
}

// materialView is one approved material value.
type materialView struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// attemptView is one try at the destination.
type attemptView struct {
	Number      int       `json:"number"`
	TransportID string    `json:"transport_id"`
	MessageID   string    `json:"message_id"`
	Destination string    `json:"destination"`
	Lookup      string    `json:"lookup,omitempty"`
	Epoch       string    `json:"epoch,omitempty"` // of the records at lookup, when the attempt began
	Recipient   string    `json:"recipient"`
	Sender      string    `json:"sender"`
	Executor    string    `json:"executor"`
	StartedAt   time.Time `json:"started_at"`
	Outcome     string    `json:"outcome"`
	Response    string    `json:"response"`
	Reconciled  bool      `json:"reconciled"`
	// An HTTP attempt's provider-facing key and its generation, the
	// status answered, the provider's id of what it created and the exact
	// bytes it handed over.
	ProviderKey   string `json:"provider_key,omitempty"`
	KeyGeneration int    `json:"key_generation,omitempty"`
	HTTPStatus    int    `json:"http_status,omitempty"`
	DestinationID string `json:"destination_action_id,omitempty"`
	Wire          string `json:"wire,omitempty"`
	// ArrivedLate is when the gate learned that the attempt's message
	// arrived although it was settled as not arrived.
	ArrivedLate *time.Time `json:"arrived_late,omitempty"`
}

// checkView compares an approved material value with the one re-read.
type checkView struct {
	Attempt     int    `json:"attempt"`
	Name        string `json:"name"`
	Approved    string `json:"approved"`
	Read        string `json:"read"`
	Matched     bool   `json:"matched"`
	Unavailable bool   `json:"unavailable"`
}

// eventView is one line of history.
type eventView struct {
	ID      int64     `json:"id"`
	At      time.Time `json:"at"`
	Actor   string    `json:"actor"`
	Task    string    `json:"task,omitempty"`
	Key     string    `json:"key,omitempty"`
	Kind    string    `json:"kind"`
	Message string    `json:"message"`
	Reason  string    `json:"reason,omitempty"`
}

func newEventViews(es []ledger.Event) []eventView {
	out := make([]eventView, 0, len(es))
	for _, e := range es {
		out = append(out, eventView{ID: e.ID, At: e.At, Actor: e.Actor, Task: e.TaskID, Key: e.ActionKey,
			Kind: string(e.Kind), Message: e.Message, Reason: e.Reason})
	}
	return out
}

func writeEvents(w io.Writer, es []eventView) {
	for _, e := range es {
		fmt.Fprintf(w, "  %s\t%s\t%s\n", fmtTime(e.At), e.Actor, e.Message)
	}
}

// historyView is a list of events, oldest first.
type historyView struct {
	Events []eventView `json:"events"`
}

func (h historyView) text(w io.Writer) {
	if len(h.Events) == 0 {
		fmt.Fprintln(w, "no history")
		return
	}
	fmt.Fprintln(w, "  TIME\tACTOR\tWHAT")
	writeEvents(w, h.Events)
}

// messageView is a one-line confirmation, for verbs whose result is the
// fact that they happened (stop, resume, leave, complete, view).
type messageView struct {
	Message string `json:"message"`
}

func (m messageView) text(w io.Writer) { fmt.Fprintln(w, m.Message) }

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

func joinOrDash(s []string) string { return orDash(strings.Join(s, ", ")) }

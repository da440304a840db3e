package fakes

import (
	"sort"
	"strings"
)

// Helpdesk is a fictional helpdesk: tasks (enquiries) with a customer,
// subject, status, owner and the people viewing them. The gate's ledger is
// authoritative for ownership; the helpdesk mirrors it so a workflow can
// re-read it like any other material field. It is safe for concurrent use;
// every read fails with ErrSourceDown while it is unavailable.
type Helpdesk struct{ src source }

// Task fields every helpdesk task has.
const (
	FieldCustomer = "customer"
	FieldSubject  = "subject"
	FieldStatus   = "status"
	FieldOwner    = "owner"
	FieldViewers  = "viewers" // comma-separated, sorted
)

// NewHelpdesk returns an empty, available helpdesk.
func NewHelpdesk() *Helpdesk { return &Helpdesk{src: newSource("helpdesk")} }

// Name is the source name material reads carry ("helpdesk").
func (h *Helpdesk) Name() string { return h.src.name }

// AddTask stores a task; an empty status means "open".
func (h *Helpdesk) AddTask(id, customer, subject, status, owner string) {
	if status == "" {
		status = "open"
	}
	h.src.put(id, map[string]string{FieldCustomer: customer, FieldSubject: subject,
		FieldStatus: status, FieldOwner: owner, FieldViewers: ""})
}

// Read returns one field of a task.
func (h *Helpdesk) Read(task, field string) (string, error) { return h.src.read(task, field) }

// Set changes one field of a task.
func (h *Helpdesk) Set(task, field, value string) error { return h.src.set(task, field, value) }

// SetAvailable takes the helpdesk down (false) or brings it back (true).
func (h *Helpdesk) SetAvailable(up bool) { h.src.setAvailable(up) }

// Available reports whether reads currently succeed.
func (h *Helpdesk) Available() bool { return h.src.available() }

// Task returns a copy of a task's fields even while the helpdesk is down
// (for displays, never for decisions).
func (h *Helpdesk) Task(id string) (map[string]string, bool) { return h.src.snapshot(id) }

// Tasks lists task ids in order.
func (h *Helpdesk) Tasks() []string { return h.src.ids() }

// AddViewer marks actor as looking at the task; RemoveViewer clears it.
func (h *Helpdesk) AddViewer(task, actor string) error { return h.editViewers(task, actor, true) }

// RemoveViewer clears actor's viewer marker on the task.
func (h *Helpdesk) RemoveViewer(task, actor string) error { return h.editViewers(task, actor, false) }

func (h *Helpdesk) editViewers(task, actor string, add bool) error {
	h.src.mu.Lock()
	defer h.src.mu.Unlock()
	rec, ok := h.src.records[task]
	if !ok {
		return &noRecordError{source: h.src.name, id: task}
	}
	set := map[string]bool{}
	for _, v := range strings.Split(rec[FieldViewers], ",") {
		if v != "" {
			set[v] = true
		}
	}
	if add {
		set[actor] = true
	} else {
		delete(set, actor)
	}
	list := make([]string, 0, len(set))
	for v := range set {
		list = append(list, v)
	}
	sort.Strings(list)
	rec[FieldViewers] = strings.Join(list, ",")
	return nil
}

// noRecordError names the missing record and wraps ErrNoRecord.
type noRecordError struct{ source, id string }

func (e *noRecordError) Error() string { return e.source + ": " + e.id + ": " + ErrNoRecord.Error() }
func (e *noRecordError) Unwrap() error { return ErrNoRecord }

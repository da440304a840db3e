package fakes

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"
)

// API serves the helpdesk, the CRM and the clock as a small JSON HTTP API,
// so a workflow running in another process re-reads material state the way
// it would in production, and sees exactly what the in-process fakes say:
// a source that is down answers 503 until it is back, and a field changed on
// cue is the next answer.
//
//	GET /crm/customers/{id}   {"id": …, "fields": {"email": …, "consent": …}}
//	GET /helpdesk/tasks/{id}  {"id": …, "customer": …, "subject": …, "status": …, "owner": …, "viewers": […]}
//	GET /clock                {"now": "2026-03-02T09:00:05Z", "lease": "30s", "ledger": "/abs/ledger.db"}
//
// Errors are {"error": "…"} with 404 (no such record) or 503 (the source is
// unavailable). The API only reads: changes go through the gate or the
// scenario's steps.
type API struct {
	CRM      *CRM
	Helpdesk *Helpdesk
	Clock    *Clock
	// Lease, when set, is the attempt lease of the rehearsal's ledger,
	// served with the time so that every process writing that ledger
	// gives its attempts the lease the rehearsal's restart runs out.
	Lease time.Duration
	// Ledger is the location of the ledger the clock belongs to, served
	// with it: a gate process uses the clock only for that ledger.
	Ledger string
}

// Handler returns the API's routes.
func (a *API) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /crm/customers/{id}", a.customer)
	mux.HandleFunc("GET /helpdesk/tasks/{id}", a.task)
	mux.HandleFunc("GET /clock", a.clock)
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "no such resource; see GET /crm/customers/{id}, /helpdesk/tasks/{id}, /clock"})
	})
	return mux
}

func (a *API) customer(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if !a.CRM.Available() {
		writeError(w, ErrSourceDown, "crm")
		return
	}
	rec, ok := a.CRM.Customer(id)
	if !ok {
		writeError(w, ErrNoRecord, "crm: customer "+id)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": id, "fields": rec})
}

func (a *API) task(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if !a.Helpdesk.Available() {
		writeError(w, ErrSourceDown, "helpdesk")
		return
	}
	rec, ok := a.Helpdesk.Task(id)
	if !ok {
		writeError(w, ErrNoRecord, "helpdesk: task "+id)
		return
	}
	viewers := []string{}
	if v := rec[FieldViewers]; v != "" {
		viewers = strings.Split(v, ",")
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": id, "customer": rec[FieldCustomer], "subject": rec[FieldSubject],
		"status": rec[FieldStatus], "owner": rec[FieldOwner], "viewers": viewers})
}

func (a *API) clock(w http.ResponseWriter, _ *http.Request) {
	body := map[string]string{"now": a.Clock.Now().Format(time.RFC3339Nano), "ledger": a.Ledger}
	if a.Lease > 0 {
		body["lease"] = a.Lease.String()
	}
	writeJSON(w, http.StatusOK, body)
}

func writeError(w http.ResponseWriter, err error, what string) {
	code := http.StatusNotFound
	if errors.Is(err, ErrSourceDown) {
		code = http.StatusServiceUnavailable
	}
	writeJSON(w, code, map[string]string{"error": what + ": " + err.Error()})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}

package fakes

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestAPIAnswersWhatTheFakesSay: the JSON API is a view of the same fakes a
// scenario's set, source_down and source_up steps change.
func TestAPIAnswersWhatTheFakesSay(t *testing.T) {
	crm := NewCRM()
	crm.AddCustomer("cust-ada", "ada@example.com", map[string]string{"consent": "yes"})
	desk := NewHelpdesk()
	desk.AddTask("t-1", "cust-ada", "Where is my order?", "", "wf-ack")
	desk.AddViewer("t-1", "sam")
	clock := NewClock(time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC))
	srv := httptest.NewServer((&API{CRM: crm, Helpdesk: desk, Clock: clock, Lease: 30 * time.Second}).Handler())
	defer srv.Close()

	get := func(path string, wantCode int) map[string]any {
		t.Helper()
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
			t.Fatalf("%s: not JSON: %v", path, err)
		}
		if resp.StatusCode != wantCode {
			t.Fatalf("%s: status %d, want %d (%v)", path, resp.StatusCode, wantCode, body)
		}
		return body
	}
	if f := get("/crm/customers/cust-ada", 200)["fields"].(map[string]any); f["consent"] != "yes" || f["email"] != "ada@example.com" {
		t.Fatalf("customer fields = %v", f)
	}
	crm.Set("cust-ada", "consent", "no")
	if f := get("/crm/customers/cust-ada", 200)["fields"].(map[string]any); f["consent"] != "no" {
		t.Fatalf("after set: consent = %v", f["consent"])
	}
	task := get("/helpdesk/tasks/t-1", 200)
	if task["owner"] != "wf-ack" || task["status"] != "open" || len(task["viewers"].([]any)) != 1 {
		t.Fatalf("task = %v", task)
	}
	get("/crm/customers/nobody", 404)
	get("/nothing", 404)
	crm.SetAvailable(false)
	if e := get("/crm/customers/cust-ada", 503)["error"]; e != "crm: source unavailable" {
		t.Fatalf("down: error = %v", e)
	}
	desk.SetAvailable(false)
	get("/helpdesk/tasks/t-1", 503)
	clock.Advance(5 * time.Second)
	if c := get("/clock", 200); c["now"] != "2026-03-02T09:00:05Z" || c["lease"] != "30s" {
		t.Fatalf("clock = %v", c)
	}
}

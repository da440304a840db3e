package testmailbox

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

func httpDo(t *testing.T, method, url, body string) (int, []byte) {
	t.Helper()
	status, b, _ := httpDoHeader(t, method, url, body)
	return status, b
}

func httpDoHeader(t *testing.T, method, url, body string) (int, []byte, http.Header) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctxT(t), method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b, resp.Header
}

func TestHTTPErrors(t *testing.T) {
	m := start(t, Config{})
	api := m.APIURL()
	tests := []struct {
		name, method, path, body string
		status                   int
		want                     string // in the error message
	}{
		{"NegativeLimit", "GET", "/api/v1/messages?limit=-1", "", 400, `"limit"`},
		{"TextLimit", "GET", "/api/v1/messages?limit=abc", "", 400, `"limit"`},
		{"HugeLimit", "GET", "/api/v1/messages?limit=100000", "", 400, `"limit"`},
		{"NegativeOffset", "GET", "/api/v1/messages?offset=-3", "", 400, `"offset"`},
		{"UnknownParameter", "GET", "/api/v1/messages?recipient=a@b", "", 400, `"recipient"`},
		{"RepeatedParameter", "GET", "/api/v1/messages?to=a&to=b", "", 400, `"to"`},
		{"UnknownID", "GET", "/api/v1/messages/999", "", 404, "not found"},
		{"UnknownRawID", "GET", "/api/v1/messages/999/raw", "", 404, "not found"},
		{"BadID", "GET", "/api/v1/messages/abc", "", 400, "not a positive integer"},
		{"ZeroID", "GET", "/api/v1/messages/0", "", 400, "not a positive integer"},
		{"UnknownPath", "GET", "/api/v1/nothing", "", 404, "no such endpoint"},
		{"FaultNotJSON", "PUT", "/api/v1/faults", "{", 400, "fault request"},
		{"FaultUnknownKind", "PUT", "/api/v1/faults", `{"faults":[{"kind":"explode"}]}`, 400, `unknown kind "explode"`},
		{"FaultUnknownField", "PUT", "/api/v1/faults", `{"faults":[{"kind":"down","cuont":1}]}`, 400, "cuont"},
		{"FaultBadDuration", "PUT", "/api/v1/faults", `{"faults":[{"kind":"delay_reply","duration":"soon"}]}`, 400, `"duration"`},
		{"FaultMissingDelay", "PUT", "/api/v1/faults", `{"faults":[{"kind":"delay_reply"}]}`, 400, `"duration"`},
		{"FaultMissingHold", "PUT", "/api/v1/faults", `{"faults":[{"kind":"hold_then_store"}]}`, 400, `fault hold_then_store: field "duration": required`},
		{"FaultNegativeStall", "PUT", "/api/v1/faults", `{"specs":["stall_body=-1s"]}`, 400, `field "duration": -1s is negative`},
		{"FaultHoldUnknownField", "PUT", "/api/v1/faults", `{"faults":[{"kind":"hold_354","duration":"3s","dur":"4s"}]}`, 400, `unknown field "dur"`},
		{"FaultBadProbability", "PUT", "/api/v1/faults", `{"faults":[{"kind":"reject_temporary","p":2}]}`, 400, `"p"`},
		{"FaultBadSpec", "PUT", "/api/v1/faults", `{"specs":["reject_temporary:count=x"]}`, 400, `"count"`},
		{"FaultEmptyBody", "PUT", "/api/v1/faults", "", 400, `the body is empty; want {"specs": ["down=5s"]}`},
		{"FaultSpecsNotAList", "PUT", "/api/v1/faults", `{"specs":"down=5s"}`, 400, `field "specs" must be a list, not a JSON string`},
		{"FaultsNotAList", "PUT", "/api/v1/faults", `{"faults":{"kind":"down"}}`, 400, `field "faults" must be a list, not a JSON object`},
		{"FaultCountNotANumber", "PUT", "/api/v1/faults", `{"faults":[{"kind":"reject_temporary","count":"2"}]}`, 400, `must be a whole number, not a JSON string`},
		{"FaultBodyNotAnObject", "PUT", "/api/v1/faults", `["down"]`, 400, `the body must be an object, not a JSON array`},
		{"FaultUnknownTopField", "PUT", "/api/v1/faults", `{"spec":["down"]}`, 400, `unknown field "spec" (want faults, specs)`},
		{"FaultTwoBodies", "PUT", "/api/v1/faults", `{"specs":[]} {"specs":[]}`, 400, "nothing after it"},
		{"PostMessages", "POST", "/api/v1/messages", "{}", 405, "/api/v1/messages takes GET, HEAD, DELETE, not POST"},
		{"PostFaults", "POST", "/api/v1/faults", "{}", 405, "takes GET, HEAD, PUT, DELETE"},
		{"DeleteStats", "DELETE", "/api/v1/stats", "", 405, "takes GET, HEAD"},
		{"PutMessage", "PUT", "/api/v1/messages/1", "", 405, "takes GET, HEAD"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body, header := httpDoHeader(t, tt.method, api+tt.path, tt.body)
			if status != tt.status {
				t.Errorf("status %d; want %d (%s)", status, tt.status, body)
			}
			var e ErrorResponse
			if err := json.Unmarshal(body, &e); err != nil {
				t.Fatalf("body %q is not a JSON error: %v", body, err)
			}
			if !strings.Contains(e.Error, tt.want) {
				t.Errorf("error %q; want it to mention %s", e.Error, tt.want)
			}
			for _, leak := range []string{"json:", "Go ", "struct", "testmailbox.", "[]", "int64"} {
				if strings.Contains(e.Error, leak) {
					t.Errorf("error %q leaks %q from the implementation", e.Error, leak)
				}
			}
			if allow := header.Get("Allow"); (status == 405) != (allow != "") || (allow != "" && !strings.Contains(e.Error, allow)) {
				t.Errorf("status %d with Allow %q (error %q)", status, allow, e.Error)
			}
		})
	}
	if got := m.Faults(); len(got) != 0 {
		t.Errorf("a refused PUT changed the faults: %v", got)
	}
}

func TestHTTPMessagesPagingRawAndDelete(t *testing.T) {
	m := start(t, Config{})
	api := m.APIURL()
	for i := range 5 {
		to := "ann@example.com"
		if i%2 == 1 {
			to = "bob@example.com"
		}
		if err := send(m.SMTPAddr(), []string{to}, message(fmt.Sprint("k", i), fmt.Sprint("subject ", i))); err != nil {
			t.Fatal(err)
		}
	}
	list := func(query string) MessagesResponse {
		t.Helper()
		status, body := httpDo(t, "GET", api+"/api/v1/messages"+query, "")
		if status != 200 {
			t.Fatalf("GET %s: %d %s", query, status, body)
		}
		var r MessagesResponse
		if err := json.Unmarshal(body, &r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	if r := list("?limit=2&offset=1"); r.Total != 5 || len(r.Messages) != 2 || r.Messages[0].Subject != "subject 1" {
		t.Errorf("page: total %d, %d messages, %+v", r.Total, len(r.Messages), r.Messages)
	}
	if r := list("?limit=0"); r.Total != 5 || len(r.Messages) != 0 {
		t.Errorf("limit=0: total %d, %d messages", r.Total, len(r.Messages))
	}
	if r := list("?to=BOB@example.com&limit=1"); r.Total != 2 || len(r.Messages) != 1 {
		t.Errorf("to=bob: total %d, %d messages", r.Total, len(r.Messages))
	}
	r := list("?action_key=k4")
	if r.Total != 1 {
		t.Fatalf("action_key=k4: total %d", r.Total)
	}
	mid := r.Messages[0].MessageID
	if r := list("?message_id=%3C" + mid + "%3E"); r.Total != 1 {
		t.Errorf("message_id with brackets: total %d", r.Total)
	}

	id := r.Messages[0].ID
	status, body := httpDo(t, "GET", fmt.Sprintf("%s/api/v1/messages/%d", api, id), "")
	var one Message
	if status != 200 || json.Unmarshal(body, &one) != nil || one.ActionKey != "k4" {
		t.Errorf("get: %d %s", status, body)
	}
	if strings.Contains(string(body), "Hello.") {
		t.Errorf("JSON message carries the raw body: %s", body)
	}
	status, body = httpDo(t, "GET", fmt.Sprintf("%s/api/v1/messages/%d/raw", api, id), "")
	if status != 200 || !strings.HasPrefix(string(body), "From: shop@example.com\r\n") || !strings.HasSuffix(string(body), "Hello.\r\n") {
		t.Errorf("raw: %d %q", status, body)
	}

	status, body = httpDo(t, "DELETE", api+"/api/v1/messages", "")
	if status != 200 || strings.TrimSpace(string(body)) != `{"deleted":5}` {
		t.Errorf("delete: %d %s", status, body)
	}
	if r := list(""); r.Total != 0 || r.Messages == nil {
		t.Errorf("after delete: total %d, messages %v", r.Total, r.Messages)
	}
}

func TestHTTPFaultsAndStats(t *testing.T) {
	m := start(t, Config{})
	api := m.APIURL()
	status, body := httpDo(t, "PUT", api+"/api/v1/faults",
		`{"faults":[{"kind":"delay_reply","duration":"1.5s","to":"bob@example.com"}],"specs":["reject_temporary:count=1"]}`)
	if status != 200 {
		t.Fatalf("put: %d %s", status, body)
	}
	var fr FaultsResponse
	if err := json.Unmarshal(body, &fr); err != nil {
		t.Fatal(err)
	}
	want := []FaultStatus{
		{Fault: Fault{Kind: FaultDelayReply, Duration: 1500 * time.Millisecond, To: "bob@example.com"}, Remaining: -1},
		{Fault: Fault{Kind: FaultRejectTemporary, Count: 1}, Remaining: 1},
	}
	if fmt.Sprint(fr.Faults) != fmt.Sprint(want) || fr.Down {
		t.Errorf("faults %+v; want %+v", fr, want)
	}
	if err := send(m.SMTPAddr(), []string{"ann@example.com"}, message("a", "s")); replyCode(err) != 451 {
		t.Errorf("send: %v; want 451", err)
	}
	status, body = httpDo(t, "GET", api+"/api/v1/faults", "")
	if err := json.Unmarshal(body, &fr); status != 200 || err != nil || len(fr.Faults) != 1 {
		t.Errorf("get faults: %d %s", status, body)
	}
	status, body = httpDo(t, "GET", api+"/api/v1/stats", "")
	var st Stats
	if err := json.Unmarshal(body, &st); status != 200 || err != nil {
		t.Fatalf("stats: %d %s", status, body)
	}
	if st.Refused != 1 || st.FaultsFired[FaultRejectTemporary] != 1 || len(st.FaultsFired) != len(FaultKinds) {
		t.Errorf("stats %s", body)
	}

	status, body = httpDo(t, "PUT", api+"/api/v1/faults", `{"specs":["down"]}`)
	if status != 200 || !strings.Contains(string(body), `"down":true`) {
		t.Errorf("down: %d %s", status, body)
	}
	if dialable(m.SMTPAddr()) {
		t.Error("SMTP reachable while down")
	}
	status, body = httpDo(t, "DELETE", api+"/api/v1/faults", "")
	if status != 200 || strings.TrimSpace(string(body)) != `{"faults":[],"down":false}` {
		t.Errorf("clear: %d %s", status, body)
	}
	if !dialable(m.SMTPAddr()) {
		t.Error("SMTP unreachable after clearing down")
	}
}

func TestClientAgainstAPI(t *testing.T) {
	m := start(t, Config{})
	c, err := NewClient(m.APIURL(), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	if err := send(m.SMTPAddr(), []string{"ann@example.com"}, message("c1", "s")); err != nil {
		t.Fatal(err)
	}
	if n, err := c.Count(ctx, Filter{ActionKey: "c1"}); err != nil || n != 1 {
		t.Errorf("count: %d, %v", n, err)
	}
	if r, err := c.List(ctx, Filter{}); err != nil || r.Total != 1 || len(r.Messages) != 1 {
		t.Errorf("list: %+v, %v", r, err)
	}
	f, _ := ParseFault("accept_then_drop:count=2:p=0.5:seed=3")
	fr, err := c.SetFaults(ctx, []Fault{f})
	if err != nil || len(fr.Faults) != 1 || fr.Faults[0].Fault != f {
		t.Errorf("set faults: %+v, %v", fr, err)
	}
	if _, err := c.SetFaults(ctx, nil); err != nil {
		t.Error(err)
	}
	if n, err := c.Clear(ctx); err != nil || n != 1 {
		t.Errorf("clear: %d, %v", n, err)
	}
	if _, err := c.List(ctx, Filter{Limit: -1}); err == nil || !strings.Contains(err.Error(), `"limit"`) {
		t.Errorf("bad limit: %v", err)
	}
	for _, bad := range []string{"", "ftp://x:1", "http://", "http://h:1/path", "http://h:1?x=1"} {
		if _, err := NewClient(bad, nil); err == nil {
			t.Errorf("NewClient(%q) accepted", bad)
		}
	}
}

func TestParseFault(t *testing.T) {
	good := []struct {
		spec string
		want Fault
	}{
		{"accept_then_drop", Fault{Kind: FaultAcceptThenDrop}},
		{"accept_then_drop:count=1", Fault{Kind: FaultAcceptThenDrop, Count: 1}},
		{"delay_reply=3s:to=bob@example.com", Fault{Kind: FaultDelayReply, Duration: 3 * time.Second, To: "bob@example.com"}},
		{"reject_temporary:p=0.3:seed=7", Fault{Kind: FaultRejectTemporary, P: 0.3, Seed: 7}},
		{"reject_permanent:to=a@b:count=2", Fault{Kind: FaultRejectPermanent, To: "a@b", Count: 2}},
		{"down", Fault{Kind: FaultDown}},
		{"down=5s", Fault{Kind: FaultDown, Duration: 5 * time.Second}},
	}
	for _, tt := range good {
		got, err := ParseFault(tt.spec)
		if err != nil || got != tt.want {
			t.Errorf("ParseFault(%q) = %+v, %v; want %+v", tt.spec, got, err, tt.want)
		}
		if again, err := ParseFault(got.String()); err != nil || again != got {
			t.Errorf("round trip of %q via %q: %+v, %v", tt.spec, got.String(), again, err)
		}
	}
	bad := []struct{ spec, field string }{
		{"", `"kind"`},
		{"explode", `"kind"`},
		{"delay_reply", `"duration"`},
		{"delay_reply=soon", `duration "soon"`},
		{"accept_then_drop=3s", `"duration"`},
		{"accept_then_drop:count=0", `"count"`},
		{"accept_then_drop:count=many", `"count"`},
		{"reject_temporary:p=1.5", `"p"`},
		{"reject_temporary:p=0", `"p"`},
		{"reject_temporary:seed=x", `"seed"`},
		{"reject_temporary:colour=red", `"colour"`},
		{"reject_temporary:count", `"count"`},
		{"reject_temporary:count=1:count=2", `"count"`},
		{"down:count=1", `"count"`},
		{"down:to=a@b", `"to"`},
	}
	for _, tt := range bad {
		_, err := ParseFault(tt.spec)
		if err == nil || !strings.Contains(err.Error(), tt.field) {
			t.Errorf("ParseFault(%q) = %v; want an error naming %s", tt.spec, err, tt.field)
		}
	}
}

// TestHTTPTimedDownSaysWhenItEnds: a down fault with a duration reports
// when the listener comes back; one without reports no end time.
func TestHTTPTimedDownSaysWhenItEnds(t *testing.T) {
	m := start(t, Config{})
	api := m.APIURL()
	before := time.Now()
	status, body := httpDo(t, "PUT", api+"/api/v1/faults", `{"specs":["down=1h"]}`)
	var fr FaultsResponse
	if err := json.Unmarshal(body, &fr); status != 200 || err != nil || len(fr.Faults) != 1 || !fr.Down {
		t.Fatalf("put: %d %s", status, body)
	}
	until := fr.Faults[0].Until
	if until.Before(before.Add(time.Hour-time.Second)) || until.After(time.Now().Add(time.Hour)) {
		t.Fatalf("until %v, want about an hour from %v (%s)", until, before, body)
	}
	status, body = httpDo(t, "PUT", api+"/api/v1/faults", `{"specs":["down"]}`)
	if err := json.Unmarshal(body, &fr); status != 200 || err != nil || !fr.Faults[0].Until.IsZero() ||
		strings.Contains(string(body), "until") {
		t.Fatalf("an untimed down says when it ends: %d %s", status, body)
	}
}

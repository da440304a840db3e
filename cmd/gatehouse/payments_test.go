package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"gatehouse/fakes"
)

// TestPaymentsServe runs `payments serve` as a real process with a fault
// from the command line: the refund whose response was dropped is made
// once, a retry with its key replays it, and SIGTERM stops it.
func TestPaymentsServe(t *testing.T) {
	cmd := exec.Command(gatehouseBinary(t), "payments", "serve", "--http", "127.0.0.1:0",
		"--fault", "commit_then_drop", "--window", "1h", "--search-lag", "30s")
	lines, stderr := startServing(t, cmd)
	var url string
	var banner []string
	timeout := time.After(30 * time.Second)
	for url == "" || !strings.HasPrefix(banner[len(banner)-1], "fault") {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("payments serve ended early; stderr: %s", stderr.String())
			}
			banner = append(banner, l)
			if v, ok := strings.CutPrefix(l, "http "); ok {
				url = strings.TrimSpace(v)
			}
		case <-timeout:
			t.Fatalf("payments serve printed %q", banner)
		}
	}
	text := strings.Join(banner, "\n")
	for _, w := range []string{"Idempotency-Key honoured for 1h0m0s", "lag 30s", "fault   commit_then_drop"} {
		if !strings.Contains(text, w) {
			t.Errorf("banner lacks %q:\n%s", w, text)
		}
	}
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
	post := func() (*http.Response, error) {
		req, _ := http.NewRequest("POST", url+"/v1/refunds",
			strings.NewReader(`{"payment": "pay_1", "amount": 700, "currency": "eur", "metadata": {"gatehouse_key": "k-1"}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "idem-1")
		return hc.Do(req)
	}
	if resp, err := post(); err == nil {
		resp.Body.Close()
		t.Fatalf("the first refund was answered %d; the fault drops its response", resp.StatusCode)
	}
	resp, err := post()
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 201 || resp.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("retry: %d replayed=%q", resp.StatusCode, resp.Header.Get("Idempotent-Replayed"))
	}
	resp, err = hc.Get(url + "/_fake/records")
	if err != nil {
		t.Fatal(err)
	}
	var recs struct {
		PerKey map[string]int `json:"per_key"`
	}
	err = json.NewDecoder(resp.Body).Decode(&recs)
	resp.Body.Close()
	if err != nil || recs.PerKey["k-1"] != 1 {
		t.Fatalf("records per key %v (%v), want k-1: 1", recs.PerKey, err)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("after SIGTERM: %v; stderr %s", err, stderr.String())
	}
	var rest []string
	for l := range lines {
		rest = append(rest, l)
	}
	if !strings.Contains(strings.Join(rest, "\n"), "stopping") {
		t.Errorf("no shutdown line in %q", rest)
	}
}

func TestPaymentsUsageErrors(t *testing.T) {
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"NoVerb", []string{"payments"}, "missing verb"},
		{"UnknownVerb", []string{"payments", "refund"}, `unknown verb "refund"`},
		{"BadFault", []string{"payments", "serve", "--fault", "explode"}, `unknown kind "explode"`},
		{"FaultDuration", []string{"payments", "serve", "--fault", "error_500=1s"}, "only delay takes a duration"},
		{"BadKeys", []string{"payments", "serve", "--keys", "some"}, `--keys "some"`},
		{"ZeroWindow", []string{"payments", "serve", "--window", "0s"}, "--window 0s"},
		{"NegativeLag", []string{"payments", "serve", "--search-lag", "-1s"}, "--search-lag -1s"},
		{"NotLoopback", []string{"payments", "serve", "--http", "0.0.0.0:0"}, "not a loopback address"},
		{"EveryInterface", []string{"payments", "serve", "--http", ":0"}, "not a loopback address"},
		{"ExtraArg", []string{"payments", "serve", "now"}, "unknown command"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := run(tt.args, &out, &errb)
			if code != exitUsage || !strings.Contains(errb.String(), tt.want) {
				t.Errorf("exit %d, stderr %q; want %d and %q", code, errb.String(), exitUsage, tt.want)
			}
		})
	}
}

// TestPaymentsServeStopsWithContext: the in-process server returns once
// its context ends.
func TestPaymentsServeStopsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	pr, pw := io.Pipe()
	go func() {
		done <- servePayments(ctx, pw, "127.0.0.1:0", fakes.PaymentsOptions{Keys: fakes.PaymentsKeys, Window: time.Hour}, nil)
		pw.Close()
	}()
	sc := bufio.NewScanner(pr)
	if !sc.Scan() || !strings.HasPrefix(sc.Text(), "http    http://127.0.0.1:") {
		t.Fatalf("first line %q", sc.Text())
	}
	go io.Copy(io.Discard, pr)
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not return after its context ended")
	}
}

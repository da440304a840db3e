package httpdest_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"gatehouse/destination"
	"gatehouse/destination/httpdest"
)

// keepingProvider answers 201 to every request on a connection, as HTTP/1.1
// servers do, and counts the connections it accepted. With closeIdle it
// closes each connection after its first answer without saying so (no
// Connection: close), as a server whose idle timeout ran out does, and
// tells closed once it has. With interim it answers its first request
// with a 100 alone and its final answer only once the next request on the
// connection has arrived, so that a client reusing the connection would
// read it as the next request's.
type keepingProvider struct {
	ln        net.Listener
	closeIdle bool
	interim   bool
	closed    chan struct{}
	mu        sync.Mutex
	conns     int
	requests  int
}

func startKeepingProvider(t *testing.T, closeIdle, interim bool) *keepingProvider {
	t.Helper()
	p := &keepingProvider{ln: loopback(t), closeIdle: closeIdle, interim: interim, closed: make(chan struct{}, 64)}
	go func() {
		for {
			c, err := p.ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			p.conns++
			p.mu.Unlock()
			go p.serve(c)
		}
	}()
	return p
}

func (p *keepingProvider) serve(c net.Conn) {
	defer c.Close()
	br := bufio.NewReader(c)
	pending := ""
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		if _, err := io.Copy(io.Discard, req.Body); err != nil {
			return
		}
		p.mu.Lock()
		p.requests++
		n := p.requests
		p.mu.Unlock()
		body := fmt.Sprintf(`{"id": "re_%d"}`, n)
		answer := fmt.Sprintf("HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
		if p.interim && n == 1 {
			io.WriteString(c, "HTTP/1.1 100 Continue\r\n\r\n")
			pending = answer // written when the next request has arrived
			continue
		}
		io.WriteString(c, pending+answer)
		pending = ""
		if p.closeIdle {
			c.Close()
			p.closed <- struct{}{}
			return
		}
	}
}

func (p *keepingProvider) counts() (conns, requests int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.conns, p.requests
}

// TestKeptConnections: a connection answered completely carries the next
// write, unless the profile has no duplicate control, the connection sat
// idle past KeepIdle, or the provider closed it meanwhile; in none of
// these cases is a write's outcome ever anything but accepted, and each
// write reaches the provider once.
func TestKeptConnections(t *testing.T) {
	cases := []struct {
		name      string
		query     string
		keepIdle  time.Duration
		closeIdle bool
		wantConns int
	}{
		{"kept", "dup=idempotency-key", 0, false, 1},
		{"kept with a reference alone", "dup=reference&ref=metadata.gatehouse_key&search=/v1/refunds", 0, false, 1},
		{"no duplicate control", "dup=none", 0, false, 5},
		{"idle past KeepIdle", "dup=idempotency-key", time.Nanosecond, false, 5},
		{"a connection of its own when asked", "dup=idempotency-key", -1, false, 5},
		{"closed by the provider while idle", "dup=idempotency-key", 0, true, 5},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := startKeepingProvider(t, c.closeIdle, false)
			d, err := httpdest.New("http://" + p.ln.Addr().String() + "?" + c.query)
			if err != nil {
				t.Fatal(err)
			}
			d.KeepIdle = c.keepIdle
			t.Cleanup(d.CloseIdle)
			for i := range 5 {
				w, err := refund().Write(d.Profile, fmt.Sprint("refund-", i), fmt.Sprint("gh_k", i))
				if err != nil {
					t.Fatal(err)
				}
				rcpt, err := d.Send(ctxT(t), destination.Message{ActionKey: fmt.Sprint("refund-", i), HTTP: &w})
				if err != nil || rcpt.DestinationID != fmt.Sprint("re_", i+1) {
					t.Fatalf("write %d: %v (%+v), want accepted as re_%d", i, err, rcpt, i+1)
				}
				if c.closeIdle {
					<-p.closed // the provider's close has reached the socket
				}
			}
			if conns, requests := p.counts(); conns != c.wantConns || requests != 5 {
				t.Fatalf("%d connections for %d requests, want %d for 5", conns, requests, c.wantConns)
			}
		})
	}
}

// TestKeptConnectionsUnderConcurrency: writers at once share the kept
// connections without two writes on one (the race detector watches the
// pool), and no more connections are opened than writers.
func TestKeptConnectionsUnderConcurrency(t *testing.T) {
	const writers, each = 8, 25
	p := startKeepingProvider(t, false, false)
	d, err := httpdest.New("http://" + p.ln.Addr().String() + "?dup=idempotency-key")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.CloseIdle)
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for g := range writers {
		wg.Go(func() {
			for i := range each {
				key := fmt.Sprintf("refund-%d-%d", g, i)
				w, err := refund().Write(d.Profile, key, "gh_"+key)
				if err != nil {
					errs <- err
					return
				}
				if _, err := d.Send(ctxT(t), destination.Message{ActionKey: key, HTTP: &w}); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if conns, requests := p.counts(); conns > writers || requests != writers*each {
		t.Fatalf("%d connections for %d requests, want at most %d for %d", conns, requests, writers, writers*each)
	}
}

// TestInterimAnswerEndsTheConnection: a write answered only with an interim
// 100 is unknown, and its connection is not kept, since the final answer
// still to come would be read as the next write's: the next write goes on
// a connection of its own and gets its own answer.
func TestInterimAnswerEndsTheConnection(t *testing.T) {
	p := startKeepingProvider(t, false, true)
	d, err := httpdest.New("http://" + p.ln.Addr().String() + "?dup=idempotency-key")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.CloseIdle)
	send := func(i int) (destination.Receipt, error) {
		w, err := refund().Write(d.Profile, fmt.Sprint("refund-", i), fmt.Sprint("gh_k", i))
		if err != nil {
			t.Fatal(err)
		}
		return d.Send(ctxT(t), destination.Message{ActionKey: fmt.Sprint("refund-", i), HTTP: &w})
	}
	if _, err := send(1); destination.ClassifyDelivery(err) != destination.OutcomeUnknown {
		t.Fatalf("a write answered 100 alone: %v, want unknown", err)
	}
	rcpt, err := send(2)
	if err != nil || rcpt.DestinationID != "re_2" {
		t.Fatalf("the next write: %v (%+v), want its own answer, re_2", err, rcpt)
	}
	if conns, _ := p.counts(); conns != 2 {
		t.Fatalf("%d connections, want the interim one given up", conns)
	}
}

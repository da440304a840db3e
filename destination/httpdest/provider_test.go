package httpdest_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"
)

// mode is how the test provider treats the next request: a phase at which
// it fails, or the status it answers.
type mode struct {
	name string
	// reset: accept and reset the connection before reading anything.
	reset bool
	// drop: read the whole request, then close without a word.
	drop bool
	// half: read the whole request, begin a 201 and close mid-body.
	half bool
	// early: read only the header fields, answer with status and body
	// at once and close, the rest of the request unread (the send is of
	// bigRefund, which no socket buffer holds whole).
	early bool
	// status and body: the answer otherwise.
	status int
	body   string
	header http.Header
}

// provider is a loopback HTTP server that fails at the phase it is told:
// a raw listener, so that it can reset a connection before reading or
// close after reading the body, which net/http's server does not offer.
type provider struct {
	ln        net.Listener
	mu        sync.Mutex
	mode      mode
	complete  int      // requests read to their last byte
	answered  int      // requests answered before their last byte was read
	bodies    [][]byte // their bodies
	wires     [][]byte // their bytes as received
	resetDone chan struct{}
	earlyDone chan struct{} // an early answer was written
}

func startProvider(t *testing.T, m mode) *provider {
	t.Helper()
	p := &provider{ln: loopback(t), mode: m, resetDone: make(chan struct{}, 1), earlyDone: make(chan struct{}, 1)}
	go p.serve()
	return p
}

// loopback is a listener on a free loopback port, closed when t ends.
func loopback(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

func (p *provider) url() string { return "http://" + p.ln.Addr().String() }

func (p *provider) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.handle(c)
	}
}

// recorder keeps the bytes a connection delivered.
type recorder struct {
	net.Conn
	got []byte
}

func (r *recorder) Read(b []byte) (int, error) {
	n, err := r.Conn.Read(b)
	r.got = append(r.got, b[:n]...)
	return n, err
}

func (p *provider) handle(c net.Conn) {
	defer c.Close()
	p.mu.Lock()
	m := p.mode
	p.mu.Unlock()
	if m.reset {
		c.(*net.TCPConn).SetLinger(0)
		c.Close()
		p.resetDone <- struct{}{}
		return
	}
	rec := &recorder{Conn: c}
	if m.early {
		// A small receive buffer, so that the sender's write is still
		// under way when the connection closes.
		c.(*net.TCPConn).SetReadBuffer(16 << 10)
	}
	req, err := http.ReadRequest(bufio.NewReader(rec))
	if err != nil {
		return
	}
	if m.early {
		p.mu.Lock()
		p.answered++
		p.mu.Unlock()
		p.answer(c, m)
		select {
		case p.earlyDone <- struct{}{}:
		default:
		}
		return // closing with the body unread resets the connection
	}
	body, err := io.ReadAll(req.Body)
	if err != nil {
		return
	}
	p.mu.Lock()
	p.complete++
	p.bodies = append(p.bodies, body)
	p.wires = append(p.wires, rec.got)
	p.mu.Unlock()
	switch {
	case m.drop:
		return
	case m.half:
		io.WriteString(c, "HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: 80\r\n\r\n{\"id\": \"re_")
		return
	}
	p.answer(c, m)
}

// answer writes m's response.
func (p *provider) answer(c net.Conn, m mode) {
	resp := &http.Response{StatusCode: m.status, ProtoMajor: 1, ProtoMinor: 1, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(stringsReader(m.body)), ContentLength: int64(len(m.body)), Close: true}
	for k, v := range m.header {
		resp.Header[k] = v
	}
	resp.Write(c)
}

func (p *provider) completed() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.complete
}

// answeredEarly is how many requests it answered before their last byte.
func (p *provider) answeredEarly() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.answered
}

func stringsReader(s string) io.Reader { return &stringReader{s: s} }

type stringReader struct{ s string }

func (r *stringReader) Read(b []byte) (int, error) {
	if r.s == "" {
		return 0, io.EOF
	}
	n := copy(b, r.s)
	r.s = r.s[n:]
	return n, nil
}

func errBody(typ string) string {
	b, _ := json.Marshal(map[string]any{"error": map[string]string{"type": typ, "message": typ}})
	return string(b)
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

package testmailbox

import (
	"context"
	"fmt"
	"net"
	"sync"
)

// switchListener is the listener the SMTP server serves on. It can be taken
// down (the TCP port is really closed, so clients get "connection refused")
// and brought back up on the same address, while the server keeps one
// Serve loop for its whole life.
type switchListener struct {
	addr  string // resolved address, fixed after the first listen
	conns chan net.Conn

	mu     sync.Mutex
	inner  net.Listener // nil while down
	closed chan struct{}
	once   sync.Once
}

func listenSwitch(ctx context.Context, addr string) (*switchListener, error) {
	var lc net.ListenConfig
	l, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen smtp on %s: %w", addr, err)
	}
	s := &switchListener{
		addr:   l.Addr().String(),
		conns:  make(chan net.Conn),
		closed: make(chan struct{}),
		inner:  l,
	}
	go s.pump(l)
	return s, nil
}

func (s *switchListener) pump(l net.Listener) {
	for {
		c, err := l.Accept()
		if err != nil {
			return // closed by down or Close
		}
		select {
		case s.conns <- c:
		case <-s.closed:
			c.Close()
			return
		}
	}
}

// Accept returns the next connection from whichever listener is up.
func (s *switchListener) Accept() (net.Conn, error) {
	select {
	case c := <-s.conns:
		return c, nil
	case <-s.closed:
		return nil, net.ErrClosed
	}
}

// Close stops for good; it is safe to call more than once.
func (s *switchListener) Close() error {
	s.once.Do(func() { close(s.closed) })
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inner != nil {
		s.inner.Close()
		s.inner = nil
	}
	return nil
}

// Addr is the address the listener serves on, up or down.
func (s *switchListener) Addr() net.Addr {
	a, err := net.ResolveTCPAddr("tcp", s.addr)
	if err != nil {
		return &net.TCPAddr{}
	}
	return a
}

// down closes the port; it reports whether it was up.
func (s *switchListener) down() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inner == nil {
		return false
	}
	s.inner.Close()
	s.inner = nil
	return true
}

// up listens again on the same address.
func (s *switchListener) up() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.closed:
		return net.ErrClosed
	default:
	}
	if s.inner != nil {
		return nil
	}
	l, err := net.Listen("tcp", s.addr)
	if err != nil {
		return fmt.Errorf("listen smtp again on %s: %w", s.addr, err)
	}
	s.inner = l
	go s.pump(l)
	return nil
}

func (s *switchListener) isUp() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.inner != nil
}

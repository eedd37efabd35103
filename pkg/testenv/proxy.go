package testenv

import (
	"net"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// FaultMode is how a Proxy fails while it is cut.
type FaultMode int

const (
	// Reset closes every connection and refuses new ones at once: the dependency is down and
	// says so.
	Reset FaultMode = iota
	// Blackhole keeps connections open but forwards nothing either way, and accepts new
	// connections that never answer: a network partition, where only the caller's own deadlines
	// end a call.
	Blackhole
)

// Proxy is a TCP proxy a test puts between a process and a dependency (Postgres, Redis) to cut it
// off and restore it, as an outage or a partition would, without touching the shared service that
// other tests use.
type Proxy struct {
	target string
	ln     net.Listener
	wg     sync.WaitGroup

	mu    sync.Mutex
	cut   bool
	mode  FaultMode
	conns map[net.Conn]struct{}
}

// NewProxy listens on a free local port and forwards every connection to target. It stops with
// the test.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &Proxy{target: target, ln: ln, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Cut fails the dependency in the given mode until Restore.
func (p *Proxy) Cut(mode FaultMode) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut, p.mode = true, mode
	if mode == Reset {
		p.closeConnsLocked()
	}
}

// Restore ends a cut. Connections held by a Blackhole cut are closed (as a partition that heals
// usually leaves them dead), so callers reconnect.
func (p *Proxy) Restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut && p.mode == Blackhole {
		// Bytes were dropped mid-protocol; these connections cannot be trusted again.
		p.closeConnsLocked()
	}
	p.cut = false
}

func (p *Proxy) closeConnsLocked() {
	for c := range p.conns {
		_ = c.Close()
		delete(p.conns, c)
	}
}

func (p *Proxy) close() {
	_ = p.ln.Close()
	p.mu.Lock()
	p.closeConnsLocked()
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		cut, mode := p.cut, p.mode
		if cut && mode == Reset {
			p.mu.Unlock()
			_ = c.Close()
			continue
		}
		p.conns[c] = struct{}{}
		p.mu.Unlock()
		p.wg.Add(1)
		go p.serve(c)
	}
}

// serve connects to the target and copies both ways. Data read while the proxy is blackholed is
// dropped.
func (p *Proxy) serve(c net.Conn) {
	defer p.wg.Done()
	defer p.forget(c)
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	p.mu.Lock()
	if _, open := p.conns[c]; !open {
		p.mu.Unlock()
		_ = up.Close()
		return
	}
	p.conns[up] = struct{}{}
	p.mu.Unlock()
	defer p.forget(up)
	done := make(chan struct{}, 2)
	go func() { p.copy(up, c); done <- struct{}{} }()
	go func() { p.copy(c, up); done <- struct{}{} }()
	<-done
	_ = c.Close()
	_ = up.Close()
	<-done
}

func (p *Proxy) copy(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			drop := p.cut && p.mode == Blackhole
			p.mu.Unlock()
			if !drop {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *Proxy) forget(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	_ = c.Close()
}

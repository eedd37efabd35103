package sse

import (
	"bytes"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
)

// gatedSink is a connection whose writes wait for a gate, counting writers at once.
type gatedSink struct {
	gate    chan struct{}
	entered chan struct{}
	mu      sync.Mutex
	buf     bytes.Buffer
	writers atomic.Int32
	most    atomic.Int32
}

func (g *gatedSink) Write(p []byte) (int, error) {
	n := g.writers.Add(1)
	defer g.writers.Add(-1)
	if n > g.most.Load() {
		g.most.Store(n)
	}
	g.entered <- struct{}{}
	<-g.gate
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.buf.Write(p)
}
func (*gatedSink) Flush() error                     { return nil }
func (*gatedSink) SetWriteDeadline(time.Time) error { return nil }

// TestWakeWhileRunning: a wake that arrives while the stream's goroutine is busy is not lost: the
// goroutine goes round again instead of parking, and no second goroutine runs the stream.
func TestWakeWhileRunning(t *testing.T) {
	h := New(Config{}, nil, nil, slog.New(slog.DiscardHandler), prometheus.NewRegistry())
	out := &gatedSink{gate: make(chan struct{}), entered: make(chan struct{})}
	l := &live{c: &conn{closeWithRetry: make(chan struct{})}}
	l.h, l.out, l.ew = h, out, newEventWriter(out)
	// A parked stream holds a slot in h.streams; wake adds its goroutines beside it.
	h.streams.Add(1)
	defer h.streams.Done()

	l.wake(evKeepAlive)
	recv(t, out.entered) // the first keep-alive is being written
	require.Equal(t, stRunning, l.state.Load())
	l.wake(evKeepAlive)
	l.wake(evKeepAlive) // two wakes while running make one more round
	require.Equal(t, stPending, l.state.Load())
	out.gate <- struct{}{}
	recv(t, out.entered) // the second round: the wakes while running were not lost
	out.gate <- struct{}{}
	// Back to idle: the stream parks, and its goroutine ends.
	done := make(chan struct{})
	go func() { h.streams.Done(); h.streams.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the stream's goroutine did not end")
	}
	h.streams.Add(1)
	require.Equal(t, stIdle, l.state.Load())
	require.Equal(t, 2, strings.Count(out.buf.String(), ": keep-alive\n\n"))
	require.Equal(t, int32(1), out.most.Load(), "one goroutine at a time")

	// A wake of an idle stream starts it again.
	l.wake(evKeepAlive)
	recv(t, out.entered)
	out.gate <- struct{}{}
	require.Eventually(t, func() bool { return l.state.Load() == stIdle }, 10*time.Second, time.Millisecond)
	require.Equal(t, 3, strings.Count(out.buf.String(), ": keep-alive\n\n"))
}

func recv(t *testing.T, c <-chan struct{}) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(10 * time.Second):
		t.Fatal("the stream did not run")
	}
}

// tcpPair returns both ends of a loopback TCP connection.
func tcpPair(t *testing.T) (server, client net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	client, err = net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	server, err = ln.Accept()
	require.NoError(t, err)
	return server, client
}

func TestEpollPoller(t *testing.T) {
	p, err := newPoller()
	require.NoError(t, err)
	ep, ok := p.(*epollPoller)
	if !ok {
		t.Skip("no epoll on this platform")
	}
	ran := make(chan struct{})
	go func() { defer close(ran); p.run() }()
	defer func() { p.stop(); <-ran }()

	type reg struct {
		srv, cli net.Conn
		tok      uint64
		gone     chan struct{}
	}
	add := func() *reg {
		r := &reg{gone: make(chan struct{})}
		r.srv, r.cli = tcpPair(t)
		var once sync.Once
		r.tok, err = p.add(r.srv, func() { once.Do(func() { close(r.gone) }) })
		require.NoError(t, err)
		return r
	}

	// A client that hangs up is noticed.
	a := add()
	require.Equal(t, 1, ep.registered())
	require.NoError(t, a.cli.Close())
	select {
	case <-a.gone:
	case <-time.After(10 * time.Second):
		t.Fatal("hang-up not noticed")
	}
	require.Equal(t, 0, ep.registered(), "a fired registration is dropped")
	p.remove(a.srv, a.tok)
	require.NoError(t, a.srv.Close())

	// A client that sends anything is noticed too.
	b := add()
	_, err = b.cli.Write([]byte("x"))
	require.NoError(t, err)
	select {
	case <-b.gone:
	case <-time.After(10 * time.Second):
		t.Fatal("readable connection not noticed")
	}
	p.remove(b.srv, b.tok)
	require.NoError(t, b.srv.Close())
	require.NoError(t, b.cli.Close())

	// A registration removed before its connection closes never fires, and the next connection,
	// which may get the same fd number, has a token of its own.
	c := add()
	p.remove(c.srv, c.tok)
	require.Equal(t, 0, ep.registered())
	require.NoError(t, c.srv.Close())
	d := add()
	require.NotEqual(t, c.tok, d.tok)
	require.NoError(t, c.cli.Close())
	require.NoError(t, d.cli.Close())
	select {
	case <-d.gone:
	case <-time.After(10 * time.Second):
		t.Fatal("hang-up not noticed")
	}
	select {
	case <-c.gone:
		t.Fatal("a removed registration fired")
	default:
	}
	p.remove(d.srv, d.tok)
	require.NoError(t, d.srv.Close())
}

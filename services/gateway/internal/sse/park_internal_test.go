package sse

import (
	"bytes"
	"log/slog"
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

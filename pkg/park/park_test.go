package park

import (
	"bytes"
	"context"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// gatedWriter is a connection whose writes wait for a gate, counting writers at once.
type gatedWriter struct {
	gate    chan struct{}
	entered chan struct{}
	mu      sync.Mutex
	buf     bytes.Buffer
	writers atomic.Int32
	most    atomic.Int32
}

func (g *gatedWriter) Write(p []byte) (int, error) {
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

func (g *gatedWriter) String() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.buf.String()
}

// TestWakeWhileRunning: a wake that arrives while the stream's goroutine is busy is not lost: the
// goroutine goes round again instead of parking, and no second goroutine runs the stream.
func TestWakeWhileRunning(t *testing.T) {
	lot := New(Config{KeepAlive: time.Hour})
	out := &gatedWriter{gate: make(chan struct{}), entered: make(chan struct{})}
	// A parked stream of a taken-over connection, outside the lot's loops: its wakes start its
	// goroutines.
	s := &Stream{lot: lot, step: func(ev Event) bool {
		if ev&KeepAlive != 0 {
			_, _ = out.Write([]byte(": keep-alive\n\n"))
		}
		return false
	}}

	s.Wake(KeepAlive)
	recv(t, out.entered) // the first keep-alive is being written
	require.Equal(t, stRunning, s.state.Load())
	s.Wake(KeepAlive)
	s.Wake(KeepAlive) // two wakes while running make one more round
	require.Equal(t, stPending, s.state.Load())
	out.gate <- struct{}{}
	recv(t, out.entered) // the second round: the wakes while running were not lost
	out.gate <- struct{}{}
	// Back to idle: the stream parks, and its goroutine ends.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, lot.Wait(ctx), "the stream's goroutine did not end")
	require.Equal(t, stIdle, s.state.Load())
	require.Equal(t, 2, strings.Count(out.String(), ": keep-alive\n\n"))
	require.Equal(t, int32(1), out.most.Load(), "one goroutine at a time")

	// A wake of an idle stream starts it again.
	s.Wake(KeepAlive)
	recv(t, out.entered)
	out.gate <- struct{}{}
	require.NoError(t, lot.Wait(ctx))
	require.Equal(t, stIdle, s.state.Load())
	require.Equal(t, 3, strings.Count(out.String(), ": keep-alive\n\n"))
}

// TestTakenOver: a taken-over stream opens on a goroutine of the lot's, parks once live, gets its
// keep-alives from the wheel and its Signal when its tag is chosen, and is let go of when its
// client leaves: the lot's goroutines end with its last stream.
func TestTakenOver(t *testing.T) {
	var revoked atomic.Value
	revoked.Store("")
	var changed atomic.Pointer[chan struct{}]
	first := make(chan struct{})
	changed.Store(&first)
	lot := New(Config{
		KeepAlive: 20 * time.Millisecond,
		Signal:    func() <-chan struct{} { return *changed.Load() },
		Select:    func(tag string) bool { return tag == revoked.Load() },
	})
	srv, cli := net.Pipe()
	events := make(chan Event, 64)
	ended := make(chan struct{})
	s := lot.Enter("key-1", srv, func(ev Event) bool {
		events <- ev
		return ev&(Gone|Signal) != 0
	}, func() { close(ended) })
	opened := make(chan struct{})
	s.Run(context.Background(), func(ctx context.Context) bool {
		close(opened)
		return ctx.Err() == nil
	}, User)
	recv(t, opened)
	require.Equal(t, User, <-events&User, "the first round handles the owner's first events")
	// Keep-alives come from the wheel while the stream is parked.
	for range 2 {
		for ev := range events {
			if ev&KeepAlive != 0 {
				break
			}
		}
	}
	// A signal wakes only the streams whose tag is chosen.
	revoked.Store("key-1")
	next := make(chan struct{})
	close(*changed.Swap(&next))
	recv(t, ended)
	_ = cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, lot.Wait(ctx), "the lot's goroutines end with its last stream")
}

func recv(t *testing.T, c <-chan struct{}) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(10 * time.Second):
		t.Fatal("the stream did not run")
	}
}

// TestSignalTakenAtEnter: the lot takes Config.Signal's channel inside the first stream's Enter,
// not when its goroutine first runs, so a signal fired right after Enter (on a busy machine,
// before that goroutine is scheduled) still wakes the stream.
func TestSignalTakenAtEnter(t *testing.T) {
	var calls atomic.Int32
	signal := make(chan struct{})
	var chosen atomic.Bool
	lot := New(Config{
		KeepAlive: time.Hour,
		Signal: func() <-chan struct{} {
			if calls.Add(1) == 1 {
				return signal
			}
			return make(chan struct{})
		},
		Select: func(string) bool { return chosen.Load() },
	})
	srv, cli := net.Pipe()
	defer cli.Close()
	events := make(chan Event, 8)
	ended := make(chan struct{})
	s := lot.Enter("key-1", srv, func(ev Event) bool {
		events <- ev
		return ev&Signal != 0
	}, func() { close(ended) })
	require.Equal(t, int32(1), calls.Load(), "Enter took the signal's channel")
	s.Run(context.Background(), func(ctx context.Context) bool { return ctx.Err() == nil }, User)
	require.Equal(t, User, <-events, "the first round")
	chosen.Store(true)
	close(signal)
	recv(t, ended)
	require.NotZero(t, <-events&Signal, "the stream was woken by the signal taken at Enter")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, lot.Wait(ctx))
}

package sse_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/httpx"
	"github.com/turnstile-run/turnstile/pkg/testenv"
	"github.com/turnstile-run/turnstile/services/gateway/internal/sse"
)

// rawStream opens a stream over a plain TCP connection and reads until its retry hint, so the
// stream has been admitted; it returns the connection and a reader positioned after the hint.
func rawStream(t *testing.T, gw *replica, session string) (net.Conn, *bufio.Reader) {
	t.Helper()
	u := strings.TrimPrefix(gw.srv.URL, "http://")
	c, err := net.Dial("tcp", u)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	_, err = fmt.Fprintf(c, "GET /v1/sessions/%s/events HTTP/1.1\r\nHost: %s\r\nAccept: text/event-stream\r\n\r\n", session, u)
	require.NoError(t, err)
	require.NoError(t, c.SetReadDeadline(time.Now().Add(wait)))
	br := bufio.NewReader(c)
	for {
		line, err := br.ReadString('\n')
		require.NoError(t, err)
		if strings.HasPrefix(line, "retry: ") {
			return c, br
		}
	}
}

// TestParkedStreams: taken-over streams that went live own no goroutine, yet each is still served:
// its live events, its keep-alives, and its slot released at once when its client leaves. Not
// parallel: it counts the process's goroutines.
func TestParkedStreams(t *testing.T) {
	f := setup(t, 0)
	gw := f.replica(sse.Config{KeepAlive: 300 * time.Millisecond})
	session, turn := newSession(), newTurn()

	// One stream first, so the handler's shared loops are running before the count.
	first, _ := rawStream(t, gw, session)
	testenv.WaitFor(t, wait, "the first stream live", func() bool { return gw.hub.Subscribers() == 1 })
	before := runtime.NumGoroutine()
	const n = 40
	conns := make([]net.Conn, n)
	readers := make([]*bufio.Reader, n)
	for i := range n {
		conns[i], readers[i] = rawStream(t, gw, session)
	}
	testenv.WaitFor(t, wait, "every stream live", func() bool { return gw.hub.Subscribers() == n+1 })
	// Parked streams settle to no goroutine each; a handful may be mid-wake (a keep-alive).
	testenv.WaitFor(t, wait, "parked streams to own no goroutine", func() bool {
		return runtime.NumGoroutine()-before <= 4
	})

	// Each still gets live events and keep-alives.
	f.publish(session, turn, 0, 1, false, "")
	requireDeltaAndKeepAlive(t, readers)

	// A client that leaves releases its slot at once, without waiting for a write to fail.
	require.NoError(t, first.Close())
	for _, c := range conns {
		require.NoError(t, c.Close())
	}
	testenv.WaitFor(t, wait, "every slot released", func() bool { return gw.handler.Connections() == 0 })
	testenv.WaitFor(t, wait, "every subscription dropped", func() bool { return gw.hub.Subscribers() == 0 })
}

// TestClientGoneReleasesSlot: with keep-alives far off, a departed client's slot is released
// promptly: the poller notices the hang-up, not a failed write.
func TestClientGoneReleasesSlot(t *testing.T) {
	t.Parallel()
	f := setup(t, 0)
	gw := f.replica(sse.Config{KeepAlive: time.Hour, MaxConnections: 1})
	session := newSession()
	for range 3 {
		c, _ := rawStream(t, gw, session)
		testenv.WaitFor(t, wait, "the stream live", func() bool { return gw.hub.Subscribers() == 1 })
		start := time.Now()
		require.NoError(t, c.Close())
		testenv.WaitFor(t, wait, "the slot released", func() bool { return gw.handler.Connections() == 0 })
		require.Less(t, time.Since(start), 5*time.Second)
	}
}

// TestH2C: over HTTP/2 cleartext (prior knowledge), many streams share one connection; each runs
// on its handler's goroutine and still gets its events and keep-alives. An idle stream outlives
// WriteTimeout: over HTTP/2 a write deadline left armed resets the stream when it passes.
func TestH2C(t *testing.T) {
	t.Parallel()
	f := setup(t, 0)
	gw := f.replica(sse.Config{KeepAlive: 400 * time.Millisecond, WriteTimeout: 100 * time.Millisecond}, func(s *http.Server) {
		// The protocols and HTTP/2 settings every role's server has.
		srv := httpx.NewServer("", nil)
		s.Protocols, s.HTTP2 = srv.Protocols, srv.HTTP2
	})
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: &p}
	t.Cleanup(tr.CloseIdleConnections)
	session, turn := newSession(), newTurn()
	const n = 5
	readers := make([]*bufio.Reader, n)
	for i := range n {
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, gw.url(session), nil)
		resp, err := (&http.Client{Transport: tr}).Do(req)
		require.NoError(t, err)
		t.Cleanup(func() { _ = resp.Body.Close() })
		require.Equal(t, 2, resp.ProtoMajor)
		readers[i] = bufio.NewReader(resp.Body)
	}
	testenv.WaitFor(t, wait, "every stream live", func() bool { return gw.hub.Subscribers() == n })
	f.publish(session, turn, 0, 1, false, "")
	requireDeltaAndKeepAlive(t, readers)
}

// requireDeltaAndKeepAlive reads each stream until it has seen a turn.delta event and a keep-alive.
func requireDeltaAndKeepAlive(t *testing.T, readers []*bufio.Reader) {
	t.Helper()
	for i, br := range readers {
		gotEvent, gotKeepAlive := false, false
		for !gotEvent || !gotKeepAlive {
			line, err := br.ReadString('\n')
			require.NoError(t, err, "stream %d", i)
			gotEvent = gotEvent || strings.HasPrefix(line, "event: turn.delta")
			gotKeepAlive = gotKeepAlive || line == ": keep-alive\n"
		}
	}
}

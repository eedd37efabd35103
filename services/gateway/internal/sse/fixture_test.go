package sse_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/streams"
	"github.com/turnstile-run/turnstile/pkg/testenv"
	"github.com/turnstile-run/turnstile/pkg/wire"
	"github.com/turnstile-run/turnstile/services/gateway/internal/hub"
	"github.com/turnstile-run/turnstile/services/gateway/internal/sse"
)

// fixture is one test's Redis prefix, a publisher on it, and any number of gateway replicas.
type fixture struct {
	t      *testing.T
	rdb    *redis.Client
	prefix string
	pub    *streams.Publisher
	reader *streams.Reader
}

// replica is one gateway: a hub, a handler and an HTTP server.
type replica struct {
	hub     *hub.Hub
	handler *sse.Handler
	srv     *httptest.Server
	reg     *prometheus.Registry
}

func setup(t *testing.T, maxLen int64) *fixture {
	t.Helper()
	url := os.Getenv("TURNSTILE_REDIS_URL")
	if url == "" {
		url = "redis://127.0.0.1:6379/0"
	}
	opts, err := redis.ParseURL(url)
	require.NoError(t, err)
	rdb := redis.NewClient(opts)
	require.NoError(t, rdb.Ping(context.Background()).Err(), "redis must run (see .ci/run)")
	prefix := "ts-gw-" + testenv.RandomHex(5)
	t.Cleanup(func() {
		testenv.DeletePrefix(context.Background(), rdb, prefix)
		_ = rdb.Close()
	})
	if maxLen == 0 {
		maxLen = 10000
	}
	return &fixture{
		t: t, rdb: rdb, prefix: prefix,
		pub:    streams.NewPublisher(rdb, prefix, maxLen, time.Hour),
		reader: streams.NewReader(rdb, prefix),
	}
}

// replica starts a gateway replica on the fixture's Redis; it is stopped at cleanup.
func (f *fixture) replica(cfg sse.Config, srvOpts ...func(*http.Server)) *replica {
	f.t.Helper()
	if cfg.KeepAlive == 0 {
		cfg.KeepAlive = time.Second
	}
	if cfg.Retry == 0 {
		cfg.Retry = 50 * time.Millisecond
	}
	log := testenv.TestLogger(f.t)
	h := hub.New(hub.Config{Buffer: 256}, f.rdb, f.reader, log)
	require.NoError(f.t, h.Start(context.Background()))
	reg := prometheus.NewRegistry()
	handler := sse.New(cfg, h, f.reader, log, reg)
	r := chi.NewRouter()
	handler.Routes(r)
	srv := httptest.NewUnstartedServer(r)
	for _, o := range srvOpts {
		o(srv.Config)
	}
	srv.Start()
	f.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		handler.Drain(ctx)
		require.NoError(f.t, handler.Wait(ctx))
		srv.CloseClientConnections()
		srv.Close()
		_ = h.Stop(ctx)
	})
	return &replica{hub: h, handler: handler, srv: srv, reg: reg}
}

func (r *replica) url(session string) string {
	return r.srv.URL + "/v1/sessions/" + session + "/events"
}

// counter reads a counter of the replica's registry (0 when absent).
func (r *replica) counter(t *testing.T, name string, label string) float64 {
	t.Helper()
	mfs, err := r.reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		sum := 0.0
		for _, m := range mf.GetMetric() {
			match := label == ""
			for _, lp := range m.GetLabel() {
				if lp.GetValue() == label {
					match = true
				}
			}
			if match {
				sum += m.GetCounter().GetValue()
			}
		}
		return sum
	}
	return 0
}

type payload struct {
	TurnID  string `json:"turn_id"`
	Attempt int    `json:"attempt"`
	Index   int    `json:"index"`
	Pad     string `json:"pad,omitempty"`
}

// publish appends n delta events with indexes from..from+n-1 (the last one a turn.completed when
// final) and returns their cursors.
func (f *fixture) publish(session, turn string, from, n int, final bool, pad string) []streams.Cursor {
	f.t.Helper()
	out := make([]streams.Cursor, 0, n)
	for i := from; i < from+n; i++ {
		typ := wire.EventType("turn.delta")
		if final && i == from+n-1 {
			typ = wire.EventType("turn.completed")
		}
		data, _ := json.Marshal(payload{TurnID: turn, Attempt: 1, Index: i, Pad: pad})
		p, err := f.pub.Publish(context.Background(), key(session), turn, 1, wire.Event{Type: typ, Data: data}, "")
		require.NoError(f.t, err)
		out = append(out, p.Cursor)
	}
	return out
}

func newSession() string { return "s-" + testenv.RandomHex(6) }

// key is a session's key in the stores as a gateway without stream tokens reads it: the default
// tenant's session.
func key(session string) wire.SessionKey { return wire.NewSessionKey(wire.DefaultTenant, session) }
func newTurn() string                    { return uuid.NewString() }

// indexes returns the index of every turn event (stream.reset is skipped).
func indexes(t *testing.T, evs []testenv.Event) []int {
	t.Helper()
	out := make([]int, 0, len(evs))
	for _, e := range evs {
		if e.Type == "stream.reset" {
			continue
		}
		var p payload
		require.NoError(t, json.Unmarshal([]byte(e.Data), &p), e.Data)
		out = append(out, p.Index)
	}
	return out
}

// within receives from ch, failing the test after d: a stream that stalls fails the test that
// waits for it instead of hanging it.
func within[T any](t *testing.T, ch <-chan T, d time.Duration, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(d):
		t.Fatalf("no %s within %v", what, d)
		var zero T
		return zero
	}
}

func seq(from, to int) []int {
	out := make([]int, 0, to-from)
	for i := from; i < to; i++ {
		out = append(out, i)
	}
	return out
}

func isIndex(n int) func(testenv.Event) bool {
	want := fmt.Sprintf(`"index":%d,`, n)
	return func(e testenv.Event) bool {
		return strings.Contains(e.Data, want) || strings.HasSuffix(e.Data, fmt.Sprintf(`"index":%d}`, n))
	}
}

func wireDelta(data []byte) wire.Event {
	return wire.Event{Type: wire.EventType("turn.delta"), Data: data}
}

// noTakeover hides http.Hijacker (as an HTTP/2 connection would), so streams run inside their
// handlers.
func noTakeover(s *http.Server) {
	next := s.Handler
	s.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(flushOnly{w}, r)
	})
}

type flushOnly struct{ w http.ResponseWriter }

func (f flushOnly) Header() http.Header         { return f.w.Header() }
func (f flushOnly) Write(p []byte) (int, error) { return f.w.Write(p) }
func (f flushOnly) WriteHeader(code int)        { f.w.WriteHeader(code) }
func (f flushOnly) Flush()                      { f.w.(http.Flusher).Flush() }

// opens makes r report each stream's open and returns a wait for the next one's result. A stream
// subscribes to its session before it reads the stream's state, so a test that changes the stream
// as soon as a subscriber shows up races the open; OnOpen fires after that read.
func (r *replica) opens(t *testing.T) func() string {
	t.Helper()
	ch := make(chan sse.OpenInfo, 64)
	r.handler.SetHooks(&sse.Hooks{OnOpen: func(i sse.OpenInfo) { ch <- i }})
	return func() string {
		t.Helper()
		select {
		case o := <-ch:
			return o.Result
		case <-time.After(wait):
			t.Fatal("no stream opened")
			return ""
		}
	}
}

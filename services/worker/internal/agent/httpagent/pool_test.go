package httpagent_test

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/services/worker/internal/agent/agenttest"
	"github.com/turnstile-run/turnstile/services/worker/internal/agent/httpagent"
	"github.com/turnstile-run/turnstile/services/worker/internal/agent/pool"
	"github.com/turnstile-run/turnstile/services/worker/internal/agent/upstream"
)

// TestPoolPerEndpointLimit runs turns over a pool of two replicas, one of which refuses with 503:
// every request carries the route key, only the refusing replica's limit shrinks, the agent's
// total limit does not, and the turns retry on the same replica (affinity) after the pause.
func TestPoolPerEndpointLimit(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	keys := map[string][]string{}
	refused := make(chan struct{}, 1)
	replica := func(name string, refuse bool) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			keys[name] = append(keys[name], r.Header.Get(httpagent.RouteKeyHeader))
			mu.Unlock()
			if refuse {
				select {
				case refused <- struct{}{}:
					w.Header().Set("Retry-After", "0.01")
					http.Error(w, "busy", http.StatusServiceUnavailable)
					return
				default:
				}
			}
			w.Header().Set("Content-Type", "application/x-ndjson")
			_, _ = w.Write([]byte(`{"type":"delta","text":"hi"}` + "\n" + `{"type":"done"}` + "\n"))
		}))
		t.Cleanup(srv.Close)
		return srv.URL + "/agent"
	}
	a, b := replica("a", true), replica("b", false)
	p := pool.New(pool.Config{Log: slog.New(slog.DiscardHandler), Endpoint: upstream.Config{Limiter: upstream.LimiterConfig{Initial: 8}}},
		pool.Static{a, b})
	g := upstream.New(upstream.Config{Name: "pool", Picker: p, Backoff: time.Millisecond, Limiter: upstream.LimiterConfig{Initial: 64, Min: 64, Max: 64}})
	ag, err := httpagent.New(httpagent.Config{Guard: g})
	require.NoError(t, err)
	for i := range 20 {
		turn := agenttest.NewTurn("hello", time.Minute)
		turn.SessionID, turn.Tenant = "s"+string(rune('a'+i)), "acme"
		res, err := ag.Run(t.Context(), turn, nil, &agenttest.Sink{})
		require.NoError(t, err)
		require.Equal(t, "hi", res.Text)
	}
	mu.Lock()
	for name, ks := range keys {
		for _, k := range ks {
			require.Regexp(t, `^acme/s.$`, k, "replica %s got the route key", name)
		}
	}
	requests := len(keys["a"]) + len(keys["b"])
	mu.Unlock()
	require.Equal(t, 21, requests, "20 turns and one retry")
	limits := map[string]float64{}
	for _, e := range p.Stats().Endpoints {
		limits[e.Address] = e.Limit
	}
	require.InDelta(t, 4, limits[a], 0.01, "the refusing replica's limit halved")
	require.GreaterOrEqual(t, limits[b], 8.0, "the other replica's limit is untouched")
	require.InDelta(t, 64, g.Limiter().Limit(), 0.01, "the agent's total is untouched")
}

package pool

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/registry"
	"github.com/turnstile-run/turnstile/pkg/registry/snapshot"
	"github.com/turnstile-run/turnstile/services/worker/internal/agent"
	"github.com/turnstile-run/turnstile/services/worker/internal/agent/upstream"
)

// TestPin: a pinned turn keeps the endpoint of its first request when an endpoint joins and the
// ring hands its session to the newcomer; an unpinned pick moves with the ring. A pinned turn
// leaves its endpoint only when that endpoint fails to connect (or leaves the pool).
func TestPin(t *testing.T) {
	t.Parallel()
	p, _ := setup(t, Config{}, Static(addrs(4)))
	type started struct {
		ctx   context.Context
		first string
	}
	turns := map[string]started{}
	for i := range 200 {
		s := "s-" + strconv.Itoa(i)
		ctx := Pin(t.Context())
		tg, err := p.Pick(ctx, turn(s), nil, nil)
		require.NoError(t, err)
		tg.Finished(upstream.Terminal, nil, time.Millisecond)
		turns[s] = started{ctx, tg.Address()}
	}
	p.Set(addrs(5)) // a replica joins mid-turn; the ring hands it about a fifth of the sessions
	moved := 0
	for s, st := range turns {
		if pick(t, p, s).addr == st.first {
			continue
		}
		moved++ // unpinned, the session went to the newcomer
		tg, err := p.Pick(st.ctx, turn(s), nil, nil)
		require.NoError(t, err)
		tg.Finished(upstream.Terminal, nil, time.Millisecond)
		require.Equal(t, st.first, tg.Address(), "pinned, the turn stays where it started")
	}
	require.Positive(t, moved, "the join moved sessions")

	var s string
	var st started
	for s, st = range turns {
		break
	}
	prev, err := p.Pick(st.ctx, turn(s), nil, nil)
	require.NoError(t, err)
	prev.Finished(upstream.Terminal, nil, time.Millisecond)
	next, err := p.Pick(st.ctx, turn(s), prev, fmt.Errorf("dial: %w", syscall.ECONNREFUSED))
	require.NoError(t, err)
	next.Finished(upstream.Terminal, nil, time.Millisecond)
	require.NotEqual(t, prev.Address(), next.Address(), "a connect failure moves even a pinned turn")
	third, err := p.Pick(st.ctx, turn(s), next, fmt.Errorf("dial: %w", syscall.ECONNREFUSED))
	require.NoError(t, err)
	third.Finished(upstream.Terminal, nil, time.Millisecond)
	require.NotContains(t, []string{prev.Address(), next.Address()}, third.Address(),
		"the turn does not go back to an endpoint it could not reach")
	require.Equal(t, st.ctx, Pin(st.ctx), "pinning twice keeps the first pin")
}

// TestRegistrySource: a snapshot follower is a source the pool starts with itself, and a change
// of the snapshot reaches the pool at once (Watcher), not at the next ResolveInterval.
func TestRegistrySource(t *testing.T) {
	t.Parallel()
	f := snapshot.FromInstances("echo", 1, []registry.Instance{
		{InstanceID: "a", Endpoint: "http://10.0.0.1:9000/"}, {InstanceID: "b", Endpoint: "http://10.0.0.2:9000/"},
	})
	p := New(Config{ResolveInterval: time.Hour, Log: slog.New(slog.DiscardHandler)}, f)
	require.NoError(t, p.Start(t.Context()))
	defer func() { require.NoError(t, p.Stop(context.Background())) }()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	tg, err := p.Pick(ctx, turn("s"), nil, nil)
	require.NoError(t, err)
	tg.Finished(upstream.Terminal, nil, time.Millisecond)
	require.Len(t, p.Stats().Endpoints, 2)
}

// BenchmarkPickSource is a turn's pick of an endpoint from the registry snapshot beside the same
// from today's static list: 120 endpoints, 4096 sessions, affinity. The snapshot is resolved into
// the pool in the background; the pick reads memory only.
func BenchmarkPickSource(b *testing.B) {
	ins := make([]registry.Instance, 120)
	for i := range ins {
		ins[i] = registry.Instance{InstanceID: strconv.Itoa(i), Endpoint: fmt.Sprintf("http://10.0.%d.%d:9000/", i/200, i%200+1)}
	}
	static := make(Static, len(ins))
	for i, in := range ins {
		static[i] = in.Endpoint
	}
	sources := map[string]Source{"static": static, "registry": snapshot.FromInstances("echo", 1, ins)}
	for _, name := range []string{"static", "registry"} {
		b.Run(name, func(b *testing.B) {
			p := New(Config{Log: slog.New(slog.DiscardHandler)}, sources[name])
			if name == "registry" {
				p.resolve(b.Context())
			}
			turns := make([]struct {
				ctx context.Context
				t   agent.Turn
			}, 4096)
			for i := range turns {
				turns[i].ctx = Pin(b.Context())
				turns[i].t = turn("s-" + strconv.Itoa(i))
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				tt := &turns[i%len(turns)]
				tg, err := p.Pick(tt.ctx, tt.t, nil, nil)
				if err != nil {
					b.Fatal(err)
				}
				tg.Finished(upstream.Terminal, nil, 0)
			}
		})
	}
}

// TestFailoverPaced: a retry after a reset on an endpoint the pool has ejected goes to another
// endpoint even when the upstream's total retry budget is spent (the budget paces it): a turn does
// not fail because one replica of a healthy fleet is cut off. A retry that would stay on an
// endpoint still in rotation is refused by the spent budget as before.
func TestFailoverPaced(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		ejectAfter int
		ok         bool
	}{{"ejected", 1, true}, {"in rotation", 5, false}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p, _ := setup(t, Config{EjectAfter: tc.ejectAfter}, Static(addrs(4)))
			g := upstream.New(upstream.Config{Name: "agent", RetryReserve: 1, Backoff: time.Millisecond, Picker: p})
			for g.Budget().TryRetry() {
			}
			ctx, cancel := context.WithTimeout(Pin(t.Context()), 30*time.Second)
			defer cancel()
			var first string
			var tried []string
			err := g.Do(ctx, turn("s"), nil, func(_ context.Context, c *upstream.Call) error {
				tried = append(tried, c.Target.Address())
				if first == "" {
					first = c.Target.Address()
				}
				if c.Target.Address() == first {
					return errReset
				}
				return nil
			})
			if !tc.ok {
				require.ErrorContains(t, err, "retry budget spent")
				require.Len(t, tried, 1)
				return
			}
			require.NoError(t, err)
			require.Len(t, tried, 2)
			require.NotEqual(t, tried[0], tried[1], "the retry failed over")
			require.Positive(t, p.Stats().Endpoints[slices.IndexFunc(p.Stats().Endpoints, func(e EndpointStats) bool {
				return e.Address == first
			})].Ejections)
		})
	}
}

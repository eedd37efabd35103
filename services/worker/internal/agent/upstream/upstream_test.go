package upstream_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/turnstile-run/turnstile/pkg/testenv"

	"github.com/turnstile-run/turnstile/services/worker/internal/agent"
	"github.com/turnstile-run/turnstile/services/worker/internal/agent/agenttest"
	"github.com/turnstile-run/turnstile/services/worker/internal/agent/httpagent"
	"github.com/turnstile-run/turnstile/services/worker/internal/agent/upstream"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestClassify(t *testing.T) {
	t.Parallel()
	cases := []struct {
		err  error
		want upstream.Class
	}{
		{&upstream.StatusError{Status: 429}, upstream.Overload},
		{&upstream.StatusError{Status: 503}, upstream.Overload},
		{&upstream.StatusError{Status: 502}, upstream.Retryable},
		{&upstream.StatusError{Status: 500}, upstream.Retryable},
		{&upstream.StatusError{Status: 400}, upstream.Terminal},
		{&upstream.StatusError{Status: 401}, upstream.Terminal},
		{fmt.Errorf("wrapped: %w", &upstream.StatusError{Status: 429}), upstream.Overload},
		{&upstream.StreamError{Message: "x"}, upstream.Retryable},
		{&upstream.StreamError{Message: "x", Overload: true}, upstream.Overload},
		{io.ErrUnexpectedEOF, upstream.Retryable},
		{context.Canceled, upstream.Terminal},
		{context.DeadlineExceeded, upstream.Terminal},
		{fmt.Errorf("bad: %w", agent.ErrPermanent), upstream.Terminal},
	}
	for _, c := range cases {
		require.Equal(t, c.want, upstream.Classify(c.err), "%v", c.err)
	}
	require.ErrorIs(t, &upstream.StatusError{Status: 404}, agent.ErrPermanent)
	require.NotErrorIs(t, &upstream.StatusError{Status: 429}, agent.ErrPermanent)
}

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	require.Equal(t, 2*time.Second, upstream.ParseRetryAfter("2", now))
	require.Equal(t, 30*time.Second, upstream.ParseRetryAfter(now.Add(30*time.Second).Format(http.TimeFormat), now))
	require.Zero(t, upstream.ParseRetryAfter("", now))
	require.Zero(t, upstream.ParseRetryAfter("soon", now))
}

func TestLimiter(t *testing.T) {
	t.Parallel()
	t.Run("Defaults", func(t *testing.T) {
		t.Parallel()
		require.InDelta(t, 16, upstream.NewLimiter(upstream.LimiterConfig{}).Limit(), 0)
	})
	t.Run("GrowsSlowlyAndHalvesOncePerWindow", func(t *testing.T) {
		t.Parallel()
		l := upstream.NewLimiter(upstream.LimiterConfig{Initial: 4, LatencyTarget: time.Second})
		ctx := context.Background()
		acquire := func(n int) []*upstream.Permit {
			var ps []*upstream.Permit
			for range n {
				p, err := l.Acquire(ctx)
				require.NoError(t, err)
				ps = append(ps, p)
			}
			return ps
		}
		for _, p := range acquire(4) {
			p.Release(upstream.Terminal, false, time.Millisecond)
		}
		require.InDelta(t, 4.7, l.Limit(), 0.1, "a full window of fast successes adds most of one slot")
		before := l.Limit()
		p := acquire(1)[0]
		p.Release(upstream.Terminal, false, time.Millisecond)
		require.InDelta(t, before, l.Limit(), 0, "a success with the limit mostly idle does not grow it")
		ps := acquire(4)
		ps[0].Release(upstream.Terminal, false, 2*time.Second)
		require.InDelta(t, before, l.Limit(), 0, "a slow success does not grow the limit")
		for _, p := range ps[1:] {
			p.Release(upstream.Terminal, true, time.Millisecond)
		}
		require.InDelta(t, before, l.Limit(), 0, "a failure that is not an overload changes nothing")
		grown := l.Limit()
		for _, p := range acquire(4) {
			p.Release(upstream.Overload, true, time.Millisecond)
		}
		require.InDelta(t, grown/2, l.Limit(), 0.01, "four refusals of one window halve the limit once")
	})
	t.Run("WaitsWhenFull", func(t *testing.T) {
		t.Parallel()
		l := upstream.NewLimiter(upstream.LimiterConfig{Initial: 1, Max: 1})
		p, err := l.Acquire(context.Background())
		require.NoError(t, err)
		got := make(chan *upstream.Permit)
		go func() {
			p2, _ := l.Acquire(context.Background())
			got <- p2
		}()
		testenv.WaitFor(t, 5*time.Second, "one call waiting for a slot", func() bool { return l.Waiting() == 1 })
		p.Release(upstream.Terminal, false, 0)
		p2 := <-got
		require.NotNil(t, p2)
		p2.Release(upstream.Terminal, false, 0)
		ctx, cancel := context.WithCancel(context.Background())
		p3, _ := l.Acquire(ctx)
		cancel()
		_, err = l.Acquire(ctx)
		require.ErrorIs(t, err, context.Canceled)
		p3.Release(upstream.Terminal, false, 0)
		require.Zero(t, l.Inflight())
	})
}

func TestBudget(t *testing.T) {
	t.Parallel()
	b := upstream.NewBudget(0.1, 2, 1e-9)
	require.True(t, b.TryRetry())
	require.True(t, b.TryRetry())
	require.False(t, b.TryRetry(), "the reserve is spent")
	for range 10 {
		b.First()
	}
	require.True(t, b.TryRetry(), "ten first attempts earn one retry")
	require.False(t, b.TryRetry())
	require.Equal(t, upstream.BudgetStats{First: 10, Retries: 3, Denied: 2}, b.Stats())
}

func TestGuardHonoursRetryAfterOnlyBeforeDeadline(t *testing.T) {
	t.Parallel()
	g := upstream.New(upstream.Config{Name: "t"})
	calls := 0
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	err := g.Do(ctx, func(context.Context, *upstream.Call) error {
		calls++
		return &upstream.StatusError{Status: 429, RetryAfter: 10 * time.Second}
	})
	require.Error(t, err)
	require.Contains(t, err.Error(), "after the deadline")
	require.Equal(t, 1, calls)
}

// TestConvergence: an upstream that refuses with 429 above capacity concurrent calls. Many turns
// (more than the capacity) run at once through one guard: the limit must come down near the
// capacity within a bounded number of calls and stay there, no turn may fail, retries must stay
// within the budget, and turns beyond the limit must wait.
func TestConvergence(t *testing.T) {
	t.Parallel()
	const capacity, turns, workers = 4, 120, 12
	var active, refused, served atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if active.Add(1) > capacity {
			active.Add(-1)
			refused.Add(1)
			http.Error(w, "over capacity", http.StatusTooManyRequests)
			return
		}
		defer active.Add(-1)
		w.Header().Set("Content-Type", "application/x-ndjson")
		_, _ = fmt.Fprintln(w, `{"type":"delta","text":"ok"}`)
		w.(http.Flusher).Flush()
		select { // the upstream's work for one turn
		case <-r.Context().Done():
			return
		case <-time.After(20 * time.Millisecond):
		}
		served.Add(1)
		_, _ = fmt.Fprintln(w, `{"type":"done"}`)
	}))
	defer srv.Close()
	g := upstream.New(upstream.Config{
		Name: "t", Limiter: upstream.LimiterConfig{Initial: 16, LatencyTarget: 2 * time.Second},
		RetryRatio: 0.2, RetryReserve: 10, MaxRetries: 5, Backoff: 5 * time.Millisecond,
	})
	ag, err := httpagent.New(httpagent.Config{URL: srv.URL, Guard: g})
	require.NoError(t, err)

	var (
		mu         sync.Mutex
		limits     []float64
		maxWaiting int
		failures   []error
	)
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range jobs {
				mu.Lock()
				maxWaiting = max(maxWaiting, g.Limiter().Waiting())
				mu.Unlock()
				_, err := ag.Run(context.Background(), agenttest.NewTurn(fmt.Sprint(i), time.Minute), nil, &agenttest.Sink{})
				mu.Lock()
				limits = append(limits, g.Limiter().Limit())
				if err != nil {
					failures = append(failures, err)
				}
				mu.Unlock()
			}
		})
	}
	for i := range turns {
		jobs <- i
	}
	close(jobs)
	wg.Wait()

	require.Empty(t, failures, "no turn fails because of the upstream's refusals")
	require.EqualValues(t, turns, served.Load())
	// Bounded convergence: after the first 30 turns the limit stays near the capacity — never above
	// capacity+3 and not collapsed below half of it, and on average it sits near the capacity.
	var sum float64
	for i, l := range limits[30:] {
		require.LessOrEqual(t, l, float64(capacity+3), "limit %.2f after turn %d", l, 30+i)
		require.GreaterOrEqual(t, l, float64(capacity)/2-0.5, "limit %.2f after turn %d", l, 30+i)
		sum += l
	}
	mean := sum / float64(len(limits)-30)
	require.InDelta(t, capacity, mean, 1.5, "the limit oscillates around the capacity (mean %.2f)", mean)
	st := g.Budget().Stats()
	require.EqualValues(t, turns, st.First)
	require.LessOrEqual(t, float64(st.Retries), g.Budget().Allowed(), "retries stay within the budget")
	require.LessOrEqual(t, float64(st.Retries), 0.5*float64(turns), "retries are a minority of calls")
	require.EqualValues(t, refused.Load(), st.Retries, "every refusal was retried once, none given up")
	require.Positive(t, maxWaiting, "turns beyond the limit waited for a slot")
	t.Logf("mean limit %.2f, final limit %.2f, refusals %d of %d calls, retries %d (budget %.0f), most waiting %d",
		mean, g.Limiter().Limit(), refused.Load(), g.Calls(), st.Retries, g.Budget().Allowed(), maxWaiting)
}

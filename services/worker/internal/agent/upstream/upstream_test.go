package upstream_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/turnstile-run/turnstile/pkg/testenv"
	"github.com/turnstile-run/turnstile/pkg/wire"

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
		{&upstream.StatusError{Status: 502}, upstream.Unavailable},
		{&upstream.StatusError{Status: 504}, upstream.Unavailable},
		{&upstream.StatusError{Status: 500}, upstream.Retryable},
		// A request that never reached the upstream: refused, unresolved, a failed dial.
		{refused, upstream.Unavailable},
		{&url.Error{Op: "Post", URL: "http://agent/", Err: &net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "no such host", Name: "agent", IsNotFound: true}}}, upstream.Unavailable},
		{&net.OpError{Op: "dial", Net: "tcp", Err: os.ErrDeadlineExceeded}, upstream.Unavailable},
		{&net.OpError{Op: "read", Net: "tcp", Err: &os.SyscallError{Syscall: "read", Err: syscall.ECONNRESET}}, upstream.Retryable},
		{&upstream.StatusError{Status: 400}, upstream.Terminal},
		{&upstream.StatusError{Status: 401}, upstream.Terminal},
		{fmt.Errorf("wrapped: %w", &upstream.StatusError{Status: 429}), upstream.Overload},
		{&upstream.StreamError{Message: "x"}, upstream.Retryable},
		{&upstream.StreamError{Message: "x", Overload: true}, upstream.Overload},
		{io.ErrUnexpectedEOF, upstream.Retryable},
		{context.Canceled, upstream.Terminal},
		{context.DeadlineExceeded, upstream.Terminal},
		{fmt.Errorf("bad: %w", agent.ErrPermanent), upstream.Terminal},
		// An error inside a stream that names a status is classified like an answer of it.
		{&upstream.StreamError{Message: "x", Status: 401}, upstream.Terminal},
		{&upstream.StreamError{Message: "x", Status: 403}, upstream.Terminal},
		{&upstream.StreamError{Message: "x", Status: 429}, upstream.Overload},
		{&upstream.StreamError{Message: "x", Status: 500, Overload: true}, upstream.Retryable},
		{&upstream.GaveUpError{Last: &upstream.StatusError{Status: 500}}, upstream.Terminal},
	}
	for _, c := range cases {
		require.Equal(t, c.want, upstream.Classify(c.err), "%v", c.err)
	}
	require.ErrorIs(t, &upstream.StatusError{Status: 404}, agent.ErrPermanent)
	require.NotErrorIs(t, &upstream.StatusError{Status: 429}, agent.ErrPermanent)
	require.ErrorIs(t, &upstream.StreamError{Status: 401}, agent.ErrPermanent)
	require.NotErrorIs(t, &upstream.StreamError{Status: 429}, agent.ErrPermanent)
	require.NotErrorIs(t, &upstream.StreamError{}, agent.ErrPermanent)
	require.ErrorIs(t, &upstream.GaveUpError{Last: &upstream.StatusError{Status: 500}}, agent.ErrPermanent)
	require.NotErrorIs(t, &upstream.GaveUpError{Last: &upstream.StatusError{Status: 500}}, agent.ErrUnavailable)
	gaveUp := &upstream.GaveUpError{Last: refused, Requests: 7, Reason: "r", Wait: wire.WaitUpstreamUnavailable, Took: 3 * time.Second}
	require.ErrorIs(t, gaveUp, agent.ErrUnavailable)
	require.ErrorIs(t, gaveUp, agent.ErrPermanent)
	require.Equal(t, "upstream_unavailable after 7 requests over 3s: "+refused.Error()+" (no retry: r)", gaveUp.Error())
	require.Equal(t, 2*time.Second, upstream.RetryAfter(&upstream.StreamError{RetryAfter: 2 * time.Second}))
}

func TestRetryHint(t *testing.T) {
	t.Parallel()
	for msg, want := range map[string]time.Duration{
		"Rate limit reached for m on tokens per min (TPM): Limit 450000. Please try again in 2.512s. Visit https://platform.openai.com/account/rate-limits to learn more.": 2512 * time.Millisecond,
		"Please try again in 6ms.":   6 * time.Millisecond,
		"please TRY AGAIN IN 20s":    20 * time.Second,
		"Please try again in 1m30s.": 90 * time.Second,
		"Please try again later.":    0,
		"The server had an error":    0,
		"Please try again in -3s.":   0,
	} {
		require.Equal(t, want, upstream.RetryHint(msg), msg)
	}
}

// refused is the error of a request whose connection was refused, as net/http returns it.
var refused error = &url.Error{Op: "Post", URL: "http://127.0.0.1:1/", Err: &net.OpError{
	Op: "dial", Net: "tcp", Err: &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED},
}}

// waitSink is an agenttest.Sink that hands each wait to a channel.
func waitSink() (*agenttest.Sink, chan agent.Wait) {
	waits := make(chan agent.Wait, 16)
	return &agenttest.Sink{OnWait: func(w agent.Wait) { waits <- w }}, waits
}

func TestGuardRetries(t *testing.T) {
	t.Parallel()
	failing := func(calls *atomic.Int64, err error) func(context.Context, *upstream.Call) error {
		return func(context.Context, *upstream.Call) error {
			calls.Add(1)
			return err
		}
	}
	t.Run("AFirstAttemptGivesUpAfterItsRetriesForGood", func(t *testing.T) {
		t.Parallel()
		g := upstream.New(upstream.Config{Name: "t", Backoff: time.Millisecond})
		var calls atomic.Int64
		sink, waits := waitSink()
		start := time.Now()
		err := g.Do(context.Background(), agenttest.NewTurn("t", time.Minute), sink, failing(&calls, &upstream.StreamError{Upstream: "t", Message: "boom", Status: 500}))
		require.EqualValues(t, 4, calls.Load(), "one request and MaxRetries (3) retries")
		var gave *upstream.GaveUpError
		require.ErrorAs(t, err, &gave)
		require.Equal(t, 4, gave.Requests)
		require.ErrorIs(t, err, agent.ErrPermanent, "the worker spends no attempt on what the guard gave up")
		require.Contains(t, err.Error(), "500 Internal Server Error")
		require.Len(t, waits, 3, "each retry's pause was announced")
		w := <-waits
		require.Equal(t, wire.WaitRetryPause, w.Reason)
		require.True(t, w.RetryAt.After(start))
		require.Contains(t, w.Err.Error(), "boom")
	})
	t.Run("ALaterAttemptLeavesTheRetryToTheWorker", func(t *testing.T) {
		t.Parallel()
		g := upstream.New(upstream.Config{Name: "t", Backoff: time.Millisecond})
		var calls atomic.Int64
		turn := agenttest.NewTurn("t", time.Minute)
		turn.Attempt = 2
		sink, waits := waitSink()
		err := g.Do(context.Background(), turn, sink, failing(&calls, &upstream.StatusError{Status: 500}))
		require.EqualValues(t, 1, calls.Load())
		require.NotErrorIs(t, err, agent.ErrPermanent, "the worker's next attempt is the retry")
		require.Empty(t, waits)
	})
	t.Run("AnOverloadWaitNamesItsReasonAndTheNextTry", func(t *testing.T) {
		t.Parallel()
		g := upstream.New(upstream.Config{Name: "t"})
		var calls atomic.Int64
		sink, waits := waitSink()
		start := time.Now()
		err := g.Do(context.Background(), agenttest.NewTurn("t", time.Minute), sink, func(context.Context, *upstream.Call) error {
			if calls.Add(1) == 1 {
				return &upstream.StreamError{Message: "slow down", Status: 429, RetryAfter: 50 * time.Millisecond}
			}
			return nil
		})
		require.NoError(t, err)
		w := <-waits
		require.Equal(t, wire.WaitRateLimited, w.Reason)
		require.WithinDuration(t, start.Add(50*time.Millisecond), w.RetryAt, 40*time.Millisecond)
		require.GreaterOrEqual(t, time.Since(start), 50*time.Millisecond)
	})
	t.Run("TheDeadlineEndsAWaitWithTheLastAnswer", func(t *testing.T) {
		t.Parallel()
		g := upstream.New(upstream.Config{Name: "t", Limiter: upstream.LimiterConfig{Initial: 1, Max: 1}})
		// The budget's reserve is spent, so the overload retry waits for the budget past the deadline.
		for g.Budget().TryRetry() {
		}
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		err := g.Do(ctx, agenttest.NewTurn("t", time.Minute), &agenttest.Sink{}, func(context.Context, *upstream.Call) error {
			return &upstream.StatusError{Upstream: "t", Status: 429}
		})
		require.ErrorIs(t, err, agent.ErrPermanent)
		require.NotErrorIs(t, err, context.DeadlineExceeded, "the error is the upstream's, not the deadline's")
		require.Contains(t, err.Error(), "429 Too Many Requests")
	})
	t.Run("AWaitForASlotIsAnnounced", func(t *testing.T) {
		t.Parallel()
		g := upstream.New(upstream.Config{Name: "t", Limiter: upstream.LimiterConfig{Initial: 1, Max: 1}})
		release := make(chan struct{})
		holding := make(chan struct{})
		done := make(chan error, 1)
		go func() {
			done <- g.Do(context.Background(), agenttest.NewTurn("a", time.Minute), &agenttest.Sink{}, func(context.Context, *upstream.Call) error {
				close(holding)
				<-release
				return nil
			})
		}()
		<-holding
		sink, waits := waitSink()
		second := make(chan error, 1)
		go func() {
			second <- g.Do(context.Background(), agenttest.NewTurn("b", time.Minute), sink, func(context.Context, *upstream.Call) error { return nil })
		}()
		w := <-waits
		require.Equal(t, wire.WaitConcurrencyLimit, w.Reason)
		require.True(t, w.RetryAt.IsZero(), "a slot frees at no known time")
		require.NoError(t, w.Err)
		close(release)
		require.NoError(t, <-done)
		require.NoError(t, <-second)
	})
}

// TestGuardWaitsForAnUnavailableUpstream: an upstream that cannot be reached is waited for, on any
// attempt, until the deadline leaves the minimum useful time; the wait is announced as it begins
// and at every doubling of its tries, and the retry budget paces the tries without ending them.
func TestGuardWaitsForAnUnavailableUpstream(t *testing.T) {
	t.Parallel()
	refusedFor := func(n int64, calls *atomic.Int64) func(context.Context, *upstream.Call) error {
		return func(context.Context, *upstream.Call) error {
			if calls.Add(1) <= n {
				return refused
			}
			return nil
		}
	}
	t.Run("ALaterAttemptWaitsAndIsAnnouncedAtEachDoubling", func(t *testing.T) {
		t.Parallel()
		g := upstream.New(upstream.Config{Name: "t", Backoff: time.Millisecond})
		turn := agenttest.NewTurn("t", time.Minute)
		turn.Attempt = 2 // a later attempt's failures are the worker's to retry, not an unavailable upstream's
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		sink := &agenttest.Sink{}
		var calls atomic.Int64
		require.NoError(t, g.Do(ctx, turn, sink, refusedFor(9, &calls)))
		require.EqualValues(t, 10, calls.Load(), "nine refused tries (more than MaxRetries), then through")
		var announced []int
		for i, w := range sink.Waits() {
			require.Equal(t, wire.WaitUpstreamUnavailable, w.Reason)
			require.Equal(t, i+1, w.Tries)
			require.ErrorIs(t, w.Err, syscall.ECONNREFUSED)
			require.False(t, w.RetryAt.IsZero())
			if !w.Repeat {
				announced = append(announced, w.Tries)
			}
		}
		require.Len(t, sink.Waits(), 9)
		require.Equal(t, []int{1, 2, 4, 8}, announced, "announced as it began and at each doubling of the tries")
		begun, now := g.Waits()
		require.EqualValues(t, 9, begun[4], "waits_total{reason=upstream_unavailable}")
		require.Equal(t, wire.WaitUpstreamUnavailable, upstream.WaitReasons[4])
		require.Zero(t, now[4])
		require.EqualValues(t, 9, g.Failures(upstream.Unavailable))
	})
	t.Run("TheLastTryIsMadeWhenTheDeadlineLeavesTheMinimumUsefulTime", func(t *testing.T) {
		t.Parallel()
		const minUseful, deadline = 300 * time.Millisecond, 900 * time.Millisecond
		g := upstream.New(upstream.Config{Name: "t", Backoff: 20 * time.Millisecond, MinUseful: minUseful})
		start := time.Now()
		ctx, cancel := context.WithDeadline(context.Background(), start.Add(deadline))
		defer cancel()
		var calls atomic.Int64
		var lastTry atomic.Int64
		err := g.Do(ctx, agenttest.NewTurn("t", time.Minute), &agenttest.Sink{}, func(context.Context, *upstream.Call) error {
			calls.Add(1)
			lastTry.Store(int64(time.Since(start)))
			return refused
		})
		took := time.Since(start)
		t.Logf("gave up after %v, last try at %v: %v", took.Round(time.Millisecond), time.Duration(lastTry.Load()).Round(time.Millisecond), err)
		require.ErrorIs(t, err, agent.ErrUnavailable)
		require.ErrorIs(t, err, agent.ErrPermanent)
		require.ErrorIs(t, err, syscall.ECONNREFUSED, "the error carries the upstream's last answer")
		require.Contains(t, err.Error(), "upstream_unavailable after ")
		require.GreaterOrEqual(t, time.Duration(lastTry.Load()), deadline-minUseful, "the last try waited for the latest useful moment")
		require.Less(t, took, deadline+10*time.Second, "and the call ended with it")
		require.Greater(t, calls.Load(), int64(2))
	})
	t.Run("ASpentBudgetSlowsTheTriesWithoutEndingThem", func(t *testing.T) {
		t.Parallel()
		g := upstream.New(upstream.Config{Name: "t", Backoff: time.Millisecond})
		for g.Budget().TryRetry() {
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		var calls atomic.Int64
		var at []time.Time
		err := g.Do(ctx, agenttest.NewTurn("t", time.Minute), &agenttest.Sink{}, func(c context.Context, call *upstream.Call) error {
			at = append(at, time.Now())
			return refusedFor(3, &calls)(c, call)
		})
		require.NoError(t, err)
		require.Len(t, at, 4)
		for i := 1; i < len(at); i++ {
			// The longest pause: Backoff doubled six times (64 ms), times at least 0.5.
			require.GreaterOrEqual(t, at[i].Sub(at[i-1]), 32*time.Millisecond, "try %d came after the longest pause", i+1)
		}
	})
	t.Run("ACallThatStreamedIsNotRetried", func(t *testing.T) {
		t.Parallel()
		g := upstream.New(upstream.Config{Name: "t", Backoff: time.Millisecond})
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		var calls atomic.Int64
		err := g.Do(ctx, agenttest.NewTurn("t", time.Minute), &agenttest.Sink{}, func(_ context.Context, c *upstream.Call) error {
			calls.Add(1)
			c.Emitted()
			return &upstream.StatusError{Status: 502}
		})
		require.EqualValues(t, 1, calls.Load(), "its output is published: the worker's next attempt retries it")
		require.NotErrorIs(t, err, agent.ErrUnavailable)
		require.NotErrorIs(t, err, agent.ErrPermanent)
	})
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
	t.Run("Resize", func(t *testing.T) {
		t.Parallel()
		// A fixed limit (Min = Max), as an agent's total upstream limit is, changed by a reload.
		l := upstream.NewLimiter(upstream.LimiterConfig{Initial: 1, Min: 1, Max: 1})
		p, err := l.Acquire(context.Background())
		require.NoError(t, err)
		got := make(chan *upstream.Permit)
		go func() {
			p2, _ := l.Acquire(context.Background())
			got <- p2
		}()
		testenv.WaitFor(t, 5*time.Second, "one call waiting for a slot", func() bool { return l.Waiting() == 1 })
		l.Resize(3, 3)
		p2 := <-got // let in by the raise, with the first still holding its slot
		require.InDelta(t, 3, l.Limit(), 0)
		require.Equal(t, 2, l.Inflight())
		l.Resize(1, 1)
		require.InDelta(t, 1, l.Limit(), 0)
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		_, err = l.Acquire(ctx)
		require.ErrorIs(t, err, context.DeadlineExceeded, "under a lowered limit nothing new starts")
		p.Release(upstream.Terminal, false, 0)
		p2.Release(upstream.Terminal, false, 0)
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
	err := g.Do(ctx, agenttest.NewTurn("t", time.Second), &agenttest.Sink{}, func(context.Context, *upstream.Call) error {
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

// flushSink is a Sink that is also an agent.Flusher, counting its flushes.
type flushSink struct {
	agenttest.Sink
	flushes atomic.Int64
}

func (s *flushSink) Flush() { s.flushes.Add(1) }

// TestGuardFlushesBeforeEachRequest checks that a sink that holds events back (agent.Flusher) is
// flushed before every request, a retry's included, so nothing it holds waits on the upstream.
func TestGuardFlushesBeforeEachRequest(t *testing.T) {
	t.Parallel()
	g := upstream.New(upstream.Config{Name: "t", Backoff: time.Millisecond})
	sink := &flushSink{}
	var seen []int64
	err := g.Do(context.Background(), agenttest.NewTurn("t", time.Minute), sink, func(_ context.Context, c *upstream.Call) error {
		seen = append(seen, sink.flushes.Load())
		if c.Retry == 0 {
			return &upstream.StatusError{Status: 502}
		}
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, []int64{1, 2}, seen, "each request found the sink flushed just before it")
}

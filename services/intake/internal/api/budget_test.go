package api

import (
	"context"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/httpx"
	"github.com/turnstile-run/turnstile/pkg/quota"
)

// TestAdmissionBudgetExhausted crosses a tenant's daily token budget between two posts: the
// first is accepted, the one after the crossing is refused 429 budget-exhausted with Retry-After
// at the next UTC midnight, and a raised budget admits again.
func TestAdmissionBudgetExhausted(t *testing.T) {
	t.Parallel()
	var w *quota.Watcher
	b := setup(t, options{cfg: func(c *Config) { c.Quotas = func() *quota.Snapshot { return w.Snapshot() } }})
	ctx := context.Background()
	qs := quota.NewStore(b.env.Pool)
	w = quota.NewWatcher(qs, time.Hour, "agent", b.env.Log)
	budget := int64(100)
	_, err := qs.Put(ctx, quota.Quota{Tenant: "default", BudgetTokens: &budget, BudgetPeriod: quota.PeriodDay})
	require.NoError(t, err)
	spend := func(n int64) {
		_, err := b.env.Pool.Exec(ctx, `INSERT INTO token_usage (tenant, agent, day, model, turns, total_tokens)
			VALUES ('default', 'agent', (now() AT TIME ZONE 'UTC')::date, 'm', 1, $1)
			ON CONFLICT (tenant, day, agent, model) DO UPDATE SET total_tokens = token_usage.total_tokens + $1`, n)
		require.NoError(t, err)
		require.True(t, w.Refresh(ctx))
	}
	spend(60)
	resp := postTurn(t, b.srv.URL, "b1", turnBody, nil)
	require.Equal(t, http.StatusAccepted, resp.Status, "below its budget: %s", resp.Body)

	spend(50) // the running turn crossed the budget
	resp = postTurn(t, b.srv.URL, "b2", turnBody, nil)
	require.Equal(t, http.StatusTooManyRequests, resp.Status, string(resp.Body))
	require.Equal(t, httpx.ProblemBudgetExhausted.Name, resp.ProblemType(t))
	untilReset := time.Until(quota.Reset(quota.PeriodDay, time.Now()))
	require.InDelta(t, untilReset.Seconds(), float64(retryAfter(t, resp)), 5, "Retry-After is the period's reset")
	require.EqualValues(t, 1, b.recordsInKafka(t), "the refused turn never reached Kafka")

	budget = 1000
	_, err = qs.Put(ctx, quota.Quota{Tenant: "default", BudgetTokens: &budget, BudgetPeriod: quota.PeriodDay})
	require.NoError(t, err)
	require.True(t, w.Refresh(ctx))
	resp = postTurn(t, b.srv.URL, "b3", turnBody, nil)
	require.Equal(t, http.StatusAccepted, resp.Status, "a raised budget admits again: %s", resp.Body)
}

// TestAdmissionAgentRate: a tenant x agent rate_per_second holds the tenant's turns of that agent
// to it (429 rate-limited past its burst of twice the rate) while the tenant's own rate, unset,
// admits; removing it admits again.
func TestAdmissionAgentRate(t *testing.T) {
	t.Parallel()
	var w *quota.Watcher
	b := setup(t, options{cfg: func(c *Config) { c.Quotas = func() *quota.Snapshot { return w.Snapshot() } }})
	ctx := context.Background()
	qs := quota.NewStore(b.env.Pool)
	w = quota.NewWatcher(qs, time.Hour, "agent", b.env.Log)
	rate := 1
	_, err := qs.Put(ctx, quota.Quota{Tenant: "default", Agent: "agent", RatePerSecond: &rate})
	require.NoError(t, err)
	require.True(t, w.Refresh(ctx))
	accepted := 0
	var last response
	start := time.Now()
	for i := range 10 {
		last = postTurn(t, b.srv.URL, "r"+strconv.Itoa(i), turnBody, nil)
		if last.Status != http.StatusAccepted {
			break
		}
		accepted++
	}
	// A burst of twice the rate, and one more per second the posts took.
	require.GreaterOrEqual(t, accepted, 2)
	require.LessOrEqual(t, accepted, 2+int(time.Since(start).Seconds()), "then refused")
	require.Equal(t, http.StatusTooManyRequests, last.Status, string(last.Body))
	require.Equal(t, httpx.ProblemRateLimited.Name, last.ProblemType(t))
	require.Contains(t, string(last.Body), "for agent agent")

	_, err = qs.Delete(ctx, "default", "agent")
	require.NoError(t, err)
	require.True(t, w.Refresh(ctx))
	resp := postTurn(t, b.srv.URL, "r9", turnBody, nil)
	require.Equal(t, http.StatusAccepted, resp.Status, "without the agent's rate: %s", resp.Body)
}

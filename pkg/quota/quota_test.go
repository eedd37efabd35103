package quota_test

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/pgarray"
	"github.com/turnstile-run/turnstile/pkg/quota"
	"github.com/turnstile-run/turnstile/pkg/testenv"
	"github.com/turnstile-run/turnstile/pkg/turnstore"
	"github.com/turnstile-run/turnstile/pkg/wire"
)

func ptr[T any](v T) *T { return &v }

// runTurns claims n turns of tenant and completes them, each with the usage report gives it (nil
// for none), in batches of up to 7, as the worker's batchers do; it returns the tokens reported.
func runTurns(t *testing.T, s *turnstore.Store, tenant string, n int, report func(i int) *wire.Usage) (in, out, total int64) {
	t.Helper()
	ctx := context.Background()
	for start := 0; start < n; start += 7 {
		k := min(7, n-start)
		now := time.Now()
		p := turnstore.ClaimParams{
			TurnIDs: make(pgarray.UUIDs, k), SessionKeys: make(pgarray.Texts, k), Tenants: make(pgarray.Texts, k),
			Inputs: make(pgarray.Texts, k), Metadata: make([][]byte, k), AcceptedAt: make(pgarray.Times, k),
			Deadlines: make(pgarray.Times, k), Partitions: make(pgarray.Ints, k), Offsets: make(pgarray.Ints, k),
			Owner: "test", TTL: time.Minute, MaxAttempts: 3, ClientTurnIDs: make([]*uuid.UUID, k),
		}
		for j := range k {
			p.TurnIDs[j] = pgarray.UUID(uuid.Must(uuid.NewV7()))
			p.SessionKeys[j] = pgarray.Text(tenant + "/s" + strconv.Itoa(start+j))
			p.Tenants[j], p.Inputs[j] = pgarray.Text(tenant), "hi"
			p.AcceptedAt[j], p.Deadlines[j] = pgarray.Time(now), pgarray.Time(now.Add(time.Hour))
		}
		rows, err := s.ClaimTurns(ctx, &p)
		require.NoError(t, err)
		c := turnstore.CompleteParams{
			TurnIDs: p.TurnIDs, Tokens: make(pgarray.Ints, k), Answers: make(pgarray.Texts, k),
			States: make(pgarray.Texts, k), Usages: make(pgarray.Texts, k),
		}
		for _, r := range rows {
			if r.Outcome != turnstore.ClaimAcquired {
				continue
			}
			for j := range k {
				if uuid.UUID(p.TurnIDs[j]) == r.TurnID {
					c.Tokens[j] = pgarray.Int(r.Token)
				}
			}
		}
		for j := range k {
			c.Answers[j] = "ok"
			if u := report(start + j); u != nil {
				b, err := json.Marshal(u)
				require.NoError(t, err)
				c.Usages[j] = pgarray.Text(b)
				in, out, total = in+u.InputTokens, out+u.OutputTokens, total+u.TotalTokens
			}
		}
		seqs, err := s.CompleteTurns(ctx, &c)
		require.NoError(t, err)
		for _, q := range seqs {
			require.Positive(t, q, "every turn completed")
		}
	}
	return in, out, total
}

// TestUsageAddsUpExactly completes turns with random usage (some with none, two models) in
// batches and checks that the usage read back per tenant, agent, day and model is their exact sum,
// that a budget passed makes the tenant exhausted until the period's reset, and that raising it
// lifts that.
func TestUsageAddsUpExactly(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{Partitions: 1})
	ts, qs := turnstore.New(env.Pool), quota.NewStore(env.Pool)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(3, 9))
	models := []string{"small-1", "large-2"}
	perModel := map[string]int64{}
	in, out, total := runTurns(t, ts, "acme", 60, func(i int) *wire.Usage {
		if i%5 == 4 {
			return nil // an agent that reported nothing
		}
		u := &wire.Usage{InputTokens: rng.Int64N(500), OutputTokens: rng.Int64N(200), Model: models[i%2]}
		u.TotalTokens = u.InputTokens + u.OutputTokens
		perModel[u.Model] += u.TotalTokens
		return u
	})
	runTurns(t, ts, "globex", 5, func(int) *wire.Usage { return &wire.Usage{InputTokens: 1, OutputTokens: 1, TotalTokens: 2} })

	rows, err := qs.UsageRows(ctx, quota.UsageFilter{Tenant: "acme"})
	require.NoError(t, err)
	var gotIn, gotOut, gotTotal, turns int64
	for _, r := range rows {
		require.Equal(t, "acme", r.Tenant)
		require.Equal(t, time.Now().UTC().Format(time.DateOnly), r.Day)
		require.Equal(t, perModel[r.Model], r.TotalTokens, "model %s", r.Model)
		gotIn, gotOut, gotTotal, turns = gotIn+r.InputTokens, gotOut+r.OutputTokens, gotTotal+r.TotalTokens, turns+r.Turns
	}
	require.Equal(t, [3]int64{in, out, total}, [3]int64{gotIn, gotOut, gotTotal}, "usage read back is the exact sum reported")
	require.Equal(t, int64(48), turns, "the turns that reported usage")
	t.Logf("60 turns in batches of 7: %d input, %d output, %d total tokens reported and read back", gotIn, gotOut, gotTotal)

	w := quota.NewWatcher(qs, time.Hour, "agent", env.Log)
	_, err = qs.Put(ctx, quota.Quota{Tenant: "acme", BudgetTokens: ptr(total), BudgetPeriod: quota.PeriodDay})
	require.NoError(t, err)
	require.True(t, w.Refresh(ctx))
	now := time.Now()
	out2, reset := w.Snapshot().Exhausted("acme", now)
	require.True(t, out2, "a tenant that spent its budget is exhausted")
	require.Equal(t, quota.PeriodStart(quota.PeriodDay, now).Add(24*time.Hour), reset, "until the next UTC day")
	out2, _ = w.Snapshot().Exhausted("globex", now)
	require.False(t, out2, "a tenant without a budget never is")
	_, err = qs.Put(ctx, quota.Quota{Tenant: "acme", BudgetTokens: ptr(total + 1), BudgetPeriod: quota.PeriodDay})
	require.NoError(t, err)
	require.True(t, w.Refresh(ctx))
	out2, _ = w.Snapshot().Exhausted("acme", now)
	require.False(t, out2, "below a raised budget it is admitted again")
}

// TestCapLoweredReachesEveryWorker has two workers' counters, each over its own watcher of the
// same store refreshing every 200ms, running turns of one tenant; the cap is lowered through the
// store and the test measures how long until both refuse the tenant's next start.
func TestCapLoweredReachesEveryWorker(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{Partitions: 1})
	qs := quota.NewStore(env.Pool)
	ctx := context.Background()
	_, err := qs.Put(ctx, quota.Quota{Tenant: "acme", MaxRunning: ptr(10)})
	require.NoError(t, err)
	var limiters []*quota.Limiter
	for range 2 {
		w := quota.NewWatcher(qs, 200*time.Millisecond, "agent", env.Log)
		limiters = append(limiters, quota.NewCounter(w).Limiter("agent"))
		require.NoError(t, w.Start(ctx))
		t.Cleanup(func() { require.NoError(t, w.Stop(ctx)) })
	}
	for _, l := range limiters {
		require.True(t, l.Admit("acme"), "below the cap")
	}
	lowered := time.Now()
	_, err = qs.Put(ctx, quota.Quota{Tenant: "acme", MaxRunning: ptr(1)})
	require.NoError(t, err)
	testenv.WaitFor(t, 5*time.Second, "every worker to refuse the tenant at its lowered cap", func() bool {
		for _, l := range limiters {
			if l.Admit("acme") {
				l.Done("acme")
				return false
			}
		}
		return true
	})
	t.Logf("a cap lowered through the store is in force on both workers %v later", time.Since(lowered).Round(time.Millisecond))
	require.True(t, limiters[0].Admit("globex"), "another tenant is not held")
}

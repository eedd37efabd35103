package turnstore

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/testenv"
)

// TestBacklogAgeSkipsTenantAtCap checks that the queued turns of a tenant that runs as many turns
// as its concurrency quota allows are not backlog, and are again once the quota is raised.
func TestBacklogAgeSkipsTenantAtCap(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{Partitions: 1})
	s := New(env.Pool)
	ctx := context.Background()
	now := time.Now()
	running := queuedTurn(t, s, "acme/r", now.Add(-time.Minute), now.Add(time.Hour), 0, nil)
	require.Equal(t, ClaimAcquired, claimOne(t, s, running, "acme/r", now.Add(-time.Minute)))
	queuedTurn(t, s, "acme/q", now.Add(-30*time.Second), now.Add(time.Hour), 1, nil)
	age, err := s.BacklogAge(ctx)
	require.NoError(t, err)
	require.InDelta(t, 30, age.Seconds(), 5, "without a quota the queued turn is backlog")

	_, err = env.Pool.Exec(ctx, `INSERT INTO tenant_quotas (tenant, max_running) VALUES ('acme', 1)`)
	require.NoError(t, err)
	age, err = s.BacklogAge(ctx)
	require.NoError(t, err)
	require.Zero(t, age, "a tenant at its running cap has no backlog: more workers cannot help it")
	age, err = s.BacklogAgeOf(ctx, "agent", true)
	require.NoError(t, err)
	require.Zero(t, age, "nor for its agent")

	_, err = env.Pool.Exec(ctx, `UPDATE tenant_quotas SET max_running = 2 WHERE tenant = 'acme'`)
	require.NoError(t, err)
	age, err = s.BacklogAge(ctx)
	require.NoError(t, err)
	require.InDelta(t, 30, age.Seconds(), 5, "below its cap the queued turn is backlog again")

	_, err = env.Pool.Exec(ctx, `INSERT INTO tenant_quotas (tenant, agent, max_running) VALUES ('acme', 'agent', 1)`)
	require.NoError(t, err)
	age, err = s.BacklogAgeOf(ctx, "agent", true)
	require.NoError(t, err)
	require.Zero(t, age, "a tenant x agent cap holds the default agent's turns too")
}

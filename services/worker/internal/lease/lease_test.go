package lease

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/turnstile-run/turnstile/pkg/testenv"
	"github.com/turnstile-run/turnstile/pkg/wire"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreTopFunction("github.com/jackc/pgx/v5/pgxpool.(*Pool).backgroundHealthCheck"),
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
		goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).reaper"),
	)
}

func setup(t *testing.T) *testenv.Env {
	t.Helper()
	return testenv.New(t, testenv.Options{Partitions: 1})
}

func request(session string) ClaimRequest {
	now := time.Now()
	return ClaimRequest{Env: wire.Envelope{
		TurnID: uuid.Must(uuid.NewV7()), SessionID: session, Tenant: "default",
		Input: wire.Input{Text: "hi"}, Deadline: now.Add(time.Hour), AcceptedAt: now,
	}}
}

// waitExpired waits until the turn's lease has expired by the database's clock.
func waitExpired(t *testing.T, env *testenv.Env, id uuid.UUID) {
	t.Helper()
	testenv.WaitFor(t, 10*time.Second, "the lease to expire", func() bool {
		var expired bool
		require.NoError(t, env.Pool.QueryRow(context.Background(),
			`SELECT lease_expires_at < now() FROM turns WHERE turn_id = $1`, id).Scan(&expired))
		return expired
	})
}

func TestStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("FencingAcrossTakeover", func(t *testing.T) {
		t.Parallel()
		env := setup(t)
		s := NewStore(env.Pool, "a", 200*time.Millisecond, 3)
		req := request("fence")
		id := req.Env.TurnID

		c1, err := s.Claim(ctx, req)
		require.NoError(t, err)
		require.Equal(t, Acquired, c1.Outcome)
		require.Equal(t, 1, c1.Attempt)
		c, err := s.Claim(ctx, req)
		require.NoError(t, err)
		require.Equal(t, Leased, c.Outcome, "a live lease is not taken over")

		waitExpired(t, env, id)
		c2, err := s.Claim(ctx, req)
		require.NoError(t, err)
		require.Equal(t, Acquired, c2.Outcome)
		require.Equal(t, 2, c2.Attempt)
		require.Greater(t, c2.Token, c1.Token, "tokens only grow")

		// Every write of the stale attempt is refused.
		renewed, err := s.Renew(ctx, []Held{{TurnID: id, Token: c1.Token}})
		require.NoError(t, err)
		require.Empty(t, renewed)
		require.ErrorIs(t, s.Complete(ctx, id, c1.Token, wire.Output{Text: "stale"}), ErrFenced)
		require.ErrorIs(t, s.Finish(ctx, id, c1.Token, wire.StatusFailed, "stale", ""), ErrFenced)
		require.ErrorIs(t, s.Release(ctx, id, c1.Token, true), ErrFenced)

		require.NoError(t, s.Complete(ctx, id, c2.Token, wire.Output{Text: "fresh"}))
		require.ErrorIs(t, s.Complete(ctx, id, c2.Token, wire.Output{Text: "again"}), ErrFenced, "completion happens once")
		h, err := s.History(ctx, "fence")
		require.NoError(t, err)
		require.Len(t, h, 2)
		require.Equal(t, "hi", h[0].Content)
		require.Equal(t, "fresh", h[1].Content)

		c, err = s.Claim(ctx, req)
		require.NoError(t, err)
		require.Equal(t, Done, c.Outcome)
		require.Equal(t, wire.StatusSucceeded, c.Status)
	})

	t.Run("ExhaustedAfterMaxAttempts", func(t *testing.T) {
		t.Parallel()
		env := setup(t)
		s := NewStore(env.Pool, "a", 100*time.Millisecond, 2)
		req := request("exhaust")
		for attempt := 1; attempt <= 2; attempt++ {
			c, err := s.Claim(ctx, req)
			require.NoError(t, err)
			require.Equal(t, Acquired, c.Outcome)
			waitExpired(t, env, req.Env.TurnID)
		}
		c, err := s.Claim(ctx, req)
		require.NoError(t, err)
		require.Equal(t, Exhausted, c.Outcome)
		token, attempt, err := s.FinishUnleased(ctx, req.Env.TurnID, wire.StatusFailed, "crash loop", "attempts_exhausted")
		require.NoError(t, err)
		require.Equal(t, 2, attempt)
		require.Greater(t, token, c.Token)
	})

	t.Run("HandoffDoesNotCount", func(t *testing.T) {
		t.Parallel()
		env := setup(t)
		s := NewStore(env.Pool, "a", time.Minute, 1)
		req := request("handoff")
		c, err := s.Claim(ctx, req)
		require.NoError(t, err)
		require.NoError(t, s.Release(ctx, req.Env.TurnID, c.Token, true))
		c, err = s.Claim(ctx, req)
		require.NoError(t, err)
		require.Equal(t, Acquired, c.Outcome, "a released lease is taken over at once, and a hand-off is not an attempt")
		require.Equal(t, 2, c.Attempt)
		require.NoError(t, s.Release(ctx, req.Env.TurnID, c.Token, false))
		c, err = s.Claim(ctx, req)
		require.NoError(t, err)
		require.Equal(t, Exhausted, c.Outcome, "a failed attempt counts")
	})

	t.Run("CancelledBeforeStart", func(t *testing.T) {
		t.Parallel()
		env := setup(t)
		s := NewStore(env.Pool, "a", time.Minute, 3)
		req := request("cancel")
		_, err := env.Pool.Exec(ctx, `INSERT INTO turns (turn_id, session_id, tenant, status, cancel_requested, accepted_at)
			VALUES ($1, 'cancel', 'default', 'queued', true, now())`, req.Env.TurnID)
		require.NoError(t, err)
		c, err := s.Claim(ctx, req)
		require.NoError(t, err)
		require.Equal(t, Cancelled, c.Outcome)
		_, _, err = s.Expire(ctx, req, "late")
		require.ErrorIs(t, err, ErrFenced, "a cancelled turn stays cancelled")
	})

	t.Run("ExpireLeavesLiveLeases", func(t *testing.T) {
		t.Parallel()
		env := setup(t)
		s := NewStore(env.Pool, "a", time.Minute, 3)
		fresh := request("expire")
		token, attempt, err := s.Expire(ctx, fresh, "late")
		require.NoError(t, err)
		require.Zero(t, attempt)
		require.Positive(t, token)
		c, err := s.Claim(ctx, fresh)
		require.NoError(t, err)
		require.Equal(t, Done, c.Outcome)
		require.Equal(t, wire.StatusExpired, c.Status)

		held := request("expire")
		_, err = s.Claim(ctx, held)
		require.NoError(t, err)
		_, _, err = s.Expire(ctx, held, "late")
		require.ErrorIs(t, err, ErrFenced, "a running turn with a live lease is not expired")
	})
}

package lease

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/testenv"
	"github.com/turnstile-run/turnstile/pkg/turnstore"
	"github.com/turnstile-run/turnstile/pkg/wire"
)

func claimed(t *testing.T, s *Store) (uuid.UUID, Claim) {
	t.Helper()
	now := time.Now()
	e := wire.Envelope{TurnID: uuid.Must(uuid.NewV7()), SessionID: "renew-" + uuid.NewString(), Tenant: "default", Deadline: now.Add(time.Hour), AcceptedAt: now}
	c, err := s.Claim(context.Background(), ClaimRequest{Env: e})
	require.NoError(t, err)
	require.Equal(t, turnstore.ClaimAcquired, c.Outcome)
	return e.TurnID, c
}

func TestRenewer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("RenewsCancelsAndLoses", func(t *testing.T) {
		t.Parallel()
		env := testenv.New(t, testenv.Options{Partitions: 1})
		store := NewStore(env.Pool, "r", time.Second, 3)
		r := NewRenewer(store, 100*time.Millisecond, env.Log)
		// Rounds that succeeded, by leases renewed. A round that times out on a loaded machine is
		// not a failure of renewal (the next one makes up for it) unless leases are lost, which
		// the checks below would see.
		rounds := make(chan int, 1000)
		r.OnRenew = func(n int, err error) {
			if err == nil {
				rounds <- n
			}
		}
		require.NoError(t, r.Stop(ctx), "stop before start")

		keep, kc := claimed(t, store)
		keepCtx, keepCancel := context.WithCancelCause(ctx)
		defer keepCancel(nil)
		cancelled, cc := claimed(t, store)
		cancelCtx, cancelCancel := context.WithCancelCause(ctx)
		defer cancelCancel(nil)
		lost, lc := claimed(t, store)
		lostCtx, lostCancel := context.WithCancelCause(ctx)
		defer lostCancel(nil)
		// Tracked before the loop starts, so every round sees all three.
		r.Track(keep, kc.Token, time.Now(), keepCancel)
		r.Track(cancelled, cc.Token, time.Now(), cancelCancel)
		r.Track(lost, lc.Token, time.Now(), lostCancel)
		require.NoError(t, r.Start(ctx))
		defer func() { require.NoError(t, r.Stop(ctx)); require.NoError(t, r.Stop(ctx)) }()

		// Twenty rounds: far past the 1 s lease, which renewal keeps alive, one statement each.
		for range 20 {
			require.Equal(t, 3, <-rounds, "one statement renews every lease")
		}
		require.NoError(t, keepCtx.Err())

		_, err := env.Pool.Exec(ctx, `UPDATE turns SET cancel_requested = true WHERE turn_id = $1`, cancelled)
		require.NoError(t, err)
		_, err = env.Pool.Exec(ctx, `UPDATE turns SET fencing_token = nextval('fencing_token_seq') WHERE turn_id = $1`, lost)
		require.NoError(t, err)
		<-cancelCtx.Done()
		require.ErrorIs(t, context.Cause(cancelCtx), ErrCancelRequested)
		<-lostCtx.Done()
		require.ErrorIs(t, context.Cause(lostCtx), ErrLeaseLost)
		require.NoError(t, keepCtx.Err())
	})

	t.Run("CancelRequested", func(t *testing.T) {
		t.Parallel()
		r := NewRenewer(NewStore(nil, "r", time.Second, 3), time.Hour, testenv.TestLogger(t))
		id := uuid.New()
		ctx, cancel := context.WithCancelCause(ctx)
		defer cancel(nil)
		require.False(t, r.CancelRequested(id), "not held")
		r.Track(id, 1, time.Now(), cancel)
		require.True(t, r.CancelRequested(id))
		require.ErrorIs(t, context.Cause(ctx), ErrCancelRequested)
	})

	t.Run("OutageCostsNothingUntilTheLeaseExpires", func(t *testing.T) {
		t.Parallel()
		// A pool whose database cannot be reached: every renewal fails.
		pool, err := pgxpool.New(ctx, "postgres://postgres@127.0.0.1:1/test?connect_timeout=1")
		require.NoError(t, err)
		defer pool.Close()
		const ttl = 800 * time.Millisecond
		r := NewRenewer(NewStore(pool, "r", ttl, 3), 50*time.Millisecond, testenv.TestLogger(t))
		failed := make(chan struct{}, 1000)
		r.OnRenew = func(_ int, err error) {
			if err == nil {
				t.Error("a renewal against an unreachable database succeeded")
			}
			failed <- struct{}{}
		}
		require.NoError(t, r.Start(ctx))
		defer func() { require.NoError(t, r.Stop(ctx)) }()
		acquired := time.Now()
		attemptCtx, cancel := context.WithCancelCause(ctx)
		defer cancel(nil)
		r.Track(uuid.New(), 1, acquired, cancel)
		<-failed
		require.NoError(t, attemptCtx.Err(), "a failed renewal alone stops nothing")
		<-attemptCtx.Done()
		require.ErrorIs(t, context.Cause(attemptCtx), ErrLeaseLost)
		require.GreaterOrEqual(t, time.Since(acquired), ttl, "the attempt stops only once its lease really expired")
		require.Zero(t, r.Held())
	})
}

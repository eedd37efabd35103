package execute

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/testenv"
	"github.com/turnstile-run/turnstile/pkg/turnstore"
	"github.com/turnstile-run/turnstile/services/worker/internal/agent/agenttest"
	"github.com/turnstile-run/turnstile/services/worker/internal/consume"
	"github.com/turnstile-run/turnstile/services/worker/internal/lease"
)

// TestTakeoverCounted holds Hooks.Takeover to takeovers of a lease that expired under an earlier
// holder: a failed attempt retried after its release is not one; a turn whose holder stopped
// renewing is, whatever the holder's name (a restarted worker may reuse its instance ID).
func TestTakeoverCounted(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{Partitions: 1})
	ctx := context.Background()
	words := agenttest.ChatAnswer{Words: []string{"hello"}}

	t.Run("FailedAttemptRetriedIsNoTakeover", func(t *testing.T) {
		t.Parallel()
		var takeovers atomic.Int32
		retries := make(chan string, 10)
		f := newUpstreamFixture(t, env, fixtureOptions{hooks: Hooks{
			Takeover: func() { takeovers.Add(1) },
			Retry:    func(cause string) { retries <- cause },
		}}, func(n int) agenttest.ChatAnswer {
			if n == 1 {
				// A word, then the error: the call cannot be retried in place, the next attempt must.
				return agenttest.ChatAnswer{Words: []string{"partial "}, Error: serverError}
			}
			return words
		})
		rec, _ := f.record(t, time.Minute)
		require.Equal(t, consume.Commit, f.x.Handle(ctx, rec))
		require.Equal(t, 2, f.chat.Requests(), "the turn took two attempts")
		require.Zero(t, takeovers.Load(), "a retried attempt is not a takeover")
		require.Len(t, retries, 1, "the second attempt is a retry")
		require.Equal(t, RetryReleased, <-retries)
	})

	// expiredUnder claims the record's turn as owner with a lease that expires at once and waits
	// until it has.
	expiredUnder := func(t *testing.T, owner string, rec *lease.ClaimRequest) {
		t.Helper()
		dead := lease.NewStore(env.Pool, owner, 50*time.Millisecond, 3)
		c, err := dead.Claim(ctx, *rec)
		require.NoError(t, err)
		require.Equal(t, turnstore.ClaimAcquired, c.Outcome)
		require.Eventually(t, func() bool { return time.Now().After(c.LeaseExpiresAt.Add(10 * time.Millisecond)) }, 10*time.Second, 10*time.Millisecond)
	}

	for _, c := range []struct{ name, owner string }{
		{"AnotherWorkersExpiredLeaseIsATakeover", "dead-" + testenv.RandomHex(4)},
		{"ARestartedWorkersOwnNameIsATakeover", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var takeovers, retries atomic.Int32
			f := newUpstreamFixture(t, env, fixtureOptions{hooks: Hooks{
				Takeover: func() { takeovers.Add(1) },
				Retry:    func(string) { retries.Add(1) },
			}}, func(int) agenttest.ChatAnswer { return words })
			rec, turn := f.record(t, time.Minute)
			owner := c.owner
			if owner == "" {
				owner = f.owner
			}
			turn.SessionID = turn.SessionKey().String() // as the executor claims it
			expiredUnder(t, owner, &lease.ClaimRequest{Env: turn, Partition: rec.Partition, Offset: rec.Offset})
			require.Equal(t, consume.Commit, f.x.Handle(ctx, rec))
			require.EqualValues(t, 1, takeovers.Load(), "taking over an expired lease is a takeover")
			require.Zero(t, retries.Load())
			require.NotNil(t, f.logs.find(slog.LevelInfo, "turn taken over from an expired lease"))
			require.Equal(t, owner, f.logs.find(slog.LevelInfo, "turn taken over from an expired lease")["previous_owner"])
		})
	}
}

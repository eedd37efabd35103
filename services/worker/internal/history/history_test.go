package history_test

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/turnstile-run/turnstile/pkg/testenv"
	"github.com/turnstile-run/turnstile/services/worker/internal/history"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/jackc/pgx/v5/pgxpool.(*Pool).backgroundHealthCheck"))
}

// complete appends one turn's two messages the way the completion transaction does: last_seq is
// bumped in the same statement that appends the messages. It stands for any worker's completion.
func complete(t *testing.T, env *testenv.Env, session, user, assistant string) {
	t.Helper()
	_, err := env.Pool.Exec(context.Background(), `
		WITH seq AS (
			INSERT INTO sessions AS s (session_id, tenant, last_seq) VALUES ($1, 't', 2)
			ON CONFLICT (session_id) DO UPDATE SET last_seq = s.last_seq + 2 RETURNING s.last_seq)
		INSERT INTO session_messages (session_id, seq, turn_id, role, content)
		SELECT $1, q.last_seq - 1, $2::uuid, 'user', $3 FROM seq q
		UNION ALL SELECT $1, q.last_seq, $2::uuid, 'assistant', $4 FROM seq q`, session, uuid.New(), user, assistant)
	require.NoError(t, err)
}

func contents(t *testing.T, c *history.Cache, session string) []string {
	t.Helper()
	msgs, err := c.Get(context.Background(), session)
	require.NoError(t, err)
	var out []string
	for _, m := range msgs {
		out = append(out, m.Role+":"+m.Content)
	}
	return out
}

func TestCache(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{})
	t.Run("EmptySession", func(t *testing.T) {
		t.Parallel()
		c := history.New(env.Pool, 10)
		require.Empty(t, contents(t, c, "none-"+uuid.NewString()))
	})
	t.Run("WarmHitReadsNoMessages", func(t *testing.T) {
		t.Parallel()
		s := "s-" + uuid.NewString()
		complete(t, env, s, "q1", "a1")
		c := history.New(env.Pool, 10)
		require.Equal(t, []string{"user:q1", "assistant:a1"}, contents(t, c, s))
		require.Equal(t, history.Stats{Misses: 1, Rows: 2}, c.Stats())
		require.Equal(t, []string{"user:q1", "assistant:a1"}, contents(t, c, s))
		require.Equal(t, history.Stats{Hits: 1, Misses: 1, Rows: 2}, c.Stats(), "a warm hit reads no message row")
	})
	t.Run("AnotherWorkersWriteIsNeverMissed", func(t *testing.T) {
		t.Parallel()
		s := "s-" + uuid.NewString()
		complete(t, env, s, "q1", "a1")
		mine := history.New(env.Pool, 10)
		require.Len(t, contents(t, mine, s), 2)
		// Another worker completes the next turn of the session (a rebalance moved the partition).
		complete(t, env, s, "q2", "a2")
		require.Equal(t, []string{"user:q1", "assistant:a1", "user:q2", "assistant:a2"}, contents(t, mine, s))
		require.Equal(t, history.Stats{Misses: 2, Rows: 4}, mine.Stats(), "only the new messages were read")
	})
	t.Run("Bounded", func(t *testing.T) {
		t.Parallel()
		c := history.New(env.Pool, 2)
		for range 3 {
			s := "s-" + uuid.NewString()
			complete(t, env, s, "q", "a")
			require.Len(t, contents(t, c, s), 2)
		}
		require.Equal(t, 2, c.Len())
	})
}

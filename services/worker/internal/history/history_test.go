package history_test

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/turnstile-run/turnstile/pkg/testenv"
	"github.com/turnstile-run/turnstile/pkg/turnstore"
	"github.com/turnstile-run/turnstile/pkg/wire"
	"github.com/turnstile-run/turnstile/services/worker/internal/agent"
	"github.com/turnstile-run/turnstile/services/worker/internal/history"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/jackc/pgx/v5/pgxpool.(*Pool).backgroundHealthCheck"))
}

// complete appends one turn's two messages the way the completion transaction does: last_seq is
// bumped in the same statement that appends the messages. It stands for any worker's completion.
func complete(t *testing.T, env *testenv.Env, session wire.SessionKey, user, assistant string) {
	t.Helper()
	_, err := env.Pool.Exec(context.Background(), `
		WITH seq AS (
			INSERT INTO sessions AS s (session_id, tenant, last_seq) VALUES ($1, 't', 2)
			ON CONFLICT (session_id) DO UPDATE SET last_seq = s.last_seq + 2 RETURNING s.last_seq)
		INSERT INTO session_history (session_id, seq, turn_id, question, answer)
		SELECT $1, q.last_seq, $2::uuid, $3, $4 FROM seq q`, session, uuid.New(), user, assistant)
	require.NoError(t, err)
}

func contents(t *testing.T, c *history.Cache, session wire.SessionKey) []string {
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
		require.Empty(t, contents(t, c, wire.NewSessionKey("t", "none-"+uuid.NewString())))
	})
	t.Run("WarmHitReadsNoMessages", func(t *testing.T) {
		t.Parallel()
		s := wire.NewSessionKey("t", "s-"+uuid.NewString())
		complete(t, env, s, "q1", "a1")
		c := history.New(env.Pool, 10)
		require.Equal(t, []string{"user:q1", "assistant:a1"}, contents(t, c, s))
		require.Equal(t, history.Stats{Misses: 1, Rows: 2}, c.Stats())
		require.Equal(t, []string{"user:q1", "assistant:a1"}, contents(t, c, s))
		require.Equal(t, history.Stats{Hits: 1, Misses: 1, Rows: 2}, c.Stats(), "a warm hit reads no message row")
	})
	t.Run("AnotherWorkersWriteIsNeverMissed", func(t *testing.T) {
		t.Parallel()
		s := wire.NewSessionKey("t", "s-"+uuid.NewString())
		complete(t, env, s, "q1", "a1")
		mine := history.New(env.Pool, 10)
		require.Len(t, contents(t, mine, s), 2)
		// Another worker completes the next turn of the session (a rebalance moved the partition).
		complete(t, env, s, "q2", "a2")
		require.Equal(t, []string{"user:q1", "assistant:a1", "user:q2", "assistant:a2"}, contents(t, mine, s))
		require.Equal(t, history.Stats{Misses: 2, Rows: 4}, mine.Stats(), "only the new messages were read")
	})
	t.Run("GetAtKnownSeq", func(t *testing.T) {
		t.Parallel()
		s := wire.NewSessionKey("t", "s-"+uuid.NewString())
		c := history.New(env.Pool, 10)
		msgs, err := c.GetAt(context.Background(), s, 0)
		require.NoError(t, err)
		require.Empty(t, msgs, "a session without history needs no read")
		require.Equal(t, history.Stats{Hits: 1}, c.Stats())

		complete(t, env, s, "q1", "a1")
		msgs, err = c.GetAt(context.Background(), s, 2)
		require.NoError(t, err)
		require.Len(t, msgs, 2, "an unknown sequence number is read")
		require.Equal(t, history.Stats{Hits: 1, Misses: 1, Rows: 2}, c.Stats())
		msgs, err = c.GetAt(context.Background(), s, 2)
		require.NoError(t, err)
		require.Len(t, msgs, 2)
		require.Equal(t, history.Stats{Hits: 2, Misses: 1, Rows: 2}, c.Stats(), "the cached sequence number is current: no read")

		complete(t, env, s, "q2", "a2")
		msgs, err = c.GetAt(context.Background(), s, 4)
		require.NoError(t, err)
		require.Len(t, msgs, 4, "a newer sequence number reads the new messages")
		require.Equal(t, history.Stats{Hits: 2, Misses: 2, Rows: 4}, c.Stats())
	})
	t.Run("AppendedKeepsTheCacheCurrent", func(t *testing.T) {
		t.Parallel()
		s := wire.NewSessionKey("t", "s-"+uuid.NewString())
		c := history.New(env.Pool, 10)
		msg := func(seq int64, role, content string) agent.Message {
			return agent.Message{Seq: seq, TurnID: "t", Role: role, Content: content}
		}
		// The session's first completion starts its history; the next one extends it. Neither
		// needs a read when the next turn's claim names the new sequence number.
		c.Appended(s, 2, msg(1, "user", "q1"), msg(2, "assistant", "a1"))
		c.Appended(s, 4, msg(3, "user", "q2"), msg(4, "assistant", "a2"))
		msgs, err := c.GetAt(context.Background(), s, 4)
		require.NoError(t, err)
		require.Len(t, msgs, 4)
		require.Equal(t, "a2", msgs[3].Content)
		require.Equal(t, history.Stats{Hits: 1}, c.Stats())

		// A gap (a completion this cache did not see) is not papered over: the entry stays at 4
		// and the next claim's sequence number makes the cache read.
		c.Appended(s, 8, msg(7, "user", "q4"), msg(8, "assistant", "a4"))
		complete(t, env, s, "q1", "a1")
		complete(t, env, s, "q2", "a2")
		complete(t, env, s, "q3", "a3")
		msgs, err = c.GetAt(context.Background(), s, 6)
		require.NoError(t, err)
		require.Len(t, msgs, 6)
		require.Equal(t, "a3", msgs[5].Content)
		require.Equal(t, history.Stats{Hits: 1, Misses: 1, Rows: 2}, c.Stats())
		// A history this cache never held is not started from the middle.
		other := wire.NewSessionKey("t", "s-"+uuid.NewString())
		c.Appended(other, 4, msg(3, "user", "q"), msg(4, "assistant", "a"))
		require.Equal(t, 1, c.Len())
	})
	t.Run("RewrittenHistoryIsReadWhole", func(t *testing.T) {
		t.Parallel()
		// A LangGraph thread's state edited (turnstore.RewriteHistory) replaces the history; a cache
		// holding the old one reads the new one whole, never the old one with the new appended.
		s := wire.NewSessionKey("t", "rw-"+uuid.NewString())
		complete(t, env, s, "q1", "a1")
		complete(t, env, s, "q2", "a2")
		c := history.New(env.Pool, 10)
		require.Equal(t, []string{"user:q1", "assistant:a1", "user:q2", "assistant:a2"}, contents(t, c, s))
		db := turnstore.New(env.Pool)
		last, err := db.RewriteHistory(context.Background(), "t", s, []turnstore.HistoryPair{{Question: "q1", Answer: "edited"}})
		require.NoError(t, err)
		require.Equal(t, []string{"user:q1", "assistant:edited"}, contents(t, c, s))
		msgs, err := c.GetAt(context.Background(), s, last)
		require.NoError(t, err)
		require.Len(t, msgs, 2, "GetAt at the rewritten last_seq answers the new history from memory")
		complete(t, env, s, "q3", "a3")
		require.Equal(t, []string{"user:q1", "assistant:edited", "user:q3", "assistant:a3"}, contents(t, c, s))
		_, err = db.RewriteHistory(context.Background(), "t", s, nil)
		require.NoError(t, err)
		require.Empty(t, contents(t, c, s), "a history rewritten to nothing is empty")
	})
	t.Run("Bounded", func(t *testing.T) {
		t.Parallel()
		c := history.New(env.Pool, 2)
		for range 3 {
			s := wire.NewSessionKey("t", "s-"+uuid.NewString())
			complete(t, env, s, "q", "a")
			require.Len(t, contents(t, c, s), 2)
		}
		require.Equal(t, 2, c.Len())
	})
}

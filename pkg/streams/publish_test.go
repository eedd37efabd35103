package streams

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/wire"
)

func TestPublishMany(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	delta := func(turn string, i int) wire.Event {
		return wire.NewEvent(wire.EventDelta, wire.DeltaData{EventBase: wire.EventBase{TurnID: turn, Attempt: 1}, Index: i, Text: "w"})
	}

	t.Run("EachMessageFencedOnItsOwn", func(t *testing.T) {
		t.Parallel()
		rdb, prefix := benchRedis(ctx, t)
		p := NewPublisher(rdb, prefix, 10000, time.Hour)
		// Turn "b" already has a newer attempt (token 5), so its token-3 message is a zombie's.
		_, err := p.Publish(ctx, "s2", "b", 5, delta("b", 0), "")
		require.NoError(t, err)

		res := p.PublishMany(ctx, []Message{
			{SessionID: "s1", TurnID: "a", Token: 1, Event: delta("a", 0)},
			{SessionID: "s2", TurnID: "b", Token: 3, Event: delta("b", 1)},
			{SessionID: "s1", TurnID: "a", Token: 1, Event: delta("a", 1)},
			{SessionID: "s2", TurnID: "c", Token: 4, Event: delta("c", 0)},
			{SessionID: "s1", TurnID: "a", Token: 1, Event: wire.NewEvent(wire.EventCompleted, wire.CompletedData{EventBase: wire.EventBase{TurnID: "a", Attempt: 1}})},
			{SessionID: "s1", TurnID: "a", Token: 1, Event: wire.NewEvent(wire.EventCompleted, wire.CompletedData{EventBase: wire.EventBase{TurnID: "a", Attempt: 1}})},
		})
		require.Len(t, res, 6)
		require.NoError(t, res[0].Err)
		require.ErrorIs(t, res[1].Err, ErrStaleToken, "the stale message fails alone")
		require.NoError(t, res[2].Err)
		require.NoError(t, res[3].Err)
		require.NoError(t, res[4].Err)
		require.True(t, res[4].Published.Appended)
		require.NoError(t, res[5].Err)
		require.False(t, res[5].Published.Appended, "one terminal event per turn, as with Publish")
		require.Equal(t, res[4].Published.Cursor, res[5].Published.Cursor)
		require.True(t, res[0].Published.Cursor.ID.Less(res[2].Published.Cursor.ID))

		// A session's entries are in the order given, each naming its predecessor.
		entries, err := rdb.XRange(ctx, KeysFor(prefix, "s1").Events, "-", "+").Result()
		require.NoError(t, err)
		require.Len(t, entries, 3)
		var types []string
		for i, e := range entries {
			types = append(types, e.Values["type"].(string))
			if i > 0 {
				require.Equal(t, entries[i-1].ID, e.Values["prev"])
			}
		}
		require.Equal(t, []string{"turn.delta", "turn.delta", "turn.completed"}, types)
		n, err := rdb.XLen(ctx, KeysFor(prefix, "s2").Events).Result()
		require.NoError(t, err)
		require.Equal(t, int64(2), n, "the zombie's event was not appended")
	})

	t.Run("ScriptCacheLost", func(t *testing.T) {
		t.Parallel()
		rdb, prefix := benchRedis(ctx, t)
		p := NewPublisher(rdb, prefix, 10000, time.Hour)
		require.NoError(t, rdb.ScriptFlush(ctx).Err())
		ms := make([]Message, 5)
		for i := range ms {
			ms[i] = Message{SessionID: "flushed", TurnID: "t", Token: 1, Event: delta("t", i)}
		}
		for i, r := range p.PublishMany(ctx, ms) {
			require.NoError(t, r.Err, "message %d", i)
		}
		entries, err := rdb.XRange(ctx, KeysFor(prefix, "flushed").Events, "-", "+").Result()
		require.NoError(t, err)
		require.Len(t, entries, 5)
		for i, e := range entries {
			require.Contains(t, e.Values["data"], `"index":`+strconv.Itoa(i), "order kept through the reload")
		}
	})

	t.Run("ConnectionErrorFailsEveryMessage", func(t *testing.T) {
		t.Parallel()
		rdb, prefix := benchRedis(ctx, t)
		p := NewPublisher(rdb, prefix, 10000, time.Hour)
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		res := p.PublishMany(cctx, []Message{{SessionID: "x", TurnID: "t", Token: 1, Event: delta("t", 0)}, {SessionID: "y", TurnID: "u", Token: 1, Event: delta("u", 0)}})
		for _, r := range res {
			require.ErrorIs(t, r.Err, context.Canceled)
		}
		require.Empty(t, p.PublishMany(ctx, nil))
	})
}

package streams

import (
	"context"
	"encoding"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/testenv"
	"github.com/turnstile-run/turnstile/pkg/wire"
)

func delta(turn string, i int) wire.Event {
	return wire.NewEvent(wire.EventDelta, wire.DeltaData{EventBase: wire.EventBase{TurnID: turn, Attempt: 1}, Index: i, Text: "w"})
}

func completed(turn string) wire.Event {
	return wire.NewEvent(wire.EventCompleted, wire.CompletedData{EventBase: wire.EventBase{TurnID: turn, Attempt: 1}})
}

// groupings runs f with a publisher of each kind of script call: sessions mixed in a call (one
// Redis node) and one session per call (Redis Cluster, here against the one local node).
func groupings(t *testing.T, f func(t *testing.T, rdb redis.UniversalClient, prefix string, p *Publisher)) {
	t.Helper()
	for _, bySession := range []bool{false, true} {
		name := "MixedSessions"
		if bySession {
			name = "OneSessionPerCall"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			rdb, prefix := benchRedis(context.Background(), t)
			p := NewPublisher(rdb, prefix, 10000, time.Hour)
			p.bySession = bySession
			f(t, rdb, prefix, p)
		})
	}
}

// entriesOf returns a stream's entries and requires each to name the one before it as prev.
func entriesOf(ctx context.Context, t *testing.T, rdb redis.UniversalClient, key string) []redis.XMessage {
	t.Helper()
	entries, err := rdb.XRange(ctx, key, "-", "+").Result()
	require.NoError(t, err)
	for i := 1; i < len(entries); i++ {
		require.Equal(t, entries[i-1].ID, entries[i].Values["prev"], "entry %d names its predecessor", i)
	}
	return entries
}

func TestPublishMany(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("EachMessageFencedOnItsOwn", func(t *testing.T) {
		t.Parallel()
		groupings(t, func(t *testing.T, rdb redis.UniversalClient, prefix string, p *Publisher) {
			// Turn "b" already has a newer attempt (token 5), so its token-3 message is a zombie's.
			_, err := p.Publish(ctx, sk("s2"), "b", 5, delta("b", 0), "")
			require.NoError(t, err)

			res := p.PublishMany(ctx, []Message{
				{Session: sk("s1"), TurnID: "a", Token: 1, Event: delta("a", 0)},
				{Session: sk("s2"), TurnID: "b", Token: 3, Event: delta("b", 1)},
				{Session: sk("s1"), TurnID: "a", Token: 1, Event: delta("a", 1)},
				{Session: sk("s2"), TurnID: "c", Token: 4, Event: delta("c", 0)},
				{Session: sk("s3"), TurnID: "d", Token: 2, Event: delta("d", 0)},
				{Session: sk("s1"), TurnID: "a", Token: 1, Event: completed("a")},
				{Session: sk("s2"), TurnID: "b", Token: 5, Event: delta("b", 2)},
				{Session: sk("s1"), TurnID: "a", Token: 1, Event: completed("a")},
				{Session: sk("s3"), TurnID: "d", Token: 1, Event: delta("d", 1)},
				{Session: sk("s3"), TurnID: "d", Token: 3, Event: delta("d", 2)},
				{Session: sk("s3"), TurnID: "d", Token: 2, Event: completed("d")},
			})
			require.Len(t, res, 11)
			for _, i := range []int{0, 2, 3, 4, 5, 6, 7, 9} {
				require.NoError(t, res[i].Err, "message %d", i)
			}
			require.ErrorIs(t, res[1].Err, ErrStaleToken, "the stale message fails alone")
			require.ErrorIs(t, res[8].Err, ErrStaleToken, "token 1 after token 2 of the same turn, in the same batch")
			require.ErrorIs(t, res[10].Err, ErrStaleToken, "token 2 after token 3 took over, in the same batch")
			require.True(t, res[5].Published.Appended)
			require.False(t, res[7].Published.Appended, "one terminal event per turn, as with Publish")
			require.Equal(t, res[5].Published.Cursor, res[7].Published.Cursor)
			require.True(t, res[0].Published.Cursor.ID.Less(res[2].Published.Cursor.ID))

			// A session's entries are in the order given, each naming its predecessor.
			var types []string
			for _, e := range entriesOf(ctx, t, rdb, KeysFor(prefix, sk("s1")).Events) {
				types = append(types, e.Values["type"].(string))
			}
			require.Equal(t, []string{"turn.delta", "turn.delta", "turn.completed"}, types)
			require.Len(t, entriesOf(ctx, t, rdb, KeysFor(prefix, sk("s2")).Events), 3, "the zombie's event was not appended")
			var data []string
			for _, e := range entriesOf(ctx, t, rdb, KeysFor(prefix, sk("s3")).Events) {
				data = append(data, e.Values["data"].(string))
			}
			require.Len(t, data, 2)
			require.Contains(t, data[1], `"index":2`)
			fence, err := rdb.HGet(ctx, KeysFor(prefix, sk("s3")).Meta, "f:d").Result()
			require.NoError(t, err)
			require.Equal(t, "3", fence)
		})
	})

	t.Run("PrevChainAcrossCallsAndBatches", func(t *testing.T) {
		t.Parallel()
		groupings(t, func(t *testing.T, rdb redis.UniversalClient, prefix string, p *Publisher) {
			// Three batches of two sessions' events interleaved, 150 per session per batch: each
			// session spans several script calls, and the chain must run through all of them.
			var cursors []Cursor
			for b := range 3 {
				var ms []Message
				for i := range 150 {
					for _, s := range []string{"a", "b"} {
						ms = append(ms, Message{Session: sk(s), TurnID: "t" + strconv.Itoa(b), Token: 1, Event: delta("t", b*150+i)})
					}
				}
				for i, r := range p.PublishMany(ctx, ms) {
					require.NoError(t, r.Err)
					require.True(t, r.Published.Appended)
					if ms[i].Session == sk("a") {
						cursors = append(cursors, r.Published.Cursor)
					}
				}
			}
			for _, s := range []string{"a", "b"} {
				entries := entriesOf(ctx, t, rdb, KeysFor(prefix, sk(s)).Events)
				require.Len(t, entries, 450)
				require.Equal(t, "", entries[0].Values["prev"])
				for i, e := range entries {
					require.Contains(t, e.Values["data"], `"index":`+strconv.Itoa(i)+`,`, "session %s in order", s)
					if s == "a" {
						require.Equal(t, cursors[i].ID.String(), e.ID)
						require.Equal(t, cursors[0].Epoch, cursors[i].Epoch, "one generation")
					}
				}
			}
		})
	})

	t.Run("EpochRestartsAfterStreamLoss", func(t *testing.T) {
		t.Parallel()
		groupings(t, func(t *testing.T, rdb redis.UniversalClient, prefix string, p *Publisher) {
			k := KeysFor(prefix, sk("s"))
			res := p.PublishMany(ctx, []Message{
				{Session: sk("s"), TurnID: "done", Token: 1, Event: delta("done", 0)},
				{Session: sk("s"), TurnID: "done", Token: 1, Event: completed("done")},
				{Session: sk("s"), TurnID: "z", Token: 7, Event: delta("z", 0)},
			})
			for _, r := range res {
				require.NoError(t, r.Err)
			}
			before := res[1].Published.Cursor
			require.NoError(t, rdb.Del(ctx, k.Events).Err()) // an eviction, a restart without persistence

			res = p.PublishMany(ctx, []Message{
				{Session: sk("s"), TurnID: "done", Token: 1, Event: completed("done")},
				{Session: sk("s"), TurnID: "z", Token: 6, Event: delta("z", 1)},
				{Session: sk("s"), TurnID: "n", Token: 1, Event: delta("n", 0)},
				{Session: sk("s"), TurnID: "n", Token: 1, Event: delta("n", 1)},
			})
			require.NoError(t, res[0].Err)
			require.False(t, res[0].Published.Appended, "the terminal marker outlives the stream")
			require.Equal(t, before, res[0].Published.Cursor)
			require.ErrorIs(t, res[1].Err, ErrStaleToken, "so does the fence")
			require.NoError(t, res[2].Err)
			require.NoError(t, res[3].Err)
			after := res[2].Published.Cursor
			require.NotEqual(t, before.Epoch, after.Epoch, "a new generation")
			require.Equal(t, after.Epoch, res[3].Published.Cursor.Epoch)
			epoch, err := rdb.HGet(ctx, k.Meta, "epoch").Result()
			require.NoError(t, err)
			require.Equal(t, after.Epoch, epoch)
			entries := entriesOf(ctx, t, rdb, k.Events)
			require.Len(t, entries, 2)
			require.Equal(t, "", entries[0].Values["prev"], "the first entry of a generation has no predecessor")
			ttl, err := rdb.PTTL(ctx, k.Events).Result()
			require.NoError(t, err)
			require.Positive(t, ttl)
		})
	})

	t.Run("EpochRestartsAfterMetaLoss", func(t *testing.T) {
		t.Parallel()
		groupings(t, func(t *testing.T, rdb redis.UniversalClient, prefix string, p *Publisher) {
			k := KeysFor(prefix, sk("s"))
			first, err := p.Publish(ctx, sk("s"), "t", 1, delta("t", 0), "")
			require.NoError(t, err)
			require.NoError(t, rdb.Del(ctx, k.Meta).Err())
			second, err := p.Publish(ctx, sk("s"), "t", 1, delta("t", 1), "")
			require.NoError(t, err)
			require.NotEqual(t, first.Cursor.Epoch, second.Cursor.Epoch, "without its epoch the stream cannot be continued")
			entries := entriesOf(ctx, t, rdb, k.Events)
			require.Len(t, entries, 2, "the stream itself was kept")
			require.Equal(t, first.Cursor.ID.String(), entries[1].Values["prev"], "prev names the real newest entry")
		})
	})

	t.Run("ForeignAppendIsPrev", func(t *testing.T) {
		t.Parallel()
		groupings(t, func(t *testing.T, rdb redis.UniversalClient, prefix string, p *Publisher) {
			// Something other than this script appends (an older version of it mid-upgrade, a
			// tool): the next entry must name that entry, not the newest this script appended.
			k := KeysFor(prefix, sk("s"))
			first, err := p.Publish(ctx, sk("s"), "t", 1, delta("t", 0), "")
			require.NoError(t, err)
			foreign, err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: k.Events, Values: []any{"type", "turn.delta", "turn", "t", "data", "{}", "prev", first.Cursor.ID.String()}}).Result()
			require.NoError(t, err)
			res := p.PublishMany(ctx, []Message{
				{Session: sk("s"), TurnID: "t", Token: 1, Event: delta("t", 1)},
				{Session: sk("s"), TurnID: "t", Token: 1, Event: delta("t", 2)},
			})
			require.NoError(t, res[0].Err)
			require.NoError(t, res[1].Err)
			entries := entriesOf(ctx, t, rdb, k.Events)
			require.Len(t, entries, 4)
			require.Equal(t, foreign, entries[1].ID)
		})
	})

	t.Run("ErrorsStayWithTheirSession", func(t *testing.T) {
		t.Parallel()
		groupings(t, func(t *testing.T, rdb redis.UniversalClient, prefix string, p *Publisher) {
			// A key of the wrong type fails the events of its session alone, as a script per event
			// did; the other sessions of the same call are published.
			require.NoError(t, rdb.Set(ctx, KeysFor(prefix, sk("badstream")).Events, "x", 0).Err())
			require.NoError(t, rdb.Set(ctx, KeysFor(prefix, sk("badmeta")).Meta, "x", 0).Err())
			var ms []Message
			for i := range 3 {
				for _, s := range []string{"ok1", "badstream", "badmeta", "ok2"} {
					ms = append(ms, Message{Session: sk(s), TurnID: "t", Token: 1, Event: delta("t", i)})
				}
			}
			for i, r := range p.PublishMany(ctx, ms) {
				if strings.HasPrefix(ms[i].Session.SessionID(), "ok") {
					require.NoError(t, r.Err, "message %d", i)
					require.True(t, r.Published.Appended)
					continue
				}
				require.ErrorContains(t, r.Err, "WRONGTYPE", "message %d", i)
				require.NotErrorIs(t, r.Err, ErrStaleToken)
			}
			for _, s := range []string{"ok1", "ok2"} {
				require.Len(t, entriesOf(ctx, t, rdb, KeysFor(prefix, sk(s)).Events), 3)
			}
		})
	})

	t.Run("ScriptCacheLost", func(t *testing.T) {
		t.Parallel()
		groupings(t, func(t *testing.T, rdb redis.UniversalClient, prefix string, p *Publisher) {
			require.NoError(t, rdb.ScriptFlush(ctx).Err())
			// More messages than one call takes, of several sessions: every call meets NOSCRIPT
			// and is sent again with the script's body, in order.
			var ms []Message
			for i := range 100 {
				for _, s := range []string{"f1", "f2", "f3"} {
					ms = append(ms, Message{Session: sk(s), TurnID: "t", Token: 1, Event: delta("t", i)})
				}
			}
			ms = append(ms, Message{Session: sk("f1"), TurnID: "t", Token: 1, Event: completed("t")},
				Message{Session: sk("f1"), TurnID: "t", Token: 1, Event: completed("t")},
				Message{Session: sk("f2"), TurnID: "t", Token: 0, Event: delta("t", 100)})
			res := p.PublishMany(ctx, ms)
			for i, r := range res[:len(res)-1] {
				require.NoError(t, r.Err, "message %d", i)
			}
			require.False(t, res[len(res)-2].Published.Appended)
			require.ErrorIs(t, res[len(res)-1].Err, ErrStaleToken)
			for _, s := range []string{"f1", "f2", "f3"} {
				entries := entriesOf(ctx, t, rdb, KeysFor(prefix, sk(s)).Events)
				for i, e := range entries[:100] {
					require.Contains(t, e.Values["data"], `"index":`+strconv.Itoa(i)+`,`, "order kept through the reload")
				}
			}
		})
	})

	t.Run("ConnectionErrorFailsEveryMessage", func(t *testing.T) {
		t.Parallel()
		rdb, prefix := benchRedis(ctx, t)
		p := NewPublisher(rdb, prefix, 10000, time.Hour)
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		res := p.PublishMany(cctx, []Message{{Session: sk("x"), TurnID: "t", Token: 1, Event: delta("t", 0)}, {Session: sk("y"), TurnID: "u", Token: 1, Event: delta("u", 0)}})
		for _, r := range res {
			require.ErrorIs(t, r.Err, context.Canceled)
		}
		require.Empty(t, p.PublishMany(ctx, nil))
	})
}

func TestPublishManyTrimsByAge(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("GenerationOlderThanRetention", func(t *testing.T) {
		t.Parallel()
		rdb, prefix := benchRedis(ctx, t)
		p := NewPublisher(rdb, prefix, 10000, time.Hour)
		k := KeysFor(prefix, sk("s"))
		ms := make([]Message, 250) // several stream nodes
		for i := range ms {
			ms[i] = Message{Session: sk("s"), TurnID: "t", Token: 1, Event: delta("t", i)}
		}
		res := p.PublishMany(ctx, ms)
		require.NoError(t, res[0].Err)
		first, last := res[0].Published.Cursor.ID, res[len(res)-1].Published.Cursor.ID

		// A later entry, so that the next one lands after it; then every entry so far is past
		// retention as the publisher's clock sees it, and the next publish trims them by age.
		later := EntryID{Ms: last.Ms + 1000}
		require.NoError(t, rdb.XAdd(ctx, &redis.XAddArgs{Stream: k.Events, ID: later.String(), Values: []any{"type", "turn.delta", "turn", "t", "data", "{}", "prev", last.String()}}).Err())
		p.now = func() time.Time { return time.UnixMilli(int64(last.Ms) + 1).Add(time.Hour) }
		_, err := p.Publish(ctx, sk("s"), "t", 1, delta("t", 250), "")
		require.NoError(t, err)
		entries := entriesOf(ctx, t, rdb, k.Events)
		require.Less(t, len(entries), 252, "whole nodes of expired entries are gone")
		oldest, err := ParseEntryID(entries[0].ID)
		require.NoError(t, err)
		require.True(t, first.Less(oldest))
		require.Equal(t, later.String(), entries[len(entries)-1].Values["prev"])
	})

	t.Run("StreamFromBeforeTheMetaHash", func(t *testing.T) {
		t.Parallel()
		rdb, prefix := benchRedis(ctx, t)
		p := NewPublisher(rdb, prefix, 10000, time.Hour)
		k := KeysFor(prefix, sk("s"))
		// Entries from long ago and no meta hash (it was lost): a new generation on the old
		// stream, trimmed by age, its first entry naming the newest old one.
		var newest string
		for i := range 250 {
			newest = EntryID{Ms: 1000, Seq: uint64(i)}.String()
			require.NoError(t, rdb.XAdd(ctx, &redis.XAddArgs{Stream: k.Events, ID: newest, Values: []any{"type", "turn.delta", "turn", "t", "data", "{}"}}).Err())
		}
		_, err := p.Publish(ctx, sk("s"), "t", 1, delta("t", 0), "")
		require.NoError(t, err)
		entries, err := rdb.XRange(ctx, k.Events, "-", "+").Result()
		require.NoError(t, err)
		require.Less(t, len(entries), 251)
		require.Equal(t, newest, entries[len(entries)-1].Values["prev"])
	})
}

func TestPublishManyMetaFields(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, prefix := benchRedis(ctx, t)
	p := NewPublisher(rdb, prefix, 10000, time.Hour)
	k := KeysFor(prefix, sk("s"))
	meta := func() map[string]string {
		m, err := rdb.HGetAll(ctx, k.Meta).Result()
		require.NoError(t, err)
		return m
	}
	res := p.PublishMany(ctx, []Message{
		{Session: sk("s"), TurnID: "t", Token: 3, Event: delta("t", 0)},
		{Session: sk("s"), TurnID: "t", Token: 3, Event: completed("t")},
	})
	a, b := res[0].Published.Cursor, res[1].Published.Cursor
	require.Equal(t, map[string]string{"epoch": a.Epoch, "f:t": "3", "t:t": b.String(), "last": b.ID.String()}, meta())

	require.NoError(t, rdb.Del(ctx, k.Events).Err())
	c, err := p.Publish(ctx, sk("s"), "u", 1, delta("u", 0), "")
	require.NoError(t, err)
	m := meta()
	require.Equal(t, c.Cursor.Epoch, m["epoch"])
	require.Equal(t, c.Cursor.ID.String(), m["last"])
	require.Equal(t, b.String(), m["t:t"], "markers outlive the generation")
}

func TestPublisherCalls(t *testing.T) {
	t.Parallel()
	msgs := func(sessions ...string) []Message {
		ms := make([]Message, len(sessions))
		for i, s := range sessions {
			ms[i] = Message{Session: sk(s)}
		}
		return ms
	}
	seq := func(from, n int) []int {
		out := make([]int, n)
		for i := range out {
			out[i] = from + i
		}
		return out
	}
	blocks := func(cs []scriptCall) [][][]int {
		out := make([][][]int, len(cs))
		for i, c := range cs {
			out[i] = c.blocks
		}
		return out
	}
	single := &Publisher{}
	cluster := &Publisher{bySession: true}

	ms := msgs("a", "b", "a", "c", "b", "a")
	require.Equal(t, [][][]int{{{0, 2, 5}, {1, 4}, {3}}}, blocks(single.calls(ms)), "by session, each in order, sessions by first message")
	require.Equal(t, [][][]int{{{0, 2, 5}}, {{1, 4}}, {{3}}}, blocks(cluster.calls(ms)), "one session per call")

	// 100 messages of a, then 40 of b: calls of at most maxScriptEvents, a session continuing in
	// the next call.
	var many []Message
	for range 100 {
		many = append(many, Message{Session: sk("a")})
	}
	for range 40 {
		many = append(many, Message{Session: sk("b")})
	}
	require.Equal(t, [][][]int{
		{seq(0, 64)},
		{seq(64, 36), seq(100, 28)},
		{seq(128, 12)},
	}, blocks(single.calls(many)))
	require.Equal(t, [][][]int{{seq(0, 64)}, {seq(64, 36)}, {seq(100, 40)}}, blocks(cluster.calls(many)))
	require.Empty(t, single.calls(nil))

	// The client decides: only a single-node client may mix sessions in a call.
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}})
	defer c.Close()
	require.True(t, NewPublisher(c, "p", 10, time.Hour).bySession)
	r := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer r.Close()
	require.False(t, NewPublisher(r, "p", 10, time.Hour).bySession)
}

func TestPublisherScriptLayout(t *testing.T) {
	t.Parallel()
	p := &Publisher{prefix: "p", maxLen: 100, retention: time.Second}
	ms := []Message{
		{Session: sk("a"), TurnID: "t", Token: 2, Event: delta("t", 0)},
		{Session: sk("b"), TurnID: "u", Token: 3, Event: completed("u"), Traceparent: "tp"},
		{Session: sk("a"), TurnID: "t", Token: 2, Event: completed("t")},
	}
	keys, args := p.script(ms, [][]int{{0, 2}, {1}}, "123", nil)
	ka, kb := KeysFor("p", sk("a")), KeysFor("p", sk("b"))
	require.Equal(t, []string{ka.Events, ka.Meta, kb.Events, kb.Meta}, keys)
	written := make([]any, len(args))
	for i, a := range args {
		written[i] = asWritten(t, a)
	}
	require.Len(t, written[3], 10, "one fresh epoch for the call")
	written[3] = "epoch"
	require.Equal(t, []any{
		int64(100), "123", int64(1000), "epoch",
		ka.Notify, 2, "*",
		"t", int64(2), "turn.delta", []byte(ms[0].Event.Data), "0", "", "",
		"t", int64(2), "turn.completed", []byte(ms[2].Event.Data), "1", "", "",
		kb.Notify, 1, "*",
		"u", int64(3), "turn.completed", []byte(ms[1].Event.Data), "1", "tp", "",
	}, written)
}

// asWritten is the value go-redis writes for a script argument: what a pointer points to, a
// BinaryMarshaler's bytes, anything else as it is.
func asWritten(t *testing.T, a any) any {
	switch v := a.(type) {
	case *string:
		return *v
	case *int64:
		return *v
	case encoding.BinaryMarshaler:
		b, err := v.MarshalBinary()
		require.NoError(t, err)
		return b
	}
	return a
}

// TestPublisherScriptAllocations checks that laying out a call's arguments costs no allocation per
// event: a block of 60 events allocates as much as a block of one.
func TestPublisherScriptAllocations(t *testing.T) {
	p := &Publisher{prefix: "p", maxLen: 100, retention: time.Second}
	allocs := func(n int) float64 {
		ms := make([]Message, n)
		blk := make([]int, n)
		for i := range ms {
			ms[i] = Message{Session: sk("a"), TurnID: "t", Token: 1000 + wire.FenceToken(i), Event: delta("t", i), Traceparent: "tp"}
			blk[i] = i
		}
		return testing.AllocsPerRun(100, func() { p.script(ms, [][]int{blk}, "123", nil) })
	}
	one, sixty := allocs(1), allocs(60)
	require.Equal(t, one, sixty, "allocations for 1 event, for 60")
}

// TestPublishManyFenceAcrossTurnsInABlock checks that a turn's fence written earlier in a block is
// what the turn's later event in the same block is fenced against, though another turn's event
// came between.
func TestPublishManyFenceAcrossTurnsInABlock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	groupings(t, func(t *testing.T, rdb redis.UniversalClient, prefix string, p *Publisher) {
		res := p.PublishMany(ctx, []Message{
			{Session: sk("s"), TurnID: "a", Token: 5, Event: delta("a", 0)},
			{Session: sk("s"), TurnID: "b", Token: 1, Event: delta("b", 0)},
			{Session: sk("s"), TurnID: "a", Token: 3, Event: delta("a", 1)},
			{Session: sk("s"), TurnID: "b", Token: 1, Event: completed("b")},
		})
		require.NoError(t, res[0].Err)
		require.NoError(t, res[1].Err)
		require.ErrorIs(t, res[2].Err, ErrStaleToken, "a's token 5 came first in the same block")
		require.NoError(t, res[3].Err)
		m, err := rdb.HGetAll(ctx, KeysFor(prefix, sk("s")).Meta).Result()
		require.NoError(t, err)
		require.Equal(t, "5", m["f:a"])
		require.Equal(t, "1", m["f:b"])
		require.Equal(t, res[3].Published.Cursor.String(), m["t:b"])
		require.Equal(t, res[3].Published.Cursor.ID.String(), m["last"])
	})
}

// TestReplyLines checks the reading of the script's reply: empty lines are lines, the last line
// has no line break after it, and nothing follows it.
func TestReplyLines(t *testing.T) {
	t.Parallel()
	r := replyLines{s: "1\nab:1-0\n-1\n"}
	var got []string
	for {
		l, ok := r.next()
		if !ok {
			break
		}
		got = append(got, l)
	}
	require.Equal(t, []string{"1", "ab:1-0", "-1", ""}, got)
}

// TestPublishManyNotifiesOncePerSession: a call announces each session it appended to once, with
// the cursor of its last append there, and a session whose every event was refused (stale) hears
// nothing.
func TestPublishManyNotifiesOncePerSession(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, prefix := benchRedis(ctx, t)
	p := NewPublisher(rdb, prefix, 10000, time.Hour)
	ka, kb, kc := KeysFor(prefix, sk("a")), KeysFor(prefix, sk("b")), KeysFor(prefix, sk("c"))
	_, err := p.Publish(ctx, sk("c"), "t", 5, delta("t", 0), "")
	require.NoError(t, err)

	// marker gets a message after the call: everything the call published arrives before it.
	marker := prefix + ":marker"
	sub := rdb.Subscribe(ctx, ka.Notify, kb.Notify, kc.Notify, marker)
	defer func() { require.NoError(t, sub.Close()) }()
	for range 4 {
		_, err := sub.Receive(ctx) // the subscription confirmations
		require.NoError(t, err)
	}
	res := p.PublishMany(ctx, []Message{
		{Session: sk("a"), TurnID: "t", Token: 1, Event: delta("t", 0)},
		{Session: sk("b"), TurnID: "u", Token: 1, Event: delta("u", 0)},
		{Session: sk("c"), TurnID: "t", Token: 4, Event: delta("t", 1)}, // stale
		{Session: sk("a"), TurnID: "t", Token: 1, Event: delta("t", 1)},
		{Session: sk("a"), TurnID: "t", Token: 1, Event: completed("t")},
	})
	require.ErrorIs(t, res[2].Err, ErrStaleToken)
	require.NoError(t, rdb.Publish(ctx, marker, "end").Err())

	got := map[string][]string{}
	for {
		msg, err := sub.ReceiveMessage(ctx)
		require.NoError(t, err)
		if msg.Channel == marker {
			break
		}
		got[msg.Channel] = append(got[msg.Channel], msg.Payload)
	}
	require.Equal(t, map[string][]string{
		ka.Notify: {res[4].Published.Cursor.String()},
		kb.Notify: {res[1].Published.Cursor.String()},
	}, got)
}

// TestPublishManyMemoryFull: with Redis out of memory, every event of a call that would write
// fails with Redis's error, including one whose only write is a newer fence in the session's one
// HSET (a repeated terminal event, otherwise status 0), and nothing changes. It runs on a Redis
// server of its own, since a memory limit on the shared one would fail every other test using it.
func TestPublishManyMemoryFull(t *testing.T) {
	t.Parallel()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server is not installed here")
	}
	ctx := context.Background()
	addr := testenv.FreeAddr(t)
	_, port, _ := net.SplitHostPort(addr)
	cmd := exec.CommandContext(ctx, bin, "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer func() { require.NoError(t, rdb.Close()) }()
	testenv.WaitFor(t, 10*time.Second, "the private redis-server", func() bool { return rdb.Ping(ctx).Err() == nil })

	p := NewPublisher(rdb, "oom", 10000, time.Hour)
	first, err := p.Publish(ctx, sk("s"), "t", 1, completed("t"), "")
	require.NoError(t, err)
	k := KeysFor("oom", sk("s"))
	metaBefore, err := rdb.HGetAll(ctx, k.Meta).Result()
	require.NoError(t, err)

	require.NoError(t, rdb.ConfigSet(ctx, "maxmemory", "1").Err())
	res := p.PublishMany(ctx, []Message{
		{Session: sk("s"), TurnID: "t", Token: 2, Event: completed("t")}, // repeated terminal, newer fence
		{Session: sk("s"), TurnID: "u", Token: 1, Event: delta("u", 0)},
	})
	require.NoError(t, rdb.ConfigSet(ctx, "maxmemory", "0").Err())
	for i, r := range res {
		require.ErrorContains(t, r.Err, "OOM", "event %d", i)
	}
	metaAfter, err := rdb.HGetAll(ctx, k.Meta).Result()
	require.NoError(t, err)
	require.Equal(t, metaBefore, metaAfter)
	entries, err := rdb.XRange(ctx, k.Events, "-", "+").Result()
	require.NoError(t, err)
	require.Len(t, entries, 1)
	require.Equal(t, first.Cursor.ID.String(), entries[0].ID)
}

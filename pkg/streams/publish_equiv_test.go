package streams

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/wire"
)

// legacyScript is the publish script from before batching: one event per call, reading the newest
// entry for prev and trimming and setting TTLs on every event. It is the reference the batch script
// must agree with (TestPublishManyMatchesLegacy) and the older version a rolling upgrade runs beside
// it (TestPublishManyBesideLegacy). KEYS = events, meta. ARGV = turn_id, token, type, data,
// terminal, maxlen, minid_ms, ttl_ms, notify channel, fresh epoch, traceparent. Returns {status,
// entry id, epoch}: 1 appended, 0 terminal already present, -1 stale token.
var legacyScript = redis.NewScript(`
local fkey = 'f:' .. ARGV[1]
local token = tonumber(ARGV[2])
local fence = redis.call('HGET', KEYS[2], fkey)
if fence and tonumber(fence) > token then
  return {-1, '', ''}
end
local epoch = redis.call('HGET', KEYS[2], 'epoch')
if redis.call('EXISTS', KEYS[1]) == 0 or not epoch then
  -- A new generation: whatever the old stream held is gone, so readers of it must reset. The
  -- fencing tokens (f:*) and terminal markers (t:*) are kept: a turn's newest attempt and its one
  -- terminal event stay facts across generations, so a zombie cannot slip in after a loss.
  epoch = ARGV[10]
  redis.call('HSET', KEYS[2], 'epoch', epoch)
end
if not fence or tonumber(fence) < token then
  redis.call('HSET', KEYS[2], fkey, ARGV[2])
end
local tkey = 't:' .. ARGV[1]
if ARGV[5] == '1' then
  local t = redis.call('HGET', KEYS[2], tkey)
  if t then
    local te, tid = string.match(t, '^([^:]*):(.*)$')
    if not te then
      te, tid = epoch, t
    end
    return {0, tid, te}
  end
end
-- Each entry names its predecessor, so a reader can tell a cursor just before the oldest retained
-- entry (nothing lost) from one further back (trimmed history): Redis does not record the newest
-- entry that trimming removed.
local prev = ''
local newest = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)
if newest[1] then
  prev = newest[1][1]
end
local id = redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[6], '*',
  'type', ARGV[3], 'turn', ARGV[1], 'data', ARGV[4], 'tp', ARGV[11], 'prev', prev)
if ARGV[5] == '1' then
  redis.call('HSET', KEYS[2], tkey, epoch .. ':' .. id)
end
redis.call('XTRIM', KEYS[1], 'MINID', '~', ARGV[7])
redis.call('PEXPIRE', KEYS[1], ARGV[8])
redis.call('PEXPIRE', KEYS[2], ARGV[8])
redis.call('PUBLISH', ARGV[9], epoch .. ':' .. id)
return {1, id, epoch}
`)

// legacyPublish publishes m through legacyScript, as the previous version of Publish did.
func legacyPublish(ctx context.Context, rdb redis.UniversalClient, prefix string, maxLen int64, retention time.Duration, m Message) (int64, Cursor, error) {
	k := KeysFor(prefix, m.Session)
	terminal := "0"
	if m.Event.Type.Terminal() {
		terminal = "1"
	}
	minID := strconv.FormatInt(time.Now().Add(-retention).UnixMilli(), 10)
	res, err := legacyScript.Run(ctx, rdb, []string{k.Events, k.Meta},
		m.TurnID, int64(m.Token), string(m.Event.Type), string(m.Event.Data), terminal, maxLen,
		minID, retention.Milliseconds(), k.Notify, NewEpoch(), m.Traceparent).Slice()
	if err != nil {
		return 0, Cursor{}, err
	}
	status := res[0].(int64)
	if status == -1 {
		return status, Cursor{}, nil
	}
	id, err := ParseEntryID(res[1].(string))
	if err != nil {
		return 0, Cursor{}, err
	}
	return status, Cursor{Epoch: res[2].(string), ID: id}, nil
}

// TestPublishManyMatchesLegacy runs the same random messages, in batches, through PublishMany and,
// one by one, through the legacy script, with the same disruptions between batches (a stream or a
// meta hash deleted, an entry appended by something else), and requires the same outcome: each
// message's result, each stream's entries and prev chain, and each meta hash's epoch, fences and
// terminal markers. Entry IDs and epochs differ between the two (time, randomness), so both are
// compared by what they name: an entry by its place in the run, an epoch by its order of appearance
// in its session.
func TestPublishManyMatchesLegacy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, prefix := benchRedis(ctx, t)
	oldPrefix, newPrefix := prefix+":legacy", prefix+":batch" // under prefix, which the cleanup deletes
	const maxLen = 100000
	single := NewPublisher(rdb, newPrefix, maxLen, time.Hour)
	perSession := NewPublisher(rdb, newPrefix, maxLen, time.Hour)
	perSession.bySession = true // as with Redis Cluster: one session per script call

	rng := rand.New(rand.NewPCG(1, 2))
	sessions := []string{"s0", "s1", "s2", "s3", "s4", "s5"}
	turns := []string{"t0", "t1", "t2"}
	tokens := map[string]int64{} // the newest attempt's token by session/turn
	w := &legacyWorld{names: map[string]map[string]int{}, epochs: map[string]map[string]int{}}
	seq := 0
	for round := range 60 {
		// Disruptions, applied to both sides alike.
		for _, s := range sessions {
			switch r := rng.IntN(100); {
			case r < 4:
				for _, p := range []string{oldPrefix, newPrefix} {
					require.NoError(t, rdb.Del(ctx, KeysFor(p, sk(s)).Events).Err())
				}
			case r < 7:
				for _, p := range []string{oldPrefix, newPrefix} {
					require.NoError(t, rdb.Del(ctx, KeysFor(p, sk(s)).Meta).Err())
				}
			case r < 12:
				seq++
				for side, p := range []string{oldPrefix, newPrefix} {
					id, err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: KeysFor(p, sk(s)).Events, Values: []any{"type", "turn.delta", "turn", "x", "data", "foreign"}}).Result()
					require.NoError(t, err)
					w.name(side, s, id, seq)
				}
			}
		}
		n := 1 + rng.IntN(90) // past maxScriptEvents now and then
		ms := make([]Message, n)
		for i := range ms {
			s, turn := sessions[rng.IntN(len(sessions))], turns[rng.IntN(len(turns))]
			key := s + "/" + turn
			token := tokens[key]
			switch r := rng.IntN(100); {
			case token == 0 || r < 8:
				token++ // a new attempt takes over
				tokens[key] = token
			case r < 14:
				token = max(1, token-1-int64(rng.IntN(2))) // a zombie, or the same attempt
			}
			typ := []wire.EventType{wire.EventStarted, wire.EventDelta, wire.EventDelta, wire.EventDelta, wire.EventCompleted, wire.EventFailed}[rng.IntN(6)]
			ms[i] = Message{
				Session: sk(s), TurnID: turn, Token: wire.FenceToken(token),
				Event:       wire.Event{Type: typ, Data: []byte(fmt.Sprintf(`{"round":%d,"i":%d}`, round, i))},
				Traceparent: []string{"", "00-tp"}[rng.IntN(2)],
			}
		}
		p := single
		if round%3 == 2 {
			p = perSession
		}
		got := p.PublishMany(ctx, ms)
		for i, m := range ms {
			status, c, err := legacyPublish(ctx, rdb, oldPrefix, maxLen, time.Hour, m)
			require.NoError(t, err)
			where := fmt.Sprintf("round %d message %d (%s/%s token %d %s)", round, i, m.Session, m.TurnID, m.Token, m.Event.Type)
			if status == -1 {
				require.ErrorIs(t, got[i].Err, ErrStaleToken, where)
				continue
			}
			require.NoError(t, got[i].Err, where)
			require.Equal(t, status == 1, got[i].Published.Appended, where)
			if status == 1 {
				seq++
				w.name(0, m.Session.SessionID(), c.ID.String(), seq)
				w.name(1, m.Session.SessionID(), got[i].Published.Cursor.ID.String(), seq)
			}
			require.Equal(t, w.cursor(0, m.Session.SessionID(), c), w.cursor(1, m.Session.SessionID(), got[i].Published.Cursor), where)
		}
		for _, s := range sessions {
			require.Equal(t, w.stream(ctx, t, rdb, 0, KeysFor(oldPrefix, sk(s)), s), w.stream(ctx, t, rdb, 1, KeysFor(newPrefix, sk(s)), s), "round %d session %s stream", round, s)
			require.Equal(t, w.meta(ctx, t, rdb, 0, KeysFor(oldPrefix, sk(s)), s), w.meta(ctx, t, rdb, 1, KeysFor(newPrefix, sk(s)), s), "round %d session %s meta", round, s)
		}
	}
}

// legacyWorld names what two runs produce by what it is, so that they compare: an entry by its
// place in the run (appends and foreign entries numbered in the order they happen), an epoch by its
// order of appearance in its session. Side 0 is the legacy run, side 1 the batched one.
type legacyWorld struct {
	names  map[string]map[string]int // side/session -> entry id -> place
	epochs map[string]map[string]int // side/session -> epoch -> order of appearance
}

func (w *legacyWorld) name(side int, session, id string, seq int) {
	k := strconv.Itoa(side) + "/" + session
	if w.names[k] == nil {
		w.names[k] = map[string]int{}
	}
	w.names[k][id] = seq
}

func (w *legacyWorld) entry(side int, session, id string) string {
	if id == "" {
		return "none"
	}
	if n, ok := w.names[strconv.Itoa(side)+"/"+session][id]; ok {
		return "#" + strconv.Itoa(n)
	}
	return "unnamed " + id
}

func (w *legacyWorld) epoch(side int, session, e string) string {
	k := strconv.Itoa(side) + "/" + session
	if w.epochs[k] == nil {
		w.epochs[k] = map[string]int{}
	}
	n, ok := w.epochs[k][e]
	if !ok {
		n = len(w.epochs[k]) + 1
		w.epochs[k][e] = n
	}
	return "e" + strconv.Itoa(n)
}

func (w *legacyWorld) cursor(side int, session string, c Cursor) string {
	return w.epoch(side, session, c.Epoch) + ":" + w.entry(side, session, c.ID.String())
}

// stream describes a session's stream: whether it has a TTL, and each entry with its prev.
func (w *legacyWorld) stream(ctx context.Context, t *testing.T, rdb redis.UniversalClient, side int, k Keys, session string) []string {
	t.Helper()
	out := []string{ttlState(ctx, t, rdb, k.Events)}
	entries, err := rdb.XRange(ctx, k.Events, "-", "+").Result()
	require.NoError(t, err)
	for _, e := range entries {
		str := func(f string) string { v, _ := e.Values[f].(string); return v }
		out = append(out, fmt.Sprintf("%s prev=%s type=%s turn=%s data=%s tp=%s",
			w.entry(side, session, e.ID), w.entry(side, session, str("prev")), str("type"), str("turn"), str("data"), str("tp")))
	}
	return out
}

// meta describes a session's meta hash as both versions keep it: TTL, epoch, fences and terminal
// markers (last is the batch script's own).
func (w *legacyWorld) meta(ctx context.Context, t *testing.T, rdb redis.UniversalClient, side int, k Keys, session string) []string {
	t.Helper()
	out := []string{ttlState(ctx, t, rdb, k.Meta)}
	fields, err := rdb.HGetAll(ctx, k.Meta).Result()
	require.NoError(t, err)
	var rest []string
	for f, v := range fields {
		switch {
		case f == "last":
		case f == "epoch":
			out = append(out, "epoch="+w.epoch(side, session, v))
		case strings.HasPrefix(f, "t:"):
			c, err := ParseCursor(v)
			require.NoError(t, err)
			rest = append(rest, f+"="+w.cursor(side, session, c))
		default:
			rest = append(rest, f+"="+v)
		}
	}
	slices.Sort(rest)
	return append(out, rest...)
}

func ttlState(ctx context.Context, t *testing.T, rdb redis.UniversalClient, key string) string {
	t.Helper()
	d, err := rdb.PTTL(ctx, key).Result()
	require.NoError(t, err)
	switch {
	case d == -2*time.Nanosecond || d == -2*time.Millisecond || d == -2:
		return "absent"
	case d < 0:
		return "no ttl"
	}
	return "ttl"
}

// TestPublishManyBesideLegacy is a rolling upgrade: workers of both versions publish to the same
// sessions. The legacy script appends without recording "last", and the batch script must still
// name the real newest entry as prev; neither may start a generation the other did not need.
func TestPublishManyBesideLegacy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, prefix := benchRedis(ctx, t)
	p := NewPublisher(rdb, prefix, 10000, time.Hour)
	var epoch string
	for round := range 6 {
		var ms []Message
		for i := range 5 {
			ms = append(ms, Message{Session: sk("s"), TurnID: "t" + strconv.Itoa(round), Token: 1, Event: delta("t", round*10+i)})
		}
		if round%2 == 0 {
			for _, r := range p.PublishMany(ctx, ms) {
				require.NoError(t, r.Err)
				require.True(t, r.Published.Appended)
				if epoch == "" {
					epoch = r.Published.Cursor.Epoch
				}
				require.Equal(t, epoch, r.Published.Cursor.Epoch, "round %d", round)
			}
			continue
		}
		for _, m := range ms {
			status, c, err := legacyPublish(ctx, rdb, prefix, 10000, time.Hour, m)
			require.NoError(t, err)
			require.Equal(t, int64(1), status)
			require.Equal(t, epoch, c.Epoch, "round %d", round)
		}
	}
	entries := entriesOf(ctx, t, rdb, KeysFor(prefix, sk("s")).Events)
	require.Len(t, entries, 30)
	for i, e := range entries {
		require.Contains(t, e.Values["data"], `"index":`+strconv.Itoa(i/5*10+i%5)+`,`)
	}
}

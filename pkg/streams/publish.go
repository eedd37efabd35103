package streams

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/turnstile-run/turnstile/pkg/wire"
)

// ErrStaleToken is returned when a newer attempt of the turn has already published: the caller is a
// zombie and must stop.
var ErrStaleToken = errors.New("stale fencing token")

// publishScript: KEYS = events, meta. ARGV = turn_id, token, type, data, terminal, maxlen,
// minid_ms, ttl_ms, notify channel, fresh epoch, traceparent.
// Returns {status, entry id, epoch}: status 1 appended, 0 terminal already present, -1 stale token.
var publishScript = redis.NewScript(`
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

// Publisher appends fenced events to session streams.
type Publisher struct {
	rdb       redis.UniversalClient
	prefix    string
	maxLen    int64
	retention time.Duration
	now       func() time.Time
}

// NewPublisher returns a publisher. maxLen and retention bound each stream (approximately, as Redis
// trims whole macro-nodes); retention is also the idle TTL of a session's keys.
func NewPublisher(rdb redis.UniversalClient, prefix string, maxLen int64, retention time.Duration) *Publisher {
	return &Publisher{rdb: rdb, prefix: prefix, maxLen: maxLen, retention: retention, now: time.Now}
}

// Published describes an appended (or, for a repeated terminal event, the existing) entry.
type Published struct {
	Cursor Cursor
	// Appended is false when the event was terminal and the turn already had its terminal event.
	Appended bool
}

// Publish appends ev for turnID with its attempt's fencing token. It returns ErrStaleToken if a
// newer attempt of the turn has already published. It is PublishMany of one message.
func (p *Publisher) Publish(ctx context.Context, sessionID, turnID string, token int64, ev wire.Event, traceparent string) (Published, error) {
	r := p.PublishMany(ctx, []Message{{SessionID: sessionID, TurnID: turnID, Token: token, Event: ev, Traceparent: traceparent}})[0]
	return r.Published, r.Err
}

// Message is one event to publish with its turn's fencing token.
type Message struct {
	SessionID, TurnID string
	Token             int64
	Event             wire.Event
	Traceparent       string
}

// PublishResult is one message's outcome in PublishMany.
type PublishResult struct {
	Published Published
	Err       error
}

// PublishMany publishes every message, each through the fenced script exactly as Publish would, in
// one pipelined round trip (one per node on Redis Cluster). Messages run in the order given, so two
// events of one turn keep their order when they share a call. Each message gets its own result: a
// stale token fails only its own message.
func (p *Publisher) PublishMany(ctx context.Context, ms []Message) []PublishResult {
	out := make([]PublishResult, len(ms))
	if len(ms) == 0 {
		return out
	}
	cmds := make([]*redis.Cmd, len(ms))
	_, _ = p.rdb.Pipelined(ctx, func(pipe redis.Pipeliner) error {
		for i, m := range ms {
			keys, args := p.script(m)
			cmds[i] = publishScript.EvalSha(ctx, pipe, keys, args...)
		}
		return nil
	})
	var missing []int
	for i, cmd := range cmds {
		err := cmd.Err()
		if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
			missing = append(missing, i)
			continue
		}
		out[i] = result(ms[i].Event.Type, cmd, err)
	}
	// Redis lost its script cache (a restart or SCRIPT FLUSH): the first use sends the script's body,
	// which loads it again, one message at a time and in order.
	for _, i := range missing {
		m := ms[i]
		keys, args := p.script(m)
		cmd := publishScript.Run(ctx, p.rdb, keys, args...)
		out[i] = result(m.Event.Type, cmd, cmd.Err())
	}
	return out
}

// result reads one script run's reply.
func result(t wire.EventType, cmd *redis.Cmd, err error) PublishResult {
	if err != nil {
		return PublishResult{Err: fmt.Errorf("publish %s to session stream: %w", t, err)}
	}
	res, err := cmd.Slice()
	if err != nil {
		return PublishResult{Err: fmt.Errorf("publish %s to session stream: %w", t, err)}
	}
	pub, err := parseReply(t, res)
	return PublishResult{Published: pub, Err: err}
}

// script returns the publish script's keys and arguments for m.
func (p *Publisher) script(m Message) ([]string, []any) {
	k := KeysFor(p.prefix, m.SessionID)
	terminal := "0"
	if m.Event.Type.Terminal() {
		terminal = "1"
	}
	minID := strconv.FormatInt(p.now().Add(-p.retention).UnixMilli(), 10)
	return []string{k.Events, k.Meta}, []any{
		m.TurnID, m.Token, string(m.Event.Type), string(m.Event.Data), terminal, p.maxLen,
		minID, p.retention.Milliseconds(), k.Notify, NewEpoch(), m.Traceparent,
	}
}

func parseReply(t wire.EventType, res []any) (Published, error) {
	if len(res) != 3 {
		return Published{}, fmt.Errorf("publish %s: unexpected script reply %v", t, res)
	}
	status, _ := res[0].(int64)
	if status == -1 {
		return Published{}, ErrStaleToken
	}
	idStr, _ := res[1].(string)
	epoch, _ := res[2].(string)
	id, err := ParseEntryID(idStr)
	if err != nil {
		return Published{}, fmt.Errorf("publish %s: entry id %q: %w", t, idStr, err)
	}
	return Published{Cursor: Cursor{Epoch: epoch, ID: id}, Appended: status == 1}, nil
}

// NewEpoch mints a random epoch name: 10 characters of [a-z0-9].
func NewEpoch() string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	var b [10]byte
	_, _ = rand.Read(b[:])
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b[:])
}

package streams

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/turnstile-run/turnstile/pkg/wire"
)

// ErrStaleToken is returned when a newer attempt of the turn has already published: the caller is a
// zombie and must stop.
var ErrStaleToken = errors.New("stale fencing token")

// publishScript publishes a batch of events, each exactly as if it were published alone. What each
// event does:
//
//   - Fencing: a token older than the newest one the turn has published with (meta f:<turn>) is
//     stale (status -1) and changes nothing, so a zombie attempt changes nothing once a newer attempt
//     has spoken; otherwise a newer token is recorded.
//   - Generations: with no epoch in the meta hash, or no stream key, a new generation starts under
//     the fresh epoch the caller minted: whatever the old stream held is gone, so its readers must
//     reset. The fencing tokens (f:*) and terminal markers (t:*) are kept: a turn's newest attempt
//     and its one terminal event stay facts across generations, so a zombie cannot slip in after a
//     loss.
//   - At most one terminal event per turn: a repeated one appends nothing and returns the existing
//     one's cursor (status 0) from the marker t:<turn> = "<epoch>:<id>".
//   - The append (status 1): XADD with approximate MAXLEN; the entry's "prev" field names the entry
//     before it, so a reader can tell a cursor just before the oldest retained entry (nothing lost)
//     from one further back (trimmed history), which Redis does not record for trimming.
//   - After the session's last append in the call: trim by age (approximate MINID), set the idle
//     TTL of both keys, and publish that append's cursor "<epoch>:<id>" on the notify channel.
//
// How it costs Redis less than the script per event it replaces (docs/BENCHMARKS.md has the
// figures; each of these was measured and kept because it pays):
//
//   - One call for many events: a script run has a fixed cost of about a quarter of what the old
//     script cost per event, paid once per call instead.
//   - One HMGET reads a turn's fence and terminal marker, with the session's first event also its
//     epoch and "last" (below); one HSET writes what the turn's events in the call changed, when
//     the session's next turn is read or after its last event (flush), where an HSET per event
//     cost a third of a fresh session's Redis time with the notifications below.
//   - meta "last" is the newest entry this script appended, so prev needs no read of the newest
//     entry: XREVRANGE … COUNT 1 returns it with every field, and turning that into Lua cost about
//     as much as the XADD. "last" is checked, not trusted: XREVRANGE + (last COUNT 1 is empty
//     unless something else appended after it (an older version of this script during a rolling
//     upgrade, say), and then returns the real newest entry, which becomes prev. With an empty
//     reply, EXISTS tells a stream that still ends at "last" from a lost one. Without an epoch (the
//     meta hash was lost but the stream may not have been) or without "last" (meta written by an
//     older version), the newest entry is read whole, as before. Only removing the newest entry by
//     hand (XDEL, or trimming the stream empty) makes a difference: the next prev names the removed
//     entry, where the script per event named the newest remaining one (or none).
//   - Trimming and TTLs once per session per call rather than per event: MINID is the same for the
//     whole call, an entry appended now is never older than it, and trimming removes whole nodes
//     from the head, so one trim after the session's last append removes what one after each
//     append would (short of Redis's cap on one approximate trim, 100 nodes' worth, which only that
//     large a backlog of expired entries reaches; the next call goes on). A stream the call
//     created has nothing to trim by age and is not trimmed. The TTLs end where the call's last
//     append would have left them.
//   - One notification per session per call, with the cursor of its last append: a reader takes
//     a notification as the signal to read its session's stream from its own cursor (the gateway
//     does not read the payload), so one tells it what one per append did.
//   - The call's sessions share its one fresh epoch: an epoch only has to differ from the same
//     session's earlier ones, and a session's keys cannot vanish while the call runs, so it starts
//     at most one generation in it.
//
// The call is atomic, so no reader can tell it from its events' scripts run one after another.
// Events come grouped by session (see KEYS and ARGV), each session's in the order given; sessions
// share no keys, so their relative order cannot matter. A Redis error that belongs to one session's
// keys (a key of the wrong type) fails that session's events (status -2, with the message), and
// memory full before the first write fails the events that would have written, as with a script
// per event.
//
// KEYS: per session block b = 1..B, KEYS[2b-1] its stream and KEYS[2b] its meta hash.
// ARGV: [1] maxlen, [2] minid (ms), [3] ttl (ms), [4] fresh epoch; then per block its notify channel
// and its event count n, then n events of 6: turn id, token, type, data, terminal ("1" or "0"),
// traceparent.
// Returns one string of 2 lines per event, blocks in order: status, and the cursor (statuses 1 and
// 0), "" (-1) or the error message (-2, its line breaks made spaces). One string rather than an
// array of 2 values an event: go-redis reads an array's every value into an interface, two
// allocations an event.
var publishScript = redis.NewScript(`
local KEYS, ARGV, rcall, rpcall = KEYS, ARGV, redis.call, redis.pcall
local tonumber, type, unpack = tonumber, type, unpack
local maxlen, minid, ttl, fresh = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local out, o = {}, 0
-- h holds a session's HSET arguments, wrote the places in out of the events that put fields in
-- it: one table each for the whole call, so no session allocates them.
local h, hn, wrote, wn = {}, 0, {}, 0
local function field(f, v)
  h[hn + 1], h[hn + 2] = f, v
  hn = hn + 2
end
-- flush writes the fields gathered since the last flush in one HSET, the later of two values of a
-- field last, as the HSET per event it replaces would have left them. It fails only as the first
-- write of the call (memory full: Redis refuses a script's writes only until one succeeded), so
-- only when every append before it failed too, and then it fails each event that gave it a field,
-- as that event's own HSET would have.
local function flush(meta)
  if hn > 0 then
    local r = rpcall('HSET', meta, unpack(h, 1, hn))
    if type(r) == 'table' then
      for i = 1, wn do
        local w = wrote[i]
        if out[w] ~= -2 then
          out[w], out[w + 1] = -2, (string.gsub(r.err, '\n', ' '))
        end
      end
    end
  end
  hn, wn = 0, 0
end
local a, b, nargs = 5, 0, #ARGV
while a <= nargs do
  b = b + 1
  local events, meta = KEYS[2 * b - 1], KEYS[2 * b]
  local notify, n = ARGV[a], tonumber(ARGV[a + 1])
  a = a + 2
  -- The session as far as this call knows it; it updates these with its own writes, and nothing
  -- else writes while it runs. prev and exists are nil until known.
  local loaded, err = false, nil
  local epoch, last = false, false
  local exists, prev
  -- existed: whether the stream was there before this call's first append to it. cursor: the
  -- cursor of the session's newest append in this call.
  local existed, cursor = true, nil
  -- The turn whose meta fields were read last, and its fence and terminal marker (strings).
  local turn, fkey, tkey, fence, term
  for _ = 1, n do
    local t, token, terminal = ARGV[a], ARGV[a + 1], ARGV[a + 4] == '1'
    local status, res = -1, ''
    local fields = hn
    repeat
      if err then
        status, res = -2, err
        break
      end
      if t ~= turn then
        -- Another turn's fields are read from the hash, so what this call changed goes there
        -- first.
        flush(meta)
        local fk, tk = 'f:' .. t, 't:' .. t
        local r
        if loaded then
          r = rpcall('HMGET', meta, fk, tk)
        else
          r = rpcall('HMGET', meta, fk, tk, 'epoch', 'last')
        end
        if r.err then
          err, status, res = r.err, -2, r.err
          break
        end
        if not loaded then
          loaded = true
          -- last names an entry of the epoch's stream: without an epoch it names nothing.
          epoch = r[3]
          last = epoch and r[4]
        end
        turn, fkey, tkey, fence, term = t, fk, tk, r[1], r[2]
      end
      -- Tokens are compared as numbers, but an equal string (the same attempt again) needs no
      -- conversion.
      local newer = not fence
      if fence and fence ~= token then
        local f, k = tonumber(fence), tonumber(token)
        if f > k then
          break
        end
        newer = f < k
      end
      local repeated = terminal and term
      if prev == nil then
        local r
        if last then
          r = rpcall('XREVRANGE', events, '+', '(' .. last, 'COUNT', 1)
        else
          r = rpcall('XREVRANGE', events, '+', '-', 'COUNT', 1)
        end
        if r.err then
          err, status, res = r.err, -2, r.err
          break
        end
        if r[1] then
          exists, prev = true, r[1][1]
        elseif epoch then
          -- Nothing after last (or no entries at all): is the stream there?
          exists = rcall('EXISTS', events) == 1
          prev = exists and last or ''
        else
          -- No epoch: a new generation starts whether the stream is absent or empty.
          exists, prev = false, ''
        end
        existed = exists
      end
      if not epoch or not exists then
        epoch = fresh
        field('epoch', fresh)
      end
      if newer then
        fence = token
        field(fkey, token)
      end
      if repeated then
        -- A marker from before markers named their epoch is the current epoch's.
        status, res = 0, term
        if not string.find(term, ':', 1, true) then
          res = epoch .. ':' .. term
        end
        break
      end
      local id = rpcall('XADD', events, 'MAXLEN', '~', maxlen, '*',
        'type', ARGV[a + 2], 'turn', t, 'data', ARGV[a + 3], 'tp', ARGV[a + 5], 'prev', prev)
      if type(id) == 'table' then
        status, res = -2, id.err
        break
      end
      exists, prev, cursor = true, id, epoch .. ':' .. id
      if terminal then
        term = cursor
        field(tkey, cursor)
      end
      status, res = 1, cursor
    until true
    if hn > fields then
      wrote[wn + 1] = o + 1
      wn = wn + 1
    end
    if status == -2 then
      res = (string.gsub(res, '\n', ' '))
    end
    out[o + 1], out[o + 2] = status, res
    o = o + 2
    a = a + 6
  end
  if cursor then
    field('last', prev)
  end
  -- Written even where an append failed, as the fence and epoch were before it.
  flush(meta)
  if cursor then
    -- A stream this call created holds no entry older than minid, so only one that existed
    -- can need trimming by age.
    if existed then
      rcall('XTRIM', events, 'MINID', '~', minid)
    end
    rcall('PEXPIRE', events, ttl)
    rcall('PEXPIRE', meta, ttl)
    -- One notification for the session's appends: readers take it as a signal to read the
    -- stream from where they are, not as the cursor of each entry.
    rcall('PUBLISH', notify, cursor)
  end
end
return table.concat(out, '\n')
`)

// Publisher appends fenced events to session streams.
type Publisher struct {
	rdb       redis.UniversalClient
	prefix    string
	maxLen    int64
	retention time.Duration
	now       func() time.Time
	// bySession makes each script call hold one session's events: a cluster client sends a call
	// to the node of its first key, so all of a call's keys must share that key's slot.
	bySession bool
}

// maxScriptEvents bounds the events of one script call. Redis runs nothing else while a script
// runs, so a call must stay short for the readers waiting behind it: 64 events take about a
// millisecond of Redis time on the 2-core benchmark machine, no longer than the pipelined scripts
// Redis used to run from one read of the connection, and the fixed cost of a call is spread
// thinly enough at that size (all of a 500-event batch in one call saved only 4% more).
const maxScriptEvents = 64

// NewPublisher returns a publisher. maxLen and retention bound each stream (approximately, as Redis
// trims whole macro-nodes); retention is also the idle TTL of a session's keys.
func NewPublisher(rdb redis.UniversalClient, prefix string, maxLen int64, retention time.Duration) *Publisher {
	// Only a single-node client (plain or Sentinel-managed, both *redis.Client) may mix sessions in
	// one call; a cluster or ring client routes a call by its first key.
	_, single := rdb.(*redis.Client)
	return &Publisher{rdb: rdb, prefix: prefix, maxLen: maxLen, retention: retention, now: time.Now, bySession: !single}
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

// PublishMany publishes every message, each fenced exactly as Publish would, in one pipelined round
// trip (one per node on Redis Cluster) of script calls of up to maxScriptEvents messages each. A
// session's messages run in the order given, so two events of one turn keep their order when they
// share a call. Each message gets its own result: a stale token fails only its own message.
func (p *Publisher) PublishMany(ctx context.Context, ms []Message) []PublishResult {
	out := make([]PublishResult, len(ms))
	if len(ms) == 0 {
		return out
	}
	minID := strconv.FormatInt(p.now().Add(-p.retention).UnixMilli(), 10)
	calls := p.calls(ms)
	cmds := make([]*redis.Cmd, len(calls))
	_, _ = p.rdb.Pipelined(ctx, func(pipe redis.Pipeliner) error {
		for i := range calls {
			c := &calls[i]
			c.keys, c.args = p.script(ms, c.blocks, minID)
			cmds[i] = publishScript.EvalSha(ctx, pipe, c.keys, c.args...)
		}
		return nil
	})
	var missing []int
	for i, cmd := range cmds {
		if err := cmd.Err(); err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
			missing = append(missing, i)
			continue
		}
		calls[i].results(ms, cmd, out)
	}
	// Redis lost its script cache (a restart or SCRIPT FLUSH): the first use sends the script's body,
	// which loads it again, one call at a time and in order.
	for _, i := range missing {
		c := &calls[i]
		c.results(ms, publishScript.Run(ctx, p.rdb, c.keys, c.args...), out)
	}
	return out
}

// scriptCall is one call of publishScript: its messages, as indexes into PublishMany's, in session
// blocks, and its keys and arguments.
type scriptCall struct {
	blocks [][]int // each block one session's messages, in the order given
	keys   []string
	args   []any
}

// calls groups ms by session, in order of each session's first message and keeping each session's
// order, and cuts the groups into script calls of up to maxScriptEvents messages. A session whose
// messages do not fit in one call continues in the next, which runs after it. On one node a call
// holds as many sessions as fit. Otherwise (Redis Cluster) a call holds one session: all of a
// call's keys must share a cluster slot, and a session's keys do (its ID is their hash tag).
// Grouping by slot instead would put two sessions in one call only when they happen to share one of
// the 16,384 slots, about 8 pairs in a batch of 500 sessions: not worth the hashing.
//
// The groups are laid out in one slice, each session's messages a run of it (a counting sort by
// the session's ordinal): a slice per session, grown by append, was three allocations for a quick
// turn's three events, a sixth of the publisher's.
func (p *Publisher) calls(ms []Message) []scriptCall {
	ordinal := make(map[string]int, len(ms)) // session -> its place in order of first message
	of := make([]int, len(ms))               // message -> its session's ordinal
	var size []int                           // ordinal -> the session's messages
	for i, m := range ms {
		o, ok := ordinal[m.SessionID]
		if !ok {
			o = len(size)
			ordinal[m.SessionID] = o
			size = append(size, 0)
		}
		of[i] = o
		size[o]++
	}
	// next[o] is where the session's next message goes in grouped, its run starting at the total
	// size of the sessions before it.
	next := make([]int, len(size))
	for o, total := 1, 0; o < len(size); o++ {
		total += size[o-1]
		next[o] = total
	}
	grouped := make([]int, len(ms))
	for i, o := range of {
		grouped[next[o]] = i
		next[o]++
	}
	var out []scriptCall
	var cur scriptCall
	n := 0 // messages in cur
	flush := func() {
		if n > 0 {
			out = append(out, cur)
		}
		cur, n = scriptCall{}, 0
	}
	for o, start := 0, 0; o < len(size); o++ {
		rest := grouped[start : start+size[o] : start+size[o]]
		start += size[o]
		for len(rest) > 0 {
			k := min(len(rest), maxScriptEvents-n)
			cur.blocks = append(cur.blocks, rest[:k:k])
			rest, n = rest[k:], n+k
			if n == maxScriptEvents {
				flush()
			}
		}
		if p.bySession {
			flush()
		}
	}
	flush()
	return out
}

// script lays out the keys and arguments of publishScript for the messages ms[i] of blocks.
//
// The arguments point into arrays of their values (see scriptValues) instead of holding the values:
// go-redis writes a *string or an *int64 as it writes the value, and a pointer goes into an
// interface as it is, where a string, an int64 or a slice is first copied to the heap. Held by
// value, the arguments cost about five allocations an event, 15% of a busy worker's allocations.
func (p *Publisher) script(ms []Message, blocks [][]int, minID string) ([]string, []any) {
	n := 0
	for _, blk := range blocks {
		n += len(blk)
	}
	keys := make([]string, 0, 2*len(blocks))
	v := newScriptValues(2+len(blocks)+3*n, 2+n, n)
	args := make([]any, 0, 4+2*len(blocks)+6*n)
	args = append(args, v.int(p.maxLen), v.str(minID), v.int(p.retention.Milliseconds()), v.str(NewEpoch()))
	for _, blk := range blocks {
		k := KeysFor(p.prefix, ms[blk[0]].SessionID)
		keys = append(keys, k.Events, k.Meta)
		args = append(args, v.str(k.Notify), len(blk))
		for _, i := range blk {
			m := ms[i]
			// A constant goes into an interface without an allocation; a string variable does not.
			var terminal any = "0"
			if m.Event.Type.Terminal() {
				terminal = "1"
			}
			args = append(args, v.str(m.TurnID), v.int(m.Token), v.str(string(m.Event.Type)), v.data(m.Event.Data),
				terminal, v.str(m.Traceparent))
		}
	}
	return keys, args
}

// scriptValues holds the values of one call's arguments, for the arguments to point to. Each array
// is sized up front and never grows, so a pointer into it stays valid.
type scriptValues struct {
	strs []string
	ints []int64
	raw  []rawArg
}

func newScriptValues(strs, ints, raw int) *scriptValues {
	return &scriptValues{strs: make([]string, 0, strs), ints: make([]int64, 0, ints), raw: make([]rawArg, 0, raw)}
}

func (v *scriptValues) str(s string) *string {
	v.strs = append(v.strs, s)
	return &v.strs[len(v.strs)-1]
}

func (v *scriptValues) int(i int64) *int64 {
	v.ints = append(v.ints, i)
	return &v.ints[len(v.ints)-1]
}

// data is the event's own bytes, not a string copy of them.
func (v *scriptValues) data(b []byte) *rawArg {
	v.raw = append(v.raw, rawArg{b})
	return &v.raw[len(v.raw)-1]
}

// rawArg is an argument written as its bytes: go-redis writes an encoding.BinaryMarshaler's bytes,
// and has no case for a pointer to a byte slice.
type rawArg struct{ b []byte }

// MarshalBinary returns the bytes themselves.
func (r *rawArg) MarshalBinary() ([]byte, error) { return r.b, nil }

// results reads the call's reply into out. An error of the whole call is each of its messages'.
func (c *scriptCall) results(ms []Message, cmd *redis.Cmd, out []PublishResult) {
	reply, err := cmd.Text()
	lines := replyLines{s: reply}
	for _, blk := range c.blocks {
		for _, i := range blk {
			t := ms[i].Event.Type
			if err != nil {
				out[i] = PublishResult{Err: fmt.Errorf("publish %s to session stream: %w", t, err)}
				continue
			}
			status, ok1 := lines.next()
			v, ok2 := lines.next()
			if !ok1 || !ok2 {
				out[i] = PublishResult{Err: fmt.Errorf("publish %s: script reply of %d bytes is short", t, len(reply))}
				continue
			}
			pub, perr := parseReply(t, status, v)
			out[i] = PublishResult{Published: pub, Err: perr}
		}
	}
}

// replyLines reads the script's reply a line at a time, without copying: a line is a substring.
type replyLines struct {
	s    string
	pos  int
	done bool
}

// next returns the next line, false once every line was read.
func (r *replyLines) next() (string, bool) {
	if r.done {
		return "", false
	}
	rest := r.s[r.pos:]
	i := strings.IndexByte(rest, '\n')
	if i < 0 {
		r.done = true
		return rest, true
	}
	r.pos += i + 1
	return rest[:i], true
}

// parseReply reads one event's status and the line that goes with it (see publishScript).
func parseReply(t wire.EventType, status, v string) (Published, error) {
	switch status {
	case "-1":
		return Published{}, ErrStaleToken
	case "-2":
		return Published{}, fmt.Errorf("publish %s to session stream: %w", t, errors.New(v))
	case "0", "1":
		c, err := ParseCursor(v)
		if err != nil {
			return Published{}, fmt.Errorf("publish %s: cursor %q: %w", t, v, err)
		}
		return Published{Cursor: c, Appended: status == "1"}, nil
	}
	return Published{}, fmt.Errorf("publish %s: unexpected script status %q", t, status)
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

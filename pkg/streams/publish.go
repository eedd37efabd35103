package streams

import (
	"context"
	"crypto/rand"
	_ "embed"
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

// publishSource is the publish script: fenced appends of a batch of events, grouped by session.
// publish.lua documents its keys, arguments, reply and why each step is exact.
//
//go:embed publish.lua
var publishSource string

// publishScript runs publishSource. Its reply is one string rather than an array of two values an
// event, because go-redis reads every value of an array into an interface.
var publishScript = redis.NewScript(publishSource)

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
// runs, so a call must stay short for the readers waiting behind it, and the fixed cost of a call
// is already spread thinly at this size (docs/BENCHMARKS.md has the measurements).
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
// the session's ordinal), so grouping costs a fixed number of allocations whatever the sessions.
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
// interface as it is, where a string, an int64 or a slice is first copied to the heap; so laying
// out a call allocates per call, not per event.
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

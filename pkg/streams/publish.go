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

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/turnstile-run/turnstile/pkg/wire"
)

// ErrStaleToken is returned when a newer attempt of the turn has already published: the caller is a
// zombie and must stop.
var ErrStaleToken = errors.New("stale fencing token")

// ErrFenceUnknown is returned when a session's fences are not established in Redis (it lost them,
// or never had them) and the publisher could not establish them from Postgres: nothing was
// written, and the publish may be tried again.
var ErrFenceUnknown = errors.New("session fence not established")

// Fencer reads what Postgres knows of fencing tokens, for a publisher to establish a session's
// fences in Redis again after Redis lost them (doc.go, "Fences through a Redis loss"). It must be
// safe for concurrent use.
type Fencer interface {
	// Fences returns floor, the newest fencing token handed out (every token handed out before
	// the call is at most floor), and each turn's current token (turns.fencing_token; 0 for a
	// turn with no row), in the order of turns.
	Fences(ctx context.Context, turns []uuid.UUID) (floor wire.FenceToken, tokens []wire.FenceToken, err error)
}

// fenceRounds bounds how often one PublishMany establishes fences: each round answers a loss of
// Redis data during the round before, so more than one is already rare.
const fenceRounds = 3

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
	// fencer establishes fences from Postgres; without one the publisher fences in Redis alone.
	fencer Fencer
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

// WithFencer makes the publisher anchor its fences in f (Postgres): a session whose fences Redis
// lost is written to again only once they are established from f. Without a fencer, fences live
// in Redis alone, and a Redis loss loses them (use it only where nothing else writes with
// Postgres's tokens). It returns p.
func (p *Publisher) WithFencer(f Fencer) *Publisher {
	p.fencer = f
	return p
}

// Published describes an appended (or, for a repeated terminal event, the existing) entry.
type Published struct {
	Cursor Cursor
	// Appended is false when the event was terminal and the turn already had its terminal event.
	Appended bool
}

// Publish appends ev for turnID with its attempt's fencing token. It returns ErrStaleToken if a
// newer attempt of the turn has already published. It is PublishMany of one message.
func (p *Publisher) Publish(ctx context.Context, session wire.SessionKey, turnID string, token wire.FenceToken, ev wire.Event, traceparent string) (Published, error) {
	r := p.PublishMany(ctx, []Message{{Session: session, TurnID: turnID, Token: token, Event: ev, Traceparent: traceparent}})[0]
	return r.Published, r.Err
}

// Message is one event to publish with its turn's fencing token.
type Message struct {
	Session wire.SessionKey
	TurnID  string
	// TurnRow is the turn's ID in Postgres (turns.turn_id), which TurnID may not be (a client's
	// own ID, a region's prefix): a publisher with a Fencer reads the turn's token by it.
	TurnRow     uuid.UUID
	Token       wire.FenceToken
	Event       wire.Event
	Traceparent string
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
//
// A message of a session whose fences Redis does not hold (see doc.go) is sent again once they
// are established from the Fencer, in a second round trip of its own with one Postgres read
// before it; the other messages are not held back for it.
func (p *Publisher) PublishMany(ctx context.Context, ms []Message) []PublishResult {
	out := make([]PublishResult, len(ms))
	if len(ms) == 0 {
		return out
	}
	p.run(ctx, ms, nil, out)
	for range fenceRounds {
		if !p.establish(ctx, ms, out) {
			return out
		}
	}
	for i, m := range ms {
		if _, ok := errors.AsType[*unfenced](out[i].Err); ok {
			out[i].Err = fmt.Errorf("publish %s: %w: Redis lost it again while it was established", m.Event.Type, ErrFenceUnknown)
		}
	}
	return out
}

// fenceArgs is what a round that establishes fences tells the script: per session the fence
// generation to open and its floor ("<fid>:<floor>"), per message the generation its turn's
// token was checked in.
type fenceArgs struct {
	open     map[wire.SessionKey]string
	verified []string
}

// establish sends again the messages of out that the script refused for want of a fence
// (*unfenced), with the fences Postgres gives; it reports whether it sent any. A message whose
// token Postgres has seen superseded fails with ErrStaleToken without another send.
func (p *Publisher) establish(ctx context.Context, ms []Message, out []PublishResult) bool {
	var idx []int
	for i := range out {
		if _, ok := errors.AsType[*unfenced](out[i].Err); ok {
			idx = append(idx, i)
		}
	}
	if len(idx) == 0 {
		return false
	}
	if p.fencer == nil {
		// Only a publisher with a fencer opens a generation with a floor, so another one opened
		// this session's: its fences are Postgres's, which this publisher cannot read.
		for _, i := range idx {
			out[i].Err = fmt.Errorf("publish %s: %w: no Postgres to establish it from", ms[i].Event.Type, ErrFenceUnknown)
		}
		return false
	}
	rows := make([]uuid.UUID, len(idx))
	for j, i := range idx {
		rows[j] = ms[i].TurnRow
	}
	// Read after every generation named in out began: so the floor bounds every token handed out
	// before it, and each token is checked after it.
	floor, tokens, err := p.fencer.Fences(ctx, rows)
	if err != nil {
		for _, i := range idx {
			out[i].Err = fmt.Errorf("publish %s: %w: read fences from Postgres: %w", ms[i].Event.Type, ErrFenceUnknown, err)
		}
		return false
	}
	sub := make([]Message, 0, len(idx))
	back := make([]int, 0, len(idx))
	f := &fenceArgs{open: map[wire.SessionKey]string{}}
	for j, i := range idx {
		u, _ := errors.AsType[*unfenced](out[i].Err)
		switch {
		case ms[i].TurnRow == uuid.Nil:
			out[i].Err = fmt.Errorf("publish %s: %w: the message names no turn row", ms[i].Event.Type, ErrFenceUnknown)
			continue
		case tokens[j] > ms[i].Token:
			out[i].Err = ErrStaleToken
			continue
		}
		if u.open {
			f.open[ms[i].Session] = u.fid + ":" + strconv.FormatInt(int64(floor), 10)
		}
		sub = append(sub, ms[i])
		back = append(back, i)
		f.verified = append(f.verified, u.fid)
	}
	if len(sub) == 0 {
		return false
	}
	res := make([]PublishResult, len(sub))
	p.run(ctx, sub, f, res)
	for j, i := range back {
		out[i] = res[j]
	}
	return true
}

// unfenced is the script's refusal of a message for want of a fence: the session's fence
// generation fid is not open (open) or the message's turn needs its token checked in it.
type unfenced struct {
	fid  string
	open bool
}

func (u *unfenced) Error() string {
	return "session fence generation " + u.fid + " not established"
}

// run sends ms in one pipelined round trip of script calls and reads their results into out,
// with the fences of f when it is not nil.
func (p *Publisher) run(ctx context.Context, ms []Message, f *fenceArgs, out []PublishResult) {
	minID := strconv.FormatInt(p.now().Add(-p.retention).UnixMilli(), 10)
	calls := p.calls(ms)
	cmds := make([]*redis.Cmd, len(calls))
	_, _ = p.rdb.Pipelined(ctx, func(pipe redis.Pipeliner) error {
		for i := range calls {
			c := &calls[i]
			c.keys, c.args = p.script(ms, c.blocks, minID, f)
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
	ordinal := make(map[wire.SessionKey]int, len(ms)) // session -> its place in order of first message
	of := make([]int, len(ms))                        // message -> its session's ordinal
	var size []int                                    // ordinal -> the session's messages
	for i, m := range ms {
		o, ok := ordinal[m.Session]
		if !ok {
			o = len(size)
			ordinal[m.Session] = o
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

// script lays out the keys and arguments of publishScript for the messages ms[i] of blocks, with
// the fences of f (nil: none to establish).
//
// The arguments point into arrays of their values (see scriptValues) instead of holding the values:
// go-redis writes a *string or an *int64 as it writes the value, and a pointer goes into an
// interface as it is, where a string, an int64 or a slice is first copied to the heap; so laying
// out a call allocates per call, not per event.
func (p *Publisher) script(ms []Message, blocks [][]int, minID string, f *fenceArgs) ([]string, []any) {
	n := 0
	for _, blk := range blocks {
		n += len(blk)
	}
	strs := 2 + len(blocks) + 3*n
	if f != nil {
		strs += len(blocks) + n
	}
	// Without a fencer, every block opens as unfenced.
	var open any = ""
	if p.fencer == nil {
		open = "*"
	}
	keys := make([]string, 0, 2*len(blocks))
	v := newScriptValues(strs, 2+n, n)
	args := make([]any, 0, 4+3*len(blocks)+7*n)
	args = append(args, v.int(p.maxLen), v.str(minID), v.int(p.retention.Milliseconds()), v.str(NewEpoch()))
	for _, blk := range blocks {
		k := KeysFor(p.prefix, ms[blk[0]].Session)
		keys = append(keys, k.Events, k.Meta)
		blockOpen := open
		if o, ok := f.opens(ms[blk[0]].Session); ok {
			blockOpen = v.str(o)
		}
		args = append(args, v.str(k.Notify), len(blk), blockOpen)
		for _, i := range blk {
			m := ms[i]
			// A constant goes into an interface without an allocation; a string variable does not.
			var terminal any = "0"
			if m.Event.Type.Terminal() {
				terminal = "1"
			}
			var verified any = ""
			if f != nil {
				verified = v.str(f.verified[i])
			}
			args = append(args, v.str(m.TurnID), v.int(int64(m.Token)), v.str(string(m.Event.Type)), v.data(m.Event.Data),
				terminal, v.str(m.Traceparent), verified)
		}
	}
	return keys, args
}

// opens returns the opening of session's fence generation, if f has one.
func (f *fenceArgs) opens(session wire.SessionKey) (string, bool) {
	if f == nil {
		return "", false
	}
	o, ok := f.open[session]
	return o, ok
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
	case "-3", "-4":
		return Published{}, &unfenced{fid: v, open: status == "-3"}
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

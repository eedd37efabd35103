package streams

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/turnstile-run/turnstile/pkg/wire"
)

// Entry is one stored event.
type Entry struct {
	ID          EntryID
	Type        wire.EventType
	TurnID      string
	Data        string
	Traceparent string
}

// Reader reads session streams.
type Reader struct {
	rdb    redis.UniversalClient
	prefix string
	// single is true for a single-node client (plain or Sentinel-managed, both *redis.Client),
	// whose transactions may hold keys of any slot; a cluster client refuses a transaction across
	// slots, so ReadMany sends it one per session.
	single bool
}

// NewReader returns a reader over keys under prefix.
func NewReader(rdb redis.UniversalClient, prefix string) *Reader {
	_, single := rdb.(*redis.Client)
	return &Reader{rdb: rdb, prefix: prefix, single: single}
}

// Keys returns the keys of a session.
func (r *Reader) Keys(session wire.SessionKey) Keys { return KeysFor(r.prefix, session) }

// State is what a resume needs to know about a stream.
type State struct {
	// Exists is false when the session has no stream (never published, or expired).
	Exists bool
	Epoch  string
	// LastID is the newest entry ever added; MaxDeletedID the newest entry removed by XDEL (0-0 if
	// none; Redis does not record entries removed by trimming).
	LastID       EntryID
	MaxDeletedID EntryID
	// FirstID is the oldest retained entry and FirstPrev the entry that preceded it when it was
	// added (HasFirst false for an empty stream; FirstPrev zero when unknown or none).
	HasFirst  bool
	FirstID   EntryID
	FirstPrev EntryID
}

// Lost reports whether any entry after the cursor position after is gone from the stream, so a
// resume from it would silently skip events. Trimming removes entries from the head, so something
// after the cursor was lost exactly when the cursor lies before the oldest retained entry and is not
// that entry's predecessor.
func (s State) Lost(after EntryID) bool {
	if after.Less(s.MaxDeletedID) {
		return true
	}
	if !s.HasFirst {
		return after.Less(s.LastID)
	}
	return after.Less(s.FirstID) && after != s.FirstPrev
}

// State reads the epoch and bounds of a session stream in one round trip.
func (r *Reader) State(ctx context.Context, session wire.SessionKey) (State, error) {
	k := r.Keys(session)
	pipe := r.rdb.Pipeline()
	epochCmd := pipe.HGet(ctx, k.Meta, "epoch")
	infoCmd := pipe.Do(ctx, "XINFO", "STREAM", k.Events)
	_, _ = pipe.Exec(ctx)
	epoch, err := epochCmd.Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return State{}, fmt.Errorf("read stream epoch: %w", err)
	}
	info, err := infoCmd.Result()
	if err != nil {
		if isNoSuchKey(err) {
			return State{Epoch: epoch}, nil
		}
		return State{}, fmt.Errorf("read stream info: %w", err)
	}
	st := State{Exists: epoch != "", Epoch: epoch}
	fields, err := infoFields(info)
	if err != nil {
		return State{}, err
	}
	if v, ok := fields["last-generated-id"].(string); ok {
		st.LastID, _ = ParseEntryID(v)
	}
	if v, ok := fields["max-deleted-entry-id"].(string); ok {
		st.MaxDeletedID, _ = ParseEntryID(v)
	}
	if first, ok := fields["first-entry"].([]any); ok && len(first) == 2 {
		if v, ok := first[0].(string); ok {
			if st.FirstID, err = ParseEntryID(v); err == nil {
				st.HasFirst = true
			}
		}
		if kv, ok := first[1].([]any); ok {
			for i := 0; i+1 < len(kv); i += 2 {
				if k, _ := kv[i].(string); k == "prev" {
					if v, _ := kv[i+1].(string); v != "" {
						st.FirstPrev, _ = ParseEntryID(v)
					}
				}
			}
		}
	}
	return st, nil
}

func isNoSuchKey(err error) bool {
	return err != nil && (err.Error() == "ERR no such key")
}

func infoFields(v any) (map[string]any, error) {
	switch t := v.(type) {
	case map[any]any:
		out := make(map[string]any, len(t))
		for k, val := range t {
			if ks, ok := k.(string); ok {
				out[ks] = val
			}
		}
		return out, nil
	case []any:
		out := make(map[string]any, len(t)/2)
		for i := 0; i+1 < len(t); i += 2 {
			if ks, ok := t[i].(string); ok {
				out[ks] = t[i+1]
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("read stream info: unexpected reply %T", v)
}

// After returns up to count entries strictly after id, oldest first.
func (r *Reader) After(ctx context.Context, session wire.SessionKey, id EntryID, count int64) ([]Entry, error) {
	msgs, err := r.rdb.XRangeN(ctx, r.Keys(session).Events, "("+id.String(), "+", count).Result()
	if err != nil {
		return nil, fmt.Errorf("read session stream: %w", err)
	}
	out := make([]Entry, 0, len(msgs))
	for _, m := range msgs {
		e, err := entryFrom(m)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

// Read returns the stream's current epoch and up to count entries strictly after id, in one
// MULTI/EXEC (both keys share a hash slot), so the entries are known to belong to that epoch. A
// caller holding another epoch must not label these entries with its own: the stream was lost and
// restarted, and its IDs begin again.
func (r *Reader) Read(ctx context.Context, session wire.SessionKey, id EntryID, count int64) (string, []Entry, error) {
	res := r.ReadMany(ctx, []ReadRequest{{Session: session, After: id, Count: count}})
	return res[0].Epoch, res[0].Entries, res[0].Err
}

// ReadRequest asks for up to Count entries of a session's stream strictly after After.
type ReadRequest struct {
	Session wire.SessionKey
	After   EntryID
	Count   int64
}

// ReadResult answers one ReadRequest as Read would: the stream's epoch and the entries after the
// request's ID, or the error of that session's read.
type ReadResult struct {
	Epoch   string
	Entries []Entry
	Err     error
}

// ReadMany reads several sessions' streams: each session's epoch and entries are read together as
// Read reads them, and the result i answers reqs[i]. On a single node it is one round trip, one
// MULTI/EXEC for every session, so a gateway that wakes for thousands of sessions a second reads
// them a batch at a time instead of one round trip each. A cluster client gets one transaction per
// session (its keys share a slot), sent at once.
func (r *Reader) ReadMany(ctx context.Context, reqs []ReadRequest) []ReadResult {
	out := make([]ReadResult, len(reqs))
	if r.single || len(reqs) == 1 {
		r.readTx(ctx, reqs, out)
		return out
	}
	var wg sync.WaitGroup
	for i := range reqs {
		wg.Go(func() { r.readTx(ctx, reqs[i:i+1], out[i:i+1]) })
	}
	wg.Wait()
	return out
}

// readTx reads reqs in one MULTI/EXEC into out.
func (r *Reader) readTx(ctx context.Context, reqs []ReadRequest, out []ReadResult) {
	type cmds struct {
		epoch *redis.StringCmd
		rng   *redis.XMessageSliceCmd
	}
	sent := make([]cmds, len(reqs))
	// The pipeline's own error is the first of its commands' (a failed connection sets every
	// command's), so each session's result is read from its own commands.
	_, _ = r.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		for i, q := range reqs {
			k := r.Keys(q.Session)
			sent[i] = cmds{p.HGet(ctx, k.Meta, "epoch"), p.XRangeN(ctx, k.Events, "("+q.After.String(), "+", q.Count)}
		}
		return nil
	})
	for i, c := range sent {
		out[i] = readResult(c.epoch, c.rng)
	}
}

// readResult is one session's answer of ReadMany.
func readResult(epochCmd *redis.StringCmd, rangeCmd *redis.XMessageSliceCmd) ReadResult {
	epoch, err := epochCmd.Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return ReadResult{Err: fmt.Errorf("read stream epoch: %w", err)}
	}
	msgs, err := rangeCmd.Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return ReadResult{Err: fmt.Errorf("read session stream: %w", err)}
	}
	out := make([]Entry, 0, len(msgs))
	for _, m := range msgs {
		e, err := entryFrom(m)
		if err != nil {
			return ReadResult{Err: err}
		}
		out = append(out, e)
	}
	return ReadResult{Epoch: epoch, Entries: out}
}

// Terminal returns the cursor of a turn's terminal event, if it has one.
func (r *Reader) Terminal(ctx context.Context, session wire.SessionKey, turnID string) (Cursor, bool, error) {
	v, err := r.rdb.HGet(ctx, r.Keys(session).Meta, "t:"+turnID).Result()
	if errors.Is(err, redis.Nil) {
		return Cursor{}, false, nil
	}
	if err != nil {
		return Cursor{}, false, fmt.Errorf("read terminal marker: %w", err)
	}
	c, err := ParseCursor(v)
	if err != nil {
		return Cursor{}, false, nil //nolint:nilerr // a marker without an epoch: treat as unknown
	}
	return c, true, nil
}

func entryFrom(m redis.XMessage) (Entry, error) {
	id, err := ParseEntryID(m.ID)
	if err != nil {
		return Entry{}, fmt.Errorf("stream entry id %q: %w", m.ID, err)
	}
	str := func(k string) string { s, _ := m.Values[k].(string); return s }
	return Entry{ID: id, Type: wire.EventType(str("type")), TurnID: str("turn"), Data: str("data"), Traceparent: str("tp")}, nil
}

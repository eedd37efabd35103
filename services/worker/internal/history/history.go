package history

import (
	"container/list"
	"context"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/turnstile-run/turnstile/pkg/turnstore"
	"github.com/turnstile-run/turnstile/pkg/wire"
	"github.com/turnstile-run/turnstile/services/worker/internal/agent"
)

// Cache reads session histories through a bounded in-process cache. Safe for concurrent use.
type Cache struct {
	db  *turnstore.Store
	max int

	mu      sync.Mutex
	entries map[wire.SessionKey]*list.Element
	lru     *list.List

	hits, misses, rows atomic.Int64
}

type entry struct {
	session wire.SessionKey
	msgs    []agent.Message
	lastSeq int64
}

// New returns a cache of at most maxSessions histories; 0 disables caching.
func New(pool *pgxpool.Pool, maxSessions int) *Cache {
	return &Cache{db: turnstore.New(pool), max: maxSessions, entries: map[wire.SessionKey]*list.Element{}, lru: list.New()}
}

// Stats are a cache's counters: Hits found the cached history current, Misses had to read
// messages, Rows counts the messages read from Postgres (two a turn).
type Stats struct{ Hits, Misses, Rows int64 }

// Stats returns the counters.
func (c *Cache) Stats() Stats {
	return Stats{Hits: c.hits.Load(), Misses: c.misses.Load(), Rows: c.rows.Load()}
}

// Get returns the session's history, oldest first. The returned slice must not be modified.
func (c *Cache) Get(ctx context.Context, session wire.SessionKey) ([]agent.Message, error) {
	var cached *entry
	c.mu.Lock()
	if el, ok := c.entries[session]; ok {
		cached = el.Value.(*entry)
		c.lru.MoveToFront(el)
	}
	c.mu.Unlock()
	var after int64
	if cached != nil {
		after = cached.lastSeq
	}
	// One round trip: the session's last_seq, and only the entries newer than the cached ones (none
	// on a warm hit). A cached history ends with an answer, so an entry is either wholly cached or
	// wholly newer.
	lastSeq, firstSeq, entries, err := c.db.ReadHistoryAfter(ctx, session, after)
	if err != nil {
		return nil, err
	}
	var fresh []agent.Message
	if len(entries) > 0 {
		fresh = make([]agent.Message, 0, 2*len(entries))
	}
	for _, e := range entries {
		msgs := agent.TurnMessages(e.Seq, e.TurnID, e.Question, e.Answer)
		fresh = append(fresh, msgs[:]...)
	}
	c.rows.Add(int64(len(fresh)))
	if cached != nil && lastSeq == cached.lastSeq {
		c.hits.Add(1)
		return cached.msgs, nil
	}
	c.misses.Add(1)
	var msgs []agent.Message
	switch {
	case cached != nil && len(cached.msgs) > 0 && cached.msgs[0].Seq+1 != firstSeq:
		// The history's first entry changed, which appends never do: it was rewritten
		// (turnstore.RewriteHistory, a LangGraph thread's state edited). Read it whole.
		return c.reload(ctx, session)
	case cached == nil:
		msgs = fresh
	case lastSeq > cached.lastSeq:
		msgs = append(append(make([]agent.Message, 0, len(cached.msgs)+len(fresh)), cached.msgs...), fresh...)
	default:
		// last_seq went backwards (the session was deleted and recreated): read it whole.
		return c.reload(ctx, session)
	}
	c.store(session, msgs, lastSeq)
	return msgs, nil
}

// GetAt is Get for a caller that already knows the session's last_seq (the claim reads it in the
// same statement, see lease.Claim.SessionSeq): a cached history at that sequence number, or a session
// without history (lastSeq 0), is answered without a round trip. Otherwise it reads as Get does.
func (c *Cache) GetAt(ctx context.Context, session wire.SessionKey, lastSeq int64) ([]agent.Message, error) {
	c.mu.Lock()
	el, ok := c.entries[session]
	if ok && el.Value.(*entry).lastSeq == lastSeq {
		c.lru.MoveToFront(el)
		msgs := el.Value.(*entry).msgs
		c.mu.Unlock()
		c.hits.Add(1)
		return msgs, nil
	}
	c.mu.Unlock()
	if lastSeq == 0 {
		// No history: nothing to read and nothing worth caching. A cached entry for the session
		// (deleted and recreated) is stale; Get replaces it when the session has history again.
		c.hits.Add(1)
		return nil, nil
	}
	return c.Get(ctx, session)
}

// Appended records that a completion this worker made appended msgs to the session history, the
// last of them at sequence number lastSeq: a cached history that ended just before them is extended,
// and a session whose history they start is cached, so the session's next turn reads nothing. Any
// other case is left to the next read.
func (c *Cache) Appended(session wire.SessionKey, lastSeq int64, msgs ...agent.Message) {
	if c.max <= 0 || len(msgs) == 0 {
		return
	}
	base := lastSeq - int64(len(msgs))
	c.mu.Lock()
	var prev []agent.Message
	if el, ok := c.entries[session]; ok {
		e := el.Value.(*entry)
		if e.lastSeq != base {
			c.mu.Unlock()
			return
		}
		prev = e.msgs
	} else if base != 0 {
		c.mu.Unlock()
		return
	}
	c.mu.Unlock()
	// A new slice: callers may still hold the old one.
	next := append(append(make([]agent.Message, 0, len(prev)+len(msgs)), prev...), msgs...)
	c.store(session, next, lastSeq)
}

func (c *Cache) reload(ctx context.Context, session wire.SessionKey) ([]agent.Message, error) {
	c.mu.Lock()
	if el, ok := c.entries[session]; ok {
		c.lru.Remove(el)
		delete(c.entries, session)
	}
	c.mu.Unlock()
	return c.Get(ctx, session)
}

func (c *Cache) store(session wire.SessionKey, msgs []agent.Message, lastSeq int64) {
	if c.max <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[session]; ok {
		e := el.Value.(*entry)
		if lastSeq >= e.lastSeq {
			e.msgs, e.lastSeq = msgs, lastSeq
		}
		c.lru.MoveToFront(el)
		return
	}
	c.entries[session] = c.lru.PushFront(&entry{session: session, msgs: msgs, lastSeq: lastSeq})
	for c.lru.Len() > c.max {
		old := c.lru.Back()
		c.lru.Remove(old)
		delete(c.entries, old.Value.(*entry).session)
	}
}

// Len returns the number of cached sessions.
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Len()
}

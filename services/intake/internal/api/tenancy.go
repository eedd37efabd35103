package api

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/turnstile-run/turnstile/pkg/apikey"
)

// DefaultTenant is the tenant of every request when TURNSTILE_AUTH=off.
const DefaultTenant = "default"

// keyCache maps API keys to tenants. Hits live for keyTTL (so a revoked key stops working within
// that time on every replica), misses for missTTL (so a flood of bad keys does not reach Postgres
// once per request). Keys are cached by their hash, never in clear.
type keyCache struct {
	pool *pgxpool.Pool
	mu   sync.Mutex
	m    map[[32]byte]keyEntry
	now  func() time.Time
}

type keyEntry struct {
	tenant  string
	ok      bool
	expires time.Time
}

const (
	keyTTL    = 30 * time.Second
	missTTL   = 5 * time.Second
	cacheSize = 100000
)

var errStore = errors.New("store unavailable")

func (c *keyCache) tenant(ctx context.Context, key string) (string, error) {
	var h [32]byte
	copy(h[:], apikey.Hash(key))
	now := c.now()
	c.mu.Lock()
	e, hit := c.m[h]
	c.mu.Unlock()
	if hit && now.Before(e.expires) {
		if !e.ok {
			return "", apikey.ErrUnknown
		}
		return e.tenant, nil
	}
	if c.pool == nil {
		return "", errStore
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	tenant, err := apikey.Lookup(ctx, c.pool, key)
	switch {
	case errors.Is(err, apikey.ErrUnknown):
		c.put(h, keyEntry{ok: false, expires: now.Add(missTTL)})
		return "", err
	case err != nil:
		if hit && e.ok {
			return e.tenant, nil // Postgres is down: a key known a moment ago keeps working
		}
		return "", fmt.Errorf("%w: %w", errStore, err)
	}
	c.put(h, keyEntry{tenant: tenant, ok: true, expires: now.Add(keyTTL)})
	return tenant, nil
}

// expireAll forgets every cached key, as if keyTTL had passed.
func (c *keyCache) expireAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.m)
}

func (c *keyCache) put(h [32]byte, e keyEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= cacheSize {
		clear(c.m)
	}
	c.m[h] = e
}

// owners caches which tenant owns each session. Ownership never changes once recorded, so a hit
// needs no expiry.
type owners struct {
	pool *pgxpool.Pool
	mu   sync.RWMutex
	m    map[string]string
}

// claimSQL records tenant as the session's owner unless it has one, and returns the owner.
const claimOwnerSQL = `
WITH ins AS (
    INSERT INTO sessions (session_id, tenant) VALUES ($1, $2)
    ON CONFLICT (session_id) DO NOTHING RETURNING tenant
)
SELECT tenant FROM ins UNION ALL SELECT tenant FROM sessions WHERE session_id = $1 LIMIT 1`

func (o *owners) cached(sessionID string) (string, bool) {
	o.mu.RLock()
	defer o.mu.RUnlock()
	t, ok := o.m[sessionID]
	return t, ok
}

func (o *owners) remember(sessionID, tenant string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.m) >= cacheSize {
		clear(o.m)
	}
	o.m[sessionID] = tenant
}

// claim returns the session's owner, making tenant the owner of a new session. It returns errStore
// when Postgres cannot answer; the caller then fails open.
func (o *owners) claim(ctx context.Context, sessionID, tenant string) (string, error) {
	if t, ok := o.cached(sessionID); ok {
		return t, nil
	}
	if o.pool == nil {
		return "", errStore
	}
	ctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	var owner string
	if err := o.pool.QueryRow(ctx, claimOwnerSQL, sessionID, tenant).Scan(&owner); err != nil {
		return "", fmt.Errorf("%w: %w", errStore, err)
	}
	o.remember(sessionID, owner)
	return owner, nil
}

// lookup returns the session's owner, or "" when the session is unknown.
func (o *owners) lookup(ctx context.Context, sessionID string) (string, error) {
	if t, ok := o.cached(sessionID); ok {
		return t, nil
	}
	if o.pool == nil {
		return "", errStore
	}
	var owner string
	err := o.pool.QueryRow(ctx, `SELECT tenant FROM sessions WHERE session_id = $1`, sessionID).Scan(&owner)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("%w: %w", errStore, err)
	}
	o.remember(sessionID, owner)
	return owner, nil
}

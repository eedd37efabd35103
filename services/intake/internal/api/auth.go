package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/turnstile-run/turnstile/pkg/apikey"
	"github.com/turnstile-run/turnstile/pkg/httpx"
)

// DefaultTenant is the tenant of every request when TURNSTILE_AUTH=off.
const DefaultTenant = "default"

type (
	tenantKey   struct{}
	apiKeyIDKey struct{}
)

func tenantOf(r *http.Request) string { return r.Context().Value(tenantKey{}).(string) }

// apiKeyOf is the ID of the request's API key, "" with TURNSTILE_AUTH=off. Stream tokens name it,
// so that revoking the key ends them.
func apiKeyOf(r *http.Request) string {
	id, _ := r.Context().Value(apiKeyIDKey{}).(string)
	return id
}

// errStore is what a cache returns when Postgres did not answer; its callers fail open or
// answer 503.
var errStore = errors.New("store unavailable")

// authenticate resolves the request's tenant from its API key (Authorization: Bearer).
func (h *Handler) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		const route = "auth"
		tenant, keyID := DefaultTenant, ""
		if h.cfg.AuthEnabled {
			key := httpx.BearerToken(r)
			if key == "" {
				w.Header().Set("WWW-Authenticate", `Bearer realm="turnstile"`)
				h.refuse(w, route, httpx.ProblemUnauthenticated.Problem("an API key is required: Authorization: Bearer <key>"))
				return
			}
			k, err := h.keys.resolve(r.Context(), key)
			switch {
			case errors.Is(err, apikey.ErrUnknown):
				w.Header().Set("WWW-Authenticate", `Bearer realm="turnstile", error="invalid_token"`)
				h.refuse(w, route, httpx.ProblemUnauthenticated.Problem("the API key is unknown or revoked"))
				return
			case errors.Is(err, errMissBudget):
				h.refuse(w, route, httpx.ProblemStoreUnavail.Problem("too many unknown API keys right now; retry"))
				return
			case err != nil:
				h.d.Log.WarnContext(r.Context(), "api key lookup failed", "err", err)
				h.refuse(w, route, httpx.ProblemStoreUnavail.Problem("API keys cannot be checked right now"))
				return
			}
			tenant, keyID = k.Tenant, k.ID
		}
		ctx := context.WithValue(r.Context(), tenantKey{}, tenant)
		if keyID != "" {
			ctx = context.WithValue(ctx, apiKeyIDKey{}, keyID)
		}
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// errMissBudget is what the key cache returns while lookups that missed used up their budget; the
// request is answered 503 like a Postgres outage.
var errMissBudget = errors.New("too many unknown api keys")

// keyCache maps API keys to tenants. Hits live for Config.KeyTTL (so a revoked key stops working
// within that time on every replica), misses for Config.KeyMissTTL. Keys are cached by their hash,
// never in clear.
//
// Unauthenticated requests cannot each cost a Postgres lookup: a key without the shape of a real
// one is refused without a lookup, and lookups that miss spend a per-process budget
// (Config.KeyMissRate per second, as much as burst) — while it is spent, keys not in the cache are
// answered 503 without a lookup, and cached keys keep working.
type keyCache struct {
	pool *pgxpool.Pool
	cfg  *Config
	mu   sync.Mutex
	m    map[[32]byte]keyEntry
	now  func() time.Time
	// misses is the lookup-miss budget: tokens left as of missAt.
	misses float64
	missAt time.Time
}

// missBudgetLeft refills the miss budget to now and reports whether a lookup may be made.
func (c *keyCache) missBudgetLeft(now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	burst := float64(c.cfg.KeyMissRate)
	if c.missAt.IsZero() {
		c.misses = burst
	} else {
		c.misses = min(burst, c.misses+now.Sub(c.missAt).Seconds()*float64(c.cfg.KeyMissRate))
	}
	c.missAt = now
	return c.misses >= 1
}

func (c *keyCache) spendMiss() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.misses--
}

type keyEntry struct {
	tenant  string
	id      string
	ok      bool
	expires time.Time
}

func (c *keyCache) resolve(ctx context.Context, key string) (apikey.Key, error) {
	var h [32]byte
	copy(h[:], apikey.Hash(key))
	now := c.now()
	c.mu.Lock()
	e, hit := c.m[h]
	c.mu.Unlock()
	if hit && now.Before(e.expires) {
		if !e.ok {
			return apikey.Key{}, apikey.ErrUnknown
		}
		return apikey.Key{ID: e.id, Tenant: e.tenant}, nil
	}
	if !apikey.WellFormed(key) {
		return apikey.Key{}, apikey.ErrUnknown
	}
	if c.pool == nil {
		return apikey.Key{}, errStore
	}
	if (!hit || !e.ok) && !c.missBudgetLeft(now) { // a known key's refresh never waits on the budget
		return apikey.Key{}, errMissBudget
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.LookupTimeout)
	defer cancel()
	k, err := apikey.Resolve(ctx, c.pool, key)
	switch {
	case errors.Is(err, apikey.ErrUnknown):
		c.spendMiss()
		c.put(h, keyEntry{ok: false, expires: now.Add(c.cfg.KeyMissTTL)})
		return apikey.Key{}, err
	case err != nil:
		if hit && e.ok {
			// Postgres is down: a key known a moment ago keeps working
			return apikey.Key{ID: e.id, Tenant: e.tenant}, nil
		}
		return apikey.Key{}, fmt.Errorf("%w: %w", errStore, err)
	}
	c.put(h, keyEntry{tenant: k.Tenant, id: k.ID, ok: true, expires: now.Add(c.cfg.KeyTTL)})
	return k, nil
}

// expireAll forgets every cached key, as if KeyTTL had passed.
func (c *keyCache) expireAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.m)
}

func (c *keyCache) put(h [32]byte, e keyEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= c.cfg.CacheEntries {
		clear(c.m)
	}
	c.m[h] = e
}

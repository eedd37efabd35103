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

type tenantKey struct{}

func tenantOf(r *http.Request) string { return r.Context().Value(tenantKey{}).(string) }

// errStore is what a cache returns when Postgres did not answer; its callers fail open or
// answer 503.
var errStore = errors.New("store unavailable")

// authenticate resolves the request's tenant from its API key (Authorization: Bearer).
func (h *Handler) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		const route = "auth"
		tenant := DefaultTenant
		if h.cfg.AuthEnabled {
			key := httpx.BearerToken(r)
			if key == "" {
				w.Header().Set("WWW-Authenticate", `Bearer realm="turnstile"`)
				h.refuse(w, route, httpx.ProblemUnauthenticated.Problem("an API key is required: Authorization: Bearer <key>"))
				return
			}
			t, err := h.keys.tenant(r.Context(), key)
			switch {
			case errors.Is(err, apikey.ErrUnknown):
				w.Header().Set("WWW-Authenticate", `Bearer realm="turnstile", error="invalid_token"`)
				h.refuse(w, route, httpx.ProblemUnauthenticated.Problem("the API key is unknown or revoked"))
				return
			case err != nil:
				h.d.Log.WarnContext(r.Context(), "api key lookup failed", "err", err)
				h.refuse(w, route, httpx.ProblemStoreUnavail.Problem("API keys cannot be checked right now"))
				return
			}
			tenant = t
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), tenantKey{}, tenant)))
	})
}

// keyCache maps API keys to tenants. Hits live for Config.KeyTTL (so a revoked key stops working
// within that time on every replica), misses for Config.KeyMissTTL (so a flood of bad keys does not
// reach Postgres once per request). Keys are cached by their hash, never in clear.
type keyCache struct {
	pool *pgxpool.Pool
	cfg  *Config
	mu   sync.Mutex
	m    map[[32]byte]keyEntry
	now  func() time.Time
}

type keyEntry struct {
	tenant  string
	ok      bool
	expires time.Time
}

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
	ctx, cancel := context.WithTimeout(ctx, c.cfg.LookupTimeout)
	defer cancel()
	tenant, err := apikey.Lookup(ctx, c.pool, key)
	switch {
	case errors.Is(err, apikey.ErrUnknown):
		c.put(h, keyEntry{ok: false, expires: now.Add(c.cfg.KeyMissTTL)})
		return "", err
	case err != nil:
		if hit && e.ok {
			return e.tenant, nil // Postgres is down: a key known a moment ago keeps working
		}
		return "", fmt.Errorf("%w: %w", errStore, err)
	}
	c.put(h, keyEntry{tenant: tenant, ok: true, expires: now.Add(c.cfg.KeyTTL)})
	return tenant, nil
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

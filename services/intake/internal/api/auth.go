package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/turnstile-run/turnstile/pkg/apikey"
	"github.com/turnstile-run/turnstile/pkg/httpx"
	"github.com/turnstile-run/turnstile/pkg/wire"
)

type (
	tenantKey   struct{}
	apiKeyIDKey struct{}
	adminKey    struct{}
)

func tenantOf(r *http.Request) string { return r.Context().Value(tenantKey{}).(string) }

// Principal is whom an authenticated request acts for: its key's tenant and ID, and whether the
// key is an admin's (pkg/apikey). With TURNSTILE_AUTH=off every request is the default tenant's,
// with no key, and an admin's: nothing is checked.
type Principal struct {
	Tenant string
	KeyID  string
	Admin  bool
}

// PrincipalOf is the principal Authenticate put in ctx; ok is false outside it.
func PrincipalOf(ctx context.Context) (p Principal, ok bool) {
	p.Tenant, ok = ctx.Value(tenantKey{}).(string)
	p.KeyID, _ = ctx.Value(apiKeyIDKey{}).(string)
	p.Admin, _ = ctx.Value(adminKey{}).(bool)
	return p, ok
}

// Authenticate is the middleware that resolves a request's API key (see authenticate), for
// routes mounted outside Routes (the admin API); PrincipalOf reads what it found.
func (h *Handler) Authenticate(next http.Handler) http.Handler { return h.placed(h.authenticate(next)) }

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
		tenant, keyID, admin := wire.DefaultTenant, "", !h.cfg.AuthEnabled
		if h.cfg.AuthEnabled {
			key := httpx.BearerToken(r)
			if key == "" {
				w.Header().Set("WWW-Authenticate", `Bearer realm="turnstile"`)
				h.refuse(w, route, httpx.ProblemUnauthenticated.Problem("an API key is required: Authorization: Bearer <key>"))
				return
			}
			k, err := h.keys.resolve(r.Context(), key, h.clientOf(r))
			switch {
			case errors.Is(err, apikey.ErrUnknown):
				w.Header().Set("WWW-Authenticate", `Bearer realm="turnstile", error="invalid_token"`)
				h.refuse(w, route, httpx.ProblemUnauthenticated.Problem("the API key is unknown or revoked"))
				return
			case errors.Is(err, errClientMissBudget):
				p := httpx.ProblemRateLimited.Problem("too many unknown API keys from this address; retry later")
				p.RetryAfter = time.Duration(float64(time.Second) / float64(h.cfg.KeyMissPerClient))
				h.refuse(w, route, p)
				return
			case errors.Is(err, errMissBudget):
				h.refuse(w, route, httpx.ProblemStoreUnavail.Problem("too many unknown API keys right now; retry"))
				return
			case err != nil:
				h.d.Log.WarnContext(r.Context(), "api key lookup failed", "err", err)
				h.refuse(w, route, httpx.ProblemStoreUnavail.Problem("API keys cannot be checked right now"))
				return
			}
			tenant, keyID, admin = k.Tenant, k.ID, k.Admin
		}
		ctx := context.WithValue(r.Context(), tenantKey{}, tenant)
		if admin {
			ctx = context.WithValue(ctx, adminKey{}, true)
		}
		if keyID != "" {
			ctx = context.WithValue(ctx, apiKeyIDKey{}, keyID)
		}
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// errMissBudget is what the key cache returns while lookups that missed used up the replica's
// budget; the request is answered 503 like a Postgres outage. errClientMissBudget is the same for
// one client address's budget, answered 429: that client is the cause.
var (
	errMissBudget       = errors.New("too many unknown api keys")
	errClientMissBudget = errors.New("too many unknown api keys from this client")
)

// clientOf is the request's client address, as the budget of lookups that miss is kept by: the
// connection's peer or, while that is a trusted proxy, the address it appended to
// X-Forwarded-For, walking right to left through a chain of trusted proxies (addresses further
// left are the client's own words). IPv6 clients are kept by their /64, which one host can fill.
func (h *Handler) clientOf(r *http.Request) netip.Prefix {
	peer, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return netip.Prefix{}
	}
	ip := peer.Addr().Unmap()
	hops := strings.Split(strings.Join(r.Header.Values("X-Forwarded-For"), ","), ",")
	for i := len(hops) - 1; i >= 0 && trusted(h.cfg.TrustedProxies, ip); i-- {
		next, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
		if err != nil {
			break
		}
		ip = next.Unmap()
	}
	if ip.Is6() {
		p, _ := ip.Prefix(64)
		return p
	}
	return netip.PrefixFrom(ip, 32)
}

func trusted(nets []netip.Prefix, ip netip.Addr) bool {
	for _, n := range nets {
		if n.Contains(ip) {
			return true
		}
	}
	return false
}

// keyCache maps API keys to tenants. Hits live for Config.KeyTTL (so a revoked key stops working
// within that time on every replica), misses for Config.KeyMissTTL. Keys are cached by their hash,
// never in clear.
//
// Unauthenticated requests cannot each cost a Postgres lookup: a key without the shape of a real
// one is refused without a lookup, and lookups that miss spend two budgets, the client address's
// (Config.KeyMissPerClient per second, as much at once; while it is spent that address's uncached
// keys are answered 429 without a lookup) and the replica's (Config.KeyMissRate; while it is
// spent, uncached keys are answered 503). One address's flood empties only its own budget, so a
// real tenant's uncached key is still looked up; cached keys keep working throughout.
type keyCache struct {
	pool *pgxpool.Pool
	cfg  *Config
	mu   sync.Mutex
	m    map[[32]byte]keyEntry
	now  func() time.Time
	// misses is the replica's lookup-miss budget, clients each address's.
	misses  missBucket
	clients map[netip.Prefix]*missBucket
}

// missBucket is a token bucket of lookups that may miss: tokens left as of at.
type missBucket struct {
	tokens float64
	at     time.Time
}

// refill brings b to now at rate per second (as much as rate at once) and reports whether a
// lookup may be made.
func (b *missBucket) refill(now time.Time, rate int) bool {
	if b.at.IsZero() {
		b.tokens = float64(rate)
	} else {
		b.tokens = min(float64(rate), b.tokens+now.Sub(b.at).Seconds()*float64(rate))
	}
	b.at = now
	return b.tokens >= 1
}

// missBudgetLeft refills the client's and the replica's budgets to now and says which, if any,
// is spent.
func (c *keyCache) missBudgetLeft(now time.Time, client netip.Prefix) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	b := c.clients[client]
	if b == nil {
		if len(c.clients) >= keyMissClients {
			c.forgetFullClients(now)
		}
		b = &missBucket{}
		c.clients[client] = b
	}
	if !b.refill(now, c.cfg.KeyMissPerClient) {
		return errClientMissBudget
	}
	if !c.misses.refill(now, c.cfg.KeyMissRate) {
		return errMissBudget
	}
	return nil
}

// forgetFullClients drops the budgets that have refilled (forgetting them changes nothing), or
// all of them when none has: the map stays bounded whatever the number of addresses.
func (c *keyCache) forgetFullClients(now time.Time) {
	for p, b := range c.clients {
		if b.refill(now, c.cfg.KeyMissPerClient) && b.tokens >= float64(c.cfg.KeyMissPerClient) {
			delete(c.clients, p)
		}
	}
	if len(c.clients) >= keyMissClients {
		clear(c.clients)
	}
}

func (c *keyCache) spendMiss(client netip.Prefix) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.misses.tokens--
	if b := c.clients[client]; b != nil {
		b.tokens--
	}
}

type keyEntry struct {
	tenant  string
	id      string
	admin   bool
	ok      bool
	expires time.Time
}

func (c *keyCache) resolve(ctx context.Context, key string, client netip.Prefix) (apikey.Key, error) {
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
		return apikey.Key{ID: e.id, Tenant: e.tenant, Admin: e.admin}, nil
	}
	if !apikey.WellFormed(key) {
		return apikey.Key{}, apikey.ErrUnknown
	}
	if c.pool == nil {
		return apikey.Key{}, errStore
	}
	if !hit || !e.ok { // a known key's refresh never waits on the budgets
		if err := c.missBudgetLeft(now, client); err != nil {
			return apikey.Key{}, err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.LookupTimeout)
	defer cancel()
	k, err := apikey.Resolve(ctx, c.pool, key)
	switch {
	case errors.Is(err, apikey.ErrUnknown):
		c.spendMiss(client)
		c.put(h, keyEntry{ok: false, expires: now.Add(c.cfg.KeyMissTTL)})
		return apikey.Key{}, err
	case err != nil:
		if hit && e.ok {
			// Postgres is down: a key known a moment ago keeps working
			return apikey.Key{ID: e.id, Tenant: e.tenant, Admin: e.admin}, nil
		}
		return apikey.Key{}, fmt.Errorf("%w: %w", errStore, err)
	}
	c.put(h, keyEntry{tenant: k.Tenant, id: k.ID, admin: k.Admin, ok: true, expires: now.Add(c.cfg.KeyTTL)})
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

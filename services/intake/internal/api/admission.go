package api

import (
	"context"
	"sync"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/google/uuid"

	"github.com/turnstile-run/turnstile/pkg/quota"
	"github.com/turnstile-run/turnstile/pkg/wire"
)

// A rate lease takes at most 1/rateChunkShare of the tenant's rate, and at most rateChunkMax
// tokens, from Redis at once.
const (
	rateChunkShare = 100
	rateChunkMax   = 64
)

// backlogAge is the backlog age admission judges a turn of agent by: its own agent's, so a
// saturated agent never refuses another's turns (invariant 16).
func (h *Handler) backlogAge(agent string) (time.Duration, bool) {
	switch {
	case h.cfg.BacklogAgeOf != nil:
		return h.cfg.BacklogAgeOf(agent), true
	case h.cfg.BacklogAge != nil:
		return h.cfg.BacklogAge(), true
	}
	return 0, false
}

// allowRate applies the tenant's GCRA rate limit (agent "") or its tenant×agent one; when Redis
// does not answer it admits.
//
// To keep the accept path at about one Redis round trip, a replica takes a small lease of the
// tenant's tokens at a time (AllowN of a chunk of at most 1% of the rate and rateChunkMax tokens,
// so the limit stays within about 1% of exact) and spends it locally for at most Config.RateLeaseTTL;
// when the tenant is near its limit and a chunk is refused it falls back to asking for one token,
// so the limit is never exceeded, and a single token is not leased. One request at a time asks
// Redis for a tenant's next lease and the others wait for its answer: without that, every request
// that found the lease empty asked at once (one round trip and one GCRA script run each, the
// leases overwriting each other).
func (h *Handler) allowRate(ctx context.Context, tenant, agent string) (time.Duration, bool) {
	if h.limiter == nil {
		h.failOpen.WithLabelValues("rate").Inc()
		return 0, true
	}
	lease := tenant
	if agent != "" {
		lease = tenant + "\x00" + agent // not a tenant name: tenant names have no NUL
	}
	var l *rateLease
	for {
		now := h.now()
		h.leases.mu.Lock()
		l = h.leases.m[lease]
		if l == nil {
			l = &rateLease{}
			h.leases.m[lease] = l
		}
		if l.tokens > 0 && now.Before(l.expires) {
			l.tokens--
			h.leases.mu.Unlock()
			return 0, true
		}
		refill := l.refill
		if refill == nil {
			l.refill = make(chan struct{})
			h.leases.mu.Unlock()
			break // this request asks Redis
		}
		h.leases.mu.Unlock()
		select {
		case <-refill: // look again: the lease was refilled, or this request asks next
		case <-ctx.Done():
			h.failOpen.WithLabelValues("rate").Inc()
			return 0, true
		}
	}

	now := h.now()
	retry, ok, tokens := h.askRate(ctx, tenant, agent)
	h.leases.mu.Lock()
	if tokens > 0 {
		l.tokens, l.expires = tokens, now.Add(h.cfg.RateLeaseTTL)
	}
	close(l.refill)
	l.refill = nil
	h.leases.mu.Unlock()
	return retry, ok
}

// askRate takes a chunk of the tenant's tokens from Redis (or one, near the limit) and returns the
// tokens left to lease after this request's.
func (h *Handler) askRate(ctx context.Context, tenant, agent string) (retry time.Duration, ok bool, lease int) {
	ctx, cancel := context.WithTimeout(ctx, h.cfg.RedisTimeout)
	defer cancel()
	key := rateKey(h.cfg.KeyPrefix, tenant)
	rate, burst := h.rateOf(tenant)
	if agent != "" {
		key = agentRateKey(h.cfg.KeyPrefix, tenant, agent)
		rate, _ = h.agentRate(tenant, agent)
		burst = 2 * rate
	}
	limit := redis_rate.Limit{Rate: rate, Burst: burst, Period: time.Second}
	chunk := min(max(rate/rateChunkShare, 1), rateChunkMax, burst)
	res, err := h.limiter.AllowN(ctx, key, limit, chunk)
	if err == nil && res.Allowed == 0 && chunk > 1 {
		res, err = h.limiter.AllowN(ctx, key, limit, 1)
	}
	if err != nil {
		h.failOpen.WithLabelValues("rate").Inc()
		return 0, true, 0
	}
	if res.Allowed == 0 {
		return res.RetryAfter, false, 0
	}
	return 0, true, res.Allowed - 1
}

// rateKey is the Redis key of a tenant's GCRA state.
func rateKey(prefix, tenant string) string { return prefix + ":rate:tenant:" + tenant }

// agentRateKey is the Redis key of a tenant×agent's GCRA state.
func agentRateKey(prefix, tenant, agent string) string {
	return prefix + ":rate:agent:" + agent + ":" + tenant
}

type rateLeases struct {
	mu sync.Mutex
	m  map[string]*rateLease
}

type rateLease struct {
	tokens  int
	expires time.Time
	// refill is open while one request asks Redis for the next lease; it is closed when it has.
	refill chan struct{}
}

// queuedCounts caches each tenant's number of queued turns for Config.QueuedCountTTL, so the quota
// costs one Postgres query per tenant per TTL per replica, not one per request: while one request
// refreshes a stale count, the others use the previous one.
type queuedCounts struct {
	mu sync.Mutex
	m  map[string]*queuedCount
}

type queuedCount struct {
	n          int
	at         time.Time
	known      bool
	refreshing bool
}

func (h *Handler) queuedTurns(ctx context.Context, tenant string) (int, bool) {
	now := h.now()
	h.queued.mu.Lock()
	c := h.queued.m[tenant]
	if c == nil {
		c = &queuedCount{}
		h.queued.m[tenant] = c
	}
	if (c.known && now.Sub(c.at) < h.cfg.QueuedCountTTL) || c.refreshing {
		n, known := c.n, c.known
		h.queued.mu.Unlock()
		return n, known
	}
	c.refreshing = true
	h.queued.mu.Unlock()

	n, err := h.countQueued(ctx, tenant)
	h.queued.mu.Lock()
	defer h.queued.mu.Unlock()
	c.refreshing = false
	if err != nil {
		h.failOpen.WithLabelValues("queued_quota").Inc()
		return 0, false
	}
	c.n, c.at, c.known = n, now, true
	return n, true
}

func (h *Handler) countQueued(ctx context.Context, tenant string) (int, error) {
	if h.store == nil {
		return 0, errStore
	}
	ctx, cancel := context.WithTimeout(ctx, h.cfg.CheckTimeout)
	defer cancel()
	return h.store.CountQueued(ctx, tenant)
}

// sessionBusy reports whether the session has a queued or running turn other than turnID (which may
// be a retry of this very request). Queued rows still in this replica's buffer are flushed first.
func (h *Handler) sessionBusy(ctx context.Context, session wire.SessionKey, turnID uuid.UUID) (bool, error) {
	if h.store == nil {
		return false, errStore
	}
	ctx, cancel := context.WithTimeout(ctx, h.cfg.LookupTimeout)
	defer cancel()
	if h.d.Recorder != nil {
		h.d.Recorder.Flush(ctx)
	}
	return h.store.SessionBusy(ctx, session, turnID)
}

// rateOf is the tenant's rate and burst: its quota's rate_per_second (burst twice that) when one
// is set through /v1/admin/quotas, else TURNSTILE_TENANT_RATE and TURNSTILE_TENANT_BURST.
func (h *Handler) rateOf(tenant string) (rate, burst int) {
	if h.cfg.Quotas != nil {
		if r, ok := h.cfg.Quotas().Rate(quota.Key{Tenant: tenant}); ok {
			return r, 2 * r
		}
	}
	return h.cfg.TenantRate, h.cfg.TenantBurst
}

// agentRate is the tenant×agent rate set through /v1/admin/quotas, if one is: the agent's turns
// of the tenant are held to it beside the tenant's own rate (burst twice the rate).
func (h *Handler) agentRate(tenant, agent string) (int, bool) {
	if h.cfg.Quotas == nil {
		return 0, false
	}
	return h.cfg.Quotas().Rate(quota.Key{Tenant: tenant, Agent: agent})
}

// budgetExhausted reports whether the tenant has spent its token budget of the period, and when
// the period resets.
func (h *Handler) budgetExhausted(tenant string, now time.Time) (bool, time.Time) {
	if h.cfg.Quotas == nil {
		return false, time.Time{}
	}
	return h.cfg.Quotas().Exhausted(tenant, now)
}

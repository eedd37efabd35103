package api

import (
	"context"
	"fmt"
	"sync"

	"github.com/turnstile-run/turnstile/pkg/turnstore"
)

// owners caches which tenant owns each session. Ownership never changes once recorded, so a hit
// needs no expiry.
type owners struct {
	store *turnstore.Store // nil without Postgres
	cfg   *Config
	mu    sync.RWMutex
	m     map[string]string
}

func (o *owners) cached(sessionID string) (string, bool) {
	o.mu.RLock()
	defer o.mu.RUnlock()
	t, ok := o.m[sessionID]
	return t, ok
}

func (o *owners) remember(sessionID, tenant string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.m) >= o.cfg.CacheEntries {
		clear(o.m)
	}
	o.m[sessionID] = tenant
}

// claim returns the session's owner, making tenant the owner of a new session. It returns errStore
// when Postgres cannot answer within Config.CheckTimeout; the caller then fails open.
func (o *owners) claim(ctx context.Context, sessionID, tenant string) (string, error) {
	if t, ok := o.cached(sessionID); ok {
		return t, nil
	}
	if o.store == nil {
		return "", errStore
	}
	ctx, cancel := context.WithTimeout(ctx, o.cfg.CheckTimeout)
	defer cancel()
	owner, err := o.store.ClaimSession(ctx, sessionID, tenant)
	if err != nil {
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
	if o.store == nil {
		return "", errStore
	}
	owner, err := o.store.SessionOwner(ctx, sessionID)
	if err != nil {
		return "", fmt.Errorf("%w: %w", errStore, err)
	}
	if owner != "" {
		o.remember(sessionID, owner)
	}
	return owner, nil
}

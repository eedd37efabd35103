package pool

import (
	"context"
	"slices"
	"sync"
)

// pinKey keys a turn's pins in its context.
type pinKey struct{}

// pins are a turn's endpoint, per pool, chosen by its first request, and the endpoints the turn
// could not reach.
type pins struct {
	mu   sync.Mutex
	by   map[*Pool]*Endpoint
	lost map[*Pool][]*Endpoint
}

// unreachable records that the turn could not reach ep of p.
func (pn *pins) unreachable(p *Pool, ep *Endpoint) {
	pn.mu.Lock()
	defer pn.mu.Unlock()
	if pn.lost == nil {
		pn.lost = map[*Pool][]*Endpoint{}
	}
	if !slices.Contains(pn.lost[p], ep) {
		pn.lost[p] = append(pn.lost[p], ep)
	}
}

// unreached returns the endpoints of p the turn could not reach; the slice must not be modified.
func (pn *pins) unreached(p *Pool) []*Endpoint {
	pn.mu.Lock()
	defer pn.mu.Unlock()
	return pn.lost[p]
}

// Pin returns ctx marked so that every request of the turn it carries goes to the endpoint its
// first request went to (for as long as that endpoint is usable and has not failed to connect),
// whatever the pool's membership does meanwhile: a turn routes from the snapshot of the
// endpoints it started with, so a conversation does not switch replicas mid-turn when one joins
// and the ring hands its session to it. The worker pins every turn as it starts.
func Pin(ctx context.Context) context.Context {
	if _, ok := ctx.Value(pinKey{}).(*pins); ok {
		return ctx
	}
	return context.WithValue(ctx, pinKey{}, &pins{})
}

// pinned returns the endpoint ctx's turn is pinned to in p, nil when none (or no pin).
func (p *Pool) pinned(ctx context.Context) (*pins, *Endpoint) {
	pn, ok := ctx.Value(pinKey{}).(*pins)
	if !ok {
		return nil, nil
	}
	pn.mu.Lock()
	defer pn.mu.Unlock()
	return pn, pn.by[p]
}

func (pn *pins) set(p *Pool, ep *Endpoint) {
	pn.mu.Lock()
	if pn.by == nil {
		pn.by = map[*Pool]*Endpoint{}
	}
	pn.by[p] = ep
	pn.mu.Unlock()
}

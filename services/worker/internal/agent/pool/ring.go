package pool

import (
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/cespare/xxhash/v2"
)

// ring is the consistent-hash ring of a pool's endpoints: virtualNodes points each, sorted by
// hash. A key's home is the first endpoint at or after the key's hash. Rebuilt on membership
// changes only; read under the pool's lock.
type ring struct {
	points []point
	// endpoints is the number of distinct endpoints; each has its index in idx.
	endpoints int
}

type point struct {
	hash uint64
	ep   *Endpoint
}

func newRing(eps []*Endpoint) ring {
	r := ring{points: make([]point, 0, len(eps)*virtualNodes), endpoints: len(eps)}
	for i, ep := range eps {
		ep.idx = i
		for i := range virtualNodes {
			r.points = append(r.points, point{hash: xxhash.Sum64String(ep.addr + "#" + strconv.Itoa(i)), ep: ep})
		}
	}
	slices.SortFunc(r.points, func(a, b point) int {
		switch {
		case a.hash < b.hash:
			return -1
		case a.hash > b.hash:
			return 1
		}
		return 0
	})
	return r
}

// walk calls fn for the endpoints in ring order from key's hash, each once, until fn returns
// false.
func (r ring) walk(key string, fn func(ep *Endpoint) bool) {
	n := len(r.points)
	if n == 0 {
		return
	}
	h := xxhash.Sum64String(key)
	start, _ := slices.BinarySearchFunc(r.points, h, func(p point, h uint64) int {
		switch {
		case p.hash < h:
			return -1
		case p.hash > h:
			return 1
		}
		return 0
	})
	first := r.points[start%n].ep
	if !fn(first) {
		return
	}
	// Most walks end at the first point; the set of endpoints seen is made only for longer ones,
	// which end once every endpoint was offered.
	seen := make([]bool, r.endpoints)
	seen[first.idx] = true
	left := r.endpoints - 1
	for i := 1; i < n && left > 0; i++ {
		ep := r.points[(start+i)%n].ep
		if seen[ep.idx] {
			continue
		}
		seen[ep.idx] = true
		left--
		if !fn(ep) {
			return
		}
	}
}

// placement is where the affinity table put one route key.
type placement struct {
	ep   *Endpoint
	used time.Time
}

// bound is the most sessions one endpoint may be given under the load factor c when total
// sessions are placed over n candidates: ⌊c·(total+1)/n⌋, so no endpoint is placed above c times
// the mean once the new session counts, but never below ⌈(total+1)/n⌉, so some endpoint always
// has room (with few sessions over many endpoints the mean itself rounds up).
func bound(c float64, total, n int) int {
	if n == 0 {
		return 0
	}
	m := float64(total+1) / float64(n)
	return max(int(math.Floor(c*m)), int(math.Ceil(m)))
}

// home is key's first usable endpoint on the ring, ignoring load (nil when none is usable).
// Callers hold the pool's lock.
func (p *Pool) home(key string) *Endpoint {
	var h *Endpoint
	p.ring.walk(key, func(ep *Endpoint) bool {
		if p.candidate(ep) {
			h = ep
			return false
		}
		return true
	})
	return h
}

// place finds key an endpoint: the first candidate on the ring from key's hash that is below the
// load bound and is neither avoid nor in also, else the least loaded such candidate, else (every
// candidate is to be avoided) avoid. Callers hold the pool's lock.
func (p *Pool) place(key string, avoid *Endpoint, also []*Endpoint) *Endpoint {
	st := p.st.Load()
	limit := bound(p.cfg.LoadFactor, len(p.table), len(st.candidates))
	var chosen, least *Endpoint
	p.ring.walk(key, func(ep *Endpoint) bool {
		if !p.candidate(ep) || ep == avoid || slices.Contains(also, ep) {
			return true
		}
		if least == nil || ep.sessions < least.sessions {
			least = ep
		}
		if ep.sessions < limit {
			chosen = ep
			return false
		}
		return true
	})
	if chosen == nil {
		chosen = least
	}
	if chosen == nil { // avoid was the only candidate
		chosen = avoid
	}
	return chosen
}

// candidate says whether ep may be given requests now. Callers hold the pool's lock.
func (p *Pool) candidate(ep *Endpoint) bool {
	return !ep.removed && (ep.usable || p.st.Load().panic)
}

// assign records key's placement on ep. Callers hold the pool's lock.
func (p *Pool) assign(key string, ep *Endpoint, now time.Time) {
	if old, ok := p.table[key]; ok {
		old.ep.sessions--
	}
	p.table[key] = &placement{ep: ep, used: now}
	ep.sessions++
}

// rebalance moves to the endpoints just added the sessions whose ring home they now are, while
// they are below the load bound: a joining replica takes its share of the sessions and no other
// session moves. It returns how many moved. Callers hold the pool's lock.
func (p *Pool) rebalance(added map[*Endpoint]bool, now time.Time) int {
	if len(added) == 0 || len(p.table) == 0 {
		return 0
	}
	st := p.st.Load()
	limit := bound(p.cfg.LoadFactor, len(p.table)-1, len(st.candidates))
	keys := make([]string, 0, len(p.table))
	for k := range p.table {
		keys = append(keys, k)
	}
	slices.Sort(keys) // the same sessions move on every worker that knows them
	moved := 0
	for _, k := range keys {
		h := p.home(k)
		if h == nil || !added[h] || h.sessions >= limit || p.table[k].ep == h {
			continue
		}
		p.assign(k, h, now)
		moved++
	}
	return moved
}

// sweep forgets the placements not used since before cutoff. Callers hold the pool's lock.
func (p *Pool) sweep(cutoff time.Time) {
	for k, pl := range p.table {
		if pl.used.Before(cutoff) {
			pl.ep.sessions--
			delete(p.table, k)
		}
	}
}

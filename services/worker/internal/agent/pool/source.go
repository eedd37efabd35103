package pool

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
)

// Source names some of a pool's endpoints. Resolve is asked again every ResolveInterval; when it
// fails, the pool keeps the source's last answer (a failed lookup never empties a pool).
// Implementations must be safe for concurrent use.
type Source interface {
	Resolve(ctx context.Context) ([]string, error)
}

// Watcher is an optional interface of a Source, found by type assertion: Changes is signalled when
// the source's answer may have changed, and the pool resolves at once instead of waiting for
// ResolveInterval (the registry's snapshot). A Source that is also a lifecycle.Component is
// started and stopped with the pool, before the pool resolves it.
type Watcher interface {
	Changes() <-chan struct{}
}

// Static is a fixed list of endpoint URLs.
type Static []string

// Resolve returns the list.
func (s Static) Resolve(context.Context) ([]string, error) { return s, nil }

// Swap is a source whose sources are replaced while the pool runs: the endpoints an agents file
// names, changed by a reload of the file (package agents). Set signals the pool, which resolves at
// once; the turns pinned to a removed endpoint finish there, new requests go to the new set.
type Swap struct {
	mu      sync.Mutex
	sources []Source
	// last is each source's last good answer: one failing DNS name keeps its endpoints, as the
	// pool does for its own sources.
	last [][]string
	// gen counts Sets, so a Resolve that raced one does not keep answers of the old sources.
	gen     uint64
	changes chan struct{}
}

// NewSwap returns a Swap over sources.
func NewSwap(sources []Source) *Swap {
	s := &Swap{changes: make(chan struct{}, 1)}
	s.Set(sources)
	return s
}

// Set replaces the sources and signals the pool.
func (s *Swap) Set(sources []Source) {
	s.mu.Lock()
	s.sources = slices.Clone(sources)
	s.gen++
	s.last = make([][]string, len(sources))
	for i, src := range sources {
		if st, ok := src.(Static); ok {
			s.last[i] = st
		}
	}
	s.mu.Unlock()
	select {
	case s.changes <- struct{}{}:
	default:
	}
}

// Changes is signalled after each Set.
func (s *Swap) Changes() <-chan struct{} { return s.changes }

// Known is the endpoints known without a lookup: the static ones. The pool sets them at once.
func (s *Swap) Known() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for i, src := range s.sources {
		if _, ok := src.(Static); ok {
			out = append(out, s.last[i]...)
		}
	}
	return out
}

// Resolve asks each source, keeping the last answer of one that fails; it fails only when a
// source that never answered fails.
func (s *Swap) Resolve(ctx context.Context) ([]string, error) {
	s.mu.Lock()
	sources, last, gen := s.sources, slices.Clone(s.last), s.gen
	s.mu.Unlock()
	var out []string
	for i, src := range sources {
		addrs, err := src.Resolve(ctx)
		switch {
		case err == nil && len(addrs) > 0:
			last[i] = addrs
		case last[i] == nil && err != nil:
			return nil, err
		}
		out = append(out, last[i]...)
	}
	s.mu.Lock()
	// Keep the answers only if no Set replaced the sources meanwhile.
	if gen == s.gen {
		s.last = last
	}
	s.mu.Unlock()
	return out, nil
}

// DNS is a URL whose host name is resolved to its addresses (a Kubernetes headless Service has
// one A record per ready pod): each address is an endpoint, the URL with the address in place of
// the name. Meant for plain-HTTP endpoints inside a cluster: an https endpoint's certificate
// names the host, not its address.
type DNS struct {
	URL *url.URL
	// Resolver defaults to net.DefaultResolver.
	Resolver *net.Resolver
}

// Resolve looks the host up.
func (d DNS) Resolve(ctx context.Context) ([]string, error) {
	r := d.Resolver
	if r == nil {
		r = net.DefaultResolver
	}
	host, port := d.URL.Hostname(), d.URL.Port()
	if port == "" {
		port = "80"
		if d.URL.Scheme == "https" {
			port = "443"
		}
	}
	ips, err := r.LookupHost(ctx, host)
	if err != nil {
		return nil, fmt.Errorf("resolve %s: %w", host, err)
	}
	slices.Sort(ips)
	out := make([]string, 0, len(ips))
	for _, ip := range ips {
		u := *d.URL
		u.Host = net.JoinHostPort(ip, port)
		out = append(out, u.String())
	}
	return out, nil
}

// DNSPrefix marks an endpoint entry to be re-resolved through DNS: "dns+http://agent.ns.svc:8080/".
const DNSPrefix = "dns+"

// Parse reads endpoint entries (a comma list's items): a URL is one endpoint, "dns+<URL>" a DNS
// name re-resolved periodically, and an entry with a prefix of more (for example the A2A
// adapter's "card+") is read by that prefix's function.
func Parse(entries []string, more map[string]func(rest string) (Source, error)) ([]Source, error) {
	var out []Source
	var static Static
	for _, e := range entries {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		var src Source
		for prefix, fn := range more {
			if rest, ok := strings.CutPrefix(e, prefix); ok {
				s, err := fn(rest)
				if err != nil {
					return nil, err
				}
				src = s
			}
		}
		if src != nil {
			out = append(out, src)
			continue
		}
		dns := false
		if rest, ok := strings.CutPrefix(e, DNSPrefix); ok {
			e, dns = rest, true
		}
		u, err := url.Parse(e)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("endpoint %q: want an http(s) URL", e)
		}
		if dns {
			out = append(out, DNS{URL: u})
			continue
		}
		static = append(static, u.String())
	}
	if len(static) > 0 {
		out = append([]Source{static}, out...)
	}
	return out, nil
}

// resolveLoop resolves the sources at once and then every ResolveInterval, and forgets idle
// sessions.
func (p *Pool) resolveLoop(ctx context.Context) {
	p.resolve(ctx)
	for ctx.Err() == nil && !p.known() {
		// Until the first answer, retry sooner than the interval: turns wait for it.
		t := time.NewTimer(time.Second)
		select {
		case <-ctx.Done():
		case <-t.C:
			p.resolve(ctx)
		}
		t.Stop()
	}
	// The sweep is as frequent as the resolve, which is often enough for an idle time of minutes.
	tick := time.NewTicker(p.cfg.ResolveInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.watch:
			p.resolve(ctx)
		case <-tick.C:
			p.resolve(ctx)
			p.mu.Lock()
			p.sweep(p.now().Add(-p.cfg.AffinityIdle))
			p.mu.Unlock()
		}
	}
}

// watchSources forwards every Watcher's signal to p.watch until ctx ends.
func (p *Pool) watchSources(ctx context.Context) {
	var cases []<-chan struct{}
	for _, s := range p.sources {
		if w, ok := s.(Watcher); ok {
			cases = append(cases, w.Changes())
		}
	}
	if len(cases) == 0 {
		<-ctx.Done()
		return
	}
	merged := make(chan struct{}, 1)
	var wg sync.WaitGroup
	for _, c := range cases {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-ctx.Done():
					return
				case <-c:
					select {
					case merged <- struct{}{}:
					default:
					}
				}
			}
		}()
	}
	defer wg.Wait()
	for {
		select {
		case <-ctx.Done():
			return
		case <-merged:
			select {
			case p.watch <- struct{}{}:
			default:
			}
		}
	}
}

func (p *Pool) known() bool {
	select {
	case <-p.ready:
		return true
	default:
		return false
	}
}

// resolve asks every source for its endpoints, keeping the last answer of one that fails, and
// sets the union.
func (p *Pool) resolve(ctx context.Context) {
	var all []string
	for i, s := range p.sources {
		if _, ok := s.(Static); !ok {
			rctx, cancel := context.WithTimeout(ctx, p.cfg.ProbeTimeout+3*time.Second)
			addrs, err := s.Resolve(rctx)
			cancel()
			switch {
			case err != nil && ctx.Err() != nil:
				return
			case err != nil:
				p.cfg.Log.Warn("upstream pool source failed; keeping its last endpoints", "upstream", p.cfg.Name,
					"error", err, "kept", len(p.last[i]))
			case len(addrs) == 0:
				p.cfg.Log.Warn("upstream pool source named no endpoint; keeping its last endpoints", "upstream", p.cfg.Name,
					"kept", len(p.last[i]))
			default:
				p.last[i] = addrs
			}
		}
		for _, a := range p.last[i] {
			if !slices.Contains(all, a) {
				all = append(all, a)
			}
		}
	}
	if len(all) > 0 {
		p.Set(all)
	}
}

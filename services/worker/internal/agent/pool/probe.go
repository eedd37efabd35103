package pool

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"sync"

	"github.com/turnstile-run/turnstile/pkg/lifecycle"
)

// probeLoop fetches ProbePath from every endpoint each ProbeInterval.
func (p *Pool) probeLoop(ctx context.Context) {
	lifecycle.Every(ctx, p.cfg.ProbeInterval, p.ProbeNow)
}

// ProbeNow probes every endpoint once, concurrently, and applies the results: ProbeFailuresToFail
// failures in a row make an endpoint unhealthy, one pass healthy again.
func (p *Pool) ProbeNow(ctx context.Context) {
	st := p.st.Load()
	ok := make([]bool, len(st.all))
	var wg sync.WaitGroup
	for i, ep := range st.all {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ok[i] = p.probe(ctx, ep)
		}()
	}
	wg.Wait()
	if ctx.Err() != nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, ep := range st.all {
		was := ep.probeOK
		if ok[i] {
			ep.probeFails, ep.probeOK = 0, true
		} else if ep.probeFails++; ep.probeFails >= ProbeFailuresToFail {
			ep.probeOK = false
		}
		if was != ep.probeOK {
			p.cfg.Log.Info("upstream endpoint probe changed", "upstream", p.cfg.Name, "endpoint", ep.addr, "healthy", ep.probeOK)
		}
	}
	p.recompute(p.now())
}

func (p *Pool) probe(ctx context.Context, ep *Endpoint) bool {
	base, err := url.Parse(ep.addr)
	if err != nil {
		return false
	}
	ref, err := url.Parse(p.cfg.ProbePath)
	if err != nil {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, p.cfg.ProbeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base.ResolveReference(ref).String(), http.NoBody)
	if err != nil {
		return false
	}
	resp, err := p.cfg.Client.Do(req)
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	return resp.StatusCode >= 200 && resp.StatusCode < 300
}

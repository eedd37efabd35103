// Package snapshot is the read path of the agent registry (docs/REGISTRY.md): a Follower holds one
// agent's registrations as a snapshot tagged with the registry revision it reflects, follows the
// changes since that revision in the background (a reconnect costs a delta, not the world), and
// keeps the last good snapshot in memory and on local disk.
//
// A failed refresh never empties it (DESIGN, invariant 17): the snapshot is served stale, with its
// age in turnstile_registry_snapshot_age_seconds, and only past StaleLimit (hours) does Check turn
// the staleness into an error. A Follower created while the registry cannot be reached loads its
// disk copy, so a restart during an outage keeps routing. Resolving endpoints reads the snapshot in
// memory: no I/O on a turn's path.
package snapshot

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/turnstile-run/turnstile/pkg/config"
	"github.com/turnstile-run/turnstile/pkg/lifecycle"
	"github.com/turnstile-run/turnstile/pkg/registry"
)

// Errors Check and Resolve return.
var (
	// ErrNoSnapshot is a follower that has never had a snapshot: the registry has not answered
	// since it started, and there was no disk copy.
	ErrNoSnapshot = errors.New("no registry snapshot yet")
	// ErrStale is a snapshot older than StaleLimit.
	ErrStale = errors.New("registry snapshot too stale")
)

// Defaults no variable sets.
const (
	// RequestTimeoutDefault bounds one request for changes.
	RequestTimeoutDefault = 5 * time.Second
	// BackoffMax caps the wait between failed refreshes (exponential from Refresh, full jitter),
	// as does sixteen times Refresh: a registry back from an outage is followed again within it.
	BackoffMax = 30 * time.Second
	// persistEvery is how often an unchanged snapshot's confirmation time is written to disk, so
	// that a restart's idea of its age stays close to the truth.
	persistEvery = 30 * time.Second
)

// Snapshot is an agent's registrations at a revision. Immutable: a turn that holds one holds it
// for its whole run.
type Snapshot struct {
	Agent    string `json:"agent"`
	Revision int64  `json:"revision"`
	// Instances are the registrations (none removed), by instance ID.
	Instances []registry.Instance `json:"instances"`
	// Fetched is when the registry last confirmed the snapshot.
	Fetched time.Time `json:"fetched"`
	// endpoints are the instances' endpoints, sorted and unique.
	endpoints []string
}

// Endpoints returns the snapshot's endpoints, sorted; the slice is shared and must not be modified.
func (s *Snapshot) Endpoints() []string { return s.endpoints }

// Age is how long ago the registry last confirmed the snapshot.
func (s *Snapshot) Age(now time.Time) time.Duration { return now.Sub(s.Fetched) }

func (s *Snapshot) index() {
	slices.SortFunc(s.Instances, func(a, b registry.Instance) int { return strings.Compare(a.InstanceID, b.InstanceID) })
	s.endpoints = s.endpoints[:0]
	for _, in := range s.Instances {
		s.endpoints = append(s.endpoints, in.Endpoint)
	}
	slices.Sort(s.endpoints)
	s.endpoints = slices.Compact(s.endpoints)
}

// Config tunes a Follower.
type Config struct {
	// URL is the registry's base URL (an intake's). Required.
	URL string
	// Agent is the catalog agent whose registrations are followed. Required.
	Agent string
	// APIKey is an admin's API key, when the registry checks keys.
	APIKey string
	// Refresh is the interval between asks for changes. Defaults to config.RegistryRefreshDefault.
	Refresh time.Duration
	// StaleLimit is the age past which Check and Resolve fail. Defaults to
	// config.RegistryStaleLimitDefault.
	StaleLimit time.Duration
	// Dir keeps the disk copy (<Dir>/<agent>.json); empty keeps none.
	Dir string
	// RequestTimeout defaults to RequestTimeoutDefault.
	RequestTimeout time.Duration
	HTTP           *http.Client
	Log            *slog.Logger
	// Metrics, when set, exports the follower's age, revision, endpoints and refreshes.
	Metrics *Metrics
	// OnRefresh, when set, learns of every refresh: the snapshot after it, and its error. A
	// test signal; it must be fast.
	OnRefresh func(s *Snapshot, err error)
}

// Follower follows one agent's registrations. Start, Stop; safe for concurrent use.
type Follower struct {
	lifecycle.Runner
	cfg     Config
	cur     atomic.Pointer[Snapshot]
	changed chan struct{}
	now     func() time.Time

	mu        sync.Mutex
	persisted time.Time // Fetched of the disk copy
	failures  int
}

// New returns a follower holding its disk copy, if there is one for the agent; it follows the
// registry once started.
func New(cfg Config) (*Follower, error) {
	if cfg.URL == "" || cfg.Agent == "" {
		return nil, errors.New("registry snapshot: URL and Agent are required")
	}
	if cfg.Refresh <= 0 {
		cfg.Refresh = config.RegistryRefreshDefault
	}
	if cfg.StaleLimit <= 0 {
		cfg.StaleLimit = config.RegistryStaleLimitDefault
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = RequestTimeoutDefault
	}
	if cfg.HTTP == nil {
		cfg.HTTP = &http.Client{}
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	f := &Follower{cfg: cfg, changed: make(chan struct{}, 1), now: time.Now}
	f.Runner = lifecycle.Runner{Name: "registry snapshot " + cfg.Agent, Run: f.run}
	if s, err := f.load(); err != nil {
		cfg.Log.Warn("registry snapshot: disk copy not usable", "agent", cfg.Agent, "err", err)
	} else if s != nil {
		f.cur.Store(s)
		f.persisted = s.Fetched
		cfg.Log.Info("registry snapshot loaded from disk", "agent", cfg.Agent, "revision", s.Revision,
			"endpoints", len(s.endpoints), "age", f.now().Sub(s.Fetched).Round(time.Second))
	}
	if cfg.Metrics != nil {
		cfg.Metrics.add(f)
	}
	return f, nil
}

// Agent is the followed agent.
func (f *Follower) Agent() string { return f.cfg.Agent }

// Current is the snapshot held now, nil before the first one.
func (f *Follower) Current() *Snapshot { return f.cur.Load() }

// Check is nil while the snapshot may be routed from: ErrNoSnapshot before the first, ErrStale
// once the registry has not confirmed it for StaleLimit.
func (f *Follower) Check() error {
	s := f.cur.Load()
	switch {
	case s == nil:
		return ErrNoSnapshot
	case s.Age(f.now()) > f.cfg.StaleLimit:
		return fmt.Errorf("%w: agent %s, last confirmed %s ago (limit %s)", ErrStale, f.cfg.Agent,
			s.Age(f.now()).Round(time.Second), f.cfg.StaleLimit)
	}
	return nil
}

// Resolve returns the snapshot's endpoints (the upstream pool's Source); it reads memory only.
// Past the stale limit it fails, and the pool keeps what it had; the turns of the agent then
// fail on Check.
func (f *Follower) Resolve(context.Context) ([]string, error) {
	if err := f.Check(); err != nil {
		return nil, err
	}
	return f.cur.Load().endpoints, nil
}

// Changes is signalled whenever the snapshot's endpoints may have changed (the pool resolves then
// instead of waiting for its interval).
func (f *Follower) Changes() <-chan struct{} { return f.changed }

func (f *Follower) run(ctx context.Context) {
	for ctx.Err() == nil {
		err := f.refresh(ctx)
		wait := f.cfg.Refresh
		f.mu.Lock()
		if err != nil {
			f.failures++
			// Exponential backoff with full jitter: a registry coming back is not met by every
			// worker at once.
			ceiling := min(f.cfg.Refresh<<min(f.failures, 4), BackoffMax)
			wait = rand.N(ceiling) + f.cfg.Refresh/2 //nolint:gosec // jitter needs no cryptographic randomness
		} else {
			f.failures = 0
		}
		f.mu.Unlock()
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
}

// Refresh asks the registry for the changes since the snapshot's revision once, now.
func (f *Follower) Refresh(ctx context.Context) error { return f.refresh(ctx) }

func (f *Follower) refresh(ctx context.Context) error {
	old := f.cur.Load()
	var since int64
	if old != nil {
		since = old.Revision
	}
	ch, err := f.fetch(ctx, since)
	if err != nil {
		if ctx.Err() == nil {
			age := "never"
			if old != nil {
				age = old.Age(f.now()).Round(time.Second).String()
			}
			f.cfg.Log.Warn("registry snapshot refresh failed; serving the last good snapshot", "agent", f.cfg.Agent,
				"err", err, "age", age)
		}
		f.cfg.Metrics.refreshed(f.cfg.Agent, "error")
		f.hook(old, err)
		return err
	}
	next := &Snapshot{Agent: f.cfg.Agent, Revision: ch.Revision, Fetched: f.now()}
	result := "delta"
	switch {
	case ch.Reset || old == nil:
		result = "reset"
		for _, in := range ch.Instances {
			if in.State != registry.StateDeleted {
				next.Instances = append(next.Instances, in)
			}
		}
	default:
		byID := make(map[string]registry.Instance, len(old.Instances)+len(ch.Instances))
		for _, in := range old.Instances {
			byID[in.InstanceID] = in
		}
		for _, in := range ch.Instances {
			if in.State == registry.StateDeleted {
				delete(byID, in.InstanceID)
			} else {
				byID[in.InstanceID] = in
			}
		}
		for _, in := range byID {
			next.Instances = append(next.Instances, in)
		}
	}
	next.index()
	f.cur.Store(next)
	f.cfg.Metrics.refreshed(f.cfg.Agent, result)
	moved := old == nil || !slices.Equal(old.endpoints, next.endpoints)
	if moved {
		f.cfg.Log.Info("registry snapshot changed", "agent", f.cfg.Agent, "revision", next.Revision,
			"endpoints", len(next.endpoints), "reset", result == "reset")
		select {
		case f.changed <- struct{}{}:
		default:
		}
	}
	f.mu.Lock()
	write := old == nil || old.Revision != next.Revision || next.Fetched.Sub(f.persisted) >= persistEvery
	f.mu.Unlock()
	if write {
		if err := f.save(next); err != nil {
			f.cfg.Log.Warn("registry snapshot: disk copy not written", "agent", f.cfg.Agent, "err", err)
		}
	}
	f.hook(next, nil)
	return nil
}

func (f *Follower) hook(s *Snapshot, err error) {
	if f.cfg.OnRefresh != nil {
		f.cfg.OnRefresh(s, err)
	}
}

func (f *Follower) fetch(ctx context.Context, since int64) (registry.Changes, error) {
	var ch registry.Changes
	ctx, cancel := context.WithTimeout(ctx, f.cfg.RequestTimeout)
	defer cancel()
	u := strings.TrimRight(f.cfg.URL, "/") + "/v1/agents/" + url.PathEscape(f.cfg.Agent) + "/instances/changes?since=" +
		strconv.FormatInt(since, 10)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return ch, err
	}
	if f.cfg.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+f.cfg.APIKey)
	}
	resp, err := f.cfg.HTTP.Do(req)
	if err != nil {
		return ch, fmt.Errorf("registry changes: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return ch, fmt.Errorf("registry changes: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return ch, fmt.Errorf("registry changes: %s: %s", resp.Status, bytes.TrimSpace(raw))
	}
	if err := json.Unmarshal(raw, &ch); err != nil {
		return ch, fmt.Errorf("registry changes: decode: %w", err)
	}
	return ch, nil
}

func (f *Follower) path() string {
	return filepath.Join(f.cfg.Dir, f.cfg.Agent+".json")
}

// load reads the disk copy; nil without one.
func (f *Follower) load() (*Snapshot, error) {
	if f.cfg.Dir == "" {
		return nil, nil
	}
	raw, err := os.ReadFile(f.path())
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var s Snapshot
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("%s: %w", f.path(), err)
	}
	if s.Agent != f.cfg.Agent {
		return nil, fmt.Errorf("%s: a snapshot of agent %q", f.path(), s.Agent)
	}
	s.index()
	return &s, nil
}

// save writes s to disk atomically: a temporary file, synced, renamed over the copy, and the
// directory synced, so a crash leaves the old copy or the new one, never a torn one.
func (f *Follower) save(s *Snapshot) error {
	if f.cfg.Dir == "" {
		return nil
	}
	raw, err := json.Marshal(s)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(f.cfg.Dir, 0o750); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(f.cfg.Dir, "."+f.cfg.Agent+"-*.tmp")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) //nolint:errcheck // gone after the rename; removes a failed write
	if _, err := tmp.Write(raw); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), f.path()); err != nil {
		return err
	}
	if d, err := os.Open(f.cfg.Dir); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	f.mu.Lock()
	f.persisted = s.Fetched
	f.mu.Unlock()
	return nil
}

// FromInstances returns a follower holding a snapshot of ins at revision, as if just fetched,
// that never refreshes (Start only waits for Stop). For benchmarks and tests of what routes from a
// snapshot.
func FromInstances(agent string, revision int64, ins []registry.Instance) *Follower {
	cfg := Config{Agent: agent, StaleLimit: config.RegistryStaleLimitDefault, Log: slog.Default()}
	f := &Follower{cfg: cfg, changed: make(chan struct{}, 1), now: time.Now}
	f.Runner = lifecycle.Runner{Name: "registry snapshot " + agent, Run: func(ctx context.Context) { <-ctx.Done() }}
	s := &Snapshot{Agent: agent, Revision: revision, Instances: slices.Clone(ins), Fetched: time.Now()}
	s.index()
	f.cur.Store(s)
	return f
}

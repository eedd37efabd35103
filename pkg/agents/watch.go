package agents

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/turnstile-run/turnstile/pkg/config"
	"github.com/turnstile-run/turnstile/pkg/lifecycle"
)

// Changes is what a new catalog changes against the one before.
type Changes struct {
	// Added and Removed are agents' names. Intake accepts an added agent's turns and refuses a
	// removed one's at once; workers serve an added agent once started with it in
	// TURNSTILE_WORKER_AGENTS.
	Added, Removed []string
	// Live are the changes the running roles apply, as "<agent>: <field>".
	Live []string
	// Restart are the changes that apply only when the workers serving the agent (or, for the
	// default agent, every role) restart, as "<agent>: <field>".
	Restart []string
}

// Empty reports whether nothing changed.
func (c Changes) Empty() bool {
	return len(c.Added)+len(c.Removed)+len(c.Live)+len(c.Restart) == 0
}

// Diff compares two catalogs.
func Diff(old, cur *Catalog) Changes {
	var ch Changes
	if old.Default != cur.Default {
		ch.Restart = append(ch.Restart, "default: "+old.Default+" → "+cur.Default)
	}
	for _, a := range cur.agents {
		b, ok := old.Get(a.Name)
		if !ok {
			ch.Added = append(ch.Added, a.Name)
			continue
		}
		field := func(live bool, name string, x, y any) {
			if reflect.DeepEqual(x, y) {
				return
			}
			if live {
				ch.Live = append(ch.Live, a.Name+": "+name)
			} else {
				ch.Restart = append(ch.Restart, a.Name+": "+name)
			}
		}
		field(true, "version", b.Version, a.Version)
		field(true, "description", b.Description, a.Description)
		field(true, "card", b.Card, a.Card)
		field(true, "assistant", b.Assistant, a.Assistant)
		field(true, "limits.default_deadline", b.Limits.DefaultDeadline, a.Limits.DefaultDeadline)
		field(true, "limits.in_flight", b.Limits.InFlight, a.Limits.InFlight)
		field(true, "limits.max_attempts", b.Limits.MaxAttempts, a.Limits.MaxAttempts)
		field(true, "limits.upstream_total", b.Limits.UpstreamTotal, a.Limits.UpstreamTotal)
		// The workers swap an agent's endpoints in place, unless the change adds or drops its
		// registry snapshot (a follower the worker starts with it) or the adapter changes too.
		field(a.SwapsEndpoints(b), "endpoints", b.Endpoints(), a.Endpoints())
		field(false, "adapter", b.Adapter, a.Adapter)
		field(false, "settings", b.restartSettings(), a.restartSettings())
		field(false, "limits.upstream_initial/max", [2]int{b.Limits.UpstreamInitial, b.Limits.UpstreamMax},
			[2]int{a.Limits.UpstreamInitial, a.Limits.UpstreamMax})
	}
	for _, b := range old.agents {
		if _, ok := cur.Get(b.Name); !ok {
			ch.Removed = append(ch.Removed, b.Name)
		}
	}
	return ch
}

// Watcher holds the current catalog and reloads its file every interval when its content changed.
// It is safe for concurrent use; Start and Stop follow pkg/lifecycle's contract.
type Watcher struct {
	path     string
	cfg      config.Config
	interval time.Duration
	log      *slog.Logger

	cur     atomic.Pointer[Catalog]
	hash    [sha256.Size]byte
	mu      sync.Mutex // guards hash, subs and reloads
	subs    []func(old, cur *Catalog, ch Changes)
	reloads *prometheus.CounterVec
	loop    lifecycle.Loop
}

// NewWatcher loads the catalog (TURNSTILE_AGENTS_FILE, or FromConfig without one) and returns a
// watcher of it; a bad file is an error naming every problem. reg may be nil.
func NewWatcher(cfg config.Config, log *slog.Logger, reg prometheus.Registerer) (*Watcher, error) {
	w := &Watcher{
		path: cfg.AgentsFile, cfg: cfg, interval: cfg.AgentsReloadInterval, log: log,
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "turnstile_agents_reloads_total",
			Help: "Reads of a changed TURNSTILE_AGENTS_FILE, by result: ok (the catalog replaced) or invalid (the last good catalog kept).",
		}, []string{"result"}),
	}
	if w.interval <= 0 {
		w.interval = config.AgentsReloadIntervalDefault
	}
	var raw []byte
	if w.path != "" {
		var err error
		if raw, err = os.ReadFile(w.path); err != nil {
			return nil, fmt.Errorf("read agents file: %w", err)
		}
	}
	c, err := w.parse(raw)
	if err != nil {
		return nil, err
	}
	w.cur.Store(c)
	w.hash = sha256.Sum256(raw)
	if reg != nil {
		w.reloads.WithLabelValues("ok")
		w.reloads.WithLabelValues("invalid")
		reg.MustRegister(w.reloads)
	}
	return w, nil
}

func (w *Watcher) parse(raw []byte) (*Catalog, error) {
	if w.path == "" {
		return FromConfig(w.cfg), nil
	}
	c, err := Parse(raw, w.cfg)
	if err != nil {
		var fe *Error
		if errors.As(err, &fe) {
			fe.Source = w.path
		}
		return nil, err
	}
	c.Source = w.path
	return c, nil
}

// Catalog is the current catalog.
func (w *Watcher) Catalog() *Catalog { return w.cur.Load() }

// Subscribe calls fn after each reload that changed the catalog, from the watcher's goroutine; fn
// must be quick.
func (w *Watcher) Subscribe(fn func(old, cur *Catalog, ch Changes)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.subs = append(w.subs, fn)
}

// Start begins watching the file (nothing to watch without one) and returns at once. Safe twice.
func (w *Watcher) Start(ctx context.Context) error {
	if w.path == "" {
		return nil
	}
	// A bad file is logged and counted by Reload itself.
	reload := func(context.Context) { _ = w.Reload() }
	w.loop.Start(ctx, func(ctx context.Context) { lifecycle.Every(ctx, w.interval, reload) })
	return nil
}

// Stop ends watching and waits for it. Safe twice and before Start.
func (w *Watcher) Stop(ctx context.Context) error { return w.loop.Stop(ctx, "agents watcher") }

// Reload reads the file once and, when its content changed and is good, replaces the catalog. It
// returns the error of a bad file (the last good catalog is kept) and nil otherwise.
func (w *Watcher) Reload() error {
	if w.path == "" {
		return nil
	}
	raw, err := os.ReadFile(w.path)
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		w.reloads.WithLabelValues("invalid").Inc()
		w.log.Error("agents file unreadable; keeping the last good catalog", "file", w.path, "err", err)
		return err
	}
	h := sha256.Sum256(raw)
	if bytes.Equal(h[:], w.hash[:]) {
		return nil
	}
	c, err := w.parse(raw)
	if err != nil {
		// The same bad content is not reported again until it changes.
		w.hash = h
		w.reloads.WithLabelValues("invalid").Inc()
		w.log.Error("agents file refused; keeping the last good catalog", "file", w.path, "err", err)
		return err
	}
	w.hash = h
	old := w.cur.Swap(c)
	ch := Diff(old, c)
	w.reloads.WithLabelValues("ok").Inc()
	if ch.Empty() {
		return nil
	}
	w.log.Info("agents catalog reloaded", "file", w.path, "agents", c.Names(), "added", ch.Added, "removed", ch.Removed, "applied", ch.Live)
	if len(ch.Restart) > 0 {
		w.log.Warn("agents catalog: changes that apply only after the workers serving these agents restart", "changes", ch.Restart)
	}
	for _, fn := range slices.Clone(w.subs) {
		fn(old, c, ch)
	}
	return nil
}

// ReloadsMetric is turnstile_agents_reloads_total.
func (w *Watcher) ReloadsMetric() *prometheus.CounterVec { return w.reloads }

package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/turnstile-run/turnstile/pkg/agents"
	"github.com/turnstile-run/turnstile/pkg/app"
	"github.com/turnstile-run/turnstile/pkg/config"
	"github.com/turnstile-run/turnstile/pkg/kafka"
	"github.com/turnstile-run/turnstile/pkg/lifecycle"
	"github.com/turnstile-run/turnstile/pkg/quota"
	"github.com/turnstile-run/turnstile/pkg/registry/snapshot"
	"github.com/turnstile-run/turnstile/pkg/streams"
	"github.com/turnstile-run/turnstile/pkg/turnstore"
	"github.com/turnstile-run/turnstile/pkg/wire"
	"github.com/turnstile-run/turnstile/services/worker/internal/agent"
	"github.com/turnstile-run/turnstile/services/worker/internal/agent/a2a"
	"github.com/turnstile-run/turnstile/services/worker/internal/agent/demo"
	"github.com/turnstile-run/turnstile/services/worker/internal/agent/httpagent"
	"github.com/turnstile-run/turnstile/services/worker/internal/agent/openai"
	"github.com/turnstile-run/turnstile/services/worker/internal/agent/pool"
	"github.com/turnstile-run/turnstile/services/worker/internal/agent/upstream"
	"github.com/turnstile-run/turnstile/services/worker/internal/batch"
	"github.com/turnstile-run/turnstile/services/worker/internal/cancelwatch"
	"github.com/turnstile-run/turnstile/services/worker/internal/consume"
	"github.com/turnstile-run/turnstile/services/worker/internal/deadletter"
	"github.com/turnstile-run/turnstile/services/worker/internal/execute"
	"github.com/turnstile-run/turnstile/services/worker/internal/history"
	"github.com/turnstile-run/turnstile/services/worker/internal/lease"
	"github.com/turnstile-run/turnstile/services/worker/internal/presence"
	"github.com/turnstile-run/turnstile/services/worker/internal/retention"
	"github.com/turnstile-run/turnstile/services/worker/internal/vacuum"
)

// Role builds the worker from shared deps.
var Role = app.Role{Name: "worker", New: func(ctx context.Context, d *app.Deps) (app.Component, error) { return New(ctx, d) }}

// Worker is the running worker role: its shell (app.Shell) starts its parts, in order the Kafka
// check, the agents catalog, and for each agent it serves (TURNSTILE_WORKER_AGENTS) a lane — the
// agent's upstream pool (for the adapters that call one), lease renewer, batchers and consumer —
// then the cancel watcher, the dead-letter producer and the table upkeep (retention, and the
// vacuumer unless TURNSTILE_WORKER_VACUUM=off), and returns at once: the consumers join their
// groups in the background. Stopping in reverse drains the consumers (see consume.Consumer.Stop)
// before the dead-letter producer, the batchers and the renewers their turns use. A stopped worker
// does not start again: the drain tells the executors to hand off waiting turns at once, for good.
//
// Each lane is the agent's own: its own topic and consumer group (pkg/agents), its own turns in
// flight (the agent's limits.in_flight), attempts and claim and completion statements, so a slow
// or saturated agent never delays another's turns (invariant 16).
type Worker struct {
	*app.Shell
	deps    *app.Deps
	lanes   []*lane
	parts   lifecycle.Group
	kafka   kafkaCheck
	metrics *metrics
	// inFlight counts the records the consumers handle now, for the worker's presence row.
	inFlight atomic.Int64
	presence *presence.Presence
}

// lane is the part of a worker that serves one agent.
type lane struct {
	agent    string
	consumer *consume.Consumer
	exec     *execute.Executor
	upstream liveUpstream
	// spec is the catalog entry the lane runs by; only the catalog watcher's goroutine (apply)
	// changes it after New.
	spec agents.Agent
}

// apply brings a running lane to a reloaded catalog entry: the limits and endpoints a worker
// changes in place (agents.Diff's live changes). The rest waits for a restart, which the catalog
// watcher logs.
func (l *lane) apply(spec agents.Agent, log *slog.Logger) {
	old := l.spec
	var applied []string
	if n := spec.Limits.InFlight; n > 0 && n != old.Limits.InFlight {
		l.consumer.SetMaxInflight(n)
		applied = append(applied, "limits.in_flight")
	}
	if n := spec.Limits.MaxAttempts; n > 0 && n != old.Limits.MaxAttempts {
		l.exec.SetMaxAttempts(n)
		applied = append(applied, "limits.max_attempts")
	}
	if spec.SwapsEndpoints(old) && (spec.Limits.UpstreamTotal != old.Limits.UpstreamTotal || !slices.Equal(spec.Endpoints(), old.Endpoints())) {
		if err := l.upstream.apply(spec); err != nil {
			log.Error("agents catalog: the new endpoints are refused; keeping the old ones", "agent", l.agent, "err", err)
			spec.Settings = old.Settings
		} else {
			if !slices.Equal(spec.Endpoints(), old.Endpoints()) {
				applied = append(applied, "endpoints")
			}
			if spec.Limits.UpstreamTotal != old.Limits.UpstreamTotal {
				applied = append(applied, "limits.upstream_total")
			}
		}
	}
	l.spec = spec
	if len(applied) > 0 {
		log.Info("agents catalog: applied to the running worker", "agent", l.agent, "fields", applied,
			"in_flight", spec.Limits.InFlight, "max_attempts", spec.Limits.MaxAttempts, "endpoints", spec.Endpoints())
	}
}

// New builds a worker: it connects to Postgres (migrating when configured) and prepares the Redis
// publisher, and for each agent it serves the executor with every collaborator its turns use and
// the consumer that hands it records.
func New(ctx context.Context, d *app.Deps) (*Worker, error) {
	cfg := d.Config
	log := d.Log.With("role", "worker")
	pool, err := d.Postgres(ctx)
	if err != nil {
		return nil, err
	}
	rdb, err := d.Redis()
	if err != nil {
		return nil, err
	}
	catalog, err := d.Agents()
	if err != nil {
		return nil, err
	}
	cat := catalog.Catalog()
	served := cfg.WorkerAgentList()
	if len(served) == 0 {
		served = []string{cat.Default}
	}
	m := newMetrics(d.Registry)
	um := newUpstreamMetrics(d.Registry)
	turns := turnstore.New(pool)
	// The publisher's fences are anchored in Postgres's tokens, so they hold through a Redis loss.
	pub := streams.NewPublisher(rdb, cfg.KeyPrefix, cfg.StreamMaxLen, cfg.StreamRetention).WithFencer(turnstore.New(pool))
	cleaner := retention.New(pool, retention.Config{
		Retention: cfg.Retention,
		Interval:  cfg.Worker.RetentionInterval,
		Batch:     cfg.Worker.RetentionBatch,
		OnBatch:   func(n int, _ error) { m.retentionDeleted.Add(float64(n)) },
		ThreadTTL: cfg.LangGraph.ThreadTTL,
		OnThreads: func(n int, _ error) { m.retentionThreads.Add(float64(n)) },
	}, log)
	housekeeping := []lifecycle.Component{cleaner}
	if cfg.Worker.Vacuum == "auto" {
		housekeeping = append(housekeeping, vacuum.New(pool, vacuum.Config{OnVacuum: func(table string, _ int64, took time.Duration, err error) {
			result := "ok"
			if err != nil {
				result = "error"
			}
			m.vacuums.WithLabelValues(table, result).Observe(took.Seconds())
		}}, log))
	}
	w := &Worker{deps: d, metrics: m}
	deadLetters := deadletter.New(cfg.BrokerList())
	var renewers []*lease.Renewer
	watcher := cancelwatch.New(pool, func(id uuid.UUID) {
		for _, r := range renewers {
			r.CancelRequested(id)
		}
	}, log)
	topics := []string{cfg.DLQTopic}
	w.parts.Add("kafka check", &w.kafka).Add("agents catalog", catalog)
	weights, err := cfg.Worker.Weights()
	if err != nil {
		return nil, err
	}
	// The quotas set through /v1/admin/quotas: re-read every TURNSTILE_QUOTA_REFRESH; each lane
	// holds a tenant at its running cap and lets it try again after each refresh.
	quotas := quota.NewWatcher(quota.NewStore(pool), cfg.Worker.QuotaRefresh, cat.Default, log)
	if d.Registry != nil {
		quotas.Register(d.Registry, "worker")
	}
	running := quota.NewCounter(quotas)
	var tokensReg prometheus.Registerer
	if d.Registry != nil {
		tokensReg = d.Registry
	}
	tokens := quota.NewTokenMetrics(tokensReg, cfg.Worker.UsageMetricTenants)
	quotas.OnRefresh(func(*quota.Snapshot) {
		for _, l := range w.lanes {
			l.consumer.Recheck()
		}
	})
	w.parts.Add("quota watcher", quotas)
	seen := map[string]bool{}
	for _, name := range served {
		spec, ok := cat.Get(name)
		switch {
		case !ok:
			return nil, fmt.Errorf("TURNSTILE_WORKER_AGENTS: no agent named %q in the catalog (%s)", name, strings.Join(cat.Names(), ", "))
		case seen[name]:
			continue
		}
		seen[name] = true
		l, renewer, err := w.newLane(ctx, laneDeps{weights: weights, limiter: running.Limiter(name), cfg: cfg, spec: spec, cat: cat, pool: pool, rdb: rdb, turns: turns, pub: pub, dead: deadLetters, um: um, tokens: tokens, log: log})
		if err != nil {
			return nil, fmt.Errorf("agent %s: %w", name, err)
		}
		renewers = append(renewers, renewer)
		topics = append(topics, cat.Topic(cfg.Topic, name))
		w.lanes = append(w.lanes, l)
	}
	// A reload of the agents file reaches each lane: limits and endpoints change in place.
	catalog.Subscribe(func(_, cur *agents.Catalog, _ agents.Changes) {
		for _, l := range w.lanes {
			if spec, ok := cur.Get(l.agent); ok {
				l.apply(spec, log)
			}
		}
	})
	w.kafka.init(cfg, topics, log)
	w.parts.Add("cancel watcher", watcher).Add("dead-letter producer", deadLetters)
	// The consumers last: they start after everything their turns use, and stop first.
	for _, l := range w.lanes {
		w.parts.Add("consumer "+l.agent, l.consumer)
	}
	for _, h := range housekeeping {
		w.parts.Add("table upkeep", h)
	}
	var laneNames []string
	for _, l := range w.lanes {
		laneNames = append(laneNames, l.agent)
	}
	w.presence = presence.New(pool, presence.Config{
		Identity: cfg.InstanceID, Version: app.BuildInfo().Version, Agents: laneNames,
		Interval: cfg.Worker.PresenceInterval,
		InFlight: func() int { return int(w.inFlight.Load()) },
		Drain:    w.drain,
	}, log)
	// Last: it starts once the worker serves, and stops first, saying so in its row.
	w.parts.Add("presence", w.presence)
	log.Info("worker serves agents", "agents", served, "topics", topics[1:])
	w.Shell = app.NewShell(app.ShellConfig{Name: "worker", Parts: &w.parts, Ready: w.ready})
	return w, nil
}

// laneDeps are what a lane shares with the worker's other lanes.
type laneDeps struct {
	// weights are the tenants' weights in the fair scheduler (TURNSTILE_TENANT_WEIGHTS).
	weights map[string]float64
	// limiter holds the lane's tenants at their running caps (pkg/quota).
	limiter *quota.Limiter
	cfg     config.Config
	spec    agents.Agent
	cat     *agents.Catalog
	pool    *pgxpool.Pool
	rdb     redis.UniversalClient
	turns   *turnstore.Store
	pub     *streams.Publisher
	dead    *deadletter.Producer
	um      *upstreamMetrics
	// tokens counts the tokens of the lane's succeeded turns (turnstile_tokens_total).
	tokens *quota.TokenMetrics
	log    *slog.Logger
}

// newLane builds the parts serving one agent and adds all but its consumer to w.parts; it returns
// the lane and its renewer (which the cancel watcher tells of cancels).
func (w *Worker) newLane(ctx context.Context, ld laneDeps) (*lane, *lease.Renewer, error) {
	cfg, spec, m := ld.cfg, ld.spec, w.metrics
	log := ld.log.With("agent", spec.Name)
	var live liveUpstream
	ag, upstreams, err := buildAgentFor(ctx, cfg, spec, ld.um, log, &live)
	if err != nil {
		return nil, nil, err
	}
	store := lease.NewStore(ld.pool, cfg.InstanceID, cfg.LeaseTTL, spec.Limits.MaxAttempts).ForAgent(spec.Name)
	renewer := lease.NewRenewer(store, cfg.Heartbeat, log)
	renewer.OnRenew = func(n int, err error) {
		result := "ok"
		if err != nil {
			result = "error"
		}
		m.renewals.WithLabelValues(result).Inc()
		m.renewedLeases.Add(float64(n))
	}
	claims, completions, publishes := newBatchers(store, ld.turns, ld.pub, log, m)
	name := spec.Name
	inflight := m.inflight.WithLabelValues(name)
	exec := execute.New(execute.Config{
		Leases:        store,
		Turns:         ld.turns,
		Streams:       ld.pub,
		Agent:         ag,
		Renewer:       renewer,
		DeadLetters:   ld.dead,
		Log:           log,
		MaxAttempts:   spec.Limits.MaxAttempts,
		MinUsefulTime: cfg.MinUsefulTime,
		DLQTopic:      cfg.DLQTopic,
		History:       history.New(ld.pool, cfg.Agents.HistoryCacheSessions),
		Prior:         history.NewPriorReader(streams.NewReader(ld.rdb, cfg.KeyPrefix)),
		Claims:        claims,
		Completions:   completions,
		Publishes:     publishes,
		Hooks: execute.Hooks{
			AttemptEnded: func(outcome string, _ int, took time.Duration) { m.attemptEnded(name, outcome, took) },
			DeadLettered: func(reason string) { m.deadLettered.WithLabelValues(reason).Inc() },
			Takeover:     func() { m.takeovers.Inc() },
			Retry:        func(cause string) { m.retries.WithLabelValues(cause).Inc() },
			Blocked:      func() { m.blocked.Inc() },
			Paused:       func() { m.paused.Inc() },
			PublishRetried: func(terminal bool) {
				if terminal {
					m.publishRetries.WithLabelValues("terminal").Inc()
				} else {
					m.publishRetries.WithLabelValues("other").Inc()
				}
			},
			Succeeded: func(tenant string, u wire.Usage) { ld.tokens.Add(tenant, name, u) },
		},
	})
	cons, err := consume.New(consume.Config{
		Brokers:          cfg.BrokerList(),
		Topic:            ld.cat.Topic(cfg.Topic, name),
		Group:            agents.ConsumerGroup(cfg.ConsumerGroup, ld.cat.Default, name),
		InstanceID:       cfg.InstanceID,
		MaxInflight:      spec.Limits.InFlight,
		MaxBuffered:      cfg.Worker.ReadAhead,
		MaxHeld:          cfg.Worker.ReadAhead,
		Scheduler:        cfg.Worker.Scheduler,
		Weights:          ld.weights,
		Limiter:          ld.limiter,
		Held:             exec.AnnounceTenantLimit,
		DrainTimeout:     cfg.DrainTimeout,
		SessionTimeout:   cfg.Worker.SessionTimeout,
		RebalanceTimeout: cfg.Worker.RebalanceTimeout,
		Draining:         exec.Drain,
	}, func(ctx context.Context, rec *kgo.Record) consume.Result {
		inflight.Inc()
		w.inFlight.Add(1)
		defer func() {
			inflight.Dec()
			w.inFlight.Add(-1)
		}()
		return exec.Handle(ctx, rec)
	}, log)
	if err != nil {
		return nil, nil, err
	}
	if upstreams != nil {
		w.parts.Add("upstream pool "+name, upstreams)
	}
	w.parts.Add("lease renewer "+name, renewer).
		Add("claim batcher "+name, claims).Add("completion batcher "+name, completions).Add("publish batcher "+name, publishes)
	return &lane{agent: name, consumer: cons, exec: exec, upstream: live, spec: spec}, renewer, nil
}

// buildAgent is buildAgentFor the single agent of an installation without an agents file.
func buildAgent(ctx context.Context, cfg config.Config, reg prometheus.Registerer, log *slog.Logger) (agent.Agent, *pool.Pool, error) {
	def, _ := agents.FromConfig(cfg).Get("")
	return buildAgentFor(ctx, cfg, def, newUpstreamMetrics(reg), log, nil)
}

// liveUpstream is what of an agent's upstream a reload of the agents file changes in place: the
// pool's endpoints (a pool.Swap, re-read with the adapter's parser) and the total limit.
type liveUpstream struct {
	swap  *pool.Swap
	parse func([]string) ([]pool.Source, error)
	guard *upstream.Guard
}

// apply moves the upstream to spec's endpoints and total limit.
func (u *liveUpstream) apply(spec agents.Agent) error {
	if u.guard != nil && spec.Limits.UpstreamTotal > 0 {
		total := float64(spec.Limits.UpstreamTotal)
		u.guard.Limiter().Resize(total, total)
	}
	if u.swap == nil {
		return nil
	}
	var entries []string
	for _, e := range spec.Endpoints() {
		if strings.TrimSpace(e) != RegistryEndpoint {
			entries = append(entries, e)
		}
	}
	sources, err := u.parse(entries)
	if err != nil {
		return err
	}
	u.swap.Set(sources)
	return nil
}

// buildAgentFor returns the adapter of a catalog agent and, for the adapters that call an
// upstream, the pool of its endpoints (a component the worker starts and stops). Every turn that
// calls the upstream shares one guard: the agent's total limit and retry budget, balancing its
// requests over the pool, whose endpoints each have their own adaptive limit and budget.
//
// live, when not nil, is filled with what an agents-file reload changes in place.
func buildAgentFor(ctx context.Context, cfg config.Config, spec agents.Agent, um *upstreamMetrics, log *slog.Logger, live *liveUpstream) (agent.Agent, *pool.Pool, error) {
	a := spec.Settings
	var p *pool.Pool
	var followers []*snapshot.Follower
	guard := func(single, probe string, parse func([]string) ([]pool.Source, error)) (*upstream.Guard, error) {
		entries := a.AgentEndpointList()
		if len(entries) == 0 {
			entries = []string{single}
		}
		// "registry" names the agent's registrations in the agent registry: a snapshot the
		// worker follows (pkg/registry/snapshot), beside the other sources.
		var rest []string
		for _, e := range entries {
			if strings.TrimSpace(e) != RegistryEndpoint {
				rest = append(rest, e)
				continue
			}
			f, err := snapshot.New(snapshot.Config{
				URL: cfg.RegistryURL(), Agent: spec.Name, APIKey: cfg.Registry.APIKey, Refresh: cfg.Registry.Refresh,
				StaleLimit: cfg.Registry.StaleLimit, Dir: cfg.Registry.SnapshotDirOrDefault(), Log: log,
				Metrics: um.snapshotMetrics(),
			})
			if err != nil {
				return nil, err
			}
			followers = append(followers, f)
		}
		parsed, err := parse(rest)
		if err != nil {
			return nil, fmt.Errorf("TURNSTILE_AGENT_ENDPOINTS: %w", err)
		}
		// The endpoints the file names sit in one Swap, which a reload replaces in place.
		swap := pool.NewSwap(parsed)
		sources := []pool.Source{swap}
		for _, f := range followers {
			sources = append(sources, f)
		}
		switch a.AgentProbePath {
		case "off":
			probe = ""
		case "":
		default:
			probe = a.AgentProbePath
		}
		// The upstream's name labels its metrics: the URL for the single agent of an installation
		// without an agents file, as before agents had names, and the agent's name otherwise.
		name := single
		if name == "" || cfg.AgentsFile != "" {
			name = spec.Name
		}
		obs := um.forName(name, spec.Name)
		p = pool.New(pool.Config{
			Name: name, Policy: pool.Policy(a.AgentPolicy), LoadFactor: a.AgentLoadFactor,
			EjectAfter: a.AgentEjectFailures, EjectTime: a.AgentEjectTime, EjectMaxTime: a.AgentEjectMaxTime,
			PanicThreshold: float64(a.AgentPanicThreshold) / 100, ProbePath: probe, ProbeInterval: a.AgentProbeInterval,
			ResolveInterval: a.AgentResolveInterval, AffinityIdle: a.AgentAffinityIdle, Log: log, Observer: obs,
			Endpoint: upstream.Config{
				RetryRatio: a.UpstreamRetryRatio, RetryReserve: a.UpstreamRetryReserve,
				Limiter: upstream.LimiterConfig{
					Initial: float64(a.UpstreamInitialLimit), Max: float64(a.UpstreamMaxLimit),
					LatencyTarget: a.UpstreamLatencyTarget,
				},
			},
		}, sources...)
		total := float64(a.UpstreamTotalLimit)
		g := upstream.New(upstream.Config{
			Name: name, RetryRatio: a.UpstreamRetryRatio, RetryReserve: a.UpstreamRetryReserve, Picker: p,
			MinUseful: cfg.MinUsefulTime,
			Limiter:   upstream.LimiterConfig{Initial: total, Min: total, Max: total},
		})
		um.collector.add(name, spec.Name, g, p)
		if live != nil {
			*live = liveUpstream{swap: swap, parse: parse, guard: g}
		}
		return g, nil
	}
	plain := func(entries []string) ([]pool.Source, error) { return pool.Parse(entries, nil) }
	pooled := len(a.AgentEndpointList()) > 0
	switch spec.Adapter {
	case "demo":
		return &demo.Agent{Delay: spec.DemoDelay, NoFaults: !cfg.DemoFaultsAllowed()}, nil, nil
	case "openai":
		if (a.OpenAIBaseURL == "" && !pooled) || a.OpenAIModel == "" {
			return nil, nil, errors.New("TURNSTILE_AGENT=openai needs TURNSTILE_OPENAI_BASE_URL (or TURNSTILE_AGENT_ENDPOINTS) and TURNSTILE_OPENAI_MODEL")
		}
		g, err := guard(a.OpenAIBaseURL, "", plain)
		if err != nil {
			return nil, nil, err
		}
		ag, err := openai.New(openai.Config{
			BaseURL: a.OpenAIBaseURL, APIKey: a.OpenAIAPIKey, Model: a.OpenAIModel,
			System: a.OpenAISystem, HeaderTimeout: a.HeaderTimeout, Guard: g,
		})
		return pinned(ag, followers), p, err
	case "http":
		if a.HTTPAgentURL == "" && !pooled {
			return nil, nil, errors.New("TURNSTILE_AGENT=http needs TURNSTILE_HTTP_AGENT_URL (or TURNSTILE_AGENT_ENDPOINTS)")
		}
		g, err := guard(a.HTTPAgentURL, "", plain)
		if err != nil {
			return nil, nil, err
		}
		hc := httpagent.Config{
			URL: a.HTTPAgentURL, HeaderTimeout: a.HeaderTimeout, IdleTimeout: a.HTTPAgentIdleTimeout,
			MaxResponseBytes: a.HTTPAgentMaxBytes, Guard: g,
		}
		if a.HTTPAgentAuthorization != "" {
			hc.Headers = map[string]string{"Authorization": a.HTTPAgentAuthorization}
		}
		ag, err := httpagent.New(hc)
		return pinned(ag, followers), p, err
	case "a2a":
		if a.A2AURL == "" && !pooled {
			return nil, nil, errors.New("TURNSTILE_AGENT=a2a needs TURNSTILE_A2A_URL (or TURNSTILE_AGENT_ENDPOINTS)")
		}
		g, err := guard(a.A2AURL, a2a.ProbePath, a2a.Sources)
		if err != nil {
			return nil, nil, err
		}
		ag, err := a2a.New(ctx, a2a.Config{URL: a.A2AURL, HeaderTimeout: a.HeaderTimeout, Guard: g})
		return pinned(ag, followers), p, err
	default:
		return nil, nil, fmt.Errorf("TURNSTILE_AGENT: unknown agent %q (demo, openai, http, a2a)", spec.Adapter)
	}
}

// RegistryEndpoint is the endpoint entry (an agents file's endpoints, TURNSTILE_AGENT_ENDPOINTS)
// that names the agent's registrations in the agent registry (docs/REGISTRY.md).
const RegistryEndpoint = agents.RegistryEntry

// pinned runs ag's turns pinned to the endpoint their first request went to (pool.Pin), and fails
// a turn with agent.ErrUnavailable when a registry snapshot the agent routes from is past its
// stale limit. Up to the limit, a stale snapshot is routed from.
func pinned(ag agent.Agent, followers []*snapshot.Follower) agent.Agent {
	if ag == nil {
		return nil
	}
	return agent.Func(func(ctx context.Context, turn agent.Turn, history []agent.Message, sink agent.Sink) (agent.Result, error) {
		for _, f := range followers {
			// Without any snapshot yet the pool makes the turn wait for one, within its deadline.
			if err := f.Check(); errors.Is(err, snapshot.ErrStale) {
				return agent.Result{}, fmt.Errorf("%w: %w", agent.ErrUnavailable, err)
			}
		}
		return ag.Run(pool.Pin(ctx), turn, history, sink)
	})
}

// drain is an operator's drain (package presence): the consumers stop as on SIGTERM — no new
// claims, the turns in flight finish within TURNSTILE_DRAIN_TIMEOUT, the rest are handed off and
// the groups left — and the process idles, not ready, until it is restarted. The worker's own Stop
// later finds them stopped.
func (w *Worker) drain(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, w.deps.Config.DrainTimeout+10*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for _, l := range w.lanes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := l.consumer.Stop(ctx); err != nil {
				w.deps.Log.Warn("operator's drain: consumer stop", "agent", l.agent, "err", err)
			}
		}()
	}
	wg.Wait()
}

// ready returns nil once Kafka has answered (the topics exist) and the group has assigned the
// consumer (see consume.Consumer.Waiting); otherwise it says what the worker waits for. The shell
// asks it while the worker runs.
func (w *Worker) ready() error {
	if w.presence != nil && w.presence.Draining() {
		return errors.New("drained by an operator (POST /v1/admin/workers/{identity}/drain): restart the process to serve again")
	}
	if err := w.kafka.ready(); err != nil {
		return err
	}
	for _, l := range w.lanes {
		if err := l.consumer.Waiting(); err != nil {
			return fmt.Errorf("agent %s: %w", l.agent, err)
		}
	}
	return nil
}

// kafkaCheck makes sure, in the background, that Kafka answers and the topics exist (creating
// them if need be), retrying with backoff; until it has, the worker is not ready, and ready says
// why.
type kafkaCheck struct {
	lifecycle.Runner
	brokers    []string
	partitions int32
	topics     []string
	log        *slog.Logger

	mu sync.Mutex
	// err is the last attempt's error; ok says an attempt succeeded.
	err error
	ok  bool
}

func (k *kafkaCheck) init(cfg config.Config, topics []string, log *slog.Logger) {
	k.brokers, k.partitions, k.topics, k.log = cfg.BrokerList(), int32(cfg.Partitions), topics, log
	k.Runner = lifecycle.Runner{Name: "kafka check", Run: k.run}
}

func (k *kafkaCheck) run(ctx context.Context) {
	delay := 100 * time.Millisecond
	for {
		attemptCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := kafka.EnsureTopics(attemptCtx, k.brokers, k.partitions, k.topics...)
		cancel()
		k.mu.Lock()
		k.err, k.ok = err, k.ok || err == nil
		k.mu.Unlock()
		if err == nil || ctx.Err() != nil {
			return
		}
		k.log.Warn("kafka not reachable yet", "brokers", k.brokers, "err", err)
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		delay = min(delay*2, 2*time.Second)
	}
}

func (k *kafkaCheck) ready() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	switch {
	case k.ok:
		return nil
	case k.err != nil:
		return fmt.Errorf("waiting for kafka: %w", k.err)
	default:
		return errors.New("waiting for kafka")
	}
}

// newBatchers returns the group-commit batchers of the hot path: claims and completions (one
// set-based statement per batch) and publishes (one Redis pipeline per batch). See package batch.
func newBatchers(store *lease.Store, turns *turnstore.Store, pub *streams.Publisher, log *slog.Logger, m *metrics) (
	*batch.Batcher[lease.ClaimRequest, lease.Claim],
	*batch.Batcher[lease.Completion, int64],
	*batch.Batcher[[]streams.Message, []streams.PublishResult],
) {
	observe := func(kind string) func(n int, took time.Duration) {
		size, duration := m.batchSize.WithLabelValues(kind), m.batchDuration.WithLabelValues(kind)
		return func(n int, took time.Duration) {
			size.Observe(float64(n))
			duration.Observe(took.Seconds())
		}
	}
	// One claim and one completion statement in flight at a time (classic group commit): with two
	// of each, batches were half as large and the statements contended for WAL and buffer locks;
	// in the peer benchmark one of each cost Postgres a quarter less per turn and ran 1.25× the turns
	// at 64 in flight, and as many at 1,000 (docs/BENCHMARKS.md). Redis publishes keep two: the
	// second round trip overlaps the first, with no locks to contend for.
	claims := batch.New(batch.Config[lease.ClaimRequest, lease.Claim]{
		Name:     "claim batcher",
		Flushers: 1,
		OnBatch:  observe("claim"),
		// A lease acquired for a caller that gave up (its turn context ended while the claim was in
		// flight) is released, so the turn is taken over at once instead of after the lease's TTL.
		Abandoned: func(ctx context.Context, req lease.ClaimRequest, res batch.Result[lease.Claim]) {
			if res.Err != nil || res.Val.Outcome != turnstore.ClaimAcquired {
				return
			}
			ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			if err := turns.ReleaseLease(ctx, req.Env.TurnID, res.Val.Token, true); err != nil && !errors.Is(err, turnstore.ErrFenced) {
				log.Warn("release of an abandoned claim failed; the lease will expire instead", "turn_id", req.Env.TurnID, "err", err)
			}
		},
	}, store.ClaimMany)
	completions := batch.New(batch.Config[lease.Completion, int64]{Name: "completion batcher", Flushers: 1, OnBatch: observe("complete")},
		store.CompleteMany)
	// A publish request is one turn's group of events (see execute.Publisher): a group goes into
	// one batch whole, in order, so the publisher keeps it in order in one script call.
	publishes := batch.New(batch.Config[[]streams.Message, []streams.PublishResult]{Name: "publish batcher", Flushers: 2, OnBatch: observe("publish")},
		func(ctx context.Context, groups [][]streams.Message) []batch.Result[[]streams.PublishResult] {
			// Sized first, so the messages are copied once rather than each time the slice grows.
			n := 0
			for _, g := range groups {
				n += len(g)
			}
			ms := make([]streams.Message, 0, n)
			for _, g := range groups {
				ms = append(ms, g...)
			}
			res := pub.PublishMany(ctx, ms)
			out := make([]batch.Result[[]streams.PublishResult], len(groups))
			for i, g := range groups {
				out[i].Val, res = res[:len(g):len(g)], res[len(g):]
			}
			return out
		})
	return claims, completions, publishes
}

type metrics struct {
	inflight      *prometheus.GaugeVec
	attempts      *prometheus.CounterVec
	duration      *prometheus.HistogramVec
	renewals      *prometheus.CounterVec
	renewedLeases prometheus.Counter
	takeovers     prometheus.Counter
	paused        prometheus.Counter
	retries       *prometheus.CounterVec
	blocked       prometheus.Counter
	deadLettered  *prometheus.CounterVec
	// publishRetries counts further tries of event groups Redis could not take, by kind of group.
	publishRetries *prometheus.CounterVec
	// retentionDeleted counts finished turn rows deleted by retention.
	retentionDeleted prometheus.Counter
	// retentionThreads counts LangGraph threads deleted by retention for being idle.
	retentionThreads prometheus.Counter
	// vacuums times the worker's own VACUUMs (autovacuum off) by table and result.
	vacuums *prometheus.HistogramVec
	// batchSize and batchDuration describe the group-commit batches by kind (claim, complete,
	// publish).
	batchSize     *prometheus.HistogramVec
	batchDuration *prometheus.HistogramVec
	// byOutcome keeps each outcome's attemptSeries once looked up (see attemptEnded).
	byOutcome sync.Map
}

// attemptSeries is one outcome's series of the attempts counter and the duration histogram.
type attemptSeries struct {
	attempts prometheus.Counter
	duration prometheus.Observer
}

// attemptEnded counts an ended attempt of agent and observes its duration under its outcome. Each
// agent and outcome's two series are looked up in their vectors once and kept: WithLabelValues
// checks and hashes the labels and takes the vector's lock on every call, and every turn ends an
// attempt.
func (m *metrics) attemptEnded(agent, outcome string, took time.Duration) {
	key := [2]string{agent, outcome}
	v, ok := m.byOutcome.Load(key)
	if !ok {
		v, _ = m.byOutcome.LoadOrStore(key, attemptSeries{m.attempts.WithLabelValues(agent, outcome), m.duration.WithLabelValues(agent, outcome)})
	}
	s := v.(attemptSeries)
	s.attempts.Inc()
	s.duration.Observe(took.Seconds())
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		inflight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "turnstile_worker_inflight_turns",
			Help: "Turn records being handled by this worker (running, or waiting for another worker's lease), by agent.",
		}, []string{"agent"}),
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "turnstile_worker_attempts_total",
			Help: "Turn attempts by agent and outcome (an attempt started is counted when it ends).",
		}, []string{"agent", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "turnstile_worker_attempt_duration_seconds",
			Help: "Duration of turn attempts by agent and outcome.", Buckets: prometheus.ExponentialBuckets(0.01, 2, 14),
		}, []string{"agent", "outcome"}),
		renewals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "turnstile_worker_lease_renewal_rounds_total",
			Help: "Batched lease renewal statements by result.",
		}, []string{"result"}),
		renewedLeases: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "turnstile_worker_lease_renewals_total",
			Help: "Leases sent for renewal, summed over renewal rounds.",
		}),
		blocked: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "turnstile_worker_claims_blocked_total",
			Help: "Claims refused because an earlier accepted turn of the session was not terminal; the record is held and claimed again when that turn ends.",
		}),
		paused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "turnstile_worker_claims_paused_total",
			Help: "Claims refused because a queue pause covers the turn's tenant or agent; the record is held and claimed again after a pause of up to 5 s.",
		}),
		takeovers: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "turnstile_worker_takeovers_total",
			Help: "Attempts that took a turn over from an earlier attempt whose lease expired while held (its worker died, stalled or was cut off).",
		}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "turnstile_worker_retries_total",
			Help: "Attempts after the first that are no takeover, by cause: released (the earlier attempt failed, or was handed off on drain, and released its lease) or own_lease (the same worker's earlier attempt's lease expired).",
		}, []string{"cause"}),
		deadLettered: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "turnstile_worker_dead_lettered_total",
			Help: "Records written to the dead-letter topic, by reason.",
		}, []string{"reason"}),
		publishRetries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "turnstile_worker_publish_retries_total",
			Help: "Further tries of a group of events Redis could not take, by group: terminal (the turn's outcome is committed; tried for up to 30 s) or other (five tries in all).",
		}, []string{"group"}),
		vacuums: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "turnstile_worker_vacuum_duration_seconds",
			Help:    "VACUUMs the worker ran itself because autovacuum does not cover the table, by table and result.",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 12),
		}, []string{"table", "result"}),
		retentionDeleted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "turnstile_worker_retention_deleted_rows_total",
			Help: "Finished turn rows deleted because they were older than TURNSTILE_RETENTION.",
		}),
		retentionThreads: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "turnstile_worker_retention_deleted_threads_total",
			Help: "LangGraph threads deleted because they were idle longer than TURNSTILE_LANGGRAPH_THREAD_TTL.",
		}),
		batchSize: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "turnstile_worker_batch_size",
			Help:    "Requests per group-commit batch, by kind (claim, complete, publish; a publish request is one turn's group of events).",
			Buckets: prometheus.ExponentialBuckets(1, 2, 10),
		}, []string{"kind"}),
		batchDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "turnstile_worker_batch_duration_seconds",
			Help:    "Round-trip time of group-commit batches, by kind (claim, complete, publish).",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
		}, []string{"kind"}),
	}
	for _, cause := range []string{execute.RetryReleased, execute.RetryOwnLease} {
		m.retries.WithLabelValues(cause)
	}
	// Every reason and group has a series from the start, so a rate over it is 0 rather than absent.
	for _, group := range []string{"terminal", "other"} {
		m.publishRetries.WithLabelValues(group)
	}
	for _, reason := range []string{"failed", "attempts_exhausted", "undecodable", "unstorable"} {
		m.deadLettered.WithLabelValues(reason)
	}
	for _, result := range []string{"ok", "error"} {
		m.renewals.WithLabelValues(result)
	}
	reg.MustRegister(m.batchSize, m.batchDuration, m.retentionDeleted, m.retentionThreads, m.vacuums, m.inflight, m.attempts, m.duration, m.renewals, m.renewedLeases, m.takeovers, m.retries, m.blocked, m.paused, m.deadLettered, m.publishRetries)
	return m
}

package consume

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Config tunes a Consumer.
type Config struct {
	Brokers []string
	Topic   string
	Group   string
	// InstanceID names the member in logs.
	InstanceID string
	// MaxInflight bounds concurrently running turns.
	MaxInflight int
	// MaxBuffered bounds fetched records that could start now but wait for a free slot (the head
	// records of sessions with no running turn). It is shared evenly by the assigned partitions: a
	// partition's fetching pauses when its share is reached. Records queued behind their own
	// session's running turn do not count, or a few busy sessions would fill the buffer and stall
	// every other session of the partition. Defaults to MaxInflight.
	MaxBuffered int
	// MaxHeld bounds every fetched record that has not started, blocked or not, so memory stays
	// bounded even when many records wait behind their sessions' running turns. Shared evenly by the
	// assigned partitions like MaxBuffered. Defaults to 16 × MaxBuffered, at least 1024.
	MaxHeld int
	// DrainTimeout is how long Stop lets running turns finish before handing them off.
	DrainTimeout time.Duration
	// CommitInterval is how often finished offsets are committed. Defaults to 500ms.
	CommitInterval time.Duration
	// SessionTimeout is the group session timeout; the group heartbeat runs at a tenth of it (at
	// most 3s). Zero keeps the client's default (45s).
	SessionTimeout time.Duration
	// RebalanceTimeout is the group rebalance timeout. Zero keeps the client's default (60s).
	RebalanceTimeout time.Duration
	// FetchMaxBytes bounds one fetch response, and so the records the client holds beyond
	// MaxBuffered while fetching is paused. Every record of a fetch is taken at once, so a partition
	// can pass its shares of MaxBuffered and MaxHeld by at most one fetch's part for it. Defaults to
	// 1 MiB (a partition's part: 256 KiB).
	FetchMaxBytes int32
	// ExtraOpts are appended to the client options (tests tune session timeouts).
	ExtraOpts []kgo.Opt
	// Scheduler chooses the next turn among the ready ones: SchedulerFair (the default) or
	// SchedulerArrival.
	Scheduler string
	// Weights are tenants' weights in the fair scheduler: a tenant with weight 2 gets twice the
	// starts of one with weight 1 while both have turns ready. A tenant not named weighs 1.
	Weights map[string]float64
	// Limiter, when set, holds a tenant back at its concurrency quota (see Limiter).
	Limiter Limiter
	// Held, when set, is called (outside the consumer's lock, on a goroutine the consumer owns)
	// with records that could start but wait for their tenant's limit, each once while it waits:
	// the worker announces them (turn.waiting, reason tenant_limit). Stop waits for it to return,
	// so it must bound its own I/O.
	Held func(recs []*kgo.Record)
	// Draining, when set, is called as Stop begins to drain, once fetching has stopped: the worker
	// passes execute.Executor.Drain, which hands off at once the turns that only wait.
	Draining func()
}

// Consumer is the worker's consumer-group member. It has the lifecycle of package lifecycle: the
// group client is built in Start and closed at the end of Stop's drain, so a built consumer holds
// no connection and is no member of the group until Start.
type Consumer struct {
	cfg Config
	// maxInflight is cfg.MaxInflight until SetMaxInflight changes it; guarded by mu.
	maxInflight int
	handle      Handler
	log         *slog.Logger
	onFinish    func()
	// joined is set by the run's first assignment; see Waiting.
	joined atomic.Bool

	// life serialises Start and Stop and guards what they share: done is closed when the last
	// run's drain has ended (nil before the first Start), stopping says that drain has begun, and
	// cancelTurns belongs to that run.
	life        sync.Mutex
	done        chan struct{}
	stopping    bool
	cancelTurns context.CancelCauseFunc
	pollCancel  context.CancelFunc
	// rec is what the consumer keeps to recover from a broker's faults (recover.go).
	rec recovery

	mu sync.Mutex
	// client is the running group client, nil outside a run.
	client   *kgo.Client
	parts    map[partKey]*partState
	sessions map[sessionKey]*session
	// tenants are the tenants of the sessions in sessions; active holds those with a ready
	// session that the limiter does not hold, least virtual time first; vnow is the virtual time
	// of the last start and tseq numbers activations (fair.go).
	tenants map[string]*tenant
	active  tenantHeap
	vnow    float64
	tseq    uint64
	limiter Limiter
	// order lists the assigned partitions' states, sorted by partition, for the round-robin starts
	// and the pause decisions to walk without a lookup each; next is where the round-robin start
	// resumes.
	order []*partState
	next  int
	// bufferedShare and heldShare are each partition's shares of MaxBuffered and MaxHeld.
	bufferedShare int
	heldShare     int
	inflight      int
	closing       bool
	// gen numbers assignments of partitions, so each partition state's gen is unique within the
	// consumer.
	gen uint64

	// turnsCtx is the context of every running turn; cancelled with ErrDraining when the
	// drain grace period ends. Written by Start before the run's goroutines begin.
	turnsCtx context.Context
	turns    sync.WaitGroup
	loops    sync.WaitGroup
}

// New builds a consumer. It connects to nothing and joins no group until Start.
func New(cfg Config, handle Handler, log *slog.Logger) (*Consumer, error) {
	switch {
	case len(cfg.Brokers) == 0:
		return nil, errors.New("create consumer: no brokers")
	case cfg.Topic == "" || cfg.Group == "":
		return nil, errors.New("create consumer: topic and group are required")
	case cfg.MaxInflight <= 0:
		return nil, errors.New("create consumer: MaxInflight must be positive")
	case cfg.Scheduler != "" && cfg.Scheduler != SchedulerFair && cfg.Scheduler != SchedulerArrival:
		return nil, fmt.Errorf("create consumer: unknown scheduler %q", cfg.Scheduler)
	}
	if cfg.Scheduler == "" {
		cfg.Scheduler = SchedulerFair
	}
	if cfg.MaxBuffered == 0 {
		cfg.MaxBuffered = cfg.MaxInflight
	}
	if cfg.MaxHeld == 0 {
		cfg.MaxHeld = max(16*cfg.MaxBuffered, 1024)
	}
	cfg.MaxHeld = max(cfg.MaxHeld, cfg.MaxBuffered)
	if cfg.CommitInterval == 0 {
		cfg.CommitInterval = 500 * time.Millisecond
	}
	if cfg.FetchMaxBytes == 0 {
		cfg.FetchMaxBytes = 1 << 20
	}
	return &Consumer{cfg: cfg, maxInflight: cfg.MaxInflight, handle: handle, log: log, limiter: cfg.Limiter}, nil
}

// clientOpts are the group client's options.
func (c *Consumer) clientOpts() []kgo.Opt {
	cfg := c.cfg
	opts := []kgo.Opt{
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.ConsumerGroup(cfg.Group),
		kgo.ConsumeTopics(cfg.Topic),
		kgo.DisableAutoCommit(),
		kgo.Balancers(kgo.CooperativeStickyBalancer()),
		kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsAssigned(c.assigned),
		kgo.OnPartitionsRevoked(c.revoked),
		kgo.OnPartitionsLost(c.lost),
		// A partition resumed while a fetch is in flight joins the next fetch only: when the fetch in
		// flight asks only for partitions that are caught up, the broker holds it this long, and the
		// resumed partition's backlog waits as long while the others' is worked off.
		kgo.FetchMaxWait(100 * time.Millisecond),
		// Pausing stops new fetches, but one fetch's records may already sit in the client: keep
		// that small, since turn records are small and the backlog belongs in Kafka.
		kgo.FetchMaxBytes(cfg.FetchMaxBytes),
		kgo.FetchMaxPartitionBytes(max(cfg.FetchMaxBytes/4, 1)),
	}
	if cfg.SessionTimeout > 0 {
		opts = append(opts, kgo.SessionTimeout(cfg.SessionTimeout), kgo.HeartbeatInterval(min(cfg.SessionTimeout/10, 3*time.Second)))
	}
	if cfg.RebalanceTimeout > 0 {
		opts = append(opts, kgo.RebalanceTimeout(cfg.RebalanceTimeout))
	}
	return append(opts, cfg.ExtraOpts...)
}

// OnFinish registers a function called after every finished record (for tests and metrics). Call
// it before Start.
func (c *Consumer) OnFinish(f func()) { c.onFinish = f }

// Start builds the group client, which joins the group, and begins consuming. While running, Start
// does nothing; after a Stop whose drain has ended, it starts afresh; while that drain is still
// going (Stop gave up at its deadline), it fails.
func (c *Consumer) Start(ctx context.Context) error {
	c.life.Lock()
	defer c.life.Unlock()
	if c.done != nil {
		select {
		case <-c.done:
		default:
			if c.stopping {
				return errors.New("start consumer: the last run is still draining")
			}
			return nil
		}
	}
	base := context.WithoutCancel(ctx)
	turnsCtx, cancelTurns := context.WithCancelCause(base)
	pollCtx, pollCancel := context.WithCancel(base)
	// The client joins the group as it is built, and its callbacks take mu: they see the fresh
	// state and the client only once both are in place.
	c.mu.Lock()
	c.parts, c.sessions, c.tenants, c.active = map[partKey]*partState{}, map[sessionKey]*session{}, map[string]*tenant{}, nil
	c.order, c.next, c.inflight, c.closing = nil, 0, 0, false
	c.turnsCtx = turnsCtx
	c.joined.Store(false)
	cl, err := kgo.NewClient(c.clientOpts()...)
	c.client = cl
	c.mu.Unlock()
	if err != nil {
		cancelTurns(nil)
		pollCancel()
		return fmt.Errorf("create consumer client: %w", err)
	}
	c.done, c.stopping, c.cancelTurns, c.pollCancel = make(chan struct{}), false, cancelTurns, pollCancel
	c.loops.Add(3)
	go func() { defer c.loops.Done(); c.pollLoop(pollCtx, cl) }()
	go func() { defer c.loops.Done(); c.commitLoop(pollCtx) }()
	go func() { defer c.loops.Done(); c.incarnationLoop(pollCtx, cl) }()
	return nil
}

// Inflight counts running turns.
func (c *Consumer) Inflight() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.inflight
}

// Stop drains: fetching stops, running turns get DrainTimeout to finish, the rest are handed off,
// finished offsets are committed and the member leaves the group. When ctx ends first, the running
// turns are handed off at once and Stop returns ctx's cause; the drain then ends in the background,
// and a later Stop waits for it. Safe twice or before Start.
func (c *Consumer) Stop(ctx context.Context) error {
	c.life.Lock()
	done, cancelTurns := c.done, c.cancelTurns
	if done != nil && !c.stopping {
		c.stopping = true
		go c.drain(done, c.pollCancel, cancelTurns) //nolint:gosec,contextcheck // the drain outlives Stop's context by design: it ends in the background and a later Stop waits for it
	}
	c.life.Unlock()
	if done == nil {
		return nil
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		cancelTurns(ErrDraining)
		return fmt.Errorf("stop consumer: %w", context.Cause(ctx))
	}
}

// drain ends one run and closes done: it belongs to the run it was started for, which Stop waits on.
func (c *Consumer) drain(done chan struct{}, pollCancel context.CancelFunc, cancelTurns context.CancelCauseFunc) {
	defer close(done)
	c.mu.Lock()
	c.closing = true
	cl := c.client
	cl.PauseFetchTopics(c.cfg.Topic)
	for _, s := range c.sessions {
		stopRetry(s) // deferred records stay uncommitted: the next owner reads them again
	}
	c.mu.Unlock()
	pollCancel()
	if c.cfg.Draining != nil {
		c.cfg.Draining()
	}

	turnsDone := make(chan struct{})
	go func() { c.turns.Wait(); close(turnsDone) }()
	grace := time.NewTimer(c.cfg.DrainTimeout)
	defer grace.Stop()
	select {
	case <-turnsDone:
	case <-grace.C:
		c.log.Warn("drain timeout reached; handing off running turns", "inflight", c.Inflight())
		cancelTurns(ErrDraining)
	}
	<-turnsDone
	cancelTurns(nil)
	c.loops.Wait()
	// The finished prefix is committed however Stop ended.
	c.commitPartitions(context.Background(), nil)
	// Close leaves the group, so the partitions move to another member at once.
	cl.Close()
	c.mu.Lock()
	c.client = nil
	c.mu.Unlock()
	c.log.Info("consumer stopped")
}

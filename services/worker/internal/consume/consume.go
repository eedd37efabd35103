package consume

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/turnstile-run/turnstile/services/worker/internal/execute"
	"github.com/turnstile-run/turnstile/services/worker/internal/offsets"
)

// Handler runs one record to its end; see execute.Executor.Handle.
type Handler func(ctx context.Context, rec *kgo.Record) execute.Result

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
	// records of sessions with no running turn); fetching pauses at this bound. Records queued behind
	// their own session's running turn do not count, or a few busy sessions would fill the buffer
	// and stall every other session of the partition. Defaults to MaxInflight.
	MaxBuffered int
	// MaxHeld bounds every fetched record that has not started, blocked or not, so memory stays
	// bounded even when many records wait behind their sessions' running turns; fetching pauses at
	// this bound too. Defaults to 16 × MaxBuffered, at least 1024.
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
	// MaxBuffered while fetching is paused. Defaults to 1 MiB (a partition's share: 256 KiB).
	FetchMaxBytes int32
	// ExtraOpts are appended to the client options (tests tune session timeouts).
	ExtraOpts []kgo.Opt
}

// Consumer is the worker's consumer-group member.
type Consumer struct {
	cfg    Config
	handle Handler
	log    *slog.Logger

	client *kgo.Client

	mu       sync.Mutex
	cond     *sync.Cond
	parts    map[partKey]*partState
	sessions map[sessionKey]*session
	ready    []sessionKey
	inflight int
	buffered int
	paused   bool
	closing  bool

	// turnsCtx is the context of every running turn; cancelled with execute.ErrDraining when the
	// drain grace period ends.
	turnsCtx    context.Context
	cancelTurns context.CancelCauseFunc
	pollCancel  context.CancelFunc
	turns       sync.WaitGroup
	loops       sync.WaitGroup
	started     bool
	stopOnce    sync.Once
	stopErr     error

	onFinish func()
}

type partKey struct {
	topic string
	part  int32
}

type partState struct {
	tracker *offsets.Tracker
	epoch   int32
	// gen changes when the partition is revoked, so completions of turns fetched under an earlier
	// assignment do not touch a later one's tracker.
	gen uint64
}

type sessionKey struct {
	part partKey
	key  string
}

type session struct {
	running bool
	queue   []queued
}

type queued struct {
	rec *kgo.Record
	gen uint64
}

var genCounter uint64

// New builds a consumer. It does not connect until Start.
func New(cfg Config, handle Handler, log *slog.Logger) (*Consumer, error) {
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
	c := &Consumer{cfg: cfg, handle: handle, log: log, parts: map[partKey]*partState{}, sessions: map[sessionKey]*session{}}
	c.cond = sync.NewCond(&c.mu)
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
		kgo.FetchMaxWait(500 * time.Millisecond),
		// Pausing stops new fetches, but one fetch's records may already sit in the client: keep
		// that small, since turn records are small and the backlog belongs in Kafka.
		kgo.FetchMaxBytes(cfg.FetchMaxBytes),
		kgo.FetchMaxPartitionBytes(max(cfg.FetchMaxBytes/4, 1)),
		kgo.RequiredAcks(kgo.AllISRAcks()),
	}
	if cfg.SessionTimeout > 0 {
		opts = append(opts, kgo.SessionTimeout(cfg.SessionTimeout), kgo.HeartbeatInterval(min(cfg.SessionTimeout/10, 3*time.Second)))
	}
	if cfg.RebalanceTimeout > 0 {
		opts = append(opts, kgo.RebalanceTimeout(cfg.RebalanceTimeout))
	}
	opts = append(opts, cfg.ExtraOpts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("create consumer client: %w", err)
	}
	c.client = cl
	return c, nil
}

// Client is the underlying client; the worker also produces dead letters with it.
func (c *Consumer) Client() *kgo.Client { return c.client }

// OnFinish registers a function called after every finished record (for tests and metrics).
func (c *Consumer) OnFinish(f func()) { c.onFinish = f }

// Start joins the group and begins consuming.
func (c *Consumer) Start(ctx context.Context) error {
	base := context.WithoutCancel(ctx)
	c.turnsCtx, c.cancelTurns = context.WithCancelCause(base)
	var pollCtx context.Context
	pollCtx, c.pollCancel = context.WithCancel(base)
	c.started = true
	c.loops.Add(2)
	go func() { defer c.loops.Done(); c.pollLoop(pollCtx) }()
	go func() { defer c.loops.Done(); c.commitLoop(pollCtx) }()
	return nil
}

// Inflight counts running turns.
func (c *Consumer) Inflight() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.inflight
}

func (c *Consumer) pollLoop(ctx context.Context) {
	for {
		c.mu.Lock()
		for !c.closing && c.fullLocked() {
			c.cond.Wait()
		}
		room := min(c.cfg.MaxBuffered-len(c.ready), c.cfg.MaxHeld-c.buffered)
		closing := c.closing
		c.mu.Unlock()
		if closing || ctx.Err() != nil {
			return
		}
		fetches := c.client.PollRecords(ctx, room)
		if fetches.IsClientClosed() || ctx.Err() != nil {
			c.client.AllowRebalance()
			return
		}
		fetches.EachError(func(topic string, part int32, err error) {
			if !errors.Is(err, context.Canceled) {
				c.log.Warn("fetch error", "topic", topic, "partition", part, "err", err)
			}
		})
		c.mu.Lock()
		fetches.EachRecord(c.addLocked)
		c.scheduleLocked()
		c.mu.Unlock()
		c.client.AllowRebalance()
	}
}

// addLocked queues a fetched record behind its session.
func (c *Consumer) addLocked(rec *kgo.Record) {
	pk := partKey{rec.Topic, rec.Partition}
	ps := c.parts[pk]
	if ps == nil {
		// A record for a partition we do not know as assigned: assigned() always runs first, so this
		// only happens for a partition revoked between fetch and now. Leave it to its new owner.
		return
	}
	if !ps.tracker.Add(rec.Offset) {
		return
	}
	ps.epoch = rec.LeaderEpoch
	sk := sessionKey{pk, string(rec.Key)}
	s := c.sessions[sk]
	if s == nil {
		s = &session{}
		c.sessions[sk] = s
	}
	s.queue = append(s.queue, queued{rec: rec, gen: ps.gen})
	c.buffered++
	if !s.running && len(s.queue) == 1 {
		c.ready = append(c.ready, sk)
	}
	c.updatePauseLocked()
}

// scheduleLocked starts ready sessions' head records up to the in-flight limit.
func (c *Consumer) scheduleLocked() {
	for !c.closing && c.inflight < c.cfg.MaxInflight && len(c.ready) > 0 {
		sk := c.ready[0]
		c.ready = c.ready[1:]
		s := c.sessions[sk]
		if s == nil || s.running || len(s.queue) == 0 {
			continue
		}
		q := s.queue[0]
		s.queue = s.queue[1:]
		s.running = true
		c.inflight++
		c.buffered--
		c.turns.Add(1)
		go c.run(sk, q)
	}
	c.updatePauseLocked()
	c.cond.Broadcast()
}

func (c *Consumer) run(sk sessionKey, q queued) {
	defer c.turns.Done()
	res := c.handle(c.turnsCtx, q.rec)
	c.mu.Lock()
	c.inflight--
	if ps := c.parts[sk.part]; ps != nil && ps.gen == q.gen && res == execute.Finished {
		ps.tracker.Done(q.rec.Offset)
	}
	if s := c.sessions[sk]; s != nil {
		s.running = false
		switch {
		case res == execute.HandedOff:
			// Draining: the session's later records must not start before this one, which is now
			// someone else's; drop them so the next owner runs them in order.
			c.buffered -= len(s.queue)
			delete(c.sessions, sk)
		case len(s.queue) == 0:
			delete(c.sessions, sk)
		default:
			c.ready = append(c.ready, sk)
		}
	}
	c.scheduleLocked()
	c.mu.Unlock()
	if c.onFinish != nil {
		c.onFinish()
	}
}

// fullLocked reports whether fetching must pause: enough records could start as soon as a slot
// frees (c.ready holds exactly the sessions whose head record could start), or too many records are
// held in all.
func (c *Consumer) fullLocked() bool {
	return len(c.ready) >= c.cfg.MaxBuffered || c.buffered >= c.cfg.MaxHeld
}

func (c *Consumer) updatePauseLocked() {
	full := c.fullLocked()
	switch {
	case full && !c.paused:
		c.client.PauseFetchTopics(c.cfg.Topic)
		c.paused = true
	case !full && c.paused:
		c.client.ResumeFetchTopics(c.cfg.Topic)
		c.paused = false
	}
}

func (c *Consumer) assigned(ctx context.Context, cl *kgo.Client, assigned map[string][]int32) {
	// Start each partition's tracker at its committed offset (or wherever the client will start).
	committed := cl.CommittedOffsets()
	c.mu.Lock()
	defer c.mu.Unlock()
	for topic, parts := range assigned {
		for _, p := range parts {
			start := int64(-1) // unknown until the first record: nothing is committed before it
			if eo, ok := committed[topic][p]; ok && eo.Offset >= 0 {
				start = eo.Offset
			}
			genCounter++
			c.parts[partKey{topic, p}] = &partState{tracker: offsets.New(start), epoch: -1, gen: genCounter}
		}
	}
	c.log.Info("partitions assigned", "partitions", assigned)
}

func (c *Consumer) revoked(ctx context.Context, cl *kgo.Client, revoked map[string][]int32) {
	c.commitPartitions(ctx, revoked)
	c.forget(revoked)
	c.log.Info("partitions revoked", "partitions", revoked)
}

func (c *Consumer) lost(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
	c.forget(lost)
	c.log.Warn("partitions lost", "partitions", lost)
}

// forget drops the partitions' trackers and their records that have not started.
func (c *Consumer) forget(parts map[string][]int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	drop := map[partKey]bool{}
	for topic, ps := range parts {
		for _, p := range ps {
			drop[partKey{topic, p}] = true
			delete(c.parts, partKey{topic, p})
		}
	}
	for sk, s := range c.sessions {
		if drop[sk.part] {
			c.buffered -= len(s.queue)
			s.queue = nil
			if !s.running {
				delete(c.sessions, sk)
			}
		}
	}
	// Keep c.ready exact: only sessions that still have a record to start.
	ready := c.ready[:0]
	for _, sk := range c.ready {
		if !drop[sk.part] {
			ready = append(ready, sk)
		}
	}
	c.ready = ready
	c.updatePauseLocked()
	c.cond.Broadcast()
}

// commitOffsets collects the commit points that moved.
func (c *Consumer) commitOffsets(only map[string][]int32) map[string]map[int32]kgo.EpochOffset {
	c.mu.Lock()
	defer c.mu.Unlock()
	want := func(pk partKey) bool {
		if only == nil {
			return true
		}
		for _, p := range only[pk.topic] {
			if p == pk.part {
				return true
			}
		}
		return false
	}
	out := map[string]map[int32]kgo.EpochOffset{}
	for pk, ps := range c.parts {
		if !want(pk) {
			continue
		}
		if p, moved := ps.tracker.Commit(); moved {
			if out[pk.topic] == nil {
				out[pk.topic] = map[int32]kgo.EpochOffset{}
			}
			out[pk.topic][pk.part] = kgo.EpochOffset{Epoch: ps.epoch, Offset: p}
		}
	}
	return out
}

func (c *Consumer) commitPartitions(ctx context.Context, only map[string][]int32) {
	offs := c.commitOffsets(only)
	if len(offs) == 0 {
		return
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	var commitErr error
	c.client.CommitOffsetsSync(cctx, offs, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		commitErr = err
		if err == nil {
			commitErr = commitRespErr(resp)
		}
	})
	if commitErr != nil {
		c.log.Warn("offset commit failed; it will be retried", "err", commitErr)
		c.resetCommitted(offs)
	}
}

func commitRespErr(resp *kmsg.OffsetCommitResponse) error {
	if resp == nil {
		return nil
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return fmt.Errorf("commit %s/%d: %w", t.Topic, p.Partition, err)
			}
		}
	}
	return nil
}

// resetCommitted forgets that offs were committed, so the next round tries again.
func (c *Consumer) resetCommitted(offs map[string]map[int32]kgo.EpochOffset) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for topic, ps := range offs {
		for p := range ps {
			if st := c.parts[partKey{topic, p}]; st != nil {
				st.tracker.ForgetCommit()
			}
		}
	}
}

func (c *Consumer) commitLoop(ctx context.Context) {
	t := time.NewTicker(c.cfg.CommitInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			c.commitPartitions(ctx, nil)
		}
	}
}

// Stop drains: fetching stops, running turns get DrainTimeout to finish, the rest are handed off,
// finished offsets are committed and the member leaves the group. Safe twice or before Start.
func (c *Consumer) Stop(ctx context.Context) error {
	c.stopOnce.Do(func() { c.stopErr = c.stop(ctx) })
	return c.stopErr
}

func (c *Consumer) stop(ctx context.Context) error {
	if !c.started {
		c.client.Close()
		return nil
	}
	c.mu.Lock()
	c.closing = true
	c.client.PauseFetchTopics(c.cfg.Topic)
	c.cond.Broadcast()
	c.mu.Unlock()
	c.pollCancel()

	done := make(chan struct{})
	go func() { c.turns.Wait(); close(done) }()
	grace := time.NewTimer(c.cfg.DrainTimeout)
	defer grace.Stop()
	select {
	case <-done:
	case <-grace.C:
		c.log.Warn("drain timeout reached; handing off running turns", "inflight", c.Inflight())
		c.cancelTurns(execute.ErrDraining)
	case <-ctx.Done():
		c.cancelTurns(execute.ErrDraining)
	}
	<-done
	c.cancelTurns(nil)
	c.loops.Wait()
	c.commitPartitions(context.Background(), nil)
	// Close leaves the group, so the partitions move to another member at once.
	c.client.Close()
	c.log.Info("consumer stopped")
	return nil
}

package consume

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/turnstile-run/turnstile/pkg/lifecycle"
	"github.com/turnstile-run/turnstile/services/worker/internal/offsets"
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
	// Draining, when set, is called as Stop begins to drain, once fetching has stopped: the worker
	// passes execute.Executor.Drain, which hands off at once the turns that only wait.
	Draining func()
}

// Consumer is the worker's consumer-group member. It has the lifecycle of package lifecycle: the
// group client is built in Start and closed at the end of Stop's drain, so a built consumer holds
// no connection and is no member of the group until Start.
type Consumer struct {
	cfg      Config
	handle   Handler
	log      *slog.Logger
	onFinish func()
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

	mu sync.Mutex
	// client is the running group client, nil outside a run.
	client   *kgo.Client
	parts    map[partKey]*partState
	sessions map[sessionKey]*session
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

type partKey struct {
	topic string
	part  int32
}

type partState struct {
	pk      partKey
	tracker *offsets.Tracker
	epoch   int32
	// gen changes when the partition is revoked, so completions of turns fetched under an earlier
	// assignment do not touch a later one's tracker.
	gen uint64
	// ready holds exactly the partition's sessions whose head record could start now, the oldest
	// head record (lowest offset) first.
	ready readyHeap
	// held counts the partition's fetched records that have not started.
	held int
	// paused is whether the partition's fetching is paused.
	paused bool
}

type sessionKey struct {
	part partKey
	key  string
}

// session is one session's records in this consumer. The ready heaps and the running turns hold it
// by pointer, so starting a record and finishing it need no lookup of the session map (its keys a
// topic, a partition and a session ID) on the hot path. A session leaves the map (sessions) when
// nothing of it is queued or running; a pointer to it held elsewhere then has an empty queue and
// is never started again.
type session struct {
	sk      sessionKey
	running bool
	queue   []queued
	// deferred are records the handler deferred (Defer), oldest first: held, uncommitted, and
	// put back at the head of queue when a record of the session ends or retry fires. pause is
	// retry's next pause.
	deferred []queued
	retry    *time.Timer
	pause    time.Duration
}

// readySession is a ready session and the offset of its head record.
type readySession struct {
	s      *session
	offset int64
}

// readyHeap orders a partition's ready sessions by their head record's offset, so the turn that has
// waited longest starts first: a session whose turn just finished has its next turn in line by
// when that turn was accepted, not behind every session that became ready meanwhile. That keeps
// the oldest startable turn's wait (the backlog age) as short as the backlog allows.
//
// It is a binary min-heap on offset, written out on the typed slice: container/heap takes and returns
// its elements as interfaces, two allocations a turn.
type readyHeap []readySession

// push adds r.
func (h *readyHeap) push(r readySession) {
	*h = append(*h, r)
	s := *h
	for i := len(s) - 1; i > 0; {
		parent := (i - 1) / 2
		if s[parent].offset <= s[i].offset {
			break
		}
		s[parent], s[i] = s[i], s[parent]
		i = parent
	}
}

// pop removes and returns the session with the lowest offset. The heap must not be empty.
func (h *readyHeap) pop() readySession {
	s := *h
	top, n := s[0], len(s)-1
	s[0], s[n] = s[n], readySession{}
	s = s[:n]
	for i := 0; ; {
		least := i
		if l := 2*i + 1; l < n && s[l].offset < s[least].offset {
			least = l
		}
		if r := 2*i + 2; r < n && s[r].offset < s[least].offset {
			least = r
		}
		if least == i {
			break
		}
		s[i], s[least] = s[least], s[i]
		i = least
	}
	*h = s
	return top
}

type queued struct {
	rec *kgo.Record
	gen uint64
}

// errNotRunning answers a produce while the consumer has no client.
var errNotRunning = errors.New("consumer is not running")

// New builds a consumer. It connects to nothing and joins no group until Start.
func New(cfg Config, handle Handler, log *slog.Logger) (*Consumer, error) {
	switch {
	case len(cfg.Brokers) == 0:
		return nil, errors.New("create consumer: no brokers")
	case cfg.Topic == "" || cfg.Group == "":
		return nil, errors.New("create consumer: topic and group are required")
	case cfg.MaxInflight <= 0:
		return nil, errors.New("create consumer: MaxInflight must be positive")
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
	return &Consumer{cfg: cfg, handle: handle, log: log}, nil
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
		kgo.RequiredAcks(kgo.AllISRAcks()),
	}
	if cfg.SessionTimeout > 0 {
		opts = append(opts, kgo.SessionTimeout(cfg.SessionTimeout), kgo.HeartbeatInterval(min(cfg.SessionTimeout/10, 3*time.Second)))
	}
	if cfg.RebalanceTimeout > 0 {
		opts = append(opts, kgo.RebalanceTimeout(cfg.RebalanceTimeout))
	}
	return append(opts, cfg.ExtraOpts...)
}

// ProduceSync produces with the running group client: the worker dead-letters records with it,
// from the consumer's own turns, which run only while the client does. Outside a run every record
// fails.
func (c *Consumer) ProduceSync(ctx context.Context, rs ...*kgo.Record) kgo.ProduceResults {
	c.mu.Lock()
	cl := c.client
	c.mu.Unlock()
	if cl == nil {
		out := make(kgo.ProduceResults, len(rs))
		for i, r := range rs {
			out[i] = kgo.ProduceResult{Record: r, Err: errNotRunning}
		}
		return out
	}
	return cl.ProduceSync(ctx, rs...)
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
	c.parts, c.sessions = map[partKey]*partState{}, map[sessionKey]*session{}
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
	c.loops.Add(2)
	go func() { defer c.loops.Done(); c.pollLoop(pollCtx, cl) }()
	go func() { defer c.loops.Done(); c.commitLoop(pollCtx) }()
	return nil
}

// Inflight counts running turns.
func (c *Consumer) Inflight() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.inflight
}

// pollLoop takes every fetched record as soon as it arrives. The client hands out a fetch partition
// by partition, so taking a few records at a time would serve one partition's fetched records
// before the next partition's; holding all of them lets the scheduler take turns between
// partitions. What is held stays bounded by the partitions' pauses (pauseLocked): a paused
// partition is not fetched, and PollRecords blocks while every partition is paused.
func (c *Consumer) pollLoop(ctx context.Context, cl *kgo.Client) {
	c.log.Info("waiting for a group assignment; a dead member's partitions move when its session times out",
		"group", c.cfg.Group, "session_timeout", c.sessionTimeout())
	for {
		c.mu.Lock()
		closing := c.closing
		c.mu.Unlock()
		if closing || ctx.Err() != nil {
			return
		}
		fetches := cl.PollRecords(ctx, 0)
		if fetches.IsClientClosed() || ctx.Err() != nil {
			cl.AllowRebalance()
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
		cl.AllowRebalance()
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
		s = &session{sk: sk}
		c.sessions[sk] = s
	}
	s.queue = append(s.queue, queued{rec: rec, gen: ps.gen})
	ps.held++
	if !s.running && len(s.queue) == 1 {
		ps.ready.push(readySession{s, rec.Offset})
	}
}

// scheduleLocked starts ready sessions' head records up to the in-flight limit, taking turns
// between partitions: each pass over the partitions starts at most one record of each, so no
// partition's backlog waits while another's is worked off.
func (c *Consumer) scheduleLocked() {
	for {
		s, q, ok := c.takeLocked()
		if !ok {
			break
		}
		c.turns.Add(1)
		go c.run(c.turnsCtx, s, q)
	}
	c.pauseLocked()
}

// takeLocked takes the head record of the next ready session if the in-flight limit lets it start,
// and marks the session running.
func (c *Consumer) takeLocked() (*session, queued, bool) {
	if c.closing || c.inflight >= c.cfg.MaxInflight {
		return nil, queued{}, false
	}
	s, ps := c.nextReadyLocked()
	if ps == nil {
		return nil, queued{}, false
	}
	q := s.queue[0]
	s.queue = s.queue[1:]
	s.running = true
	c.inflight++
	ps.held--
	return s, q, true
}

// nextReadyLocked takes the next ready session, round-robin by partition and the oldest head record
// first within one; ps is nil when no session is ready.
func (c *Consumer) nextReadyLocked() (*session, *partState) {
	n := len(c.order)
	for i := range n {
		j := (c.next + i) % n
		ps := c.order[j]
		for len(ps.ready) > 0 {
			s := ps.ready.pop().s
			if s.running || len(s.queue) == 0 {
				continue
			}
			c.next = (j + 1) % n
			return s, ps
		}
	}
	return nil, nil
}

// run handles q, a record of session s, and then every record that may start when the one before
// it ends, until none may.
func (c *Consumer) run(ctx context.Context, s *session, q queued) {
	defer c.turns.Done()
	for {
		res := c.handle(ctx, q.rec)
		c.mu.Lock()
		c.finishLocked(s, q, res)
		// The goroutine goes on with the next record that may start, rather than ending while another
		// one is started: a turn's call depth grows a fresh goroutine's stack several times, a copy
		// each time, and a goroutine that stays keeps the stack it has grown.
		next, nextQ, more := c.takeLocked()
		c.scheduleLocked()
		c.mu.Unlock()
		if c.onFinish != nil {
			c.onFinish()
		}
		if !more {
			return
		}
		s, q = next, nextQ
	}
}

// finishLocked records the end of a record's turn: its offset may be committed (if it finished
// under the partition's current assignment) and its session's next record becomes ready. A deferred
// record is held back (see Defer), and the session's deferred records go back to the head of its
// queue when any other of its records ends.
func (c *Consumer) finishLocked(s *session, q queued, res Result) {
	c.inflight--
	ps := c.parts[s.sk.part]
	if ps != nil && ps.gen == q.gen && res == Commit {
		ps.tracker.Done(q.rec.Offset)
	}
	s.running = false
	if res == Defer {
		if ps == nil || ps.gen != q.gen {
			// Revoked meanwhile: the next owner reads it again from the committed offset.
			c.dropEmptyLocked(s)
			return
		}
		s.deferred = append(s.deferred, q)
		ps.held++
		if len(s.queue) > 0 {
			ps.ready.push(readySession{s, s.queue[0].rec.Offset})
			return
		}
		c.armRetryLocked(s)
		return
	}
	if len(s.deferred) > 0 && res == Commit {
		c.requeueDeferredLocked(s)
	}
	// Queued records belong to the partition's current assignment: forget empties the queues of
	// a revoked partition, so a non-empty queue has a partition state.
	switch {
	case res == HandOff:
		// Draining: the session's later records must not start before this one, which is now
		// someone else's; drop them so the next owner runs them in order.
		if ps != nil {
			ps.held -= len(s.queue) + len(s.deferred)
		}
		s.queue, s.deferred = nil, nil
		stopRetry(s)
		delete(c.sessions, s.sk)
	case len(s.queue) == 0:
		c.dropEmptyLocked(s)
	default:
		ps.ready.push(readySession{s, s.queue[0].rec.Offset})
	}
}

// dropEmptyLocked removes s from the session map when nothing of it is queued, deferred or running.
func (c *Consumer) dropEmptyLocked(s *session) {
	if len(s.queue) == 0 && len(s.deferred) == 0 && !s.running {
		stopRetry(s)
		delete(c.sessions, s.sk)
	}
}

// requeueDeferredLocked puts s's deferred records back at the head of its queue, in offset order
// (they were accepted before what is queued behind them), and resets the retry pause.
func (c *Consumer) requeueDeferredLocked(s *session) {
	s.queue = append(s.deferred, s.queue...)
	s.deferred = nil
	stopRetry(s)
	s.pause = 0
}

// armRetryLocked schedules the next try of s's deferred records while nothing of the session runs
// here: one timer per session, whose pause doubles from DeferPauseFirst to DeferPauseLongest.
func (c *Consumer) armRetryLocked(s *session) {
	stopRetry(s)
	s.pause = min(max(2*s.pause, DeferPauseFirst), DeferPauseLongest)
	s.retry = time.AfterFunc(s.pause, func() { c.retryDeferred(s) })
}

// stopRetry stops s's retry timer, if any.
func stopRetry(s *session) {
	if s.retry != nil {
		s.retry.Stop()
		s.retry = nil
	}
}

// retryDeferred hands s's deferred records to the handler again, unless the session runs or was
// forgotten meanwhile, or the consumer is closing.
func (c *Consumer) retryDeferred(s *session) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s.retry = nil
	ps := c.parts[s.sk.part]
	if c.closing || s.running || len(s.deferred) == 0 || ps == nil || c.sessions[s.sk] != s {
		return
	}
	pause := s.pause
	c.requeueDeferredLocked(s)
	s.pause = pause // still nothing else ran: the next pause keeps growing
	ps.ready.push(readySession{s, s.queue[0].rec.Offset})
	c.scheduleLocked()
}

// pauseLocked pauses the fetching of each partition that holds its share of records that could
// start now (ps.ready holds exactly the sessions whose head record could start) or of records in
// all, and resumes the others. Shares rather than one bound for all partitions: with one bound, a
// single partition's fetched records could fill it, fetching would stop for every partition, and
// the others would have nothing to start while that partition's records were worked off.
func (c *Consumer) pauseLocked() {
	var pause, resume map[string][]int32
	for _, ps := range c.order {
		full := len(ps.ready) >= c.bufferedShare || ps.held >= c.heldShare
		switch {
		case full && !ps.paused:
			pause = addPart(pause, ps.pk)
		case !full && ps.paused:
			resume = addPart(resume, ps.pk)
		default:
			continue
		}
		ps.paused = full
	}
	if c.client == nil {
		return
	}
	if pause != nil {
		c.client.PauseFetchPartitions(pause)
	}
	if resume != nil {
		c.client.ResumeFetchPartitions(resume)
	}
}

func addPart(m map[string][]int32, pk partKey) map[string][]int32 {
	if m == nil {
		m = map[string][]int32{}
	}
	m[pk.topic] = append(m[pk.topic], pk.part)
	return m
}

// assignmentChangedLocked rebuilds the round-robin order and the shares after partitions came or
// went.
func (c *Consumer) assignmentChangedLocked() {
	c.order = c.order[:0]
	for _, ps := range c.parts {
		c.order = append(c.order, ps)
	}
	slices.SortFunc(c.order, func(a, b *partState) int {
		return cmp.Or(strings.Compare(a.pk.topic, b.pk.topic), cmp.Compare(a.pk.part, b.pk.part))
	})
	c.next = 0
	n := max(len(c.order), 1)
	c.bufferedShare = max((c.cfg.MaxBuffered+n-1)/n, 1)
	c.heldShare = max((c.cfg.MaxHeld+n-1)/n, 1)
	c.pauseLocked()
}

func (c *Consumer) assigned(_ context.Context, cl *kgo.Client, assigned map[string][]int32) {
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
			c.gen++
			pk := partKey{topic, p}
			c.parts[pk] = &partState{pk: pk, tracker: offsets.New(start), epoch: -1, gen: c.gen}
		}
	}
	c.assignmentChangedLocked()
	if !c.joined.Swap(true) {
		c.log.Info("joined the group", "group", c.cfg.Group)
	}
	c.log.Info("partitions assigned", "partitions", assigned)
}

func (c *Consumer) revoked(ctx context.Context, _ *kgo.Client, revoked map[string][]int32) {
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
	var resume map[string][]int32
	for topic, ps := range parts {
		for _, p := range ps {
			pk := partKey{topic, p}
			drop[pk] = true
			// A pause outlives the assignment in the client: lift it, so the partition is fetched
			// if it comes back. Its ready sessions go with its state.
			if st := c.parts[pk]; st != nil && st.paused {
				resume = addPart(resume, pk)
			}
			delete(c.parts, pk)
		}
	}
	if resume != nil && c.client != nil {
		c.client.ResumeFetchPartitions(resume)
	}
	for sk, s := range c.sessions {
		if drop[sk.part] {
			s.queue, s.deferred = nil, nil
			stopRetry(s)
			if !s.running {
				delete(c.sessions, sk)
			}
		}
	}
	c.assignmentChangedLocked()
}

// commitOffsets collects the commit points that moved.
func (c *Consumer) commitOffsets(only map[string][]int32) (*kgo.Client, map[string]map[int32]kgo.EpochOffset) {
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
	return c.client, out
}

func (c *Consumer) commitPartitions(ctx context.Context, only map[string][]int32) {
	cl, offs := c.commitOffsets(only)
	if cl == nil || len(offs) == 0 {
		return
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	var commitErr error
	cl.CommitOffsetsSync(cctx, offs, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
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
	lifecycle.Every(ctx, c.cfg.CommitInterval, func(ctx context.Context) { c.commitPartitions(ctx, nil) })
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

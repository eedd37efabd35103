package consume

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/turnstile-run/turnstile/pkg/lifecycle/lifecycletest"
	"github.com/turnstile-run/turnstile/pkg/testenv"
)

// gatedHandler runs records until released and checks the scheduling invariants as it goes.
type gatedHandler struct {
	t           *testing.T
	maxInflight int

	mu       sync.Mutex
	gates    map[int64]chan struct{}
	running  map[string]bool
	lastDone map[string]int64
	inflight int
	peak     int
	started  chan int64
	finished chan int64
}

func newGatedHandler(t *testing.T, n, maxInflight int) *gatedHandler {
	h := &gatedHandler{
		t: t, maxInflight: maxInflight, gates: map[int64]chan struct{}{}, running: map[string]bool{},
		lastDone: map[string]int64{}, started: make(chan int64, n), finished: make(chan int64, n),
	}
	for o := range n {
		h.gates[int64(o)] = make(chan struct{})
	}
	return h
}

func (h *gatedHandler) handle(ctx context.Context, rec *kgo.Record) Result {
	key := string(rec.Key)
	h.mu.Lock()
	if h.running[key] {
		h.t.Errorf("two records of session %s run at once", key)
	}
	if last, ok := h.lastDone[key]; ok && last > rec.Offset {
		h.t.Errorf("session %s: offset %d ran after %d", key, rec.Offset, last)
	}
	h.running[key] = true
	h.inflight++
	h.peak = max(h.peak, h.inflight)
	if h.inflight > h.maxInflight {
		h.t.Errorf("%d records in flight, limit %d", h.inflight, h.maxInflight)
	}
	gate := h.gates[rec.Offset]
	h.mu.Unlock()
	h.started <- rec.Offset
	select {
	case <-gate:
	case <-ctx.Done():
		return HandOff
	}
	h.mu.Lock()
	h.running[key] = false
	h.lastDone[key] = rec.Offset
	h.inflight--
	h.mu.Unlock()
	h.finished <- rec.Offset
	return Commit
}

func (h *gatedHandler) release(o int64) { close(h.gates[o]) }

type bundle struct {
	env      *testenv.Env
	producer *kgo.Client
}

func setup(t *testing.T, cfg Config, handle Handler) (*Consumer, *bundle) {
	t.Helper()
	return setupPartitions(t, 1, cfg, handle)
}

func setupPartitions(t *testing.T, partitions int, cfg Config, handle Handler) (*Consumer, *bundle) {
	t.Helper()
	env := testenv.New(t, testenv.Options{Partitions: partitions})
	cfg.Brokers = env.Config.BrokerList()
	cfg.Topic = env.Config.Topic
	cfg.Group = "g-" + env.ID
	cfg.CommitInterval = 20 * time.Millisecond
	if cfg.DrainTimeout == 0 {
		cfg.DrainTimeout = 5 * time.Second
	}
	c, err := New(cfg, handle, env.Log)
	require.NoError(t, err)
	// Small batches, as many intake replicas producing a few turns each would write.
	// Records go to the partition they name, so tests can lay out each partition's backlog.
	producer, err := kgo.NewClient(kgo.SeedBrokers(cfg.Brokers...), kgo.DefaultProduceTopic(cfg.Topic),
		kgo.ProducerBatchMaxBytes(4<<10), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	require.NoError(t, err)
	t.Cleanup(producer.Close)
	return c, &bundle{env: env, producer: producer}
}

func (b *bundle) produce(t *testing.T, keys ...string) {
	t.Helper()
	recs := make([]*kgo.Record, len(keys))
	for i, k := range keys {
		recs[i] = &kgo.Record{Key: []byte(k), Value: []byte(fmt.Sprintf("%s-%d", k, i))}
	}
	require.NoError(t, b.producer.ProduceSync(context.Background(), recs...).FirstErr())
}

func (c *Consumer) commitPoint() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, ps := range c.parts {
		return ps.tracker.CommitPoint()
	}
	return -1
}

// commitPoints are the commit points of every assigned partition.
func (c *Consumer) commitPoints() map[int32]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[int32]int64{}
	for pk, ps := range c.parts {
		out[pk.part] = ps.tracker.CommitPoint()
	}
	return out
}

// startLog records the partition of every started record and checks per-session order and the
// in-flight limit as it goes.
type startLog struct {
	t           *testing.T
	maxInflight int
	work        time.Duration

	mu       sync.Mutex
	starts   []int32
	running  map[string]bool
	last     map[string]int64
	inflight int
}

func (l *startLog) handle(ctx context.Context, rec *kgo.Record) Result {
	key := string(rec.Key)
	l.mu.Lock()
	if l.running[key] {
		l.t.Errorf("two records of session %s run at once", key)
	}
	if last, ok := l.last[key]; ok && last >= rec.Offset {
		l.t.Errorf("session %s: offset %d started after %d", key, rec.Offset, last)
	}
	l.running[key], l.last[key] = true, rec.Offset
	l.inflight++
	if l.inflight > l.maxInflight {
		l.t.Errorf("%d records in flight, limit %d", l.inflight, l.maxInflight)
	}
	l.starts = append(l.starts, rec.Partition)
	l.mu.Unlock()
	// The turn's work: a fixed time, as a slow agent call would take.
	select {
	case <-time.After(l.work):
	case <-ctx.Done():
		return HandOff
	}
	l.mu.Lock()
	l.running[key] = false
	l.inflight--
	l.mu.Unlock()
	return Commit
}

// starvation measures fairness over a start order: for each partition, the most starts of other
// partitions between two of its own (or before its first) while it still had records that had not
// started; and the longest run of starts from one partition.
func starvation(starts []int32, perPartition map[int32]int) (maxGap, maxRun int) {
	left := map[int32]int{}
	gap := map[int32]int{}
	for p, n := range perPartition {
		left[p] = n
	}
	run := 0
	for i, p := range starts {
		for q := range left {
			if q != p && left[q] > 0 {
				gap[q]++
				maxGap = max(maxGap, gap[q])
			}
		}
		gap[p] = 0
		left[p]--
		if i > 0 && starts[i-1] == p {
			run++
		} else {
			run = 1
		}
		maxRun = max(maxRun, run)
	}
	return maxGap, maxRun
}

func TestConsumer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("KeyOrderedConcurrencyAndCommitBelowUnfinished", func(t *testing.T) {
		t.Parallel()
		const n = 40
		h := newGatedHandler(t, n, 3)
		c, b := setup(t, Config{MaxInflight: 3}, h.handle)
		// Four sessions, interleaved, ten records each; offset o belongs to session o%4.
		keys := make([]string, n)
		for o := range keys {
			keys[o] = fmt.Sprintf("s%d", o%4)
		}
		b.produce(t, keys...)
		require.NoError(t, c.Start(ctx))
		defer func() { require.NoError(t, c.Stop(ctx)) }()

		// The first three sessions start; the fourth waits for a slot, not for them.
		first := map[int64]bool{<-h.started: true, <-h.started: true, <-h.started: true}
		require.Equal(t, map[int64]bool{0: true, 1: true, 2: true}, first)
		// Offset 0 stays unfinished while everything of the other sessions finishes.
		h.release(1)
		h.release(2)
		done := 0
		for done < n-n/4 {
			select {
			case o := <-h.started:
				require.NotZero(t, o%4, "session s0 must wait for offset 0")
				h.release(o)
			case <-h.finished:
				done++
			}
		}
		testenv.WaitFor(t, 10*time.Second, "the tracker to settle", func() bool { return c.Inflight() == 1 })
		require.Zero(t, c.commitPoint(), "nothing is committed past the unfinished offset 0")

		// Release session s0 in a random order of gates; it still runs in offset order.
		order := rand.Perm(n / 4)
		for _, i := range order {
			if i > 0 {
				h.release(int64(4 * i))
			}
		}
		h.release(0)
		for range n / 4 {
			<-h.finished
		}
		testenv.WaitFor(t, 10*time.Second, "the commit point to reach the end", func() bool { return c.commitPoint() == n })
		require.Equal(t, 3, h.peak, "sessions run concurrently up to the limit")
	})

	t.Run("PausesAtCapacity", func(t *testing.T) {
		t.Parallel()
		const n = 3000
		h := newGatedHandler(t, n, 4)
		c, b := setup(t, Config{MaxInflight: 4, FetchMaxBytes: 16 << 10}, h.handle)
		keys := make([]string, n)
		for o := range keys {
			keys[o] = fmt.Sprintf("s%d", o)
		}
		b.produce(t, keys...)
		require.NoError(t, c.Start(ctx))
		for range 4 {
			<-h.started
		}
		// The partition's fetching pauses once it holds its share of startable records (all of
		// MaxBuffered, 4, for the only partition), passed by at most the rest of one fetch.
		var buffered int
		testenv.WaitFor(t, 10*time.Second, "the consumer to fill its buffer and pause", func() bool {
			c.mu.Lock()
			defer c.mu.Unlock()
			for _, ps := range c.parts {
				buffered = ps.held
				return ps.paused && ps.held >= 4
			}
			return false
		})
		held := int(c.client.BufferedFetchRecords()) + buffered + 4
		t.Logf("holding %d of %d records while at capacity (%d waiting to start)", held, n, buffered)
		require.Less(t, held, n/5, "the backlog stays in Kafka")
		// Release everything; the consumer resumes and drains the backlog.
		for o := range n {
			h.release(int64(o))
		}
		testenv.WaitFor(t, 60*time.Second, "the backlog to drain", func() bool { return c.commitPoint() == n })
		require.NoError(t, c.Stop(ctx))
		require.NoError(t, c.Stop(ctx), "stop twice")
	})

	t.Run("OldestTurnFirstWithinPartition", func(t *testing.T) {
		t.Parallel()
		h := newGatedHandler(t, 5, 2)
		c, b := setup(t, Config{MaxInflight: 2}, h.handle)
		// Offsets 0..4: a, b, c, a, d. Session a's second turn (3) waits behind its first.
		b.produce(t, "a", "b", "c", "a", "d")
		require.NoError(t, c.Start(ctx))
		defer func() { require.NoError(t, c.Stop(ctx)) }()
		require.Equal(t, map[int64]bool{0: true, 1: true}, map[int64]bool{<-h.started: true, <-h.started: true})
		h.release(0)
		require.Equal(t, int64(2), <-h.started, "c was ready first and is the oldest")
		// a is ready again with offset 3, after d became ready with offset 4: the older turn starts.
		h.release(1)
		require.Equal(t, int64(3), <-h.started, "a's turn was accepted before d's")
		h.release(2)
		require.Equal(t, int64(4), <-h.started)
		h.release(3)
		h.release(4)
		testenv.WaitFor(t, 10*time.Second, "the commit point to reach the end", func() bool { return c.commitPoint() == 5 })
	})

	t.Run("FairAcrossPartitions", func(t *testing.T) {
		t.Parallel()
		// Four partitions with a deep backlog each, far more than one fetch holds: the worker must
		// interleave them rather than work through one partition's fetched records while the
		// others' oldest turns wait.
		const parts, perPart, sessions = 4, 600, 150
		l := &startLog{t: t, maxInflight: 4, work: 2 * time.Millisecond, running: map[string]bool{}, last: map[string]int64{}}
		c, b := setupPartitions(t, parts, Config{MaxInflight: 4, MaxBuffered: 64, FetchMaxBytes: 16 << 10}, l.handle)
		var recs []*kgo.Record
		for p := range int32(parts) {
			for i := range perPart {
				// Each session has four turns, 150 records apart.
				key := fmt.Sprintf("p%d-s%d", p, i%sessions)
				recs = append(recs, &kgo.Record{Partition: p, Key: []byte(key), Value: []byte(fmt.Sprintf("%s-%d", key, i))})
			}
		}
		require.NoError(t, b.producer.ProduceSync(ctx, recs...).FirstErr())
		require.NoError(t, c.Start(ctx))
		testenv.WaitFor(t, 60*time.Second, "every partition to be committed to its end", func() bool {
			cp := c.commitPoints()
			for p := range int32(parts) {
				if cp[p] != perPart {
					return false
				}
			}
			return true
		})
		require.NoError(t, c.Stop(ctx))

		l.mu.Lock()
		defer l.mu.Unlock()
		require.Len(t, l.starts, parts*perPart, "every record started once")
		want := map[int32]int{}
		for p := range int32(parts) {
			want[p] = perPart
		}
		gap, run := starvation(l.starts, want)
		t.Logf("most starts of other partitions while one partition waited: %d; longest run from one partition: %d", gap, run)
		// Taking turns gives a gap of parts-1 (3). A partition runs dry when its next fetch waits
		// behind one in flight, for at most the consumer's fetch wait (100ms, ~200 starts here at
		// 2ms a turn, 4 at once) less the records it still had. Serving the fetched records one
		// partition at a time gives a gap of about (parts-1)×perPart, 1,800.
		require.LessOrEqual(t, gap, 200, "a partition with records waited while the others started %d", gap)
	})

	t.Run("DrainHandsOffAfterTimeout", func(t *testing.T) {
		t.Parallel()
		h := newGatedHandler(t, 2, 2)
		c, b := setup(t, Config{MaxInflight: 2, DrainTimeout: 100 * time.Millisecond}, h.handle)
		b.produce(t, "a", "b")
		require.NoError(t, c.Start(ctx))
		<-h.started
		<-h.started
		h.release(1)
		<-h.finished
		testenv.WaitFor(t, 10*time.Second, "offset 1 to be tracked as done", func() bool { return c.Inflight() == 1 })
		// Offset 0 never finishes: Stop hands it off after the drain timeout and commits below it, so
		// the next member of the group starts there.
		require.NoError(t, c.Stop(ctx))
		next := make(chan int64, 2)
		c2, err := New(c.cfg, func(_ context.Context, rec *kgo.Record) Result {
			next <- rec.Offset
			return Commit
		}, b.env.Log)
		require.NoError(t, err)
		require.NoError(t, c2.Start(ctx))
		// The two records belong to different sessions and run concurrently: compare as a set.
		got := map[int64]bool{<-next: true, <-next: true}
		require.Equal(t, map[int64]bool{0: true, 1: true}, got, "the handed-off record is delivered again, from the commit point 0")
		require.NoError(t, c2.Stop(ctx))
	})

	t.Run("StopBeforeStart", func(t *testing.T) {
		t.Parallel()
		c, _ := setup(t, Config{MaxInflight: 1}, func(context.Context, *kgo.Record) Result { return Commit })
		require.NoError(t, c.Stop(ctx))
		require.NoError(t, c.Stop(ctx))
	})
}

func TestConsumerLifecycle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	finished := func(context.Context, *kgo.Record) Result { return Commit }

	t.Run("NoGroupMemberBeforeStart", func(t *testing.T) {
		t.Parallel()
		idle, b := setupPartitions(t, 2, Config{MaxInflight: 1}, finished)
		// A second member of the same group, started: with the built but unstarted consumer out of
		// the group, it is the only member and is assigned both partitions.
		active, err := New(idle.cfg, finished, b.env.Log)
		require.NoError(t, err)
		require.NoError(t, active.Start(ctx))
		testenv.WaitFor(t, 15*time.Second, "the started member to own both partitions", func() bool {
			return len(active.commitPoints()) == 2
		})
		adm := kadm.NewClient(b.producer)
		groups, err := adm.DescribeGroups(ctx, idle.cfg.Group)
		require.NoError(t, err)
		require.Len(t, groups[idle.cfg.Group].Members, 1, "a consumer that was only built is no member of the group")
		// Start joins: the partitions are shared.
		require.NoError(t, idle.Start(ctx))
		testenv.WaitFor(t, 15*time.Second, "the newly started member to be assigned a partition", func() bool {
			return len(idle.commitPoints()) == 1 && len(active.commitPoints()) == 1
		})
		require.NoError(t, idle.Stop(ctx))
		require.NoError(t, active.Stop(ctx))
	})

	t.Run("ConsumersShareNoState", func(t *testing.T) {
		t.Parallel()
		// Two consumers of one process whose partitions are assigned at the same moment: nothing of
		// one's assignment bookkeeping may be the other's (the race detector watches).
		cl, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1"))
		require.NoError(t, err)
		defer cl.Close()
		cfg := Config{Brokers: []string{"127.0.0.1:1"}, Topic: "t", Group: "g", MaxInflight: 1}
		var cs []*Consumer
		for range 2 {
			c, err := New(cfg, finished, testenv.TestLogger(t))
			require.NoError(t, err)
			c.parts, c.sessions = map[partKey]*partState{}, map[sessionKey]*session{}
			cs = append(cs, c)
		}
		begin := make(chan struct{})
		var wg sync.WaitGroup
		for _, c := range cs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-begin
				c.assigned(ctx, cl, map[string][]int32{"t": {0, 1, 2}})
			}()
		}
		close(begin)
		wg.Wait()
		for _, c := range cs {
			require.Len(t, c.commitPoints(), 3)
			require.NoError(t, c.Stop(ctx))
		}
	})

	t.Run("StopHonoursDeadline", func(t *testing.T) {
		t.Parallel()
		release := make(chan struct{})
		running := make(chan struct{})
		// A turn that ignores its context: Stop's deadline, not the turn, bounds the stop.
		c, b := setup(t, Config{MaxInflight: 1, DrainTimeout: time.Minute}, func(context.Context, *kgo.Record) Result {
			close(running)
			<-release
			return Commit
		})
		b.produce(t, "a")
		require.NoError(t, c.Start(ctx))
		<-running
		stopped := make(chan error, 1)
		go func() {
			sctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
			defer cancel()
			stopped <- c.Stop(sctx)
		}()
		select {
		case err := <-stopped:
			require.ErrorIs(t, err, context.DeadlineExceeded)
			require.ErrorContains(t, err, "stop consumer")
		case <-time.After(10 * time.Second):
			close(release)
			t.Fatal("Stop did not return at its context's deadline while a turn was stuck")
		}
		require.Error(t, c.Start(ctx), "no new run while the last one still drains")
		close(release)
		require.NoError(t, c.Stop(ctx), "a later Stop waits for the drain to end")
		require.NoError(t, c.Start(ctx), "a drained consumer starts again")
		require.NoError(t, c.Stop(ctx))
	})

	t.Run("StartStopStress", func(t *testing.T) {
		t.Parallel()
		c, _ := setup(t, Config{MaxInflight: 1}, finished)
		lifecycletest.Stress(t, c, lifecycletest.Options{Rounds: 5})
	})
}

// TestSetMaxInflight changes a running consumer's in-flight bound, as an agents-file reload does:
// a raised bound starts waiting records at once, and under a lowered one nothing starts until the
// running count is below it (the handler fails the test if more than its bound ever run).
func TestSetMaxInflight(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const n = 8
	h := newGatedHandler(t, n, 2)
	c, b := setup(t, Config{MaxInflight: 2, MaxBuffered: n}, h.handle)
	keys := make([]string, n)
	for o := range keys {
		keys[o] = fmt.Sprintf("s%d", o)
	}
	b.produce(t, keys...)
	require.NoError(t, c.Start(ctx))
	defer func() { require.NoError(t, c.Stop(ctx)) }()
	running := []int64{<-h.started, <-h.started}

	h.mu.Lock()
	h.maxInflight = 5
	h.mu.Unlock()
	c.SetMaxInflight(5)
	running = append(running, <-h.started, <-h.started, <-h.started)

	c.SetMaxInflight(1)
	h.mu.Lock()
	h.maxInflight = 1
	h.mu.Unlock()
	// Four of the five finish; the last keeps the count at the new bound, so nothing starts.
	for _, o := range running[:4] {
		h.release(o)
		<-h.finished
	}
	testenv.WaitFor(t, 10*time.Second, "one record in flight", func() bool { return c.Inflight() == 1 })
	h.release(running[4])
	<-h.finished
	// The other three now run one at a time.
	for range n - 5 {
		o := <-h.started
		h.release(o)
		<-h.finished
	}
	require.Equal(t, 5, h.peak, "the raised bound was used")
}

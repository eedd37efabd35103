package consume

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/turnstile-run/turnstile/pkg/kafka"
	"github.com/turnstile-run/turnstile/pkg/testenv"
)

// recoveryBound is how long a consumer may take to consume again after its topic came back as a
// new incarnation (a recreated topic, or a restarted embedded broker that lost its state). It
// covers the client's metadata refresh that tells the new topic ID, the purge and re-add of the
// topic and the group's rejoin: a few seconds, with room for a loaded machine.
const recoveryBound = 30 * time.Second

// warnCounter is a slog handler that counts the records at warn level and above and passes
// everything on.
type warnCounter struct {
	next  slog.Handler
	warns *atomic.Int64
	mu    *sync.Mutex
	msgs  map[string]int
	first map[string]string
}

func newWarnCounter(next slog.Handler) *warnCounter {
	return &warnCounter{next: next, warns: &atomic.Int64{}, mu: &sync.Mutex{}, msgs: map[string]int{}, first: map[string]string{}}
}

func (w *warnCounter) Enabled(ctx context.Context, l slog.Level) bool { return w.next.Enabled(ctx, l) }

func (w *warnCounter) Handle(ctx context.Context, r slog.Record) error {
	if r.Level >= slog.LevelWarn {
		w.warns.Add(1)
		w.mu.Lock()
		w.msgs[r.Message]++
		n := w.msgs[r.Message]
		if n == 1 {
			var line strings.Builder
			line.WriteString(r.Message)
			r.Attrs(func(a slog.Attr) bool {
				fmt.Fprintf(&line, " %s=%v", a.Key, a.Value)
				return true
			})
			w.first[r.Message] = line.String()
		}
		w.mu.Unlock()
		if n > 20 {
			return nil // the test fails on the count; keep its output readable
		}
	}
	return w.next.Handle(ctx, r)
}

func (w *warnCounter) WithAttrs(as []slog.Attr) slog.Handler {
	c := *w
	c.next = w.next.WithAttrs(as)
	return &c
}

func (w *warnCounter) WithGroup(name string) slog.Handler {
	c := *w
	c.next = w.next.WithGroup(name)
	return &c
}

// firstLines are the first record of each message at warn level and above, with its attributes.
func (w *warnCounter) firstLines() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]string, 0, len(w.first))
	for _, l := range w.first {
		out = append(out, l)
	}
	return out
}

func (w *warnCounter) counts() map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string]int, len(w.msgs))
	for k, v := range w.msgs {
		out[k] = v
	}
	return out
}

// valueSink collects the values of handled records.
type valueSink struct {
	mu   sync.Mutex
	seen map[string]bool
}

func (s *valueSink) handle(_ context.Context, rec *kgo.Record) Result {
	s.mu.Lock()
	s.seen[string(rec.Value)] = true
	s.mu.Unlock()
	return Commit
}

func (s *valueSink) has(vals []string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, v := range vals {
		if !s.seen[v] {
			return false
		}
	}
	return true
}

// produceIncarnation produces a record per value with a fresh client (a producer that wrote to the old
// incarnation of the topic refuses the new one: that is the client's documented hard failure,
// which the producers' side handles on its own) and returns the values.
func produceIncarnation(t *testing.T, brokers []string, topic, prefix string, n int) []string {
	t.Helper()
	cl, err := kgo.NewClient(kafka.ProducerOpts(brokers)...)
	require.NoError(t, err)
	defer cl.Close()
	vals := make([]string, n)
	recs := make([]*kgo.Record, n)
	for i := range n {
		vals[i] = fmt.Sprintf("%s-%d", prefix, i)
		recs[i] = &kgo.Record{Topic: topic, Key: []byte(fmt.Sprintf("s%d", i)), Value: []byte(vals[i])}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, cl.ProduceSync(ctx, recs...).FirstErr())
	return vals
}

// recreateTopic deletes the topic and creates it again with as many partitions. On a real Kafka
// the deletion completes in the background, so the creation is retried while the name is taken.
func recreateTopic(t *testing.T, brokers []string, topic string, partitions int32) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	require.NoError(t, err)
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	resp, err := adm.DeleteTopics(ctx, topic)
	require.NoError(t, err)
	require.NoError(t, resp.Error())
	for {
		cr, err := adm.CreateTopic(ctx, partitions, -1, nil, topic)
		if err == nil && cr.Err == nil {
			return
		}
		if err == nil && !errors.Is(cr.Err, kerr.TopicAlreadyExists) {
			require.NoError(t, cr.Err)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("recreate topic %s: %v / %v", topic, err, cr.Err)
		case <-time.After(200 * time.Millisecond): // a real broker deletes in the background; nothing to wait on
		}
	}
}

// TestConsumerRecoversNewTopicIncarnation reproduces issue 43's broker restart at the consumer: a
// running member whose topic comes back as a new incarnation — deleted and recreated (kadm; on a
// real Kafka too, with TURNSTILE_KAFKA_BROKERS), or the embedded broker stopped and started again
// on its address, which loses the topic, the group and the offsets — consumes the new
// incarnation's records within recoveryBound, without being restarted, and does not log the
// fetch error it meets meanwhile once per fetch.
func TestConsumerRecoversNewTopicIncarnation(t *testing.T) {
	for _, tc := range []struct {
		name    string
		restart bool
		// idle: the member has committed everything when the topic goes, so no commit of its own
		// tells it first; the fetch error does.
		idle bool
	}{
		{name: "TopicRecreated"},
		{name: "TopicRecreatedIdle", idle: true},
		{name: "BrokerRestarted", restart: true},
		{name: "BrokerRestartedIdle", restart: true, idle: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if tc.restart && os.Getenv("TURNSTILE_KAFKA_BROKERS") != "" {
				t.Skip("restarts the embedded broker only")
			}
			const partitions = 2
			sink := &valueSink{seen: map[string]bool{}}
			c, b := setupPartitions(t, partitions, Config{MaxInflight: 4}, sink.handle)
			var broker *kafka.Broker
			if tc.restart {
				// A broker on an address of its own, which a restart keeps, as the broker role's does.
				broker = kafka.NewBroker(b.env.Log, testenv.FreeAddr(t), 1, partitions, c.cfg.Topic)
				require.NoError(t, broker.Start(context.Background()))
				t.Cleanup(func() { _ = broker.Stop(context.Background()) })
				c.cfg.Brokers = broker.Addrs()
			}
			counter := newWarnCounter(b.env.Log.Handler())
			c.log = slog.New(counter)
			lifecycleStart(t, c)

			before := produceIncarnation(t, c.cfg.Brokers, c.cfg.Topic, "before", 8)
			testenv.WaitFor(t, 30*time.Second, "the first incarnation's records", func() bool { return sink.has(before) })
			if tc.idle {
				testenv.WaitFor(t, 30*time.Second, "every offset committed", func() bool { return allCommitted(t, c) })
			}

			if tc.restart {
				require.NoError(t, broker.Stop(context.Background()))
				require.NoError(t, broker.Start(context.Background()))
			} else {
				recreateTopic(t, c.cfg.Brokers, c.cfg.Topic, partitions)
			}
			back := time.Now()
			warnsBefore := counter.warns.Load()
			after := produceIncarnation(t, c.cfg.Brokers, c.cfg.Topic, "after", 8)
			deadline := time.Now().Add(recoveryBound)
			for !sink.has(after) {
				if time.Now().After(deadline) {
					t.Fatalf("the new incarnation's records were not consumed within %v; %d warnings meanwhile: %v; first of each: %q",
						recoveryBound, counter.warns.Load()-warnsBefore, counter.counts(), counter.firstLines())
				}
				waitABit()
			}
			took := time.Since(back)
			t.Logf("recovered in %v (bound %v); warnings meanwhile: %v", took.Round(time.Millisecond), recoveryBound, counter.counts())
			for msg, n := range counter.counts() {
				if strings.Contains(msg, "fetch error") {
					require.LessOrEqual(t, n, maxRateLimited(took), "%q is logged with a rate limit, never per fetch", msg)
				}
			}
		})
	}
}

// allCommitted reports whether the group's committed offsets are the topic's end offsets.
func allCommitted(t *testing.T, c *Consumer) bool {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.cfg.Brokers...))
	require.NoError(t, err)
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ends, err := adm.ListEndOffsets(ctx, c.cfg.Topic)
	if err != nil {
		return false
	}
	committed, err := adm.FetchOffsets(ctx, c.cfg.Group)
	if err != nil {
		return false
	}
	all := true
	ends.Each(func(o kadm.ListedOffset) {
		got, ok := committed.Lookup(o.Topic, o.Partition)
		all = all && ok && got.At == o.Offset
	})
	return all
}

// maxRateLimited is how many lines a rate-limited repeated error may log in d: its first one and
// one per repeatedErrorEvery, plus one for a clock edge, per partition and kind at most.
func maxRateLimited(d time.Duration) int {
	return 4 * (2 + int(d/repeatedErrorEvery))
}

// waitABit paces a poll of a condition that has no signal to wait on (records consumed by a
// member whose recovery this test measures).
func waitABit() { <-time.After(20 * time.Millisecond) }

// lifecycleStart starts c and stops it at cleanup.
func lifecycleStart(t *testing.T, c *Consumer) {
	t.Helper()
	require.NoError(t, c.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_ = c.Stop(ctx)
	})
}

// TestConsumerRateLimitsRepeatedFetchErrors fails every fetch of the topic's partitions for a
// while (kfake's fault injection: a partition error the client does not retry by itself, so each
// poll returns it). The member logs the error once per kind and interval, not once per partition
// and fetch, and consumes again once the fault is gone.
func TestConsumerRateLimitsRepeatedFetchErrors(t *testing.T) {
	t.Parallel()
	if os.Getenv("TURNSTILE_KAFKA_BROKERS") != "" {
		t.Skip("injects faults into the embedded broker")
	}
	const partitions = 2
	sink := &valueSink{seen: map[string]bool{}}
	c, b := setupPartitions(t, partitions, Config{MaxInflight: 4}, sink.handle)
	counter := newWarnCounter(b.env.Log.Handler())
	c.log = slog.New(counter)
	lifecycleStart(t, c)
	before := produceIncarnation(t, c.cfg.Brokers, c.cfg.Topic, "before", 4)
	testenv.WaitFor(t, 30*time.Second, "the records before the fault", func() bool { return sink.has(before) })

	fault := b.env.KfakeCluster().Fault(kfake.Fault{
		Keys: []kmsg.Key{kmsg.Fetch}, Topic: c.cfg.Topic, Err: kerr.TopicAuthorizationFailed, Count: -1,
	})
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, fault.Wait(ctx, 20), "fetches keep failing")
	fault.Remove()
	took := time.Since(start)
	lines := counter.counts()["fetch error"]
	t.Logf("%d failed fetches in %v: %d fetch-error lines; first: %q", fault.Hits(), took.Round(time.Millisecond), lines, counter.firstLines())
	require.Positive(t, lines, "the error is logged")
	require.LessOrEqual(t, lines, 1+int(took/repeatedErrorEvery)+1, "one line per kind and interval, not one per fetch")

	after := produceIncarnation(t, c.cfg.Brokers, c.cfg.Topic, "after", 4)
	testenv.WaitFor(t, 30*time.Second, "the records after the fault", func() bool { return sink.has(after) })
}

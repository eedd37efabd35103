package hub_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/turnstile-run/turnstile/pkg/lifecycle/lifecycletest"
	"github.com/turnstile-run/turnstile/pkg/streams"
	"github.com/turnstile-run/turnstile/pkg/testenv"
	"github.com/turnstile-run/turnstile/pkg/wire"
	"github.com/turnstile-run/turnstile/services/gateway/internal/hub"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
		goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).reaper"),
	)
}

type bundle struct {
	rdb    *redis.Client
	prefix string
	reader *streams.Reader
	pub    *streams.Publisher
}

// setup returns a hub whose last-resort resync is an hour away, so every delivery a test sees
// was caused by a notification or a resubscription.
func setup(t *testing.T) (*hub.Hub, *bundle) {
	t.Helper()
	return setupWith(t, hub.Config{Buffer: 8, Resync: time.Hour})
}

func setupWith(t *testing.T, cfg hub.Config) (*hub.Hub, *bundle) {
	t.Helper()
	url := os.Getenv("TURNSTILE_REDIS_URL")
	if url == "" {
		url = "redis://127.0.0.1:6379/0"
	}
	opts, err := redis.ParseURL(url)
	require.NoError(t, err)
	prefix := "ts-hub-" + testenv.RandomHex(5)
	opts.ClientName = prefix // finds the hub's Pub/Sub connection in CLIENT LIST
	rdb := redis.NewClient(opts)
	t.Cleanup(func() {
		testenv.DeletePrefix(context.Background(), rdb, prefix)
		_ = rdb.Close()
	})
	b := &bundle{
		rdb: rdb, prefix: prefix, reader: streams.NewReader(rdb, prefix),
		pub: streams.NewPublisher(rdb, prefix, 10000, time.Hour),
	}
	h := hub.New(cfg, rdb, b.reader, slog.New(slog.NewTextHandler(io.Discard, nil)))
	return h, b
}

// appendSilently adds an entry to the session's stream like the publish script does, but without
// its notification: what a feed misses when a notification is lost.
func (b *bundle) appendSilently(t *testing.T, session string) {
	t.Helper()
	data, _ := json.Marshal(map[string]any{"turn_id": "t", "attempt": 1, "index": 99})
	require.NoError(t, b.rdb.XAdd(context.Background(), &redis.XAddArgs{
		Stream: streams.KeysFor(b.prefix, sk(session)).Events,
		Values: map[string]any{"type": "turn.delta", "turn": "t", "data": string(data)},
	}).Err())
}

// killPubSub closes the hub's Pub/Sub connection from the server side, as a Redis restart or a
// network fault would.
func (b *bundle) killPubSub(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	list, err := b.rdb.ClientList(ctx).Result()
	require.NoError(t, err)
	killed := 0
	for _, line := range strings.Split(list, "\n") {
		fields := map[string]string{}
		for _, kv := range strings.Fields(line) {
			k, v, _ := strings.Cut(kv, "=")
			fields[k] = v
		}
		if fields["name"] == b.prefix && fields["sub"] != "" && fields["sub"] != "0" {
			require.NoError(t, b.rdb.Do(ctx, "CLIENT", "KILL", "ID", fields["id"]).Err())
			killed++
		}
	}
	require.Equal(t, 1, killed, "the hub holds one Pub/Sub connection")
}

// await waits until s has received n deliveries in all and returns them.
func await(t *testing.T, s *hub.Subscriber, got []*hub.Delivery, n int) []*hub.Delivery {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for len(got) < n {
		select {
		case <-s.Ready:
		case <-timeout:
			t.Fatalf("%d of %d deliveries", len(got), n)
		}
		var lost bool
		got, lost = s.Next(got)
		require.False(t, lost)
	}
	return got
}

func (b *bundle) publish(t *testing.T, session string, n int) {
	t.Helper()
	for i := range n {
		data, _ := json.Marshal(map[string]any{"turn_id": "t", "attempt": 1, "index": i})
		_, err := b.pub.Publish(context.Background(), sk(session), "t", 1, wire.Event{Type: "turn.delta", Data: data}, "")
		require.NoError(t, err)
	}
}

func TestHub(t *testing.T) {
	t.Parallel()

	t.Run("StopBeforeStartAndTwice", func(t *testing.T) {
		t.Parallel()
		h, _ := setup(t)
		require.NoError(t, h.Stop(context.Background()))
		require.NoError(t, h.Start(context.Background()))
		require.NoError(t, h.Stop(context.Background()))
		require.NoError(t, h.Stop(context.Background()))
		_, err := h.Subscribe(context.Background(), sk("s"))
		require.Error(t, err, "a stopped hub takes no subscribers")
	})

	t.Run("OneFeedPerSession", func(t *testing.T) {
		t.Parallel()
		h, b := setup(t)
		require.NoError(t, h.Start(context.Background()))
		defer func() { _ = h.Stop(context.Background()) }()
		var subs []*hub.Subscriber
		for range 20 {
			s, err := h.Subscribe(context.Background(), sk("one"))
			require.NoError(t, err)
			subs = append(subs, s)
		}
		other, err := h.Subscribe(context.Background(), sk("two"))
		require.NoError(t, err)
		require.Equal(t, 2, h.Sessions())
		require.Equal(t, 21, h.Subscribers())

		b.publish(t, "one", 3)
		var first *hub.Delivery
		for _, s := range subs {
			var got []*hub.Delivery
			for len(got) < 3 {
				select {
				case <-s.Ready:
				case <-time.After(10 * time.Second):
					t.Fatal("no delivery")
				}
				var lost bool
				got, lost = s.Next(got)
				require.False(t, lost)
			}
			require.Len(t, got, 3)
			if first == nil {
				first = got[0]
			}
			require.Same(t, first, got[0], "deliveries are shared, not copied per subscriber")
		}
		for _, s := range subs {
			h.Unsubscribe(s)
		}
		h.Unsubscribe(other)
		require.Equal(t, 0, h.Sessions())
	})

	t.Run("SubscribeFunc", func(t *testing.T) {
		t.Parallel()
		h, b := setup(t)
		require.NoError(t, h.Start(context.Background()))
		defer func() { _ = h.Stop(context.Background()) }()
		_, err := h.SubscribeFunc(context.Background(), sk("f"), nil)
		require.Error(t, err, "a nil wake function is refused")
		woken := make(chan struct{}, 1)
		s, err := h.SubscribeFunc(context.Background(), sk("f"), func() {
			select { // called under the feed's lock: it must not block
			case woken <- struct{}{}:
			default:
			}
		})
		require.NoError(t, err)
		defer h.Unsubscribe(s)
		require.Nil(t, s.Ready, "a function subscriber has no channel")
		b.publish(t, "f", 2)
		var got []*hub.Delivery
		for len(got) < 2 {
			select {
			case <-woken:
			case <-time.After(10 * time.Second):
				t.Fatalf("%d of 2 deliveries: the wake function was not called", len(got))
			}
			var lost bool
			got, lost = s.Next(got)
			require.False(t, lost)
		}
		require.Len(t, got, 2)
	})

	t.Run("ReconnectRereads", func(t *testing.T) {
		t.Parallel()
		h, b := setup(t)
		require.NoError(t, h.Start(context.Background()))
		defer func() { _ = h.Stop(context.Background()) }()
		s, err := h.Subscribe(context.Background(), sk("s"))
		require.NoError(t, err)
		defer h.Unsubscribe(s)
		b.publish(t, "s", 1)
		got := await(t, s, nil, 1)

		// An entry whose notification never came stays unread until the Pub/Sub connection
		// drops: the subscription confirmed again on the new connection makes the feed re-read.
		b.appendSilently(t, "s")
		b.killPubSub(t)
		got = await(t, s, got, 2)
		require.Equal(t, "turn.delta", string(got[1].Type))
	})

	t.Run("ResyncRereads", func(t *testing.T) {
		t.Parallel()
		h, b := setupWith(t, hub.Config{Buffer: 8, Resync: 50 * time.Millisecond})
		require.NoError(t, h.Start(context.Background()))
		defer func() { _ = h.Stop(context.Background()) }()
		s, err := h.Subscribe(context.Background(), sk("s"))
		require.NoError(t, err)
		defer h.Unsubscribe(s)
		b.appendSilently(t, "s")
		await(t, s, nil, 1)
	})

	t.Run("FallingBehindIsLost", func(t *testing.T) {
		t.Parallel()
		h, b := setup(t)
		require.NoError(t, h.Start(context.Background()))
		defer func() { _ = h.Stop(context.Background()) }()
		slow, err := h.Subscribe(context.Background(), sk("s"))
		require.NoError(t, err)
		fast, err := h.Subscribe(context.Background(), sk("s"))
		require.NoError(t, err)
		defer h.Unsubscribe(slow)
		defer h.Unsubscribe(fast)
		var got []*hub.Delivery
		for i := 0; i < 20; i++ {
			b.publish(t, "s", 1)
			for len(got) < i+1 {
				<-fast.Ready
				var lost bool
				got, lost = fast.Next(got)
				require.False(t, lost, "a subscriber that keeps up is never lost")
			}
		}
		_, lost := slow.Next(nil)
		require.True(t, lost, "20 entries behind a ring of 8")
	})
}

// TestHubReadsWokenFeedsTogether: feeds woken while a read is under way are read together, in one
// round trip for the batch rather than one per session.
func TestHubReadsWokenFeedsTogether(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, b := setup(t)
	stall := &stallHook{entered: make(chan struct{}), release: make(chan struct{})}
	rdb := redis.NewClient(b.rdb.Options())
	rdb.AddHook(stall)
	defer func() { _ = rdb.Close() }()
	h := hub.New(hub.Config{Buffer: 8, Resync: time.Hour, Readers: 1, ReadBatch: 64}, rdb, streams.NewReader(rdb, b.prefix), testenv.TestLogger(t))
	require.NoError(t, h.Start(ctx))
	defer func() { require.NoError(t, h.Stop(ctx)) }()
	const sessions = 150
	subs := make([]*hub.Subscriber, sessions)
	for i := range subs {
		s, err := h.Subscribe(ctx, sk("s"+strconv.Itoa(i)))
		require.NoError(t, err)
		defer h.Unsubscribe(s)
		subs[i] = s
	}
	// Subscribing woke every feed once (its own subscription's confirmation); let those reads end.
	// An empty queue alone is not enough: a confirmation dispatched late would put its feed in the
	// batch the stall holds below, where no publication can queue it.
	require.Eventually(t, func() bool { return h.Quiet(sessions) }, 10*time.Second, time.Millisecond)

	stall.armed.Store(true)
	// Registered after the hub's Stop, so it runs first: a failure below must not leave the reader
	// held and Stop waiting for it.
	defer stall.unblock()
	b.publish(t, "s0", 1)
	<-stall.entered // the one reader is held in the read of s0
	for i := 1; i < sessions; i++ {
		b.publish(t, "s"+strconv.Itoa(i), 1)
	}
	// Every other feed (s0's is being read).
	require.Eventually(t, func() bool { return h.Queued() >= sessions-1 }, 10*time.Second, time.Millisecond,
		"every other feed waits for the reader")
	stall.armed.Store(false)
	stall.reads.Store(0)
	stall.unblock()
	for _, s := range subs {
		await(t, s, nil, 1)
	}
	// The 149 in batches of at most 64 (3 round trips), with room for reads that subscription
	// confirmations arriving late caused; one read per session would be 149.
	require.LessOrEqual(t, stall.reads.Load(), int64(sessions/10), "round trips for %d woken sessions", sessions)
}

// stallHook holds every pipeline of a Redis client, whatever its context, from when it is armed
// until release is closed: a stuck Redis call of the hub's.
type stallHook struct {
	reads   atomic.Int64 // pipelines seen
	armed   atomic.Bool
	entered chan struct{}
	once    sync.Once
	release chan struct{}
	freed   sync.Once
}

// unblock closes release, once.
func (h *stallHook) unblock() { h.freed.Do(func() { close(h.release) }) }

func (h *stallHook) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (h *stallHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (h *stallHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.reads.Add(1)
		if h.armed.Load() {
			h.once.Do(func() { close(h.entered) })
			<-h.release
		}
		return next(ctx, cmds)
	}
}

func TestHubLifecycle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("StopHonoursDeadline", func(t *testing.T) {
		t.Parallel()
		_, b := setup(t)
		// The hub reads through a client of its own whose reads can be made to hang.
		stall := &stallHook{entered: make(chan struct{}), release: make(chan struct{})}
		rdb := redis.NewClient(b.rdb.Options())
		rdb.AddHook(stall)
		defer func() { _ = rdb.Close() }()
		h := hub.New(hub.Config{Buffer: 8, Resync: time.Hour}, rdb, streams.NewReader(rdb, b.prefix), testenv.TestLogger(t))
		require.NoError(t, h.Start(ctx))
		s, err := h.Subscribe(ctx, sk("s"))
		require.NoError(t, err)
		stall.armed.Store(true)
		b.publish(t, "s", 1)
		<-stall.entered // the feed's read of the new entry hangs
		stopped := make(chan error, 1)
		go func() {
			sctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
			defer cancel()
			stopped <- h.Stop(sctx)
		}()
		select {
		case err := <-stopped:
			require.ErrorIs(t, err, context.DeadlineExceeded)
			require.ErrorContains(t, err, "stop hub")
		case <-time.After(10 * time.Second):
			close(stall.release)
			t.Fatal("Stop did not return at its context's deadline while a feed's read hung")
		}
		require.Error(t, h.Start(ctx), "no new run while the last one's goroutines still end")
		close(stall.release)
		require.NoError(t, h.Stop(ctx), "a later Stop waits for the stuck read to end")
		h.Unsubscribe(s)
	})

	t.Run("RestartServesAgain", func(t *testing.T) {
		t.Parallel()
		h, b := setup(t)
		for range 2 {
			require.NoError(t, h.Start(ctx))
			s, err := h.Subscribe(ctx, sk("s"))
			require.NoError(t, err)
			b.publish(t, "s", 1)
			await(t, s, nil, 1)
			h.Unsubscribe(s)
			require.NoError(t, h.Stop(ctx))
		}
	})

	t.Run("StartStopStress", func(t *testing.T) {
		t.Parallel()
		h, _ := setup(t)
		lifecycletest.Stress(t, h, lifecycletest.Options{Rounds: 10})
	})
}

// sk is the key of session s of the tests' tenant: the hub takes keys, and the tests name sessions
// by their IDs.
func sk(s string) wire.SessionKey { return wire.NewSessionKey("t", s) }

package execute

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/streams"
	"github.com/turnstile-run/turnstile/pkg/testenv"
	"github.com/turnstile-run/turnstile/pkg/wire"
	"github.com/turnstile-run/turnstile/services/worker/internal/agent"
	"github.com/turnstile-run/turnstile/services/worker/internal/agent/agenttest"
	"github.com/turnstile-run/turnstile/services/worker/internal/consume"
	"github.com/turnstile-run/turnstile/services/worker/internal/lease"
)

// signalTimeout bounds a test's wait for a signal that the code under test should give at once:
// long enough for a loaded CI machine, far longer than heldLinger, so a wait that ends in it shows
// the signal did not come.
const signalTimeout = 10 * time.Second

// publisherFunc is a function as a Publisher.
type publisherFunc func(ctx context.Context, ms []streams.Message) ([]streams.PublishResult, error)

func (f publisherFunc) Do(ctx context.Context, ms []streams.Message) ([]streams.PublishResult, error) {
	return f(ctx, ms)
}

// completerFunc is a function as a Completer.
type completerFunc func(ctx context.Context, c lease.Completion) (int64, error)

func (f completerFunc) Do(ctx context.Context, c lease.Completion) (int64, error) { return f(ctx, c) }

// onPublished wraps x's publisher: once a group holding an event of type typ was accepted, the
// returned channel is closed.
func onPublished(x *Executor, typ wire.EventType) <-chan struct{} {
	inner, done, once := x.cfg.Publishes, make(chan struct{}), sync.Once{}
	x.cfg.Publishes = publisherFunc(func(ctx context.Context, ms []streams.Message) ([]streams.PublishResult, error) {
		res, err := inner.Do(ctx, ms)
		if err == nil && slices.ContainsFunc(ms, func(m streams.Message) bool { return m.Event.Type == typ }) {
			once.Do(func() { close(done) })
		}
		return res, err
	})
	return done
}

// TestHeldEventsWaitForNothingSlower checks that the events an attempt holds back (turn.started and
// a quick agent's deltas) wait neither for the completion's commit nor, with an agent that calls
// its upstream, for the linger: the tests make the linger longer than they last, so only the
// flushes under test can publish the held events in time.
func TestHeldEventsWaitForNothingSlower(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{Partitions: 1})
	ctx := context.Background()
	completed := []wire.EventType{wire.EventStarted, wire.EventDelta, wire.EventCompleted}

	t.Run("TurnStartedGoesOutBeforeTheUpstreamAnswers", func(t *testing.T) {
		t.Parallel()
		var startedFirst atomic.Bool
		var startedOut <-chan struct{}
		f := newUpstreamFixture(t, env, fixtureOptions{}, func(int) agenttest.ChatAnswer {
			// The model's first token waits for turn.started to reach Redis.
			startedFirst.Store(received(startedOut))
			return agenttest.ChatAnswer{Words: []string{"hi"}}
		})
		f.x.linger = forever
		startedOut = onPublished(f.x, wire.EventStarted)
		rec, turn := f.record(t, time.Minute)
		require.Equal(t, consume.Commit, f.x.Handle(ctx, rec))
		require.True(t, startedFirst.Load(), "turn.started was published while the upstream request was under way")
		require.Equal(t, completed, types(f.events(t, turn.SessionID)))
	})

	// quickFixture is an executor whose agent answers at once with one word; the completion runs
	// first through commit (which may wait on a signal), then through the lease store.
	quickFixture := func(t *testing.T) (*upstreamFixture, *func(ctx context.Context) error) {
		f := newUpstreamFixture(t, env, fixtureOptions{}, func(int) agenttest.ChatAnswer { return agenttest.ChatAnswer{} })
		f.x.linger = forever
		f.x.agent = agent.Func(func(ctx context.Context, _ agent.Turn, _ []agent.Message, sink agent.Sink) (agent.Result, error) {
			return agent.Result{Text: "hi"}, sink.Delta(ctx, "hi")
		})
		before := func(context.Context) error { return nil }
		inner := f.x.cfg.Completions
		f.x.cfg.Completions = completerFunc(func(ctx context.Context, c lease.Completion) (int64, error) {
			if err := before(ctx); err != nil {
				return 0, err
			}
			return inner.Do(ctx, c)
		})
		return f, &before
	}

	t.Run("AQuickAgentsFirstDeltaDoesNotWaitForTheCommit", func(t *testing.T) {
		t.Parallel()
		f, before := quickFixture(t)
		deltaOut := onPublished(f.x, wire.EventDelta)
		var deltaFirst bool
		*before = func(context.Context) error {
			deltaFirst = received(deltaOut)
			return nil
		}
		rec, turn := f.record(t, time.Minute)
		require.Equal(t, consume.Commit, f.x.Handle(ctx, rec))
		require.True(t, deltaFirst, "the delta was published before the completion committed")
		require.Equal(t, completed, types(f.events(t, turn.SessionID)))
		require.Zero(t, f.chat.Requests())
	})

	t.Run("TurnCompletedWaitsForTheHeldGroup", func(t *testing.T) {
		t.Parallel()
		f, before := quickFixture(t)
		committed := make(chan struct{})
		*before = func(context.Context) error {
			close(committed) // the held group is let through only now: the commit overtakes it
			return nil
		}
		inner := f.x.cfg.Publishes
		f.x.cfg.Publishes = publisherFunc(func(ctx context.Context, ms []streams.Message) ([]streams.PublishResult, error) {
			if ms[0].Event.Type == wire.EventStarted && !received(committed) {
				t.Error("the completion never ran")
			}
			return inner.Do(ctx, ms)
		})
		rec, turn := f.record(t, time.Minute)
		require.Equal(t, consume.Commit, f.x.Handle(ctx, rec))
		require.Equal(t, completed, types(f.events(t, turn.SessionID)), "turn.completed followed the held group")
	})
}

// sinkOnly hides a sink's optional interfaces (agent.Flusher among them) from the agent.
type sinkOnly struct{ agent.Sink }

// BenchmarkStartedBehindUpstream times turn.started of turns whose agent is the OpenAI-compatible
// adapter and whose model's first token comes 100 ms after the request: from Handle to turn.started
// accepted by Redis, median and p90 per run. Flush is the worker as it is (the guard flushes the
// sink before the request); NoFlush hides the sink's Flush from the agent, so turn.started waits
// for heldLinger; LingerZero holds nothing back at all. Run with -benchtime 30x.
func BenchmarkStartedBehindUpstream(b *testing.B) {
	env := testenv.New(b, testenv.Options{Partitions: 1})
	ctx := context.Background()
	for _, c := range []struct {
		name    string
		linger  time.Duration
		noFlush bool
	}{
		{"Flush", 0, false},
		{"NoFlush", 0, true},
		{"LingerZero", time.Nanosecond, false},
	} {
		b.Run(c.name, func(b *testing.B) {
			f := newUpstreamFixture(b, env, fixtureOptions{}, func(int) agenttest.ChatAnswer {
				<-time.After(100 * time.Millisecond) // the model's time to its first token
				return agenttest.ChatAnswer{Words: []string{"hi"}}
			})
			f.x.linger = c.linger
			if c.noFlush {
				inner := f.x.agent
				f.x.agent = agent.Func(func(ctx context.Context, turn agent.Turn, h []agent.Message, sink agent.Sink) (agent.Result, error) {
					return inner.Run(ctx, turn, h, sinkOnly{sink})
				})
			}
			// The turns run one at a time: startedAt is the running turn's.
			var mu sync.Mutex
			var startedAt time.Time
			inner := f.x.cfg.Publishes
			f.x.cfg.Publishes = publisherFunc(func(ctx context.Context, ms []streams.Message) ([]streams.PublishResult, error) {
				res, err := inner.Do(ctx, ms)
				if err == nil && ms[0].Event.Type == wire.EventStarted {
					mu.Lock()
					startedAt = time.Now()
					mu.Unlock()
				}
				return res, err
			})
			took := make([]time.Duration, 0, b.N)
			for range b.N {
				rec, _ := f.record(b, time.Minute)
				mu.Lock()
				startedAt = time.Time{}
				mu.Unlock()
				begin := time.Now()
				require.Equal(b, consume.Commit, f.x.Handle(ctx, rec))
				mu.Lock()
				at := startedAt
				mu.Unlock()
				require.False(b, at.IsZero(), "turn.started was published")
				took = append(took, at.Sub(begin))
			}
			slices.Sort(took)
			b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "started-p50-ms")
			b.ReportMetric(float64(took[len(took)*9/10].Microseconds())/1000, "started-p90-ms")
		})
	}
}

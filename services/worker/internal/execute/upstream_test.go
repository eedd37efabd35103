package execute

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/turnstile-run/turnstile/pkg/streams"
	"github.com/turnstile-run/turnstile/pkg/testenv"
	"github.com/turnstile-run/turnstile/pkg/turnstore"
	"github.com/turnstile-run/turnstile/pkg/wire"
	"github.com/turnstile-run/turnstile/services/worker/internal/agent/agenttest"
	"github.com/turnstile-run/turnstile/services/worker/internal/agent/openai"
	"github.com/turnstile-run/turnstile/services/worker/internal/agent/upstream"
	"github.com/turnstile-run/turnstile/services/worker/internal/consume"
	"github.com/turnstile-run/turnstile/services/worker/internal/lease"
)

// logRecorder is a slog handler that keeps every record, for tests that check what a turn logs.
type logRecorder struct {
	mu      sync.Mutex
	records []slog.Record
}

func (l *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecorder) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logRecorder) WithGroup(string) slog.Handler            { return l }
func (l *logRecorder) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	l.records = append(l.records, r.Clone())
	l.mu.Unlock()
	return nil
}

// find returns the attributes of the first record at level with message msg, nil when none.
func (l *logRecorder) find(level slog.Level, msg string) map[string]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range l.records {
		if r.Level != level || r.Message != msg {
			continue
		}
		attrs := map[string]string{}
		r.Attrs(func(a slog.Attr) bool {
			attrs[a.Key] = a.Value.String()
			return true
		})
		return attrs
	}
	return nil
}

// upstreamFixture is an executor on real Postgres and Redis whose agent is the OpenAI-compatible
// agent in front of a fake chat completions server.
type upstreamFixture struct {
	x      *Executor
	chat   *agenttest.ChatServer
	reader *streams.Reader
	logs   *logRecorder
	store  *lease.Store
	owner  string
}

type fixtureOptions struct {
	maxAttempts  int
	retryBackoff time.Duration
	hooks        Hooks
	// log, when set, is the executor's logger instead of the fixture's recorder; deadLetters, when
	// set, receives its dead letters.
	log         *slog.Logger
	deadLetters DeadLetterer
}

func newUpstreamFixture(t testing.TB, env *testenv.Env, o fixtureOptions, answer func(n int) agenttest.ChatAnswer) *upstreamFixture {
	t.Helper()
	if o.maxAttempts == 0 {
		o.maxAttempts = 3
	}
	if o.retryBackoff == 0 {
		o.retryBackoff = 10 * time.Millisecond
	}
	chat := agenttest.NewChatServer(t, answer)
	guard := upstream.New(upstream.Config{Name: "fake-chat", Backoff: 10 * time.Millisecond})
	ag, err := openai.New(openai.Config{BaseURL: chat.URL + "/v1", Model: "m", Guard: guard})
	require.NoError(t, err)
	owner := "w-" + testenv.RandomHex(4)
	store := lease.NewStore(env.Pool, owner, 10*time.Second, o.maxAttempts)
	renewer := lease.NewRenewer(store, time.Second, env.Log)
	require.NoError(t, renewer.Start(context.Background()))
	t.Cleanup(func() { _ = renewer.Stop(context.Background()) })
	logs := &logRecorder{}
	log := slog.New(logs)
	if o.log != nil {
		log = o.log
	}
	x := New(Config{
		Leases: store, Turns: turnstore.New(env.Pool), Streams: streams.NewPublisher(env.Redis, env.Config.KeyPrefix, 1000, time.Hour),
		Agent: ag, Renewer: renewer, Log: log, Hooks: o.hooks, DeadLetters: o.deadLetters, DLQTopic: "turns.dlq",
		MaxAttempts: o.maxAttempts, MinUsefulTime: 100 * time.Millisecond, RetryBackoff: o.retryBackoff,
	})
	return &upstreamFixture{x: x, chat: chat, reader: streams.NewReader(env.Redis, env.Config.KeyPrefix), logs: logs, store: store, owner: owner}
}

// record returns a turn record of a fresh session whose deadline is d from now.
func (f *upstreamFixture) record(t testing.TB, d time.Duration) (*kgo.Record, wire.Envelope) {
	t.Helper()
	now := time.Now()
	env := wire.Envelope{
		Version: 1, TurnID: uuid.Must(uuid.NewV7()), SessionID: "up-" + testenv.RandomHex(6), Tenant: "default",
		Input: wire.Input{Text: "hi"}, Deadline: now.Add(d), AcceptedAt: now,
	}
	b, err := env.Encode()
	require.NoError(t, err)
	return &kgo.Record{Topic: "turns", Key: []byte(env.SessionID), Value: b}, env
}

// events returns the session stream's entries (the stream of the default tenant's session).
func (f *upstreamFixture) events(t *testing.T, sessionID string) []streams.Entry {
	t.Helper()
	entries, err := f.reader.After(context.Background(), wire.NewSessionKey(wire.DefaultTenant, sessionID), streams.EntryID{}, 1000)
	require.NoError(t, err)
	return entries
}

func types(entries []streams.Entry) []wire.EventType {
	out := make([]wire.EventType, len(entries))
	for i, e := range entries {
		out[i] = e.Type
	}
	return out
}

// failedError is the error of the stream's turn.failed event.
func failedError(t *testing.T, entries []streams.Entry) string {
	t.Helper()
	for _, e := range entries {
		if e.Type == wire.EventFailed {
			var d wire.ErrorData
			require.NoError(t, json.Unmarshal([]byte(e.Data), &d))
			return d.Error
		}
	}
	t.Fatalf("no turn.failed in %v", types(entries))
	return ""
}

const (
	serverError = `{"message":"The server had an error while processing your request. Sorry about that!","type":"server_error","param":null,"code":500}`
	rateLimited = `{"message":"Rate limit reached for m in organization org-test on requests per min (RPM): Limit 3, Used 3, Requested 1. Please try again in %s. Visit https://platform.openai.com/account/rate-limits to learn more.","type":"requests","param":null,"code":"rate_limit_exceeded"}`
)

func rateLimit(hint string) string { return strings.Replace(rateLimited, "%s", hint, 1) }

// TestUpstreamErrors runs turns against an OpenAI-compatible server that reports its errors inside
// the stream (a data line holding an error object after a 200), as the runs of issue #28 saw.
func TestUpstreamErrors(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{Partitions: 1})
	ctx := context.Background()

	// One retry layer: a turn's failed requests are bounded by the guard's retries plus its
	// attempts, never their product (12 with three attempts of four requests each).
	t.Run("InStream500SendsAtMostTheBound", func(t *testing.T) {
		t.Parallel()
		cases := []struct {
			name   string
			answer func(n int) agenttest.ChatAnswer
			want   int
		}{
			// The guard retries the call, gives up, and the turn fails without further attempts.
			{"BeforeAnyOutput", func(int) agenttest.ChatAnswer { return agenttest.ChatAnswer{Error: serverError} }, 4},
			// Every fourth request streams a word before its error: that call cannot be retried in
			// place (its word is published), so the next attempt retries it, with one request each.
			{"SometimesAfterOutput", func(n int) agenttest.ChatAnswer {
				if n%4 == 0 {
					return agenttest.ChatAnswer{Words: []string{"partial "}, Error: serverError}
				}
				return agenttest.ChatAnswer{Error: serverError}
			}, 6},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				f := newUpstreamFixture(t, env, fixtureOptions{}, c.answer)
				rec, turn := f.record(t, time.Minute)
				require.Equal(t, consume.Commit, f.x.Handle(ctx, rec))
				// The bound the upstream package documents: the guard's retries (3 by default) on
				// the first attempt, one request on each later attempt (3 attempts).
				const bound = 3 + 3
				t.Logf("upstream requests for one turn: %d (bound %d)", f.chat.Requests(), bound)
				require.LessOrEqual(t, f.chat.Requests(), bound)
				require.Equal(t, c.want, f.chat.Requests())
				msg := failedError(t, f.events(t, turn.SessionID))
				require.Contains(t, msg, "500 Internal Server Error", "turn.failed names the upstream's last answer")
			})
		}
	})

	t.Run("InStream401And403ArePermanent", func(t *testing.T) {
		t.Parallel()
		for _, c := range []struct{ status, body string }{
			{"401 Unauthorized", `{"message":"Incorrect API key provided.","type":"invalid_request_error","param":null,"code":401}`},
			{"403 Forbidden", `{"message":"You are not allowed to use this model.","type":"permission_error","param":null,"code":null}`},
		} {
			t.Run(strings.Fields(c.status)[0], func(t *testing.T) {
				t.Parallel()
				f := newUpstreamFixture(t, env, fixtureOptions{}, func(int) agenttest.ChatAnswer { return agenttest.ChatAnswer{Error: c.body} })
				rec, turn := f.record(t, time.Minute)
				require.Equal(t, consume.Commit, f.x.Handle(ctx, rec))
				require.Equal(t, 1, f.chat.Requests(), "a permanent error is not retried")
				entries := f.events(t, turn.SessionID)
				require.Equal(t, []wire.EventType{wire.EventStarted, wire.EventFailed}, types(entries))
				require.Contains(t, failedError(t, entries), c.status)
			})
		}
	})

	t.Run("InStream429WaitsVisiblyAndFailsNamingIt", func(t *testing.T) {
		t.Parallel()
		var (
			f            *upstreamFixture
			session      string
			waitedBefore = make(chan bool, 1)
		)
		var firstAt atomic.Int64 // when request 1 came, in Unix nanoseconds
		f = newUpstreamFixture(t, env, fixtureOptions{}, func(n int) agenttest.ChatAnswer {
			if n == 1 {
				firstAt.Store(time.Now().UnixNano())
			}
			if n == 2 {
				// The retry has come: the browser's stream must already say that the turn waits.
				entries, err := f.reader.After(context.Background(), wire.NewSessionKey(wire.DefaultTenant, session), streams.EntryID{}, 1000)
				waitedBefore <- err == nil && len(entries) > 0 && entries[len(entries)-1].Type == wire.EventWaiting
			}
			return agenttest.ChatAnswer{Error: rateLimit("300ms")}
		})
		rec, turn := f.record(t, 2*time.Second)
		session = turn.SessionID
		require.Equal(t, consume.Commit, f.x.Handle(ctx, rec))
		select {
		case ok := <-waitedBefore:
			require.True(t, ok, "turn.waiting was in the stream before the retry")
		default:
			t.Fatal("the rate-limited request was never retried")
		}

		entries := f.events(t, session)
		require.Equal(t, wire.EventStarted, entries[0].Type)
		require.Equal(t, wire.EventWaiting, entries[1].Type)
		var w wire.WaitingData
		require.NoError(t, json.Unmarshal([]byte(entries[1].Data), &w))
		require.Equal(t, wire.WaitRateLimited, w.Reason)
		require.WithinDuration(t, time.Unix(0, firstAt.Load()).Add(300*time.Millisecond), w.RetryAt, 150*time.Millisecond, "the event names the next try")
		require.Contains(t, w.Error, "429")
		attrs := f.logs.find(slog.LevelInfo, "turn waiting on its upstream")
		require.NotNil(t, attrs, "an info-level line says the turn waits")
		require.Equal(t, wire.WaitRateLimited, attrs["reason"])

		require.Equal(t, wire.EventFailed, entries[len(entries)-1].Type)
		msg := failedError(t, entries)
		t.Logf("requests %d, final error: %s", f.chat.Requests(), msg)
		require.Contains(t, msg, "429 Too Many Requests", "the final error names the upstream's answer")
		require.Contains(t, msg, "rate_limit_exceeded")
		require.NotContains(t, msg, "deadline exceeded")
	})

	t.Run("DrainHandsOffATurnWaitingOnItsUpstreamAtOnce", func(t *testing.T) {
		t.Parallel()
		for _, c := range []struct {
			name   string
			answer agenttest.ChatAnswer
		}{
			{"InStream429", agenttest.ChatAnswer{Error: rateLimit("30s")}},
			{"Status429", agenttest.ChatAnswer{Status: 429, RetryAfter: "30", Error: rateLimit("30s")}},
		} {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				answered := make(chan struct{})
				var once sync.Once
				f := newUpstreamFixture(t, env, fixtureOptions{}, func(int) agenttest.ChatAnswer {
					once.Do(func() { close(answered) })
					return c.answer
				})
				rec, turn := f.record(t, 2*time.Minute)
				done := make(chan consume.Result, 1)
				go func() { done <- f.x.Handle(ctx, rec) }()
				// Once the upstream has answered, the turn only waits for the 30 s it was told to (a
				// drain that comes before the wait has begun hands the turn off as the wait begins).
				select {
				case <-answered:
				case <-time.After(20 * time.Second):
					t.Fatal("no request reached the upstream within 20s")
				}
				drained := time.Now()
				f.x.Drain()
				select {
				case res := <-done:
					took := time.Since(drained)
					t.Logf("handed off %v after the drain began; the pause had 30s to run", took.Round(time.Millisecond))
					require.Equal(t, consume.HandOff, res)
					require.Less(t, took, 5*time.Second)
				case <-time.After(20 * time.Second):
					t.Fatal("the waiting turn was not handed off within 20s of the drain")
				}
				require.Equal(t, 1, f.chat.Requests())
				require.NotNil(t, f.logs.find(slog.LevelInfo, "turn handed off on drain"))
				require.Equal(t, []wire.EventType{wire.EventStarted, wire.EventWaiting}, types(f.events(t, turn.SessionID)))
			})
		}
	})

	t.Run("DrainEndsThePauseBeforeTheNextAttempt", func(t *testing.T) {
		t.Parallel()
		retried := make(chan struct{}, 1)
		f := newUpstreamFixture(t, env, fixtureOptions{retryBackoff: 30 * time.Second, hooks: Hooks{
			AttemptEnded: func(outcome string, _ int, _ time.Duration) {
				if outcome == "retried" {
					retried <- struct{}{}
				}
			},
		}}, func(int) agenttest.ChatAnswer {
			// A word, then the error: the call cannot be retried in place, the next attempt must.
			return agenttest.ChatAnswer{Words: []string{"partial "}, Error: serverError}
		})
		rec, _ := f.record(t, 2*time.Minute)
		done := make(chan consume.Result, 1)
		go func() { done <- f.x.Handle(ctx, rec) }()
		select {
		case <-retried:
		case <-time.After(20 * time.Second):
			t.Fatal("the first attempt did not end within 20s")
		}
		drained := time.Now()
		f.x.Drain()
		select {
		case res := <-done:
			require.Equal(t, consume.HandOff, res)
			require.Less(t, time.Since(drained), 5*time.Second)
		case <-time.After(20 * time.Second):
			t.Fatal("the pausing turn was not handed off within 20s of the drain")
		}
		require.Equal(t, 1, f.chat.Requests())
	})
}

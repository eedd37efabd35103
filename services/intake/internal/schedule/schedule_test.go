package schedule_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/turnstile-run/turnstile/pkg/lifecycle/lifecycletest"
	"github.com/turnstile-run/turnstile/pkg/testenv"
	"github.com/turnstile-run/turnstile/services/intake/internal/schedule"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreTopFunction("github.com/jackc/pgx/v5/pgxpool.(*Pool).backgroundHealthCheck"),
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
		goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).reaper"),
	)
}

// post is one call of a Poster.
type post struct {
	tenant, session, key string
	body                 []byte
}

// posts records the calls of the Poster of a test's schedulers; answer decides each outcome.
type posts struct {
	mu     sync.Mutex
	calls  []post
	answer func(n int) schedule.Outcome
}

func (p *posts) poster(_ context.Context, tenant, session, key string, body []byte) (string, schedule.Outcome, string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls = append(p.calls, post{tenant, session, key, body})
	out := schedule.Posted
	if p.answer != nil {
		out = p.answer(len(p.calls))
	}
	return "turn-" + key, out, ""
}

func (p *posts) byKey() map[string][]post {
	p.mu.Lock()
	defer p.mu.Unlock()
	m := map[string][]post{}
	for _, c := range p.calls {
		m[c.key] = append(m[c.key], c)
	}
	return m
}

type bundle struct {
	env   *testenv.Env
	store *schedule.Store
	posts *posts
}

func setup(t *testing.T) bundle {
	t.Helper()
	env := testenv.New(t, testenv.Options{Partitions: 1})
	return bundle{env: env, store: schedule.NewStore(env.Pool), posts: &posts{}}
}

func (b bundle) scheduler(t *testing.T, owner string, cfg schedule.Config) *schedule.Scheduler {
	t.Helper()
	cfg.Owner = owner
	return schedule.New(cfg, b.store, b.posts.poster, b.env.Log, prometheus.NewRegistry())
}

// create stores a schedule and moves its next tick back by ago, as if every replica had been
// away that long.
func (b bundle) create(t *testing.T, s schedule.Schedule, ago time.Duration) schedule.Schedule {
	t.Helper()
	ctx := context.Background()
	if s.Tenant == "" {
		s.Tenant = "acme"
	}
	if len(s.Turn) == 0 {
		s.Turn = json.RawMessage(`{"input":{"text":"tick"},"metadata":{"k":"v"}}`)
	}
	s.Enabled = true
	out, err := b.store.Create(ctx, s, 100)
	require.NoError(t, err)
	if ago > 0 {
		// The first tick at or after now-ago, as the schedule would have had it then.
		_, err := b.env.Pool.Exec(ctx, `UPDATE schedules SET next_fire_at = date_trunc('second', now()) - make_interval(secs => $2)
			WHERE schedule_id = $1`, out.ID, ago.Seconds())
		require.NoError(t, err)
	}
	return out
}

func TestScheduler(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("TwoReplicasFireEachTickOnce", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		s := b.create(t, schedule.Schedule{ID: "every-second", Cron: "* * * * * *"}, 20*time.Second)
		a, c := b.scheduler(t, "a", schedule.Config{}), b.scheduler(t, "c", schedule.Config{})
		var wg sync.WaitGroup
		for _, sch := range []*schedule.Scheduler{a, c} {
			wg.Go(func() {
				for range 5 {
					sch.Pass(ctx)
				}
			})
		}
		wg.Wait()
		keys := b.posts.byKey()
		require.GreaterOrEqual(t, len(keys), 20, "every tick of the last 20s is posted")
		for k, calls := range keys {
			require.Len(t, calls, 1, "tick %s posted once", k)
		}
		var fired, doubled int
		require.NoError(t, b.env.Pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE posts > 1) FROM schedule_fires
			WHERE schedule_id = $1 AND outcome = 'posted'`, s.ID).Scan(&fired, &doubled))
		require.Equal(t, len(keys), fired)
		require.Zero(t, doubled)
		// Each tick a new session, the same one for every post of the tick.
		for _, calls := range keys {
			require.NotEqual(t, "", calls[0].session)
		}
	})

	t.Run("DeadOwnersTickIsTakenOverWithTheSameTurn", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		s := b.create(t, schedule.Schedule{ID: "s", Cron: "@yearly", SessionID: "thread-1"}, time.Minute)
		// The first owner's post goes unanswered (it dies): the fire stays pending.
		b.posts.answer = func(n int) schedule.Outcome {
			if n == 1 {
				return schedule.Retry
			}
			return schedule.Posted
		}
		b.scheduler(t, "dead", schedule.Config{MisfireGrace: time.Hour}).Pass(ctx)
		require.Len(t, b.posts.calls, 1)
		heir := b.scheduler(t, "heir", schedule.Config{MisfireGrace: time.Hour})
		heir.Pass(ctx)
		require.Len(t, b.posts.calls, 1, "the lease has not run out: nobody posts the tick again")
		_, err := b.env.Pool.Exec(ctx, `UPDATE schedule_fires SET lease_until = now() - interval '1 ms' WHERE schedule_id = $1`, s.ID)
		require.NoError(t, err)
		heir.Pass(ctx)
		require.Len(t, b.posts.calls, 2)
		first, again := b.posts.calls[0], b.posts.calls[1]
		require.Equal(t, first.key, again.key)
		require.Equal(t, first.body, again.body)
		require.Equal(t, "thread-1", again.session)
		var owner, outcome string
		var n int
		require.NoError(t, b.env.Pool.QueryRow(ctx, `SELECT owner, outcome, posts FROM schedule_fires WHERE schedule_id = $1`, s.ID).Scan(&owner, &outcome, &n))
		require.Equal(t, []any{"heir", "posted", 2}, []any{owner, outcome, n})
		var md map[string]any
		var body struct {
			Metadata map[string]any `json:"metadata"`
		}
		require.NoError(t, json.Unmarshal(again.body, &body))
		md = body.Metadata
		require.Equal(t, "v", md["k"])
		require.Equal(t, s.ID, md["schedule"].(map[string]any)["schedule_id"])
	})

	t.Run("TicksPastTheGraceAreMissed", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.create(t, schedule.Schedule{ID: "s", Cron: "* * * * * *"}, 10*time.Minute)
		reg := prometheus.NewRegistry()
		sch := schedule.New(schedule.Config{Owner: "a", MisfireGrace: 30 * time.Second, LeaseTTL: time.Second}, b.store, b.posts.poster, b.env.Log, reg)
		sch.Pass(ctx)
		n := len(b.posts.byKey())
		require.InDelta(t, 31, n, 3, "only the ticks within the grace are posted")
		mfs, err := reg.Gather()
		require.NoError(t, err)
		var missed float64
		for _, mf := range mfs {
			if mf.GetName() == "turnstile_schedule_ticks_missed_total" {
				missed = mf.GetMetric()[0].GetCounter().GetValue()
			}
		}
		require.InDelta(t, 570, missed, 3)
	})

	t.Run("DisabledAndEndedSchedulesDoNotFire", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		s := b.create(t, schedule.Schedule{ID: "s", Cron: "* * * * * *"}, 0)
		off := false
		s, err := b.store.Update(ctx, "acme", s.ID, schedule.Patch{Enabled: &off})
		require.NoError(t, err)
		require.Nil(t, s.NextFireAt)
		past := time.Now().Add(-time.Hour)
		on := true
		s, err = b.store.Update(ctx, "acme", s.ID, schedule.Patch{Enabled: &on, EndTime: &past, SetEndTime: true})
		require.NoError(t, err)
		require.Nil(t, s.NextFireAt)
		b.scheduler(t, "a", schedule.Config{}).Pass(ctx)
		require.Empty(t, b.posts.byKey())
	})

	t.Run("Lifecycle", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		lifecycletest.Stress(t, b.scheduler(t, "a", schedule.Config{PollInterval: 10 * time.Millisecond}), lifecycletest.Options{})
	})
}

func TestStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	s := b.create(t, schedule.Schedule{ID: "s1", Cron: "0 9 * * MON", Timezone: "Europe/Paris", Metadata: json.RawMessage(`{"team":"a"}`)}, 0)

	t.Run("NextTickInItsZone", func(t *testing.T) {
		require.NotNil(t, s.NextFireAt)
		paris, err := time.LoadLocation("Europe/Paris")
		require.NoError(t, err)
		at := s.NextFireAt.In(paris)
		require.Equal(t, []any{time.Monday, 9, 0}, []any{at.Weekday(), at.Hour(), at.Minute()})
	})
	t.Run("OtherTenantCannotSeeIt", func(t *testing.T) {
		_, err := b.store.Get(ctx, "evil", s.ID)
		require.ErrorIs(t, err, schedule.ErrNotFound)
		require.ErrorIs(t, b.store.Delete(ctx, "evil", s.ID), schedule.ErrNotFound)
	})
	t.Run("ListFilters", func(t *testing.T) {
		b.create(t, schedule.Schedule{ID: "s2", Cron: "@hourly", SessionID: "th", Metadata: json.RawMessage(`{"team":"b"}`)}, 0)
		all, total, err := b.store.List(ctx, "acme", schedule.Filter{Limit: 10})
		require.NoError(t, err)
		require.Equal(t, 2, total)
		require.Len(t, all, 2)
		got, total, err := b.store.List(ctx, "acme", schedule.Filter{Limit: 10, Metadata: json.RawMessage(`{"team":"b"}`)})
		require.NoError(t, err)
		require.Equal(t, 1, total)
		require.Equal(t, "s2", got[0].ID)
		got, _, err = b.store.List(ctx, "acme", schedule.Filter{Limit: 10, SessionID: "-"})
		require.NoError(t, err)
		require.Equal(t, "s1", got[0].ID)
		_, total, err = b.store.List(ctx, "acme", schedule.Filter{SessionID: "th"})
		require.NoError(t, err)
		require.Equal(t, 1, total)
	})
	t.Run("Limit", func(t *testing.T) {
		_, err := b.store.Create(ctx, schedule.Schedule{Tenant: "acme", ID: "s3", Cron: "@daily", Turn: json.RawMessage(`{}`)}, 2)
		require.ErrorIs(t, err, schedule.ErrLimit)
	})
	t.Run("BadSpecs", func(t *testing.T) {
		for _, tc := range [][2]string{{"* * *", ""}, {"* * * * *", "Mars/Base"}, {"TZ=UTC * * * * *", ""}} {
			_, err := schedule.ParseSpec(tc[0], tc[1])
			require.Error(t, err, tc)
		}
	})
	t.Run("FireBodyIsStable", func(t *testing.T) {
		f := schedule.Fire{ScheduleID: "s", Tick: time.Unix(100, 0), Turn: json.RawMessage(`{"metadata":{"b":1,"a":2},"input":{"text":"x"}}`)}
		one, err := schedule.FireBody(f)
		require.NoError(t, err)
		two, err := schedule.FireBody(f)
		require.NoError(t, err)
		require.Equal(t, one, two)
		require.Equal(t, schedule.TickSession("", "t", "s", f.Tick), schedule.TickSession("", "t", "s", f.Tick))
		require.NotEqual(t, schedule.TickSession("", "t", "s", f.Tick), schedule.TickSession("", "t", "s", f.Tick.Add(time.Second)))
	})
}

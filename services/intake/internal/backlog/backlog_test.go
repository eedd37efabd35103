package backlog_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/turnstile-run/turnstile/pkg/postgres"
	"github.com/turnstile-run/turnstile/pkg/testenv"
	"github.com/turnstile-run/turnstile/services/intake/internal/backlog"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreTopFunction("github.com/jackc/pgx/v5/pgxpool.(*Pool).backgroundHealthCheck"),
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
		goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).reaper"),
	)
}

type rows struct {
	t   *testing.T
	env *testenv.Env
}

// add records a turn as intake (queued) or a worker (running) would; age is how long ago it was
// accepted, lease how long its lease still runs (negative: expired).
func (r rows) add(session, status string, age, lease time.Duration) uuid.UUID {
	r.t.Helper()
	id := uuid.Must(uuid.NewV7())
	var expires *time.Time
	if status == "running" {
		e := time.Now().Add(lease)
		expires = &e
	}
	_, err := r.env.Pool.Exec(context.Background(), `INSERT INTO turns (turn_id, session_id, tenant, status, attempt, lease_expires_at, accepted_at)
		VALUES ($1, $2, 'default', $3, CASE WHEN $3 = 'running' THEN 1 ELSE 0 END, $4, now() - $5 * interval '1 millisecond')`,
		id, session, status, expires, age.Milliseconds())
	require.NoError(r.t, err)
	return id
}

func (r rows) set(id uuid.UUID, status string, lease time.Duration) {
	r.t.Helper()
	_, err := r.env.Pool.Exec(context.Background(), `UPDATE turns SET status = $2,
		lease_expires_at = CASE WHEN $2 = 'running' THEN now() + $3 * interval '1 millisecond' END WHERE turn_id = $1`,
		id, status, lease.Milliseconds())
	require.NoError(r.t, err)
}

func (r rows) age() time.Duration {
	r.t.Helper()
	a, err := backlog.Oldest(context.Background(), r.env.Pool)
	require.NoError(r.t, err)
	return a
}

// near asserts got is want give or take a loaded machine's slack (the rows' ages grow while the
// test runs, never shrink).
func near(t *testing.T, want, got time.Duration) {
	t.Helper()
	require.GreaterOrEqual(t, got, want, "backlog age")
	require.Less(t, got, want+5*time.Second, "backlog age")
}

func TestSaturatedWorkersFollowOldestWaitingTurn(t *testing.T) {
	t.Parallel()
	r := rows{t, testenv.New(t, testenv.Options{Partitions: 1})}
	// Every worker slot is busy with sessions a and b; c and d wait for a slot.
	r.add("a", "running", 90*time.Second, time.Minute)
	r.add("b", "running", 80*time.Second, time.Minute)
	c := r.add("c", "queued", 30*time.Second, 0)
	d := r.add("d", "queued", 10*time.Second, 0)
	near(t, 30*time.Second, r.age())
	r.set(c, "running", time.Minute) // a slot freed: c starts
	near(t, 10*time.Second, r.age())
	r.set(d, "running", time.Minute)
	require.Zero(t, r.age(), "every accepted turn is running")
	r.set(c, "succeeded", 0)
	r.set(d, "succeeded", 0)
	require.Zero(t, r.age())
}

func TestOneLongTurnAloneIsNoBacklog(t *testing.T) {
	t.Parallel()
	r := rows{t, testenv.New(t, testenv.Options{Partitions: 1})}
	r.add("long", "running", 10*time.Minute, time.Minute)
	require.Zero(t, r.age(), "a running turn is not backlog, however old")
}

func TestNoWorkerAliveKeepsRising(t *testing.T) {
	t.Parallel()
	r := rows{t, testenv.New(t, testenv.Options{Partitions: 1})}
	// One turn never claimed, one whose worker died (its lease ran out).
	r.add("q", "queued", 5*time.Second, 0)
	r.add("dead", "running", 20*time.Second, -time.Second)
	first := r.age()
	near(t, 20*time.Second, first)
	testenv.WaitFor(t, 10*time.Second, "the backlog age to grow", func() bool { return r.age() > first+200*time.Millisecond })

	// The monitor serves the same value and keeps it rising between and after polls.
	env := r.env
	reg := prometheus.NewRegistry()
	m := backlog.New(backlog.Config{Interval: 50 * time.Millisecond}, env.Pool, env.Log, reg)
	require.NoError(t, m.Start(context.Background()))
	require.NoError(t, m.Start(context.Background()), "Start twice")
	<-m.Measured()
	a1 := m.Age()
	near(t, 20*time.Second, a1)
	testenv.WaitFor(t, 10*time.Second, "the gauge to rise", func() bool {
		return testutil.ToFloat64(m.Gauge()) > (a1 + 200*time.Millisecond).Seconds()
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, m.Stop(ctx))
	require.NoError(t, m.Stop(ctx), "Stop twice")
}

func TestTurnBlockedBehindItsSessionIsNotCounted(t *testing.T) {
	t.Parallel()
	r := rows{t, testenv.New(t, testenv.Options{Partitions: 1})}
	running := r.add("s", "running", 60*time.Second, time.Minute)
	next := r.add("s", "queued", 50*time.Second, 0)
	r.add("s", "queued", 40*time.Second, 0)
	require.Zero(t, r.age(), "turns waiting behind their own session's running turn cannot be helped by more workers")
	r.add("other", "queued", 3*time.Second, 0)
	near(t, 3*time.Second, r.age())
	// The running turn's worker dies: the session's head (the running turn itself) now waits.
	r.set(running, "running", -time.Second)
	near(t, 60*time.Second, r.age())
	// It finishes: the next queued turn of the session can start now.
	r.set(running, "succeeded", 0)
	near(t, 50*time.Second, r.age())
	r.set(next, "running", time.Minute)
	near(t, 3*time.Second, r.age())
}

func TestStopBeforeStart(t *testing.T) {
	t.Parallel()
	m := backlog.New(backlog.Config{}, nil, nil, nil)
	require.NoError(t, m.Stop(context.Background()), "Stop before Start is a no-op")
	require.NoError(t, m.Stop(context.Background()))
	require.Zero(t, m.Age())
}

func TestPostgresOutageHoldsTheValue(t *testing.T) {
	t.Parallel()
	pool, err := postgres.NewLazyPool(context.Background(), "postgres://postgres@127.0.0.1:1/none?sslmode=disable&connect_timeout=1", postgres.Options{})
	require.NoError(t, err)
	defer pool.Close()
	reg := prometheus.NewRegistry()
	m := backlog.New(backlog.Config{Interval: time.Second, Timeout: 2 * time.Second}, pool, testenv.TestLogger(t), reg)
	m.Refresh(context.Background())
	m.Refresh(context.Background())
	require.Zero(t, m.Age(), "no measurement: nothing to extrapolate, admission control keeps accepting")
	failures, err := testutil.GatherAndCount(reg, "turnstile_backlog_query_failures_total")
	require.NoError(t, err)
	require.Equal(t, 1, failures)
	require.Equal(t, 2.0, testutil.ToFloat64(m.Failures()))
	select {
	case <-m.Measured():
		t.Fatal("Measured must stay open until a query succeeds")
	default:
	}
}

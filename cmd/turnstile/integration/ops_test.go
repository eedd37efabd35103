package integration

import (
	"bufio"
	"context"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/testenv"
)

// TestMetricsDocumented runs one turn through a full stack, scrapes /metrics and requires every
// turnstile_* metric family to be listed in docs/METRICS.md.
func TestMetricsDocumented(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{Partitions: 2})
	stack := startStack(t, env, "intake,worker,gateway,a2a,langgraph")
	base := "http://" + stack.Addr()
	postTurn(t, base, "metrics", "count me in")
	// One A2A request, so the front door's request counter has a series.
	a2aResp, err := http.Post(base+"/a2a", "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"x"}}`))
	require.NoError(t, err)
	a2aResp.Body.Close()
	s := testenv.OpenSSE(t, base+"/v1/sessions/metrics/events", "")
	s.Until(t, 30*time.Second, countCompleted(1))
	s.Close()

	doc, err := os.ReadFile("../../../docs/METRICS.md")
	require.NoError(t, err)
	documented := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `(turnstile_[a-z0-9_]+)` \\|").FindAllStringSubmatch(string(doc), -1) {
		documented[m[1]] = true
	}
	resp, err := http.Get(base + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	exposed := map[string]bool{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if name, ok := strings.CutPrefix(sc.Text(), "# TYPE "); ok && strings.HasPrefix(name, "turnstile_") {
			exposed[strings.Fields(name)[0]] = true
		}
	}
	require.NoError(t, sc.Err())
	require.NotEmpty(t, exposed)
	for name := range exposed {
		require.True(t, documented[name], "%s is exposed but not listed in docs/METRICS.md", name)
	}
	for _, name := range []string{
		"turnstile_backlog_age_seconds", "turnstile_intake_requests_total",
		"turnstile_worker_attempts_total", "turnstile_gateway_events_sent_total", "turnstile_gateway_delivery_lag_seconds",
		"turnstile_a2a_requests_total", "turnstile_a2a_streams",
		"turnstile_streams_admitted_total", "turnstile_streams_open",
	} {
		require.True(t, exposed[name], "%s is not exposed after a turn", name)
	}
}

// recordQueued does what intake does after Kafka acknowledged a turn: record it as queued.
func recordQueued(t *testing.T, env *testenv.Env, a accepted) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := env.Pool.Exec(ctx, `INSERT INTO turns (turn_id, session_id, tenant, status, accepted_at)
		VALUES ($1, $2, 'default', 'queued', now()) ON CONFLICT (turn_id) DO NOTHING`, a.TurnID, a.SessionID)
	require.NoError(t, err)
}

func backlogAge(t *testing.T, base string) float64 {
	t.Helper()
	var b struct {
		Age *float64 `json:"backlog_age_seconds"`
	}
	require.Equal(t, http.StatusOK, getJSON(t, base+"/v1/backlog", &b))
	require.NotNil(t, b.Age)
	return *b.Age
}

func turnAge(t *testing.T, env *testenv.Env, turnID string) float64 {
	t.Helper()
	var secs float64
	require.NoError(t, env.Pool.QueryRow(context.Background(),
		`SELECT extract(epoch FROM now() - accepted_at)::float8 FROM turns WHERE turn_id = $1`, turnID).Scan(&secs))
	return secs
}

// TestBacklogAgeRealStack follows intake's GET /v1/backlog through a stack's life: with no worker
// alive the age keeps rising; a single worker slot busy with a long turn leaves the next turn waiting
// and the age follows that turn, not the running one; once everything ran, it is 0.
func TestBacklogAgeRealStack(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{Partitions: 1})
	env.Config.Ops.BacklogInterval = 50 * time.Millisecond
	env.Config.MaxInflight = 1
	env.Config.DemoDelay = 100 * time.Millisecond
	front := startStack(t, env, "intake,gateway")
	base := "http://" + front.Addr()
	require.Zero(t, backlogAge(t, base))

	long := postTurn(t, base, "long", strings.Repeat("word ", 40)) // about 4s of demo agent
	recordQueued(t, env, long)
	testenv.WaitFor(t, 10*time.Second, "the backlog to reach 1s with no worker", func() bool { return backlogAge(t, base) >= 1 })
	first := backlogAge(t, base)
	testenv.WaitFor(t, 10*time.Second, "the backlog to keep rising with no worker", func() bool { return backlogAge(t, base) > first+0.3 })

	next := postTurn(t, base, "next", "a short one")
	recordQueued(t, env, next)

	// One worker with one slot: it runs the long turn; the short one waits for the slot.
	startStack(t, env, "worker")
	testenv.WaitFor(t, 20*time.Second, "the long turn to start", func() bool {
		var status string
		_ = env.Pool.QueryRow(context.Background(), `SELECT status FROM turns WHERE turn_id = $1`, long.TurnID).Scan(&status)
		return status == "running"
	})
	testenv.WaitFor(t, 3*time.Second, "the backlog to follow the waiting turn rather than the running one", func() bool {
		age := backlogAge(t, base)
		return age > 0 && age < turnAge(t, env, long.TurnID)-0.5 && age > turnAge(t, env, next.TurnID)-0.4
	})

	s := testenv.OpenSSE(t, base+"/v1/sessions/next/events", "")
	s.Until(t, 30*time.Second, countCompleted(1))
	s.Close()
	testenv.WaitFor(t, 5*time.Second, "the backlog to drop to 0", func() bool { return backlogAge(t, base) == 0 })
}

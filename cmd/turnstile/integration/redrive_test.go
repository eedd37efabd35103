package integration

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/testenv"
)

// session is a turn's row as the order checks read it.
type orderedTurn struct {
	ID         string
	Status     string
	Redrives   int
	StartedAt  *time.Time
	FinishedAt *time.Time
}

func orderedTurns(t *testing.T, env *testenv.Env, ids []string) []orderedTurn {
	t.Helper()
	out := make([]orderedTurn, len(ids))
	for i, id := range ids {
		o := &out[i]
		require.NoError(t, env.Pool.QueryRow(context.Background(), `SELECT turn_id::text, status, redrives, started_at, finished_at
			FROM turns WHERE turn_id = $1`, id).Scan(&o.ID, &o.Status, &o.Redrives, &o.StartedAt, &o.FinishedAt))
	}
	return out
}

// requireRanInOrder checks that every turn succeeded and that each started only after the one
// before it had finished.
func requireRanInOrder(t *testing.T, turns []orderedTurn) {
	t.Helper()
	for i, o := range turns {
		require.Equal(t, "succeeded", o.Status, "turn %d", i+1)
		if i > 0 {
			prev := turns[i-1]
			require.False(t, o.StartedAt.Before(*prev.FinishedAt), "turn %d started at %v, before turn %d finished at %v",
				i+1, o.StartedAt, i, prev.FinishedAt)
		}
	}
}

// TestLostRecordsRedriven reproduces issue 28's run in process: every role with the embedded
// broker, three turns on one session, the stack stopped while the first runs, and a fresh broker
// (which has none of the records) started with a new stack on the same Postgres and Redis. Turns 2
// and 3 are re-driven from Postgres and run in order, a 4th turn posted right after the restart
// (its record ahead of the re-driven ones) runs after them, and intake keeps accepting turns of
// new sessions: no turn is left queued to age the backlog past its limit.
func TestLostRecordsRedriven(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{Partitions: 1})
	cfg := env.Config
	cfg.Roles = "broker,intake,worker,gateway"
	cfg.BrokerAddr = testenv.FreeAddr(t)
	cfg.KafkaBrokers = cfg.BrokerAddr
	cfg.Intake.RedriveInterval = 200 * time.Millisecond
	cfg.Intake.MaxBacklogAge = 5 * time.Second
	cfg.Ops.BacklogInterval = 100 * time.Millisecond
	cfg.DrainTimeout = 500 * time.Millisecond
	const session = "lost"

	first := startStackCfg(t, env, cfg)
	base := "http://" + first.Addr()
	ids := []string{
		postTurnWith(t, base, session, map[string]any{"input": map[string]string{"text": "one"}, "metadata": demoMeta(3000)}),
		postTurnWith(t, base, session, map[string]any{"input": map[string]string{"text": "two"}, "metadata": demoMeta(300)}),
		postTurnWith(t, base, session, map[string]any{"input": map[string]string{"text": "three"}, "metadata": demoMeta(300)}),
	}
	testenv.WaitFor(t, 30*time.Second, "the first turn to run", func() bool { return readTurn(t, env, ids[0]).Status == "running" })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, first.Stop(ctx)) // the embedded broker goes with its records
	for _, o := range orderedTurns(t, env, ids[1:]) {
		require.Equal(t, "queued", o.Status, "turns 2 and 3 never started")
	}

	t.Cleanup(func() {
		if t.Failed() {
			var dump []string
			rows, _ := env.Pool.Query(context.Background(), `SELECT turn_id::text || ' ' || status || ' a=' || attempt ||
				' r=' || redrives || ' p=' || coalesce(kafka_partition, -1) || ' o=' || coalesce(kafka_offset, -1) ||
				' topic=' || coalesce(kafka_topic_id::text, '-') || ' ' || coalesce(error, '') FROM turns ORDER BY accepted_at`)
			for rows.Next() {
				var l string
				_ = rows.Scan(&l)
				dump = append(dump, l)
			}
			rows.Close()
			t.Logf("turns:\n%s", strings.Join(dump, "\n"))
		}
	})
	second := startStackCfg(t, env, cfg)
	base = "http://" + second.Addr()
	ids = append(ids, postTurnWith(t, base, session, map[string]any{"input": map[string]string{"text": "four"}, "metadata": demoMeta(100)}))
	other := postTurnWith(t, base, "lost-other", map[string]any{"input": map[string]string{"text": "new"}})
	testenv.WaitFor(t, 60*time.Second, "every turn to end", func() bool { return terminalCount(t, env, append(ids, other)) == 5 })
	turns := orderedTurns(t, env, ids)
	requireRanInOrder(t, turns)
	for _, o := range turns[1:3] {
		require.Positive(t, o.Redrives, "turns 2 and 3 were re-driven")
	}
	require.Equal(t, "succeeded", readTurn(t, env, other).Status)
	waitTerminalEvents(t, env, session, ids...)

	// Nothing is left to age the backlog: a new session is accepted well after the restart.
	var age struct {
		Seconds float64 `json:"backlog_age_seconds"`
	}
	require.Equal(t, http.StatusOK, getJSON(t, base+"/v1/backlog", &age))
	require.Less(t, age.Seconds, 1.0)
	postTurnWith(t, base, "lost-later", map[string]any{"input": map[string]string{"text": "later"}})
}

// TestRestartBinaryRedrives runs the same scenario through the real binary, as `make dev` does:
// every role with the embedded broker, three 5-second demo turns on one session, SIGINT about a
// second in, the binary started again on the same Postgres and Redis. Every turn completes in
// order (a 4th posted after the restart runs last), intake never refuses a new session, and the
// shutdown and start logs say what happens to the queued turns.
func TestRestartBinaryRedrives(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{Partitions: 1})
	brokerAddr := testenv.FreeAddr(t)
	env.Config.KafkaBrokers = brokerAddr
	env.Config.DrainTimeout = time.Second
	addr := testenv.FreeAddr(t)
	environ := append(env.Environ("broker,intake,worker,gateway", addr, "dev"),
		"TURNSTILE_BROKER_ADDR="+brokerAddr, "TURNSTILE_REDRIVE_INTERVAL=500ms")
	base := "http://" + addr
	const session = "restart"

	p := testenv.StartProcess(t, "dev-1", environ, addr)
	waitReady(t, base)
	var ids []string
	for _, text := range []string{"one", "two", "three"} {
		ids = append(ids, postTurnWith(t, base, session, map[string]any{"input": map[string]string{"text": text}, "metadata": demoMeta(5000)}))
	}
	// Ctrl-C about a second into the first turn.
	testenv.WaitFor(t, 30*time.Second, "the first turn to run for a second", func() bool {
		r := readTurn(t, env, ids[0])
		return r.Status == "running" && r.StartedAt != nil && time.Since(*r.StartedAt) >= time.Second
	})
	require.NoError(t, p.Signal(syscall.SIGINT))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, p.Wait(ctx))
	require.Contains(t, p.Logs(), "will be re-driven from Postgres at the next start", "the shutdown says what happens to queued turns")

	p = testenv.StartProcess(t, "dev-2", environ, addr)
	waitReady(t, base)
	ids = append(ids, postTurnWith(t, base, session, map[string]any{"input": map[string]string{"text": "four"}, "metadata": demoMeta(500)}))
	posted, last := 0, time.Time{}
	testenv.WaitFor(t, 90*time.Second, "every turn to end", func() bool {
		// Intake never refuses a new session meanwhile (a user posting about twice a second).
		if time.Since(last) >= 500*time.Millisecond {
			status, body := post(t, base, "restart-new-"+strconv.Itoa(posted), `{"input":{"text":"hi"}}`, nil)
			require.Equal(t, http.StatusAccepted, status, string(body))
			posted, last = posted+1, time.Now()
		}
		return terminalCount(t, env, ids) == len(ids)
	})
	t.Logf("%d turns of new sessions accepted while the restarted stack worked off the old ones", posted)
	requireRanInOrder(t, orderedTurns(t, env, ids))
	logs := p.Logs()
	require.Contains(t, logs, "accepted turns unfinished at start", "the start says what happens to queued turns")
	require.Contains(t, logs, "turn re-driven: its Kafka record was lost")
	var line struct {
		Redriven int `json:"redriven"`
	}
	for _, l := range strings.Split(logs, "\n") {
		if strings.Contains(l, "accepted turns unfinished at start") {
			require.NoError(t, json.Unmarshal([]byte(l), &line))
		}
	}
	require.GreaterOrEqual(t, line.Redriven, 2, "turns 2 and 3 at least were re-driven at start")
}

// waitReady waits until every role of the process at base is ready.
func waitReady(t *testing.T, base string) {
	t.Helper()
	testenv.WaitFor(t, 60*time.Second, "readiness of "+base, func() bool {
		resp, err := http.Get(base + "/readyz") //nolint:noctx // a probe in a test
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/turnstile-run/turnstile/pkg/streams"
	"github.com/turnstile-run/turnstile/pkg/testenv"
	"github.com/turnstile-run/turnstile/pkg/wire"
)

// cluster is a split stack for worker tests: one front process (broker, intake, gateway) and any
// number of worker processes that tests kill, stop and restart.
type cluster struct {
	t          *testing.T
	env        *testenv.Env
	front      *testenv.Process
	frontEnv   []string
	base       string
	brokerAddr string
	workerEnv  []string

	mu      sync.Mutex
	workers map[string]*testenv.Process
	gen     map[string]int
}

type clusterOptions struct {
	Partitions  int
	LeaseTTL    time.Duration
	Heartbeat   time.Duration
	MaxAttempts int
	MaxInflight int
	// SessionTimeout is the workers' group session timeout: how soon a killed worker's partitions
	// move. Defaults to 2s.
	SessionTimeout time.Duration
	DrainTimeout   time.Duration
	// WorkerEnv adds variables to every worker process.
	WorkerEnv []string
	// FrontRoles are the roles of the front process. Defaults to broker,intake,gateway.
	FrontRoles string
	// FrontEnv adds variables to the front process.
	FrontEnv []string
	// OwnRedis gives the cluster a redis-server of its own (env.RedisServer), which the test may
	// flush or restart.
	OwnRedis bool
}

func newCluster(t *testing.T, o clusterOptions) *cluster {
	t.Helper()
	if o.SessionTimeout == 0 {
		o.SessionTimeout = 2 * time.Second
	}
	env := testenv.New(t, testenv.Options{Partitions: o.Partitions, OwnRedis: o.OwnRedis})
	if o.LeaseTTL > 0 {
		env.Config.LeaseTTL = o.LeaseTTL
	}
	if o.Heartbeat > 0 {
		env.Config.Heartbeat = o.Heartbeat
	}
	if o.MaxAttempts > 0 {
		env.Config.MaxAttempts = o.MaxAttempts
	}
	if o.MaxInflight > 0 {
		env.Config.MaxInflight = o.MaxInflight
	}
	if o.DrainTimeout > 0 {
		env.Config.DrainTimeout = o.DrainTimeout
	}
	brokerAddr := testenv.FreeAddr(t)
	env.Config.KafkaBrokers = brokerAddr
	frontAddr := testenv.FreeAddr(t)
	if o.FrontRoles == "" {
		o.FrontRoles = "broker,intake,gateway"
	}
	frontEnv := append(append(env.Environ(o.FrontRoles, frontAddr, "front"), "TURNSTILE_BROKER_ADDR="+brokerAddr), o.FrontEnv...)
	front := testenv.StartProcess(t, "front", frontEnv, frontAddr)
	allowShortSessions(t, brokerAddr)
	c := &cluster{
		t: t, env: env, front: front, frontEnv: frontEnv, base: "http://" + frontAddr, brokerAddr: brokerAddr,
		workers: map[string]*testenv.Process{}, gen: map[string]int{},
	}
	c.workerEnv = append([]string{
		"TURNSTILE_WORKER_SESSION_TIMEOUT=" + o.SessionTimeout.String(),
		"TURNSTILE_WORKER_REBALANCE_TIMEOUT=" + (2 * o.SessionTimeout).String(),
		"TURNSTILE_MIGRATE=off",
	}, o.WorkerEnv...)
	return c
}

// allowShortSessions lowers the broker's minimum group session timeout, so a killed worker's
// partitions move within seconds, as they would on a cluster tuned for fast failover.
func allowShortSessions(t *testing.T, brokerAddr string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokerAddr))
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	v := "100"
	resps, err := kadm.NewClient(cl).AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "group.min.session.timeout.ms", Value: &v}})
	require.NoError(t, err)
	for _, r := range resps {
		require.NoError(t, r.Err)
	}
}

// startWorker starts (or restarts, under a fresh instance ID as a new pod would get) the named worker.
func (c *cluster) startWorker(name string, extra ...string) *testenv.Process {
	c.t.Helper()
	c.mu.Lock()
	c.gen[name]++
	instance := fmt.Sprintf("%s-g%d", name, c.gen[name])
	c.mu.Unlock()
	addr := testenv.FreeAddr(c.t)
	env := append(append(c.env.Environ("worker", addr, instance), c.workerEnv...), extra...)
	p := testenv.StartProcess(c.t, instance, env, addr)
	c.mu.Lock()
	c.workers[name] = p
	c.mu.Unlock()
	return p
}

func (c *cluster) worker(name string) *testenv.Process {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.workers[name]
}

// kill SIGKILLs the named worker and waits for it to be gone.
func (c *cluster) kill(name string) {
	c.t.Helper()
	p := c.worker(name)
	require.NoError(c.t, p.Signal(syscall.SIGKILL))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = p.Wait(ctx)
}

// post submits a turn with metadata and returns its ID.
func (c *cluster) post(session, text string, md map[string]any) string {
	c.t.Helper()
	return postTurnWith(c.t, c.base, session, map[string]any{"input": map[string]string{"text": text}, "metadata": md})
}

func postTurnWith(t *testing.T, base, session string, body map[string]any) string {
	t.Helper()
	b, err := json.Marshal(body)
	require.NoError(t, err)
	resp, err := http.Post(base+"/v1/sessions/"+session+"/turns", "application/json", bytes.NewReader(b))
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusAccepted, resp.StatusCode)
	var a accepted
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&a))
	return a.TurnID
}

func demoMeta(durationMs int) map[string]any {
	return map[string]any{"demo": map[string]any{"duration_ms": durationMs}}
}

// turnRow is a turn as Postgres records it.
type turnRow struct {
	ID         string
	Session    string
	Status     string
	Attempt    int
	Handoffs   int
	Error      string
	StartedAt  *time.Time
	FinishedAt *time.Time
}

func (c *cluster) turn(id string) turnRow {
	c.t.Helper()
	return readTurn(c.t, c.env, id)
}

func readTurn(t *testing.T, env *testenv.Env, id string) turnRow {
	t.Helper()
	var r turnRow
	err := env.Pool.QueryRow(context.Background(), `SELECT turn_id::text, session_id, status, attempt, handoffs,
		coalesce(error, ''), started_at, finished_at FROM turns WHERE turn_id = $1`, id).
		Scan(&r.ID, &r.Session, &r.Status, &r.Attempt, &r.Handoffs, &r.Error, &r.StartedAt, &r.FinishedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return turnRow{ID: id}
	}
	require.NoError(t, err)
	return r
}

// terminalCount counts turns among ids that reached a terminal status.
func terminalCount(t *testing.T, env *testenv.Env, ids []string) int {
	t.Helper()
	var n int
	require.NoError(t, env.Pool.QueryRow(context.Background(), `SELECT count(*) FROM turns
		WHERE turn_id = ANY($1::uuid[]) AND status NOT IN ('queued', 'running')`, ids).Scan(&n))
	return n
}

// historyMsg is a message of the session history, as the session_messages view shows it.
type historyMsg struct {
	Seq    int64
	TurnID string
	Role   string
}

// storeKey is the key the stores hold a session under (wire.SessionKey): the default tenant's,
// as a stack without authentication names it, unless session is a key already.
func storeKey(session string) wire.SessionKey {
	if strings.Contains(session, wire.SessionKeySeparator) {
		k, err := wire.ParseSessionKey(session)
		if err != nil {
			panic(err)
		}
		return k
	}
	return wire.NewSessionKey(wire.DefaultTenant, session)
}

func history(t *testing.T, env *testenv.Env, session string) []historyMsg {
	t.Helper()
	rows, err := env.Pool.Query(context.Background(), `SELECT seq, turn_id::text, role FROM session_messages
		WHERE session_id = $1 ORDER BY seq`, storeKey(session))
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (historyMsg, error) {
		var m historyMsg
		return m, r.Scan(&m.Seq, &m.TurnID, &m.Role)
	})
	require.NoError(t, err)
	return out
}

// streamEvent is one entry of a session's Redis stream.
type streamEvent struct {
	ID      string
	Type    string
	TurnID  string
	Attempt int
	Data    map[string]any
}

// waitFirstDeltas waits until the session's stream holds a turn.delta of a first attempt: the turn
// is running and streaming.
func waitFirstDeltas(t *testing.T, env *testenv.Env, session string) {
	t.Helper()
	testenv.WaitFor(t, 30*time.Second, "the first attempt to stream deltas", func() bool {
		for _, e := range readStream(t, env, session) {
			if e.Type == "turn.delta" && e.Attempt == 1 {
				return true
			}
		}
		return false
	})
}

func readStream(t *testing.T, env *testenv.Env, session string) []streamEvent {
	t.Helper()
	msgs, err := env.Redis.XRange(context.Background(), streams.KeysFor(env.Config.KeyPrefix, storeKey(session)).Events, "-", "+").Result()
	if errors.Is(err, redis.Nil) {
		return nil
	}
	require.NoError(t, err)
	out := make([]streamEvent, 0, len(msgs))
	for _, m := range msgs {
		e := streamEvent{ID: m.ID, Type: fmt.Sprint(m.Values["type"]), TurnID: fmt.Sprint(m.Values["turn"])}
		require.NoError(t, json.Unmarshal([]byte(fmt.Sprint(m.Values["data"])), &e.Data))
		if a, ok := e.Data["attempt"].(float64); ok {
			e.Attempt = int(a)
		}
		out = append(out, e)
	}
	return out
}

// requireFencedStream checks one turn's events in a stream: exactly one terminal event, of the given
// type and from the winning attempt; after each turn.retrying of attempt n, nothing from an earlier
// attempt.
func requireFencedStream(t *testing.T, evs []streamEvent, turnID, terminal string, winning int) {
	t.Helper()
	terminals := 0
	maxAttempt := 0
	for _, e := range evs {
		if e.TurnID != turnID {
			continue
		}
		switch e.Type {
		case "turn.completed", "turn.failed", "turn.cancelled", "turn.expired":
			terminals++
			require.Equal(t, terminal, e.Type, "turn %s", turnID)
			require.Equal(t, winning, e.Attempt, "turn %s: the terminal event must come from the winning attempt", turnID)
		case "turn.retrying":
			require.Greater(t, e.Attempt, maxAttempt, "turn %s: retrying must name a newer attempt", turnID)
		}
		require.GreaterOrEqual(t, e.Attempt, maxAttempt, "turn %s: event %s of attempt %d after attempt %d had begun", turnID, e.Type, e.Attempt, maxAttempt)
		maxAttempt = e.Attempt
	}
	require.Equal(t, 1, terminals, "turn %s: exactly one terminal event", turnID)
	require.LessOrEqual(t, maxAttempt, winning, "turn %s", turnID)
}

// dlqRecord is a record of the dead-letter topic.
type dlqRecord struct {
	Key     string
	Value   []byte
	Headers map[string]string
}

// readDLQ reads the dead-letter topic from its start until it holds at least n records.
func readDLQ(t *testing.T, env *testenv.Env, n int) []dlqRecord {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(env.Config.BrokerList()...), kgo.ConsumeTopics(env.Config.DLQTopic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out []dlqRecord
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "dead-letter topic holds %d records, want %d", len(out), n)
		fs.EachRecord(func(r *kgo.Record) {
			d := dlqRecord{Key: string(r.Key), Value: r.Value, Headers: map[string]string{}}
			for _, h := range r.Headers {
				d.Headers[h.Key] = string(h.Value)
			}
			out = append(out, d)
		})
	}
	return out
}

// produceRaw writes a record straight to the turns topic, bypassing intake.
func produceRaw(t *testing.T, env *testenv.Env, key string, value []byte) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(env.Config.BrokerList()...))
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Topic: env.Config.Topic, Key: []byte(key), Value: value}).FirstErr())
}

// admin returns an admin client of the test's broker; the caller closes it.
func admin(t *testing.T, env *testenv.Env) *kadm.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(env.Config.BrokerList()...))
	require.NoError(t, err)
	return kadm.NewClient(cl)
}

// withAdmin runs f with a broker admin client, closed when f returns, and a context of 10 s.
func withAdmin(t *testing.T, env *testenv.Env, f func(ctx context.Context, adm *kadm.Client)) {
	t.Helper()
	adm := admin(t, env)
	defer adm.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	f(ctx, adm)
}

// workerGroup describes the worker group; ok is false when the broker could not.
func workerGroup(t *testing.T, env *testenv.Env) (g kadm.DescribedGroup, ok bool) {
	t.Helper()
	withAdmin(t, env, func(ctx context.Context, adm *kadm.Client) {
		groups, err := adm.DescribeGroups(ctx, env.Config.ConsumerGroup)
		if err != nil {
			return
		}
		g, ok = groups[env.Config.ConsumerGroup]
		ok = ok && g.Err == nil
	})
	return g, ok
}

// groupSettled reports whether the worker group is stable with exactly members members: no
// rebalance under way and no killed worker still counted as a member.
func groupSettled(t *testing.T, env *testenv.Env, members int) bool {
	t.Helper()
	g, ok := workerGroup(t, env)
	return ok && g.State == "Stable" && len(g.Members) == members
}

// groupBalanced reports whether the worker group is settled with members members, each of which
// holds at least one of the turns topic's partitions and all of them between them: a cooperative
// rebalance's last round is done, so every member fetches.
func groupBalanced(t *testing.T, env *testenv.Env, members int) bool {
	t.Helper()
	g, ok := workerGroup(t, env)
	if !ok || g.State != "Stable" || len(g.Members) != members {
		return false
	}
	total := 0
	for _, m := range g.Members {
		held := 0
		if c, ok := m.Assigned.AsConsumer(); ok {
			for _, tp := range c.Topics {
				if tp.Topic == env.Config.Topic {
					held += len(tp.Partitions)
				}
			}
		}
		if held == 0 {
			return false
		}
		total += held
	}
	return total == env.Config.Partitions
}

// committedOffset is the worker group's committed offset of partition 0 of the turns topic.
func committedOffset(t *testing.T, env *testenv.Env) int64 {
	t.Helper()
	at := int64(-1)
	withAdmin(t, env, func(ctx context.Context, adm *kadm.Client) {
		offs, err := adm.FetchOffsets(ctx, env.Config.ConsumerGroup)
		require.NoError(t, err)
		if o, ok := offs.Lookup(env.Config.Topic, 0); ok {
			at = o.At
		}
	})
	return at
}

// waitTerminalEvents waits until the session's stream holds a terminal event for each turn: Postgres
// records a turn's end a moment before its terminal event is published.
func waitTerminalEvents(t *testing.T, env *testenv.Env, session string, ids ...string) {
	t.Helper()
	testenv.WaitFor(t, 30*time.Second, "terminal events in the stream of "+session, func() bool {
		seen := map[string]bool{}
		for _, e := range readStream(t, env, session) {
			switch e.Type {
			case "turn.completed", "turn.failed", "turn.cancelled", "turn.expired":
				seen[e.TurnID] = true
			}
		}
		for _, id := range ids {
			if !seen[id] {
				return false
			}
		}
		return true
	})
}

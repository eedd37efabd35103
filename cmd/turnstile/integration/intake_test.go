package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/turnstile-run/turnstile/cmd/turnstile/roles"
	"github.com/turnstile-run/turnstile/pkg/app"
	"github.com/turnstile-run/turnstile/pkg/config"
	"github.com/turnstile-run/turnstile/pkg/testenv"
)

func decodeJSON(r io.Reader, into any) error { return json.NewDecoder(r).Decode(into) }

type turnStatus struct {
	Status   string `json:"status"`
	Attempts int    `json:"attempts"`
}

func post(t *testing.T, base, session, body string, hdr map[string]string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+"/v1/sessions/"+session+"/turns", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	client := apiClient
	if len(hdr["X-Big"]) > 0 {
		client = http.DefaultClient // the header-limit test's 431 is the server's, not the API's
	}
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, b
}

func waitStatus(t *testing.T, base, turnID, want string) turnStatus {
	t.Helper()
	var st turnStatus
	testenv.WaitFor(t, 60*time.Second, "turn "+turnID+" "+want, func() bool {
		st = turnStatus{}
		return getValidated(t, base+"/v1/turns/"+turnID, &st) == http.StatusOK && st.Status == want
	})
	return st
}

// TestIntakeIdempotentTurnRunsOnce posts one turn five times at once with one Idempotency-Key
// through the whole stack: identical 202 bodies, and the worker runs the turn exactly once. The same
// key with another body, sent to a second intake replica, is a 422 (the replicas share the
// idempotency record), and the turn still ran once, with the first body.
func TestIntakeIdempotentTurnRunsOnce(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{Partitions: 2})
	stack := startStack(t, env, "intake,worker,gateway")
	base := "http://" + stack.Addr()
	bodies := make([][]byte, 5)
	var wg sync.WaitGroup
	for i := range bodies {
		wg.Go(func() {
			status, b := post(t, base, "once", `{"input":{"text":"only once please"}}`, map[string]string{"Idempotency-Key": "retry-me"})
			require.Equal(t, http.StatusAccepted, status, string(b))
			bodies[i] = b
		})
	}
	wg.Wait()
	for _, b := range bodies[1:] {
		require.Equal(t, string(bodies[0]), string(b))
	}
	var a accepted
	require.NoError(t, json.Unmarshal(bodies[0], &a))
	st := waitStatus(t, base, a.TurnID, "succeeded")
	require.Equal(t, 1, st.Attempts)

	replica := startStack(t, env, "intake")
	status, b := post(t, "http://"+replica.Addr(), "once", `{"input":{"text":"something else"}}`, map[string]string{"Idempotency-Key": "retry-me"})
	require.Equal(t, http.StatusUnprocessableEntity, status, string(b))
	require.Contains(t, string(b), "idempotency-key-reused")
	testenv.WaitFor(t, 30*time.Second, "the worker to consume every record", func() bool { return consumedAll(t, env) })

	stream := testenv.OpenSSE(t, base+a.StreamURL, "")
	evs := stream.Until(t, 30*time.Second, countCompleted(1))
	stream.Close()
	require.Equal(t, expectedEvents(a.TurnID, "only once please"), describe(t, evs), "one run: one started, one completed")
	st = waitStatus(t, base, a.TurnID, "succeeded")
	require.Equal(t, 1, st.Attempts)
}

// consumedAll reports whether the worker group has committed every record of the turns topic (a
// partition without a commit lags by all its records).
func consumedAll(t *testing.T, env *testenv.Env) bool {
	t.Helper()
	done := false
	withAdmin(t, env, func(ctx context.Context, adm *kadm.Client) {
		lag, err := adm.Lag(ctx, env.Config.ConsumerGroup)
		require.NoError(t, err)
		l, ok := lag[env.Config.ConsumerGroup]
		done = ok && l.Error() == nil && len(l.Lag) > 0 && l.Lag.Total() == 0
	})
	return done
}

// TestIntakeMultitaskWithWorker: on a session whose turn is running, reject answers 409 and
// interrupt cancels the running turn, after which the interrupting turn runs.
func TestIntakeMultitaskWithWorker(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{Partitions: 2})
	stack := startStack(t, env, "intake,worker,gateway")
	base := "http://" + stack.Addr()
	status, b := post(t, base, "mt", `{"input":{"text":"a long answer"},"metadata":{"demo":{"duration_ms":60000}}}`, nil)
	require.Equal(t, http.StatusAccepted, status, string(b))
	var long accepted
	require.NoError(t, json.Unmarshal(b, &long))
	waitStatus(t, base, long.TurnID, "running")

	status, b = post(t, base, "mt", `{"input":{"text":"me too"},"multitask":"reject"}`, nil)
	require.Equal(t, http.StatusConflict, status, string(b))
	require.Contains(t, string(b), "session-busy")

	status, b = post(t, base, "mt", `{"input":{"text":"stop, do this"},"multitask":"interrupt"}`, nil)
	require.Equal(t, http.StatusAccepted, status, string(b))
	var next accepted
	require.NoError(t, json.Unmarshal(b, &next))
	waitStatus(t, base, long.TurnID, "cancelled")
	waitStatus(t, base, next.TurnID, "succeeded")
}

// TestIntakeGracefulShutdown stops the stack while a POST waits for Kafka: the listener closes at
// once, and the in-flight request still finishes with its 202.
func TestIntakeGracefulShutdown(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{Partitions: 2})
	cfg := env.Config
	cfg.Roles = "intake"
	ctx := context.Background()
	stack := startStackCfg(t, env, cfg)
	addr := stack.Addr()
	base := "http://" + addr
	status, _ := post(t, base, "gs", `{"input":{"text":"warm up"}}`, nil)
	require.Equal(t, http.StatusAccepted, status)

	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	cluster := env.KfakeCluster()
	cluster.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		once.Do(func() { close(entered) })
		cluster.SleepControl(func() { <-release })
		return nil, nil, false
	})
	type result struct {
		status int
		body   []byte
	}
	got := make(chan result, 1)
	go func() {
		s, b := post(t, base, "gs", `{"input":{"text":"in flight"}}`, nil)
		got <- result{s, b}
	}()
	<-entered
	stopped := make(chan error, 1)
	go func() {
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		stopped <- stack.Stop(sctx)
	}()
	testenv.WaitFor(t, 10*time.Second, "listener closed", func() bool {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
		}
		return err != nil
	})
	select {
	case r := <-got:
		t.Fatalf("the in-flight request ended before Kafka answered: %d %s", r.status, r.body)
	default:
	}
	close(release)
	r := <-got
	require.Equal(t, http.StatusAccepted, r.status, string(r.body))
	require.NoError(t, <-stopped)
}

// TestIntakeSlowloris opens a connection that sends headers and never finishes them: the server
// closes it after its header timeout, while a complete request on another connection is served.
func TestIntakeSlowloris(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{Partitions: 1})
	stack := startStack(t, env, "intake")
	conn, err := net.Dial("tcp", stack.Addr())
	require.NoError(t, err)
	defer conn.Close()
	_, err = conn.Write([]byte("POST /v1/sessions/s/turns HTTP/1.1\r\nHost: x\r\nX-Slow: 1"))
	require.NoError(t, err)
	start := time.Now()

	status, b := post(t, "http://"+stack.Addr(), "s", `{"input":{"text":"not slow"}}`, nil)
	require.Equal(t, http.StatusAccepted, status, string(b))

	require.NoError(t, conn.SetReadDeadline(time.Now().Add(30*time.Second)))
	_, err = io.ReadAll(bufio.NewReader(conn)) // ends when the server closes the connection
	require.NoError(t, err, "the server must close the slow connection")
	require.Less(t, time.Since(start), 20*time.Second)
}

// TestIntakeAPIKeyCommand creates, uses, lists and revokes a key with the binary's subcommand.
func TestIntakeAPIKeyCommand(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{Partitions: 1})
	run := func(args ...string) string {
		cmd := exec.Command(testenv.Binary(t), args...)
		cmd.Env = env.Environ("intake", "127.0.0.1:0", "cli")
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		require.NoError(t, cmd.Run(), errb.String())
		return out.String()
	}
	out := run("apikey", "create", "--tenant", "acme")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 2, out)
	key := lines[1]
	require.True(t, strings.HasPrefix(key, "ts_"), out)
	id := strings.TrimPrefix(strings.Fields(lines[0])[0], "key_id=")

	cfg := env.Config
	cfg.Roles = "intake"
	cfg.Auth.Mode = "on"
	cfg.Auth.StreamTokenKeys = "k1:" + "c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0"
	stack := startStackCfg(t, env, cfg)
	base := "http://" + stack.Addr()
	status, b := post(t, base, "cli", `{"input":{"text":"x"}}`, map[string]string{"Authorization": "Bearer " + key})
	require.Equal(t, http.StatusAccepted, status, string(b))
	status, _ = post(t, base, "cli", `{"input":{"text":"x"}}`, nil)
	require.Equal(t, http.StatusUnauthorized, status)

	require.Contains(t, run("apikey", "list", "--tenant", "acme"), id+"\tacme")
	require.Contains(t, run("apikey", "revoke", id), "revoked "+id)
	require.Contains(t, run("apikey", "list"), "revoked")
}

// startStackCfg composes cfg's roles in this process and stops them at cleanup (Stop is safe twice).
// authConfig is env's configuration with TURNSTILE_AUTH=on, one stream token key and roles.
func authConfig(env *testenv.Env, roles string) config.Config {
	cfg := env.Config
	cfg.Roles = roles
	cfg.Auth.Mode = "on"
	cfg.Auth.StreamTokenKeys = "k1:c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0"
	return cfg
}

func startStackCfg(t *testing.T, env *testenv.Env, cfg config.Config) *app.Stack {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stack, err := app.Start(ctx, app.NewDeps(cfg, env.Log), roles.All)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		require.NoError(t, stack.Stop(ctx))
	})
	return stack
}

// TestIntakeHeaderLimit refuses a request whose headers exceed the server's limit with 431.
func TestIntakeHeaderLimit(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{Partitions: 1})
	stack := startStack(t, env, "intake")
	status, b := post(t, "http://"+stack.Addr(), "h", `{"input":{"text":"x"}}`, map[string]string{"X-Big": strings.Repeat("a", 128<<10)})
	require.Equal(t, http.StatusRequestHeaderFieldsTooLarge, status, string(b))
	status, b = post(t, "http://"+stack.Addr(), "h", `{"input":{"text":"x"}}`, map[string]string{"X-Small": "a"})
	require.Equal(t, http.StatusAccepted, status, string(b))
}

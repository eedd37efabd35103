package integration

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/testenv"
)

// devChatAddr is where examples/agents-dev.yaml's research agent finds the fake model, and where
// scripts/dev-agents.sh starts it unless told otherwise.
const devChatAddr = "127.0.0.1:8091"

// agentsProject is clients/agents, the Node project that drives two agents through every front
// door. Its node_modules come from `make node` (npm ci); without them the test fails rather than
// skips.
func agentsProject(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "..", "..", "clients", "agents"))
	require.NoError(t, err)
	for _, pkg := range []string{"@a2a-js/sdk", "@langchain/langgraph-sdk", "ai"} {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", pkg, "package.json")); err != nil {
			t.Fatalf("clients/agents has no node_modules (%v): run make node", err)
		}
	}
	return dir
}

// TestTwoAgentDevInstallation runs what `make dev-agents` runs — scripts/dev-agents.sh, which
// starts the load generator's fake model and every turnstile role on one port with
// examples/agents-dev.yaml (support: demo; research: openai against the fake) — from binaries built
// from this tree, against this test's schema and key prefix. clients/agents' node:test suite then
// reaches both agents through the native API, @a2a-js/sdk (two cards, a task on each),
// @langchain/langgraph-sdk (assistants.search lists both, a run on each) and the ai package's
// transport, and checks each research reply is the fake model's tokens. Postgres must then hold
// four succeeded turns of each agent, one a door. A Ctrl-C (SIGINT to the script's process group,
// as a terminal sends it) stops the fake model and turnstile, and the script exits 0.
func TestTwoAgentDevInstallation(t *testing.T) {
	dir := agentsProject(t)
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	require.NoError(t, err)
	// The schema and key prefix: the script's turnstile runs its own broker (the broker role), as
	// make dev does, so the environment's in-process one stays idle.
	env := testenv.New(t, testenv.Options{Partitions: 1})

	started := time.Now()
	bin := t.TempDir()
	require.NoError(t, os.Symlink(testenv.Binary(t), filepath.Join(bin, "turnstile")))
	build := exec.Command("go", "build", "-o", filepath.Join(bin, "turnstile-loadtest"), "./loadtest/cmd/turnstile-loadtest")
	build.Dir = root
	out, err := build.CombinedOutput()
	require.NoError(t, err, "go build turnstile-loadtest: %s", out)
	built := time.Since(started)

	// The example file, with the fake model on a port free now instead of its fixed one.
	chatAddr, httpAddr := testenv.FreeAddr(t), testenv.FreeAddr(t)
	example, err := os.ReadFile(filepath.Join(root, "examples", "agents-dev.yaml"))
	require.NoError(t, err)
	require.Equal(t, 1, strings.Count(string(example), "//"+devChatAddr+"/"), "research's base_url names the fake model's address")
	agentsFile := filepath.Join(t.TempDir(), "agents-dev.yaml")
	require.NoError(t, os.WriteFile(agentsFile, []byte(strings.ReplaceAll(string(example), "//"+devChatAddr+"/", "//"+chatAddr+"/")), 0o600))

	// make dev's defaults but for where the stores, the ports and the binaries are.
	keep := map[string]bool{
		"TURNSTILE_DATABASE_URL": true, "TURNSTILE_DATABASE_SCHEMA": true, "TURNSTILE_REDIS_URL": true,
		"TURNSTILE_REDIS_CLUSTER_ADDRS": true, "TURNSTILE_KEY_PREFIX": true, "TURNSTILE_LOG_FORMAT": true,
		"TURNSTILE_HTTP_ADDR": true, "PATH": true, "HOME": true,
	}
	var environ []string
	for _, kv := range env.Environ("", httpAddr, "") {
		if k, _, _ := strings.Cut(kv, "="); keep[k] {
			environ = append(environ, kv)
		}
	}
	environ = append(environ, "TURNSTILE_BROKER_ADDR="+testenv.FreeAddr(t), "TURNSTILE_DEV_BIN="+bin,
		"TURNSTILE_DEV_CHAT_ADDR="+chatAddr, "TURNSTILE_AGENTS_FILE="+agentsFile)

	script := exec.Command("bash", filepath.Join("scripts", "dev-agents.sh"))
	script.Dir, script.Env = root, environ
	// A process group of its own, which the test interrupts as a terminal's Ctrl-C would.
	script.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	logs := &testenv.SyncBuffer{}
	script.Stdout, script.Stderr = logs, logs
	require.NoError(t, script.Start())
	exited := make(chan error, 1)
	go func() { exited <- script.Wait() }()
	var children []int
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = syscall.Kill(-script.Process.Pid, syscall.SIGKILL)
			<-exited //nolint:errcheck // killed on purpose: its exit error says nothing
		}
		for _, pid := range children { // in their own groups (the script's job control)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		if t.Failed() {
			t.Logf("scripts/dev-agents.sh:\n%s", logs.String())
		}
	})

	base := "http://" + httpAddr
	testenv.WaitFor(t, 2*time.Minute, "the installation to be ready", func() bool {
		select {
		case err := <-exited:
			stopped = true
			t.Fatalf("scripts/dev-agents.sh exited at start: %v\n%s", err, logs.String())
		default:
		}
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	ready := time.Since(started) - built
	children = childPids(t, script.Process.Pid)
	require.Len(t, children, 2, "the script runs the fake model and turnstile")

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	suiteStart := time.Now()
	nodeOut, err := runNode(ctx, dir, []string{"TURNSTILE_URL=" + base, "NO_COLOR=1"}, "--test", "--test-reporter=spec", "test/")
	suite := time.Since(suiteStart)
	t.Log(nodeOut)
	require.NoError(t, err, "the clients/agents suite failed")
	require.Contains(t, nodeOut, "ℹ pass 4")
	require.Contains(t, nodeOut, "ℹ fail 0")

	// Each door reached each agent once (the suite's unknown agent reached nothing).
	rows, err := env.Pool.Query(ctx, `SELECT agent, status, count(*) FROM turns GROUP BY agent, status ORDER BY agent, status`)
	require.NoError(t, err)
	var got []string
	for rows.Next() {
		var agent, status string
		var n int
		require.NoError(t, rows.Scan(&agent, &status, &n))
		got = append(got, agent+" "+status+" "+strconv.Itoa(n))
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []string{"research succeeded 4", "support succeeded 4"}, got)

	// Ctrl-C: the script stops both children, waits for them and exits 0.
	stopStart := time.Now()
	require.NoError(t, syscall.Kill(-script.Process.Pid, syscall.SIGINT))
	select {
	case err := <-exited:
		stopped = true
		require.NoError(t, err, "the script's exit after Ctrl-C")
	case <-time.After(time.Minute):
		t.Fatal("scripts/dev-agents.sh did not stop within a minute of Ctrl-C")
	}
	stop := time.Since(stopStart)
	require.Contains(t, logs.String(), `"msg":"stopped cleanly"`, "turnstile drained and stopped on the script's SIGTERM")
	for _, pid := range children {
		require.ErrorIs(t, syscall.Kill(pid, 0), syscall.ESRCH, "child %d is gone", pid)
	}
	for _, addr := range []string{httpAddr, chatAddr} {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			_ = c.Close()
		}
		require.Error(t, err, "nothing listens on %s any more", addr)
	}
	t.Logf("make dev-agents in a test: build %v, start to ready %v, the four doors' suite %v, Ctrl-C to exit %v",
		built.Round(time.Millisecond), ready.Round(time.Millisecond), suite.Round(time.Millisecond), stop.Round(time.Millisecond))
}

// childPids lists the child processes of pid (Linux's /proc/<pid>/task/<tid>/children).
func childPids(t *testing.T, pid int) []int {
	t.Helper()
	tasks, err := filepath.Glob(filepath.Join("/proc", strconv.Itoa(pid), "task", "*", "children"))
	require.NoError(t, err)
	var out []int
	for _, f := range tasks {
		b, err := os.ReadFile(f)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		require.NoError(t, err)
		for _, s := range strings.Fields(string(b)) {
			n, err := strconv.Atoi(s)
			require.NoError(t, err)
			out = append(out, n)
		}
	}
	return out
}

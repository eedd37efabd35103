package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/streams"
	"github.com/turnstile-run/turnstile/pkg/testenv"
	"github.com/turnstile-run/turnstile/pkg/wire"
)

// TestExampleAgents runs a session through a real worker (TURNSTILE_AGENT=http) against each
// minimal agent of examples/agents, written from docs/http-agent-protocol.md alone: the first
// turn ends asking for input (output state input-required), the follow-up makes a tool call and
// answers, and both record the agent's token usage with their output.
func TestExampleAgents(t *testing.T) {
	for _, tc := range []struct {
		name  string
		start func(t *testing.T) string
	}{
		{"Node", func(t *testing.T) string {
			return startAgent(t, exec.Command("node", "agent.js"), filepath.Join(examplesDir(t), "node"))
		}},
		{"Go", func(t *testing.T) string {
			dir := filepath.Join(examplesDir(t), "go")
			bin := filepath.Join(t.TempDir(), "agent")
			build := exec.Command("go", "build", "-o", bin, ".")
			build.Dir, build.Env = dir, append(os.Environ(), "GOWORK=off") // it builds on its own
			out, err := build.CombinedOutput()
			require.NoError(t, err, "go build examples/agents/go: %s", out)
			return startAgent(t, exec.Command(bin), dir)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url := tc.start(t)
			env := testenv.New(t, testenv.Options{Partitions: 2})
			env.Config.Agent = "http"
			env.Config.Agents.HTTPAgentURL = url
			base := "http://" + startStack(t, env, "intake,worker").Addr()
			session := "example-" + env.ID

			ask := postTurn(t, base, session, "What is the weather?")
			asked := wire.Output{Text: "Which city?", State: wire.OutputInputRequired, Usage: &wire.Usage{InputTokens: 20, OutputTokens: 2, TotalTokens: 22, Model: "example"}}
			require.Equal(t, asked, succeeded(t, env, ask.TurnID))

			reply := postTurn(t, base, session, "Paris")
			want := wire.Output{Text: "It is sunny in Paris.", Usage: &wire.Usage{InputTokens: 5, OutputTokens: 6, TotalTokens: 11, Model: "example"}}
			require.Equal(t, want, succeeded(t, env, reply.TurnID))

			var got []string
			for _, e := range turnEvents(t, env, session, reply.TurnID) {
				switch e.Type {
				case wire.EventToolCall:
					var d wire.ToolCallData
					require.NoError(t, json.Unmarshal([]byte(e.Data), &d))
					got = append(got, fmt.Sprintf("tool_call %s %s %s", d.CallID, d.Name, d.Arguments))
				case wire.EventToolResult:
					var d wire.ToolResultData
					require.NoError(t, json.Unmarshal([]byte(e.Data), &d))
					got = append(got, fmt.Sprintf("tool_result %s %s", d.CallID, d.Result))
				case wire.EventDelta:
					var d wire.DeltaData
					require.NoError(t, json.Unmarshal([]byte(e.Data), &d))
					got = append(got, "delta "+d.Text)
				case wire.EventCompleted:
					var d wire.CompletedData
					require.NoError(t, json.Unmarshal([]byte(e.Data), &d))
					require.Equal(t, want, d.Output, "turn.completed carries the usage")
					got = append(got, "completed")
				}
			}
			require.Equal(t, []string{
				`tool_call weather-1 weather {"city":"Paris"}`,
				`tool_result weather-1 {"city":"Paris","forecast":"sunny"}`,
				"delta It is sunny ", "delta in Paris.", "completed",
			}, got)
		})
	}
}

// TestHTTPAgentInvalidEventFailsTheTurn: an agent's event that breaks the protocol's schema fails
// the turn at once, and its turn.failed and stored error name the event and the field.
func TestHTTPAgentInvalidEventFailsTheTurn(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/x-ndjson")
		_, _ = fmt.Fprintln(w, `{"type":"delta","text":"checking"}`)
		_, _ = fmt.Fprintln(w, `{"type":"tool_call","name":"clock","arguments":{}}`)
		_, _ = fmt.Fprintln(w, `{"type":"done"}`)
	}))
	defer srv.Close()
	env := testenv.New(t, testenv.Options{Partitions: 2})
	env.Config.Agent = "http"
	env.Config.Agents.HTTPAgentURL = srv.URL
	base := "http://" + startStack(t, env, "intake,worker").Addr()
	session := "invalid-" + env.ID
	a := postTurn(t, base, session, "time?")
	const want = `http agent event 2 (tool_call): missing required property "call_id"`
	var status, msg string
	var attempts int
	testenv.WaitFor(t, 60*time.Second, "the turn failed", func() bool {
		err := env.Pool.QueryRow(context.Background(), `SELECT status, coalesce(error, ''), attempt FROM turns WHERE turn_id = $1`, a.TurnID).Scan(&status, &msg, &attempts)
		return err == nil && status == "failed"
	})
	require.Contains(t, msg, want)
	require.Equal(t, 1, attempts, "an invalid event is not retried")
	var failed []string
	for _, e := range turnEvents(t, env, session, a.TurnID) {
		switch e.Type {
		case wire.EventToolCall:
			t.Fatalf("the invalid tool call was published: %s", e.Data)
		case wire.EventFailed:
			var d wire.ErrorData
			require.NoError(t, json.Unmarshal([]byte(e.Data), &d))
			failed = append(failed, d.Error)
		}
	}
	require.Len(t, failed, 1)
	require.Contains(t, failed[0], want)
}

// examplesDir is the repository's examples/agents.
func examplesDir(t *testing.T) string {
	dir, err := filepath.Abs(filepath.Join("..", "..", "..", "examples", "agents"))
	require.NoError(t, err)
	return dir
}

// startAgent starts an example agent in dir, which prints "listening on <URL>" once it listens,
// and returns that URL; the agent is killed when the test ends.
func startAgent(t *testing.T, cmd *exec.Cmd, dir string) string {
	t.Helper()
	cmd.Dir = dir
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err, "the agent printed no address; stderr: %s", stderr.String())
	url, ok := strings.CutPrefix(strings.TrimSpace(line), "listening on ")
	require.True(t, ok, "unexpected first line %q", line)
	return url
}

// succeeded waits for the turn to succeed and returns its stored output.
func succeeded(t *testing.T, env *testenv.Env, turnID string) wire.Output {
	t.Helper()
	var status, msg string
	var raw []byte
	testenv.WaitFor(t, 60*time.Second, "turn "+turnID+" ended", func() bool {
		err := env.Pool.QueryRow(context.Background(), `SELECT status, coalesce(error, ''), coalesce(output, 'null') FROM turns WHERE turn_id = $1`, turnID).Scan(&status, &msg, &raw)
		return err == nil && (status == "succeeded" || status == "failed")
	})
	require.Equal(t, "succeeded", status, msg)
	var out wire.Output
	require.NoError(t, json.Unmarshal(raw, &out))
	return out
}

// turnEvents reads the session stream's events of one turn.
func turnEvents(t *testing.T, env *testenv.Env, session, turnID string) []streams.Entry {
	t.Helper()
	entries, err := streams.NewReader(env.Redis, env.Config.KeyPrefix).After(context.Background(), storeKey(session), streams.EntryID{}, 1000)
	require.NoError(t, err)
	var out []streams.Entry
	for _, e := range entries {
		var base wire.EventBase
		require.NoError(t, json.Unmarshal([]byte(e.Data), &base))
		if base.TurnID == turnID {
			out = append(out, e)
		}
	}
	return out
}

package integration

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"
	"github.com/a2aproject/a2a-go/a2aclient/agentcard"
	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/testenv"
)

const doorsAgentsFile = `
default: support
agents:
  - name: support
    adapter: demo
    card: {name: Support desk, description: Answers customers}
  - name: research
    adapter: demo
    version: "2.1"
    card:
      name: Research desk
      description: Reads and summarises
      skills: [{id: summarise, name: Summarise, description: Summarises a question}]
    assistant: {name: Researcher, description: Research assistant}
`

// TestManyAgentsFrontDoors reaches two agents of one installation through every front door by
// name: the A2A endpoint and Agent Card of each agent (/a2a/{agent}, resolved and called by the
// official a2a-go client), LangGraph's assistants (search lists both; a run of each goes to its
// agent) and the AI SDK chat route (/v1/agents/{name}/chat, or agent in the body). An unknown
// agent is refused by each door before anything reaches Kafka.
func TestManyAgentsFrontDoors(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{Partitions: 1})
	file := filepath.Join(t.TempDir(), "agents.yaml")
	require.NoError(t, os.WriteFile(file, []byte(doorsAgentsFile), 0o600))
	cfg := env.Config
	cfg.Roles = "intake,worker,gateway,a2a,langgraph,aisdk"
	cfg.AgentsFile, cfg.WorkerAgents = file, "support,research"
	cfg.DemoDelay = time.Millisecond
	stack := startStackCfg(t, env, cfg)
	base := "http://" + stack.Addr()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// agents is the agent of every turn so far, oldest first.
	agents := func() []string {
		rows, err := env.Pool.Query(ctx, `SELECT agent FROM turns ORDER BY accepted_at`)
		require.NoError(t, err)
		defer rows.Close()
		var out []string
		for rows.Next() {
			var a string
			require.NoError(t, rows.Scan(&a))
			out = append(out, a)
		}
		require.NoError(t, rows.Err())
		return out
	}
	post := func(path, body string) (int, string) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+path, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(b)
	}

	t.Run("A2A", func(t *testing.T) {
		for _, tc := range []struct{ agent, name string }{{"support", "Support desk"}, {"research", "Research desk"}} {
			card, err := agentcard.DefaultResolver.Resolve(ctx, base+"/a2a/"+tc.agent)
			require.NoError(t, err)
			require.Equal(t, tc.name, card.Name)
			require.Equal(t, base+"/a2a/"+tc.agent, card.URL)
			if tc.agent == "research" {
				require.Equal(t, "2.1", card.Version)
				require.Len(t, card.Skills, 1)
				require.Equal(t, "summarise", card.Skills[0].ID)
			}
			c, err := a2aclient.NewFromCard(ctx, card)
			require.NoError(t, err)
			res, err := c.SendMessage(ctx, &a2a.MessageSendParams{
				Message: a2aMessage("hello "+tc.agent, nil), Config: &a2a.MessageSendConfig{Blocking: ptr(true)},
			})
			task := taskResult(t)(res, err)
			require.Equal(t, a2a.TaskStateCompleted, task.Status.State, "a task on %s", tc.agent)
			require.NoError(t, c.Destroy())
		}
		require.Equal(t, []string{"support", "research"}, agents())

		// The root paths still serve the default agent.
		root, err := agentcard.DefaultResolver.Resolve(ctx, base)
		require.NoError(t, err)
		require.Equal(t, base+"/a2a", root.URL)

		resp, err := http.Get(base + "/a2a/nobody/.well-known/agent-card.json")
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusNotFound, resp.StatusCode)
		require.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"))
		status, body := post("/a2a/nobody", `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"kind":"message","messageId":"m1","role":"user","parts":[{"kind":"text","text":"hi"}]}}}`)
		require.Equal(t, http.StatusNotFound, status)
		var rpcErr struct {
			Error struct {
				Code int `json:"code"`
			} `json:"error"`
		}
		require.NoError(t, json.Unmarshal([]byte(body), &rpcErr), body)
		require.Equal(t, -32600, rpcErr.Error.Code, body)
		require.Len(t, agents(), 2, "nothing reached Kafka for an unknown agent")
	})

	t.Run("LangGraph", func(t *testing.T) {
		status, body := post("/assistants/search", `{"limit":100}`)
		require.Equal(t, http.StatusOK, status, body)
		var found []struct {
			AssistantID string         `json:"assistant_id"`
			Name        string         `json:"name"`
			Metadata    map[string]any `json:"metadata"`
		}
		require.NoError(t, json.Unmarshal([]byte(body), &found))
		byID := map[string]string{}
		for _, a := range found {
			byID[a.AssistantID] = a.Metadata["agent"].(string)
		}
		require.Equal(t, "research", byID["research"], "assistants.search lists research")
		require.Equal(t, "support", byID["support"], "and support")
		n := len(agents())
		for _, id := range []string{"research", "support"} {
			status, body = post("/runs/wait", `{"assistant_id":"`+id+`","input":{"messages":[{"type":"human","content":"hi"}]}}`)
			require.Equal(t, http.StatusOK, status, body)
		}
		require.Equal(t, []string{"research", "support"}, agents()[n:], "each run went to its assistant's agent")
		status, _ = post("/runs/wait", `{"assistant_id":"nobody","input":{"messages":[{"type":"human","content":"hi"}]}}`)
		require.Equal(t, http.StatusNotFound, status)
		require.Len(t, agents(), n+2)
	})

	t.Run("AISDK", func(t *testing.T) {
		n := len(agents())
		msg := `{"id":"u1","role":"user","parts":[{"type":"text","text":"hi"}]}`
		status, body := post("/v1/agents/research/chat", `{"id":"chat-r","messages":[`+msg+`],"trigger":"submit-message"}`)
		require.Equal(t, http.StatusOK, status, body)
		require.Contains(t, body, `"type":"finish"`)
		status, body = post("/v1/chat", `{"id":"chat-s","agent":"support","messages":[`+msg+`],"trigger":"submit-message"}`)
		require.Equal(t, http.StatusOK, status, body)
		require.Equal(t, []string{"research", "support"}, agents()[n:])
		status, body = post("/v1/agents/nobody/chat", `{"id":"chat-x","messages":[`+msg+`]}`)
		require.Equal(t, http.StatusNotFound, status, body)
		require.Contains(t, body, "agent-not-found")
		require.Len(t, agents(), n+2)
	})
}

package openai_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/turnstile-run/turnstile/services/worker/internal/agent"
	"github.com/turnstile-run/turnstile/services/worker/internal/agent/agenttest"
	"github.com/turnstile-run/turnstile/services/worker/internal/agent/openai"
	"github.com/turnstile-run/turnstile/services/worker/internal/agent/upstream"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type chatMessage struct {
	Role       string  `json:"role"`
	Content    *string `json:"content"`
	ToolCallID string  `json:"tool_call_id"`
}

// server speaks the chat completions streaming wire format and plays a scenario.
func server(t *testing.T, sc agenttest.Scenario, rec *agenttest.Recorder) *httptest.Server {
	var requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" || r.Header.Get("Authorization") != "Bearer test-key" {
			http.Error(w, `{"error":{"message":"bad path or key"}}`, http.StatusUnauthorized)
			return
		}
		var body struct {
			Model         string        `json:"model"`
			Stream        bool          `json:"stream"`
			Messages      []chatMessage `json:"messages"`
			StreamOptions struct {
				IncludeUsage bool `json:"include_usage"`
			} `json:"stream_options"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil || !body.Stream || body.Model != "test-model" || !body.StreamOptions.IncludeUsage {
			http.Error(w, `{"error":{"message":"bad request"}}`, http.StatusBadRequest)
			return
		}
		n := requests.Add(1)
		hasTool := false
		var hist []string
		var user string
		for i, m := range body.Messages {
			if m.Role == "tool" {
				hasTool = true
			}
			if m.Content != nil && (m.Role == "user" || m.Role == "assistant") && i < len(body.Messages)-1 {
				hist = append(hist, *m.Content)
			}
			if m.Role == "user" && m.Content != nil {
				user = *m.Content
			}
		}
		if !hasTool {
			rec.Add(agenttest.Request{Text: user, History: hist})
		}
		if sc.Overload && n == 1 {
			w.Header().Set("Retry-After", fmt.Sprint(sc.RetryAfter))
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = w.Write([]byte(`{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}`))
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fl := w.(http.Flusher)
		send := func(v string) bool {
			if sc.TokenDelay > 0 {
				select {
				case <-r.Context().Done():
					return false
				case <-time.After(sc.TokenDelay):
				}
			}
			_, err := fmt.Fprintf(w, "data: %s\n\n", v)
			fl.Flush()
			return err == nil
		}
		head := `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"test-model","choices":[`
		send(head + `{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`)
		if sc.Tool && !hasTool {
			send(head + `{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_abc","type":"function","function":{"name":"clock","arguments":""}}]},"finish_reason":null}]}`)
			send(head + `{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"tz\":"}}]},"finish_reason":null}]}`)
			send(head + `{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"UTC\"}"}}]},"finish_reason":null}]}`)
			send(head + `{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`)
			send("[DONE]")
			return
		}
		for i, word := range sc.Words() {
			b, _ := json.Marshal(word)
			if !send(head + `{"index":0,"delta":{"content":` + string(b) + `},"finish_reason":null}]}`) {
				return
			}
			if sc.FailMidStream && i == 0 {
				send(`{"error":{"message":"The server had an error while processing your request.","type":"server_error"}}`)
				return
			}
		}
		send(head + `{"index":0,"delta":{},"finish_reason":"stop"}]}`)
		send(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"test-model","choices":[],"usage":{"prompt_tokens":7,"completion_tokens":` + fmt.Sprint(sc.Tokens) + `,"total_tokens":9}}`)
		send("[DONE]")
	}))
	t.Cleanup(srv.Close)
	return srv
}

func newAgent(t *testing.T, url string) *openai.Agent {
	ag, err := openai.New(openai.Config{
		BaseURL: url + "/v1", APIKey: "test-key", Model: "test-model",
		Tools: map[string]agent.Tool{"clock": func(context.Context, string, json.RawMessage) (json.RawMessage, error) {
			return json.RawMessage(`{"time":"2026-01-01T00:00:00Z"}`), nil
		}},
		Guard: upstream.New(upstream.Config{Name: "test", Backoff: 10 * time.Millisecond}),
	})
	require.NoError(t, err)
	return ag
}

func TestConformance(t *testing.T) {
	t.Parallel()
	agenttest.Run(t, agenttest.Capabilities{Upstream: true}, func(t *testing.T, sc agenttest.Scenario) (agent.Agent, *agenttest.Recorder) {
		rec := &agenttest.Recorder{}
		srv := server(t, sc, rec)
		return newAgent(t, srv.URL), rec
	})
}

func TestUnreachable(t *testing.T) {
	t.Parallel()
	agenttest.RunUnreachable(t, func(t *testing.T, url string) agent.Agent { return newAgent(t, url) })
}

func TestUsageAndPermanentErrors(t *testing.T) {
	t.Parallel()
	sc := agenttest.Scenario{Tokens: 3}
	srv := server(t, sc, &agenttest.Recorder{})
	res, err := newAgent(t, srv.URL).Run(context.Background(), agenttest.NewTurn("hi", 10*time.Second), nil, &agenttest.Sink{})
	require.NoError(t, err)
	require.Equal(t, &agent.Usage{PromptTokens: 7, CompletionTokens: 3, TotalTokens: 9, Model: "test-model"}, res.Usage)

	bad, err := openai.New(openai.Config{BaseURL: srv.URL + "/v1", APIKey: "wrong", Model: "test-model"})
	require.NoError(t, err)
	_, err = bad.Run(context.Background(), agenttest.NewTurn("hi", 10*time.Second), nil, &agenttest.Sink{})
	require.ErrorIs(t, err, agent.ErrPermanent, "a 401 is not worth a retry")
	require.True(t, strings.Contains(err.Error(), "401"))
}

// TestInStreamErrors: an error object inside the stream is read for the HTTP status it stands for
// (a numeric code, or a code or type that names one) and the pause it asks for.
func TestInStreamErrors(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, body string
		status     int
		class      upstream.Class
		retryAfter time.Duration
	}{
		{"NumericCode", `{"message":"boom","type":"server_error","param":null,"code":500}`, 500, upstream.Retryable, 0},
		{"ServerErrorType", `{"message":"boom","type":"server_error","param":null,"code":null}`, 500, upstream.Retryable, 0},
		{"InvalidAPIKey", `{"message":"Incorrect API key provided","type":"invalid_request_error","param":null,"code":"invalid_api_key"}`, 401, upstream.Terminal, 0},
		{"PermissionType", `{"message":"no","type":"permission_error","param":null,"code":null}`, 403, upstream.Terminal, 0},
		{"RateLimit", `{"message":"Rate limit reached. Please try again in 30s.","type":"requests","param":null,"code":"rate_limit_exceeded"}`, 429, upstream.Overload, 30 * time.Second},
		{"NumericString", `{"message":"busy","type":"x","param":null,"code":"503"}`, 503, upstream.Overload, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			chat := agenttest.NewChatServer(t, func(int) agenttest.ChatAnswer { return agenttest.ChatAnswer{Error: c.body} })
			ag, err := openai.New(openai.Config{BaseURL: chat.URL + "/v1", Model: "m", Guard: upstream.New(upstream.Config{Name: "t", Backoff: time.Millisecond})})
			require.NoError(t, err)
			turn := agenttest.NewTurn("hi", time.Second)
			turn.Attempt = 2 // no retries of failures: the first answer is the error
			ctx, cancel := context.WithDeadline(context.Background(), turn.Deadline)
			defer cancel()
			_, err = ag.Run(ctx, turn, nil, &agenttest.Sink{})
			var se *upstream.StreamError
			require.ErrorAs(t, err, &se)
			require.Equal(t, c.status, se.Status)
			require.Equal(t, c.class, upstream.Classify(se))
			require.Equal(t, c.retryAfter, se.RetryAfter)
			require.Contains(t, err.Error(), fmt.Sprint(c.status))
		})
	}
	t.Run("ErrorEvent", func(t *testing.T) {
		t.Parallel()
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = fmt.Fprint(w, "event: error\ndata: {\"error\":{\"message\":\"denied\",\"type\":\"authentication_error\"}}\n\n")
		}))
		defer srv.Close()
		ag, err := openai.New(openai.Config{BaseURL: srv.URL + "/v1", Model: "m"})
		require.NoError(t, err)
		_, err = ag.Run(context.Background(), agenttest.NewTurn("hi", 5*time.Second), nil, &agenttest.Sink{})
		require.ErrorIs(t, err, agent.ErrPermanent)
		require.Contains(t, err.Error(), "401 Unauthorized")
	})
}

package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/apikey"
	"github.com/turnstile-run/turnstile/pkg/testenv"
)

// usageModel is an OpenAI-compatible chat-completions server that streams a short answer and,
// when the request asks for it (stream_options.include_usage), the usage chunk the OpenAI API
// sends last: empty choices and prompt, completion and total tokens. The counts differ per request;
// it adds up what it reported per the first word of the turn's text (the tenant's tag).
type usageModel struct {
	mu       sync.Mutex
	requests int
	noUsage  int // requests that did not ask for the usage chunk
	reported map[string][3]int64
}

func (m *usageModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		http.NotFound(w, r)
		return
	}
	var req struct {
		Model    string `json:"model"`
		Stream   bool   `json:"stream"`
		Messages []struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"messages"`
		StreamOptions struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || !req.Stream || len(req.Messages) == 0 {
		http.Error(w, `{"error":{"message":"bad request","type":"invalid_request_error"}}`, http.StatusBadRequest)
		return
	}
	text := req.Messages[len(req.Messages)-1].Content
	tag, _, _ := strings.Cut(text, " ")
	m.mu.Lock()
	n := m.requests
	m.requests++
	prompt, completion := int64(17+13*n), int64(5+7*(n%4))
	if req.StreamOptions.IncludeUsage {
		s := m.reported[tag]
		m.reported[tag] = [3]int64{s[0] + prompt, s[1] + completion, s[2] + prompt + completion}
	} else {
		m.noUsage++
	}
	m.mu.Unlock()

	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	id := fmt.Sprintf("chatcmpl-%d", n)
	send := func(v map[string]any) {
		v["id"], v["object"], v["created"], v["model"] = id, "chat.completion.chunk", time.Now().Unix(), req.Model
		b, _ := json.Marshal(v)
		_, _ = fmt.Fprintf(w, "data: %s\n\n", b)
		w.(http.Flusher).Flush()
	}
	send(map[string]any{"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"role": "assistant", "content": ""}, "finish_reason": nil}}})
	for _, word := range []string{"Counted", " and", " answered."} {
		send(map[string]any{"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"content": word}, "finish_reason": nil}}})
	}
	send(map[string]any{"choices": []any{map[string]any{"index": 0, "delta": map[string]any{}, "finish_reason": "stop"}}})
	if req.StreamOptions.IncludeUsage {
		send(map[string]any{"choices": []any{}, "usage": map[string]any{
			"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
		}})
	}
	_, _ = io.WriteString(w, "data: [DONE]\n\n")
}

func (m *usageModel) sums(tag string) [3]int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.reported[tag]
}

// postAs posts a turn with key and returns the response's status, headers and body.
func postAs(t *testing.T, base, key, session, text string) (int, http.Header, []byte) {
	t.Helper()
	body, err := json.Marshal(map[string]any{"input": map[string]string{"text": text}})
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, base+"/v1/sessions/"+session+"/turns", strings.NewReader(string(body)))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := apiClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, resp.Header, b
}

// turnStatusAs reads a turn's status with key.
func turnStatusAs(t *testing.T, base, key, turnID string) string {
	t.Helper()
	var st struct {
		Status string `json:"status"`
	}
	status, b := adminCall(t, http.MethodGet, base+"/v1/turns/"+turnID, key, nil)
	require.Equal(t, http.StatusOK, status, string(b))
	require.NoError(t, json.Unmarshal(b, &st))
	return st.Status
}

// TestBudgetCrossedMidTest runs turns of a tenant with a token budget through the openai adapter
// against a model that reports each turn's usage (different counts each time) until the budget is
// crossed: the turn that crosses it finishes (the documented policy), the next one is refused with
// 429 budget-exhausted and a Retry-After at the next UTC midnight, and the usage read through
// /v1/admin/usage is exactly what the model reported.
func TestBudgetCrossedMidTest(t *testing.T) {
	t.Parallel()
	model := &usageModel{reported: map[string][3]int64{}}
	srv := httptest.NewServer(model)
	t.Cleanup(srv.Close)

	env := testenv.New(t, testenv.Options{Partitions: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, acme, err := apikey.Create(ctx, env.Pool, "acme")
	require.NoError(t, err)
	_, probe, err := apikey.Create(ctx, env.Pool, "probe")
	require.NoError(t, err)
	_, root, err := apikey.CreateAdmin(ctx, env.Pool, "", "ops")
	require.NoError(t, err)
	cfg := authConfig(env, "intake,worker,gateway")
	cfg.Agent = "openai"
	cfg.Agents.OpenAIBaseURL = srv.URL + "/v1"
	cfg.Agents.OpenAIModel = "fake-counting-1"
	cfg.Worker.QuotaRefresh = 100 * time.Millisecond
	base := "http://" + startStackCfg(t, env, cfg).Addr()

	const budget = 300
	status, b := adminCall(t, http.MethodPut, base+"/v1/admin/quotas/acme", root, map[string]any{"budget_tokens": budget, "budget_period": "day"})
	require.Equal(t, http.StatusOK, status, string(b))
	status, b = adminCall(t, http.MethodPut, base+"/v1/admin/quotas/acme", acme, map[string]any{"budget_tokens": 1 << 40, "budget_period": "day"})
	require.Equal(t, http.StatusForbidden, status, "a tenant's key cannot set its own budget: %s", b)
	// The probe tenant tells when intake has re-read the quotas: refused while its budget of 0
	// holds, admitted once intake read that it was removed.
	status, b = adminCall(t, http.MethodPut, base+"/v1/admin/quotas/probe", root, map[string]any{"budget_tokens": 0, "budget_period": "day"})
	require.Equal(t, http.StatusOK, status, string(b))
	testenv.WaitFor(t, 20*time.Second, "intake reads the probe's budget", func() bool {
		status, _, _ := postAs(t, base, probe, "probe", "probe turn")
		return status == http.StatusTooManyRequests
	})

	// Turns one after another until the usage reaches the budget; each finishes, the last one too
	// although it crosses the budget (a running turn is never stopped by it).
	turns := 0
	for model.sums("acme")[2] < budget {
		require.Less(t, turns, 50, "the budget is crossed within 50 turns")
		status, _, b := postAs(t, base, acme, "budget", "acme turn "+strconv.Itoa(turns))
		require.Equal(t, http.StatusAccepted, status, "below its budget the tenant is admitted: %s", b)
		var a accepted
		require.NoError(t, json.Unmarshal(b, &a))
		testenv.WaitFor(t, 30*time.Second, "turn "+a.TurnID+" succeeds", func() bool {
			return turnStatusAs(t, base, acme, a.TurnID) == "succeeded"
		})
		turns++
	}
	reported := model.sums("acme")
	t.Logf("budget %d tokens crossed by turn %d: %d input + %d output = %d tokens reported", budget, turns, reported[0], reported[1], reported[2])

	// One refresh of intake's quotas after the crossing turn succeeded (its usage was counted in
	// the same transaction): the probe is admitted once intake read its budget's removal.
	status, b = adminCall(t, http.MethodDelete, base+"/v1/admin/quotas/probe", root, nil)
	require.Equal(t, http.StatusNoContent, status, string(b))
	testenv.WaitFor(t, 20*time.Second, "intake reads the probe's budget removed", func() bool {
		status, _, _ := postAs(t, base, probe, "probe", "probe turn")
		return status == http.StatusAccepted
	})

	status, hdr, b := postAs(t, base, acme, "budget", "acme turn past the budget")
	now := time.Now().UTC()
	require.Equal(t, http.StatusTooManyRequests, status, string(b))
	require.Equal(t, "application/problem+json", hdr.Get("Content-Type"))
	var p struct {
		Type   string `json:"type"`
		Status int    `json:"status"`
	}
	require.NoError(t, json.Unmarshal(b, &p), string(b))
	require.True(t, strings.HasSuffix(p.Type, "budget-exhausted"), p.Type)
	require.Equal(t, http.StatusTooManyRequests, p.Status)
	retry, err := strconv.Atoi(hdr.Get("Retry-After"))
	require.NoError(t, err, "Retry-After in seconds: %q", hdr.Get("Retry-After"))
	reset := time.Date(now.Year(), now.Month(), now.Day()+1, 0, 0, 0, 0, time.UTC)
	require.InDelta(t, reset.Sub(now).Seconds(), float64(retry), 1, "Retry-After is the next UTC midnight")
	t.Logf("turn %d refused: 429 %s, Retry-After %d s (reset %s)", turns+1, p.Type, retry, reset.Format(time.RFC3339))

	// The usage read through the API is exactly what the model reported, and the tenant's key
	// reads its own.
	for _, key := range []string{root, acme} {
		var u struct {
			Usage []struct {
				Tenant       string `json:"tenant"`
				Agent        string `json:"agent"`
				Day          string `json:"day"`
				Model        string `json:"model"`
				Turns        int64  `json:"turns"`
				InputTokens  int64  `json:"input_tokens"`
				OutputTokens int64  `json:"output_tokens"`
				TotalTokens  int64  `json:"total_tokens"`
			} `json:"usage"`
		}
		adminGet(t, base+"/v1/admin/usage?tenant=acme", key, &u)
		require.Len(t, u.Usage, 1, "one agent, one day, one model")
		got := u.Usage[0]
		require.Equal(t, "acme", got.Tenant)
		require.Equal(t, "fake-counting-1", got.Model)
		require.Equal(t, now.Format(time.DateOnly), got.Day)
		require.Equal(t, int64(turns), got.Turns)
		require.Equal(t, reported, [3]int64{got.InputTokens, got.OutputTokens, got.TotalTokens}, "usage read back is exactly what the model reported")
	}
	model.mu.Lock()
	require.Zero(t, model.noUsage, "every request asked for the usage chunk")
	model.mu.Unlock()
}

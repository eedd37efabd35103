package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
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
	cfg.Intake.ModelPrices = "fake-counting-1=0.5/2, other-model=1/1"
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
				Tenant       string   `json:"tenant"`
				Agent        string   `json:"agent"`
				Day          string   `json:"day"`
				Model        string   `json:"model"`
				Turns        int64    `json:"turns"`
				InputTokens  int64    `json:"input_tokens"`
				OutputTokens int64    `json:"output_tokens"`
				TotalTokens  int64    `json:"total_tokens"`
				Cost         *float64 `json:"cost"`
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
		require.NotNil(t, got.Cost, "a priced model's usage has its cost")
		require.InDelta(t, (float64(reported[0])*0.5+float64(reported[1])*2)/1000, *got.Cost, 1e-9)
	}
	// The worker's token counter agrees, tenant by tenant.
	for i, dir := range []string{"input", "output"} {
		v, ok := metricValue(t, base, "turnstile_tokens_total", `tenant="acme"`, `direction="`+dir+`"`, `model="fake-counting-1"`)
		require.True(t, ok)
		require.Equal(t, float64(reported[i]), v, "turnstile_tokens_total %s", dir)
	}
	model.mu.Lock()
	require.Zero(t, model.noUsage, "every request asked for the usage chunk")
	model.mu.Unlock()
}

// TestQuotaLoweredOnEveryWorker runs a tenant's turns on two worker stacks with a running cap of
// 4 and lowers it to 1 through /v1/admin/quotas while turns run on both. Each worker's
// turnstile_quota_refreshed_timestamp_seconds tells when it read the change (printed; at most
// 5 s). From then on, by the turns' start and finish times in Postgres, every start on either
// worker is alone but for the race the README documents (two workers starting within one refresh
// of each other). A held turn has turn.waiting with reason tenant_limit in its stream, and while
// the tenant is at its cap the backlog-age gauge counts none of its queued turns, however old.
func TestQuotaLoweredOnEveryWorker(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{Partitions: 4})
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	_, acme, err := apikey.Create(ctx, env.Pool, "acme")
	require.NoError(t, err)
	_, root, err := apikey.CreateAdmin(ctx, env.Pool, "", "ops")
	require.NoError(t, err)
	const refresh = 200 * time.Millisecond
	env.Config.Worker.QuotaRefresh = refresh
	env.Config.Ops.BacklogInterval = 50 * time.Millisecond
	base := "http://" + startStackCfg(t, env, authConfig(env, "intake,gateway")).Addr()
	status, b := adminCall(t, http.MethodPut, base+"/v1/admin/quotas/acme", root, map[string]any{"max_running": 4})
	require.Equal(t, http.StatusOK, status, string(b))
	workers := make([]string, 2) // each worker's base URL
	for i := range workers {
		w := *env
		w.Config.InstanceID = fmt.Sprintf("%s-quota-worker-%d", env.ID, i)
		workers[i] = "http://" + startStackCfg(t, &w, authConfig(&w, "worker")).Addr()
	}
	// Both workers fetch before the turns go in: a worker that joined late would find the first
	// one running all of them under the cap of 4.
	testenv.WaitFor(t, 60*time.Second, "both workers hold partitions", func() bool { return groupBalanced(t, env, 2) })

	const turns, turnMs = 24, 1500
	sessions := map[string]string{} // turn → session
	tokens := map[string]string{}   // turn → stream token
	for i := range turns {
		session := fmt.Sprintf("quota-%02d", i)
		status, b := adminCall(t, http.MethodPost, base+"/v1/sessions/"+session+"/turns", acme,
			map[string]any{"input": map[string]string{"text": "hold me"}, "metadata": demoMeta(turnMs)})
		require.Equal(t, http.StatusAccepted, status, string(b))
		var a struct {
			TurnID      string `json:"turn_id"`
			StreamToken string `json:"stream_token"`
		}
		require.NoError(t, json.Unmarshal(b, &a))
		sessions[a.TurnID], tokens[a.TurnID] = session, a.StreamToken
	}

	// Both workers run the tenant's turns before the cap is lowered; which partitions each has.
	owner := map[int32]string{}
	testenv.WaitFor(t, 30*time.Second, "both workers run acme's turns", func() bool {
		rows, err := env.Pool.Query(ctx, `SELECT kafka_partition, lease_owner FROM turns WHERE tenant = 'acme' AND status = 'running'`)
		require.NoError(t, err)
		defer rows.Close()
		owners := map[string]bool{}
		for rows.Next() {
			var part int32
			var o string
			require.NoError(t, rows.Scan(&part, &o))
			owner[part], owners[o] = o, true
		}
		return len(owners) == 2
	})
	var running int
	require.NoError(t, env.Pool.QueryRow(ctx, `SELECT count(*) FROM turns WHERE tenant = 'acme' AND status = 'running'`).Scan(&running))
	status, b = adminCall(t, http.MethodPut, base+"/v1/admin/quotas/acme", root, map[string]any{"max_running": 1})
	lowered := time.Now()
	require.Equal(t, http.StatusOK, status, string(b))

	// Each worker holds the change once a refresh that began after the PUT's answer succeeded.
	took := make([]time.Duration, len(workers))
	testenv.WaitFor(t, 10*time.Second, "both workers read the lowered cap", func() bool {
		done := true
		for i, w := range workers {
			if took[i] > 0 {
				continue
			}
			v, ok := metricValue(t, w, "turnstile_quota_refreshed_timestamp_seconds", `role="worker"`)
			require.True(t, ok, "the worker exposes its quota refreshes")
			if v > float64(lowered.UnixNano())/1e9 {
				took[i] = time.Since(lowered)
			} else {
				done = false
			}
		}
		return done
	})
	inForce := lowered.Add(max(took[0], took[1]))
	for i, d := range took {
		require.LessOrEqual(t, d, 5*time.Second, "worker %d holds the lowered cap within 5 s", i)
	}
	t.Logf("max_running 4 -> 1 (%d running on 2 workers): worker 0 holds it %d ms after the PUT, worker 1 %d ms (refresh %s)",
		running, took[0].Milliseconds(), took[1].Milliseconds(), refresh)

	// The held phase: one turn at a time. Meanwhile the backlog gauge, read while one turn has run
	// steadily for longer than the gauge's interval, counts none of the queued turns.
	type sample struct{ gauge, oldest float64 }
	var samples []sample
	testenv.WaitFor(t, 60*time.Second, "the gauge sampled in the held phase", func() bool {
		var id string
		var since, oldest float64
		err := env.Pool.QueryRow(ctx, `SELECT r.turn_id::text, extract(epoch FROM now() - r.started_at)::float8,
				(SELECT extract(epoch FROM now() - min(accepted_at))::float8 FROM turns WHERE tenant = 'acme' AND status = 'queued')
			FROM turns r WHERE r.tenant = 'acme' AND r.status = 'running'
			  AND (SELECT count(*) FROM turns WHERE tenant = 'acme' AND status = 'running') = 1`).Scan(&id, &since, &oldest)
		if err != nil || since < 0.3 || oldest < 2 {
			return false // not one steady turn, or no old queued turn
		}
		gauge, ok := metricValue(t, base, "turnstile_backlog_age_seconds")
		require.True(t, ok, "intake exposes the backlog age")
		var still string
		var n int
		require.NoError(t, env.Pool.QueryRow(ctx, `SELECT coalesce(min(turn_id::text), ''), count(*) FROM turns WHERE tenant = 'acme' AND status = 'running'`).Scan(&still, &n))
		if n == 1 && still == id {
			samples = append(samples, sample{gauge, oldest})
		}
		return len(samples) >= 3
	})
	for _, s := range samples {
		require.Less(t, s.gauge, 0.5, "the backlog gauge counts none of the held turns (oldest queued %.1f s)", s.oldest)
	}
	t.Logf("backlog gauge while held: %v (gauge s, oldest queued s)", samples)

	// A held turn's stream says why it waits.
	var held string
	require.NoError(t, env.Pool.QueryRow(ctx, `SELECT turn_id::text FROM turns WHERE tenant = 'acme' AND status = 'queued' ORDER BY accepted_at DESC LIMIT 1`).Scan(&held))
	stream := testenv.OpenSSE(t, base+"/v1/sessions/"+sessions[held]+"/events?access_token="+url.QueryEscape(tokens[held]), "")
	require.Equal(t, http.StatusOK, stream.Resp.StatusCode)
	evs := stream.Until(t, 30*time.Second, func(e testenv.Event) bool { return e.Type == "turn.waiting" })
	var waiting struct {
		TurnID string `json:"turn_id"`
		Reason string `json:"reason"`
	}
	require.NoError(t, json.Unmarshal([]byte(evs[len(evs)-1].Data), &waiting))
	require.Equal(t, held, waiting.TurnID)
	require.Equal(t, "tenant_limit", waiting.Reason)
	stream.Close()

	// Both workers started turns under the lowered cap before it is raised again.
	startsOn := func() map[string]int {
		rows, err := env.Pool.Query(ctx, `SELECT kafka_partition FROM turns WHERE tenant = 'acme' AND started_at > $1::timestamptz`, inForce)
		require.NoError(t, err)
		defer rows.Close()
		out := map[string]int{}
		for rows.Next() {
			var part int32
			require.NoError(t, rows.Scan(&part))
			out[owner[part]]++
		}
		return out
	}
	testenv.WaitFor(t, 60*time.Second, "both workers start turns under the lowered cap", func() bool {
		var queued int
		require.NoError(t, env.Pool.QueryRow(ctx, `SELECT count(*) FROM turns WHERE tenant = 'acme' AND status = 'queued'`).Scan(&queued))
		return len(startsOn()) == 2 || queued == 0
	})
	perWorker := startsOn()
	raised := time.Now()
	require.Len(t, perWorker, 2, "both workers had turns to start under the lowered cap: %v", perWorker)
	status, b = adminCall(t, http.MethodPut, base+"/v1/admin/quotas/acme", root, map[string]any{"max_running": turns})
	require.Equal(t, http.StatusOK, status, string(b))
	testenv.WaitFor(t, 60*time.Second, "every turn succeeds", func() bool {
		var n int
		require.NoError(t, env.Pool.QueryRow(ctx, `SELECT count(*) FROM turns WHERE tenant = 'acme' AND status = 'succeeded'`).Scan(&n))
		return n == turns
	})

	// Every start between the cap in force and its raise ran alone, or beside a turn another
	// worker started within one refresh of it (neither could know of the other's yet).
	rows, err := env.Pool.Query(ctx, `SELECT s.turn_id::text, (SELECT count(*) FROM turns o WHERE o.tenant = 'acme' AND o.turn_id <> s.turn_id
				AND o.started_at <= s.started_at AND o.finished_at > s.started_at
				AND abs(extract(epoch FROM s.started_at - o.started_at)) > $3::float8)
		FROM turns s WHERE s.tenant = 'acme' AND s.started_at > $1::timestamptz AND s.started_at < $2::timestamptz`,
		inForce, raised, (refresh + 300*time.Millisecond).Seconds())
	require.NoError(t, err)
	starts := 0
	for rows.Next() {
		var id string
		var over int
		require.NoError(t, rows.Scan(&id, &over))
		require.Zero(t, over, "turn %s started over the lowered cap beside a turn that had run for longer than a refresh", id)
		starts++
	}
	require.NoError(t, rows.Err())
	t.Logf("under the lowered cap: %d starts (%v by worker), none over it", starts, perWorker)
}

package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/apikey"
	"github.com/turnstile-run/turnstile/pkg/app"
	"github.com/turnstile-run/turnstile/pkg/demo"
	"github.com/turnstile-run/turnstile/pkg/testenv"
)

// aisdkClient is the Node project of the AI SDK front end (package.json and lockfile; `make node`
// installs it).
var aisdkClient = filepath.Join("..", "..", "..", "clients", "aisdk")

// startAISDKStack runs every role but the broker in this process; the aisdk role calls intake and
// the gateway on the process's own listener.
func startAISDKStack(t *testing.T, env *testenv.Env) (*app.Stack, string) {
	t.Helper()
	stack := startStack(t, env, "intake,worker,gateway,aisdk")
	return stack, "http://" + stack.Addr()
}

// TestAISDKNode runs clients/aisdk's Node tests (node:test) against a running stack: the ai
// package's own DefaultChatTransport and readUIMessageStream drive the chat routes, and the
// committed useChat bundle is checked against a fresh build.
func TestAISDKNode(t *testing.T) {
	t.Parallel()
	_, err := os.Stat(filepath.Join(aisdkClient, "node_modules", "ai"))
	require.NoError(t, err, "clients/aisdk has no node_modules: run make node")
	env := testenv.New(t, testenv.Options{})
	_, base := startAISDKStack(t, env)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "--test", "--test-reporter=spec")
	cmd.Dir = aisdkClient
	cmd.Env = append(os.Environ(), "TURNSTILE_URL="+base, "NO_COLOR=1")
	out, err := cmd.CombinedOutput()
	t.Logf("node --test in clients/aisdk:\n%s", out)
	require.NoError(t, err, "the Node tests failed")
	require.Regexp(t, `(?m)^\S+ fail 0$`, string(out), "the spec reporter's summary")
}

// chatPage reads the useChat page's messages and status.
type chatPage struct {
	Status   string `json:"status"`
	Messages []struct {
		Role string `json:"role"`
		ID   string `json:"id"`
		Text string `json:"text"`
	} `json:"messages"`
}

func readChatPage(ctx context.Context, t *testing.T) chatPage {
	t.Helper()
	raw, err := chromedp.Run(ctx, chromedp.Evaluate[string](`JSON.stringify({
		status: (document.getElementById("status") || {}).textContent || "",
		messages: Array.from(document.querySelectorAll("#messages .msg")).map(function (m) {
			return {role: m.dataset.role, id: m.dataset.id, text: Array.from(m.querySelectorAll(".text")).map(function (t) { return t.textContent; }).join("")};
		})
	})`))
	require.NoError(t, err)
	var p chatPage
	require.NoError(t, json.Unmarshal([]byte(raw), &p))
	return p
}

// answeredOnce: the page shows the user's message and then the whole answer, once, and is idle.
func answeredOnce(p chatPage, text, want string) bool {
	return p.Status == "ready" && len(p.Messages) == 2 &&
		p.Messages[0].Role == "user" && p.Messages[0].Text == text &&
		p.Messages[1].Role == "assistant" && p.Messages[1].Text == want
}

// streaming: the answer has begun on the page and is not over.
func streaming(p chatPage, want string) bool {
	return p.Status == "streaming" && len(p.Messages) == 2 && len(p.Messages[1].Text) > 0 && p.Messages[1].Text != want
}

// sendOnChatPage opens /chat/ with the demo knobs as the turn's metadata and sends text.
func sendOnChatPage(ctx context.Context, t *testing.T, base string, knobs demo.Knobs, text string) {
	t.Helper()
	md, err := json.Marshal(map[string]any{"demo": knobs})
	require.NoError(t, err)
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(base+"/chat/?metadata="+url.QueryEscape(string(md))),
		chromedp.WaitVisible(chromedp.CSS(`#prompt`)),
		typeText(`#prompt`, text),
		chromedp.Click(chromedp.CSS(`#send`)),
	))
}

func screenshot(ctx context.Context, t *testing.T, name string) {
	t.Helper()
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	require.NoError(t, err)
	path := filepath.Join(artifactDir(t, "browser"), name)
	require.NoError(t, os.WriteFile(path, shot, 0o644))
	t.Logf("screenshot: %s", path)
}

// reloadAndFinish reloads the page while the answer streams and waits for the page to show the
// whole answer once, then checks it against the turn's stored output.
func reloadAndFinish(ctx context.Context, t *testing.T, base, text, want string, timeout time.Duration) {
	t.Helper()
	require.NoError(t, chromedp.Do(ctx, chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(`#prompt`))))
	var last chatPage
	testenv.WaitFor(t, timeout, "the whole answer once after the reload", func() bool {
		last = readChatPage(ctx, t)
		return answeredOnce(last, text, want)
	})
	var turn struct {
		Status string `json:"status"`
		Output struct {
			Text string `json:"text"`
		} `json:"output"`
	}
	require.Equal(t, http.StatusOK, getJSON(t, base+"/v1/turns/"+last.Messages[1].ID, &turn))
	require.Equal(t, "succeeded", turn.Status)
	require.Equal(t, want, turn.Output.Text, "the page shows the turn's output")
}

// TestBrowserAISDKReload: the useChat page in headless Chromium sends a message, is reloaded
// while the answer streams (useChat with resume: true), and ends with the whole answer once.
func TestBrowserAISDKReload(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	_, base := startAISDKStack(t, env)
	knobs := demo.Knobs{Tokens: 40, DurationMs: 4000}
	const text = "reload me"
	want := demo.Output(text, knobs)

	ctx := chromium(t)
	errs := listenForErrors(ctx, t)
	runCtx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	sendOnChatPage(runCtx, t, base, knobs, text)
	testenv.WaitFor(t, 30*time.Second, "the answer to begin streaming", func() bool { return streaming(readChatPage(runCtx, t), want) })
	screenshot(runCtx, t, "aisdk-before-reload.png")
	reloadAndFinish(runCtx, t, base, text, want, 60*time.Second)
	screenshot(runCtx, t, "aisdk-after-reload.png")
	require.Empty(t, errs.list(), "the page reported errors")
}

// TestBrowserAISDKWorkerKill: the same with the worker SIGKILLed mid-answer: a replacement takes
// the turn over as a new attempt, the reloaded page resumes it, and the answer shows once.
func TestBrowserAISDKWorkerKill(t *testing.T) {
	c := newCluster(t, clusterOptions{
		Partitions: 1, LeaseTTL: 1500 * time.Millisecond, Heartbeat: 300 * time.Millisecond,
		FrontRoles: "broker,intake,gateway,aisdk",
	})
	c.startWorker("w1")
	knobs := demo.Knobs{Tokens: 40, DurationMs: 6000}
	const text = "survive a dead worker"
	want := demo.Output(text, knobs)

	ctx := chromium(t)
	errs := listenForErrors(ctx, t)
	runCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	sendOnChatPage(runCtx, t, c.base, knobs, text)
	testenv.WaitFor(t, 60*time.Second, "the answer to begin streaming", func() bool { return streaming(readChatPage(runCtx, t), want) })
	c.kill("w1")
	shown := readChatPage(runCtx, t).Messages[1].Text
	require.NotEqual(t, want, shown, "the worker died mid-answer")
	c.startWorker("w2")
	screenshot(runCtx, t, "aisdk-worker-killed.png")
	reloadAndFinish(runCtx, t, c.base, text, want, 90*time.Second)
	screenshot(runCtx, t, "aisdk-worker-killed-after-reload.png")

	var turn struct {
		Attempts int `json:"attempts"`
	}
	p := readChatPage(runCtx, t)
	require.Equal(t, http.StatusOK, getJSON(t, c.base+"/v1/turns/"+p.Messages[1].ID, &turn))
	require.Equal(t, 2, turn.Attempts, fmt.Sprintf("the answer came from the replacement's attempt (page: %q)", strings.TrimSpace(p.Messages[1].Text)))
	require.Empty(t, errs.list(), "the page reported errors")
}

func init() {
	// The UI message stream's body is SSE text; the document describes it as a string.
	openapi3filter.RegisterBodyDecoder("text/event-stream", func(body io.Reader, _ http.Header, _ *openapi3.SchemaRef, _ openapi3filter.EncodingFn) (any, error) {
		b, err := io.ReadAll(body)
		return string(b), err
	})
}

// TestAISDKOpenAPI sends the chat routes' requests through the validating client: requests and
// answers match the OpenAPI document, and refusals come before any stream as problem documents.
func TestAISDKOpenAPI(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{})
	_, base := startAISDKStack(t, env)
	chatID := "openapi-" + testenv.RandomHex(4)
	send := func(path, body string) (int, http.Header, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, base+path, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		resp, err := apiClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, resp.Header, string(b)
	}
	msg := `{"id":"m1","role":"user","parts":[{"type":"text","text":"hi"}]}`

	status, header, body := send("/v1/chat", `{"id":"`+chatID+`","messages":[`+msg+`],"trigger":"submit-message","messageId":null}`)
	require.Equal(t, http.StatusOK, status, body)
	require.Equal(t, "v1", header.Get("x-vercel-ai-ui-message-stream"))
	require.Contains(t, body, `"type":"start"`)
	require.Contains(t, body, `"type":"finish"`)
	require.True(t, strings.HasSuffix(body, "data: [DONE]\n\n"), body)
	require.Contains(t, body, `"delta":"agent."`)

	// The same message again is the same turn (its Idempotency-Key), replayed from its start.
	_, _, again := send("/v1/chat/"+chatID, `{"messages":[`+msg+`]}`)
	require.Equal(t, body, again, "a retried POST of one message is the same turn's same parts")

	r, err := apiClient.Get(base + "/v1/chat/" + chatID + "/stream")
	require.NoError(t, err)
	r.Body.Close()
	require.Equal(t, http.StatusNoContent, r.StatusCode, "no turn is active")

	r, err = apiClient.Get(base + "/v1/chat/" + chatID + "/messages")
	require.NoError(t, err)
	var history []struct {
		Role  string `json:"role"`
		Parts []struct {
			Text string `json:"text"`
		} `json:"parts"`
	}
	require.NoError(t, json.NewDecoder(r.Body).Decode(&history))
	r.Body.Close()
	require.Len(t, history, 2, "one turn: the user's message and its answer")
	require.Equal(t, demo.Output("hi", demo.Knobs{}), history[1].Parts[0].Text)

	status, header, body = send("/v1/chat", `{"id":"`+chatID+`","messages":[{"id":"a","role":"assistant","parts":[]}]}`)
	require.Equal(t, http.StatusUnprocessableEntity, status, body)
	require.Equal(t, "application/problem+json", header.Get("Content-Type"))
	status, _, body = send("/v1/chat", `{"id":"a b","messages":[`+msg+`]}`)
	require.Equal(t, http.StatusBadRequest, status, body)
	require.Contains(t, body, "invalid-session-id")
}

// uiParts reads a UI message stream's parts from an open response, one per call.
type uiParts struct {
	t  *testing.T
	sc *bufio.Scanner
}

func postChat(t *testing.T, base, chatID, text string, md map[string]any) *uiParts {
	t.Helper()
	body, err := json.Marshal(map[string]any{
		"id": chatID, "trigger": "submit-message", "metadata": md,
		"messages": []any{map[string]any{"id": "m-" + testenv.RandomHex(4), "role": "user", "parts": []any{map[string]string{"type": "text", "text": text}}}},
	})
	require.NoError(t, err)
	resp, err := http.Post(base+"/v1/chat", "application/json", bytes.NewReader(body))
	require.NoError(t, err)
	t.Cleanup(func() { resp.Body.Close() })
	require.Equal(t, http.StatusOK, resp.StatusCode)
	return &uiParts{t: t, sc: bufio.NewScanner(resp.Body)}
}

// next returns the next part, or nil after [DONE].
func (u *uiParts) next() map[string]any {
	u.t.Helper()
	for u.sc.Scan() {
		data, ok := strings.CutPrefix(u.sc.Text(), "data: ")
		if !ok {
			continue
		}
		if data == "[DONE]" {
			return nil
		}
		var p map[string]any
		require.NoError(u.t, json.Unmarshal([]byte(data), &p), data)
		return p
	}
	require.NoError(u.t, u.sc.Err())
	u.t.Fatal("the stream ended without [DONE]")
	return nil
}

// text reads parts until n text deltas were read (n < 0: until the end) and returns their text.
func (u *uiParts) text(n int, seen func(map[string]any)) string {
	u.t.Helper()
	var b strings.Builder
	for n != 0 {
		p := u.next()
		if p == nil {
			break
		}
		if seen != nil {
			seen(p)
		}
		if p["type"] == "text-delta" {
			b.WriteString(p["delta"].(string))
			n--
		}
	}
	return b.String()
}

// TestAISDKGatewayCut: the gateway cuts its streams mid-answer; the aisdk role's native stream
// resumes from its cursor and the client's one POST stream carries the whole answer once.
func TestAISDKGatewayCut(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{})
	stack, base := startAISDKStack(t, env)
	knobs := demo.Knobs{Tokens: 30, DurationMs: 3000}
	parts := postChat(t, base, "cut-"+testenv.RandomHex(4), "cut me", map[string]any{"demo": knobs})
	got := parts.text(5, nil)
	stack.Component("gateway").(interface{ CutStreams() }).CutStreams()
	got += parts.text(-1, nil)
	require.Equal(t, demo.Output("cut me", knobs), got)
}

// TestAISDKWorkerKillOneStream: the worker is SIGKILLed mid-answer and the client keeps its POST
// stream: the replacement's attempt repeats the words already shown, which are dropped, so the
// stream carries the whole answer once.
func TestAISDKWorkerKillOneStream(t *testing.T) {
	c := newCluster(t, clusterOptions{
		Partitions: 1, LeaseTTL: 1500 * time.Millisecond, Heartbeat: 300 * time.Millisecond,
		FrontRoles: "broker,intake,gateway,aisdk",
	})
	c.startWorker("w1")
	knobs := demo.Knobs{Tokens: 30, DurationMs: 3000}
	const text = "keep my stream"
	parts := postChat(t, c.base, "kill-"+testenv.RandomHex(4), text, map[string]any{"demo": knobs})
	got := parts.text(5, nil)
	c.kill("w1")
	c.startWorker("w2")
	retried := false
	got += parts.text(-1, func(p map[string]any) {
		if d, ok := p["data"].(map[string]any); ok && p["type"] == "data-turnstile" && d["event"] == "turn.retrying" {
			retried = true
		}
	})
	require.True(t, retried, "the answer was taken over by a new attempt")
	require.Equal(t, demo.Output(text, knobs), got)
}

// TestAISDKTenancy: with TURNSTILE_AUTH=on the chat routes forward the caller's API key, so a
// request without one is refused before anything starts, and a chat ID another tenant uses is
// that tenant's own chat: it sees neither the first tenant's turn nor its messages.
func TestAISDKTenancy(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, keyA, err := apikey.Create(ctx, env.Pool, "acme")
	require.NoError(t, err)
	_, keyB, err := apikey.Create(ctx, env.Pool, "globex")
	require.NoError(t, err)
	stack := startStackCfg(t, env, authConfig(env, "intake,worker,gateway,aisdk"))
	base := "http://" + stack.Addr()
	chatID := "tenancy-" + testenv.RandomHex(4)
	knobs := demo.Knobs{Tokens: 20, DurationMs: 2000}
	body := `{"id":"` + chatID + `","metadata":{"demo":{"tokens":20,"duration_ms":2000}},"messages":[{"id":"m1","role":"user","parts":[{"type":"text","text":"mine"}]}]}`
	do := func(method, path, key, body string) *http.Response {
		t.Helper()
		req, err := http.NewRequest(method, base+path, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		return resp
	}
	anon := do(http.MethodPost, "/v1/chat", "", body)
	defer anon.Body.Close()
	require.Equal(t, http.StatusUnauthorized, anon.StatusCode)
	require.Equal(t, "application/problem+json", anon.Header.Get("Content-Type"))

	mine := do(http.MethodPost, "/v1/chat", keyA, body)
	defer mine.Body.Close()
	require.Equal(t, http.StatusOK, mine.StatusCode)
	parts := &uiParts{t: t, sc: bufio.NewScanner(mine.Body)}
	got := parts.text(3, nil)

	other := do(http.MethodGet, "/v1/chat/"+chatID+"/stream", keyB, "")
	defer other.Body.Close()
	require.Equal(t, http.StatusNoContent, other.StatusCode, "another tenant's chat of that ID has no active turn")
	theirs := do(http.MethodGet, "/v1/chat/"+chatID+"/messages", keyB, "")
	defer theirs.Body.Close()
	require.Equal(t, http.StatusOK, theirs.StatusCode)
	var none []any
	require.NoError(t, json.NewDecoder(theirs.Body).Decode(&none))
	require.Empty(t, none, "another tenant sees none of the chat's messages")

	resumed := do(http.MethodGet, "/v1/chat/"+chatID+"/stream", keyA, "")
	defer resumed.Body.Close()
	require.Equal(t, http.StatusOK, resumed.StatusCode, "the owner resumes its active turn")
	replay := (&uiParts{t: t, sc: bufio.NewScanner(resumed.Body)}).text(-1, nil)
	require.Equal(t, demo.Output("mine", knobs), replay, "the resume replays the whole answer once")
	require.Equal(t, replay, got+parts.text(-1, nil))
}

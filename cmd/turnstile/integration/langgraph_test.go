package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/apikey"
	"github.com/turnstile-run/turnstile/pkg/config"
	"github.com/turnstile-run/turnstile/pkg/demo"
	"github.com/turnstile-run/turnstile/pkg/testenv"
	"github.com/turnstile-run/turnstile/services/langgraph"
)

// langgraphProject is clients/langgraph, the Node project that holds the LangGraph SDK tests and
// the useStream page. Its node_modules come from `make node` (npm ci); without them the tests
// fail rather than skip.
func langgraphProject(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "..", "..", "clients", "langgraph"))
	require.NoError(t, err)
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@langchain", "langgraph-sdk", "package.json")); err != nil {
		t.Fatalf("clients/langgraph has no node_modules (%v): run make node", err)
	}
	return dir
}

// runNode runs node with args in the project directory and the given extra environment, and
// returns its combined output.
func runNode(ctx context.Context, dir string, env []string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "node", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// startLangGraphStack composes intake, a worker, the gateway and the langgraph role in this process
// on a fixed port: the front door calls the native API on its own listener.
func startLangGraphStack(t *testing.T, env *testenv.Env) string {
	t.Helper()
	return startLangGraphStackCfg(t, env, env.Config)
}

// startLangGraphStackCfg is startLangGraphStack from cfg (e.g. a region's).
func startLangGraphStackCfg(t *testing.T, env *testenv.Env, cfg config.Config) string {
	t.Helper()
	cfg.Roles = "intake,worker,gateway,langgraph"
	cfg.HTTPAddr = testenv.FreeAddr(t)
	startStackCfg(t, env, cfg)
	return "http://" + cfg.HTTPAddr
}

// TestLangGraphSDK runs clients/langgraph's node:test suite: @langchain/langgraph-sdk's Client,
// unmodified, creating threads, streaming and joining runs, background runs, cancel, double-texting
// with reject and interrupt, idempotent creation, state and history. It runs once in single-region
// mode and once as region euw1, where every thread and run ID must carry the prefix and another
// region's thread or run is a 421.
func TestLangGraphSDK(t *testing.T) {
	dir := langgraphProject(t)
	for _, tc := range []struct {
		name   string
		region func(config.Config) config.Config
		code   string
	}{
		{"SingleRegion", func(c config.Config) config.Config { return c }, ""},
		{"Region", inRegion, "euw1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := testenv.New(t, testenv.Options{})
			base := startLangGraphStackCfg(t, env, tc.region(env.Config))
			ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
			defer cancel()
			out, err := runNode(ctx, dir, []string{"TURNSTILE_URL=" + base, "TURNSTILE_REGION=" + tc.code},
				"--test", "--test-reporter=spec", "test/sdk.test.js")
			t.Log(out)
			require.NoError(t, err, "the SDK suite failed")
			require.Contains(t, out, "ℹ fail 0")
		})
	}
}

// TestLangGraphWorkerKilledMidRun: the SDK streams a run while the worker running it is SIGKILLed;
// another worker takes the turn over, and the same stream shows the takeover and the run's one
// completion (clients/langgraph/crash).
func TestLangGraphWorkerKilledMidRun(t *testing.T) {
	dir := langgraphProject(t)
	c := newCluster(t, clusterOptions{Partitions: 1, FrontRoles: "broker,intake,gateway,langgraph"})
	c.startWorker("w1")
	thread := "kill-" + testenv.RandomHex(6)
	resp, err := http.Post(c.base+"/threads", "application/json", strings.NewReader(fmt.Sprintf(`{"thread_id":%q}`, thread)))
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	resp.Body.Close()

	mark := filepath.Join(t.TempDir(), "mark")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	type result struct {
		out string
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := runNode(ctx, dir, []string{"TURNSTILE_URL=" + c.base, "LG_THREAD_ID=" + thread, "LG_MARK_FILE=" + mark, "LG_EXPECT_TAKEOVER=1"},
			"--test", "--test-reporter=spec", "crash/worker-kill.test.js")
		done <- result{out, err}
	}()
	var runID string
	testenv.WaitFor(t, 60*time.Second, "the SDK to receive the run's first chunks", func() bool {
		b, err := os.ReadFile(mark)
		runID = string(b)
		return err == nil && runID != ""
	})
	require.Equal(t, "running", c.turn(runID).Status)
	c.kill("w1")
	c.startWorker("w2")
	res := <-done
	t.Log(res.out)
	require.NoError(t, res.err, "the SDK's stream did not see the run through")
	require.Contains(t, res.out, "ℹ fail 0")
	row := c.turn(runID)
	require.Equal(t, "succeeded", row.Status)
	require.GreaterOrEqual(t, row.Attempt, 2, "the turn was taken over")
}

// TestLangGraphStreamCutRejoins: the role ends the SDK's run stream mid-run (as a draining replica
// does); the SDK follows the stream's Location with Last-Event-ID by itself, and the run reads as
// one stream with no gap and no duplicate.
func TestLangGraphStreamCutRejoins(t *testing.T) {
	dir := langgraphProject(t)
	env := testenv.New(t, testenv.Options{})
	cfg := env.Config
	cfg.Roles = "intake,worker,gateway,langgraph"
	stack := startStackCfg(t, env, cfg)
	base := "http://" + stack.Addr()
	lg, ok := stack.Component("langgraph").(*langgraph.LangGraph)
	require.True(t, ok)
	thread := "cut-" + testenv.RandomHex(6)
	resp, err := http.Post(base+"/threads", "application/json", strings.NewReader(fmt.Sprintf(`{"thread_id":%q}`, thread)))
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	resp.Body.Close()

	mark := filepath.Join(t.TempDir(), "mark")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	type result struct {
		out string
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := runNode(ctx, dir, []string{"TURNSTILE_URL=" + base, "LG_THREAD_ID=" + thread, "LG_MARK_FILE=" + mark},
			"--test", "--test-reporter=spec", "crash/worker-kill.test.js")
		done <- result{out, err}
	}()
	testenv.WaitFor(t, 60*time.Second, "the SDK to receive the run's first chunks", func() bool {
		b, err := os.ReadFile(mark)
		return err == nil && len(b) > 0
	})
	lg.CutStreams()
	res := <-done
	t.Log(res.out)
	require.NoError(t, res.err, "the SDK did not read the run through the cut")
	require.Contains(t, res.out, "ℹ fail 0")
	require.Equal(t, 1.0, scrape(t, stack.Addr(), `turnstile_langgraph_requests_total{outcome="ok",route="join_stream"}`),
		"the SDK rejoined once, by itself")
}

// TestLangGraphUseStreamReload: the useStream page in real Chromium streams a run in, is reloaded
// mid-run, and with reconnectOnMount rejoins the run and shows the rest of the answer, once.
func TestLangGraphUseStreamReload(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	base := startLangGraphStack(t, env)
	const tokens = 60
	want := demo.Output("reload me", demo.Knobs{Tokens: tokens})

	ctx := chromium(t)
	errs := listenForErrors(ctx, t)
	runCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	type shown struct {
		Status   string     `json:"status"`
		Messages [][]string `json:"messages"`
		Stored   string     `json:"stored"`
	}
	page := func() shown {
		raw, err := chromedp.Run(runCtx, chromedp.Evaluate[string](`JSON.stringify({
			status: (document.querySelector('[data-testid="status"]') || {}).textContent || "",
			messages: Array.from(document.querySelectorAll('[data-testid="messages"] li')).map(function (li) {
				return [li.dataset.type, li.querySelector(".content").textContent];
			}),
			stored: Object.keys(sessionStorage).filter(function (k) { return k.indexOf("lg:stream:") === 0; }).join(","),
		})`))
		require.NoError(t, err)
		var s shown
		require.NoError(t, json.Unmarshal([]byte(raw), &s))
		return s
	}
	aiText := func(s shown) string {
		for _, m := range s.Messages {
			if m[0] == "ai" {
				return m[1]
			}
		}
		return ""
	}

	require.NoError(t, chromedp.Do(runCtx,
		chromedp.Navigate(fmt.Sprintf("%s/langgraph/?tokens=%d&duration_ms=6000", base, tokens)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="input"]`)),
		typeText(`[data-testid="input"]`, "reload me"),
		chromedp.Click(chromedp.CSS(`[data-testid="send"]`)),
	))
	testenv.WaitFor(t, 30*time.Second, "the answer to begin streaming in", func() bool {
		s := page()
		return len(strings.Fields(aiText(s))) >= 5 && s.Stored != ""
	})
	before := page()
	require.NotEqual(t, want, aiText(before), "the reload comes mid-run")
	shot, err := chromedp.Run(runCtx, chromedp.FullScreenshot(100))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(artifactDir(t, "browser"), "langgraph-usestream-mid-run.png"), shot, 0o644))

	require.NoError(t, chromedp.Do(runCtx, chromedp.Reload()))
	// The reloaded page rejoins the run while it still runs (the stored run ID, joinStream), rather
	// than only reading the finished thread afterwards.
	testenv.WaitFor(t, 30*time.Second, "the reloaded page to stream the rejoined run", func() bool {
		s := page()
		text := aiText(s)
		return s.Status == "streaming" && text != "" && text != want
	})
	testenv.WaitFor(t, 60*time.Second, "the rejoined run's whole answer after the reload", func() bool {
		s := page()
		return aiText(s) == want && s.Status == "idle"
	})
	after := page()
	require.Equal(t, [][]string{{"human", "reload me"}, {"ai", want}}, after.Messages, "one question, one whole answer")
	require.Empty(t, after.Stored, "the finished run is no longer stored for a rejoin")
	shot, err = chromedp.Run(runCtx, chromedp.FullScreenshot(100))
	require.NoError(t, err)
	path := filepath.Join(artifactDir(t, "browser"), "langgraph-usestream-after-reload.png")
	require.NoError(t, os.WriteFile(path, shot, 0o644))
	t.Logf("screenshot: %s", path)
	require.Empty(t, errs.list(), "the page reported errors")
}

// TestLangGraphPageBundleCurrent: the committed useStream bundle (services/langgraph/internal/web/
// static) is what clients/langgraph's sources build.
func TestLangGraphPageBundleCurrent(t *testing.T) {
	dir := langgraphProject(t)
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	log, err := runNode(ctx, dir, []string{"LG_OUT_DIR=" + out}, filepath.Join("node_modules", "vite", "bin", "vite.js"), "build")
	require.NoError(t, err, log)
	committed := filepath.Join("..", "..", "..", "services", "langgraph", "internal", "web", "static")
	read := func(root string) map[string]string {
		files := map[string]string{}
		require.NoError(t, filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b, err := os.ReadFile(p)
			rel, _ := filepath.Rel(root, p)
			files[rel] = string(b)
			return err
		}))
		return files
	}
	built, have := read(out), read(committed)
	names := func(m map[string]string) []string {
		var out []string
		for k := range m {
			out = append(out, k)
		}
		return out
	}
	require.ElementsMatch(t, names(built), names(have), "rebuild the page: cd clients/langgraph && npm run build")
	for name, b := range built {
		require.Equal(t, b, have[name], "%s differs: rebuild the page (cd clients/langgraph && npm run build)", name)
	}
}

// TestLangGraphAuth: with TURNSTILE_AUTH=on the SDK's x-api-key is the native API key. The whole
// SDK suite passes with a tenant's key; a request without one is refused; another tenant sees
// neither the thread nor its runs, and the same thread ID is its own thread.
func TestLangGraphAuth(t *testing.T) {
	dir := langgraphProject(t)
	env := testenv.New(t, testenv.Options{})
	cfg := authConfig(env, "intake,worker,gateway,langgraph")
	stack := startStackCfg(t, env, cfg)
	base := "http://" + stack.Addr()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	_, keyA, err := apikey.Create(ctx, env.Pool, "acme")
	require.NoError(t, err)
	_, keyB, err := apikey.Create(ctx, env.Pool, "globex")
	require.NoError(t, err)

	call := func(method, path, key, body string) (int, map[string]any) {
		req, err := http.NewRequestWithContext(ctx, method, base+path, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		if key != "" {
			req.Header.Set("X-Api-Key", key)
		}
		resp, err := apiClient.Do(req) // checks each request and answer against the OpenAPI document
		require.NoError(t, err)
		defer resp.Body.Close()
		var out map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, out
	}
	status, problem := call("POST", "/threads", "", `{}`)
	require.Equal(t, http.StatusUnauthorized, status)
	require.Equal(t, "https://turnstile.dev/problems/unauthenticated", problem["type"])

	thread := "shared-" + testenv.RandomHex(4)
	status, _ = call("POST", "/threads", keyA, fmt.Sprintf(`{"thread_id":%q,"metadata":{"owner":"acme"}}`, thread))
	require.Equal(t, http.StatusOK, status)
	status, values := call("POST", "/threads/"+thread+"/runs/wait", keyA, `{"assistant_id":"agent","input":{"messages":[{"type":"human","content":"secret"}]},"metadata":{"demo":{"tokens":2}}}`)
	require.Equal(t, http.StatusOK, status, values)
	status, _ = call("GET", "/threads/"+thread, keyB, "")
	require.Equal(t, http.StatusNotFound, status, "another tenant's thread does not exist for it")
	status, own := call("POST", "/threads", keyB, fmt.Sprintf(`{"thread_id":%q}`, thread))
	require.Equal(t, http.StatusOK, status, "the same ID is the other tenant's own thread")
	require.Equal(t, map[string]any{}, own["metadata"])
	status, state := call("GET", "/threads/"+thread+"/state", keyB, "")
	require.Equal(t, http.StatusOK, status)
	status, history := call("POST", "/threads/"+thread+"/history", keyA, `{"limit":5}`)
	require.Equal(t, http.StatusOK, status, history)
	status, _ = call("GET", "/threads/"+thread, keyA, "")
	require.Equal(t, http.StatusOK, status)
	require.NotContains(t, fmt.Sprint(state), "secret", "nothing of the first tenant's session is visible")

	out, err := runNode(ctx, dir, []string{"TURNSTILE_URL=" + base, "TURNSTILE_API_KEY=" + keyA}, "--test", "--test-reporter=spec", "test/sdk.test.js")
	t.Log(out)
	require.NoError(t, err, "the SDK suite failed with auth on")
	require.Contains(t, out, "ℹ fail 0")
}

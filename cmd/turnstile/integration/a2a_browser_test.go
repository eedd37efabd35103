package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/turnstile-run/turnstile/pkg/a2apb"
	"github.com/turnstile-run/turnstile/pkg/config"
	"github.com/turnstile-run/turnstile/pkg/testenv"
)

// a2aPage is a page that calls the A2A endpoint at %[1]s from its own origin with fetch: a
// message/send with the API key %[2]s (a request the browser preflights: Authorization,
// Content-Type and A2A-Version are not simple headers), then one without a key, and records what
// it could read in window.__a2a.
const a2aPage = `<!doctype html><meta charset="utf-8"><title>a2a from another origin</title>
<script>
window.__a2a = {done: false};
(async () => {
  const out = {};
  const body = JSON.stringify({jsonrpc: "2.0", id: 1, method: "message/send", params: {message: {
    kind: "message", messageId: "browser-" + Date.now(), role: "user",
    parts: [{kind: "text", text: "hello from another origin"}]}}});
  try {
    const r = await fetch(%[1]q, {method: "POST", body, headers: {
      "Authorization": "Bearer " + %[2]q, "Content-Type": "application/json", "A2A-Version": "0.3"}});
    out.status = r.status;
    out.answer = await r.json();
  } catch (e) { out.error = String(e); }
  try {
    const r = await fetch(%[1]q, {method: "POST", body, headers: {"Content-Type": "application/json"}});
    out.anonStatus = r.status;
    out.challenge = r.headers.get("WWW-Authenticate");
  } catch (e) { out.anonError = String(e); }
  window.__a2a = Object.assign({done: true}, out);
})();
</script>`

// pageResult is what a2aPage records.
type pageResult struct {
	Done   bool   `json:"done"`
	Status int    `json:"status"`
	Error  string `json:"error"`
	Answer struct {
		Result struct {
			Kind   string `json:"kind"`
			Status struct {
				State string `json:"state"`
			} `json:"status"`
		} `json:"result"`
	} `json:"answer"`
	AnonStatus int    `json:"anonStatus"`
	Challenge  string `json:"challenge"`
	AnonError  string `json:"anonError"`
}

// TestA2ABrowserOtherOrigin: a page in real Chromium, served from an origin that
// TURNSTILE_A2A_CORS_ORIGINS allows, sends a message to /a2a (preflighted) and reads the
// completed task, and reads a keyless call's 401 with its challenge; the same page from an origin
// not in the list is stopped by the browser.
func TestA2ABrowserOtherOrigin(t *testing.T) {
	t.Parallel()
	var page string
	serve := func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte(page))
	}
	allowed := httptest.NewServer(http.HandlerFunc(serve))
	t.Cleanup(allowed.Close)
	other := httptest.NewServer(http.HandlerFunc(serve))
	t.Cleanup(other.Close)
	s := startA2AStackWith(t, "intake,worker,gateway,a2a", func(c *config.Config) { c.A2A.CORSOrigins = allowed.URL })
	page = fmt.Sprintf(a2aPage, s.base+"/a2a", s.keyA)

	browser := chromium(t)
	run := func(url string) pageResult {
		t.Helper()
		ctx, cancel := context.WithTimeout(browser, 60*time.Second)
		defer cancel()
		require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(url)))
		var res pageResult
		testenv.WaitFor(t, 45*time.Second, "the page's calls to end", func() bool {
			raw, err := chromedp.Run(ctx, chromedp.Evaluate[string](`JSON.stringify(window.__a2a)`))
			require.NoError(t, err)
			require.NoError(t, json.Unmarshal([]byte(raw), &res))
			return res.Done
		})
		return res
	}

	res := run(allowed.URL + "/")
	require.Empty(t, res.Error)
	require.Equal(t, http.StatusOK, res.Status)
	require.Equal(t, "task", res.Answer.Result.Kind)
	require.Equal(t, "completed", res.Answer.Result.Status.State)
	require.Equal(t, http.StatusUnauthorized, res.AnonStatus, res.AnonError)
	require.Equal(t, `Bearer realm="turnstile"`, res.Challenge, "the challenge is exposed to the page")

	res = run(other.URL + "/")
	require.Contains(t, res.Error, "Failed to fetch", "an origin not in the list cannot call the endpoint")
	require.Zero(t, res.Status)
}

// a2aV1Page is a page that calls protocol 1.0 at the A2A door %[1]s (the JSON-RPC endpoint) and
// %[1]s/rest (the HTTP+JSON binding) from its own origin with fetch, with the API key %[2]s and
// A2A-Version 1.0 (requests the browser preflights): SendMessage and SendStreamingMessage over
// JSON-RPC, message:send, GET tasks/{id} and message:stream over REST, each stream read to its end.
// It records what it could read in window.__a2a.
const a2aV1Page = `<!doctype html><meta charset="utf-8"><title>a2a 1.0 from another origin</title>
<link rel="icon" href="data:,">
<script>
window.__a2a = {done: false};
(async () => {
  const out = {};
  const headers = {"Authorization": "Bearer " + %[2]q, "Content-Type": "application/json", "A2A-Version": "1.0"};
  const message = (text) => ({message: {messageId: "browser-" + Math.random().toString(36).slice(2), role: "ROLE_USER",
    parts: [{text}], metadata: {demo: {tokens: 3}}}});
  const lastData = (text) => JSON.parse(text.split("\n").filter((l) => l.startsWith("data: ")).at(-1).slice(6));
  try {
    let r = await fetch(%[1]q, {method: "POST", headers, body: JSON.stringify({jsonrpc: "2.0", id: 1, method: "SendMessage", params: message("rpc send")})});
    out.rpcSend = {status: r.status, body: await r.json()};
    r = await fetch(%[1]q, {method: "POST", headers, body: JSON.stringify({jsonrpc: "2.0", id: 2, method: "SendStreamingMessage", params: message("rpc stream")})});
    out.rpcStream = {status: r.status, type: r.headers.get("Content-Type"), last: lastData(await r.text())};
    r = await fetch(%[1]q + "/rest/message:send", {method: "POST", headers, body: JSON.stringify(message("rest send"))});
    out.restSend = {status: r.status, body: await r.json()};
    const id = out.restSend.body.task.id;
    r = await fetch(%[1]q + "/rest/tasks/" + encodeURIComponent(id), {headers});
    out.restGet = {status: r.status, body: await r.json()};
    r = await fetch(%[1]q + "/rest/message:stream", {method: "POST", headers, body: JSON.stringify(message("rest stream"))});
    out.restStream = {status: r.status, type: r.headers.get("Content-Type"), last: lastData(await r.text())};
  } catch (e) { out.error = String(e); }
  window.__a2a = Object.assign({done: true}, out);
})();
</script>`

// v1PageResult is what a2aV1Page records.
type v1PageResult struct {
	Done    bool   `json:"done"`
	Error   string `json:"error"`
	RPCSend struct {
		Status int `json:"status"`
		Body   struct {
			Result struct {
				Task json.RawMessage `json:"task"`
			} `json:"result"`
		} `json:"body"`
	} `json:"rpcSend"`
	RPCStream struct {
		Status int    `json:"status"`
		Type   string `json:"type"`
		Last   struct {
			Result json.RawMessage `json:"result"`
		} `json:"last"`
	} `json:"rpcStream"`
	RESTSend struct {
		Status int `json:"status"`
		Body   struct {
			Task json.RawMessage `json:"task"`
		} `json:"body"`
	} `json:"restSend"`
	RESTGet struct {
		Status int             `json:"status"`
		Body   json.RawMessage `json:"body"`
	} `json:"restGet"`
	RESTStream struct {
		Status int             `json:"status"`
		Type   string          `json:"type"`
		Last   json.RawMessage `json:"last"`
	} `json:"restStream"`
}

// TestA2ABrowserV1OtherOrigin: a page in real Chromium, served from an origin that
// TURNSTILE_A2A_CORS_ORIGINS allows, calls protocol 1.0 over both bindings (every call
// preflighted: Authorization, A2A-Version and a JSON Content-Type are not simple): it reads the
// completed task of a JSON-RPC SendMessage, the last event of a SendStreamingMessage, a REST
// message:send, the same task by GET tasks/{id}, and the last event of a REST message:stream, all
// in 1.0's shapes, with no console error, exception or failed load on the page.
func TestA2ABrowserV1OtherOrigin(t *testing.T) {
	t.Parallel()
	var page string
	allowed := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte(page))
	}))
	t.Cleanup(allowed.Close)
	s := startA2AStackWith(t, "intake,worker,gateway,a2a", func(c *config.Config) { c.A2A.CORSOrigins = allowed.URL })
	page = fmt.Sprintf(a2aV1Page, s.base+"/a2a", s.keyA)

	browser := chromium(t)
	errs := listenForErrors(browser, t)
	ctx, cancel := context.WithTimeout(browser, 90*time.Second)
	defer cancel()
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(allowed.URL+"/")))
	var res v1PageResult
	testenv.WaitFor(t, 75*time.Second, "the page's calls to end", func() bool {
		raw, err := chromedp.Run(ctx, chromedp.Evaluate[string](`JSON.stringify(window.__a2a)`))
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal([]byte(raw), &res))
		return res.Done
	})
	require.Empty(t, res.Error, "every call could be read from the page")

	completed := func(what string, raw json.RawMessage) *a2apb.Task {
		t.Helper()
		require.NotContains(t, string(raw), `"kind"`, what)
		var task a2apb.Task
		require.NoError(t, protojson.Unmarshal(raw, &task), "%s: strictly a 1.0 Task: %s", what, raw)
		require.Equal(t, a2apb.TaskState_TASK_STATE_COMPLETED, task.GetStatus().GetState(), what)
		return &task
	}
	lastEvent := func(what string, raw json.RawMessage) {
		t.Helper()
		var ev a2apb.StreamResponse
		require.NoError(t, protojson.Unmarshal(raw, &ev), "%s: strictly a 1.0 StreamResponse: %s", what, raw)
		require.Equal(t, a2apb.TaskState_TASK_STATE_COMPLETED, ev.GetStatusUpdate().GetStatus().GetState(), "%s: %s", what, raw)
	}
	require.Equal(t, http.StatusOK, res.RPCSend.Status)
	completed("JSON-RPC SendMessage", res.RPCSend.Body.Result.Task)
	require.Equal(t, http.StatusOK, res.RPCStream.Status)
	require.Equal(t, "text/event-stream", res.RPCStream.Type)
	lastEvent("JSON-RPC SendStreamingMessage", res.RPCStream.Last.Result)
	require.Equal(t, http.StatusOK, res.RESTSend.Status)
	sent := completed("REST message:send", res.RESTSend.Body.Task)
	require.Equal(t, http.StatusOK, res.RESTGet.Status)
	got := completed("REST GET tasks/{id}", res.RESTGet.Body)
	require.Equal(t, sent.GetId(), got.GetId())
	require.Equal(t, http.StatusOK, res.RESTStream.Status)
	require.Equal(t, "text/event-stream", res.RESTStream.Type)
	lastEvent("REST message:stream", res.RESTStream.Last)

	require.Empty(t, errs.list(), "the page reported errors")
}

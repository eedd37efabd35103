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

package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/demo"
	"github.com/turnstile-run/turnstile/pkg/testenv"
)

// failedRequests records the page's requests that failed (a network error, a CORS refusal, a
// cancel) or were answered 4xx/5xx.
type failedRequests struct {
	mu   sync.Mutex
	urls map[network.RequestID]string
	errs []string
	seen int
}

func listenForFailedRequests(ctx context.Context, t *testing.T) *failedRequests {
	t.Helper()
	f := &failedRequests{urls: map[network.RequestID]string{}}
	require.NoError(t, chromedp.Listen(ctx, func(ev any) {
		f.mu.Lock()
		defer f.mu.Unlock()
		switch e := ev.(type) {
		case *network.EventRequestWillBeSent:
			f.urls[e.RequestID] = e.Request.Method + " " + e.Request.URL
			f.seen++
		case *network.EventResponseReceived:
			if e.Response.Status >= 400 {
				f.errs = append(f.errs, fmt.Sprintf("%s: %d", f.urls[e.RequestID], e.Response.Status))
			}
		case *network.EventLoadingFailed:
			f.errs = append(f.errs, fmt.Sprintf("%s: %s (canceled %v, blocked %q, cors %v)",
				f.urls[e.RequestID], e.ErrorText, e.Canceled, e.BlockedReason, e.CorsErrorStatus))
		}
	}))
	_, err := chromedp.Call(ctx, network.Enable, network.EnableParams{})
	require.NoError(t, err)
	return f
}

func (f *failedRequests) list() ([]string, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.errs...), f.seen
}

// TestLangGraphChatUI drives clients/langgraph/chat, a page that does what LangChain's
// agent-chat-ui does with the same SDK calls (GET /info at load, useStream with fetchStateHistory,
// onCustomEvent, reconnectOnMount and stream modes values, messages-tuple and custom, a sidebar
// from threads.search by graph_id showing each thread's values.messages), in real Chromium, served
// from an origin other than the LangGraph API's (allowed by TURNSTILE_LANGGRAPH_CORS_ORIGINS): a
// message and its reply with the agent's custom events, a follow-up, the thread in the sidebar, a
// reload restoring it, a second thread (with useStream's events, debug, checkpoint and task
// callbacks registered too), and switching back; no console error and no failed request.
func TestLangGraphChatUI(t *testing.T) {
	started := time.Now()
	dir := langgraphProject(t)
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	log, err := runNode(ctx, dir, []string{"LG_CHAT_OUT_DIR=" + out},
		filepath.Join("node_modules", "vite", "bin", "vite.js"), "build", "--config", "chat.vite.config.js")
	require.NoError(t, err, log)
	built := time.Since(started)

	// The page's own origin: a static server on a port of its own.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	pageSrv := &http.Server{Handler: http.FileServer(http.Dir(out)), ReadHeaderTimeout: 10 * time.Second}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = pageSrv.Serve(ln)
	}()
	t.Cleanup(func() {
		_ = pageSrv.Close()
		<-served
	})
	pageOrigin := "http://" + ln.Addr().String()

	env := testenv.New(t, testenv.Options{})
	cfg := env.Config
	cfg.LangGraph.CORSOrigins = pageOrigin
	api := startLangGraphStackCfg(t, env, cfg)
	require.NotEqual(t, pageOrigin, api, "the page and the API are on different origins")

	const custom = 2
	knobs := demo.Knobs{Custom: custom}
	bctx := chromium(t)
	errs := listenForErrors(bctx, t)
	failed := listenForFailedRequests(bctx, t)
	runCtx, cancelRun := context.WithTimeout(bctx, 3*time.Minute)
	defer cancelRun()

	type shown struct {
		Connection string     `json:"connection"`
		Status     string     `json:"status"`
		Thread     string     `json:"thread"`
		Address    string     `json:"address"`
		Error      string     `json:"error"`
		Messages   [][]string `json:"messages"`
		Threads    [][]string `json:"threads"`
		Custom     []string   `json:"custom"`
		Observed   string     `json:"observed"`
	}
	page := func() shown {
		raw, err := chromedp.Run(runCtx, chromedp.Evaluate[string](`JSON.stringify({
			connection: (document.querySelector('[data-testid="connection"]') || {}).textContent || "",
			status: (document.querySelector('[data-testid="status"]') || {}).textContent || "",
			thread: (document.querySelector('[data-testid="thread"]') || {}).textContent || "",
			address: new URLSearchParams(location.search).get("threadId") || "",
			error: (document.querySelector('[data-testid="error"]') || {}).textContent || "",
			messages: Array.from(document.querySelectorAll('[data-testid="messages"] li')).map(function (li) {
				return [li.dataset.type, li.querySelector(".content").textContent];
			}),
			threads: Array.from(document.querySelectorAll('[data-testid="threads"] li')).map(function (li) {
				return [li.dataset.threadId, li.textContent];
			}),
			custom: Array.from(document.querySelectorAll('[data-testid="custom"] li')).map(function (li) { return li.textContent; }),
			observed: (document.querySelector('[data-testid="observed"]') || {}).textContent || "{}",
		})`))
		require.NoError(t, err)
		var s shown
		require.NoError(t, json.Unmarshal([]byte(raw), &s))
		require.Empty(t, s.Error, "the page shows an error")
		return s
	}
	conversation := func(texts ...string) [][]string {
		var out [][]string
		for _, text := range texts {
			out = append(out, []string{"human", text}, []string{"ai", demo.Output(text, knobs)})
		}
		return out
	}
	waitShown := func(what string, want func(shown) bool) shown {
		t.Helper()
		var s shown
		testenv.WaitFor(t, time.Minute, what, func() bool {
			s = page()
			return want(s)
		})
		return s
	}
	send := func(text string) {
		t.Helper()
		require.NoError(t, chromedp.Do(runCtx,
			typeText(`[data-testid="input"]`, text),
			chromedp.Click(chromedp.CSS(`[data-testid="send"]`)),
		))
	}
	listed := func(s shown, thread, first string) bool {
		for _, th := range s.Threads {
			if th[0] == thread && th[1] == first {
				return true
			}
		}
		return false
	}
	screenshot := func(name string) {
		t.Helper()
		shot, err := chromedp.Run(runCtx, chromedp.FullScreenshot(100))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(artifactDir(t, "browser"), name), shot, 0o644))
	}

	require.NoError(t, chromedp.Do(runCtx,
		chromedp.Navigate(fmt.Sprintf("%s/?apiUrl=%s&assistantId=agent&custom=%d", pageOrigin, api, custom)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="input"]`)),
	))
	waitShown("the connection check (GET /info)", func(s shown) bool { return s.Connection == "connected" })

	// A message, its reply and the agent's custom events.
	send("hello there")
	s := waitShown("the first reply", func(s shown) bool {
		return s.Status == "idle" && len(s.Messages) == 2 && s.Messages[1][1] == demo.Output("hello there", knobs)
	})
	require.Equal(t, conversation("hello there"), s.Messages)
	require.Equal(t, []string{`{"of":2,"step":1}`, `{"of":2,"step":2}`}, s.Custom, "onCustomEvent saw the agent's custom events, in order")
	first := s.Thread
	require.NotEmpty(t, first)
	require.Equal(t, first, s.Address, "the thread is in the address")

	// A follow-up on the same thread.
	send("and a follow-up")
	s = waitShown("the follow-up's reply", func(s shown) bool { return s.Status == "idle" && len(s.Messages) == 4 })
	require.Equal(t, conversation("hello there", "and a follow-up"), s.Messages)
	require.Equal(t, first, s.Thread)
	s = waitShown("the sidebar to list the thread by its first message", func(s shown) bool { return listed(s, first, "hello there") })
	require.Len(t, s.Threads, 1)
	screenshot("langgraph-chat-first-thread.png")

	// A reload restores the conversation from the thread's state history.
	require.NoError(t, chromedp.Do(runCtx, chromedp.Reload()))
	s = waitShown("the reloaded page to restore the thread", func(s shown) bool {
		return s.Connection == "connected" && len(s.Messages) == 4 && listed(s, first, "hello there")
	})
	require.Equal(t, conversation("hello there", "and a follow-up"), s.Messages)
	require.Equal(t, first, s.Thread)

	// The same page asking for every graph view too (observe=1: onLangChainEvent, onDebugEvent,
	// onCheckpointEvent, onTaskEvent), as some front ends do: the thread opens from the address,
	// and the next run streams them alongside its messages.
	require.NoError(t, chromedp.Do(runCtx,
		chromedp.Navigate(fmt.Sprintf("%s/?apiUrl=%s&assistantId=agent&custom=%d&observe=1&threadId=%s", pageOrigin, api, custom, first)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="input"]`)),
	))
	waitShown("the thread opened from the address", func(s shown) bool { return s.Thread == first && len(s.Messages) == 4 })

	// A second thread.
	require.NoError(t, chromedp.Do(runCtx, chromedp.Click(chromedp.CSS(`[data-testid="new-thread"]`))))
	waitShown("an empty new thread", func(s shown) bool { return s.Thread == "" && len(s.Messages) == 0 })
	send("a second thread")
	s = waitShown("the second thread's reply", func(s shown) bool {
		return s.Status == "idle" && s.Thread != "" && s.Thread != first && len(s.Messages) == 2 && s.Messages[1][0] == "ai"
	})
	require.Equal(t, conversation("a second thread"), s.Messages)
	second := s.Thread
	var observed map[string][]string
	require.NoError(t, json.Unmarshal([]byte(s.Observed), &observed))
	require.Equal(t, []string{"task", "task_result", "checkpoint"}, observed["debug"])
	require.Equal(t, []string{"task", "result"}, observed["tasks"])
	require.Equal(t, []string{"checkpoint"}, observed["checkpoints"])
	require.Equal(t, "on_chain_start", observed["events"][0])
	require.Equal(t, "on_chain_end", observed["events"][len(observed["events"])-1])
	require.Contains(t, observed["events"], "on_custom_event")
	require.Contains(t, observed["events"], "on_chat_model_stream")
	s = waitShown("the sidebar to list both threads", func(s shown) bool {
		return listed(s, first, "hello there") && listed(s, second, "a second thread")
	})
	require.Len(t, s.Threads, 2)

	// Switching back to the first thread shows its conversation again.
	require.NoError(t, chromedp.Do(runCtx, chromedp.Click(chromedp.CSS(fmt.Sprintf(`[data-thread-id=%q] button`, first)))))
	s = waitShown("the first thread again", func(s shown) bool { return s.Thread == first && len(s.Messages) == 4 })
	require.Equal(t, conversation("hello there", "and a follow-up"), s.Messages)
	require.Equal(t, first, s.Address)
	screenshot("langgraph-chat-switched-back.png")

	require.Empty(t, errs.list(), "the page logged errors")
	bad, requests := failed.list()
	require.Empty(t, bad, "requests failed")
	require.Greater(t, requests, 10, "the page's requests were watched")
	for _, want := range []string{"/info", "/threads/search", "/history", "/runs/stream"} {
		require.Truef(t, strings.Contains(strings.Join(requestLog(failed), "\n"), want), "the page called %s", want)
	}
	t.Logf("%d requests from %s to %s, none failed; page built in %v, test wall %v",
		requests, pageOrigin, api, built.Round(time.Millisecond), time.Since(started).Round(time.Millisecond))
}

// requestLog lists the requests the page sent.
func requestLog(f *failedRequests) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]string, 0, len(f.urls))
	for _, u := range f.urls {
		out = append(out, u)
	}
	return out
}

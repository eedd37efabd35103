package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/demo"
	"github.com/turnstile-run/turnstile/pkg/httpx"
	"github.com/turnstile-run/turnstile/pkg/testenv"
)

type listedTurn struct {
	TurnID string `json:"turn_id"`
	Status string `json:"status"`
	Input  struct {
		Text string `json:"text"`
	} `json:"input"`
}

// TestDemoSessionTurnsCarryInput: the session's turns list carries each turn's input, which the
// demo page shows as the user's messages after a reload.
func TestDemoSessionTurnsCarryInput(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{})
	stack := startStack(t, env, "intake,worker,gateway")
	base := "http://" + stack.Addr()
	session := "inputs-" + testenv.RandomHex(4)
	first := postTurn(t, base, session, "first message")
	second := postTurn(t, base, session, "second message")
	var page struct {
		Turns []listedTurn `json:"turns"`
	}
	testenv.WaitFor(t, 30*time.Second, "both turns to succeed", func() bool {
		require.Equal(t, http.StatusOK, getJSON(t, base+"/v1/sessions/"+session+"/turns", &page))
		return len(page.Turns) == 2 && page.Turns[0].Status == "succeeded" && page.Turns[1].Status == "succeeded"
	})
	require.Equal(t, second.TurnID, page.Turns[0].TurnID, "newest first")
	require.Equal(t, "second message", page.Turns[0].Input.Text)
	require.Equal(t, first.TurnID, page.Turns[1].TurnID)
	require.Equal(t, "first message", page.Turns[1].Input.Text)

	var one listedTurn
	require.Equal(t, http.StatusOK, getJSON(t, base+"/v1/turns/"+first.TurnID, &one))
	require.Equal(t, "first message", one.Input.Text, "a turn's own view carries its input too")
}

// consoleErrors collects what the page reports as an error: console.error and console.assert
// calls, uncaught exceptions, and the browser's own error log entries (failed loads among them).
type consoleErrors struct {
	mu   sync.Mutex
	errs []string
}

func listenForErrors(ctx context.Context, t *testing.T) *consoleErrors {
	t.Helper()
	c := &consoleErrors{}
	require.NoError(t, chromedp.Listen(ctx, func(ev any) {
		var msg string
		switch e := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			if e.Type != runtime.ConsoleAPICalledTypeError && e.Type != runtime.ConsoleAPICalledTypeAssert {
				return
			}
			parts := make([]string, 0, len(e.Args))
			for _, a := range e.Args {
				parts = append(parts, strings.Trim(string(a.Value), `"`)+a.Description)
			}
			msg = fmt.Sprintf("console.%s: %s", e.Type, strings.Join(parts, " "))
		case *runtime.EventExceptionThrown:
			d := e.ExceptionDetails
			msg = fmt.Sprintf("exception: %s at %s:%d", d.Text, d.URL, d.LineNumber+1)
			if d.Exception != nil {
				msg += " " + d.Exception.Description
			}
		case *log.EventEntryAdded:
			if e.Entry.Level != log.EntryLevelError {
				return
			}
			msg = fmt.Sprintf("log %s: %s (%s)", e.Entry.Source, e.Entry.Text, e.Entry.URL)
		default:
			return
		}
		c.mu.Lock()
		c.errs = append(c.errs, msg)
		c.mu.Unlock()
	}))
	return c
}

func (c *consoleErrors) list() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.errs...)
}

// pageMessage is one message of the page's log, in page order.
type pageMessage struct {
	Class  string `json:"class"`
	Turn   string `json:"turn"`
	Text   string `json:"text"`
	Status string `json:"status"`
}

// TestBrowserDemoPageReload: a real browser loads the demo page, posts a message, reloads, and sees
// its own message followed by the answer, with no console error or exception on either load.
func TestBrowserDemoPageReload(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	stack := startStack(t, env, "intake,worker,gateway")
	base := "http://" + stack.Addr()
	const tokens = 8
	const text = "hello after reload"
	want := strings.Join(demo.Reply(text, demo.Knobs{Tokens: tokens}), "")

	ctx := chromium(t)
	errs := listenForErrors(ctx, t)
	runCtx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	messages := func() []pageMessage {
		raw, err := chromedp.Run(runCtx, chromedp.Evaluate[string](`JSON.stringify(Array.from(document.querySelectorAll("#log .msg")).map(function (m) {
			var t = m.querySelector(".text"), s = m.querySelector(".status");
			return {class: m.className, turn: m.dataset.turn || "", text: t ? t.textContent : m.textContent, status: s ? s.textContent : ""};
		}))`))
		require.NoError(t, err)
		var out []pageMessage
		require.NoError(t, json.Unmarshal([]byte(raw), &out))
		return out
	}
	answered := func(ms []pageMessage) bool {
		return len(ms) == 2 && ms[0].Class == "msg user" && ms[1].Status == "completed" && ms[1].Text == want
	}

	require.NoError(t, chromedp.Do(runCtx,
		chromedp.Navigate(fmt.Sprintf("%s/?tokens=%d", base, tokens)),
		chromedp.WaitVisible(chromedp.CSS(`#conn.live`)),
		typeText(`#text`, text),
		chromedp.Click(chromedp.CSS(`#send`)),
	))
	testenv.WaitFor(t, 60*time.Second, "the answer on the page", func() bool { return answered(messages()) })
	session, err := chromedp.Run(runCtx, chromedp.Evaluate[string](`new URLSearchParams(location.search).get("session")`))
	require.NoError(t, err)
	require.NotEmpty(t, session, "the page keeps its session in the address, so a reload returns to it")

	require.NoError(t, chromedp.Do(runCtx,
		chromedp.Reload(),
		chromedp.WaitVisible(chromedp.CSS(`#conn.live`)),
	))
	testenv.WaitFor(t, 60*time.Second, "the user's message and the answer after the reload", func() bool { return answered(messages()) })
	ms := messages()
	require.Equal(t, text, ms[0].Text, "the user's own message is back")
	require.Equal(t, ms[1].Turn, ms[0].Turn, "the message sits right before its answer")
	shownSession, err := chromedp.Run(runCtx, chromedp.Evaluate[string](`document.getElementById("session").textContent`))
	require.NoError(t, err)
	require.Equal(t, session, shownSession)

	shot, err := chromedp.Run(runCtx, chromedp.FullScreenshot(100))
	require.NoError(t, err)
	path := filepath.Join(artifactDir(t, "browser"), "demo-reload.png")
	require.NoError(t, os.WriteFile(path, shot, 0o644))
	t.Logf("screenshot: %s", path)

	require.Empty(t, errs.list(), "the page reported errors")
	// The listener sees what the page reports: a console.error now must show up.
	require.NoError(t, chromedp.Do(runCtx, chromedp.Evaluate[chromedp.Void](`console.error("probe")`)))
	testenv.WaitFor(t, 10*time.Second, "the probe error to be seen", func() bool {
		for _, e := range errs.list() {
			if strings.Contains(e, "probe") {
				return true
			}
		}
		return false
	})
}

// TestPagesRefuseFraming: every HTML page turnstile serves (the demo chat, the AI SDK and the
// LangGraph pages) carries a Content-Security-Policy that allows only its own origin and forbids
// framing, and X-Frame-Options for browsers that predate frame-ancestors. The browser tests of
// each page run under this policy, so a page that needs more fails there.
func TestPagesRefuseFraming(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	stack := startStack(t, env, "intake,gateway,aisdk,langgraph")
	for _, path := range []string{"/", "/chat/", "/langgraph/"} {
		resp, err := http.Get("http://" + stack.Addr() + path)
		require.NoError(t, err)
		_ = resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, path)
		require.Contains(t, resp.Header.Get("Content-Type"), "text/html", path)
		require.Equal(t, httpx.PageCSP, resp.Header.Get("Content-Security-Policy"), path)
		require.Contains(t, resp.Header.Get("Content-Security-Policy"), "frame-ancestors 'none'", path)
		require.Equal(t, "DENY", resp.Header.Get("X-Frame-Options"), path)
		require.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"), path)
	}
}

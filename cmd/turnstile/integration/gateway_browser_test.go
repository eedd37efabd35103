package integration

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/demo"
	"github.com/turnstile-run/turnstile/pkg/testenv"
	"github.com/turnstile-run/turnstile/services/gateway"
)

// pageState is what the demo chat page records in window.__turnstile.
type pageState struct {
	IDs   []string `json:"ids"`
	Turns map[string]struct {
		Text   string `json:"text"`
		Status string `json:"status"`
		Deltas []int  `json:"deltas"`
	} `json:"turns"`
	States []string `json:"states"`
}

// artifactDir is where tests keep what a human may want to look at (.artifacts/ at the repository
// root, gitignored), or TURNSTILE_ARTIFACTS.
func artifactDir(t *testing.T, sub string) string {
	t.Helper()
	dir := os.Getenv("TURNSTILE_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join("..", "..", "..", ".artifacts")
	}
	dir = filepath.Join(dir, sub)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	return dir
}

// chromium starts Debian's chromium headless with a fresh profile (scripts/ensure-chromium.sh
// installs it; TURNSTILE_CHROMIUM names another binary).
func chromium(t *testing.T) context.Context {
	t.Helper()
	bin := os.Getenv("TURNSTILE_CHROMIUM")
	if bin == "" {
		bin = "/usr/bin/chromium"
	}
	_, err := os.Stat(bin)
	require.NoError(t, err, "chromium is required for the browser tests: run scripts/ensure-chromium.sh")
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(bin),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1000, 800),
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(allocCtx)
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
	})
	require.NoError(t, chromedp.Do(ctx), "start chromium")
	return ctx
}

// typeText focuses the element sel names, once it is visible, and types text into it. It stands
// in for chromedp.SendKeys, which reads the node's attributes without the node's lock (a data
// race with chromedp's own DOM-event goroutine whenever the page changes an attribute of the
// element, as React does) only to tell a file input, which these pages do not type into.
func typeText(sel, text string) chromedp.Action[chromedp.Void] {
	return chromedp.Steps(
		chromedp.Focus(chromedp.CSS(sel), chromedp.NodeVisible),
		chromedp.KeyEvent(text),
	)
}

// TestBrowserResumesAfterCut: a real browser opens the demo chat page, sends a message, the
// gateway cuts the connection mid-turn, the browser's EventSource reconnects with Last-Event-ID,
// and the page shows the complete reply with no missing and no repeated token.
func TestBrowserResumesAfterCut(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	stack := startStack(t, env, "intake,worker,gateway")
	gw, ok := stack.Component("gateway").(*gateway.Gateway)
	require.True(t, ok)
	opens := make(chan gateway.OpenInfo, 64)
	gw.SetHooks(&gateway.Hooks{OnOpen: func(i gateway.OpenInfo) {
		select {
		case opens <- i:
		default:
		}
	}})
	base := "http://" + stack.Addr()
	session := "browser-" + testenv.RandomHex(4)
	const tokens = 60

	ctx := chromium(t)
	runCtx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	require.NoError(t, chromedp.Do(runCtx,
		chromedp.Navigate(base+"/?session="+session+"&tokens=60&duration_ms=4000"),
		chromedp.WaitVisible(chromedp.CSS(`#conn.live`)),
	))
	first := <-opens
	require.Equal(t, "", first.CursorSource, "the page's first stream has no cursor")

	require.NoError(t, chromedp.Do(runCtx,
		typeText(`#text`, "hello browser"),
		chromedp.Click(chromedp.CSS(`#send`)),
	))
	state := func() pageState {
		raw, err := chromedp.Run(runCtx, chromedp.Evaluate[string](`JSON.stringify(window.__turnstile)`))
		require.NoError(t, err)
		var st pageState
		require.NoError(t, json.Unmarshal([]byte(raw), &st))
		return st
	}
	deltas := func(st pageState) int {
		n := 0
		for _, tr := range st.Turns {
			n += len(tr.Deltas)
		}
		return n
	}
	testenv.WaitFor(t, 60*time.Second, "the first tokens on the page", func() bool { return deltas(state()) >= 10 })
	before := deltas(state())
	require.Less(t, before, tokens, "the cut must come mid-turn")

	gw.CutStreams()
	var resumed gateway.OpenInfo
	select {
	case resumed = <-opens:
	case <-time.After(30 * time.Second):
		t.Fatal("the browser did not reconnect")
	}
	require.Equal(t, "header", resumed.CursorSource, "EventSource reconnects with Last-Event-ID")
	require.Equal(t, "resumed", resumed.Result)
	require.NotEmpty(t, resumed.Cursor)

	testenv.WaitFor(t, 60*time.Second, "the turn to complete on the page", func() bool {
		for _, tr := range state().Turns {
			if tr.Status == "completed" {
				return true
			}
		}
		return false
	})
	st := state()
	require.Len(t, st.Turns, 1)
	want := strings.Join(demo.Reply("hello browser", demo.Knobs{Tokens: tokens}), "")
	for _, tr := range st.Turns {
		idx := make([]int, tokens)
		for i := range idx {
			idx[i] = i
		}
		require.Equal(t, idx, tr.Deltas, "every token exactly once, in order")
		require.Equal(t, want, tr.Text)
	}
	seen := map[string]bool{}
	for _, id := range st.IDs {
		require.False(t, seen[id], "event %s delivered twice", id)
		seen[id] = true
	}
	require.Contains(t, st.States, "reconnecting", "the page showed the reconnecting indicator")

	shot, err := chromedp.Run(runCtx, chromedp.FullScreenshot(100))
	require.NoError(t, err)
	path := filepath.Join(artifactDir(t, "browser"), "chat-resume.png")
	require.NoError(t, os.WriteFile(path, shot, 0o644))
	t.Logf("screenshot: %s (cut after %d of %d tokens, resumed from %s)", path, before, tokens, resumed.Cursor)
}

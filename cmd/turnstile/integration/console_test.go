package integration

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/apikey"
	"github.com/turnstile-run/turnstile/pkg/demo"
	"github.com/turnstile-run/turnstile/pkg/testenv"
)

// consoleClient is the Node project of the console (package.json and lockfile; `make node`
// installs it).
var consoleClient = filepath.Join("..", "..", "..", "clients", "console")

// TestConsoleBundle: the console intake embeds (services/intake/internal/console/dist) is the
// vite build of clients/console's sources and lockfile.
func TestConsoleBundle(t *testing.T) {
	t.Parallel()
	_, err := os.Stat(filepath.Join(consoleClient, "node_modules", "vite"))
	require.NoError(t, err, "clients/console has no node_modules: run make node")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "--test", "--test-reporter=spec", "test/bundle.test.js")
	cmd.Dir = consoleClient
	cmd.Env = append(os.Environ(), "NO_COLOR=1")
	out, err := cmd.CombinedOutput()
	t.Logf("node --test in clients/console:\n%s", out)
	require.NoError(t, err, "the committed console is not the build of its sources")
	require.Regexp(t, `(?m)^\S+ fail 0$`, string(out))
}

// refusedRequests collects the page's requests that failed or were answered with a status of 400
// or more, except those a test expects (by URL suffix and status).
type refusedRequests struct {
	mu      sync.Mutex
	urls    map[network.RequestID]string
	fails   []string
	allowed map[string]int64
}

func listenForRefusedRequests(ctx context.Context, t *testing.T) *refusedRequests {
	t.Helper()
	f := &refusedRequests{urls: map[network.RequestID]string{}, allowed: map[string]int64{}}
	require.NoError(t, chromedp.Listen(ctx, func(ev any) {
		f.mu.Lock()
		defer f.mu.Unlock()
		switch e := ev.(type) {
		case *network.EventRequestWillBeSent:
			f.urls[e.RequestID] = e.Request.URL
		case *network.EventResponseReceived:
			if e.Response.Status < 400 {
				return
			}
			for suffix, status := range f.allowed {
				if strings.HasSuffix(e.Response.URL, suffix) && int64(e.Response.Status) == status {
					return
				}
			}
			f.fails = append(f.fails, fmt.Sprintf("%d %s", e.Response.Status, e.Response.URL))
		case *network.EventLoadingFailed:
			// A stream the page closed itself ends as canceled: not a failure.
			if e.Canceled {
				return
			}
			f.fails = append(f.fails, fmt.Sprintf("%s %s", e.ErrorText, f.urls[e.RequestID]))
		}
	}))
	return f
}

// allow expects one answer of status to a URL ending in suffix (a 404 a test provokes).
func (f *refusedRequests) allow(suffix string, status int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.allowed[suffix] = status
}

func (f *refusedRequests) list() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.fails...)
}

// consolePage drives one tab of the console.
type consolePage struct {
	t     *testing.T
	ctx   context.Context
	base  string
	shots string
	errs  *consoleErrors
	fails *refusedRequests
}

func openConsole(browser context.Context, t *testing.T, base, key, shots string) *consolePage {
	t.Helper()
	tab, cancelTab := chromedp.NewContext(browser)
	t.Cleanup(cancelTab)
	require.NoError(t, chromedp.Do(tab))
	p := &consolePage{t: t, ctx: tab, base: base, shots: shots}
	p.errs = listenForErrors(tab, t)
	p.fails = listenForRefusedRequests(tab, t)
	p.run(
		chromedp.Navigate(base+"/console/"),
		chromedp.WaitVisible(chromedp.CSS(`#api-key`)),
		typeText(`#api-key`, key),
		chromedp.Click(chromedp.CSS(`#key-save`)),
		chromedp.WaitVisible(chromedp.CSS(`#key-clear`)),
	)
	return p
}

func (p *consolePage) run(actions ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 60*time.Second)
	defer cancel()
	require.NoError(p.t, chromedp.Do(ctx, actions...))
}

// script runs js in the page as a step.
func script(js string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := chromedp.Evaluate[any](js)(ctx, t)
		return err
	})
}

// eval runs a script in the page and returns its value.
func eval[T any](p *consolePage, js string) T {
	p.t.Helper()
	v, err := chromedp.Run(p.ctx, chromedp.Evaluate[T](js))
	require.NoError(p.t, err, js)
	return v
}

// attrs reads an attribute of every element selector matches, in page order.
func (p *consolePage) attrs(selector, attr string) []string {
	p.t.Helper()
	return eval[[]string](p, fmt.Sprintf(`Array.from(document.querySelectorAll(%q)).map(e => e.getAttribute(%q))`, selector, attr))
}

// goTo opens a console route (a URL fragment) and waits for selector.
func (p *consolePage) goTo(fragment, selector string) {
	p.t.Helper()
	p.run(script(fmt.Sprintf(`window.location.hash = %q`, fragment)), chromedp.WaitVisible(chromedp.CSS(selector)))
}

// waitFor waits, in the page, until js is true; on a timeout it keeps a screenshot and the
// page's text.
func (p *consolePage) waitFor(what, js string) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 70*time.Second)
	defer cancel()
	_, err := chromedp.Run(ctx, chromedp.Poll[bool](js, chromedp.WithPollingInterval(50*time.Millisecond),
		chromedp.WithPollingTimeout(60*time.Second)))
	if err != nil {
		name := "failed-" + strings.NewReplacer(" ", "-", "'", "").Replace(what)
		p.shot(name)
		p.t.Fatalf("waiting for %s: %v (screenshot %s.png); the page says:\n%s", what, err, name,
			eval[string](p, `location.hash + "\n" + document.body.innerText`))
	}
}

func (p *consolePage) shot(name string) {
	p.t.Helper()
	shot, err := chromedp.Run(p.ctx, chromedp.FullScreenshot(100))
	require.NoError(p.t, err)
	require.NoError(p.t, os.WriteFile(filepath.Join(p.shots, name+".png"), shot, 0o644))
}

// clean fails the test on any console error, exception or failed request the tab saw.
func (p *consolePage) clean() {
	p.t.Helper()
	require.Empty(p.t, p.errs.list(), "console errors")
	require.Empty(p.t, p.fails.list(), "failed requests")
}

// TestConsoleBrowser: in real headless Chromium with an admin key, the console filters the turns
// list, opens a dead-lettered turn's timeline, replays it on other settings and follows the
// replay's stream live to its end, runs a bulk cancel by filter and follows its progress, pauses
// the agent (a new turn stays queued, shown as paused) and resumes it (the turn runs), and
// shows the session, backlog, workers, dead letters and audit pages; with a tenant's key every
// page shows that tenant's turns only and another tenant's turn is a 404. No console error and no
// failed request on any page; screenshots go to .artifacts/console/.
func TestConsoleBrowser(t *testing.T) {
	env := testenv.New(t, testenv.Options{Partitions: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, acme, err := apikey.Create(ctx, env.Pool, "acme")
	require.NoError(t, err)
	_, globex, err := apikey.Create(ctx, env.Pool, "globex")
	require.NoError(t, err)
	_, root, err := apikey.CreateAdmin(ctx, env.Pool, "", "ops")
	require.NoError(t, err)
	cfg := authConfig(env, "intake,worker,gateway")
	cfg.DemoFaults = "allow"
	stack := startStackCfg(t, env, cfg)
	base := "http://" + stack.Addr()
	s := &tenantStack{env: env, base: base}

	failing := s.post(t, acme, "s1", `{"input":{"text":"fail me"},"metadata":{"demo":{"fail_attempts":99}}}`).TurnID
	fine := s.post(t, acme, "s2", `{"input":{"text":"fine"}}`).TurnID
	theirs := s.post(t, globex, "g1", `{"input":{"text":"theirs"},"metadata":{"demo":{"fail_attempts":99}}}`).TurnID
	// Four turns of one session behind a slow one: the bulk cancel's targets.
	var bulk []string
	for range 4 {
		bulk = append(bulk, s.post(t, acme, "bulk", `{"input":{"text":"wait"},"metadata":{"demo":{"duration_ms":60000}}}`).TurnID)
	}
	turnOf := func(key, id string) adminTurn {
		var v adminTurn
		adminGet(t, base+"/v1/admin/turns/"+id, key, &v)
		return v
	}
	testenv.WaitFor(t, 60*time.Second, "the seeded turns to end", func() bool {
		return turnOf(root, failing).DeadLettered != "" && turnOf(root, fine).Status == "succeeded" &&
			turnOf(root, theirs).DeadLettered != ""
	})

	shots := artifactDir(t, "console")
	browser := chromium(t)
	admin := openConsole(browser, t, base, root, shots)

	t.Run("FilterTheList", func(t *testing.T) {
		admin.t = t
		admin.goTo("#/turns", `#filters`)
		admin.waitFor("every tenant's turns", fmt.Sprintf(`document.querySelectorAll("#turns tr[data-turn]").length === %d`, 7))
		admin.run(
			selectValue(`#filter-status`, "failed"),
			typeText(`#filter-tenant`, "acme"),
			chromedp.Click(chromedp.CSS(`#filter-apply`)),
		)
		admin.waitFor("the filtered list", `location.hash.includes("status=failed") && document.querySelectorAll("#turns tr[data-turn]").length === 1`)
		require.Equal(t, []string{failing}, admin.attrs(`#turns tr[data-turn]`, "data-turn"))
		require.Equal(t, []string{"failed"}, admin.attrs(`#counts span[data-status]`, "data-status"))
		admin.shot("01-turns-filtered")

		// Cursor paging: one turn a page, through every acme turn and back.
		admin.goTo("#/turns?tenant=acme&limit=2", `#turns`)
		var paged []string
		for {
			admin.waitFor("a page", `document.querySelector("#turns-page").dataset.loaded === "yes"`)
			paged = append(paged, admin.attrs(`#turns tr[data-turn]`, "data-turn")...)
			if eval[bool](admin, `document.querySelector("#page-older").disabled`) {
				break
			}
			before := eval[string](admin, `location.hash`)
			admin.run(chromedp.Click(chromedp.CSS(`#page-older`)))
			admin.waitFor("the next page", fmt.Sprintf(`location.hash !== %q`, before))
		}
		require.ElementsMatch(t, append([]string{failing, fine}, bulk...), paged, "each acme turn once")
		require.True(t, eval[bool](admin, `!document.querySelector("#page-newer").disabled`))
	})

	var replayID string
	t.Run("TimelineReplayAndLiveStream", func(t *testing.T) {
		admin.t = t
		admin.goTo("#/turns?status=failed&tenant=acme", `#turns tr[data-turn]`)
		admin.run(chromedp.Click(chromedp.CSS(fmt.Sprintf(`#turns tr[data-turn=%q] a.turn-link`, failing))))
		admin.run(chromedp.WaitVisible(chromedp.CSS(`#attempts tr[data-attempt="3"][data-outcome="failed"]`)))
		require.Equal(t, []string{"1", "2", "3"}, admin.attrs(`#attempts tr[data-attempt]`, "data-attempt"))
		require.Equal(t, []string{"retried", "retried", "failed"}, admin.attrs(`#attempts tr[data-attempt]`, "data-outcome"))
		fences := admin.attrs(`#attempts tr[data-attempt]`, "data-token")
		require.Len(t, slices.Compact(slices.Clone(fences)), 3, "each attempt's own fencing token: %v", fences)
		require.NotEmpty(t, eval[string](admin, `document.querySelector("#turn-dead").textContent`))
		admin.shot("02-failed-turn-timeline")

		// Replay on other agent settings: no failure, a reply slow enough to be seen arriving.
		const tokens = 30
		admin.run(
			typeText(`#replay-metadata`, `{"demo":{"fail_attempts":0,"tokens":30,"duration_ms":3000}}`),
			chromedp.Click(chromedp.CSS(`#replay`)),
		)
		admin.waitFor("the replay's page", fmt.Sprintf(`!!document.querySelector("#turn-id") && document.querySelector("#turn-id").textContent !== %q`, failing))
		replayID = eval[string](admin, `document.querySelector("#turn-id").textContent`)
		require.Equal(t, failing, eval[string](admin, `document.querySelector("#replay-of").textContent`))
		// Live: deltas on the page while the turn has not ended.
		admin.waitFor("deltas before the end", `document.querySelectorAll("#live-events li[data-type='turn.delta']").length > 0 &&
			!document.querySelector("#live-events li[data-type='turn.completed']")`)
		admin.shot("03-replay-live")
		admin.waitFor("the replay's end", `document.querySelector("#live").dataset.state === "ended"`)
		want := strings.Join(demo.Reply("fail me", demo.Knobs{Tokens: tokens}), "")
		require.Equal(t, want, eval[string](admin, `document.querySelector("#live-text").textContent`))
		types := admin.attrs(`#live-events li`, "data-type")
		require.Equal(t, "turn.started", types[0])
		require.Equal(t, "turn.completed", types[len(types)-1])
		require.Len(t, types, tokens+2, "every delta once")
		admin.waitFor("the timeline reloaded", `document.querySelector("#turn-page").dataset.status === "succeeded"`)
		admin.shot("04-replay-done")
		require.Equal(t, "succeeded", turnOf(acme, replayID).Status)
		require.Equal(t, failing, turnOf(acme, replayID).ReplayOf)
	})

	t.Run("SessionBacklogWorkers", func(t *testing.T) {
		admin.t = t
		admin.goTo("#/session/acme/bulk", `#session-turns`)
		admin.waitFor("the queued turns' blockers", `document.querySelectorAll("#session-blockers tr[data-turn]").length === 3`)
		require.Equal(t, bulk[:3], admin.attrs(`#session-blockers tr[data-turn]`, "data-turn"), "the live turns ahead, oldest first")
		admin.shot("05-session")
		admin.goTo("#/backlog", `#backlog`)
		admin.waitFor("acme's backlog", `!!document.querySelector('#backlog tr[data-tenant="acme"]')`)
		require.Equal(t, []string{"3"}, admin.attrs(`#backlog tr[data-tenant="acme"]`, "data-queued"))
		require.Equal(t, []string{"1"}, admin.attrs(`#backlog tr[data-tenant="acme"]`, "data-running"))
		admin.shot("06-backlog")
		admin.goTo("#/workers", `#workers`)
		admin.waitFor("the worker holding the slow turn", `document.querySelectorAll("#workers tr[data-worker]").length === 1`)
		admin.shot("07-workers")
		admin.goTo("#/dead-letters", `#dead-letters`)
		admin.waitFor("both tenants' dead letters", `document.querySelectorAll("#dead-letters tr[data-turn]").length === 2`)
		admin.shot("08-dead-letters")
	})

	t.Run("BulkCancelByFilter", func(t *testing.T) {
		admin.t = t
		admin.goTo("#/turns?tenant=acme&session_id=bulk", `#turns tr[data-turn]`)
		admin.run(chromedp.Click(chromedp.CSS(`#bulk-from-filter`)), chromedp.WaitVisible(chromedp.CSS(`#new-job`)))
		require.Equal(t, "bulk", eval[string](admin, `document.querySelector("#job-session_id").value`), "the job's filter is the list's")
		admin.run(
			typeText(`#job-name`, "cancel-bulk"),
			selectValue(`#job-action`, "cancel"),
			chromedp.Click(chromedp.CSS(`#job-preview`)),
			chromedp.WaitVisible(chromedp.CSS(`#job-preview-count`)),
		)
		require.Equal(t, "4 turn(s) to cancel", eval[string](admin, `document.querySelector("#job-preview-count").textContent`))
		admin.run(chromedp.Click(chromedp.CSS(`#job-create`)), chromedp.WaitVisible(chromedp.CSS(`#jobs tr[data-job="cancel-bulk"]`)))
		require.Equal(t, "4", admin.attrs(`#jobs tr[data-job="cancel-bulk"]`, "data-total")[0])
		// The page polls the job: its progress climbs to 4 of 4 and its state to succeeded.
		seen := map[string]bool{}
		testenv.WaitFor(t, 60*time.Second, "the job to succeed on the page", func() bool {
			st := admin.attrs(`#jobs tr[data-job="cancel-bulk"]`, "data-state")[0]
			seen[st+"/"+admin.attrs(`#jobs tr[data-job="cancel-bulk"]`, "data-done")[0]] = true
			return st == "succeeded"
		})
		require.Equal(t, "4", admin.attrs(`#jobs tr[data-job="cancel-bulk"]`, "data-done")[0])
		require.Equal(t, "4/4", eval[string](admin, `document.querySelector('#jobs tr[data-job="cancel-bulk"] .progress-text').textContent`))
		t.Logf("job states seen by the page: %v", seen)
		admin.shot("09-bulk-cancel")
		for _, id := range bulk {
			testenv.WaitFor(t, 30*time.Second, "turn "+id+" cancelled", func() bool { return turnOf(root, id).Status == "cancelled" })
		}
	})

	t.Run("PauseAndResumeAnAgent", func(t *testing.T) {
		admin.t = t
		admin.goTo("#/backlog", `#pause-form`)
		admin.run(
			typeText(`#pause-agent`, "agent"),
			typeText(`#pause-reason`, "console test"),
			chromedp.Click(chromedp.CSS(`#pause`)),
			chromedp.WaitVisible(chromedp.CSS(`#pauses tr[data-agent="agent"][data-tenant=""]`)),
		)
		held := s.post(t, acme, "p1", `{"input":{"text":"held"}}`).TurnID
		admin.waitFor("the turn held by the pause", `!!document.querySelector('#backlog tr[data-tenant="acme"][data-paused="1"][data-queued="0"]') &&
			!!document.querySelector('#pauses tr[data-agent="agent"][data-queued="1"]')`)
		require.Equal(t, "queued", turnOf(root, held).Status, "a paused agent's turn does not start")
		admin.shot("10-paused")
		admin.run(chromedp.Click(chromedp.CSS(`#pauses tr[data-agent="agent"] .resume`)))
		admin.waitFor("no pause", `!!document.querySelector("#pauses tr.empty")`)
		testenv.WaitFor(t, 30*time.Second, "the held turn to run after the resume", func() bool { return turnOf(root, held).Status == "succeeded" })
		admin.waitFor("an empty backlog", `!document.querySelector('#backlog tr[data-tenant="acme"]')`)
		admin.shot("11-resumed")
	})

	t.Run("Audit", func(t *testing.T) {
		admin.t = t
		admin.goTo("#/audit", `#audit`)
		admin.waitFor("the audit entries", `document.querySelectorAll("#audit tr[data-action]").length > 0`)
		actions := map[string]bool{}
		acts, outcomes := admin.attrs(`#audit tr[data-action]`, "data-action"), admin.attrs(`#audit tr[data-action]`, "data-outcome")
		for i := range acts {
			actions[acts[i]+" "+outcomes[i]] = true
		}
		for _, want := range []string{"turn.replay done", "job.create done", "job.finish succeeded", "queue.pause done", "queue.resume done"} {
			require.True(t, actions[want], "the audit page shows %q: %v", want, actions)
		}
		admin.shot("12-audit")
		admin.clean()
	})

	t.Run("TenantSeesOnlyItsOwn", func(t *testing.T) {
		tenant := openConsole(browser, t, base, acme, shots)
		tenant.goTo("#/turns", `#turns`)
		tenant.waitFor("acme's turns", `document.querySelectorAll("#turns tr[data-turn]").length === 8`)
		require.NotContains(t, tenant.attrs(`#turns tr[data-turn]`, "data-turn"), theirs)
		require.Equal(t, []string{"acme"}, unique(eval[[]string](tenant, `Array.from(document.querySelectorAll("#turns tr[data-turn] td:nth-child(3)")).map(e => e.textContent)`)))
		tenant.goTo("#/turns?tenant=globex", `#turns`)
		tenant.waitFor("an empty list", `document.querySelectorAll("#turns tr[data-turn]").length === 0 && !!document.querySelector("#turns tr.empty")`)
		tenant.goTo("#/dead-letters", `#dead-letters`)
		tenant.waitFor("acme's dead letter", `document.querySelectorAll("#dead-letters tr[data-turn]").length === 1`)
		require.Equal(t, []string{failing}, tenant.attrs(`#dead-letters tr[data-turn]`, "data-turn"))
		tenant.run(chromedp.Click(chromedp.CSS(`#dead-letters .replay-one`)), chromedp.WaitVisible(chromedp.CSS(`#dead-letters .replayed a`)))
		tenant.shot("13-tenant-dead-letter-replayed")
		tenant.goTo("#/jobs", `#jobs`)
		tenant.waitFor("no job", `!!document.querySelector("#jobs tr.empty")`)
		require.Empty(t, tenant.attrs(`#jobs tr[data-job]`, "data-job"), "a job is its creator's scope's: the admin's job is not acme's")
		tenant.goTo("#/audit", `#audit`)
		tenant.waitFor("acme's replay in the audit log", `!!document.querySelector('#audit tr[data-action="turn.replay"][data-outcome="done"]')`)
		require.Equal(t, []string{"acme"}, unique(eval[[]string](tenant, `Array.from(document.querySelectorAll("#audit tr[data-action] td:nth-child(3)")).map(e => e.textContent)`)))
		tenant.goTo("#/backlog", `#backlog`)
		tenant.goTo("#/workers", `#workers`)
		tenant.goTo("#/session/globex/g1", `#session-turns`)
		tenant.waitFor("no turn of globex's session", `document.querySelectorAll("#session-turns tr[data-turn]").length === 0`)
		// Another tenant's turn is a 404, the one refusal this test provokes.
		tenant.fails.allow("/v1/admin/turns/"+theirs+"/timeline", http.StatusNotFound)
		tenant.goTo("#/turn/"+theirs, `#turn-page .error[data-status="404"]`)
		tenant.shot("14-tenant-404")
		errs := tenant.errs.list()
		require.Len(t, errs, 1, "the provoked 404 is the one error the browser logs: %v", errs)
		require.Contains(t, errs[0], "404")
		require.Empty(t, tenant.fails.list(), "failed requests")
		tenant.goTo("#/turn/"+failing, `#attempts`)
		tenant.shot("15-tenant-turn")
	})
	t.Logf("screenshots: %s", shots)
}

// selectValue picks an option of a <select> as a user would: the value, then a change event.
func selectValue(selector, value string) chromedp.Action[chromedp.Void] {
	return script(fmt.Sprintf(`(() => { const e = document.querySelector(%q); e.value = %q; e.dispatchEvent(new Event("change", {bubbles: true})); })()`, selector, value))
}

func unique(vs []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, v := range vs {
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out
}

package integration

import (
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/config"
	"github.com/turnstile-run/turnstile/pkg/testenv"
)

type adminPause struct {
	Tenant   string `json:"tenant"`
	Agent    string `json:"agent"`
	Reason   string `json:"reason"`
	PausedBy string `json:"paused_by"`
	Queued   int    `json:"queued"`
}

type backlogAnswer struct {
	Age    float64 `json:"backlog_age_seconds"`
	Paused float64 `json:"paused_turns"`
}

type adminWorker struct {
	Identity       string   `json:"identity"`
	Version        string   `json:"version"`
	Agents         []string `json:"agents"`
	InFlight       int      `json:"in_flight"`
	Draining       bool     `json:"draining"`
	DrainRequested bool     `json:"drain_requested"`
	Alive          bool     `json:"alive"`
}

// runCLI runs the turnstile binary's admin CLI against base with key.
func runCLI(t *testing.T, base, key string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(testenv.Binary(t), args...)
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"),
		"TURNSTILE_ADMIN_URL=" + base, "TURNSTILE_API_KEY=" + key,
	}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// auditHas fails unless the audit log holds each of want (key, tenant, action, outcome).
func auditHas(t *testing.T, base, root string, want ...[4]string) {
	t.Helper()
	seen := map[[4]string]bool{}
	for _, e := range auditLog(t, base, root) {
		seen[[4]string{e.KeyID, e.Tenant, e.Action, e.Outcome}] = true
	}
	for _, w := range want {
		require.True(t, seen[w], "audit log holds %v; it has %v", w, seen)
	}
}

// TestAdminPauseResume: a tenant's key pauses its own tenant's queue; its turns stay queued (the
// worker's claims are refused, the backlog shows them as paused and not in the age) while another
// tenant's turns, posted after, run; the tenant cannot touch another tenant's queue (404); resumed,
// its turns run in their session's order. An admin pauses a whole agent through the CLI. Every
// action is in the audit log.
func TestAdminPauseResume(t *testing.T) {
	t.Parallel()
	k, s := startAdminStack(t, func(cfg *config.Config) { cfg.Ops.BacklogInterval = 100 * time.Millisecond })
	acmeID, acme, globexID, globex, rootID, root, base := k.acmeID, k.acme, k.globexID, k.globex, k.rootID, k.root, s.base
	turnOf := func(key, id string) adminTurn {
		var v adminTurn
		adminGet(t, base+"/v1/admin/turns/"+id, key, &v)
		return v
	}
	backlog := func() backlogAnswer {
		var b backlogAnswer
		require.Equal(t, http.StatusOK, getJSON(t, base+"/v1/backlog?agent=agent", &b))
		return b
	}
	paused := func() float64 {
		return scrape(t, strings.TrimPrefix(base, "http://"), "turnstile_worker_claims_paused_total")
	}

	status, b := adminCall(t, http.MethodPost, base+"/v1/admin/pauses", acme, map[string]any{"reason": "bad deploy"})
	require.Equal(t, http.StatusCreated, status, string(b))
	var p adminPause
	require.NoError(t, json.Unmarshal(b, &p))
	require.Equal(t, adminPause{Tenant: "acme", Reason: "bad deploy", PausedBy: acmeID}, p, "a tenant's key pauses its own tenant")
	status, b = adminCall(t, http.MethodPost, base+"/v1/admin/pauses", acme, map[string]any{})
	require.Equal(t, http.StatusOK, status, "pausing again changes nothing: %s", b)

	claimsBefore := paused()
	a1 := s.post(t, acme, "s1", `{"input":{"text":"first"}}`).TurnID
	a2 := s.post(t, acme, "s1", `{"input":{"text":"second"}}`).TurnID
	g1 := s.post(t, globex, "s1", `{"input":{"text":"theirs"}}`).TurnID
	testenv.WaitFor(t, 30*time.Second, "globex's turn to run while acme's queue is paused", func() bool {
		return turnOf(globex, g1).Status == "succeeded"
	})
	testenv.WaitFor(t, 30*time.Second, "a worker's claim of acme's turn to be refused", func() bool { return paused() > claimsBefore })
	testenv.WaitFor(t, 10*time.Second, "the backlog to show acme's two turns as paused", func() bool { return backlog().Paused == 2 })
	require.Zero(t, backlog().Age, "paused turns are not backlog")
	for _, id := range []string{a1, a2} {
		v := turnOf(acme, id)
		require.Equal(t, "queued", v.Status)
		var full struct {
			Attempts  int        `json:"attempts"`
			StartedAt *time.Time `json:"started_at"`
		}
		adminGet(t, base+"/v1/admin/turns/"+id, root, &full)
		require.Zero(t, full.Attempts, "a paused turn does not start")
		require.Nil(t, full.StartedAt)
	}

	t.Run("TenantsSeeTheirOwn", func(t *testing.T) {
		var l struct {
			Pauses []adminPause `json:"pauses"`
		}
		adminGet(t, base+"/v1/admin/pauses", acme, &l)
		require.Len(t, l.Pauses, 1)
		require.Equal(t, 2, l.Pauses[0].Queued)
		adminGet(t, base+"/v1/admin/pauses", globex, &l)
		require.Empty(t, l.Pauses, "globex sees no pause of acme's")
		adminGet(t, base+"/v1/admin/pauses", root, &l)
		require.Len(t, l.Pauses, 1)
		for _, path := range []string{"/v1/admin/pauses", "/v1/admin/pauses/resume"} {
			status, b := adminCall(t, http.MethodPost, base+path, globex, map[string]any{"tenant": "acme"})
			require.Equal(t, http.StatusNotFound, status, "%s: %s", path, b)
		}
		status, b := adminCall(t, http.MethodPost, base+"/v1/admin/pauses", root, map[string]any{})
		require.Equal(t, http.StatusUnprocessableEntity, status, string(b))
		status, b = adminCall(t, http.MethodPost, base+"/v1/admin/pauses", root, map[string]any{"agent": "nope"})
		require.Equal(t, http.StatusUnprocessableEntity, status, string(b))
		status, b = adminCall(t, http.MethodPost, base+"/v1/admin/pauses/resume", root, map[string]any{"agent": "agent"})
		require.Equal(t, http.StatusNotFound, status, "no such pause: %s", b)
	})

	t.Run("Resume", func(t *testing.T) {
		out, err := runCLI(t, base, acme, "queue", "resume", "--output", "json")
		require.NoError(t, err, out)
		require.NoError(t, json.Unmarshal([]byte(out), &p), out)
		require.Equal(t, 2, p.Queued, "the resume released both turns")
		resumed := time.Now()
		testenv.WaitFor(t, 30*time.Second, "acme's turns to run once resumed", func() bool {
			return turnOf(acme, a1).Status == "succeeded" && turnOf(acme, a2).Status == "succeeded"
		})
		t.Logf("resume to both turns succeeded: %v", time.Since(resumed).Round(time.Millisecond))
		first, second := turnOf(root, a1), turnOf(root, a2)
		require.Equal(t, "first", first.Input.Text)
		require.Equal(t, "second", second.Input.Text)
		var f1, s2 struct {
			FinishedAt time.Time `json:"finished_at"`
			StartedAt  time.Time `json:"started_at"`
		}
		adminGet(t, base+"/v1/admin/turns/"+a1, root, &f1)
		adminGet(t, base+"/v1/admin/turns/"+a2, root, &s2)
		require.False(t, s2.StartedAt.Before(f1.FinishedAt), "the session's order held through the pause")
		testenv.WaitFor(t, 10*time.Second, "the backlog to show no paused turn", func() bool { return backlog().Paused == 0 })
	})

	t.Run("AgentPauseByCLI", func(t *testing.T) {
		out, err := runCLI(t, base, root, "queue", "pause", "--agent", "agent", "--reason", "upstream maintenance")
		require.NoError(t, err, out)
		require.Contains(t, out, "upstream maintenance")
		before := paused()
		g2 := s.post(t, globex, "s2", `{"input":{"text":"later"}}`).TurnID
		testenv.WaitFor(t, 30*time.Second, "globex's claim to be refused by the agent's pause", func() bool { return paused() > before })
		testenv.WaitFor(t, 10*time.Second, "the backlog to show it paused", func() bool { return backlog().Paused == 1 })
		require.Equal(t, "queued", turnOf(globex, g2).Status)
		out, err = runCLI(t, base, root, "queue", "ls")
		require.NoError(t, err, out)
		require.Contains(t, out, "upstream maintenance")
		out, err = runCLI(t, base, globex, "queue", "ls", "--output", "json")
		require.NoError(t, err, out)
		require.NotContains(t, out, "upstream maintenance", "an installation-wide pause is not a tenant's to list")
		out, err = runCLI(t, base, root, "queue", "resume", "--agent", "agent")
		require.NoError(t, err, out)
		testenv.WaitFor(t, 30*time.Second, "globex's turn to run once resumed", func() bool { return turnOf(globex, g2).Status == "succeeded" })
	})

	t.Run("Audit", func(t *testing.T) {
		auditHas(t, base, root,
			[4]string{acmeID, "acme", "queue.pause", "done"},
			[4]string{acmeID, "acme", "queue.pause", "skipped"},
			[4]string{acmeID, "acme", "queue.resume", "done"},
			[4]string{globexID, "globex", "queue.pause", "refused"},
			[4]string{globexID, "globex", "queue.resume", "refused"},
			[4]string{rootID, "ops", "queue.pause", "done"},
			[4]string{rootID, "ops", "queue.pause", "refused"},
			[4]string{rootID, "ops", "queue.resume", "done"},
			[4]string{rootID, "ops", "queue.resume", "refused"},
		)
	})
}

// TestAdminWorkersDrainAndConfig: the worker's presence row lists it alive with its version and
// agents; a tenant's key sees it only while it holds the tenant's turns, and may neither drain it
// nor read the configuration (403); an admin drains it through the CLI: it stops claiming, the
// turn in flight finishes, and it reports draining and not ready. The configuration view redacts
// secrets. Every action is in the audit log.
func TestAdminWorkersDrainAndConfig(t *testing.T) {
	t.Parallel()
	k, s := startAdminStack(t, func(cfg *config.Config) { cfg.Worker.PresenceInterval = 100 * time.Millisecond })
	acmeID, acme, globex, rootID, root, base := k.acmeID, k.acme, k.globex, k.rootID, k.root, s.base
	env := s.env
	workers := func(key string) []adminWorker {
		var l struct {
			Workers []adminWorker `json:"workers"`
		}
		adminGet(t, base+"/v1/admin/workers", key, &l)
		return l.Workers
	}
	testenv.WaitFor(t, 10*time.Second, "the worker's presence row", func() bool { return len(workers(root)) == 1 })
	wk := workers(root)[0]
	require.Equal(t, env.Config.InstanceID, wk.Identity)
	require.Equal(t, []string{"agent"}, wk.Agents)
	require.NotEmpty(t, wk.Version)
	require.True(t, wk.Alive)
	require.False(t, wk.Draining)
	require.Empty(t, workers(acme), "a tenant sees only the workers holding its turns")

	long := s.post(t, acme, "s1", `{"input":{"text":"long"},"metadata":{"demo":{"duration_ms":3000}}}`).TurnID
	testenv.WaitFor(t, 20*time.Second, "acme to see the worker running its turn", func() bool {
		l := workers(acme)
		return len(l) == 1 && l[0].InFlight == 1
	})
	require.Empty(t, workers(globex), "globex's key does not see acme's turns in flight")

	status, b := adminCall(t, http.MethodPost, base+"/v1/admin/workers/"+wk.Identity+"/drain", acme, nil)
	require.Equal(t, http.StatusForbidden, status, string(b))
	require.Contains(t, string(b), "admin-required")
	status, b = adminCall(t, http.MethodPost, base+"/v1/admin/workers/nobody/drain", root, nil)
	require.Equal(t, http.StatusNotFound, status, string(b))

	t.Run("Config", func(t *testing.T) {
		status, b := adminCall(t, http.MethodGet, base+"/v1/admin/config", acme, nil)
		require.Equal(t, http.StatusForbidden, status, string(b))
		var v struct {
			Settings []struct {
				Name   string `json:"name"`
				Value  string `json:"value"`
				Secret bool   `json:"secret"`
			} `json:"settings"`
		}
		adminGet(t, base+"/v1/admin/config", root, &v)
		byName := map[string]string{}
		for _, st := range v.Settings {
			byName[st.Name] = st.Value
			if st.Secret && st.Value != "" {
				require.Equal(t, "(redacted)", st.Value, st.Name)
			}
		}
		require.Equal(t, "(redacted)", byName["TURNSTILE_STREAM_TOKEN_KEYS"])
		require.NotContains(t, string(b), "c2VjcmV0c2VjcmV0")
		require.Equal(t, "100ms", byName["TURNSTILE_WORKER_PRESENCE_INTERVAL"])
		out, err := runCLI(t, base, root, "admin-config")
		require.NoError(t, err, out)
		require.Contains(t, out, "TURNSTILE_STREAM_TOKEN_KEYS=(redacted)")
	})

	t.Run("Drain", func(t *testing.T) {
		out, err := runCLI(t, base, root, "workers", "drain", wk.Identity)
		require.NoError(t, err, out)
		require.Contains(t, out, wk.Identity)
		testenv.WaitFor(t, 10*time.Second, "the worker to drain", func() bool {
			l := workers(root)
			return len(l) == 1 && l[0].Draining
		})
		testenv.WaitFor(t, 30*time.Second, "the turn in flight to finish", func() bool {
			var v adminTurn
			adminGet(t, base+"/v1/admin/turns/"+long, acme, &v)
			return v.Status == "succeeded"
		})
		testenv.WaitFor(t, 30*time.Second, "the drained worker to report nothing in flight", func() bool {
			l := workers(root)
			return len(l) == 1 && l[0].InFlight == 0 && l[0].DrainRequested
		})
		resp, err := http.Get(base + "/readyz")
		require.NoError(t, err)
		body := make([]byte, 4096)
		n, _ := resp.Body.Read(body)
		resp.Body.Close()
		require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, string(body[:n]))
		require.Contains(t, string(body[:n]), "drained by an operator")
		out, err = runCLI(t, base, root, "workers", "ls")
		require.NoError(t, err, out)
		require.True(t, strings.Contains(out, "draining"), out)
	})

	auditHas(t, base, root,
		[4]string{acmeID, "acme", "worker.drain", "refused"},
		[4]string{rootID, "ops", "worker.drain", "refused"},
		[4]string{rootID, "ops", "worker.drain", "done"},
	)
}

package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/apikey"
	"github.com/turnstile-run/turnstile/pkg/config"
	"github.com/turnstile-run/turnstile/pkg/testenv"
)

// adminTurn is a turn as the admin API shows it.
type adminTurn struct {
	TurnID       string `json:"turn_id"`
	Tenant       string `json:"tenant"`
	SessionID    string `json:"session_id"`
	Status       string `json:"status"`
	Error        string `json:"error"`
	DeadLettered string `json:"dead_lettered"`
	ReplayOf     string `json:"replay_of"`
	Input        struct {
		Text string `json:"text"`
	} `json:"input"`
}

type adminPage struct {
	Turns      []adminTurn    `json:"turns"`
	NextCursor string         `json:"next_cursor"`
	Counts     map[string]int `json:"counts"`
}

type adminJob struct {
	JobID  string `json:"job_id"`
	Name   string `json:"name"`
	State  string `json:"state"`
	Total  int    `json:"total"`
	Done   int    `json:"done"`
	Failed int    `json:"failed"`
	Runs   int    `json:"runs"`
}

type auditEntry struct {
	KeyID   string `json:"key_id"`
	Tenant  string `json:"tenant"`
	Action  string `json:"action"`
	Target  string `json:"target"`
	Outcome string `json:"outcome"`
	Detail  string `json:"detail"`
}

// adminCall sends a request with key through the client that checks it and its answer against
// the OpenAPI document, and returns the status and body.
func adminCall(t *testing.T, method, u, key string, body any) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		require.NoError(t, err)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, u, rd)
	require.NoError(t, err)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := apiClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, b
}

// adminGet decodes a 200's body into into.
func adminGet(t *testing.T, u, key string, into any) {
	t.Helper()
	status, b := adminCall(t, http.MethodGet, u, key, nil)
	require.Equal(t, http.StatusOK, status, string(b))
	require.NoError(t, json.Unmarshal(b, into), string(b))
}

func auditLog(t *testing.T, base, key string) []auditEntry {
	t.Helper()
	var p struct {
		Entries []auditEntry `json:"entries"`
	}
	adminGet(t, base+"/v1/admin/audit?limit=500", key, &p)
	return p.Entries
}

// adminKeys are the keys an admin test acts with: two tenants' (acme, globex) and an admin's.
type adminKeys struct {
	acmeID, acme, globexID, globex, rootID, root string
}

// startAdminStack creates the keys and starts intake, worker and gateway with auth on, tune
// changing the configuration first (nil: none), and returns the keys and the stack as a tenant's
// client sees it.
func startAdminStack(t *testing.T, tune func(*config.Config)) (adminKeys, *tenantStack) {
	t.Helper()
	env := testenv.New(t, testenv.Options{Partitions: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var k adminKeys
	var err error
	k.acmeID, k.acme, err = apikey.Create(ctx, env.Pool, "acme")
	require.NoError(t, err)
	k.globexID, k.globex, err = apikey.Create(ctx, env.Pool, "globex")
	require.NoError(t, err)
	k.rootID, k.root, err = apikey.CreateAdmin(ctx, env.Pool, "", "ops")
	require.NoError(t, err)
	cfg := authConfig(env, "intake,worker,gateway")
	if tune != nil {
		tune(&cfg)
	}
	stack := startStackCfg(t, env, cfg)
	return k, &tenantStack{env: env, base: "http://" + stack.Addr()}
}

// TestAdminTenantIsolationAndAudit: a tenant's key sees only its tenant's turns and jobs on every
// admin route, another tenant's turn or job is a 404 there, an admin key sees every tenant, a
// failed turn is replayed on other agent settings as a new turn linked to it (the original
// unchanged), and every action the test takes is in the audit log.
func TestAdminTenantIsolationAndAudit(t *testing.T) {
	t.Parallel()
	// The failing turn fails on purpose.
	k, s := startAdminStack(t, func(cfg *config.Config) { cfg.DemoFaults = "allow" })
	acmeID, acme, globexID, globex, root, base := k.acmeID, k.acme, k.globexID, k.globex, k.root, s.base

	failing := s.post(t, acme, "s1", `{"input":{"text":"fail me"},"metadata":{"demo":{"fail_attempts":99}}}`).TurnID
	fine := s.post(t, acme, "s2", `{"input":{"text":"fine"}}`).TurnID
	theirs := s.post(t, globex, "s1", `{"input":{"text":"theirs"}}`).TurnID
	turnOf := func(key, id string) adminTurn {
		var v adminTurn
		adminGet(t, base+"/v1/admin/turns/"+id, key, &v)
		return v
	}
	testenv.WaitFor(t, 30*time.Second, "the three turns to end", func() bool {
		return turnOf(acme, failing).Status == "failed" && turnOf(acme, fine).Status == "succeeded" &&
			turnOf(globex, theirs).Status == "succeeded"
	})
	require.NotEmpty(t, turnOf(root, failing).DeadLettered, "a turn failed MaxAttempts times is a dead letter")

	search := func(key, query string) adminPage {
		var p adminPage
		adminGet(t, base+"/v1/admin/turns?"+query, key, &p)
		return p
	}
	ids := func(p adminPage) []string {
		out := []string{}
		for _, v := range p.Turns {
			out = append(out, v.TurnID)
		}
		return out
	}

	t.Run("Search", func(t *testing.T) {
		require.ElementsMatch(t, []string{failing, fine}, ids(search(acme, "")), "a tenant's key sees its own turns")
		require.Empty(t, search(acme, "tenant=globex").Turns, "and no other tenant's, whatever it asks")
		require.ElementsMatch(t, []string{theirs}, ids(search(globex, "")))
		require.ElementsMatch(t, []string{failing, fine, theirs}, ids(search(root, "")), "an admin sees every tenant")
		require.ElementsMatch(t, []string{failing, theirs}, ids(search(root, "session_id=s1")))
		require.ElementsMatch(t, []string{theirs}, ids(search(root, "session_id=s1&tenant=globex")))
		require.ElementsMatch(t, []string{failing}, ids(search(root, "status=failed")))
		require.ElementsMatch(t, []string{failing}, ids(search(root, "dead_lettered=true")))
		require.ElementsMatch(t, []string{failing}, ids(search(root, "metadata="+url.QueryEscape(`{"demo":{"fail_attempts":99}}`))))
		require.Empty(t, search(root, "agent=another").Turns)
		require.Len(t, search(root, "agent=agent").Turns, 3)
		require.Equal(t, map[string]int{"failed": 1, "succeeded": 2}, search(root, "counts=true").Counts)
		future := url.QueryEscape(time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
		require.Empty(t, search(root, "accepted_after="+future).Turns)
		var dl adminPage
		adminGet(t, base+"/v1/admin/dead-letters", globex, &dl)
		require.Empty(t, dl.Turns, "globex has no dead letters; acme's are not its")

		var paged []string
		for q := "limit=1"; ; {
			p := search(root, q)
			paged = append(paged, ids(p)...)
			if p.NextCursor == "" {
				break
			}
			q = "limit=1&cursor=" + url.QueryEscape(p.NextCursor)
		}
		require.ElementsMatch(t, []string{failing, fine, theirs}, paged, "the cursor pages through each turn once")
		status, b := adminCall(t, http.MethodGet, base+"/v1/admin/turns?status=lost", root, nil)
		require.Equal(t, http.StatusUnprocessableEntity, status, string(b))
	})

	t.Run("OtherTenantsTurnIs404", func(t *testing.T) {
		for _, r := range []struct{ method, path string }{
			{http.MethodGet, ""},
			{http.MethodGet, "/timeline"},
			{http.MethodGet, "/blockers"},
			{http.MethodPost, "/cancel"},
			{http.MethodPost, "/replay"},
			{http.MethodPost, "/stream-token"},
		} {
			status, b := adminCall(t, r.method, base+"/v1/admin/turns/"+theirs+r.path, acme, nil)
			require.Equal(t, http.StatusNotFound, status, "%s %s: %s", r.method, r.path, b)
			require.Contains(t, string(b), "turn-not-found")
		}
		status, _ := adminCall(t, http.MethodGet, base+"/v1/admin/turns/"+theirs+"/timeline", root, nil)
		require.Equal(t, http.StatusOK, status, "an admin reads any tenant's turn")

		// An admin's stream grant follows globex's turn on the gateway: its tenant's session.
		status, b := adminCall(t, http.MethodPost, base+"/v1/admin/turns/"+theirs+"/stream-token", root, nil)
		require.Equal(t, http.StatusOK, status, string(b))
		var grant struct {
			Tenant      string `json:"tenant"`
			StreamURL   string `json:"stream_url"`
			StreamToken string `json:"stream_token"`
		}
		require.NoError(t, json.Unmarshal(b, &grant))
		require.Equal(t, "globex", grant.Tenant)
		resp, err := http.Get(base + grant.StreamURL + "?turn_id=" + theirs + "&access_token=" + url.QueryEscape(grant.StreamToken))
		require.NoError(t, err)
		events, err := io.ReadAll(resp.Body)
		require.NoError(t, resp.Body.Close())
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode, string(events))
		require.Contains(t, string(events), "event: turn.completed", "the stream ends at the turn's terminal event")
		require.Contains(t, string(events), theirs)
	})

	var replayID string
	t.Run("TimelineAndReplay", func(t *testing.T) {
		type attempt struct {
			Attempt      int        `json:"attempt"`
			Worker       string     `json:"worker"`
			FencingToken int64      `json:"fencing_token"`
			StartedAt    *time.Time `json:"started_at"`
			EndedAt      *time.Time `json:"ended_at"`
			Outcome      string     `json:"outcome"`
			Error        string     `json:"error"`
			Events       int        `json:"events"`
		}
		var tl struct {
			Turn     adminTurn `json:"turn"`
			Attempts []attempt `json:"attempts"`
			Replays  []string  `json:"replays"`
		}
		// checkAttempts: each attempt has its own row, with its worker, its own fencing token (they
		// only grow), its start and end, its outcome and its events.
		checkAttempts := func(t *testing.T, as []attempt, outcomes ...string) {
			t.Helper()
			require.Len(t, as, len(outcomes))
			for i, a := range as {
				require.Equal(t, i+1, a.Attempt)
				require.Equal(t, outcomes[i], a.Outcome, "attempt %d", a.Attempt)
				require.NotEmpty(t, a.Worker)
				require.NotNil(t, a.StartedAt)
				require.NotNil(t, a.EndedAt)
				require.GreaterOrEqual(t, a.Events, 1)
				if i > 0 {
					require.Greater(t, a.FencingToken, as[i-1].FencingToken, "each attempt has a token of its own")
				}
				if a.Outcome != "succeeded" {
					require.Contains(t, a.Error, "failure requested for attempt")
				}
			}
		}
		adminGet(t, base+"/v1/admin/turns/"+failing+"/timeline", acme, &tl)
		// TURNSTILE_MAX_ATTEMPTS defaults to 3.
		checkAttempts(t, tl.Attempts, "retried", "retried", "failed")

		// The replay fails its first attempt and succeeds on its second.
		status, b := adminCall(t, http.MethodPost, base+"/v1/admin/turns/"+failing+"/replay", acme,
			map[string]any{"metadata": map[string]any{"demo": map[string]any{"fail_attempts": 1}}})
		require.Equal(t, http.StatusAccepted, status, string(b))
		var acted struct {
			Outcome string    `json:"outcome"`
			Replay  adminTurn `json:"replay"`
		}
		require.NoError(t, json.Unmarshal(b, &acted))
		replayID = acted.Replay.TurnID
		require.NotEqual(t, failing, replayID)
		testenv.WaitFor(t, 30*time.Second, "the replay to succeed", func() bool { return turnOf(acme, replayID).Status == "succeeded" })
		r := turnOf(acme, replayID)
		require.Equal(t, failing, r.ReplayOf)
		require.Equal(t, "s1", r.SessionID)
		require.Equal(t, "fail me", r.Input.Text)
		orig := turnOf(acme, failing)
		require.Equal(t, "failed", orig.Status, "the original's record is not rewritten")
		adminGet(t, base+"/v1/admin/turns/"+replayID+"/timeline", acme, &tl)
		checkAttempts(t, tl.Attempts, "retried", "succeeded")
		adminGet(t, base+"/v1/admin/turns/"+failing+"/timeline", acme, &tl)
		require.Equal(t, []string{replayID}, tl.Replays)

		status, b = adminCall(t, http.MethodPost, base+"/v1/admin/turns/"+failing+"/replay", acme, map[string]any{"agent": "nope"})
		require.Equal(t, http.StatusUnprocessableEntity, status, string(b))
	})

	t.Run("BlockersCancelAndLiveReplay", func(t *testing.T) {
		slow := s.post(t, acme, "s3", `{"input":{"text":"slow"},"metadata":{"demo":{"duration_ms":20000}}}`).TurnID
		next := s.post(t, acme, "s3", `{"input":{"text":"next"}}`).TurnID
		var bl struct {
			Blocking []adminTurn `json:"blocking"`
		}
		adminGet(t, base+"/v1/admin/turns/"+next+"/blockers", acme, &bl)
		require.Len(t, bl.Blocking, 1)
		require.Equal(t, slow, bl.Blocking[0].TurnID)
		type backlogRow struct {
			Agent   string `json:"agent"`
			Tenant  string `json:"tenant"`
			Queued  int    `json:"queued"`
			Running int    `json:"running"`
		}
		var backlog struct {
			Backlog []backlogRow `json:"backlog"`
		}
		testenv.WaitFor(t, 30*time.Second, "acme's backlog: next queued behind slow", func() bool {
			adminGet(t, base+"/v1/admin/backlog", root, &backlog)
			return slices.Contains(backlog.Backlog, backlogRow{Agent: "agent", Tenant: "acme", Queued: 1, Running: 1})
		})
		adminGet(t, base+"/v1/admin/backlog", globex, &backlog)
		require.Empty(t, backlog.Backlog, "globex has no live turn; acme's are not its")
		status, b := adminCall(t, http.MethodPost, base+"/v1/admin/turns/"+slow+"/replay", acme, nil)
		require.Equal(t, http.StatusConflict, status, string(b))
		require.Contains(t, string(b), "turn-live")
		status, b = adminCall(t, http.MethodPost, base+"/v1/admin/turns/"+slow+"/cancel", acme, nil)
		require.Equal(t, http.StatusAccepted, status, string(b))
		require.Contains(t, string(b), `"outcome":"done"`)
		testenv.WaitFor(t, 30*time.Second, "both turns to end", func() bool {
			return turnOf(acme, slow).Status == "cancelled" && turnOf(acme, next).Status == "succeeded"
		})
		status, b = adminCall(t, http.MethodPost, base+"/v1/admin/turns/"+theirs+"/cancel", globex, nil)
		require.Equal(t, http.StatusAccepted, status, string(b))
		require.Contains(t, string(b), `"outcome":"skipped"`, "an ended turn's cancel changes nothing")
	})

	t.Run("Jobs", func(t *testing.T) {
		status, b := adminCall(t, http.MethodPost, base+"/v1/admin/jobs", acme, map[string]any{
			"name": "replay-failed", "action": "replay", "filter": map[string]any{"status": []string{"failed"}},
		})
		require.Equal(t, http.StatusCreated, status, string(b))
		var j adminJob
		require.NoError(t, json.Unmarshal(b, &j))
		require.Equal(t, 1, j.Total, "acme's one failed turn; globex's are not in its scope")
		testenv.WaitFor(t, 30*time.Second, "the job to finish", func() bool {
			adminGet(t, base+"/v1/admin/jobs/"+j.JobID, acme, &j)
			return j.State == "succeeded"
		})
		require.Equal(t, 1, j.Done)
		// The runner's metrics count the item and the job's end, and then it runs no job (the
		// runner counts the end just after it is recorded, which the test may see first).
		for _, m := range []struct {
			name  string
			match []string
			want  float64
		}{
			{"turnstile_admin_jobs_items_total", []string{`action="replay"`, `result="done"`}, 1},
			{"turnstile_admin_jobs_items_total", []string{`result="failed"`}, 0},
			{"turnstile_admin_jobs_finished_total", []string{`action="replay"`, `state="succeeded"`}, 1},
			{"turnstile_admin_jobs_running", nil, 0},
		} {
			testenv.WaitFor(t, 10*time.Second, fmt.Sprintf("%s %v to be %v", m.name, m.match, m.want), func() bool {
				v, ok := metricValue(t, base, m.name, m.match...)
				return ok && v == m.want
			})
		}
		status, b = adminCall(t, http.MethodPost, base+"/v1/admin/jobs", acme, map[string]any{
			"name": "replay-failed", "action": "replay", "filter": map[string]any{},
		})
		require.Equal(t, http.StatusConflict, status, string(b))
		for _, r := range []struct{ method, path string }{{http.MethodGet, ""}, {http.MethodPost, "/cancel"}} {
			status, b := adminCall(t, r.method, base+"/v1/admin/jobs/"+j.JobID+r.path, globex, nil)
			require.Equal(t, http.StatusNotFound, status, "%s %s: %s", r.method, r.path, b)
		}
		var l struct {
			Jobs []adminJob `json:"jobs"`
		}
		adminGet(t, base+"/v1/admin/jobs", globex, &l)
		require.Empty(t, l.Jobs)
		adminGet(t, base+"/v1/admin/jobs", root, &l)
		require.Len(t, l.Jobs, 1)
		status, b = adminCall(t, http.MethodPost, base+"/v1/admin/jobs/"+j.JobID+"/cancel", acme, nil)
		require.Equal(t, http.StatusOK, status, "a finished job's cancel changes nothing: %s", b)

		var w struct {
			Workers []struct {
				Identity string `json:"identity"`
			} `json:"workers"`
		}
		adminGet(t, base+"/v1/admin/workers", acme, &w)
		adminGet(t, base+"/v1/admin/workers", root, &w)
	})

	t.Run("CLI", func(t *testing.T) {
		run := func(key string, args ...string) (string, error) {
			cmd := exec.Command(testenv.Binary(t), args...)
			cmd.Env = []string{
				"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"),
				"TURNSTILE_ADMIN_URL=" + base, "TURNSTILE_API_KEY=" + key,
			}
			out, err := cmd.CombinedOutput()
			return string(out), err
		}
		out, err := run(root, "turns", "ls", "--tenant", "acme", "--status", "failed", "--output", "json")
		require.NoError(t, err, out)
		var p adminPage
		require.NoError(t, json.Unmarshal([]byte(out), &p), out)
		require.Contains(t, ids(p), failing, "with the job's replay of it, which failed as it did")
		require.NotContains(t, ids(p), replayID, "the replay on other settings succeeded")

		out, err = run(acme, "turns", "show", failing, "--timeline")
		require.NoError(t, err, out)
		require.Contains(t, out, "attempt 3")
		require.Regexp(t, `attempt 1\s+worker \S+, token \d+\s.*\sretried demo agent: failure requested`, out)
		require.Regexp(t, `attempt 3\s+worker \S+, token \d+\s.*\sfailed demo agent: failure requested`, out)
		require.Contains(t, out, "replayed as")

		out, err = run(acme, "dlq", "ls", "--output", "json")
		require.NoError(t, err, out)
		require.NoError(t, json.Unmarshal([]byte(out), &p), out)
		require.Contains(t, ids(p), failing)

		out, err = run(acme, "jobs", "ls")
		require.NoError(t, err, out)
		require.Contains(t, out, "replay-failed")

		out, err = run(acme, "turns", "replay", fine, "--output", "json")
		require.NoError(t, err, out)
		require.Contains(t, out, `"outcome": "done"`)

		out, err = run(acme, "turns", "show", theirs)
		require.Error(t, err, "another tenant's turn")
		require.Contains(t, out, "404")

		out, err = run(root, "workers", "--output", "json")
		require.NoError(t, err, out)
		require.Contains(t, out, `"workers"`)
		out, err = run(globex, "audit", "--action", "turn.cancel")
		require.NoError(t, err, out)
		require.Contains(t, out, "skipped")
		require.NotContains(t, out, "acme")
	})

	t.Run("Audit", func(t *testing.T) {
		type act struct{ key, tenant, action, outcome string }
		seen := map[act]int{}
		for _, e := range auditLog(t, base, root) {
			seen[act{e.KeyID, e.Tenant, e.Action, e.Outcome}]++
		}
		for _, want := range []act{
			{acmeID, "acme", "turn.cancel", "refused"}, // globex's turn, by acme's key
			{acmeID, "acme", "turn.replay", "refused"},
			{acmeID, "acme", "turn.replay", "done"}, // by the API and by the CLI
			{acmeID, "acme", "turn.cancel", "done"},
			{globexID, "globex", "turn.cancel", "skipped"},
			{acmeID, "acme", "job.create", "done"},
			{acmeID, "acme", "job.create", "refused"},
			{acmeID, "acme", "job.finish", "succeeded"},
			{acmeID, "acme", "job.cancel", "skipped"},
			{globexID, "globex", "job.cancel", "refused"},
		} {
			require.Positive(t, seen[want], "audit log holds %+v; it has %v", want, seen)
		}
		for _, e := range auditLog(t, base, acme) {
			require.Equal(t, "acme", e.Tenant, "a tenant's key reads its own tenant's entries only")
		}
		for _, e := range auditLog(t, base, globex) {
			require.Equal(t, "globex", e.Tenant)
		}
	})
}

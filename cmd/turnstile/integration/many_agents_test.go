package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/testenv"
)

const manyAgentsFile = `
default: support
agents:
  - name: support
    adapter: demo
    limits: {in_flight: 16}
  - name: research
    adapter: demo
    limits: {in_flight: 2}
`

// TestManyAgents runs two agents in one installation through the native API (invariant 16): a
// session alternating between them runs its turns in acceptance order; with research saturated
// (its in-flight limit full, its backlog growing) support's accept→start p99 stays within its solo
// value + 1 s and support's backlog gauge stays at 0 while research's rises; an agent added to the
// file of the running installation is accepted at once, and removing research with queued turns
// refuses its new turns while the queued ones stay queued (README, "Many agents").
func TestManyAgents(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{Partitions: 2})
	file := filepath.Join(t.TempDir(), "agents.yaml")
	require.NoError(t, os.WriteFile(file, []byte(manyAgentsFile), 0o600))
	cfg := env.Config
	cfg.Roles = "intake,worker"
	cfg.AgentsFile, cfg.WorkerAgents = file, "support,research"
	cfg.AgentsReloadInterval = 50 * time.Millisecond
	cfg.DemoDelay = time.Millisecond
	cfg.Ops.BacklogInterval = 100 * time.Millisecond
	cfg.DrainTimeout = time.Second
	stack := startStackCfg(t, env, cfg)
	base := "http://" + stack.Addr()
	ctx := context.Background()

	post := func(session, agent string, metadata map[string]any) (uuid.UUID, int) {
		body := map[string]any{"input": map[string]string{"text": "hello " + agent}}
		if agent != "" {
			body["agent"] = agent
		}
		if metadata != nil {
			body["metadata"] = metadata
		}
		b, _ := json.Marshal(body)
		resp, err := http.Post(base+"/v1/sessions/"+session+"/turns", "application/json", bytes.NewReader(b))
		require.NoError(t, err)
		defer resp.Body.Close()
		var a accepted
		_ = json.NewDecoder(resp.Body).Decode(&a)
		id, _ := uuid.Parse(a.TurnID)
		return id, resp.StatusCode
	}
	mustPost := func(session, agent string, metadata map[string]any) uuid.UUID {
		id, status := post(session, agent, metadata)
		require.Equal(t, http.StatusAccepted, status)
		return id
	}
	waitDone := func(ids []uuid.UUID) {
		testenv.WaitFor(t, 60*time.Second, fmt.Sprintf("%d turns to succeed", len(ids)), func() bool {
			var n int
			err := env.Pool.QueryRow(ctx, `SELECT count(*) FROM turns WHERE turn_id = ANY($1) AND status = 'succeeded'`, ids).Scan(&n)
			return err == nil && n == len(ids)
		})
	}
	// p99 of accept→start over turns, from their rows.
	p99 := func(ids []uuid.UUID) time.Duration {
		rows, err := env.Pool.Query(ctx, `SELECT extract(epoch FROM started_at - accepted_at) FROM turns WHERE turn_id = ANY($1)`, ids)
		require.NoError(t, err)
		defer rows.Close() // a failed check inside the loop must not keep the connection: the pool's Close waits for it
		var ds []time.Duration
		for rows.Next() {
			var s float64
			require.NoError(t, rows.Scan(&s))
			ds = append(ds, time.Duration(s*float64(time.Second)))
		}
		require.NoError(t, rows.Err())
		slices.Sort(ds)
		return ds[(len(ds)*99+99)/100-1]
	}
	backlog := func(agent string) float64 {
		var out struct {
			Age float64 `json:"backlog_age_seconds"`
		}
		require.Equal(t, http.StatusOK, getJSON(t, base+"/v1/backlog?agent="+agent, &out))
		return out.Age
	}

	t.Run("AlternatingSessionKeepsOrder", func(t *testing.T) {
		var ids []uuid.UUID
		for i := range 8 {
			agent := []string{"support", "research"}[i%2]
			ids = append(ids, mustPost("alt", agent, map[string]any{"demo": map[string]any{"duration_ms": 20}}))
		}
		waitDone(ids)
		rows, err := env.Pool.Query(ctx, `SELECT turn_id, agent, started_at, finished_at FROM turns WHERE turn_id = ANY($1) ORDER BY started_at`, ids)
		require.NoError(t, err)
		defer rows.Close() // a failed check inside the loop must not keep the connection: the pool's Close waits for it
		var got []uuid.UUID
		var lastFinish time.Time
		for rows.Next() {
			var id uuid.UUID
			var agent string
			var started, finished time.Time
			require.NoError(t, rows.Scan(&id, &agent, &started, &finished))
			require.False(t, started.Before(lastFinish), "a turn started before the session's previous one finished")
			got, lastFinish = append(got, id), finished
		}
		require.NoError(t, rows.Err())
		require.Equal(t, ids, got, "acceptance order across agents")
	})

	const n = 30
	var solo time.Duration
	t.Run("Isolation", func(t *testing.T) {
		var ids []uuid.UUID
		for i := range n {
			ids = append(ids, mustPost(fmt.Sprintf("solo-%d", i), "", nil))
		}
		waitDone(ids)
		solo = p99(ids)

		// Saturate research: two slots, ten long turns.
		for i := range 10 {
			mustPost(fmt.Sprintf("r-%d", i), "research", map[string]any{"demo": map[string]any{"duration_ms": 60000}})
		}
		testenv.WaitFor(t, 30*time.Second, "research's backlog to rise", func() bool { return backlog("research") > 0.5 })
		ids = ids[:0]
		for i := range n {
			ids = append(ids, mustPost(fmt.Sprintf("loaded-%d", i), "support", nil))
		}
		waitDone(ids)
		loaded := p99(ids)
		research, support := backlog("research"), backlog("support")
		t.Logf("support accept→start p99: solo %s, with research saturated %s (bound %s); backlog age: research %.2fs, support %.2fs",
			solo, loaded, solo+time.Second, research, support)
		require.LessOrEqual(t, loaded, solo+time.Second)
		require.Greater(t, research, 0.5, "research's backlog rises")
		// support's gauge follows a turn accepted a moment ago until it starts (tens of ms), so
		// "does not rise" is: it stays below the level research's rose past.
		require.Less(t, support, 0.5, "support's does not")
	})

	t.Run("AddAndRemoveAgents", func(t *testing.T) {
		_, status := post("b1", "billing", nil)
		require.Equal(t, http.StatusNotFound, status)
		// Add billing, remove research (ten turns of it queued or running).
		require.NoError(t, os.WriteFile(file, []byte(`
default: support
agents:
  - {name: support, adapter: demo, limits: {in_flight: 16}}
  - {name: billing, adapter: demo}
`), 0o600))
		testenv.WaitFor(t, 30*time.Second, "the reloaded catalog", func() bool {
			_, status := post("b1", "billing", nil)
			return status == http.StatusAccepted
		})
		_, status = post("r-new", "research", nil)
		require.Equal(t, http.StatusNotFound, status, "a removed agent's new turns are refused")
		var unfinished int
		require.NoError(t, env.Pool.QueryRow(ctx, `SELECT count(*) FROM turns WHERE agent = 'research' AND status IN ('queued', 'running')`).Scan(&unfinished))
		require.Equal(t, 10, unfinished, "the removed agent's accepted turns are kept, not failed")
		// A bad file keeps the last good catalog.
		require.NoError(t, os.WriteFile(file, []byte("agents: [{name: x, adapter: nope}]\n"), 0o600))
		testenv.WaitFor(t, 30*time.Second, "the bad file to be refused", func() bool {
			resp, err := http.Get(base + "/metrics")
			if err != nil {
				return false
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return strings.Contains(string(b), `turnstile_agents_reloads_total{result="invalid"} 1`)
		})
		var list struct {
			Agents []struct{ Name string } `json:"agents"`
		}
		require.Equal(t, http.StatusOK, getJSON(t, base+"/v1/agents", &list))
		require.Len(t, list.Agents, 2, "the last good catalog is kept")
		_, status = post("b2", "billing", nil)
		require.Equal(t, http.StatusAccepted, status)
	})
}

package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/testenv"
)

// scheduleWindow is how long the one-second schedule of TestScheduleOncePerTickAcrossReplicas
// runs: 30 ticks, the replica SIGKILLed after the first 12.
const (
	scheduleWindow = 30
	scheduleKillAt = 12
	// scheduleTickLease is the replicas' TURNSTILE_SCHEDULER_LEASE_TTL: the longest the tick the
	// killed replica had claimed, if any, waits to be taken over.
	scheduleTickLease = 2 * time.Second
)

// TestScheduleOncePerTickAcrossReplicas: two intake processes run the scheduler over one
// every-second schedule (a new session each tick); one is SIGKILLed mid-way. Every tick of the
// window fires exactly once: one fire row, one turn (counted in the turns table by the tick its
// metadata names), none doubled and none missed; a tick the dead replica had claimed but not
// posted is posted by the survivor after the tick lease, as the same turn.
func TestScheduleOncePerTickAcrossReplicas(t *testing.T) {
	c := newCluster(t, clusterOptions{Partitions: 2, FrontRoles: "broker,worker"})
	replicas := map[string]*testenv.Process{}
	for _, name := range []string{"intake-a", "intake-b"} {
		addr := testenv.FreeAddr(t)
		env := append(c.env.Environ("intake", addr, name), "TURNSTILE_MIGRATE=off",
			"TURNSTILE_SCHEDULER_LEASE_TTL="+scheduleTickLease.String(), "TURNSTILE_SCHEDULER_MISFIRE_GRACE=1m")
		replicas[name] = testenv.StartProcess(t, name, env, addr)
	}
	survivor := "http://" + replicas["intake-b"].Addr

	body, _ := json.Marshal(map[string]any{"schedule": "* * * * * *", "turn": map[string]any{"input": map[string]string{"text": "tick"}}})
	resp, err := http.Post("http://"+replicas["intake-a"].Addr+"/v1/schedules", "application/json", bytes.NewReader(body))
	require.NoError(t, err)
	var s struct {
		ScheduleID string `json:"schedule_id"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&s))
	_ = resp.Body.Close()
	require.Equal(t, http.StatusCreated, resp.StatusCode)

	ctx := context.Background()
	fired := func() int {
		var n int
		require.NoError(t, c.env.Pool.QueryRow(ctx, `SELECT count(*) FROM schedule_fires WHERE schedule_id = $1 AND fired_at IS NOT NULL`, s.ScheduleID).Scan(&n))
		return n
	}
	testenv.WaitFor(t, time.Minute, "the first ticks", func() bool { return fired() >= scheduleKillAt })
	c.kill0(replicas["intake-a"])
	testenv.WaitFor(t, 2*time.Minute, "the window's ticks", func() bool { return fired() >= scheduleWindow })
	req, _ := http.NewRequest(http.MethodDelete, survivor+"/v1/schedules/"+s.ScheduleID, nil)
	// The window is the ticks fired before the delete; the fire rows go with the schedule, so
	// they are read first.
	type fire struct {
		tick    time.Time
		owner   string
		posts   int
		outcome string
	}
	var fires []fire
	rows, err := c.env.Pool.Query(ctx, `SELECT tick_at, owner, posts, coalesce(outcome, '') FROM schedule_fires
		WHERE schedule_id = $1 AND fired_at IS NOT NULL ORDER BY tick_at`, s.ScheduleID)
	require.NoError(t, err)
	for rows.Next() {
		var f fire
		require.NoError(t, rows.Scan(&f.tick, &f.owner, &f.posts, &f.outcome))
		fires = append(fires, f)
	}
	require.NoError(t, rows.Err())
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusNoContent, resp.StatusCode)

	// Every second from the first tick to the last fired once: none missed, none doubled (the
	// primary key would refuse a second row; a second post would show in posts).
	owners := map[string]int{}
	takenOver := 0
	for i, f := range fires {
		require.Equal(t, "posted", f.outcome, "tick %s", f.tick)
		if i > 0 {
			require.Equal(t, time.Second, f.tick.Sub(fires[i-1].tick), "ticks %s and %s are adjacent", fires[i-1].tick, f.tick)
		}
		owners[f.owner]++
		if f.posts > 1 {
			takenOver++
			require.Equal(t, "intake-b", f.owner, "only the survivor takes ticks over")
		}
	}
	require.LessOrEqual(t, takenOver, 1, "the dead replica held at most the tick it was posting")

	// One turn per tick, counted where the turns are: the turns table, by the tick each names.
	ticks := map[string]bool{}
	for _, f := range fires {
		ticks[f.tick.UTC().Format(time.RFC3339Nano)] = true
	}
	perTick := map[string]int{}
	testenv.WaitFor(t, time.Minute, "a turn row for every fired tick", func() bool {
		rows, err := c.env.Pool.Query(ctx, `SELECT metadata->'schedule'->>'tick', count(*) FROM turns
			WHERE metadata->'schedule'->>'schedule_id' = $1 GROUP BY 1`, s.ScheduleID)
		require.NoError(t, err)
		defer rows.Close()
		clear(perTick)
		for rows.Next() {
			var tick string
			var n int
			require.NoError(t, rows.Scan(&tick, &n))
			perTick[tick] = n
		}
		require.NoError(t, rows.Err())
		for tick := range ticks {
			if perTick[tick] == 0 {
				return false
			}
		}
		return true
	})
	for tick, n := range perTick {
		if ticks[tick] {
			require.Equal(t, 1, n, "turns of tick %s", tick)
		}
	}
	t.Logf("%d ticks from %s to %s, fired by %v; %d taken over after the SIGKILL (tick lease %v); one turn each",
		len(fires), fires[0].tick.Format(time.TimeOnly), fires[len(fires)-1].tick.Format(time.TimeOnly), owners, takenOver, scheduleTickLease)
}

// kill0 SIGKILLs p and waits for it to be gone.
func (c *cluster) kill0(p *testenv.Process) {
	c.t.Helper()
	require.NoError(c.t, p.Signal(syscall.SIGKILL))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = p.Wait(ctx)
}

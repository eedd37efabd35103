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
// is judged over: a minute of ticks, one replica SIGKILLed after the first scheduleKillAt.
const (
	scheduleWindow = 60
	scheduleKillAt = 20
	// scheduleTickLease is the replicas' TURNSTILE_SCHEDULER_LEASE_TTL: the longest the tick the
	// killed replica had claimed, if any, waits to be taken over. A post slower than it (a busy
	// machine) is taken over too, harmlessly: every post of a tick carries the tick's
	// Idempotency-Key, so it is the same turn.
	scheduleTickLease = 3 * time.Second
)

// TestScheduleOncePerTickAcrossReplicas: two intake processes run the scheduler over one
// every-second schedule (a new session each tick) for a minute; one is SIGKILLed after the first
// 20 ticks. Every tick of the window fires exactly once: one fire row, posted, one turn (counted
// in the turns table by the tick its metadata names), none doubled and none missed; a tick the
// dead replica had claimed but not posted is posted by the survivor after the tick lease, as the
// same turn.
func TestScheduleOncePerTickAcrossReplicas(t *testing.T) {
	started := time.Now()
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
	type fire struct {
		tick    time.Time
		owner   string
		posts   int
		fired   bool
		outcome string
	}
	// fires reads the schedule's fire rows, oldest tick first, posted or still pending (a claimed
	// tick whose post was not answered yet: the dead replica's, or a slow one).
	fires := func() []fire {
		rows, err := c.env.Pool.Query(ctx, `SELECT tick_at, owner, posts, fired_at IS NOT NULL, coalesce(outcome, '')
			FROM schedule_fires WHERE schedule_id = $1 ORDER BY tick_at`, s.ScheduleID)
		require.NoError(t, err)
		defer rows.Close()
		var out []fire
		for rows.Next() {
			var f fire
			require.NoError(t, rows.Scan(&f.tick, &f.owner, &f.posts, &f.fired, &f.outcome))
			out = append(out, f)
		}
		require.NoError(t, rows.Err())
		return out
	}
	// settled is the window's first n fires when each of them has been answered.
	settled := func(n int) ([]fire, bool) {
		fs := fires()
		if len(fs) < n {
			return nil, false
		}
		for _, f := range fs[:n] {
			if !f.fired {
				return nil, false
			}
		}
		return fs[:n], true
	}
	testenv.WaitFor(t, 2*time.Minute, "the first ticks", func() bool { _, ok := settled(scheduleKillAt); return ok })
	c.kill0(replicas["intake-a"])
	killedAt := time.Now()
	var window []fire
	testenv.WaitFor(t, 3*time.Minute, "a minute of ticks, each answered", func() bool {
		var ok bool
		window, ok = settled(scheduleWindow)
		return ok
	})
	// The fire rows go with the schedule, so they were read before the delete.
	req, _ := http.NewRequest(http.MethodDelete, survivor+"/v1/schedules/"+s.ScheduleID, nil)
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusNoContent, resp.StatusCode)

	// Every second from the first tick to the last fired once: none missed (a skipped tick
	// would leave a gap), none doubled (the primary key would refuse a second row).
	owners := map[string]int{}
	takenOver := 0
	for i, f := range window {
		require.Equal(t, "posted", f.outcome, "tick %s", f.tick)
		if i > 0 {
			require.Equal(t, time.Second, f.tick.Sub(window[i-1].tick), "ticks %s and %s are adjacent", window[i-1].tick, f.tick)
		}
		owners[f.owner]++
		if f.posts > 1 {
			takenOver++
		}
	}
	require.Positive(t, owners["intake-b"], "the survivor fired ticks")
	require.Equal(t, "intake-b", window[len(window)-1].owner, "after the SIGKILL the survivor fires alone")

	// One turn per tick, counted where the turns are: the turns table, by the tick each names.
	ticks := map[string]bool{}
	for _, f := range window {
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
	t.Logf("%d ticks from %s to %s, fired by %v; intake-a SIGKILLed at %s; %d posted again after a lapsed lease (%v); one turn each; wall %v",
		len(window), window[0].tick.Format(time.TimeOnly), window[len(window)-1].tick.Format(time.TimeOnly), owners,
		killedAt.UTC().Format(time.TimeOnly), takenOver, scheduleTickLease, time.Since(started).Round(time.Second))
}

// kill0 SIGKILLs p and waits for it to be gone.
func (c *cluster) kill0(p *testenv.Process) {
	c.t.Helper()
	require.NoError(c.t, p.Signal(syscall.SIGKILL))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = p.Wait(ctx)
}

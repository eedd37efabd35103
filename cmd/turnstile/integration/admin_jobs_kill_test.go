package integration

import (
	"context"
	"encoding/json"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/testenv"
)

// TestAdminBulkReplaySurvivesSIGKILL: a bulk replay of 1,000 dead-lettered turns by filter runs in
// one of two intake processes; that process is SIGKILLed mid-job, the other takes the job over
// once its lease expires and finishes it, and every dead letter is replayed exactly once: one
// turn_replays row per original, one replay turn each, every item done once, the job's counts
// exact.
func TestAdminBulkReplaySurvivesSIGKILL(t *testing.T) {
	t.Parallel()
	const n = 1000
	testenv.Binary(t) // built once for every test: not this test's time
	started := time.Now()
	env := testenv.New(t, testenv.Options{Partitions: 2})
	brokerAddr := testenv.FreeAddr(t)
	env.Config.KafkaBrokers = brokerAddr
	brokerHTTP := testenv.FreeAddr(t)
	testenv.StartProcess(t, "broker", append(env.Environ("broker", brokerHTTP, "broker"), "TURNSTILE_BROKER_ADDR="+brokerAddr), brokerHTTP)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// 1,000 dead letters over 100 sessions, and turns the filter must leave alone: failed but not
	// dead-lettered, and another tenant's succeeded turn.
	_, err := env.Pool.Exec(ctx, `INSERT INTO turns (turn_id, session_id, tenant, status, attempt, input, accepted_at,
			finished_at, error, dead_lettered)
		SELECT gen_random_uuid(), 'acme/s' || (i % 100), 'acme', 'failed', 3, jsonb_build_object('text', 'turn ' || i),
			now() - interval '1 hour' + i * interval '1 millisecond', now(), 'upstream 500', 'attempts_exhausted'
		FROM generate_series(1, $1) i`, n)
	require.NoError(t, err)
	_, err = env.Pool.Exec(ctx, `INSERT INTO turns (turn_id, session_id, tenant, status, attempt, input, accepted_at, finished_at, error)
		VALUES (gen_random_uuid(), 'acme/x', 'acme', 'failed', 1, '{"text":"not a dead letter"}', now(), now(), 'x'),
		       (gen_random_uuid(), 'globex/y', 'globex', 'succeeded', 1, '{"text":"fine"}', now(), now(), NULL)`)
	require.NoError(t, err)

	intakes := map[string]*testenv.Process{}
	bases := map[string]string{}
	for _, name := range []string{"intake-a", "intake-b"} {
		addr := testenv.FreeAddr(t)
		intakes[name] = testenv.StartProcess(t, name, append(env.Environ("intake", addr, name),
			"TURNSTILE_ADMIN_JOB_LEASE=1s", "TURNSTILE_MIGRATE=off"), addr)
		bases[name] = "http://" + addr
	}

	status, b := adminCall(t, http.MethodPost, bases["intake-a"]+"/v1/admin/jobs", "", map[string]any{
		"name": "replay-dlq", "action": "replay", "filter": map[string]any{"dead_lettered": true},
	})
	require.Equal(t, http.StatusCreated, status, string(b))
	var j adminJob
	require.NoError(t, json.Unmarshal(b, &j))
	require.Equal(t, n, j.Total, "the filter matched the dead letters only")

	// Kill whichever intake holds the job once it has recorded some of its items.
	var owner string
	var doneAtKill int
	testenv.WaitFor(t, 30*time.Second, "the job to be under way", func() bool {
		var o *string
		require.NoError(t, env.Pool.QueryRow(ctx, `SELECT done, lease_owner FROM admin_jobs WHERE name = 'replay-dlq'`).Scan(&doneAtKill, &o))
		if o == nil || doneAtKill < 100 {
			return false
		}
		owner = *o
		require.NoError(t, intakes[owner].Signal(syscall.SIGKILL))
		return true
	})
	killedAt := time.Now()
	require.NoError(t, env.Pool.QueryRow(ctx, `SELECT done FROM admin_jobs WHERE name = 'replay-dlq'`).Scan(&doneAtKill))
	require.Less(t, doneAtKill, n, "the job was SIGKILLed mid-way")
	survivor := "intake-a"
	if owner == survivor {
		survivor = "intake-b"
	}
	testenv.WaitFor(t, 45*time.Second, "the survivor to finish the job", func() bool {
		adminGet(t, bases[survivor]+"/v1/admin/jobs/"+j.JobID, "", &j)
		return j.State == "succeeded"
	})
	t.Logf("bulk replay of %d dead letters: %s SIGKILLed at %d done; %s finished it %v later (runs %d); test wall time %v",
		n, owner, doneAtKill, survivor, time.Since(killedAt).Round(time.Millisecond), j.Runs, time.Since(started).Round(time.Millisecond))
	require.Equal(t, n, j.Done)
	require.Zero(t, j.Failed)
	require.GreaterOrEqual(t, j.Runs, 2, "another runner resumed it")

	var links, originals, deadLetters, replayRows, items, distinctResults int
	require.NoError(t, env.Pool.QueryRow(ctx, `SELECT count(*), count(DISTINCT original_turn_id),
			count(*) FILTER (WHERE original_turn_id IN (SELECT turn_id FROM turns WHERE dead_lettered IS NOT NULL))
		FROM turn_replays`).Scan(&links, &originals, &deadLetters))
	require.Equal(t, n, links, "one replay per dead letter, none twice")
	require.Equal(t, n, originals)
	require.Equal(t, n, deadLetters, "only dead letters were replayed")
	require.NoError(t, env.Pool.QueryRow(ctx, `SELECT count(*), count(DISTINCT result_turn_id) FROM admin_job_items
		WHERE state = 'done'`).Scan(&items, &distinctResults))
	require.Equal(t, n, items)
	require.Equal(t, n, distinctResults)
	require.NoError(t, env.Pool.QueryRow(ctx, `SELECT count(*) FROM turns t JOIN turn_replays r ON r.turn_id = t.turn_id
		WHERE t.status = 'queued' AND t.input = (SELECT o.input FROM turns o WHERE o.turn_id = r.original_turn_id)
		  AND t.session_id = (SELECT o.session_id FROM turns o WHERE o.turn_id = r.original_turn_id)`).Scan(&replayRows))
	require.Equal(t, n, replayRows, "each replay is one queued turn of its original's session and input")
	var finished int
	require.NoError(t, env.Pool.QueryRow(ctx, `SELECT count(*) FROM admin_audit WHERE action = 'job.finish' AND outcome = 'succeeded'`).Scan(&finished))
	require.Equal(t, 1, finished, "the job's end is audited once")
}

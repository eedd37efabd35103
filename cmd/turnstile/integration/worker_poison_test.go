package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/testenv"
	"github.com/turnstile-run/turnstile/pkg/wire"
)

// TestWorkerPoison sends an always-failing turn, an always-panicking turn and an undecodable record
// through one partition, followed by a good turn: the bad ones end failed after
// TURNSTILE_MAX_ATTEMPTS attempts (the undecodable one at once), each lands in the dead-letter topic
// with its last error, and the partition moves on.
func TestWorkerPoison(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{Partitions: 1})
	stack := startStack(t, env, "intake,worker,gateway")
	base := "http://" + stack.Addr()

	failing := postTurnWith(t, base, "poison-error", map[string]any{
		"input":    map[string]string{"text": "x"},
		"metadata": map[string]any{"demo": map[string]any{"fail_attempts": 99}},
	})
	panicking := postTurnWith(t, base, "poison-panic", map[string]any{
		"input":    map[string]string{"text": "x"},
		"metadata": map[string]any{"demo": map[string]any{"panic_attempts": 99}},
	})
	produceRaw(t, env, "poison-junk", []byte("{not an envelope"))
	good := postTurnWith(t, base, "poison-good", map[string]any{"input": map[string]string{"text": "fine"}})

	ids := []string{failing, panicking, good}
	testenv.WaitFor(t, 60*time.Second, "every turn to end", func() bool { return terminalCount(t, env, ids) == len(ids) })

	for _, tc := range []struct {
		id, session, errPart string
	}{
		{failing, "poison-error", "failure requested for attempt 3"},
		{panicking, "poison-panic", "agent panicked"},
	} {
		waitTerminalEvents(t, env, tc.session, tc.id)
		r := readTurn(t, env, tc.id)
		require.Equal(t, "failed", r.Status)
		require.Equal(t, 3, r.Attempt, "TURNSTILE_MAX_ATTEMPTS defaults to 3")
		require.Contains(t, r.Error, tc.errPart)
		evs := readStream(t, env, tc.session)
		requireFencedStream(t, evs, tc.id, "turn.failed", 3)
		retrying := 0
		for _, e := range evs {
			if e.Type == "turn.retrying" {
				retrying++
			}
		}
		require.Equal(t, 2, retrying, "attempts 2 and 3 announce themselves")
	}
	require.Equal(t, "succeeded", readTurn(t, env, good).Status)

	dlq := readDLQ(t, env, 3)
	require.Len(t, dlq, 3)
	byKey := map[string]dlqRecord{}
	for _, d := range dlq {
		// The record's key as stored: a session's key, or the junk record's own bare key.
		var k wire.SessionKey
		require.NoError(t, k.Scan(d.Key))
		byKey[k.SessionID()] = d
	}
	require.Equal(t, "failed", byKey["poison-error"].Headers["turnstile-dlq-reason"])
	require.Contains(t, byKey["poison-error"].Headers["turnstile-error"], "failure requested for attempt 3")
	require.Equal(t, "3", byKey["poison-error"].Headers["turnstile-attempts"])
	require.Equal(t, "failed", byKey["poison-panic"].Headers["turnstile-dlq-reason"])
	require.Contains(t, byKey["poison-panic"].Headers["turnstile-error"], "agent panicked")
	require.Equal(t, "undecodable", byKey["poison-junk"].Headers["turnstile-dlq-reason"])
	require.Equal(t, "{not an envelope", string(byKey["poison-junk"].Value))
	env2, err := wire.DecodeEnvelope(byKey["poison-error"].Value)
	require.NoError(t, err, "the dead letter carries the original envelope")
	require.Equal(t, failing, env2.TurnID.String())

	testenv.WaitFor(t, 30*time.Second, "every dead letter to be recorded as acknowledged", func() bool {
		var owed int
		require.NoError(t, env.Pool.QueryRow(context.Background(), `SELECT count(*) FROM turns WHERE dead_letter_reason IS NOT NULL`).Scan(&owed))
		return owed == 0
	})

	// The partition moved on: its commit point passed all four records.
	testenv.WaitFor(t, 30*time.Second, "the partition's offset to be committed past the poison", func() bool {
		return committedOffset(t, env) == 4
	})
}

// TestWorkerCrashLoop SIGKILLs the worker each time it starts an attempt of a turn: after
// TURNSTILE_MAX_ATTEMPTS crashes the turn is failed, dead-lettered and announced, never run again.
func TestWorkerCrashLoop(t *testing.T) {
	t.Parallel()
	c := newCluster(t, clusterOptions{Partitions: 1, LeaseTTL: time.Second, Heartbeat: 200 * time.Millisecond, MaxAttempts: 3})
	c.startWorker("w1")
	const session = "crashloop"
	id := c.post(session, "crash me", demoMeta(60000))
	for attempt := 1; attempt <= 3; attempt++ {
		testenv.WaitFor(t, 60*time.Second, fmt.Sprintf("attempt %d to start", attempt), func() bool {
			r := c.turn(id)
			return r.Status == "running" && r.Attempt == attempt
		})
		c.kill("w1")
		c.startWorker("w1")
	}
	testenv.WaitFor(t, 60*time.Second, "the crash-looping turn to be failed", func() bool { return c.turn(id).Status == "failed" })
	r := c.turn(id)
	require.Equal(t, 3, r.Attempt, "no fourth attempt")
	require.Contains(t, r.Error, "no attempts remain")
	waitTerminalEvents(t, c.env, session, id)
	requireFencedStream(t, readStream(t, c.env, session), id, "turn.failed", 3)
	dlq := readDLQ(t, c.env, 1)
	require.Equal(t, "attempts_exhausted", dlq[0].Headers["turnstile-dlq-reason"])
	require.Equal(t, storeKey(session).String(), dlq[0].Key, "the dead letter keeps the record's key: the session's")

	// The worker keeps serving the partition.
	next := c.post(session, "after the crash loop", demoMeta(50))
	testenv.WaitFor(t, 30*time.Second, "the next turn to succeed", func() bool { return c.turn(next).Status == "succeeded" })
}

// TestWorkerExpired gives turns deadlines that leave less than TURNSTILE_MIN_USEFUL_TIME (1 s) when
// their turn comes: one already on arrival, one only after waiting behind its session's running turn.
// Neither starts (no attempt, no start time, no turn.started); both end expired with turn.expired.
func TestWorkerExpired(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{Partitions: 1})
	startStack(t, env, "worker")
	produce := func(session string, deadline time.Duration, md map[string]any) string {
		now := time.Now()
		e := wire.Envelope{
			TurnID: uuid.Must(uuid.NewV7()), SessionID: session, Tenant: "default",
			Input: wire.Input{Text: "hello"}, Metadata: md, Deadline: now.Add(deadline), AcceptedAt: now,
		}
		b, err := e.Encode()
		require.NoError(t, err)
		produceRaw(t, env, e.SessionID, b)
		return e.TurnID.String()
	}
	late := produce("expiry-late", 300*time.Millisecond, nil)
	blocker := produce("expiry-queued", time.Hour, demoMeta(2500))
	queued := produce("expiry-queued", 3*time.Second, nil) // 2 s of slack, but 2.5 s to wait
	// Enough time to start, not to finish: the agent's context carries the deadline.
	overrun := produce("expiry-overrun", 2*time.Second, demoMeta(20000))
	ids := []string{late, blocker, queued, overrun}
	testenv.WaitFor(t, 30*time.Second, "the turns to end", func() bool { return terminalCount(t, env, ids) == len(ids) })
	require.Equal(t, "succeeded", readTurn(t, env, blocker).Status)

	for _, c := range []struct{ id, session string }{{late, "expiry-late"}, {queued, "expiry-queued"}} {
		r := readTurn(t, env, c.id)
		require.Equal(t, "expired", r.Status)
		require.Contains(t, r.Error, "minimum useful time")
		require.Zero(t, r.Attempt, "an expired turn is never attempted")
		require.Nil(t, r.StartedAt, "an expired turn never starts")
		waitTerminalEvents(t, env, c.session, c.id)
		evs := readStream(t, env, c.session)
		requireFencedStream(t, evs, c.id, "turn.expired", 0)
		for _, ev := range evs {
			require.False(t, ev.TurnID == c.id && ev.Type != "turn.expired", "an expired turn publishes only turn.expired, not %s", ev.Type)
		}
	}
	o := readTurn(t, env, overrun)
	require.Equal(t, "failed", o.Status)
	require.Equal(t, "deadline exceeded", o.Error)
	require.Equal(t, 1, o.Attempt, "a deadline is final: no retry")
	waitTerminalEvents(t, env, "expiry-overrun", overrun)
	requireFencedStream(t, readStream(t, env, "expiry-overrun"), overrun, "turn.failed", 1)
	require.Empty(t, history(t, env, "expiry-late"))
	require.Len(t, history(t, env, "expiry-queued"), 2, "only the blocker is in the history")
}

// TestWorkerDeadLetterOwed picks up where a worker died after failing a poison turn but before its
// dead letter was acknowledged: the redelivered record finds the turn finished and still owed to the
// dead-letter topic, writes the dead letter and clears the mark.
func TestWorkerDeadLetterOwed(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{Partitions: 1})
	now := time.Now()
	e := wire.Envelope{
		TurnID: uuid.Must(uuid.NewV7()), SessionID: "owed", Tenant: "default",
		Input: wire.Input{Text: "x"}, Deadline: now.Add(time.Hour), AcceptedAt: now,
	}
	_, err := env.Pool.Exec(context.Background(), `INSERT INTO turns (turn_id, session_id, tenant, status, attempt,
		fencing_token, error, accepted_at, finished_at, dead_letter_reason)
		VALUES ($1, 'owed', 'default', 'failed', 3, nextval('fencing_token_seq'), 'boom on attempt 3', now(), now(), 'failed')`, e.TurnID)
	require.NoError(t, err)
	b, err := e.Encode()
	require.NoError(t, err)
	produceRaw(t, env, e.SessionID, b)
	startStack(t, env, "worker")

	dlq := readDLQ(t, env, 1)
	require.Equal(t, "failed", dlq[0].Headers["turnstile-dlq-reason"])
	require.Equal(t, "boom on attempt 3", dlq[0].Headers["turnstile-error"])
	require.Equal(t, "3", dlq[0].Headers["turnstile-attempts"])
	testenv.WaitFor(t, 30*time.Second, "the dead letter to be recorded", func() bool {
		var pending bool
		require.NoError(t, env.Pool.QueryRow(context.Background(),
			`SELECT dead_letter_reason IS NOT NULL FROM turns WHERE turn_id = $1`, e.TurnID).Scan(&pending))
		return !pending
	})
	// The terminal event is republished before the dead letter is written, so it is there by now.
	requireFencedStream(t, readStream(t, env, "owed"), e.TurnID.String(), "turn.failed", 3)
}

package lease

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/turnstile-run/turnstile/pkg/testenv"
	"github.com/turnstile-run/turnstile/pkg/turnstore"
	"github.com/turnstile-run/turnstile/pkg/wire"
	"github.com/turnstile-run/turnstile/services/worker/internal/agent"
	"github.com/turnstile-run/turnstile/services/worker/internal/batch"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreTopFunction("github.com/jackc/pgx/v5/pgxpool.(*Pool).backgroundHealthCheck"),
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
		goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).reaper"),
	)
}

func setup(t *testing.T) *testenv.Env {
	t.Helper()
	return testenv.New(t, testenv.Options{Partitions: 1})
}

func request(session string) ClaimRequest {
	now := time.Now()
	return ClaimRequest{Env: wire.Envelope{
		TurnID: uuid.Must(uuid.NewV7()), SessionID: session, Tenant: "default",
		Input: wire.Input{Text: "hi"}, Deadline: now.Add(time.Hour), AcceptedAt: now,
	}}
}

// history reads the default tenant's session's messages, oldest first: each succeeded turn's question and answer
// (agent.TurnMessages of its history entry), as the executor's uncached read does.
func history(ctx context.Context, db *turnstore.Store, session string) ([]agent.Message, error) {
	entries, err := db.ReadHistory(ctx, wire.NewSessionKey("default", session))
	if err != nil {
		return nil, err
	}
	var out []agent.Message
	for _, e := range entries {
		msgs := agent.TurnMessages(e.Seq, e.TurnID, e.Question, e.Answer)
		out = append(out, msgs[:]...)
	}
	return out, nil
}

// waitExpired waits until the turn's lease has expired by the database's clock.
func waitExpired(t *testing.T, env *testenv.Env, id uuid.UUID) {
	t.Helper()
	testenv.WaitFor(t, 10*time.Second, "the lease to expire", func() bool {
		var expired bool
		require.NoError(t, env.Pool.QueryRow(context.Background(),
			`SELECT lease_expires_at < now() FROM turns WHERE turn_id = $1`, id).Scan(&expired))
		return expired
	})
}

func TestStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("AttemptRows", func(t *testing.T) {
		// Each claim records its attempt (worker, token, lease), and the statement that ends the
		// attempt records its end; an attempt whose worker died keeps no end, and its stale
		// token cannot write one.
		t.Parallel()
		env := setup(t)
		a := NewStore(env.Pool, "worker-a", 200*time.Millisecond, 3)
		b := NewStore(env.Pool, "worker-b", 200*time.Millisecond, 3)
		db := turnstore.New(env.Pool)
		req := request("rows")
		id := req.Env.TurnID

		c1, err := a.Claim(ctx, req)
		require.NoError(t, err)
		require.Equal(t, turnstore.ClaimAcquired, c1.Outcome)
		waitExpired(t, env, id) // worker-a dies holding the lease
		c2, err := b.Claim(ctx, req)
		require.NoError(t, err)
		require.Equal(t, turnstore.ClaimAcquired, c2.Outcome)
		require.ErrorIs(t, db.EndAttempt(ctx, id, c1.Token, false, "retried", "stale", turnstore.AttemptEnd{}), turnstore.ErrFenced)
		require.NoError(t, db.EndAttempt(ctx, id, c2.Token, false, "retried", "upstream 500",
			turnstore.AttemptEnd{Upstream: "http://up-1", Events: 2, Waits: 1}))
		c3, err := a.Claim(ctx, req)
		require.NoError(t, err)
		require.Equal(t, turnstore.ClaimAcquired, c3.Outcome, "a released lease is taken at once")
		end := turnstore.AttemptEnd{Upstream: "http://up-2", Events: 4}
		res := a.CompleteMany(ctx, []Completion{{TurnID: id, Token: c3.Token, Output: wire.Output{Text: "ok"}, End: end}})
		require.NoError(t, res[0].Err)

		type row struct {
			Attempt  int
			Worker   string
			Token    int64
			Ended    bool
			Outcome  string
			Error    string
			Upstream string
			Events   int
			Waits    int
		}
		rows, err := env.Pool.Query(ctx, `SELECT attempt, worker, fencing_token, ended_at IS NOT NULL, coalesce(outcome, ''),
			coalesce(error, ''), coalesce(upstream, ''), coalesce(events, 0), coalesce(waits, 0)
			FROM turn_attempts WHERE turn_id = $1 AND started_at <= lease_expires_at ORDER BY fencing_token`, id)
		require.NoError(t, err)
		var got []row
		for rows.Next() {
			var r row
			require.NoError(t, rows.Scan(&r.Attempt, &r.Worker, &r.Token, &r.Ended, &r.Outcome, &r.Error, &r.Upstream, &r.Events, &r.Waits))
			got = append(got, r)
		}
		require.NoError(t, rows.Err())
		require.Equal(t, []row{
			{Attempt: 1, Worker: "worker-a", Token: int64(c1.Token)},
			{2, "worker-b", int64(c2.Token), true, "retried", "upstream 500", "http://up-1", 2, 1},
			{3, "worker-a", int64(c3.Token), true, "succeeded", "", "http://up-2", 4, 0},
		}, got)
	})

	t.Run("FencingAcrossTakeover", func(t *testing.T) {
		t.Parallel()
		env := setup(t)
		s := NewStore(env.Pool, "a", 200*time.Millisecond, 3)
		db := turnstore.New(env.Pool)
		req := request("fence")
		id := req.Env.TurnID

		c1, err := s.Claim(ctx, req)
		require.NoError(t, err)
		require.Equal(t, turnstore.ClaimAcquired, c1.Outcome)
		require.Equal(t, 1, c1.Attempt)
		c, err := s.Claim(ctx, req)
		require.NoError(t, err)
		require.Equal(t, turnstore.ClaimLeased, c.Outcome, "a live lease is not taken over")

		waitExpired(t, env, id)
		c2, err := s.Claim(ctx, req)
		require.NoError(t, err)
		require.Equal(t, turnstore.ClaimAcquired, c2.Outcome)
		require.Equal(t, 2, c2.Attempt)
		require.Greater(t, c2.Token, c1.Token, "tokens only grow")

		// Every write of the stale attempt is refused.
		renewed, err := s.Renew(ctx, []Held{{TurnID: id, Token: c1.Token}})
		require.NoError(t, err)
		require.Empty(t, renewed)
		require.ErrorIs(t, s.Complete(ctx, id, c1.Token, wire.Output{Text: "stale"}), turnstore.ErrFenced)
		require.ErrorIs(t, db.FinishTurn(ctx, id, c1.Token, wire.StatusFailed, "stale", "", turnstore.AttemptEnd{}), turnstore.ErrFenced)
		require.ErrorIs(t, db.ReleaseLease(ctx, id, c1.Token, true), turnstore.ErrFenced)

		require.NoError(t, s.Complete(ctx, id, c2.Token, wire.Output{Text: "fresh"}))
		require.ErrorIs(t, s.Complete(ctx, id, c2.Token, wire.Output{Text: "again"}), turnstore.ErrFenced, "completion happens once")
		h, err := history(ctx, db, "fence")
		require.NoError(t, err)
		require.Len(t, h, 2)
		require.Equal(t, "hi", h[0].Content)
		require.Equal(t, "fresh", h[1].Content)

		c, err = s.Claim(ctx, req)
		require.NoError(t, err)
		require.Equal(t, turnstore.ClaimDone, c.Outcome)
		require.Equal(t, wire.StatusSucceeded, c.Status)
	})

	t.Run("ExhaustedAfterMaxAttempts", func(t *testing.T) {
		t.Parallel()
		env := setup(t)
		s := NewStore(env.Pool, "a", 100*time.Millisecond, 2)
		db := turnstore.New(env.Pool)
		req := request("exhaust")
		for attempt := 1; attempt <= 2; attempt++ {
			c, err := s.Claim(ctx, req)
			require.NoError(t, err)
			require.Equal(t, turnstore.ClaimAcquired, c.Outcome)
			waitExpired(t, env, req.Env.TurnID)
		}
		c, err := s.Claim(ctx, req)
		require.NoError(t, err)
		require.Equal(t, turnstore.ClaimExhausted, c.Outcome)
		token, attempt, err := db.FinishUnleased(ctx, req.Env.TurnID, wire.StatusFailed, "crash loop", "attempts_exhausted")
		require.NoError(t, err)
		require.Equal(t, 2, attempt)
		require.Greater(t, token, c.Token)
	})

	t.Run("HandoffDoesNotCount", func(t *testing.T) {
		t.Parallel()
		env := setup(t)
		s := NewStore(env.Pool, "a", time.Minute, 1)
		db := turnstore.New(env.Pool)
		req := request("handoff")
		c, err := s.Claim(ctx, req)
		require.NoError(t, err)
		require.NoError(t, db.ReleaseLease(ctx, req.Env.TurnID, c.Token, true))
		renewed, err := s.Renew(ctx, []Held{{TurnID: req.Env.TurnID, Token: c.Token}})
		require.NoError(t, err)
		require.Empty(t, renewed, "a renewal racing the release does not extend the released lease")
		c, err = s.Claim(ctx, req)
		require.NoError(t, err)
		require.Equal(t, turnstore.ClaimAcquired, c.Outcome, "a released lease is taken over at once, and a hand-off is not an attempt")
		require.Equal(t, 2, c.Attempt)
		require.NoError(t, db.ReleaseLease(ctx, req.Env.TurnID, c.Token, false))
		c, err = s.Claim(ctx, req)
		require.NoError(t, err)
		require.Equal(t, turnstore.ClaimExhausted, c.Outcome, "a failed attempt counts")
	})

	t.Run("CancelledBeforeStart", func(t *testing.T) {
		t.Parallel()
		env := setup(t)
		s := NewStore(env.Pool, "a", time.Minute, 3)
		req := request("cancel")
		_, err := env.Pool.Exec(ctx, `INSERT INTO turns (turn_id, session_id, tenant, status, cancel_requested, accepted_at)
			VALUES ($1, 'default/cancel', 'default', 'queued', true, now())`, req.Env.TurnID)
		require.NoError(t, err)
		c, err := s.Claim(ctx, req)
		require.NoError(t, err)
		require.Equal(t, turnstore.ClaimCancelled, c.Outcome)
		_, _, err = s.Expire(ctx, req, "late")
		require.ErrorIs(t, err, turnstore.ErrFenced, "a cancelled turn stays cancelled")
	})

	t.Run("ExpireLeavesLiveLeases", func(t *testing.T) {
		t.Parallel()
		env := setup(t)
		s := NewStore(env.Pool, "a", time.Minute, 3)
		fresh := request("expire")
		token, attempt, err := s.Expire(ctx, fresh, "late")
		require.NoError(t, err)
		require.Zero(t, attempt)
		require.Positive(t, token)
		c, err := s.Claim(ctx, fresh)
		require.NoError(t, err)
		require.Equal(t, turnstore.ClaimDone, c.Outcome)
		require.Equal(t, wire.StatusExpired, c.Status)

		held := request("expire")
		_, err = s.Claim(ctx, held)
		require.NoError(t, err)
		_, _, err = s.Expire(ctx, held, "late")
		require.ErrorIs(t, err, turnstore.ErrFenced, "a running turn with a live lease is not expired")
	})
}

func TestStoreBatches(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("ClaimManyMixedOutcomes", func(t *testing.T) {
		t.Parallel()
		env := setup(t)
		s := NewStore(env.Pool, "a", time.Minute, 2)
		other := NewStore(env.Pool, "b", time.Minute, 2)

		fresh := request("mixed-fresh")
		leased := request("mixed-leased")
		held, err := other.Claim(ctx, leased)
		require.NoError(t, err)
		done := request("mixed-done")
		dc, err := s.Claim(ctx, done)
		require.NoError(t, err)
		require.NoError(t, s.Complete(ctx, done.Env.TurnID, dc.Token, wire.Output{Text: "ok"}))
		cancelled := request("mixed-cancelled")
		_, err = env.Pool.Exec(ctx, `INSERT INTO turns (turn_id, session_id, tenant, status, cancel_requested, accepted_at)
			VALUES ($1, 'default/mixed-cancelled', 'default', 'queued', true, now())`, cancelled.Env.TurnID)
		require.NoError(t, err)
		exhausted := request("mixed-exhausted")
		_, err = env.Pool.Exec(ctx, `INSERT INTO turns (turn_id, session_id, tenant, status, attempt, fencing_token,
				lease_expires_at, accepted_at)
			VALUES ($1, 'default/mixed-exhausted', 'default', 'running', 2, nextval('fencing_token_seq'), now() - interval '1 second', now())`,
			exhausted.Env.TurnID)
		require.NoError(t, err)
		queued := request("mixed-queued")
		_, err = env.Pool.Exec(ctx, `INSERT INTO turns (turn_id, session_id, tenant, status, accepted_at)
			VALUES ($1, 'default/mixed-queued', 'default', 'queued', now())`, queued.Env.TurnID)
		require.NoError(t, err)

		res := s.ClaimMany(ctx, []ClaimRequest{fresh, leased, done, cancelled, exhausted, queued})
		require.Len(t, res, 6)
		for _, r := range res {
			require.NoError(t, r.Err)
		}
		require.Equal(t, turnstore.ClaimAcquired, res[0].Val.Outcome)
		require.Equal(t, 1, res[0].Val.Attempt)
		require.Equal(t, wire.StatusRunning, res[0].Val.Status)
		require.WithinDuration(t, time.Now().Add(time.Minute), res[0].Val.LeaseExpiresAt, 30*time.Second)
		require.Equal(t, turnstore.ClaimLeased, res[1].Val.Outcome)
		require.Equal(t, held.Token, res[1].Val.Token)
		require.WithinDuration(t, held.LeaseExpiresAt, res[1].Val.LeaseExpiresAt, time.Millisecond)
		require.Equal(t, turnstore.ClaimDone, res[2].Val.Outcome)
		require.Equal(t, wire.StatusSucceeded, res[2].Val.Status)
		require.Equal(t, turnstore.ClaimCancelled, res[3].Val.Outcome)
		require.Equal(t, turnstore.ClaimExhausted, res[4].Val.Outcome)
		require.Equal(t, 2, res[4].Val.Attempt)
		require.Equal(t, turnstore.ClaimAcquired, res[5].Val.Outcome, "a queued row is taken over")
		require.Equal(t, 1, res[5].Val.Attempt)
		require.Greater(t, res[5].Val.Token, held.Token, "tokens only grow")

		// The row the batch inserted is the row Claim would have inserted.
		var owner string
		var partition int32
		require.NoError(t, env.Pool.QueryRow(ctx, `SELECT lease_owner, kafka_partition FROM turns WHERE turn_id = $1`,
			fresh.Env.TurnID).Scan(&owner, &partition))
		require.Equal(t, "a", owner)
		require.Zero(t, partition)
		c, err := other.Claim(ctx, fresh)
		require.NoError(t, err)
		require.Equal(t, turnstore.ClaimLeased, c.Outcome, "a lease taken in a batch is a lease")
	})

	t.Run("ClaimManySameTurnTwice", func(t *testing.T) {
		t.Parallel()
		env := setup(t)
		s := NewStore(env.Pool, "a", time.Minute, 3)
		req := request("twice")
		res := s.ClaimMany(ctx, []ClaimRequest{req, request("twice-other"), req})
		require.NoError(t, res[0].Err)
		require.NoError(t, res[2].Err)
		require.Equal(t, turnstore.ClaimAcquired, res[0].Val.Outcome)
		require.Equal(t, turnstore.ClaimAcquired, res[1].Val.Outcome)
		require.Equal(t, turnstore.ClaimLeased, res[2].Val.Outcome, "the second request sees the first one's lease, as two calls would")
		require.Equal(t, res[0].Val.Token, res[2].Val.Token)
	})

	t.Run("ClaimManyConcurrentFirstInserts", func(t *testing.T) {
		t.Parallel()
		env := setup(t)
		// Two workers claim the same new turns at once, in opposite orders: each turn is acquired
		// exactly once, the other side reports LEASED, and neither statement deadlocks or errs.
		const n = 50
		reqs := make([]ClaimRequest, n)
		for i := range reqs {
			reqs[i] = request(fmt.Sprintf("race-%d", i))
		}
		rev := make([]ClaimRequest, n)
		for i := range reqs {
			rev[n-1-i] = reqs[i]
		}
		for round := range 5 {
			// New sessions each round: the last round's turns still run, and a started turn holds
			// its session.
			for i := range reqs {
				reqs[i].Env.TurnID = uuid.Must(uuid.NewV7())
				reqs[i].Env.SessionID = fmt.Sprintf("race-%d-%d", round, i)
				rev[n-1-i] = reqs[i]
			}
			a, b := NewStore(env.Pool, "a", time.Minute, 3), NewStore(env.Pool, "b", time.Minute, 3)
			var ra, rb []batchResult
			start := make(chan struct{})
			doneA, doneB := make(chan struct{}), make(chan struct{})
			go func() { defer close(doneA); <-start; ra = results(a.ClaimMany(ctx, reqs)) }()
			go func() { defer close(doneB); <-start; rb = results(b.ClaimMany(ctx, rev)) }()
			close(start)
			<-doneA
			<-doneB
			for i := range reqs {
				x, y := ra[i], rb[n-1-i]
				require.NoError(t, x.err, "round %d", round)
				require.NoError(t, y.err, "round %d", round)
				outcomes := []turnstore.ClaimOutcome{x.c.Outcome, y.c.Outcome}
				require.ElementsMatch(t, []turnstore.ClaimOutcome{turnstore.ClaimAcquired, turnstore.ClaimLeased}, outcomes, "round %d turn %d", round, i)
			}
		}
	})

	t.Run("CompleteManyFencedAndNot", func(t *testing.T) {
		t.Parallel()
		env := setup(t)
		s := NewStore(env.Pool, "a", 200*time.Millisecond, 3)
		db := turnstore.New(env.Pool)
		// Three turns of one session and one of another; the second turn's first attempt is a
		// zombie: a newer attempt took over, so only the newer token completes it. A started turn
		// holds its session, so the session's three run at once only as they are set up here: new,
		// accepted at one instant and claimed in one statement, whose order check sees the turns as
		// they were before it (a consumer never puts two turns of a session in one batch).
		reqs := []ClaimRequest{request("cm"), request("cm"), request("cm"), request("cm-other")}
		for i := range reqs {
			reqs[i].Env.AcceptedAt = reqs[0].Env.AcceptedAt
		}
		var claims []Claim
		for _, r := range s.ClaimMany(ctx, reqs) {
			require.NoError(t, r.Err)
			require.Equal(t, turnstore.ClaimAcquired, r.Val.Outcome)
			claims = append(claims, r.Val)
		}
		waitExpired(t, env, reqs[1].Env.TurnID)
		taken, err := s.Claim(ctx, reqs[1])
		require.NoError(t, err)
		require.Equal(t, turnstore.ClaimAcquired, taken.Outcome)
		s2 := NewStore(env.Pool, "a", time.Minute, 3)
		renewed, err := s2.Renew(ctx, []Held{{reqs[0].Env.TurnID, claims[0].Token}, {reqs[2].Env.TurnID, claims[2].Token}, {reqs[3].Env.TurnID, claims[3].Token}})
		require.NoError(t, err)
		require.Len(t, renewed, 3)

		res := s.CompleteMany(ctx, []Completion{
			{TurnID: reqs[0].Env.TurnID, Token: claims[0].Token, Output: wire.Output{Text: "one"}},
			{TurnID: reqs[1].Env.TurnID, Token: claims[1].Token, Output: wire.Output{Text: "zombie"}},
			{TurnID: reqs[2].Env.TurnID, Token: claims[2].Token, Output: wire.Output{Text: "three"}},
			{TurnID: reqs[3].Env.TurnID, Token: claims[3].Token, Output: wire.Output{Text: "other"}},
		})
		require.NoError(t, res[0].Err)
		require.ErrorIs(t, res[1].Err, turnstore.ErrFenced, "the stale token is refused, and only it")
		require.NoError(t, res[2].Err)
		require.NoError(t, res[3].Err)
		require.Equal(t, []int64{2, 0, 4, 2}, []int64{res[0].Val, res[1].Val, res[2].Val, res[3].Val},
			"each completion learns its assistant message's sequence number")

		// The turns of one session are appended in request order, two messages each.
		h, err := history(ctx, db, "cm")
		require.NoError(t, err)
		require.Len(t, h, 4)
		for i, want := range []struct {
			seq     int64
			turn    uuid.UUID
			role    string
			content string
		}{
			{1, reqs[0].Env.TurnID, "user", "hi"},
			{2, reqs[0].Env.TurnID, "assistant", "one"},
			{3, reqs[2].Env.TurnID, "user", "hi"},
			{4, reqs[2].Env.TurnID, "assistant", "three"},
		} {
			require.Equal(t, want.seq, h[i].Seq)
			require.Equal(t, want.turn.String(), h[i].TurnID)
			require.Equal(t, want.role, h[i].Role)
			require.Equal(t, want.content, h[i].Content)
		}
		var lastSeq int64
		require.NoError(t, env.Pool.QueryRow(ctx, `SELECT last_seq FROM sessions WHERE session_id = 'default/cm'`).Scan(&lastSeq))
		require.Equal(t, int64(4), lastSeq)

		// The newer attempt completes the turn; the session grows from where it was.
		res = s.CompleteMany(ctx, []Completion{
			{TurnID: reqs[1].Env.TurnID, Token: taken.Token, Output: wire.Output{Text: "two"}},
			{TurnID: reqs[0].Env.TurnID, Token: claims[0].Token, Output: wire.Output{Text: "again"}},
		})
		require.NoError(t, res[0].Err)
		require.Equal(t, int64(6), res[0].Val)
		require.ErrorIs(t, res[1].Err, turnstore.ErrFenced, "completion happens once")
		h, err = history(ctx, db, "cm")
		require.NoError(t, err)
		require.Len(t, h, 6)
		require.Equal(t, "two", h[5].Content)
		require.Equal(t, int64(6), h[5].Seq)
		var status string
		require.NoError(t, env.Pool.QueryRow(ctx, `SELECT status FROM turns WHERE turn_id = $1`, reqs[1].Env.TurnID).Scan(&status))
		require.Equal(t, "succeeded", status)
	})

	t.Run("StatementErrorFailsEveryRequest", func(t *testing.T) {
		t.Parallel()
		env := setup(t)
		s := NewStore(env.Pool, "a", time.Minute, 3)
		a, b := request("err-1"), request("err-2")
		ca, err := s.Claim(ctx, a)
		require.NoError(t, err)
		cb, err := s.Claim(ctx, b)
		require.NoError(t, err)
		// The table the completion appends to is gone: the statement fails, so nothing of the batch
		// happened and every completion reports the error (not turnstore.ErrFenced, not success).
		_, err = env.Pool.Exec(ctx, `ALTER TABLE session_history RENAME TO session_history_gone`)
		require.NoError(t, err)
		res := s.CompleteMany(ctx, []Completion{{TurnID: a.Env.TurnID, Token: ca.Token}, {TurnID: b.Env.TurnID, Token: cb.Token}})
		for _, r := range res {
			require.Error(t, r.Err)
			require.NotErrorIs(t, r.Err, turnstore.ErrFenced)
		}
		var running int
		require.NoError(t, env.Pool.QueryRow(ctx, `SELECT count(*) FROM turns WHERE status = 'running'`).Scan(&running))
		require.Equal(t, 2, running, "no completion of the failed batch took effect")

		cctx, cancel := context.WithCancel(ctx)
		cancel()
		for _, r := range s.ClaimMany(cctx, []ClaimRequest{request("err-1"), request("err-2")}) {
			require.ErrorIs(t, r.Err, context.Canceled)
		}
	})
}

type batchResult struct {
	c   Claim
	err error
}

func results(rs []batch.Result[Claim]) []batchResult {
	out := make([]batchResult, len(rs))
	for i, r := range rs {
		out[i] = batchResult{r.Val, r.Err}
	}
	return out
}

// TestLockOrder checks that the statements that change many turns lock them in turn_id order,
// whatever the order of their requests: the renewal and a completion batch of one worker share
// rows, and two statements that lock shared rows in different orders deadlock (Postgres breaks
// the cycle only after deadlock_timeout, 1s by default, stalling every turn in both batches).
func TestLockOrder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	// run claims two turns, locks the one with the larger turn_id from another transaction, runs
	// stmt with the larger first, and requires that stmt locks the smaller while it waits.
	run := func(t *testing.T, stmt func(s *Store, ids []uuid.UUID, tokens []wire.FenceToken)) {
		t.Helper()
		env := setup(t)
		s := NewStore(env.Pool, "a", time.Minute, 3)
		// a has the larger turn_id and is inserted first; its session sorts first, so neither
		// insertion order nor an index on session_id gives turn_id order by accident.
		a, b := request("lock-a"), request("lock-b")
		if a.Env.TurnID.String() < b.Env.TurnID.String() {
			a.Env.TurnID, b.Env.TurnID = b.Env.TurnID, a.Env.TurnID
		}
		var ids []uuid.UUID
		var tokens []wire.FenceToken
		for _, r := range []ClaimRequest{a, b} {
			c, err := s.Claim(ctx, r)
			require.NoError(t, err)
			ids, tokens = append(ids, r.Env.TurnID), append(tokens, c.Token)
		}
		hi, lo := ids[0], ids[1]

		tx, err := env.Pool.Begin(ctx)
		require.NoError(t, err)
		defer func() { _ = tx.Rollback(ctx) }()
		_, err = tx.Exec(ctx, `SELECT 1 FROM turns WHERE turn_id = $1 FOR UPDATE`, hi)
		require.NoError(t, err)

		done := make(chan struct{})
		go func() {
			defer close(done)
			stmt(s, ids, tokens)
		}()
		testenv.WaitFor(t, 5*time.Second, "the statement to lock the smaller turn_id first", func() bool {
			_, err := env.Pool.Exec(ctx, `SELECT 1 FROM turns WHERE turn_id = $1 FOR UPDATE NOWAIT`, lo)
			var pg *pgconn.PgError
			return errors.As(err, &pg) && pg.Code == "55P03"
		})
		require.NoError(t, tx.Rollback(ctx))
		<-done
	}

	t.Run("Renew", func(t *testing.T) {
		t.Parallel()
		run(t, func(s *Store, ids []uuid.UUID, tokens []wire.FenceToken) {
			renewed, err := s.Renew(ctx, []Held{{ids[0], tokens[0]}, {ids[1], tokens[1]}})
			assert.NoError(t, err)
			assert.Len(t, renewed, 2)
		})
	})

	t.Run("CompleteMany", func(t *testing.T) {
		t.Parallel()
		run(t, func(s *Store, ids []uuid.UUID, tokens []wire.FenceToken) {
			res := s.CompleteMany(ctx, []Completion{{TurnID: ids[0], Token: tokens[0], Output: wire.Output{Text: "a"}}, {TurnID: ids[1], Token: tokens[1], Output: wire.Output{Text: "b"}}})
			for _, r := range res {
				assert.NoError(t, r.Err)
			}
		})
	})
}

// withMetadata is req with the metadata raw, as the record held it, and decoded.
func withMetadata(t *testing.T, req ClaimRequest, raw string) ClaimRequest {
	t.Helper()
	require.NoError(t, json.Unmarshal([]byte(raw), &req.Env.Metadata))
	req.RawMetadata = json.RawMessage(raw)
	return req
}

// TestClaimStoresRecordedMetadata checks that a claim stores the record's metadata bytes as they
// are, numbers as written, and that bytes Postgres refuses where the decoded map would pass are
// claimed with the map encoded, alone or in a batch.
func TestClaimStoresRecordedMetadata(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := setup(t)
	s := NewStore(env.Pool, "a", time.Minute, 3)
	stored := func(id uuid.UUID, want string) {
		t.Helper()
		var same bool
		var got string
		require.NoError(t, env.Pool.QueryRow(ctx, `SELECT metadata = $2::jsonb, metadata::text FROM turns WHERE turn_id = $1`,
			id, want).Scan(&same, &got))
		require.True(t, same, "stored %s, want %s", got, want)
	}

	exact := `{"b": 1, "a": {"c": [1, 2.50]}, "n": 12345678901234567890}`
	c, err := s.Claim(ctx, withMetadata(t, request("meta-exact"), exact))
	require.NoError(t, err)
	require.Equal(t, turnstore.ClaimAcquired, c.Outcome)

	// encoding/json reads 1e-20000 as 0; Postgres's numeric cannot hold it.
	refused := withMetadata(t, request("meta-refused"), `{"a": 1e-20000}`)
	c, err = s.Claim(ctx, refused)
	require.NoError(t, err)
	require.Equal(t, turnstore.ClaimAcquired, c.Outcome)
	stored(refused.Env.TurnID, `{"a": 0}`)

	reqs := []ClaimRequest{
		withMetadata(t, request("meta-batch-1"), exact),
		withMetadata(t, request("meta-batch-2"), `{"a": 1e-20000}`),
	}
	for i, r := range s.ClaimMany(ctx, reqs) {
		require.NoError(t, r.Err, i)
		require.Equal(t, turnstore.ClaimAcquired, r.Val.Outcome, i)
	}
	stored(reqs[0].Env.TurnID, exact)
	stored(reqs[1].Env.TurnID, `{"a": 0}`)
}

func TestStorableAsIs(t *testing.T) {
	t.Parallel()
	require.True(t, storableAsIs(json.RawMessage(`{"a":"é"}`)))
	require.False(t, storableAsIs(nil))
	require.False(t, storableAsIs(json.RawMessage("{\"a\":\"\xff\"}")), "invalid UTF-8")
	require.False(t, storableAsIs(json.RawMessage(`{"a":"\ud800"}`)), "an escape")
}

// TestInputAndOutputStoredAsEncoded checks that the input and output objects the claim, expiry and
// completion statements build from their texts (and the output's state and usage) are what encoding
// wire.Input and wire.Output stores, for texts JSON escapes, batched and alone. The statements know
// each struct's fields: a field added to either must be added to them too, and this test fails
// until it is.
func TestInputAndOutputStoredAsEncoded(t *testing.T) {
	t.Parallel()
	require.Equal(t, 1, reflect.TypeFor[wire.Input]().NumField(), "wire.Input gained a field: claimManySQL builds it from its text alone")
	require.Equal(t, 3, reflect.TypeFor[wire.Output]().NumField(), "wire.Output gained a field: completeSQL builds it from its text, state and usage alone")
	ctx := context.Background()
	env := setup(t)
	s := NewStore(env.Pool, "a", time.Minute, 3)
	texts := []string{"", "plain", `quote " backslash \ slash /`, "<b>&amp;</b>", "tab\tnewline\n\u2028\u2029 é 😀", "\x7f\u0001"}
	var reqs []ClaimRequest
	for i, text := range texts {
		r := request("stored-as-encoded-" + strconv.Itoa(i))
		r.Env.Input.Text = text
		reqs = append(reqs, r)
	}
	claim := func(reqs []ClaimRequest) []Claim {
		var cs []Claim
		for i, r := range s.ClaimMany(ctx, reqs) {
			require.NoError(t, r.Err, i)
			require.Equal(t, turnstore.ClaimAcquired, r.Val.Outcome, i)
			cs = append(cs, r.Val)
		}
		return cs
	}
	claimed := append(claim(reqs[:len(reqs)-1]), claim(reqs[len(reqs)-1:])...)
	var done []Completion
	for i, c := range claimed {
		out := wire.Output{Text: "re: " + texts[i]}
		if i%2 == 1 {
			out.State = wire.OutputInputRequired
		}
		switch i % 3 {
		case 1:
			out.Usage = &wire.Usage{InputTokens: int64(i), OutputTokens: 2, TotalTokens: int64(i) + 2}
		case 2:
			out.Usage = &wire.Usage{InputTokens: 1 << 40, OutputTokens: 0, TotalTokens: 1 << 40, Model: texts[i]}
		}
		done = append(done, Completion{TurnID: reqs[i].Env.TurnID, Token: c.Token, Output: out})
	}
	for i, r := range append(s.CompleteMany(ctx, done[:len(done)-1]), s.CompleteMany(ctx, done[len(done)-1:])...) {
		require.NoError(t, r.Err, i)
	}
	expired := request("stored-as-encoded-expired")
	expired.Env.Input.Text = texts[2]
	_, _, err := s.Expire(ctx, expired, "too late")
	require.NoError(t, err)
	done = append(done, Completion{TurnID: expired.Env.TurnID})
	for i, r := range append(reqs, expired) {
		in, err := json.Marshal(r.Env.Input)
		require.NoError(t, err)
		out, err := json.Marshal(done[i].Output)
		require.NoError(t, err)
		var inSame, outSame bool
		var gotIn, gotOut string
		if i == len(reqs) {
			out = nil // expired: no output
		}
		require.NoError(t, env.Pool.QueryRow(ctx, `SELECT input = $2::jsonb, output IS NOT DISTINCT FROM $3::jsonb,
			input::text, coalesce(output::text, '')
			FROM turns WHERE turn_id = $1`, r.Env.TurnID, in, out).Scan(&inSame, &outSame, &gotIn, &gotOut))
		require.True(t, inSame, "input stored as %s, encoded %s", gotIn, in)
		require.True(t, outSame, "output stored as %s, encoded %s", gotOut, out)
	}
}

// TestClaimNamesTheExpiredLease checks what a claim says of the lease it took over: the holder and
// token of a lease that expired while held, nothing for a new turn or a lease released after a
// failed attempt.
func TestClaimNamesTheExpiredLease(t *testing.T) {
	t.Parallel()
	env := setup(t)
	ctx := context.Background()
	dead := NewStore(env.Pool, "dead-"+testenv.RandomHex(4), 50*time.Millisecond, 5)
	live := NewStore(env.Pool, "live-"+testenv.RandomHex(4), time.Minute, 5)
	req := request("expired-" + testenv.RandomHex(4))

	first, err := dead.Claim(ctx, req)
	require.NoError(t, err)
	require.Equal(t, turnstore.ClaimAcquired, first.Outcome)
	require.Empty(t, first.ExpiredOwner, "a new turn took no lease over")
	waitExpired(t, env, req.Env.TurnID)

	second, err := live.Claim(ctx, req)
	require.NoError(t, err)
	require.Equal(t, turnstore.ClaimAcquired, second.Outcome)
	require.Equal(t, dead.owner, second.ExpiredOwner)
	require.Equal(t, first.Token, second.ExpiredToken)

	require.NoError(t, turnstore.New(env.Pool).ReleaseLease(ctx, req.Env.TurnID, second.Token, false))
	third, err := live.Claim(ctx, req)
	require.NoError(t, err)
	require.Equal(t, turnstore.ClaimAcquired, third.Outcome)
	require.Empty(t, third.ExpiredOwner, "a released lease expired under nobody")
	require.Zero(t, third.ExpiredToken)
}

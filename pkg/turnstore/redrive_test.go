package turnstore

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/pgarray"
	"github.com/turnstile-run/turnstile/pkg/testenv"
	"github.com/turnstile-run/turnstile/pkg/wire"
)

// queuedTurn records one queued turn as intake's recorder does, accepted at accepted, its record
// at partition 0, offset off, in the topic whose ID is topic (nil: unknown).
func queuedTurn(t *testing.T, s *Store, session string, accepted, deadline time.Time, off int64, topic *uuid.UUID) uuid.UUID {
	t.Helper()
	id := uuid.Must(uuid.NewV7())
	mt := "enqueue"
	_, err := s.InsertQueued(context.Background(), &QueuedParams{
		TurnIDs: pgarray.UUIDs{pgarray.UUID(id)}, SessionKeys: pgarray.Texts{pgarray.Text(session)},
		Tenants: pgarray.Texts{"acme"}, AcceptedAt: pgarray.Times{pgarray.Time(accepted)},
		Deadlines: pgarray.Times{pgarray.Time(deadline)}, NeedSession: pgarray.Bools{false},
		ClientTurnIDs: []*uuid.UUID{nil}, Inputs: pgarray.Texts{pgarray.Text("hello " + id.String())},
		Metadata: [][]byte{[]byte(`{"k":"v"}`)}, Multitasks: []*string{&mt}, Traceparents: []*string{nil},
		Partitions: pgarray.Ints{0}, Offsets: pgarray.Ints{pgarray.Int(off)}, TopicIDs: []*uuid.UUID{topic},
	})
	require.NoError(t, err)
	return id
}

// claimOne claims the turn id of session as accepted at accepted, as a worker would from its record.
func claimOne(t *testing.T, s *Store, id uuid.UUID, session string, accepted time.Time) ClaimOutcome {
	t.Helper()
	p := claimParams(1)
	p.TurnIDs[0], p.SessionKeys[0], p.AcceptedAt[0] = pgarray.UUID(id), pgarray.Text(session), pgarray.Time(accepted)
	rows, err := s.ClaimTurns(context.Background(), &p)
	require.NoError(t, err)
	var out ClaimOutcome
	for _, r := range rows {
		if r.Outcome != "" && (out == "" || out == ClaimBlocked) {
			out = r.Outcome
		}
	}
	return out
}

// TestClaimKeepsSessionOrder checks the order at the claim: a session's later turn is BLOCKED
// while an earlier accepted turn of it is queued or running, whether or not the later one has a
// row yet, and is taken once the earlier one is terminal. A blocked claim is no attempt. Other
// sessions are not affected.
func TestClaimKeepsSessionOrder(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{Partitions: 1})
	s := New(env.Pool)
	ctx := context.Background()
	t0 := time.Now().Add(-time.Minute)
	first := queuedTurn(t, s, "acme/order", t0, t0.Add(time.Hour), 0, nil)
	second := queuedTurn(t, s, "acme/order", t0.Add(time.Second), t0.Add(time.Hour), 1, nil)
	fourth := uuid.Must(uuid.NewV7()) // no row yet: its record came before its queued row

	require.Equal(t, ClaimBlocked, claimOne(t, s, second, "acme/order", t0.Add(time.Second)))
	require.Equal(t, ClaimBlocked, claimOne(t, s, fourth, "acme/order", t0.Add(3*time.Second)))
	var attempt int
	require.NoError(t, env.Pool.QueryRow(ctx, `SELECT attempt FROM turns WHERE turn_id = $1`, second).Scan(&attempt))
	require.Zero(t, attempt, "a blocked claim is not an attempt")
	var n int
	require.NoError(t, env.Pool.QueryRow(ctx, `SELECT count(*) FROM turns WHERE turn_id = $1`, fourth).Scan(&n))
	require.Zero(t, n, "a blocked claim writes no row")
	require.Equal(t, ClaimAcquired, claimOne(t, s, uuid.Must(uuid.NewV7()), "acme/other", t0.Add(2*time.Second)),
		"another session is not blocked")

	require.Equal(t, ClaimAcquired, claimOne(t, s, first, "acme/order", t0))
	require.Equal(t, ClaimBlocked, claimOne(t, s, second, "acme/order", t0.Add(time.Second)), "blocked while the earlier one runs")
	_, err := env.Pool.Exec(ctx, `UPDATE turns SET status = 'succeeded', finished_at = now() WHERE turn_id = $1`, first)
	require.NoError(t, err)
	require.Equal(t, ClaimAcquired, claimOne(t, s, second, "acme/order", t0.Add(time.Second)))
	require.Equal(t, ClaimLeased, claimOne(t, s, second, "acme/order", t0.Add(time.Second)),
		"what the row says comes before the order")
	require.Equal(t, ClaimBlocked, claimOne(t, s, fourth, "acme/order", t0.Add(3*time.Second)))
	_, err = env.Pool.Exec(ctx, `UPDATE turns SET status = 'failed', finished_at = now() WHERE turn_id = $1`, second)
	require.NoError(t, err)
	require.Equal(t, ClaimAcquired, claimOne(t, s, fourth, "acme/order", t0.Add(3*time.Second)))
}

// TestClaimStartedTurnHoldsItsSession checks the order once a turn has started: two posts of a
// session in flight at once have no order of their own, and the one that started first holds the
// session until it is terminal. An earlier accepted turn whose queued row appeared only after the
// later one started (its produce was slow) is BLOCKED behind it, and the started turn is taken again
// after a lost lease or a hand-off instead of being blocked by the one it started ahead of: else
// the two would run at once.
func TestClaimStartedTurnHoldsItsSession(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{Partitions: 1})
	s := New(env.Pool)
	ctx := context.Background()
	t0 := time.Now().Add(-time.Minute)
	later := uuid.Must(uuid.NewV7())
	require.Equal(t, ClaimAcquired, claimOne(t, s, later, "acme/race", t0.Add(time.Second)))
	earlier := queuedTurn(t, s, "acme/race", t0, t0.Add(time.Hour), 0, nil)

	require.Equal(t, ClaimBlocked, claimOne(t, s, earlier, "acme/race", t0), "blocked while the started turn runs")
	_, err := env.Pool.Exec(ctx, `UPDATE turns SET lease_expires_at = now() - interval '1 second' WHERE turn_id = $1`, later)
	require.NoError(t, err)
	require.Equal(t, ClaimBlocked, claimOne(t, s, earlier, "acme/race", t0), "blocked while the started turn's lease is lost")
	require.Equal(t, ClaimAcquired, claimOne(t, s, later, "acme/race", t0.Add(time.Second)),
		"the started turn is taken over, not blocked by the turn it started ahead of")
	_, err = env.Pool.Exec(ctx, `UPDATE turns SET status = 'queued', lease_owner = NULL, lease_expires_at = NULL,
		handoffs = handoffs + 1 WHERE turn_id = $1`, later)
	require.NoError(t, err)
	require.Equal(t, ClaimBlocked, claimOne(t, s, earlier, "acme/race", t0), "blocked while the started turn is handed off")
	require.Equal(t, ClaimAcquired, claimOne(t, s, later, "acme/race", t0.Add(time.Second)))
	_, err = env.Pool.Exec(ctx, `UPDATE turns SET status = 'succeeded', finished_at = now() WHERE turn_id = $1`, later)
	require.NoError(t, err)
	require.Equal(t, ClaimAcquired, claimOne(t, s, earlier, "acme/race", t0), "taken once the started turn is terminal")
}

// TestBacklogAgeSkipsUnstartable checks that a queued turn past its deadline and one whose cancel
// was requested are not backlog, and that EndUnstartable ends both (expired, cancelled) with a
// fresh token, leaving a startable turn alone.
func TestBacklogAgeSkipsUnstartable(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{Partitions: 1})
	s := New(env.Pool)
	ctx := context.Background()
	old := time.Now().Add(-10 * time.Minute)
	expired := queuedTurn(t, s, "acme/late", old, old.Add(time.Minute), 0, nil)
	cancelled := queuedTurn(t, s, "acme/gone", old.Add(time.Second), time.Now().Add(time.Hour), 1, nil)
	_, err := env.Pool.Exec(ctx, `UPDATE turns SET cancel_requested = true WHERE turn_id = $1`, cancelled)
	require.NoError(t, err)
	age, err := s.BacklogAge(ctx)
	require.NoError(t, err)
	require.Zero(t, age, "neither a turn past its deadline nor a cancelled one is backlog")

	live := queuedTurn(t, s, "acme/live", time.Now().Add(-30*time.Second), time.Now().Add(time.Hour), 2, nil)
	age, err = s.BacklogAge(ctx)
	require.NoError(t, err)
	require.InDelta(t, 30, age.Seconds(), 5, "the startable turn is the backlog")

	ended, statuses, err := s.EndUnstartable(ctx, 10, "too late")
	require.NoError(t, err)
	require.Len(t, ended, 2)
	got := map[uuid.UUID]wire.Status{}
	for i, e := range ended {
		got[e.TurnID] = statuses[i]
		require.Positive(t, e.Token)
		require.Equal(t, e.Session == wire.NewSessionKey("acme", "late"), e.Error == "too late")
	}
	require.Equal(t, map[uuid.UUID]wire.Status{expired: wire.StatusExpired, cancelled: wire.StatusCancelled}, got)
	tr, err := s.Get(ctx, live)
	require.NoError(t, err)
	require.Equal(t, wire.StatusQueued, tr.Status)
	require.JSONEq(t, `{"text":"hello `+live.String()+`"}`, string(tr.Input), "the queued row holds the input")
}

// TestRequestCancelOfQueuedIsTerminal checks that a queued turn's cancel ends it at once with a
// fresh token, while a running turn's only marks it for its worker.
func TestRequestCancelOfQueuedIsTerminal(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{Partitions: 1})
	s := New(env.Pool)
	ctx := context.Background()
	now := time.Now()
	queued := queuedTurn(t, s, "acme/c", now, now.Add(time.Hour), 0, nil)
	c, err := s.RequestCancel(ctx, queued, wire.NewSessionKey("acme", "c"), "acme")
	require.NoError(t, err)
	require.True(t, c.Live)
	require.True(t, c.Ended)
	tr, err := s.Get(ctx, queued)
	require.NoError(t, err)
	require.Equal(t, wire.StatusCancelled, tr.Status)
	require.NotNil(t, tr.FinishedAt)
	require.Equal(t, ClaimDone, claimOne(t, s, queued, "acme/c", now), "its record, read later, finds it finished")

	running := uuid.Must(uuid.NewV7())
	require.Equal(t, ClaimAcquired, claimOne(t, s, running, "acme/r", now))
	c, err = s.RequestCancel(ctx, running, wire.NewSessionKey("acme", "r"), "acme")
	require.NoError(t, err)
	require.True(t, c.Live)
	require.False(t, c.Ended)
	c, err = s.RequestCancel(ctx, queued, wire.NewSessionKey("acme", "c"), "acme")
	require.NoError(t, err)
	require.False(t, c.Live, "a finished turn is left alone")
}

// TestTakeLost checks which turns' records count as lost: another topic incarnation's, below the
// start offset, at or above the end offset once acknowledged for sure, and an unknown place once
// old; that a taken turn is not taken again within the hold; and that Redriven moves its place.
func TestTakeLost(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{Partitions: 1})
	s := New(env.Pool)
	ctx := context.Background()
	now := time.Now()
	oldTopic, topic := uuid.New(), uuid.New()
	dl := now.Add(time.Hour)
	recreated := queuedTurn(t, s, "acme/a", now.Add(-time.Second), dl, 3, &oldTopic)
	consumable := queuedTurn(t, s, "acme/b", now.Add(-time.Minute), dl, 5, &topic)
	retained := queuedTurn(t, s, "acme/c", now.Add(-2*time.Minute), dl, 1, &topic)
	truncated := queuedTurn(t, s, "acme/d", now.Add(-time.Minute), dl, 20, &topic)
	fresh := queuedTurn(t, s, "acme/e", now, dl, 21, &topic) // may not be acknowledged when the offsets were read
	unknownOld := queuedTurn(t, s, "acme/f", now.Add(-10*time.Minute), dl, 4, nil)
	unknownNew := queuedTurn(t, s, "acme/g", now.Add(-time.Second), dl, 4, nil)
	_ = fresh
	_ = unknownNew
	_ = consumable

	p := &LostParams{
		Topic:          Topic{ID: topic, StartOffsets: []int64{2}, EndOffsets: []int64{10}},
		AcceptedBefore: now.Add(-30 * time.Second), UnknownBefore: now.Add(-2 * time.Minute),
		Hold: time.Minute, Limit: 100, Default: true,
	}
	lost, err := s.TakeLost(ctx, p)
	require.NoError(t, err)
	var ids []uuid.UUID
	for _, l := range lost {
		ids = append(ids, l.Envelope.TurnID)
		require.True(t, l.HasInput)
		require.Equal(t, "hello "+l.Envelope.TurnID.String(), l.Envelope.Input.Text)
		require.Equal(t, map[string]any{"k": "v"}, l.Envelope.Metadata)
		require.Equal(t, "enqueue", l.Envelope.Multitask)
		require.Equal(t, "acme", l.Envelope.Tenant)
		require.Equal(t, 1, l.Redrives)
	}
	require.Equal(t, []uuid.UUID{unknownOld, retained, truncated, recreated}, ids, "oldest accepted first")

	again, err := s.TakeLost(ctx, p)
	require.NoError(t, err)
	require.Empty(t, again, "a taken turn is held")

	require.NoError(t, s.Redriven(ctx, &RedrivenParams{
		TurnIDs:    pgarray.UUIDs{pgarray.UUID(recreated)},
		Partitions: pgarray.Ints{0}, Offsets: pgarray.Ints{7}, TopicID: &topic,
	}))
	require.NoError(t, s.Release(ctx, pgarray.UUIDs{pgarray.UUID(truncated)}))
	again, err = s.TakeLost(ctx, p)
	require.NoError(t, err)
	require.Len(t, again, 1, "a released turn is taken again at once")
	require.Equal(t, truncated, again[0].Envelope.TurnID)

	// A row from before the inputs were recorded has none: it is an orphan.
	orphan := uuid.Must(uuid.NewV7())
	_, err = env.Pool.Exec(ctx, `INSERT INTO turns (turn_id, session_id, tenant, status, accepted_at, deadline)
		VALUES ($1, 'acme/h', 'acme', 'queued', now() - interval '1 hour', now() + interval '1 hour')`, orphan)
	require.NoError(t, err)
	again, err = s.TakeLost(ctx, p)
	require.NoError(t, err)
	require.Len(t, again, 1)
	require.Equal(t, orphan, again[0].Envelope.TurnID)
	require.False(t, again[0].HasInput)

	// The claim of a record may write the turn's row before the recorder does: the queued row
	// then only adds the topic's ID, which the worker does not know, and only for that record.
	claimedFirst := uuid.Must(uuid.NewV7())
	require.Equal(t, ClaimAcquired, claimOne(t, s, claimedFirst, "acme/i", now)) // partition 0, offset 0
	_, err = s.InsertQueued(ctx, &QueuedParams{
		TurnIDs: pgarray.UUIDs{pgarray.UUID(claimedFirst)}, SessionKeys: pgarray.Texts{"acme/i"},
		Tenants: pgarray.Texts{"acme"}, AcceptedAt: pgarray.Times{pgarray.Time(now)},
		Deadlines: pgarray.Times{pgarray.Time(dl)}, NeedSession: pgarray.Bools{false},
		ClientTurnIDs: []*uuid.UUID{nil}, Inputs: pgarray.Texts{"late row"}, Metadata: [][]byte{nil},
		Multitasks: []*string{nil}, Traceparents: []*string{nil}, Partitions: pgarray.Ints{0},
		Offsets: pgarray.Ints{0}, TopicIDs: []*uuid.UUID{&topic},
	})
	require.NoError(t, err)
	var status string
	var learned *uuid.UUID
	require.NoError(t, env.Pool.QueryRow(ctx, `SELECT status, kafka_topic_id FROM turns WHERE turn_id = $1`, claimedFirst).Scan(&status, &learned))
	require.Equal(t, "running", status, "the queued row never sets progress back")
	require.NotNil(t, learned)
	require.Equal(t, topic, *learned)
}

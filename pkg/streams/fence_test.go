package streams

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/wire"
)

// tokens is Postgres's side of fencing for these tests: one sequence hands out tokens, a claim
// makes a turn's token the next one, and Fences reads them as turnstore.Store.Fences does.
type tokens struct {
	mu     sync.Mutex
	last   wire.FenceToken
	turns  map[uuid.UUID]wire.FenceToken
	reads  int
	err    error
	onRead func() // runs after the first read after it is set, then is cleared
}

func newTokens() *tokens { return &tokens{turns: map[uuid.UUID]wire.FenceToken{}} }

// claim hands turn a new token, as a claim (or a finish that takes one) does.
func (f *tokens) claim(turn uuid.UUID) wire.FenceToken {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.last++
	f.turns[turn] = f.last
	return f.last
}

// Fences reads the tokens, then runs onRead: what onRead does happens after the read, as if the
// reply were still on its way.
func (f *tokens) Fences(_ context.Context, turns []uuid.UUID) (wire.FenceToken, []wire.FenceToken, error) {
	f.mu.Lock()
	f.reads++
	hook := f.onRead
	f.onRead = nil
	err, last := f.err, f.last
	out := make([]wire.FenceToken, len(turns))
	for i, t := range turns {
		out[i] = f.turns[t]
	}
	f.mu.Unlock()
	if hook != nil {
		hook()
	}
	if err != nil {
		return 0, nil, err
	}
	return last, out, nil
}

func (f *tokens) readCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reads
}

// fenced is one attempt of a turn publishing through a fenced publisher.
type fenced struct {
	p       *Publisher
	session string
	row     uuid.UUID
	token   wire.FenceToken
	attempt int
}

func (a fenced) event(t wire.EventType) wire.Event {
	base := wire.EventBase{TurnID: a.row.String(), Attempt: a.attempt}
	switch t {
	case wire.EventCompleted:
		return wire.NewEvent(t, wire.CompletedData{EventBase: base})
	case wire.EventDelta:
		return wire.NewEvent(t, wire.DeltaData{EventBase: base, Text: "w"})
	}
	return wire.NewEvent(t, wire.StartedData{EventBase: base})
}

func (a fenced) publish(ctx context.Context, t wire.EventType) PublishResult {
	return a.p.PublishMany(ctx, []Message{{Session: sk(a.session), TurnID: a.row.String(), TurnRow: a.row, Token: a.token, Event: a.event(t)}})[0]
}

// lose deletes a session's keys, as a Redis that lost its data (or evicted them) would have.
func lose(ctx context.Context, t *testing.T, rdb redis.UniversalClient, prefix, session string) {
	t.Helper()
	k := KeysFor(prefix, sk(session))
	require.NoError(t, rdb.Del(ctx, k.Events, k.Meta).Err())
}

// fencedGroupings is groupings with a publisher anchored in a tokens of its own.
func fencedGroupings(t *testing.T, f func(t *testing.T, rdb redis.UniversalClient, prefix string, pg *tokens, p *Publisher)) {
	t.Helper()
	groupings(t, func(t *testing.T, rdb redis.UniversalClient, prefix string, p *Publisher) {
		pg := newTokens()
		f(t, rdb, prefix, pg, p.WithFencer(pg))
	})
}

func streamTypes(ctx context.Context, t *testing.T, rdb redis.UniversalClient, prefix, session string) []string {
	t.Helper()
	var out []string
	for _, e := range entriesOf(ctx, t, rdb, KeysFor(prefix, sk(session)).Events) {
		out = append(out, e.Values["type"].(string))
	}
	return out
}

// TestFenceThroughRedisLoss is issue 43's fault run at the publisher: a zombie attempt, a takeover
// that completes the turn, Redis losing the session's data, the zombie waking.
func TestFenceThroughRedisLoss(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("ZombieRefusedAfterLoss", func(t *testing.T) {
		t.Parallel()
		fencedGroupings(t, func(t *testing.T, rdb redis.UniversalClient, prefix string, pg *tokens, p *Publisher) {
			row := uuid.New()
			zombie := fenced{p: p, session: "s", row: row, token: pg.claim(row), attempt: 1}
			require.NoError(t, zombie.publish(ctx, wire.EventStarted).Err)
			require.NoError(t, zombie.publish(ctx, wire.EventDelta).Err)
			takeover := fenced{p: p, session: "s", row: row, token: pg.claim(row), attempt: 2}
			for _, ev := range []wire.EventType{wire.EventStarted, wire.EventDelta, wire.EventCompleted} {
				require.NoError(t, takeover.publish(ctx, ev).Err)
			}
			lose(ctx, t, rdb, prefix, "s")

			require.ErrorIs(t, zombie.publish(ctx, wire.EventDelta).Err, ErrStaleToken)
			require.ErrorIs(t, zombie.publish(ctx, wire.EventCompleted).Err, ErrStaleToken)
			require.Empty(t, streamTypes(ctx, t, rdb, prefix, "s"), "nothing of the zombie after the loss")

			// The session goes on: a new turn's events are appended in the new generation.
			next := uuid.New()
			live := fenced{p: p, session: "s", row: next, token: pg.claim(next), attempt: 1}
			require.NoError(t, live.publish(ctx, wire.EventStarted).Err)
			require.NoError(t, live.publish(ctx, wire.EventCompleted).Err)
			require.Equal(t, []string{"turn.started", "turn.completed"}, streamTypes(ctx, t, rdb, prefix, "s"))
			require.ErrorIs(t, zombie.publish(ctx, wire.EventDelta).Err, ErrStaleToken)
		})
	})

	t.Run("LiveAttemptCarriesOn", func(t *testing.T) {
		t.Parallel()
		fencedGroupings(t, func(t *testing.T, rdb redis.UniversalClient, prefix string, pg *tokens, p *Publisher) {
			row := uuid.New()
			a := fenced{p: p, session: "s", row: row, token: pg.claim(row), attempt: 1}
			require.NoError(t, a.publish(ctx, wire.EventStarted).Err)
			lose(ctx, t, rdb, prefix, "s")
			// The attempt still holds the turn's newest token: its events go on in the new
			// generation, and its terminal event is appended once.
			require.NoError(t, a.publish(ctx, wire.EventDelta).Err)
			first := a.publish(ctx, wire.EventCompleted)
			require.NoError(t, first.Err)
			require.True(t, first.Published.Appended)
			again := a.publish(ctx, wire.EventCompleted)
			require.NoError(t, again.Err)
			require.False(t, again.Published.Appended)
			require.Equal(t, first.Published.Cursor, again.Published.Cursor)
			require.Equal(t, []string{"turn.delta", "turn.completed"}, streamTypes(ctx, t, rdb, prefix, "s"))
		})
	})

	t.Run("TerminalFirstInGeneration", func(t *testing.T) {
		t.Parallel()
		fencedGroupings(t, func(t *testing.T, rdb redis.UniversalClient, prefix string, pg *tokens, p *Publisher) {
			// A turn ended without an attempt (cancelled while queued): its one event is its
			// terminal event, in a session Redis has never seen.
			row := uuid.New()
			a := fenced{p: p, session: "s", row: row, token: pg.claim(row), attempt: 0}
			r := a.publish(ctx, wire.EventCompleted)
			require.NoError(t, r.Err)
			require.True(t, r.Published.Appended)
			require.Equal(t, []string{"turn.completed"}, streamTypes(ctx, t, rdb, prefix, "s"))
		})
	})

	t.Run("PostgresReadOncePerGeneration", func(t *testing.T) {
		t.Parallel()
		fencedGroupings(t, func(t *testing.T, _ redis.UniversalClient, _ string, pg *tokens, p *Publisher) {
			row := uuid.New()
			a := fenced{p: p, session: "s", row: row, token: pg.claim(row), attempt: 1}
			require.NoError(t, a.publish(ctx, wire.EventStarted).Err)
			require.Equal(t, 1, pg.readCount(), "a new session's generation is opened from one read")
			for range 10 {
				require.NoError(t, a.publish(ctx, wire.EventDelta).Err)
			}
			// A turn claimed after the generation opened is above its floor: no read.
			next := uuid.New()
			b := fenced{p: p, session: "s", row: next, token: pg.claim(next), attempt: 1}
			require.NoError(t, b.publish(ctx, wire.EventStarted).Err)
			require.NoError(t, b.publish(ctx, wire.EventCompleted).Err)
			require.Equal(t, 1, pg.readCount(), "events of an open generation read nothing")
			// A turn claimed before another session opened its generation needs its token
			// checked there, once.
			late := uuid.New()
			c := fenced{p: p, session: "s2", row: late, token: pg.claim(late), attempt: 1}
			d := fenced{p: p, session: "s2", row: uuid.New(), attempt: 1}
			d.token = pg.claim(d.row)
			require.NoError(t, d.publish(ctx, wire.EventStarted).Err)
			require.Equal(t, 2, pg.readCount())
			require.NoError(t, c.publish(ctx, wire.EventStarted).Err)
			require.NoError(t, c.publish(ctx, wire.EventDelta).Err)
			require.Equal(t, 3, pg.readCount())
		})
	})

	t.Run("LossWhileEstablishing", func(t *testing.T) {
		t.Parallel()
		fencedGroupings(t, func(t *testing.T, rdb redis.UniversalClient, prefix string, pg *tokens, p *Publisher) {
			row := uuid.New()
			zombie := fenced{p: p, session: "s", row: row, token: pg.claim(row), attempt: 1}
			require.NoError(t, zombie.publish(ctx, wire.EventStarted).Err)
			lose(ctx, t, rdb, prefix, "s")
			// While the zombie's read of Postgres is under way, a takeover claims the turn,
			// publishes, and Redis loses the session again: the zombie's read predates the
			// generation the takeover spoke in, so the zombie must establish it anew, and then
			// Postgres names it stale.
			var takeover fenced
			pg.onRead = func() {
				takeover = fenced{p: NewPublisher(rdb, prefix, 10000, time.Hour), session: "s", row: row, token: pg.claim(row), attempt: 2}
				require.NoError(t, takeover.publish(ctx, wire.EventStarted).Err)
				lose(ctx, t, rdb, prefix, "s")
			}
			require.ErrorIs(t, zombie.publish(ctx, wire.EventDelta).Err, ErrStaleToken)
			require.Empty(t, streamTypes(ctx, t, rdb, prefix, "s"))
		})
	})

	t.Run("PostgresUnreachable", func(t *testing.T) {
		t.Parallel()
		fencedGroupings(t, func(t *testing.T, rdb redis.UniversalClient, prefix string, pg *tokens, p *Publisher) {
			row := uuid.New()
			a := fenced{p: p, session: "s", row: row, token: pg.claim(row), attempt: 1}
			pg.err = errors.New("connection refused")
			r := a.publish(ctx, wire.EventStarted)
			require.ErrorIs(t, r.Err, ErrFenceUnknown)
			require.Empty(t, streamTypes(ctx, t, rdb, prefix, "s"), "nothing is written without the fence")
			pg.mu.Lock()
			pg.err = nil
			pg.mu.Unlock()
			require.NoError(t, a.publish(ctx, wire.EventStarted).Err)
			require.Equal(t, []string{"turn.started"}, streamTypes(ctx, t, rdb, prefix, "s"))
		})
	})

	t.Run("UnfencedPublisherRefusedWhereFencesAreUnknown", func(t *testing.T) {
		t.Parallel()
		fencedGroupings(t, func(t *testing.T, rdb redis.UniversalClient, prefix string, pg *tokens, p *Publisher) {
			row := uuid.New()
			early := pg.claim(row)
			other := uuid.New()
			a := fenced{p: p, session: "s", row: other, token: pg.claim(other), attempt: 1}
			require.NoError(t, a.publish(ctx, wire.EventStarted).Err)
			plain := fenced{p: NewPublisher(rdb, prefix, 10000, time.Hour), session: "s", row: row, token: early, attempt: 1}
			require.ErrorIs(t, plain.publish(ctx, wire.EventStarted).Err, ErrFenceUnknown)
		})
	})
}

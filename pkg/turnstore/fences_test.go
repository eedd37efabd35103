package turnstore

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/testenv"
	"github.com/turnstile-run/turnstile/pkg/wire"
)

// TestFences checks the read a stream publisher establishes fences from: the floor bounds every
// token a claim handed out before the read, each turn's token is its row's, in the order asked,
// and a turn without a row reads 0.
func TestFences(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{Partitions: 1})
	s := New(env.Pool)
	ctx := context.Background()
	t0 := time.Now().Add(-time.Minute)
	a := queuedTurn(t, s, "acme/fences", t0, t0.Add(time.Hour), 0, nil)
	b := queuedTurn(t, s, "acme/other", t0, t0.Add(time.Hour), 1, nil)
	require.Equal(t, ClaimAcquired, claimOne(t, s, a, "acme/fences", t0))
	require.Equal(t, ClaimAcquired, claimOne(t, s, b, "acme/other", t0))
	var ta, tb int64
	require.NoError(t, env.Pool.QueryRow(ctx, `SELECT fencing_token FROM turns WHERE turn_id = $1`, a).Scan(&ta))
	require.NoError(t, env.Pool.QueryRow(ctx, `SELECT fencing_token FROM turns WHERE turn_id = $1`, b).Scan(&tb))

	floor, tokens, err := s.Fences(ctx, []uuid.UUID{b, uuid.New(), a})
	require.NoError(t, err)
	require.Equal(t, []wire.FenceToken{wire.FenceToken(tb), 0, wire.FenceToken(ta)}, tokens)
	require.GreaterOrEqual(t, floor, wire.FenceToken(max(ta, tb)))

	floor, tokens, err = s.Fences(ctx, nil)
	require.NoError(t, err)
	require.Empty(t, tokens)
	require.GreaterOrEqual(t, floor, max(ta, tb))
}

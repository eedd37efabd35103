package apikey_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/turnstile-run/turnstile/pkg/apikey"
	"github.com/turnstile-run/turnstile/pkg/testenv"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestRevokedWithin: a revoked key is listed, a live one is not, and Resolve names a live key's ID.
func TestRevokedWithin(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{Partitions: 1})
	ctx := context.Background()
	liveID, liveKey, err := apikey.Create(ctx, env.Pool, "acme")
	require.NoError(t, err)
	goneID, _, err := apikey.Create(ctx, env.Pool, "acme")
	require.NoError(t, err)
	require.NoError(t, apikey.Revoke(ctx, env.Pool, goneID))

	ids, err := apikey.RevokedWithin(ctx, env.Pool, time.Hour)
	require.NoError(t, err)
	require.Equal(t, []string{goneID}, ids)

	require.True(t, apikey.WellFormed(liveKey))
	require.False(t, apikey.WellFormed("ts_nope_nope"))
	require.False(t, apikey.WellFormed(liveKey+"x"))
	k, err := apikey.Resolve(ctx, env.Pool, liveKey)
	require.NoError(t, err)
	require.Equal(t, liveID, k.ID)
	require.Equal(t, "acme", k.Tenant)
}

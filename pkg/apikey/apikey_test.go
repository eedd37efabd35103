package apikey_test

import (
	"context"
	"strings"
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

// TestRegionKeys: a key created in a region carries the region in its ID and is well formed; the
// same key imported into another region's store resolves there to the same ID and tenant, a
// second import is a no-op, and a clashing one is refused.
func TestRegionKeys(t *testing.T) {
	t.Parallel()
	euw1 := testenv.New(t, testenv.Options{Partitions: 1})
	use1 := testenv.New(t, testenv.Options{Partitions: 1})
	ctx := context.Background()
	id, key, err := apikey.CreateIn(ctx, euw1.Pool, "euw1", "acme")
	require.NoError(t, err)
	require.Regexp(t, `^euw1-[0-9a-f]{12}$`, id)
	require.True(t, apikey.WellFormed(key))
	require.True(t, strings.HasPrefix(key, "ts_"+id+"_"))

	_, err = apikey.Resolve(ctx, use1.Pool, key)
	require.ErrorIs(t, err, apikey.ErrUnknown, "not yet in use1")
	var out strings.Builder
	require.NoError(t, apikey.Command(ctx, use1.Pool, "use1", []string{"import", "--tenant", "acme", "--key", key}, &out))
	require.Equal(t, "imported key_id="+id+" tenant=acme\n", out.String())
	k, err := apikey.Resolve(ctx, use1.Pool, key)
	require.NoError(t, err)
	require.Equal(t, apikey.Key{ID: id, Tenant: "acme", CreatedAt: k.CreatedAt}, k)

	again, err := apikey.Import(ctx, use1.Pool, "acme", key)
	require.NoError(t, err, "importing twice changes nothing")
	require.Equal(t, id, again)
	_, err = apikey.Import(ctx, use1.Pool, "globex", key)
	require.ErrorIs(t, err, apikey.ErrConflict, "the same key for another tenant")
	_, err = apikey.Import(ctx, use1.Pool, "acme", "ts_"+id+"_"+strings.Repeat("B", 43))
	require.ErrorIs(t, err, apikey.ErrConflict, "another key under the same ID")
	for _, bad := range []string{"", "ts_nope_nope", key + "x", "ts_EUW1-" + id[5:] + key[len("ts_")+len(id):]} {
		_, err = apikey.Import(ctx, use1.Pool, "acme", bad)
		require.ErrorIs(t, err, apikey.ErrMalformed, bad)
	}
	_, err = apikey.Import(ctx, use1.Pool, "a b", key)
	require.ErrorIs(t, err, apikey.ErrInvalidTenant)

	out.Reset()
	require.NoError(t, apikey.Command(ctx, use1.Pool, "use1", []string{"create", "--tenant", "globex"}, &out))
	require.Regexp(t, `^key_id=use1-[0-9a-f]{12} tenant=globex\nts_use1-`, out.String())
}

// TestAdminKey: `apikey create --admin` makes a key Resolve names as an admin's, and a plain key
// is not one.
func TestAdminKey(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{Partitions: 1})
	ctx := context.Background()
	var out strings.Builder
	require.NoError(t, apikey.Command(ctx, env.Pool, "", []string{"create", "--tenant", "ops", "--admin"}, &out))
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, 2)
	require.Regexp(t, `^key_id=[0-9a-f]{12} tenant=ops role=admin$`, lines[0])
	k, err := apikey.Resolve(ctx, env.Pool, lines[1])
	require.NoError(t, err)
	require.True(t, k.Admin)
	require.Equal(t, "ops", k.Tenant)

	_, plain, err := apikey.Create(ctx, env.Pool, "acme")
	require.NoError(t, err)
	k, err = apikey.Resolve(ctx, env.Pool, plain)
	require.NoError(t, err)
	require.False(t, k.Admin)

	out.Reset()
	require.NoError(t, apikey.Command(ctx, env.Pool, "", []string{"list"}, &out))
	require.Contains(t, out.String(), "\tactive\tadmin\n")
}

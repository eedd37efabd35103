package store_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/turnstile-run/turnstile/pkg/testenv"
	"github.com/turnstile-run/turnstile/services/langgraph/internal/store"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreTopFunction("github.com/jackc/pgx/v5/pgxpool.(*Pool).backgroundHealthCheck"),
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
		goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).reaper"),
	)
}

func TestStore(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{Partitions: 1})
	s := store.New(env.Pool)
	ctx := context.Background()
	ns := []string{"u", "memories"}

	t.Run("PutGetReplace", func(t *testing.T) {
		require.NoError(t, s.Put(ctx, "acme", ns, "a", json.RawMessage(`{"kind":"fact"}`), nil, 3))
		it, ok, err := s.Get(ctx, "acme", ns, "a", true)
		require.NoError(t, err)
		require.True(t, ok)
		require.JSONEq(t, `{"kind":"fact"}`, string(it.Value))
		ttl := 5.0
		require.NoError(t, s.Put(ctx, "acme", ns, "a", json.RawMessage(`{"kind":"event"}`), &ttl, 3))
		it, _, err = s.Get(ctx, "acme", ns, "a", true)
		require.NoError(t, err)
		require.JSONEq(t, `{"kind":"event"}`, string(it.Value))
	})
	t.Run("OtherTenantCannotSeeIt", func(t *testing.T) {
		_, ok, err := s.Get(ctx, "evil", ns, "a", false)
		require.NoError(t, err)
		require.False(t, ok)
	})
	t.Run("Expired", func(t *testing.T) {
		ttl := 1e-6
		require.NoError(t, s.Put(ctx, "acme", ns, "gone", json.RawMessage(`{}`), &ttl, 3))
		_, err := env.Pool.Exec(ctx, `UPDATE langgraph_store SET expires_at = now() - interval '1 s' WHERE key = 'gone'`)
		require.NoError(t, err)
		_, ok, err := s.Get(ctx, "acme", ns, "gone", true)
		require.NoError(t, err)
		require.False(t, ok)
	})
	t.Run("Limit", func(t *testing.T) {
		require.NoError(t, s.Put(ctx, "acme", []string{"u"}, "b", json.RawMessage(`{"kind":"fact"}`), nil, 3))
		require.NoError(t, s.Put(ctx, "acme", []string{"u", "x", "y"}, "c", json.RawMessage(`{"kind":"fact"}`), nil, 3))
		require.ErrorIs(t, s.Put(ctx, "acme", ns, "d", json.RawMessage(`{}`), nil, 3), store.ErrLimit)
		require.NoError(t, s.Put(ctx, "acme", ns, "a", json.RawMessage(`{"kind":"fact"}`), nil, 3), "replacing is not new")
	})
	t.Run("SearchAndNamespaces", func(t *testing.T) {
		items, err := s.Search(ctx, "acme", []string{"u"}, json.RawMessage(`{"kind":"fact"}`), 10, 0, true)
		require.NoError(t, err)
		keys := []string{}
		for _, it := range items {
			keys = append(keys, it.Key)
		}
		require.Equal(t, []string{"b", "a", "c"}, keys)
		nss, err := s.ListNamespaces(ctx, "acme", []string{"u"}, nil, 2, 10, 0)
		require.NoError(t, err)
		require.Equal(t, [][]string{{"u"}, {"u", "memories"}, {"u", "x"}}, nss)
		nss, err = s.ListNamespaces(ctx, "acme", nil, []string{"*", "y"}, 0, 10, 0)
		require.NoError(t, err)
		require.Equal(t, [][]string{{"u", "x", "y"}}, nss)
	})
	t.Run("Delete", func(t *testing.T) {
		require.NoError(t, s.Delete(ctx, "acme", ns, "a"))
		_, ok, err := s.Get(ctx, "acme", ns, "a", false)
		require.NoError(t, err)
		require.False(t, ok)
	})
}

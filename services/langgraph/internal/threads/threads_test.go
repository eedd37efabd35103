package threads_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/turnstile-run/turnstile/pkg/testenv"
	"github.com/turnstile-run/turnstile/services/langgraph/internal/threads"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestStore(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{})
	s := threads.New(env.Pool)
	ctx := context.Background()

	t.Run("CreateThenGet", func(t *testing.T) {
		th, created, err := s.Create(ctx, "acme", "th-1", json.RawMessage(`{"user":"ann"}`), 100)
		require.NoError(t, err)
		require.True(t, created)
		require.JSONEq(t, `{"user":"ann"}`, string(th.Metadata))
		got, err := s.Get(ctx, "acme", "th-1")
		require.NoError(t, err)
		require.Equal(t, th.CreatedAt, got.CreatedAt)
	})
	t.Run("CreateExistingKeepsIt", func(t *testing.T) {
		th, created, err := s.Create(ctx, "acme", "th-1", json.RawMessage(`{"user":"bob"}`), 100)
		require.NoError(t, err)
		require.False(t, created)
		require.JSONEq(t, `{"user":"ann"}`, string(th.Metadata))
	})
	t.Run("NullMetadataIsEmptyObject", func(t *testing.T) {
		th, _, err := s.Create(ctx, "acme", "th-2", nil, 100)
		require.NoError(t, err)
		require.JSONEq(t, `{}`, string(th.Metadata))
	})
	t.Run("OtherTenantCannotSeeIt", func(t *testing.T) {
		_, err := s.Get(ctx, "evil", "th-1")
		require.ErrorIs(t, err, threads.ErrNotFound)
		// The same ID is the other tenant's own thread.
		_, created, err := s.Create(ctx, "evil", "th-1", nil, 100)
		require.NoError(t, err)
		require.True(t, created)
	})
	t.Run("RunCreatedStampsTheAssistant", func(t *testing.T) {
		_, _, err := s.Create(ctx, "acme", "th-3", json.RawMessage(`{"user":"ann","graph_id":"old"}`), 100)
		require.NoError(t, err)
		before, err := s.Get(ctx, "acme", "th-3")
		require.NoError(t, err)
		require.NoError(t, s.RunCreated(ctx, "acme", "th-3", "support", "helpdesk"))
		after, err := s.Get(ctx, "acme", "th-3")
		require.NoError(t, err)
		require.False(t, after.UpdatedAt.Before(before.UpdatedAt))
		require.JSONEq(t, `{"user":"ann","graph_id":"support","assistant_id":"helpdesk"}`, string(after.Metadata))
		found, err := s.Search(ctx, "acme", threads.Query{Metadata: json.RawMessage(`{"graph_id":"support"}`), Limit: 10})
		require.NoError(t, err)
		require.Len(t, found, 1)
		require.Equal(t, "th-3", found[0].ID)
	})
	t.Run("StoreDownIsAnError", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		_, err := s.Get(cctx, "acme", "th-1")
		require.Error(t, err)
		require.NotErrorIs(t, err, threads.ErrNotFound)
	})
}

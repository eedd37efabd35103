package app

import (
	"bytes"
	"context"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/config"
)

func TestPostgresOrLazy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("DownAtStart", func(t *testing.T) {
		t.Parallel()
		var logged bytes.Buffer
		// Nothing listens on port 1: the connection is refused at once.
		d := NewDeps(config.Config{DatabaseURL: "postgres://127.0.0.1:1/test"}, slog.New(slog.NewTextHandler(&logged, nil)))
		defer d.Close()
		pool, err := d.PostgresOrLazy(ctx, d.Log, "thread routes answer 503 until it answers")
		require.NoError(t, err)
		require.NotNil(t, pool, "a pool that connects once Postgres answers")
		require.Contains(t, logged.String(), "postgres unavailable at start; thread routes answer 503 until it answers")
		again, err := d.PostgresOrLazy(ctx, d.Log, "revoked API keys reach open streams once it answers")
		require.NoError(t, err)
		require.Same(t, pool, again, "the roles of one process share one lazy pool")
	})

	t.Run("NoPoolAtAll", func(t *testing.T) {
		t.Parallel()
		d := NewDeps(config.Config{DatabaseURL: "postgres://%zz"}, slog.New(slog.DiscardHandler))
		defer d.Close()
		pool, err := d.PostgresOrLazy(ctx, d.Log, "status reads answer 503")
		require.ErrorContains(t, err, "TURNSTILE_DATABASE_URL")
		require.Nil(t, pool)
	})
}

package postgres_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/testenv"
)

// TestNotificationsByStatementsMigration: migration 00170 leaves turns_outbox the one trigger on
// turns that writes (beside 00010's turns_cancel_requested, which only sends a NOTIFY), drops turn_task_id, and sets turns.task_id of the rows written before from the task their
// metadata names (bare or region-prefixed; a malformed name is none); its Down gives 00150's
// triggers back.
func TestNotificationsByStatementsMigration(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := testenv.New(t, testenv.Options{Partitions: 1})
	p := migrationProvider(t, env)
	triggers := func() []string {
		t.Helper()
		rows, err := env.Pool.Query(ctx, `SELECT tgname::text FROM pg_trigger
			WHERE tgrelid = 'turns'::regclass AND NOT tgisinternal ORDER BY tgname`)
		require.NoError(t, err)
		out, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		return out
	}
	// Later migrations add triggers of their own (00261's turns_count_usage); 00170's state is read
	// at 00170.
	_, err := p.DownTo(ctx, 170)
	require.NoError(t, err)
	require.Equal(t, []string{"turns_cancel_requested", "turns_outbox"}, triggers())

	_, err = p.DownTo(ctx, 150)
	require.NoError(t, err)
	require.Equal(t, []string{
		"turns_cancel_requested", "turns_drop_notifications", "turns_outbox", "turns_strip_webhook",
		"turns_take_webhook",
	}, triggers())
	const task = "00000000-0000-4000-8000-0000000000c1"
	_, err = env.Pool.Exec(ctx, `INSERT INTO turns (turn_id, session_id, tenant, status, metadata, accepted_at) VALUES
		($1, 'acme/s', 'acme', 'succeeded', '{"a2a":{"message_id":"m1"}}', now()),
		('00000000-0000-4000-8000-0000000000c2', 'acme/s', 'acme', 'succeeded', jsonb_build_object('a2a', jsonb_build_object('task_id', $1::text)), now()),
		('00000000-0000-4000-8000-0000000000c3', 'acme/s', 'acme', 'succeeded', jsonb_build_object('a2a', jsonb_build_object('task_id', 'euw1-' || $1)), now()),
		('00000000-0000-4000-8000-0000000000c4', 'acme/s', 'acme', 'succeeded', '{"a2a":{"task_id":"not a uuid"}}', now()),
		('00000000-0000-4000-8000-0000000000c5', 'acme/s', 'acme', 'succeeded', NULL, now())`, task)
	require.NoError(t, err)

	_, err = p.UpTo(ctx, 170)
	require.NoError(t, err)
	require.Equal(t, []string{"turns_cancel_requested", "turns_outbox"}, triggers())
	rows, err := env.Pool.Query(ctx, `SELECT coalesce(task_id::text, '') FROM turns WHERE session_id = 'acme/s' ORDER BY turn_id`)
	require.NoError(t, err)
	tasks, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, []string{"", task, task, "", ""}, tasks)
	var fn bool
	require.NoError(t, env.Pool.QueryRow(ctx, `SELECT to_regproc('turn_task_id') IS NOT NULL`).Scan(&fn))
	require.False(t, fn, "the task is read in Go (turnstore.TaskOf), not by a copy of the ID format")

	_, err = p.DownTo(ctx, 150)
	require.NoError(t, err)
	require.Len(t, triggers(), 5)
	_, err = p.Up(ctx)
	require.NoError(t, err)
}

package postgres_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/testenv"
)

// TestSessionKeysMigration renames rows of the old shape to session keys (migration 90): each
// session and its history go to its tenant's key, and each turn to its own tenant's session, so an
// upgraded stack keeps its history where the workers now read it. Down gives the old names back.
func TestSessionKeysMigration(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := testenv.New(t, testenv.Options{Partitions: 1})
	p := migrationProvider(t, env)

	_, err := p.DownTo(ctx, 80)
	require.NoError(t, err)
	_, err = env.Pool.Exec(ctx, `
		INSERT INTO sessions (session_id, tenant, last_seq) VALUES ('s1', 'acme', 2);
		INSERT INTO session_history (session_id, seq, turn_id, question, answer) VALUES
			('s1', 2, '00000000-0000-4000-8000-000000000001', 'q', 'a');
		INSERT INTO turns (turn_id, session_id, tenant, status, accepted_at) VALUES
			('00000000-0000-4000-8000-000000000001', 's1', 'acme', 'succeeded', now()),
			('00000000-0000-4000-8000-000000000002', 's1', 'globex', 'queued', now())`)
	require.NoError(t, err)

	names := func(q string) []string {
		t.Helper()
		rows, err := env.Pool.Query(ctx, q)
		require.NoError(t, err)
		out, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		return out
	}
	const (
		sessionsQ = `SELECT session_id FROM sessions ORDER BY 1`
		historyQ  = `SELECT session_id FROM session_history ORDER BY 1`
		turnsQ    = `SELECT session_id FROM turns ORDER BY turn_id`
	)
	_, err = p.UpTo(ctx, 90)
	require.NoError(t, err)
	require.Equal(t, []string{"acme/s1"}, names(sessionsQ))
	require.Equal(t, []string{"acme/s1"}, names(historyQ))
	require.Equal(t, []string{"acme/s1", "globex/s1"}, names(turnsQ), "a turn is its own tenant's")

	_, err = p.DownTo(ctx, 80)
	require.NoError(t, err)
	require.Equal(t, []string{"s1"}, names(sessionsQ))
	require.Equal(t, []string{"s1"}, names(historyQ))
	require.Equal(t, []string{"s1", "s1"}, names(turnsQ))
	_, err = p.Up(ctx)
	require.NoError(t, err)
}

package postgres_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/migrations"
	"github.com/turnstile-run/turnstile/pkg/testenv"
)

// message is a row of the session history as messages: the session_messages table before
// migration 80, the view of that name after it.
type message struct {
	Session string
	Seq     int64
	Turn    string
	Role    string
	Content string
}

func messages(t *testing.T, env *testenv.Env) []message {
	t.Helper()
	rows, err := env.Pool.Query(context.Background(),
		`SELECT session_id, seq, turn_id::text, role, content FROM session_messages ORDER BY session_id, seq`)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (message, error) {
		var m message
		return m, r.Scan(&m.Session, &m.Seq, &m.Turn, &m.Role, &m.Content)
	})
	require.NoError(t, err)
	return out
}

// TestSessionHistoryRowsMigration moves a history written as two rows a turn to one row a turn and
// back, and requires the same messages on every side of it: migration 80 must keep the
// conversation, take a previous version's appends to the old table while a rolling upgrade runs,
// and its Down must give back the table it replaced.
func TestSessionHistoryRowsMigration(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := testenv.New(t, testenv.Options{Partitions: 1})
	p := migrationProvider(t, env)

	_, err := p.DownTo(ctx, 70)
	require.NoError(t, err)
	_, err = env.Pool.Exec(ctx, `
		INSERT INTO session_messages (session_id, seq, turn_id, role, content) VALUES
			('a', 1, '00000000-0000-4000-8000-000000000001', 'user', 'q1'),
			('a', 2, '00000000-0000-4000-8000-000000000001', 'assistant', 'a1'),
			('a', 3, '00000000-0000-4000-8000-000000000002', 'user', ''),
			('a', 4, '00000000-0000-4000-8000-000000000002', 'assistant', 'a2'),
			('b', 1, '00000000-0000-4000-8000-000000000003', 'user', 'q3'),
			('b', 2, '00000000-0000-4000-8000-000000000003', 'assistant', 'line one
line two')`)
	require.NoError(t, err)
	before := messages(t, env)
	require.Len(t, before, 6)

	_, err = p.UpTo(ctx, 80)
	require.NoError(t, err)
	var rows int
	require.NoError(t, env.Pool.QueryRow(ctx, `SELECT count(*) FROM session_history`).Scan(&rows))
	require.Equal(t, 3, rows, "one row a turn")
	require.Equal(t, before, messages(t, env), "the view shows the messages the table held")
	var question, answer string
	require.NoError(t, env.Pool.QueryRow(ctx, `SELECT question, answer FROM session_history WHERE seq = 2 AND session_id = 'b'`).
		Scan(&question, &answer))
	require.Equal(t, []string{"q3", "line one\nline two"}, []string{question, answer})

	_, err = env.Pool.Exec(ctx, `INSERT INTO session_history (session_id, seq, turn_id, question, answer)
		VALUES ('b', 4, '00000000-0000-4000-8000-000000000004', 'q4', 'a4')`)
	require.NoError(t, err)
	// A worker of the previous version, during a rolling upgrade, appends a turn's two messages
	// to session_messages in its completion statement's CTE: they land in one row.
	_, err = env.Pool.Exec(ctx, `
		WITH numbered AS (SELECT 'b' AS session_id, 6::bigint AS top, '00000000-0000-4000-8000-000000000005'::uuid AS turn_id,
			'q5' AS question, 'a5' AS answer
		), msgs AS (
			INSERT INTO session_messages (session_id, seq, turn_id, role, content)
			SELECT session_id, top - 1, turn_id, 'user', question FROM numbered
			UNION ALL
			SELECT session_id, top, turn_id, 'assistant', answer FROM numbered
		)
		SELECT top FROM numbered`)
	require.NoError(t, err)
	require.NoError(t, env.Pool.QueryRow(ctx, `SELECT question, answer FROM session_history WHERE seq = 6 AND session_id = 'b'`).
		Scan(&question, &answer))
	require.Equal(t, []string{"q5", "a5"}, []string{question, answer})
	after := messages(t, env)
	require.Len(t, after, 10)

	_, err = p.DownTo(ctx, 70)
	require.NoError(t, err)
	var kind string
	require.NoError(t, env.Pool.QueryRow(ctx, `SELECT relkind::text FROM pg_class WHERE relname = 'session_messages'
		AND relnamespace = current_schema()::regnamespace`).Scan(&kind))
	require.Equal(t, "r", kind, "a table again")
	require.Equal(t, after, messages(t, env), "Down gives every message back as its own row")

	_, err = p.Up(ctx)
	require.NoError(t, err)
	require.Equal(t, after, messages(t, env))
}

// migrationProvider is a goose provider of the embedded migrations over env's schema, for tests
// that step the schema down and up; its connection closes with the test.
func migrationProvider(t *testing.T, env *testenv.Env) *goose.Provider {
	t.Helper()
	db := stdlib.OpenDBFromPool(env.Pool)
	t.Cleanup(func() { require.NoError(t, db.Close()) })
	p, err := goose.NewProvider(goose.DialectPostgres, db, migrations.FS)
	require.NoError(t, err)
	return p
}

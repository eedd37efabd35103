package postgres_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/testenv"
)

// TestPushConfigsMigration drives migration 00150's triggers with plain SQL, as every statement
// that writes turns does: configs sent with a turn are stored with its task and taken out of its
// metadata, each status change of any of the task's turns writes one 'a2a' row per config under
// the task's first turn (only for the task's own tenant), a malformed task link changes nothing,
// deleting the first turn deletes the configs; and its Down leaves 00140's native outbox working.
// It runs at version 150: migration 00170 replaced those triggers by pkg/turnstore's statements.
func TestPushConfigsMigration(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := testenv.New(t, testenv.Options{Partitions: 1})
	p := migrationProvider(t, env)
	_, err := p.DownTo(ctx, 150)
	require.NoError(t, err)
	const task, follow, foreign, odd = "00000000-0000-4000-8000-0000000000a1", "00000000-0000-4000-8000-0000000000a2",
		"00000000-0000-4000-8000-0000000000a3", "00000000-0000-4000-8000-0000000000a4"
	insert := func(id, tenant, status, metadata string) {
		t.Helper()
		_, err := env.Pool.Exec(ctx, `INSERT INTO turns (turn_id, session_id, tenant, status, attempt, metadata, input, accepted_at)
			VALUES ($1, $2 || '/s1', $2, $3, 1, $4::jsonb, '{"text":"hi"}', now())`, id, tenant, status, metadata)
		require.NoError(t, err)
	}
	count := func(sql string, args ...any) int {
		t.Helper()
		var n int
		require.NoError(t, env.Pool.QueryRow(ctx, sql, args...).Scan(&n))
		return n
	}

	insert(task, "acme", "running", `{"a2a":{"message_id":"m1"},"turnstile.push_configs":[
		{"id":"a","url":"https://a.example/h","token":"t","auth_schemes":["Bearer"],"auth_credentials":"c"},
		{"id":"b","url":"https://b.example/h"}]}`)
	require.Equal(t, 2, count(`SELECT count(*) FROM task_push_configs WHERE task_id = $1 AND tenant = 'acme'`, task))
	require.Zero(t, count(`SELECT count(*) FROM turns WHERE metadata ? 'turnstile.push_configs'`), "credentials leave the metadata")
	var auth string
	require.NoError(t, env.Pool.QueryRow(ctx, `SELECT auth_header FROM turn_notifications WHERE config_id = 'a'`).Scan(&auth))
	require.Equal(t, "Bearer c", auth)
	require.Equal(t, 2, count(`SELECT count(*) FROM turn_notifications WHERE turn_id = $1 AND format = 'a2a' AND status = 'running'`, task))

	_, err = env.Pool.Exec(ctx, `UPDATE turns SET status = 'succeeded', finished_at = now(), output = '{"text":"which day?","state":"input-required"}' WHERE turn_id = $1`, task)
	require.NoError(t, err)
	insert(follow, "acme", "running", `{"a2a":{"task_id":"`+task+`","message_id":"m2"}}`)
	insert(foreign, "globex", "running", `{"a2a":{"task_id":"`+task+`"}}`)
	insert(odd, "acme", "running", `{"a2a":{"task_id":"not a uuid"}}`)
	require.Equal(t, 6, count(`SELECT count(*) FROM turn_notifications WHERE turn_id = $1`, task),
		"per config: the first turn's two changes and the follow-up's claim; nothing for another tenant")
	var payload []byte
	require.NoError(t, env.Pool.QueryRow(ctx, `SELECT payload FROM turn_notifications WHERE turn_id = $1 AND config_id = 'b' ORDER BY id DESC LIMIT 1`, task).Scan(&payload))
	var snap struct {
		Turns []map[string]any `json:"turns"`
	}
	require.NoError(t, json.Unmarshal(payload, &snap))
	require.Len(t, snap.Turns, 2, "the task's turns of its session, oldest first")
	require.Equal(t, task, snap.Turns[0]["turn_id"])
	require.Equal(t, "s1", snap.Turns[1]["session_id"], "the session as the API shows it")
	require.NotContains(t, string(payload), "auth_credentials")

	_, err = env.Pool.Exec(ctx, `DELETE FROM turns WHERE turn_id = $1`, task)
	require.NoError(t, err)
	require.Zero(t, count(`SELECT count(*) FROM task_push_configs WHERE task_id = $1`, task), "configs go with the task")
	require.Zero(t, count(`SELECT count(*) FROM turn_notifications WHERE turn_id = $1`, task))

	_, err = p.DownTo(ctx, 140)
	require.NoError(t, err)
	insert("00000000-0000-4000-8000-0000000000b1", "acme", "running", `{"turnstile.webhook":{"url":"https://n.example/h"}}`)
	require.Equal(t, 1, count(`SELECT count(*) FROM turn_notifications WHERE turn_id = '00000000-0000-4000-8000-0000000000b1'`),
		"00140's outbox works after the Down")
	_, err = p.Up(ctx)
	require.NoError(t, err)
}

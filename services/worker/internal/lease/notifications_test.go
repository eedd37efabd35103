package lease

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/turnstore"
	"github.com/turnstile-run/turnstile/pkg/wire"
)

// TestClaimStoresNotifications: the claim stores a record's webhook in the turn's columns and its
// push configs with its task, whether the record carries them as the envelope's fields or, written
// before those existed, under the legacy metadata keys; the stored metadata holds no turnstile.*
// key; a follow-up names its task (region-prefixed here) and its claim owes the task's configs a
// notification; and a take-over by a record without a webhook (re-driven from the row) keeps it.
func TestClaimStoresNotifications(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := setup(t)
	s := NewStore(env.Pool, "a", time.Minute, 3)
	count := func(sql string, args ...any) int {
		t.Helper()
		var n int
		require.NoError(t, env.Pool.QueryRow(ctx, sql, args...).Scan(&n))
		return n
	}

	first := uuid.Must(uuid.NewV7())
	legacy := `{"v":1,"turn_id":"` + first.String() + `","session_id":"notify","tenant":"acme","input":{"text":"hi"},` +
		`"deadline":"` + time.Now().Add(time.Hour).UTC().Format(time.RFC3339Nano) + `","accepted_at":"` + time.Now().UTC().Format(time.RFC3339Nano) + `",` +
		`"metadata":{"a2a":{"message_id":"m1"},"turnstile.webhook":{"url":"https://h.example/w","token":"tok"},` +
		`"turnstile.push_configs":[{"id":"a","url":"https://a.example/h","auth_schemes":["Bearer"],"auth_credentials":"c"}]}}`
	e, raw, err := wire.DecodeEnvelopeRaw([]byte(legacy))
	require.NoError(t, err)
	c, err := s.Claim(ctx, ClaimRequest{Env: e, RawMetadata: raw})
	require.NoError(t, err)
	require.Equal(t, turnstore.ClaimAcquired, c.Outcome)

	var url, token string
	require.NoError(t, env.Pool.QueryRow(ctx, `SELECT webhook_url, webhook_token FROM turns WHERE turn_id = $1`, first).Scan(&url, &token))
	require.Equal(t, []string{"https://h.example/w", "tok"}, []string{url, token})
	require.Zero(t, count(`SELECT count(*) FROM turns WHERE metadata::text LIKE '%turnstile.%'`), "no reserved key is stored")
	var header string
	require.NoError(t, env.Pool.QueryRow(ctx, `SELECT auth_header FROM turn_notifications
		WHERE turn_id = $1 AND format = 'a2a' AND config_id = 'a' AND status = 'running'`, first).Scan(&header))
	require.Equal(t, "Bearer c", header)
	require.Equal(t, 1, count(`SELECT count(*) FROM turn_notifications WHERE turn_id = $1 AND format = 'native' AND status = 'running'`, first))

	_, err = env.Pool.Exec(ctx, `UPDATE turns SET status = 'succeeded', finished_at = now() WHERE turn_id = $1`, first)
	require.NoError(t, err)
	follow := request("notify")
	follow.Env.Tenant = "acme"
	follow.Env.Metadata = map[string]any{"a2a": map[string]any{"task_id": "euw1-" + first.String(), "message_id": "m2"}}
	c, err = s.Claim(ctx, follow)
	require.NoError(t, err)
	require.Equal(t, turnstore.ClaimAcquired, c.Outcome)
	var task uuid.UUID
	require.NoError(t, env.Pool.QueryRow(ctx, `SELECT task_id FROM turns WHERE turn_id = $1`, follow.Env.TurnID).Scan(&task))
	require.Equal(t, first, task)
	require.Equal(t, 3, count(`SELECT count(*) FROM turn_notifications WHERE turn_id = $1 AND format = 'a2a'`, first),
		"the first turn's claim and end, and the follow-up's claim")

	// A queued row with a webhook, taken over by a record that names none.
	queued := request("notify-queued")
	queued.Env.Webhook = &wire.Webhook{URL: "https://q.example/w"}
	_, err = env.Pool.Exec(ctx, `INSERT INTO turns (turn_id, session_id, tenant, status, accepted_at, webhook_url)
		VALUES ($1, $2, 'default', 'queued', $3, $4)`, queued.Env.TurnID, queued.Env.SessionKey().String(), queued.Env.AcceptedAt, queued.Env.Webhook.URL)
	require.NoError(t, err)
	queued.Env.Webhook = nil
	c, err = s.Claim(ctx, queued)
	require.NoError(t, err)
	require.Equal(t, turnstore.ClaimAcquired, c.Outcome)
	require.Equal(t, 1, count(`SELECT count(*) FROM turn_notifications WHERE turn_id = $1 AND url = 'https://q.example/w' AND status = 'running'`,
		queued.Env.TurnID), "the row's webhook is kept and told of the claim")
}

package postgres_test

import (
	"context"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/testenv"
	"github.com/turnstile-run/turnstile/pkg/wire"
)

// TestSessionIDFunction: migration 00190's turnstile_session_id splits a session key as
// wire.SessionKey does, for keys ParseSessionKey accepts (random ones of the two rules' alphabets)
// and for stored values outside the rules as SessionKey.Scan reads them. The outbox trigger calls it
// (its payload names the client's session ID), nothing live splits a key by hand, and the Down
// gives 00170's outbox back.
func TestSessionIDFunction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := testenv.New(t, testenv.Options{Partitions: 1})

	keys := []string{
		"acme/s1", "default/a:b.c-d_e", "t.x-y_z/x", "a/b",
		strings.Repeat("t", wire.TenantMaxLen) + "/" + strings.Repeat("s", wire.SessionIDMaxLen),
	}
	const tenantChars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-"
	const idChars = tenantChars + ":"
	rnd := rand.New(rand.NewPCG(36, 180))
	word := func(chars string, maxLen int) string {
		b := make([]byte, 1+rnd.IntN(maxLen))
		for i := range b {
			b[i] = chars[rnd.IntN(len(chars))]
		}
		return string(b)
	}
	for range 500 {
		keys = append(keys, word(tenantChars, wire.TenantMaxLen)+"/"+word(idChars, wire.SessionIDMaxLen))
	}
	want := make([]string, len(keys))
	for i, s := range keys {
		k, err := wire.ParseSessionKey(s)
		require.NoError(t, err, s)
		want[i] = k.SessionID()
	}
	split := func(in []string) []string {
		t.Helper()
		rows, err := env.Pool.Query(ctx, `SELECT turnstile_session_id(k) FROM unnest($1::text[]) WITH ORDINALITY AS u(k, n) ORDER BY n`, in)
		require.NoError(t, err)
		out, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		return out
	}
	require.Equal(t, want, split(keys), "the SQL function splits as wire.SessionKey.SessionID")
	// Stored values outside the rules split as SessionKey.Scan reads them: at the first separator,
	// and a value without one is its own session ID.
	odd := []string{"bare", "", "/s", "acme/", "acme/a b/c", "a/b/c", "ü/{x}"}
	wantOdd := make([]string, len(odd))
	for i, s := range odd {
		var k wire.SessionKey
		require.NoError(t, k.Scan(s))
		wantOdd[i] = k.SessionID()
	}
	require.Equal(t, []string{"bare", "", "s", "", "a b/c", "b/c", "{x}"}, wantOdd)
	require.Equal(t, wantOdd, split(odd))

	// The outbox names the client's session ID through the function, and nothing live spells the
	// split out.
	const turn = "00000000-0000-4000-8000-000000000181"
	_, err := env.Pool.Exec(ctx, `INSERT INTO turns (turn_id, session_id, tenant, status, accepted_at, webhook_url)
		VALUES ($1, $2, 'acme', 'queued', now(), 'http://hook.invalid/')`, turn, wire.NewSessionKey("acme", "s:1").String())
	require.NoError(t, err)
	_, err = env.Pool.Exec(ctx, `UPDATE turns SET status = 'running', attempt = 1 WHERE turn_id = $1`, turn)
	require.NoError(t, err)
	var shown string
	require.NoError(t, env.Pool.QueryRow(ctx, `SELECT payload->>'session_id' FROM turn_notifications WHERE turn_id = $1`, turn).Scan(&shown))
	require.Equal(t, "s:1", shown)
	var handSplits int
	require.NoError(t, env.Pool.QueryRow(ctx, `SELECT count(*) FROM pg_proc
		WHERE pronamespace = current_schema()::regnamespace AND prosrc LIKE '%position(''/''%'`).Scan(&handSplits))
	require.Zero(t, handSplits, "no live function splits a key by hand")

	p := migrationProvider(t, env)
	_, err = p.DownTo(ctx, 180)
	require.NoError(t, err)
	var fn bool
	require.NoError(t, env.Pool.QueryRow(ctx, `SELECT to_regproc('turnstile_session_id') IS NOT NULL`).Scan(&fn))
	require.False(t, fn, "Down drops the function")
	_, err = env.Pool.Exec(ctx, `UPDATE turns SET status = 'succeeded' WHERE turn_id = $1`, turn)
	require.NoError(t, err, "00170's outbox works without it")
	_, err = p.Up(ctx)
	require.NoError(t, err)
	require.Equal(t, want, split(keys))
}

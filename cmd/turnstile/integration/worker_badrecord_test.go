package integration

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/apikey"
	"github.com/turnstile-run/turnstile/pkg/testenv"
	"github.com/turnstile-run/turnstile/pkg/wire"
)

// TestBadRecordNeverStalls replays the run of a turn whose text or metadata holds a NUL. Intake
// refuses it with 400. Such a record produced past intake, recorded queued as intake records an
// accepted turn, fails its claim for its data: each claim counts as a failed attempt, so the turn
// ends failed after TURNSTILE_MAX_ATTEMPTS, announced and dead-lettered with its record intact, and
// no longer queued; turns of other sessions and tenants on the same partition run meanwhile.
func TestBadRecordNeverStalls(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{Partitions: 1})
	stack := startStack(t, env, "intake,worker,gateway")
	base := "http://" + stack.Addr()
	ctx := context.Background()

	for _, body := range []string{
		`{"input":{"text":"a\u0000b"}}`,
		`{"input":{"text":"hi"},"metadata":{"note":{"deep":["\u0000"]}}}`,
	} {
		resp, err := http.Post(base+"/v1/sessions/bad-intake/turns", "application/json", strings.NewReader(body))
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, "intake refuses what Postgres cannot store: %s", body)
	}

	// An unpaired surrogate is read as U+FFFD, and U+FFFD is what is stored and run.
	surrogate := postTurnWith(t, base, "bad-surrogate", map[string]any{"input": json.RawMessage(`{"text":"a\ud800"}`)})
	testenv.WaitFor(t, 20*time.Second, "the surrogate turn to succeed", func() bool { return readTurn(t, env, surrogate).Status == "succeeded" })
	var stored string
	require.NoError(t, env.Pool.QueryRow(ctx, `SELECT input->>'text' FROM turns WHERE turn_id = $1`, surrogate).Scan(&stored))
	require.Equal(t, "a\uFFFD", stored)

	produce := func(session, tenant, text string, md map[string]any) string {
		now := time.Now()
		e := wire.Envelope{
			TurnID: uuid.Must(uuid.NewV7()), SessionID: session, Tenant: tenant,
			Input: wire.Input{Text: text}, Metadata: md, Deadline: now.Add(time.Hour), AcceptedAt: now,
		}
		_, err := env.Pool.Exec(ctx, `INSERT INTO turns (turn_id, session_id, tenant, status, accepted_at, deadline)
			VALUES ($1, $2, $3, 'queued', $4, $5)`, e.TurnID, wire.NewSessionKey(tenant, session).String(), tenant, e.AcceptedAt, e.Deadline)
		require.NoError(t, err)
		b, err := e.Encode()
		require.NoError(t, err)
		produceRaw(t, env, wire.NewSessionKey(tenant, session).String(), b)
		return e.TurnID.String()
	}
	badText := produce("bad-text", "tenant-a", "a\x00b", nil)
	good := produce("bad-neighbour", "tenant-b", "fine", nil)
	badMetadata := produce("bad-metadata", "tenant-a", "hi", map[string]any{"k": "a\x00b"})
	after := produce("bad-after", "tenant-b", "also fine", nil)

	ids := []string{badText, good, badMetadata, after}
	testenv.WaitFor(t, 20*time.Second, "every turn to end", func() bool { return terminalCount(t, env, ids) == len(ids) })
	require.Equal(t, "succeeded", readTurn(t, env, good).Status)
	require.Equal(t, "succeeded", readTurn(t, env, after).Status)
	for _, c := range []struct{ id, session string }{{badText, wire.NewSessionKey("tenant-a", "bad-text").String()}, {badMetadata, wire.NewSessionKey("tenant-a", "bad-metadata").String()}} {
		r := readTurn(t, env, c.id)
		require.Equal(t, "failed", r.Status)
		require.Equal(t, 3, r.Attempt, "every refused claim is an attempt, up to TURNSTILE_MAX_ATTEMPTS")
		require.Contains(t, r.Error, "cannot be stored")
		waitTerminalEvents(t, env, c.session, c.id)
		requireFencedStream(t, readStream(t, env, c.session), c.id, "turn.failed", 3)
	}

	dlq := readDLQ(t, env, 2)
	require.Len(t, dlq, 2)
	for _, d := range dlq {
		require.Equal(t, "unstorable", d.Headers["turnstile-dlq-reason"])
		require.Equal(t, "3", d.Headers["turnstile-attempts"])
		e, err := wire.DecodeEnvelope(d.Value)
		require.NoError(t, err, "the dead letter carries the original envelope")
		require.Contains(t, []string{badText, badMetadata}, e.TurnID.String())
		if e.TurnID.String() == badText {
			require.Equal(t, "a\x00b", e.Input.Text, "the record is dead-lettered intact")
		}
	}
	testenv.WaitFor(t, 20*time.Second, "the partition's offset to be committed past the bad records", func() bool {
		return committedOffset(t, env) == 5
	})
}

// TestBadRecordFaultKnobs runs a turn whose demo knobs ask for a failure on every attempt through a
// stack with TURNSTILE_AUTH=on: by default the knob is ignored and the turn succeeds, and with
// TURNSTILE_DEMO_FAULTS=allow the operator lets it fail the turn.
func TestBadRecordFaultKnobs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, faults, want string
	}{
		{"AuthOnByDefault", "", "succeeded"},
		{"AuthOnAllowed", "allow", "failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env := testenv.New(t, testenv.Options{Partitions: 1})
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			_, key, err := apikey.Create(ctx, env.Pool, "acme")
			require.NoError(t, err)
			cfg := authConfig(env, "intake,worker,gateway")
			cfg.DemoFaults = tc.faults
			base := "http://" + startStackCfg(t, env, cfg).Addr()

			status, body := post(t, base, "faults", `{"input":{"text":"hi"},"metadata":{"demo":{"fail_attempts":99,"panic_attempts":99}}}`,
				map[string]string{"Authorization": "Bearer " + key})
			require.Equal(t, http.StatusAccepted, status, string(body))
			var a accepted
			require.NoError(t, json.Unmarshal(body, &a))
			testenv.WaitFor(t, 20*time.Second, "the turn to end", func() bool { return terminalCount(t, env, []string{a.TurnID}) == 1 })
			require.Equal(t, tc.want, readTurn(t, env, a.TurnID).Status)
		})
	}
}

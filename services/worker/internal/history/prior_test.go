package history_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/streams"
	"github.com/turnstile-run/turnstile/pkg/testenv"
	"github.com/turnstile-run/turnstile/pkg/wire"
	"github.com/turnstile-run/turnstile/services/worker/internal/history"
)

func TestPriorReader(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{})
	ctx := context.Background()
	pub := streams.NewPublisher(env.Redis, env.Config.KeyPrefix, 10000, time.Hour)
	session, turn, other := wire.NewSessionKey("t", "s-"+uuid.NewString()), uuid.NewString(), uuid.NewString()
	publish := func(turnID string, token wire.FenceToken, ev wire.Event) {
		_, err := pub.Publish(ctx, session, turnID, token, ev, "")
		require.NoError(t, err)
	}
	a1 := wire.EventBase{TurnID: turn, Attempt: 1}
	publish(other, 1, wire.NewEvent(wire.EventDelta, wire.DeltaData{EventBase: wire.EventBase{TurnID: other, Attempt: 1}, Text: "not mine"}))
	publish(turn, 2, wire.NewEvent(wire.EventStarted, wire.StartedData{EventBase: a1, SessionID: session.SessionID()}))
	publish(turn, 2, wire.NewEvent(wire.EventToolCall, wire.ToolCallData{EventBase: a1, CallID: "c1", Name: "pay", IdempotencyKey: turn + ":1"}))
	publish(turn, 2, wire.NewEvent(wire.EventToolResult, wire.ToolResultData{EventBase: a1, CallID: "c1", Result: json.RawMessage(`{"paid":true}`)}))
	publish(turn, 2, wire.NewEvent(wire.EventDelta, wire.DeltaData{EventBase: a1, Text: "half"}))
	// The takeover: attempt 2 has begun publishing with a newer token.
	publish(turn, 3, wire.NewEvent(wire.EventRetrying, wire.RetryingData{EventBase: wire.EventBase{TurnID: turn, Attempt: 2}, PreviousAttempt: 1}))

	r := history.NewPriorReader(streams.NewReader(env.Redis, env.Config.KeyPrefix))
	r.Page = 2 // exercise paging
	prior, err := r.Prior(ctx, session, turn, time.Now().Add(-time.Second), 2)
	require.NoError(t, err)
	var types []string
	for _, p := range prior {
		types = append(types, p.Type)
		require.Equal(t, 1, p.Attempt)
	}
	require.Equal(t, []string{"turn.tool_call", "turn.tool_result", "turn.delta"}, types)
	require.Contains(t, string(prior[0].Data), `"idempotency_key":"`+turn+`:1"`)

	none, err := r.Prior(ctx, session, turn, time.Now(), 1)
	require.NoError(t, err)
	require.Empty(t, none, "a first attempt has no prior")
}

func TestPriorReaderDefaults(t *testing.T) {
	t.Parallel()
	r := history.NewPriorReader(nil)
	require.Equal(t, int64(history.PriorPageDefault), r.Page)
	require.Equal(t, 500, history.PriorPageDefault)
}

package demo_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/turnstile-run/turnstile/services/worker/internal/agent"
	"github.com/turnstile-run/turnstile/services/worker/internal/agent/agenttest"
	"github.com/turnstile-run/turnstile/services/worker/internal/agent/demo"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// knobbed runs the demo agent with the scenario's knobs in the turn metadata, as a client would set them.
func knobbed(sc agenttest.Scenario) agent.Agent {
	inner := demo.New(0)
	return agent.Func(func(ctx context.Context, turn agent.Turn, h []agent.Message, sink agent.Sink) (agent.Result, error) {
		knobs := map[string]any{"tokens": sc.Tokens, "tool": sc.Tool}
		if sc.FailMidStream {
			knobs["fail_attempts"] = 1
		}
		if sc.TokenDelay > 0 {
			knobs["duration_ms"] = int(sc.TokenDelay.Milliseconds()) * sc.Tokens
		}
		turn.Metadata = map[string]any{"demo": knobs}
		return inner.Run(ctx, turn, h, sink)
	})
}

func TestConformance(t *testing.T) {
	t.Parallel()
	agenttest.Run(t, agenttest.Capabilities{}, func(_ *testing.T, sc agenttest.Scenario) (agent.Agent, *agenttest.Recorder) {
		return knobbed(sc), nil
	})
}

func TestTakeoverReusesPriorToolResult(t *testing.T) {
	t.Parallel()
	turn := agenttest.NewTurn("what time is it", 10*time.Second)
	turn.Attempt = 2
	prior, _ := json.Marshal(map[string]any{"turn_id": turn.TurnID, "attempt": 1, "call_id": "call-1", "result": map[string]string{"time": "earlier"}})
	turn.Prior = []agent.PriorEvent{{Type: "turn.tool_result", Attempt: 1, Data: prior}}
	turn.Metadata = map[string]any{"demo": map[string]any{"tool": true, "tokens": 2}}
	sink := &agenttest.Sink{}
	_, err := demo.New(0).Run(context.Background(), turn, nil, sink)
	require.NoError(t, err)
	evs := sink.Events()
	require.Equal(t, "tool_result", evs[1].Kind)
	require.JSONEq(t, `{"time":"earlier"}`, string(evs[1].Result.Result))
}

// TestNoFaults checks that an agent with NoFaults runs a turn whose knobs ask for a failure, a
// panic or a failure after the tool call as if they were absent, where the default agent obeys them.
func TestNoFaults(t *testing.T) {
	t.Parallel()
	for _, knob := range []string{"fail_attempts", "panic_attempts", "fail_after_tool_attempts"} {
		t.Run(map[string]string{"fail_attempts": "FailAttempts", "panic_attempts": "PanicAttempts", "fail_after_tool_attempts": "FailAfterToolAttempts"}[knob], func(t *testing.T) {
			t.Parallel()
			turn := agenttest.NewTurn("hi", 10*time.Second)
			turn.Attempt = 1
			turn.Metadata = map[string]any{"demo": map[string]any{"tokens": 2, "tool": true, knob: 1}}
			res, err := (&demo.Agent{NoFaults: true}).Run(context.Background(), turn, nil, &agenttest.Sink{})
			require.NoError(t, err)
			require.Equal(t, "w0 w1", res.Text)

			run := func() (err error) {
				defer func() {
					if recover() != nil {
						err = errors.New("panicked")
					}
				}()
				_, err = demo.New(0).Run(context.Background(), turn, nil, &agenttest.Sink{})
				return err
			}
			require.Error(t, run(), "the default agent obeys the fault knobs")
		})
	}
}

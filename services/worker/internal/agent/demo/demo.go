package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	contract "github.com/turnstile-run/turnstile/pkg/demo"
	"github.com/turnstile-run/turnstile/services/worker/internal/agent"
)

// Agent is the demo agent.
type Agent struct {
	// Delay is the pause before each word. Defaults to none.
	Delay time.Duration
	// NoFaults makes the agent ignore the knobs that fail or panic an attempt on purpose
	// (fail_attempts, panic_attempts, fail_after_tool_attempts), so a tenant cannot fail its own
	// turns or crash attempts at will. Defaults to honouring them.
	NoFaults bool
}

// New returns a demo agent that pauses delay before each word.
func New(delay time.Duration) *Agent { return &Agent{Delay: delay} }

// Run streams the reply.
func (a *Agent) Run(ctx context.Context, turn agent.Turn, history []agent.Message, sink agent.Sink) (agent.Result, error) {
	k := contract.KnobsFrom(turn.Metadata)
	if a.NoFaults {
		k = k.WithoutFaults()
	}
	if turn.Attempt <= k.PanicAttempts {
		panic(fmt.Sprintf("demo agent: panic requested for attempt %d", turn.Attempt))
	}
	if turn.Attempt <= k.FailAttempts {
		return agent.Result{}, fmt.Errorf("demo agent: failure requested for attempt %d", turn.Attempt)
	}
	words := contract.Reply(turn.Text, k)
	if k.Recall {
		seen := make([]string, 0, len(history))
		for _, m := range history {
			if m.Content != "" {
				seen = append(seen, m.Content)
			}
		}
		words = contract.RecallReply(seen)
	}
	delay := a.Delay
	if k.DurationMs > 0 {
		delay = time.Duration(k.DurationMs) * time.Millisecond / time.Duration(len(words))
	}
	if k.Tool {
		call := agent.ToolCall{CallID: "call-1", Name: "clock", Arguments: json.RawMessage(`{"tz":"UTC"}`)}
		if err := sink.ToolCall(ctx, call); err != nil {
			return agent.Result{}, err
		}
		res := priorResult(turn.Prior, call.CallID)
		if res == nil {
			// The tool "runs" only when no earlier attempt of this turn already got its result.
			res, _ = json.Marshal(map[string]any{"time": "2026-01-01T00:00:00Z", "attempt": turn.Attempt})
		}
		if err := sink.ToolResult(ctx, agent.ToolResult{CallID: call.CallID, Result: res}); err != nil {
			return agent.Result{}, err
		}
		if turn.Attempt <= k.FailAfterToolAttempts {
			return agent.Result{}, fmt.Errorf("demo agent: failure after the tool call requested for attempt %d", turn.Attempt)
		}
	}
	var out strings.Builder
	var timer *time.Timer
	custom := func(i int) error {
		data, _ := json.Marshal(map[string]int{"step": i + 1, "of": k.Custom})
		return agent.EmitCustom(ctx, sink, "progress", data)
	}
	for i, w := range words {
		if i < k.Custom {
			if err := custom(i); err != nil {
				return agent.Result{}, err
			}
		}
		if delay > 0 {
			if timer == nil {
				timer = time.NewTimer(delay)
			} else {
				timer.Reset(delay)
			}
			select {
			case <-ctx.Done():
				timer.Stop()
				return agent.Result{}, context.Cause(ctx)
			case <-timer.C:
			}
		} else if err := ctx.Err(); err != nil {
			return agent.Result{}, context.Cause(ctx)
		}
		if err := sink.Delta(ctx, w); err != nil {
			return agent.Result{}, err
		}
		out.WriteString(w)
	}
	for i := len(words); i < k.Custom; i++ {
		if err := custom(i); err != nil {
			return agent.Result{}, err
		}
	}
	return agent.Result{Text: out.String(), State: k.EndState}, nil
}

// priorResult returns the result an earlier attempt of the turn published for callID, if any.
func priorResult(prior []agent.PriorEvent, callID string) json.RawMessage {
	for _, ev := range prior {
		if ev.Type != "turn.tool_result" {
			continue
		}
		var d struct {
			CallID string          `json:"call_id"`
			Result json.RawMessage `json:"result"`
		}
		if json.Unmarshal(ev.Data, &d) == nil && d.CallID == callID && len(d.Result) > 0 {
			return d.Result
		}
	}
	return nil
}

package integration

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/turnstile-run/turnstile/cmd/turnstile/roles"
	"github.com/turnstile-run/turnstile/pkg/app"
	"github.com/turnstile-run/turnstile/pkg/logging"
	"github.com/turnstile-run/turnstile/pkg/testenv"
)

// TestOneTurnOneTrace posts one turn with a client traceparent and follows its stream: the spans of
// intake, of the worker (turn, claim, agent, publish) and of the gateway's deliveries all belong to
// the client's trace, carried by Kafka record headers and the stream entries.
func TestOneTurnOneTrace(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{Partitions: 2})
	exp := tracetest.NewInMemoryExporter()
	cfg := env.Config
	cfg.Roles = "intake,worker,gateway"
	logs := &testenv.SyncBuffer{}
	deps := app.NewDeps(cfg, logging.New(logs, "json", "info"))
	deps.Tracing = sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stack, err := app.Start(ctx, deps, roles.All)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		require.NoError(t, stack.Stop(ctx))
	})
	base := "http://" + stack.Addr()

	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	req, err := http.NewRequest(http.MethodPost, base+"/v1/sessions/traced/turns", strings.NewReader(`{"input":{"text":"follow me"}}`))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", "00-"+traceID+"-00f067aa0ba902b7-01")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusAccepted, resp.StatusCode)

	stream := testenv.OpenSSE(t, base+"/v1/sessions/traced/events", "")
	stream.Until(t, 30*time.Second, countCompleted(1))
	stream.Close()

	want := []string{
		"intake POST /v1/sessions/{session_id}/turns", "worker.turn", "worker.claim", "worker.agent",
		"worker.publish turn.started", "worker.publish turn.delta", "worker.publish turn.completed",
		"gateway.deliver turn.started", "gateway.deliver turn.delta", "gateway.deliver turn.completed",
	}
	names := func() map[string]bool {
		out := map[string]bool{}
		for _, s := range exp.GetSpans() {
			out[s.Name] = true
		}
		return out
	}
	testenv.WaitFor(t, 10*time.Second, "every span of the turn", func() bool {
		got := names()
		for _, n := range want {
			if !got[n] {
				return false
			}
		}
		return true
	})
	spans := exp.GetSpans()
	byID := map[string]tracetest.SpanStub{}
	for _, s := range spans {
		require.Equal(t, traceID, s.SpanContext.TraceID().String(), "span %q is outside the turn's trace", s.Name)
		byID[s.SpanContext.SpanID().String()] = s
	}
	// Parentage: the worker's turn span is a child of intake's span (through the Kafka headers), and
	// every gateway delivery is a child of a worker publish span (through the stream entry).
	for _, s := range spans {
		parent, local := byID[s.Parent.SpanID().String()]
		switch {
		case s.Name == "worker.turn":
			require.True(t, local, "worker.turn has a recorded parent")
			require.True(t, strings.HasPrefix(parent.Name, "intake "), "worker.turn's parent is %q", parent.Name)
		case strings.HasPrefix(s.Name, "gateway.deliver "):
			require.True(t, local, "%s has a recorded parent", s.Name)
			require.Equal(t, "worker.publish "+strings.TrimPrefix(s.Name, "gateway.deliver "), parent.Name)
		}
	}

	// The intake's and the worker's turn spans name the catalog agent the turn went to.
	agentOf := func(s tracetest.SpanStub) string {
		for _, kv := range s.Attributes {
			if kv.Key == "turnstile.agent" {
				return kv.Value.AsString()
			}
		}
		return ""
	}
	for _, s := range spans {
		if s.Name == "worker.turn" || strings.HasPrefix(s.Name, "intake POST") {
			require.Equal(t, "agent", agentOf(s), "span %q carries turnstile.agent", s.Name)
		}
	}

	// The worker's JSON log lines about the turn carry its trace, turn and session IDs.
	var started map[string]any
	for _, line := range strings.Split(logs.String(), "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) == nil && rec["msg"] == "turn started" {
			started = rec
		}
	}
	require.NotNil(t, started, "no 'turn started' log line in:\n%s", logs.String())
	require.Equal(t, traceID, started["trace_id"])
	require.Equal(t, "traced", started["session_id"])
	require.NotEmpty(t, started["turn_id"])
}

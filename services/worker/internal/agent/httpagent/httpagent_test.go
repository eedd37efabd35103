package httpagent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/turnstile-run/turnstile/services/worker/internal/agent"
	"github.com/turnstile-run/turnstile/services/worker/internal/agent/agenttest"
	"github.com/turnstile-run/turnstile/services/worker/internal/agent/httpagent"
	"github.com/turnstile-run/turnstile/services/worker/internal/agent/upstream"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// server is a user's agent service answering in NDJSON or SSE and playing a scenario.
func server(t *testing.T, sc agenttest.Scenario, rec *agenttest.Recorder, useSSE bool) *httptest.Server {
	var requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req httpagent.Request
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || r.Header.Get("Idempotency-Key") != req.TurnID {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		var hist []string
		for _, m := range req.History {
			hist = append(hist, m.Content)
		}
		rec.Add(agenttest.Request{SessionID: req.SessionID, TurnID: req.TurnID, Text: req.Text, History: hist})
		if sc.Overload && requests.Add(1) == 1 {
			w.Header().Set("Retry-After", fmt.Sprint(sc.RetryAfter))
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		fl := w.(http.Flusher)
		if useSSE {
			w.Header().Set("Content-Type", "text/event-stream")
		} else {
			w.Header().Set("Content-Type", "application/x-ndjson")
		}
		send := func(ev map[string]any) bool {
			if sc.TokenDelay > 0 {
				select {
				case <-r.Context().Done():
					return false
				case <-time.After(sc.TokenDelay):
				}
			}
			b, _ := json.Marshal(ev)
			var err error
			if useSSE {
				typ := ev["type"]
				delete(ev, "type")
				b, _ = json.Marshal(ev)
				_, err = fmt.Fprintf(w, "event: %s\ndata: %s\n\n", typ, b)
			} else {
				_, err = fmt.Fprintf(w, "%s\n", b)
			}
			fl.Flush()
			return err == nil
		}
		if sc.Tool {
			send(map[string]any{"type": "tool_call", "call_id": "c1", "name": "clock", "arguments": map[string]string{"tz": "UTC"}})
			send(map[string]any{"type": "tool_result", "call_id": "c1", "result": map[string]string{"time": "noon"}})
		}
		for i, w := range sc.Words() {
			if !send(map[string]any{"type": "delta", "text": w}) {
				return
			}
			if sc.FailMidStream && i == 0 {
				send(map[string]any{"type": "error", "message": "model crashed", "retryable": true})
				return
			}
		}
		send(map[string]any{"type": "done"})
	}))
	t.Cleanup(srv.Close)
	return srv
}

func newAgent(t *testing.T, cfg httpagent.Config) *httpagent.Agent {
	cfg.Guard = upstream.New(upstream.Config{Name: "test", Backoff: 10 * time.Millisecond})
	ag, err := httpagent.New(cfg)
	require.NoError(t, err)
	return ag
}

func TestConformanceNDJSON(t *testing.T) {
	t.Parallel()
	agenttest.Run(t, agenttest.Capabilities{Upstream: true}, func(t *testing.T, sc agenttest.Scenario) (agent.Agent, *agenttest.Recorder) {
		rec := &agenttest.Recorder{}
		return newAgent(t, httpagent.Config{URL: server(t, sc, rec, false).URL}), rec
	})
}

func TestConformanceSSE(t *testing.T) {
	t.Parallel()
	agenttest.Run(t, agenttest.Capabilities{Upstream: true}, func(t *testing.T, sc agenttest.Scenario) (agent.Agent, *agenttest.Recorder) {
		rec := &agenttest.Recorder{}
		return newAgent(t, httpagent.Config{URL: server(t, sc, rec, true).URL}), rec
	})
}

func TestUnreachable(t *testing.T) {
	t.Parallel()
	agenttest.RunUnreachable(t, func(t *testing.T, url string) agent.Agent {
		return newAgent(t, httpagent.Config{URL: url})
	})
}

func TestLimits(t *testing.T) {
	t.Parallel()
	t.Run("AnswerSize", func(t *testing.T) {
		t.Parallel()
		srv := server(t, agenttest.Scenario{Tokens: 2000}, &agenttest.Recorder{}, false)
		_, err := newAgent(t, httpagent.Config{URL: srv.URL, MaxResponseBytes: 4096}).Run(context.Background(), agenttest.NewTurn("big", 10*time.Second), nil, &agenttest.Sink{})
		require.ErrorIs(t, err, agent.ErrPermanent)
		require.Contains(t, err.Error(), "exceeds 4096 bytes")
	})
	t.Run("EventSize", func(t *testing.T) {
		t.Parallel()
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/x-ndjson")
			_, _ = fmt.Fprintf(w, `{"type":"delta","text":%q}`+"\n", strings.Repeat("x", 10000))
		}))
		defer srv.Close()
		_, err := newAgent(t, httpagent.Config{URL: srv.URL, MaxEventBytes: 1024}).Run(context.Background(), agenttest.NewTurn("big", 10*time.Second), nil, &agenttest.Sink{})
		require.ErrorIs(t, err, agent.ErrPermanent)
	})
	t.Run("IdleTimeout", func(t *testing.T) {
		t.Parallel()
		release := make(chan struct{})
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/x-ndjson")
			_, _ = fmt.Fprintln(w, `{"type":"delta","text":"a"}`)
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
			case <-release:
			}
		}))
		defer srv.Close()
		defer close(release)
		sink := &agenttest.Sink{}
		_, err := newAgent(t, httpagent.Config{URL: srv.URL, IdleTimeout: 200 * time.Millisecond}).Run(context.Background(), agenttest.NewTurn("idle", 20*time.Second), nil, sink)
		require.ErrorContains(t, err, "idle timeout")
		require.NotErrorIs(t, err, agent.ErrPermanent)
		require.Equal(t, []string{"a"}, sink.Deltas(), "a call that emitted output is not retried")
	})
}

// TestErrorStatus: an error event that names an HTTP status is classified like an answer of it.
func TestErrorStatus(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name      string
		event     string
		requests  int64
		permanent bool
	}{
		{"Unauthorized", `{"type":"error","message":"bad token","status":401,"retryable":true}`, 1, true},
		{"TooManyRequests", `{"type":"error","message":"slow down","status":429,"retry_after":0.05}`, 2, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var requests atomic.Int64
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "application/x-ndjson")
				if requests.Add(1) == 1 {
					_, _ = fmt.Fprintln(w, c.event)
					return
				}
				_, _ = fmt.Fprintln(w, `{"type":"delta","text":"ok"}`)
				_, _ = fmt.Fprintln(w, `{"type":"done"}`)
			}))
			defer srv.Close()
			sink := &agenttest.Sink{}
			_, err := newAgent(t, httpagent.Config{URL: srv.URL}).Run(context.Background(), agenttest.NewTurn("hi", 10*time.Second), nil, sink)
			require.Equal(t, c.requests, requests.Load())
			if c.permanent {
				require.ErrorIs(t, err, agent.ErrPermanent)
				require.Contains(t, err.Error(), "401 Unauthorized")
				return
			}
			require.NoError(t, err)
			require.Len(t, sink.Waits(), 1)
			require.Equal(t, "rate_limited", sink.Waits()[0].Reason)
		})
	}
}

// TestDeadlineHeaders: every request carries the turn's absolute deadline in the convention intake
// reads, X-Deadline-Epoch-Ms, and in the older X-Turnstile-Deadline.
func TestDeadlineHeaders(t *testing.T) {
	t.Parallel()
	got := make(chan http.Header, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Clone()
		w.Header().Set("Content-Type", "application/x-ndjson")
		_, _ = fmt.Fprintln(w, `{"type":"delta","text":"ok"}`)
		_, _ = fmt.Fprintln(w, `{"type":"done"}`)
	}))
	defer srv.Close()
	turn := agenttest.NewTurn("hi", 10*time.Second)
	_, err := newAgent(t, httpagent.Config{URL: srv.URL}).Run(context.Background(), turn, nil, &agenttest.Sink{})
	require.NoError(t, err)
	h := <-got
	require.Equal(t, strconv.FormatInt(turn.Deadline.UnixMilli(), 10), h.Get("X-Deadline-Epoch-Ms"))
	require.Equal(t, turn.Deadline.UTC().Format(time.RFC3339Nano), h.Get("X-Turnstile-Deadline"))
}

// answer is an agent service that answers every request with the given NDJSON lines.
func answer(t *testing.T, lines ...string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/x-ndjson")
		for _, l := range lines {
			_, _ = fmt.Fprintln(w, l)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestInvalidEventFailsLegibly: an event that does not match the protocol's schema fails the turn
// at once (no retry) with an error that names the event and the field, and nothing of it is
// published.
func TestInvalidEventFailsLegibly(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		lines []string
		want  string
	}{
		{"ToolCallWithoutCallID", []string{`{"type":"delta","text":"a"}`, `{"type":"delta","text":"b"}`, `{"type":"tool_call","name":"clock","arguments":{}}`, `{"type":"done"}`}, `event 3 (tool_call): missing required property "call_id"`},
		{"ErrorWithTextForMessage", []string{`{"type":"error","text":"model crashed"}`}, `event 1 (error): missing required property "message"`},
		{"UnknownProperty", []string{`{"type":"done","result":"x"}`}, `event 1 (done): unknown property "result"`},
		{"WrongType", []string{`{"type":"delta","text":7}`}, `event 1 (delta): property "text": want string, got number`},
		{"UnknownEventType", []string{`{"type":"finish"}`}, `event 1: property "type": "finish" is not one of delta, tool_call, tool_result, custom, usage, error, done, input_required`},
		{"NoType", []string{`{"text":"a"}`}, `event 1: missing required property "type"`},
		{"NotAnObject", []string{`["delta"]`}, `event 1: want an object, got array`},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			sink := &agenttest.Sink{}
			_, err := newAgent(t, httpagent.Config{URL: answer(t, c.lines...).URL}).Run(context.Background(), agenttest.NewTurn("hi", 10*time.Second), nil, sink)
			require.ErrorIs(t, err, agent.ErrPermanent)
			require.ErrorContains(t, err, c.want)
			for _, ev := range sink.Events() {
				require.Equal(t, "delta", ev.Kind, "an invalid event is not published")
			}
		})
	}
}

// TestInputRequiredAndUsage: an answer that ends with input_required ends the turn waiting for the
// user (the output's state is input-required), and its usage events are added up into the result,
// total_tokens defaulting to the sum of the other two. NDJSON and SSE alike.
func TestInputRequiredAndUsage(t *testing.T) {
	t.Parallel()
	events := []string{
		`{"type":"usage","input_tokens":10,"output_tokens":4,"model":"small"}`,
		`{"type":"tool_call","call_id":"c1","name":"lookup","arguments":{"q":"flights"}}`,
		`{"type":"tool_result","call_id":"c1","result":{"found":0}}`,
		`{"type":"delta","text":"Which "}`,
		`{"type":"delta","text":"city?"}`,
		`{"type":"usage","input_tokens":20,"output_tokens":6,"total_tokens":27,"model":"large"}`,
		`{"type":"input_required"}`,
	}
	for _, useSSE := range []bool{false, true} {
		t.Run(fmt.Sprintf("SSE=%v", useSSE), func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				if !useSSE {
					w.Header().Set("Content-Type", "application/x-ndjson")
					_, _ = fmt.Fprintln(w, strings.Join(events, "\n"))
					return
				}
				w.Header().Set("Content-Type", "text/event-stream")
				for _, e := range events {
					var m map[string]any
					require.NoError(t, json.Unmarshal([]byte(e), &m))
					typ := m["type"]
					delete(m, "type")
					b, _ := json.Marshal(m)
					_, _ = fmt.Fprintf(w, "event: %s\ndata: %s\n\n", typ, b)
				}
			}))
			defer srv.Close()
			sink := &agenttest.Sink{}
			res, err := newAgent(t, httpagent.Config{URL: srv.URL}).Run(context.Background(), agenttest.NewTurn("book a flight", 10*time.Second), nil, sink)
			require.NoError(t, err)
			require.Equal(t, "Which city?", res.Text)
			require.Equal(t, "input-required", res.State)
			require.Equal(t, &agent.Usage{PromptTokens: 30, CompletionTokens: 10, TotalTokens: 41, Model: "large"}, res.Usage)
			require.Equal(t, []string{"tool_call", "tool_result", "delta", "delta"}, kinds(sink.Events()))
		})
	}
	t.Run("Output", func(t *testing.T) {
		t.Parallel()
		srv := answer(t, `{"type":"delta","text":"thinking"}`, `{"type":"input_required","output":"Which city?"}`)
		res, err := newAgent(t, httpagent.Config{URL: srv.URL}).Run(context.Background(), agenttest.NewTurn("book", 10*time.Second), nil, &agenttest.Sink{})
		require.NoError(t, err)
		require.Equal(t, agent.Result{Text: "Which city?", State: "input-required"}, res, "no usage event, no usage")
	})
}

func kinds(evs []agenttest.Event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.Kind)
	}
	return out
}

package httpagent

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/turnstile-run/turnstile/services/worker/internal/agent"
)

// FuzzDecodeEvent: whatever an agent sends, the decoder neither panics nor lets through an event
// the protocol's schema refuses. An accepted event has a known type and that type's required
// fields; a refused one is a permanent error that names the event.
func FuzzDecodeEvent(f *testing.F) {
	for _, s := range []string{
		`{"type":"delta","text":"hi"}`,
		`{"type":"tool_call","call_id":"c1","name":"clock","arguments":{"tz":"UTC"}}`,
		`{"type":"tool_call","name":"clock"}`,
		`{"type":"tool_result","call_id":"c1","result":[1,2],"error":"x"}`,
		`{"type":"usage","input_tokens":1,"output_tokens":2,"total_tokens":3,"model":"m"}`,
		`{"type":"usage","input_tokens":1e30,"output_tokens":-1}`,
		`{"type":"error","message":"boom","status":503,"retry_after":1.5}`,
		`{"type":"error","text":"boom"}`,
		`{"type":"done","output":"x"}`,
		`{"type":"input_required"}`,
		`{"type":7}`, `[]`, `null`, `{`, `{"type":"done"} {}`, `"done"`,
	} {
		f.Add("", []byte(s))
		f.Add("done", []byte(s))
	}
	f.Fuzz(func(t *testing.T, sseType string, data []byte) {
		ev, err := decodeEvent(1, sseType, data)
		if err != nil {
			if !errors.Is(err, agent.ErrPermanent) || !strings.HasPrefix(err.Error(), "http agent event 1") {
				t.Fatalf("error %q is not a permanent one naming the event", err)
			}
			return
		}
		if !json.Valid(data) {
			t.Fatalf("accepted invalid JSON %q", data)
		}
		if !slices.Contains(eventTypes, ev.Type) {
			t.Fatalf("accepted unknown type %q", ev.Type)
		}
		switch ev.Type {
		case "tool_call":
			if ev.CallID == "" || ev.Name == "" {
				t.Fatalf("accepted a tool call without call_id or name: %q", data)
			}
		case "tool_result":
			if ev.CallID == "" {
				t.Fatalf("accepted a tool result without call_id: %q", data)
			}
		case "error":
			if ev.Message == "" || (ev.Status != 0 && (ev.Status < 400 || ev.Status > 599)) || ev.RetryAfter < 0 {
				t.Fatalf("accepted a bad error event: %q", data)
			}
		case "usage":
			if ev.InputTokens < 0 || ev.OutputTokens < 0 || ev.TotalTokens < 0 {
				t.Fatalf("accepted negative token counts: %q", data)
			}
		}
	})
}

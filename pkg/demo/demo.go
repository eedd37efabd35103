package demo

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// Knobs are the demo settings read from a turn's metadata.
type Knobs struct {
	Tokens        int  `json:"tokens,omitempty"`
	DurationMs    int  `json:"duration_ms,omitempty"`
	Tool          bool `json:"tool,omitempty"`
	FailAttempts  int  `json:"fail_attempts,omitempty"`
	PanicAttempts int  `json:"panic_attempts,omitempty"`
	// FailAfterToolAttempts fails the first N attempts right after the tool call and its result were
	// published, leaving a half-finished turn for the next attempt.
	FailAfterToolAttempts int `json:"fail_after_tool_attempts,omitempty"`
}

// KnobsFrom reads the "demo" member of a turn's metadata; anything unreadable means no knobs.
func KnobsFrom(md map[string]any) Knobs {
	var k Knobs
	raw, ok := md["demo"]
	if !ok {
		return k
	}
	b, err := json.Marshal(raw)
	if err != nil {
		return k
	}
	_ = json.Unmarshal(b, &k)
	return k
}

// Words returns the words the demo agent streams for an input without knobs.
func Words(text string) []string { return Reply(text, Knobs{}) }

// Reply returns the words the demo agent streams for an input and knobs, one per turn.delta. Each
// word but the last carries its trailing space, so the deltas concatenate to the output text.
func Reply(text string, k Knobs) []string {
	var words []string
	if k.Tokens > 0 {
		for i := range k.Tokens {
			words = append(words, "w"+strconv.Itoa(i))
		}
	} else {
		words = strings.Fields(fmt.Sprintf("You said %q. This reply comes from the turnstile demo agent.", text))
	}
	for i := range words[:len(words)-1] {
		words[i] += " "
	}
	return words
}

// Output is the demo agent's final output text for an input and knobs.
func Output(text string, k Knobs) string { return strings.Join(Reply(text, k), "") }

package demo

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// The knobs' maxima: whatever a turn's metadata asks for, the demo agent streams at most MaxTokens
// words, spreads them over at most MaxDurationMs, and fails or panics on at most MaxFaultAttempts
// attempts (TURNSTILE_MAX_ATTEMPTS's own upper bound). A larger value counts as the maximum and a
// negative one as zero, so one small request cannot make a worker hold an unbounded reply.
const (
	MaxTokens        = 4096
	MaxDurationMs    = 10 * 60 * 1000
	MaxFaultAttempts = 100
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
	// EndState ends the turn waiting for the user: "input-required" or "auth-required" (see
	// wire.Output.State); anything else is ignored.
	EndState string `json:"end_state,omitempty"`
	// Recall answers with the session history the agent was given (RecallReply) instead of its
	// usual words, so a test sees what the turn's agent saw: an edited thread state, a copy.
	Recall bool `json:"recall,omitempty"`
	// Custom emits that many custom events (turn.custom, named "progress", data
	// {"step": i, "of": n}), one before each of the first words, the rest after the last.
	Custom int `json:"custom,omitempty"`
}

// RecallReply is the demo agent's answer with the Recall knob: its history's messages' contents
// (the empty ones left out), oldest first, joined by " | " ("(none)" for no history), as the words it streams.
func RecallReply(history []string) []string {
	text := strings.Join(history, " | ")
	if text == "" {
		text = "(none)"
	}
	words := strings.SplitAfter(text, " ")
	return words
}

// Bounded returns k with every knob within its maximum (see MaxTokens).
func (k Knobs) Bounded() Knobs {
	clamp := func(v, hi int) int { return min(max(v, 0), hi) }
	k.Tokens = clamp(k.Tokens, MaxTokens)
	k.DurationMs = clamp(k.DurationMs, MaxDurationMs)
	k.FailAttempts = clamp(k.FailAttempts, MaxFaultAttempts)
	k.PanicAttempts = clamp(k.PanicAttempts, MaxFaultAttempts)
	k.FailAfterToolAttempts = clamp(k.FailAfterToolAttempts, MaxFaultAttempts)
	k.Custom = clamp(k.Custom, MaxTokens)
	if k.EndState != EndInputRequired && k.EndState != EndAuthRequired {
		k.EndState = ""
	}
	return k
}

// WithoutFaults returns k without the knobs that make the agent fail or panic on purpose.
func (k Knobs) WithoutFaults() Knobs {
	k.FailAttempts, k.PanicAttempts, k.FailAfterToolAttempts = 0, 0, 0
	return k
}

// KnobsFrom reads the "demo" member of a turn's metadata as encoding/json would decode it into
// Knobs, bounded (Knobs.Bounded); anything unreadable means no knobs.
func KnobsFrom(md map[string]any) Knobs { return knobsFrom(md).Bounded() }

func knobsFrom(md map[string]any) Knobs {
	raw, ok := md["demo"]
	if !ok {
		return Knobs{}
	}
	if m, ok := raw.(map[string]any); ok {
		if k, ok := knobsFromMap(m); ok {
			return k
		}
	}
	// Anything the direct reading is not sure to read as encoding/json does (an unknown or
	// differently cased key, a fraction, a string for a number) takes the JSON round trip.
	var k Knobs
	b, err := json.Marshal(raw)
	if err != nil {
		return k
	}
	_ = json.Unmarshal(b, &k)
	return k
}

// knobsFromMap reads the knobs from a decoded JSON object without encoding it again (the round
// trip was a tenth of a busy demo worker's CPU). It reports false for anything it cannot read
// exactly as encoding/json would.
func knobsFromMap(m map[string]any) (Knobs, bool) {
	var k Knobs
	for key, v := range m {
		var n *int
		switch key {
		case "tokens":
			n = &k.Tokens
		case "duration_ms":
			n = &k.DurationMs
		case "fail_attempts":
			n = &k.FailAttempts
		case "panic_attempts":
			n = &k.PanicAttempts
		case "fail_after_tool_attempts":
			n = &k.FailAfterToolAttempts
		case "custom":
			n = &k.Custom
		case "end_state":
			s, ok := v.(string)
			if !ok {
				return Knobs{}, false
			}
			k.EndState = s
			continue
		case "tool", "recall":
			b, ok := v.(bool)
			if !ok {
				return Knobs{}, false
			}
			if key == "tool" {
				k.Tool = b
			} else {
				k.Recall = b
			}
			continue
		default:
			return Knobs{}, false
		}
		f, ok := v.(float64)
		// Whole numbers up to 2^53 are exact in a float64 and in an int; JSON writes them without
		// a fraction, so encoding/json reads them into an int as they are.
		if !ok || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
			return Knobs{}, false
		}
		*n = int(f)
	}
	return k, true
}

// The end states a turn's EndState knob may ask for (the values of wire.Output.State).
const (
	EndInputRequired = "input-required"
	EndAuthRequired  = "auth-required"
)

// Words returns the words the demo agent streams for an input without knobs.
func Words(text string) []string { return Reply(text, Knobs{}) }

// Reply returns the words the demo agent streams for an input and knobs (bounded as
// Knobs.Bounded), one per turn.delta. Each word but the last carries its trailing space, so the
// deltas concatenate to the output text.
func Reply(text string, k Knobs) []string {
	k = k.Bounded()
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

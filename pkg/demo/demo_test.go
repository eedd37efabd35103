package demo

import (
	"encoding/json"
	"testing"
)

// knobsByRoundTrip is how KnobsFrom read knobs before it read decoded objects directly: the
// reference the direct reading must agree with.
func knobsByRoundTrip(md map[string]any) Knobs {
	var k Knobs
	b, err := json.Marshal(md["demo"])
	if err != nil {
		return k
	}
	_ = json.Unmarshal(b, &k)
	return k
}

func TestKnobsFromMatchesRoundTrip(t *testing.T) {
	docs := []string{
		`{}`,
		`{"demo":null}`,
		`{"demo":3}`,
		`{"demo":{}}`,
		`{"demo":{"tokens":1}}`,
		`{"demo":{"tokens":5,"duration_ms":250,"tool":true,"fail_attempts":2,"panic_attempts":1,"fail_after_tool_attempts":1}}`,
		`{"demo":{"tokens":1e2}}`,
		`{"demo":{"tokens":-4}}`,
		`{"demo":{"tokens":2.5,"tool":true}}`,
		`{"demo":{"tokens":"3"}}`,
		`{"demo":{"Tokens":3}}`,
		`{"demo":{"TOOL":true,"tokens":2}}`,
		`{"demo":{"tokens":1e300}}`,
		`{"demo":{"tokens":9007199254740993}}`,
		`{"demo":{"tool":1}}`,
		`{"demo":{"tool":false,"tokens":0}}`,
		`{"demo":{"other":"x","tokens":2}}`,
		`{"demo":[1,2]}`,
	}
	for _, doc := range docs {
		var md map[string]any
		if err := json.Unmarshal([]byte(doc), &md); err != nil {
			t.Fatalf("%s: %v", doc, err)
		}
		if got, want := knobsFrom(md), knobsByRoundTrip(md); got != want {
			t.Errorf("%s: knobsFrom = %+v, the JSON round trip reads %+v", doc, got, want)
		}
		if got, want := KnobsFrom(md), knobsByRoundTrip(md).Bounded(); got != want {
			t.Errorf("%s: KnobsFrom = %+v, want %+v", doc, got, want)
		}
	}
	var md map[string]any
	_ = json.Unmarshal([]byte(`{"demo":{"tokens":4,"tool":true}}`), &md)
	if k, ok := knobsFromMap(md["demo"].(map[string]any)); !ok || k != (Knobs{Tokens: 4, Tool: true}) {
		t.Errorf("a plain object took the round trip or was misread: %+v, %v", k, ok)
	}
}

func FuzzKnobsFrom(f *testing.F) {
	f.Add(`{"demo":{"tokens":3,"tool":true}}`)
	f.Add(`{"demo":{"tokens":1.5}}`)
	f.Add(`{"demo":{"Duration_MS":7}}`)
	f.Fuzz(func(t *testing.T, doc string) {
		var md map[string]any
		if json.Unmarshal([]byte(doc), &md) != nil {
			return
		}
		if got, want := knobsFrom(md), knobsByRoundTrip(md); got != want {
			t.Errorf("%s: knobsFrom = %+v, the JSON round trip reads %+v", doc, got, want)
		}
		if k := KnobsFrom(md); k != k.Bounded() {
			t.Errorf("%s: KnobsFrom = %+v is out of bounds", doc, k)
		}
	})
}

// TestKnobsBounded checks every knob's maximum, and that the reply a huge tokens knob asks for
// is MaxTokens words long.
func TestKnobsBounded(t *testing.T) {
	t.Parallel()
	var md map[string]any
	doc := `{"demo":{"tokens":3000000,"duration_ms":1e12,"fail_attempts":1000,"panic_attempts":1000,"fail_after_tool_attempts":1000}}`
	if err := json.Unmarshal([]byte(doc), &md); err != nil {
		t.Fatal(err)
	}
	want := Knobs{
		Tokens: MaxTokens, DurationMs: MaxDurationMs, FailAttempts: MaxFaultAttempts,
		PanicAttempts: MaxFaultAttempts, FailAfterToolAttempts: MaxFaultAttempts,
	}
	if got := KnobsFrom(md); got != want {
		t.Errorf("KnobsFrom = %+v, want %+v", got, want)
	}
	if got := (Knobs{Tokens: -3, DurationMs: -1}).Bounded(); got != (Knobs{}) {
		t.Errorf("negative knobs bounded to %+v, want zero", got)
	}
	if n := len(Reply("x", Knobs{Tokens: 3_000_000})); n != MaxTokens {
		t.Errorf("Reply streams %d words for 3,000,000 tokens, want %d", n, MaxTokens)
	}
	if got := (Knobs{Tokens: 2, Tool: true, FailAttempts: 1, PanicAttempts: 1, FailAfterToolAttempts: 1}).WithoutFaults(); got != (Knobs{Tokens: 2, Tool: true}) {
		t.Errorf("WithoutFaults = %+v", got)
	}
}

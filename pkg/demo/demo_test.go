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
		if got, want := KnobsFrom(md), knobsByRoundTrip(md); got != want {
			t.Errorf("%s: KnobsFrom = %+v, the JSON round trip reads %+v", doc, got, want)
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
		if got, want := KnobsFrom(md), knobsByRoundTrip(md); got != want {
			t.Errorf("%s: KnobsFrom = %+v, the JSON round trip reads %+v", doc, got, want)
		}
	})
}

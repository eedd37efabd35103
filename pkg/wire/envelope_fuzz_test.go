package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

// decodeEnvelopeStd is DecodeEnvelope as it was, with encoding/json alone (and the legacy keys
// lifted as DecodeEnvelope lifts them): the reference FuzzDecodeEnvelope holds it to and
// BenchmarkDecodeEnvelope's baseline.
func decodeEnvelopeStd(b []byte) (Envelope, error) {
	var e Envelope
	if err := json.Unmarshal(b, &e); err != nil {
		return Envelope{}, err
	}
	liftLegacyKeys(&e)
	switch {
	case e.Version < 1 || e.Version > EnvelopeVersion:
		return Envelope{}, ErrUnsupportedVersion
	case e.TurnID == uuid.Nil, e.SessionID == "", e.Deadline.IsZero():
		return Envelope{}, errors.New("missing field")
	}
	return e, nil
}

// peerEnvelope is a record as intake writes it for the demo agent.
func peerEnvelope(tb testing.TB) []byte {
	tb.Helper()
	now := time.UnixMilli(1_800_000_000_000).UTC()
	e := Envelope{
		TurnID: uuid.Must(uuid.NewV7()), SessionID: "peer-12345", Tenant: "default", Input: Input{Text: "noop"},
		Metadata: map[string]any{"demo": map[string]any{"tokens": 1}}, Deadline: now.Add(time.Hour), AcceptedAt: now,
	}
	b, err := e.Encode()
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// FuzzDecodeEnvelope checks that DecodeEnvelope accepts exactly what encoding/json accepts, and
// reads the same envelope from it. One difference is known and allowed: an object with the
// metadata key twice, which encoding/json merges into one map and DecodeEnvelope reads as the last.
func FuzzDecodeEnvelope(f *testing.F) {
	f.Add(peerEnvelope(f))
	f.Add([]byte(`{"v":1,"turn_id":"0190c5d3-0000-7000-8000-000000000000","session_id":"s","tenant":"t",` +
		`"input":{"text":"a\"b\u00e9"},"metadata":{"a":[1,2.5e3,"x",null,true,{"b":{}}]},"multitask":"enqueue",` +
		`"deadline":"2030-01-01T00:00:00Z","accepted_at":"2029-12-31T23:59:59.123456789+01:00","extra":{"k":"v"}}`))
	f.Add([]byte(`{"V":1,"Turn_ID":"0190c5d3-0000-7000-8000-000000000000","SESSION_ID":"s","metadata":null,"deadline":"2030-01-01T00:00:00Z"}`))
	f.Add([]byte(`{"v":1,"turn_id":"0190c5d3-0000-7000-8000-000000000000","session_id":"s","deadline":"2030-01-01T00:00:00Z",` +
		`"metadata":{"k":1,"turnstile.webhook":{"url":"https://h.example","token":7},"turnstile.push_configs":[{"id":"a","url":"u",` +
		`"auth_schemes":["Bearer",1]},5,{"id":"b"}]},"webhook":null,"push_configs":[]}`))
	f.Add([]byte(`{"v":1,"metadata":5}`))
	f.Add([]byte(`{"v":1,"metadata":{"x":1},"metadata":{"y":2}}`))
	f.Add([]byte(`{"v":2}`))
	f.Add([]byte(`{"v":1,`))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, raw, err := DecodeEnvelopeRaw(b)
		want, werr := decodeEnvelopeStd(b)
		if err == nil {
			// The raw metadata is the metadata decoded, and there is none without metadata.
			var m map[string]any
			if uerr := json.Unmarshal(raw, &m); (raw != nil || got.Metadata != nil) && (uerr != nil || !reflect.DeepEqual(m, got.Metadata)) {
				t.Fatalf("DecodeEnvelopeRaw(%q): raw metadata %q decodes to %v (%v), metadata %v", b, raw, m, uerr, got.Metadata)
			}
		}
		if (err == nil) != (werr == nil) {
			if duplicateMetadata(b) {
				return
			}
			t.Fatalf("DecodeEnvelope(%q): err %v, encoding/json: %v", b, err, werr)
		}
		if err == nil && !reflect.DeepEqual(got, want) && !duplicateMetadata(b) {
			t.Fatalf("DecodeEnvelope(%q) =\n%#v\nencoding/json:\n%#v", b, got, want)
		}
	})
}

// duplicateMetadata reports whether b is an object that names the metadata field (in any case, as
// encoding/json matches names) more than once.
func duplicateMetadata(b []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(b))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return false
	}
	n := 0
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			break
		}
		if s, ok := k.(string); ok && strings.EqualFold(s, "metadata") {
			n++
		}
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			break
		}
	}
	return n > 1
}

func BenchmarkDecodeEnvelope(b *testing.B) {
	rec := peerEnvelope(b)
	for _, c := range []struct {
		name   string
		decode func([]byte) (Envelope, error)
	}{
		{"DecodeEnvelope", DecodeEnvelope},
		{"BaselineEncodingJSON", decodeEnvelopeStd},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.decode(rec); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

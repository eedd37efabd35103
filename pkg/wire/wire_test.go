package wire

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

func TestEnvelopeRoundTrip(t *testing.T) {
	t.Parallel()
	in := Envelope{
		TurnID: uuid.Must(uuid.NewV7()), SessionID: "s1", Tenant: "acme", Input: Input{Text: "hi"},
		Metadata: map[string]any{"k": "v"}, Deadline: time.UnixMilli(1_800_000_000_000).UTC(), AcceptedAt: time.UnixMilli(1_700_000_000_000).UTC(),
	}
	b, err := in.Encode()
	require.NoError(t, err)
	out, err := DecodeEnvelope(b)
	require.NoError(t, err)
	require.Equal(t, EnvelopeVersion, out.Version)
	in.Version = EnvelopeVersion
	require.Equal(t, in, out)
}

func TestDecodeEnvelopeRejects(t *testing.T) {
	t.Parallel()
	id := uuid.Must(uuid.NewV7()).String()
	cases := map[string]string{
		"NotJSON":         `{"v":1,`,
		"FutureVersion":   `{"v":99,"turn_id":"` + id + `","session_id":"s","deadline":"2030-01-01T00:00:00Z"}`,
		"MissingTurnID":   `{"v":1,"session_id":"s","deadline":"2030-01-01T00:00:00Z"}`,
		"MissingSession":  `{"v":1,"turn_id":"` + id + `","deadline":"2030-01-01T00:00:00Z"}`,
		"MissingDeadline": `{"v":1,"turn_id":"` + id + `","session_id":"s"}`,
	}
	for name, raw := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := DecodeEnvelope([]byte(raw))
			require.Error(t, err)
		})
	}
}

func TestSessionIDValid(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"s1", "a.b_c:d-e", strings.Repeat("x", 128)} {
		require.True(t, SessionIDValid(ok), ok)
	}
	for _, bad := range []string{"", strings.Repeat("x", 129), "a b", "a/b", "ü", "{s}"} {
		require.False(t, SessionIDValid(bad), bad)
	}
}

func TestTerminal(t *testing.T) {
	t.Parallel()
	for _, e := range []EventType{EventCompleted, EventFailed, EventCancelled, EventExpired} {
		require.True(t, e.Terminal(), e)
	}
	for _, e := range []EventType{EventStarted, EventDelta, EventRetrying, EventWaiting, EventToolCall, EventStreamReset} {
		require.False(t, e.Terminal(), e)
	}
	require.True(t, StatusSucceeded.Terminal())
	require.False(t, StatusRunning.Terminal())
}

func TestWaitingData(t *testing.T) {
	t.Parallel()
	base := EventBase{TurnID: "t1", Attempt: 2}
	at := time.Date(2026, 1, 1, 0, 0, 1, 500_000_000, time.UTC)
	ev := NewEvent(EventWaiting, WaitingData{EventBase: base, Reason: WaitRateLimited, RetryAt: at, Error: "429"})
	require.Equal(t, EventWaiting, ev.Type)
	require.JSONEq(t, `{"turn_id":"t1","attempt":2,"reason":"rate_limited","retry_at":"2026-01-01T00:00:01.5Z","error":"429"}`, string(ev.Data))
	ev = NewEvent(EventWaiting, WaitingData{EventBase: base, Reason: WaitConcurrencyLimit})
	require.JSONEq(t, `{"turn_id":"t1","attempt":2,"reason":"concurrency_limit"}`, string(ev.Data),
		"a wait without a known end has no retry_at, one that follows no answer no error")
}

// TestEnvelopeNotificationFields: a turn's webhook and push configs travel as the envelope's own
// fields, and the metadata holds nothing of them.
func TestEnvelopeNotificationFields(t *testing.T) {
	t.Parallel()
	in := Envelope{
		TurnID: uuid.Must(uuid.NewV7()), SessionID: "s1", Tenant: "acme", Input: Input{Text: "hi"},
		Metadata: map[string]any{"k": "v"}, Deadline: time.UnixMilli(1_800_000_000_000).UTC(),
		Webhook: &Webhook{URL: "https://h.example/w", Token: "tok"},
		PushConfigs: []PushConfig{
			{ID: "a", URL: "https://a.example/h", Token: "t", AuthSchemes: []string{"Bearer"}, AuthCredentials: "c"},
			{ID: "b", URL: "https://b.example/h"},
		},
	}
	b, err := in.Encode()
	require.NoError(t, err)
	var raw map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(b, &raw))
	require.JSONEq(t, `{"k":"v"}`, string(raw["metadata"]))
	require.JSONEq(t, `{"url":"https://h.example/w","token":"tok"}`, string(raw["webhook"]))
	out, md, err := DecodeEnvelopeRaw(b)
	require.NoError(t, err)
	require.JSONEq(t, `{"k":"v"}`, string(md))
	require.Equal(t, in, out)
}

// TestDecodeLegacyEnvelope: a record written before the envelope had the fields, with the webhook
// and push configs under the legacy metadata keys, decodes as if written with the fields; the
// metadata, decoded and raw, no longer holds the keys. Malformed entries are dropped as the
// triggers that read them dropped them.
func TestDecodeLegacyEnvelope(t *testing.T) {
	t.Parallel()
	const old = `{"v":1,"turn_id":"0190c5d3-0000-7000-8000-000000000001","session_id":"s1","tenant":"acme",` +
		`"input":{"text":"hi"},"deadline":"2030-01-01T00:00:00Z","accepted_at":"2029-12-31T23:00:00Z",` +
		`"metadata":{"a2a":{"message_id":"m1"},"turnstile.webhook":{"url":"https://h.example/w","token":"tok"},` +
		`"turnstile.push_configs":[{"id":"a","url":"https://a.example/h","token":"t","auth_schemes":["Bearer"],` +
		`"auth_credentials":"c"},{"id":"b","url":"https://b.example/h"},{"id":"no-url"},"not an object"]}}`
	e, md, err := DecodeEnvelopeRaw([]byte(old))
	require.NoError(t, err)
	require.Equal(t, &Webhook{URL: "https://h.example/w", Token: "tok"}, e.Webhook)
	require.Equal(t, []PushConfig{
		{ID: "a", URL: "https://a.example/h", Token: "t", AuthSchemes: []string{"Bearer"}, AuthCredentials: "c"},
		{ID: "b", URL: "https://b.example/h"},
	}, e.PushConfigs)
	require.Equal(t, map[string]any{"a2a": map[string]any{"message_id": "m1"}}, e.Metadata)
	require.JSONEq(t, `{"a2a":{"message_id":"m1"}}`, string(md))

	e, md, err = DecodeEnvelopeRaw([]byte(strings.Replace(old, `"turnstile.webhook":{"url"`, `"turnstile.webhook":{"uri"`, 1)))
	require.NoError(t, err)
	require.Nil(t, e.Webhook, "a webhook without a url is none")
	require.NotContains(t, string(md), "turnstile.")
}

package api

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/turnstile-run/turnstile/pkg/wire"
)

// TestCheckWebhook: the webhook's shape is checked before anything is produced, and the reserved
// metadata key cannot be set by a client.
func TestCheckWebhook(t *testing.T) {
	for _, tc := range []struct {
		name      string
		body      string
		allowHTTP bool
		bad       string
	}{
		{name: "None", body: `{"input":{"text":"hi"}}`},
		{name: "HTTPS", body: `{"input":{"text":"hi"},"webhook":{"url":"https://example.com/h","token":"t"}}`},
		{name: "HTTPAllowed", body: `{"input":{"text":"hi"},"webhook":{"url":"http://127.0.0.1:9/h"}}`, allowHTTP: true},
		{name: "HTTP", body: `{"input":{"text":"hi"},"webhook":{"url":"http://example.com/h"}}`, bad: "https"},
		{name: "Relative", body: `{"input":{"text":"hi"},"webhook":{"url":"/h"}}`, bad: "absolute"},
		{name: "NoURL", body: `{"input":{"text":"hi"},"webhook":{}}`, bad: "absolute"},
		{name: "UserInfo", body: `{"input":{"text":"hi"},"webhook":{"url":"https://u:p@example.com/h"}}`, bad: "user info"},
		{name: "TokenControl", body: `{"input":{"text":"hi"},"webhook":{"url":"https://example.com/h","token":"a\nb"}}`, bad: "printable"},
		{name: "TokenLong", body: `{"input":{"text":"hi"},"webhook":{"url":"https://example.com/h","token":"` + strings.Repeat("x", WebhookTokenMaxLen+1) + `"}}`, bad: "at most"},
		{name: "Reserved", body: `{"input":{"text":"hi"},"metadata":{"turnstile.webhook":{"url":"https://example.com"}}}`, bad: "reserved"},
		{name: "Unknown", body: `{"input":{"text":"hi"},"webhook":{"url":"https://example.com/h","secret":"x"}}`, bad: "unknown field"},
		{name: "PushConfigs", body: `{"input":{"text":"hi"},"push_configs":[{"id":"a","url":"https://example.com/h","token":"t","authentication":{"schemes":["Bearer"],"credentials":"c"}},{"id":"b","url":"https://example.com/b"}]}`},
		{name: "PushReserved", body: `{"input":{"text":"hi"},"metadata":{"turnstile.push_configs":[]}}`, bad: "reserved"},
		{name: "PushNoID", body: `{"input":{"text":"hi"},"push_configs":[{"url":"https://example.com/h"}]}`, bad: "push_configs[0].id"},
		{name: "PushSameID", body: `{"input":{"text":"hi"},"push_configs":[{"id":"a","url":"https://example.com/h"},{"id":"a","url":"https://example.com/b"}]}`, bad: "not unique"},
		{name: "PushHTTP", body: `{"input":{"text":"hi"},"push_configs":[{"id":"a","url":"http://example.com/h"}]}`, bad: "push_configs[0].url must be an https URL"},
		{name: "PushIDSlash", body: `{"input":{"text":"hi"},"push_configs":[{"id":"a/b","url":"https://example.com/h"}]}`, bad: "must not contain"},
		{name: "PushCredentialsNoScheme", body: `{"input":{"text":"hi"},"push_configs":[{"id":"a","url":"https://example.com/h","authentication":{"schemes":["Digest"],"credentials":"c"}}]}`, bad: "Bearer or Basic"},
		{name: "PushTooMany", body: `{"input":{"text":"hi"},"push_configs":[` + strings.TrimSuffix(strings.Repeat(`{"id":"x","url":"https://example.com/h"},`, PushConfigsMax+1), ",") + `]}`, bad: "at most"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, p := parseTurn([]byte(tc.body))
			if p == nil {
				p = checkWebhook(req, tc.allowHTTP)
			}
			if tc.bad == "" {
				require.Nil(t, p)
				if req.Webhook != nil {
					require.Equal(t, req.Webhook.URL, envelopeWebhook(req).URL)
				} else {
					require.Nil(t, envelopeWebhook(req))
				}
				cs := envelopePushConfigs(req.PushConfigs)
				require.Len(t, cs, len(req.PushConfigs))
				if len(req.PushConfigs) > 0 {
					require.Equal(t, "c", cs[0].AuthCredentials, "the credentials travel to the statement that stores them")
					require.Equal(t, []string{"Bearer"}, cs[0].AuthSchemes)
				}
				return
			}
			require.NotNil(t, p)
			require.Contains(t, p.Detail, tc.bad)
		})
	}
}

// TestNotificationsAreEnvelopeFields: a turn's webhook and push configs travel through Kafka as
// the envelope's own fields, and neither the produced record's metadata nor the stored turn's
// holds a reserved turnstile.* key; the queued row's statement stores the webhook in the turn's
// columns and the configs with its task.
func TestNotificationsAreEnvelopeFields(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	ctx := context.Background()
	a := accepted(t, postTurn(t, b.srv.URL, "hooked", `{"input":{"text":"hi"},"metadata":{"k":"v"},
		"webhook":{"url":"https://h.example/w","token":"tok"},
		"push_configs":[{"id":"a","url":"https://a.example/h","authentication":{"schemes":["Bearer"],"credentials":"c"}}]}`, nil))

	recs := b.turnRecords(t, 1)
	require.Len(t, recs, 1)
	var value struct {
		Metadata    map[string]json.RawMessage `json:"metadata"`
		Webhook     json.RawMessage            `json:"webhook"`
		PushConfigs json.RawMessage            `json:"push_configs"`
	}
	require.NoError(t, json.Unmarshal(recs[0].Value, &value))
	for k := range value.Metadata {
		require.False(t, strings.HasPrefix(k, "turnstile."), "the record's metadata carries %q", k)
	}
	require.Equal(t, map[string]json.RawMessage{"k": json.RawMessage(`"v"`)}, value.Metadata)
	require.JSONEq(t, `{"url":"https://h.example/w","token":"tok"}`, string(value.Webhook))
	require.JSONEq(t, `[{"id":"a","url":"https://a.example/h","auth_schemes":["Bearer"],"auth_credentials":"c","a2a_version":"0.3"}]`, string(value.PushConfigs))

	b.recorder.Flush(ctx)
	var url, token, md string
	require.NoError(t, b.env.Pool.QueryRow(ctx, `SELECT webhook_url, webhook_token, metadata::text FROM turns WHERE turn_id = $1`,
		a.TurnID).Scan(&url, &token, &md))
	require.Equal(t, []string{"https://h.example/w", "tok"}, []string{url, token})
	require.JSONEq(t, `{"k":"v"}`, md)
	var header string
	var schemes []string
	require.NoError(t, b.env.Pool.QueryRow(ctx, `SELECT url, auth_schemes, auth_credentials FROM task_push_configs
		WHERE task_id = $1 AND config_id = 'a' AND tenant = $2`, a.TurnID, wire.DefaultTenant).Scan(&url, &schemes, &header))
	require.Equal(t, "https://a.example/h", url)
	require.Equal(t, []string{"Bearer"}, schemes)
	require.Equal(t, "c", header)
}

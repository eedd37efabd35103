package api

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
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
				md := withWebhook(req)
				if req.Webhook != nil {
					require.Equal(t, req.Webhook.URL, md[WebhookKey].(map[string]any)["url"])
				}
				if len(req.PushConfigs) > 0 {
					cs := md[PushConfigsKey].([]map[string]any)
					require.Len(t, cs, len(req.PushConfigs))
					require.Equal(t, "c", cs[0]["auth_credentials"], "the trigger of migration 00150 reads these names")
					require.Equal(t, []string{"Bearer"}, cs[0]["auth_schemes"])
				}
				return
			}
			require.NotNil(t, p)
			require.Contains(t, p.Detail, tc.bad)
		})
	}
}

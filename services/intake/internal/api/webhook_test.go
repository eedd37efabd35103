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
				return
			}
			require.NotNil(t, p)
			require.Contains(t, p.Detail, tc.bad)
		})
	}
}

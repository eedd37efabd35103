package api

import (
	"fmt"
	"net/url"
	"strings"
	"unicode"

	"github.com/turnstile-run/turnstile/pkg/httpx"
)

// WebhookKey is the metadata key a turn's webhook travels under from intake through Kafka to the
// claim, where a trigger moves it into the turn's own columns (migration 00140) and out of the
// metadata. Clients cannot set it themselves.
const WebhookKey = "turnstile.webhook"

// Webhook bounds.
const (
	WebhookURLMaxLen   = 2048
	WebhookTokenMaxLen = 512
)

// webhookRequest is the optional webhook of POST /v1/sessions/{session_id}/turns: every status the
// turn takes is POSTed to URL by the notifier role, with Token in X-A2A-Notification-Token.
type webhookRequest struct {
	URL   string `json:"url"`
	Token string `json:"token,omitempty"`
}

// checkWebhook validates the webhook's shape: an absolute https URL (http when allowHTTP) with a
// host and no user info, and a printable token. Whether its address may be reached is the
// notifier's to check, when it connects.
func checkWebhook(req postTurnRequest, allowHTTP bool) *httpx.Problem {
	if _, ok := req.Metadata[WebhookKey]; ok {
		return problem(httpx.ProblemValidation, fmt.Sprintf("metadata key %q is reserved; use webhook", WebhookKey))
	}
	wh := req.Webhook
	if wh == nil {
		return nil
	}
	u, err := url.Parse(wh.URL)
	switch {
	case len(wh.URL) > WebhookURLMaxLen:
		return problem(httpx.ProblemValidation, fmt.Sprintf("webhook.url must be at most %d characters", WebhookURLMaxLen))
	case err != nil || !u.IsAbs() || u.Hostname() == "":
		return problem(httpx.ProblemValidation, "webhook.url must be an absolute URL")
	case u.Scheme != "https" && (u.Scheme != "http" || !allowHTTP):
		return problem(httpx.ProblemValidation, "webhook.url must be an https URL")
	case u.User != nil:
		return problem(httpx.ProblemValidation, "webhook.url must not hold user info")
	case len(wh.Token) > WebhookTokenMaxLen:
		return problem(httpx.ProblemValidation, fmt.Sprintf("webhook.token must be at most %d characters", WebhookTokenMaxLen))
	case strings.IndexFunc(wh.Token, func(r rune) bool { return r > unicode.MaxASCII || !unicode.IsPrint(r) }) >= 0:
		return problem(httpx.ProblemValidation, "webhook.token must be printable ASCII")
	}
	return nil
}

// withWebhook returns the metadata the envelope carries: the client's, plus the webhook under
// WebhookKey.
func withWebhook(req postTurnRequest) map[string]any {
	if req.Webhook == nil {
		return req.Metadata
	}
	md := make(map[string]any, len(req.Metadata)+1)
	for k, v := range req.Metadata {
		md[k] = v
	}
	wh := map[string]any{"url": req.Webhook.URL}
	if req.Webhook.Token != "" {
		wh["token"] = req.Webhook.Token
	}
	md[WebhookKey] = wh
	return md
}

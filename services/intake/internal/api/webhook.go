package api

import (
	"fmt"
	"net/url"
	"strings"
	"unicode"

	"github.com/turnstile-run/turnstile/pkg/httpx"
	"github.com/turnstile-run/turnstile/pkg/wire"
)

// reservedKeys are the metadata keys a client may not send: a turn's webhook and push configs
// travelled under them before the envelope had fields for them, and a worker still reads them
// from a record as if they were those fields (wire.DecodeEnvelope), so a client's own would be a
// webhook or config that skipped the checks here.
var reservedKeys = []string{wire.LegacyWebhookKey, wire.LegacyPushConfigsKey}

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

// checkWebhook validates the webhook's shape (checkHookURL, checkHookToken) and refuses the
// reserved metadata keys. Whether its address may be reached is the notifier's to check, when it
// connects.
func checkWebhook(req postTurnRequest, allowHTTP bool) *httpx.Problem {
	for _, key := range reservedKeys {
		if _, ok := req.Metadata[key]; ok {
			return problem(httpx.ProblemValidation, fmt.Sprintf("metadata key %q is reserved; use webhook or push_configs", key))
		}
	}
	if p := checkPushConfigs(req.PushConfigs, allowHTTP); p != nil {
		return p
	}
	wh := req.Webhook
	if wh == nil {
		return nil
	}
	if p := checkHookURL("webhook.url", wh.URL, allowHTTP); p != nil {
		return p
	}
	return checkHookToken("webhook.token", wh.Token)
}

// checkHookURL validates a webhook URL: an absolute https URL (http when allowHTTP) with a host
// and no user info, at most WebhookURLMaxLen long.
func checkHookURL(field, raw string, allowHTTP bool) *httpx.Problem {
	u, err := url.Parse(raw)
	switch {
	case len(raw) > WebhookURLMaxLen:
		return problem(httpx.ProblemValidation, fmt.Sprintf("%s must be at most %d characters", field, WebhookURLMaxLen))
	case err != nil || !u.IsAbs() || u.Hostname() == "":
		return problem(httpx.ProblemValidation, field+" must be an absolute URL")
	case u.Scheme != "https" && (u.Scheme != "http" || !allowHTTP):
		return problem(httpx.ProblemValidation, field+" must be an https URL")
	case u.User != nil:
		return problem(httpx.ProblemValidation, field+" must not hold user info")
	}
	return nil
}

// checkHookToken validates a token (or credentials) sent in a header: printable ASCII, at most
// WebhookTokenMaxLen long.
func checkHookToken(field, tok string) *httpx.Problem {
	switch {
	case len(tok) > WebhookTokenMaxLen:
		return problem(httpx.ProblemValidation, fmt.Sprintf("%s must be at most %d characters", field, WebhookTokenMaxLen))
	case strings.IndexFunc(tok, func(r rune) bool { return r > unicode.MaxASCII || !unicode.IsPrint(r) }) >= 0:
		return problem(httpx.ProblemValidation, field+" must be printable ASCII")
	}
	return nil
}

// envelopeWebhook is the request's webhook as the envelope carries it, or nil.
func envelopeWebhook(req postTurnRequest) *wire.Webhook {
	if req.Webhook == nil {
		return nil
	}
	return &wire.Webhook{URL: req.Webhook.URL, Token: req.Webhook.Token}
}

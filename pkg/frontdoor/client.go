package frontdoor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/propagation"

	"github.com/turnstile-run/turnstile/pkg/admission"
	"github.com/turnstile-run/turnstile/pkg/config"
	"github.com/turnstile-run/turnstile/pkg/telemetry"
	"github.com/turnstile-run/turnstile/pkg/turnstore"
	"github.com/turnstile-run/turnstile/pkg/wire"
)

// Defaults.
const (
	// TimeoutDefault bounds every call but a stream.
	TimeoutDefault = 10 * time.Second
	// maxAnswer bounds a non-stream answer read from the native API.
	maxAnswer = 4 << 20
)

// Config says where the native API is.
type Config struct {
	// IntakeURL is the base URL of intake's native API, e.g. http://127.0.0.1:8080.
	IntakeURL string
	// GatewayURL is the base URL of the gateway's native API.
	GatewayURL string
	// HTTPClient makes the calls. Defaults to a client with its own pooled transport and no overall
	// timeout (streams are long; every other call is bounded by Timeout).
	HTTPClient *http.Client
	// Timeout bounds every call but a stream. Defaults to TimeoutDefault.
	Timeout time.Duration
	// Admission is the process's stream budget (pkg/app's Deps.Admission): every stream OpenStream
	// opens holds a slot of it, as Door's, until Close; a refusal is OpenStream's *Problem (503
	// over-capacity, 429 tenant-stream-share). Nil admits every stream (tests of a door alone).
	Admission *admission.Budget
	// Door names the front door for the budget's metrics (admission.DoorA2A, …).
	Door string
	// Tenants says stream tokens name the tenant (TURNSTILE_AUTH=on): a stream counts against its
	// tenant's share. Without it no tenant share applies, as at the gateway with auth off.
	Tenants bool
}

// FromConfig is the Config a role builds from the process's settings: TURNSTILE_INTAKE_URL and
// TURNSTILE_GATEWAY_URL, each defaulting to local, the process's own HTTP listener, which is
// right when the front door runs in one process with intake and the gateway.
func FromConfig(cfg config.Config, local string) Config {
	c := Config{IntakeURL: cfg.FrontDoor.IntakeURL, GatewayURL: cfg.FrontDoor.GatewayURL}
	if c.IntakeURL == "" {
		c.IntakeURL = local
	}
	if c.GatewayURL == "" {
		c.GatewayURL = local
	}
	return c
}

// Client calls the native API. It is safe for concurrent use.
type Client struct {
	intake, gateway string
	http            *http.Client
	timeout         time.Duration
	admission       *admission.Budget
	door            string
	tenants         bool
}

// New returns a client for cfg.
func New(cfg Config) *Client {
	c := &Client{
		intake:    strings.TrimRight(cfg.IntakeURL, "/"),
		gateway:   strings.TrimRight(cfg.GatewayURL, "/"),
		http:      cfg.HTTPClient,
		timeout:   cfg.Timeout,
		admission: cfg.Admission, door: cfg.Door, tenants: cfg.Tenants,
	}
	if c.http == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		// Front doors call one or two hosts, many times at once.
		tr.MaxIdleConnsPerHost = 256
		c.http = &http.Client{Transport: tr}
	}
	if c.timeout <= 0 {
		c.timeout = TimeoutDefault
	}
	return c
}

// CloseIdleConnections closes the client's idle connections (at a role's stop).
func (c *Client) CloseIdleConnections() { c.http.CloseIdleConnections() }

// Credential is the Authorization header value the caller sent ("Bearer <api key>"), forwarded as
// is; empty when auth is off.
type Credential string

// CredentialOf reads a request's credential.
func CredentialOf(r *http.Request) Credential { return Credential(r.Header.Get("Authorization")) }

// TurnRequest is the body of POST /v1/sessions/{session_id}/turns.
type TurnRequest struct {
	Input     wire.Input     `json:"input"`
	Metadata  map[string]any `json:"metadata,omitempty"`
	Multitask string         `json:"multitask,omitempty"`
	TurnID    string         `json:"turn_id,omitempty"`
	// PushConfigs are push-notification configs of the turn's task, stored with it from the
	// turn's first write on.
	PushConfigs []PushConfig `json:"push_configs,omitempty"`
	// Agent names the catalog's agent the turn goes to (pkg/agents); empty for the default agent.
	// Intake refuses an agent it does not know (404 agent-not-found) before anything reaches Kafka.
	Agent string `json:"agent,omitempty"`
	// Priority is the turn's priority (wire.PriorityMin to PriorityMax, higher first); nil is the
	// default. PostTurn takes it from Metadata["priority"] when it is nil: A2A, LangGraph and the AI
	// SDK have no priority field of their own, so their clients set it in the message's, run's or
	// chat's metadata. Intake checks it (a bad one is refused, 400, before anything reaches Kafka).
	Priority any `json:"priority,omitempty"`
}

// PushAuthentication is a push config's authentication; Credentials are write-only.
type PushAuthentication struct {
	Schemes     []string `json:"schemes"`
	Credentials string   `json:"credentials,omitempty"`
}

// PushConfig is a push-notification config of a task (the task's first turn), as intake stores
// and shows it.
type PushConfig struct {
	ID             string              `json:"id"`
	URL            string              `json:"url"`
	Token          string              `json:"token,omitempty"`
	Authentication *PushAuthentication `json:"authentication,omitempty"`
	// A2AVersion is the A2A protocol version the config's notifications are rendered in: "1.0",
	// or "" for 0.3.
	A2AVersion string `json:"a2a_version,omitempty"`
}

// PostOptions are the headers of a turn's POST.
type PostOptions struct {
	// IdempotencyKey makes a retried post return the same turn (the same body is required).
	IdempotencyKey string
	// Deadline is the turn's absolute deadline; zero leaves intake's default.
	Deadline time.Time
}

// Accepted is intake's 202 answer to a turn.
type Accepted struct {
	TurnID      string `json:"turn_id"`
	SessionID   string `json:"session_id"`
	Status      string `json:"status"`
	StreamURL   string `json:"stream_url"`
	StreamToken string `json:"stream_token"`
}

// Turn is a turn as the native API shows it: TurnID is the ID as clients know it (prefixed by the
// region, pkg/region).
type Turn = turnstore.Shown

// TurnPage is a page of a session's turns, newest first.
type TurnPage struct {
	Turns      []Turn `json:"turns"`
	NextCursor string `json:"next_cursor,omitempty"`
}

// CancelAccepted is intake's answer to a cancel.
type CancelAccepted struct {
	TurnID          string `json:"turn_id"`
	Status          string `json:"status"`
	CancelRequested bool   `json:"cancel_requested"`
}

// StreamGrant is a fresh stream token for a session.
type StreamGrant struct {
	SessionID   string `json:"session_id"`
	StreamURL   string `json:"stream_url"`
	StreamToken string `json:"stream_token"`
}

// PostTurn accepts a turn for a session of the credential's tenant.
func (c *Client) PostTurn(ctx context.Context, cred Credential, sessionID string, req TurnRequest, opt PostOptions) (Accepted, error) {
	if p, ok := req.Metadata["priority"]; ok && req.Priority == nil {
		req.Priority = p
	}
	body, err := json.Marshal(req)
	if err != nil {
		return Accepted{}, fmt.Errorf("encode turn: %w", err)
	}
	h := http.Header{"Content-Type": {"application/json"}}
	if opt.IdempotencyKey != "" {
		h.Set("Idempotency-Key", opt.IdempotencyKey)
	}
	if !opt.Deadline.IsZero() {
		h.Set(DeadlineHeader, strconv.FormatInt(opt.Deadline.UnixMilli(), 10))
	}
	var a Accepted
	err = c.call(ctx, cred, http.MethodPost, c.intake+"/v1/sessions/"+url.PathEscape(sessionID)+"/turns", h, body, &a)
	return a, err
}

// GetTurn reads a turn of the credential's tenant.
func (c *Client) GetTurn(ctx context.Context, cred Credential, turnID string) (Turn, error) {
	var t Turn
	err := c.call(ctx, cred, http.MethodGet, c.intake+"/v1/turns/"+url.PathEscape(turnID), nil, nil, &t)
	return t, err
}

// ListTurns reads a page of a session's turns, newest first; limit 0 is intake's default page and
// cursor is a NextCursor of an earlier page.
func (c *Client) ListTurns(ctx context.Context, cred Credential, sessionID string, limit int, cursor string) (TurnPage, error) {
	q := url.Values{}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	u := c.intake + "/v1/sessions/" + url.PathEscape(sessionID) + "/turns"
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	var p TurnPage
	err := c.call(ctx, cred, http.MethodGet, u, nil, nil, &p)
	return p, err
}

// CancelTurn requests a turn's cancellation; on a finished turn it reports the final status.
func (c *Client) CancelTurn(ctx context.Context, cred Credential, turnID string) (CancelAccepted, error) {
	var a CancelAccepted
	err := c.call(ctx, cred, http.MethodPost, c.intake+"/v1/turns/"+url.PathEscape(turnID)+"/cancel", nil, nil, &a)
	return a, err
}

// StreamToken asks intake for a fresh stream token for a session of the credential's tenant, for
// following a session without posting a turn.
func (c *Client) StreamToken(ctx context.Context, cred Credential, sessionID string) (StreamGrant, error) {
	var g StreamGrant
	err := c.call(ctx, cred, http.MethodPost, c.intake+"/v1/sessions/"+url.PathEscape(sessionID)+"/stream-token", nil, nil, &g)
	return g, err
}

// Whoami authenticates the credential: the tenant it names, or the native 401 (or the 429/503 of
// a key that cannot be checked now) as a *Problem.
func (c *Client) Whoami(ctx context.Context, cred Credential) (string, error) {
	var who struct {
		Tenant string `json:"tenant"`
	}
	err := c.call(ctx, cred, http.MethodGet, c.intake+"/v1/whoami", nil, nil, &who)
	return who.Tenant, err
}

// pushConfigsURL is the push configs route of the task whose first turn is turnID.
func (c *Client) pushConfigsURL(turnID string) string {
	return c.intake + "/v1/turns/" + url.PathEscape(turnID) + "/push-configs"
}

// PutPushConfig creates or replaces a push config of the task whose first turn is turnID.
func (c *Client) PutPushConfig(ctx context.Context, cred Credential, turnID string, pc PushConfig) (PushConfig, error) {
	body, err := json.Marshal(pc)
	if err != nil {
		return PushConfig{}, fmt.Errorf("encode push config: %w", err)
	}
	var out PushConfig
	err = c.call(ctx, cred, http.MethodPut, c.pushConfigsURL(turnID)+"/"+url.PathEscape(pc.ID),
		http.Header{"Content-Type": {"application/json"}}, body, &out)
	return out, err
}

// GetPushConfig reads one push config of the task whose first turn is turnID.
func (c *Client) GetPushConfig(ctx context.Context, cred Credential, turnID, id string) (PushConfig, error) {
	var out PushConfig
	err := c.call(ctx, cred, http.MethodGet, c.pushConfigsURL(turnID)+"/"+url.PathEscape(id), nil, nil, &out)
	return out, err
}

// ListPushConfigs reads the push configs of the task whose first turn is turnID, oldest first.
func (c *Client) ListPushConfigs(ctx context.Context, cred Credential, turnID string) ([]PushConfig, error) {
	var out struct {
		PushConfigs []PushConfig `json:"push_configs"`
	}
	err := c.call(ctx, cred, http.MethodGet, c.pushConfigsURL(turnID), nil, nil, &out)
	return out.PushConfigs, err
}

// DeletePushConfig deletes one push config of the task whose first turn is turnID.
func (c *Client) DeletePushConfig(ctx context.Context, cred Credential, turnID, id string) error {
	return c.call(ctx, cred, http.MethodDelete, c.pushConfigsURL(turnID)+"/"+url.PathEscape(id), nil, nil, nil)
}

// call makes one bounded request and decodes a 2xx answer into out; any other answer is a
// *Problem.
func (c *Client) call(ctx context.Context, cred Credential, method, u string, h http.Header, body []byte, out any) error {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return fmt.Errorf("build %s %s: %w", method, u, err)
	}
	for k, v := range h {
		req.Header[k] = v
	}
	c.decorate(ctx, req, cred)
	resp, err := c.http.Do(req)
	if err != nil {
		return unavailable(method+" "+req.URL.Path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return unavailable("read "+req.URL.Path, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return problemFrom(resp, raw)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("decode %s %s: %w", method, req.URL.Path, err)
	}
	return nil
}

// decorate adds the credential and the caller's trace context.
func (c *Client) decorate(ctx context.Context, req *http.Request, cred Credential) {
	if cred != "" {
		req.Header.Set("Authorization", string(cred))
	}
	telemetry.Propagator.Inject(ctx, propagation.HeaderCarrier(req.Header))
}

// IsUnavailable reports whether err is a call the native API did not answer, or answered 503.
func IsUnavailable(err error) bool {
	var p *Problem
	if errors.As(err, &p) {
		return p.Status == http.StatusServiceUnavailable
	}
	var ne net.Error
	return errors.As(err, &ne)
}

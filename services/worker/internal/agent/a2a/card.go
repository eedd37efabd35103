package a2a

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	sdk "github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"

	"github.com/turnstile-run/turnstile/services/worker/internal/agent/pool"
)

// CardPrefix marks an endpoint entry that is an Agent Card URL: "card+http://replica-0:8080" (the
// well-known path is added when the URL has none) or the card's full URL. The endpoint is the
// card's JSON-RPC URL, fetched again every resolve interval, so a replica that moves its endpoint
// is followed.
const CardPrefix = "card+"

// ProbePath is the path the pool probes on every A2A endpoint by default: the Agent Card, which
// every A2A server publishes.
const ProbePath = a2asrv.WellKnownAgentCardPath

// CardSource resolves an Agent Card URL to the JSON-RPC endpoint the card names.
type CardSource struct {
	URL    string
	Client *http.Client
}

// ParseCard reads the rest of a "card+" entry.
func ParseCard(rest string) (pool.Source, error) {
	u, err := url.Parse(rest)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("agent card %q: want an http(s) URL", rest)
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = a2asrv.WellKnownAgentCardPath
	}
	return CardSource{URL: u.String()}, nil
}

// Sources reads endpoint entries for the A2A adapter: pool.Parse's forms and "card+" entries.
func Sources(entries []string) ([]pool.Source, error) {
	return pool.Parse(entries, map[string]func(string) (pool.Source, error){CardPrefix: ParseCard})
}

// cardJSON is what the agent reads of an Agent Card of either version: 0.3's url,
// preferredTransport and additionalInterfaces, and 1.0's supportedInterfaces.
type cardJSON struct {
	URL                  string `json:"url"`
	PreferredTransport   string `json:"preferredTransport"`
	AdditionalInterfaces []struct {
		URL       string `json:"url"`
		Transport string `json:"transport"`
	} `json:"additionalInterfaces"`
	SupportedInterfaces []struct {
		URL             string `json:"url"`
		ProtocolBinding string `json:"protocolBinding"`
		ProtocolVersion string `json:"protocolVersion"`
	} `json:"supportedInterfaces"`
}

// v1JSONRPC is the URL of the card's JSON-RPC interface of protocol 1.0 (any 1.0.x), or "".
func (c *cardJSON) v1JSONRPC() (string, bool) {
	for _, i := range c.SupportedInterfaces {
		if strings.EqualFold(i.ProtocolBinding, string(sdk.TransportProtocolJSONRPC)) && majorMinor(i.ProtocolVersion) == Protocol10 {
			return i.URL, true
		}
	}
	return "", false
}

// majorMinor is a protocol version's Major.Minor ("1.0" of "1.0.1").
func majorMinor(v string) string {
	parts := strings.SplitN(strings.TrimSpace(v), ".", 3)
	if len(parts) < 2 {
		return v
	}
	return parts[0] + "." + parts[1]
}

// readCard fetches and decodes the card at cardURL with hc (whose transport turns error statuses
// into upstream.StatusError).
func readCard(ctx context.Context, hc *http.Client, cardURL string) (*cardJSON, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, cardURL, http.NoBody)
	if err != nil {
		return nil, fmt.Errorf("agent card %s: %w", cardURL, err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("agent card %s: %w", cardURL, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("agent card %s: answered %d: %w", cardURL, resp.StatusCode, errNotACard)
	}
	var card cardJSON
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&card); err != nil {
		return nil, fmt.Errorf("agent card %s: %w: %w", cardURL, err, errNotACard)
	}
	return &card, nil
}

// errNotACard is an answer that is no Agent Card: a status other than 200, or a body that does
// not decode as one.
var errNotACard = errors.New("not an agent card")

// CardURL is where the Agent Card of the agent at endpoint is read: the well-known path at the
// endpoint's origin.
func CardURL(endpoint string) (string, error) {
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("endpoint %q is not an absolute URL", endpoint)
	}
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: a2asrv.WellKnownAgentCardPath}).String(), nil
}

// Resolve fetches the card and returns its JSON-RPC URL: the 1.0 interface's when the card
// offers one (supportedInterfaces), else the 0.3 card's.
func (s CardSource) Resolve(ctx context.Context) ([]string, error) {
	hc := s.Client
	if hc == nil {
		hc = http.DefaultClient
	}
	card, err := readCard(ctx, hc, s.URL)
	if err != nil {
		return nil, err
	}
	if u, ok := card.v1JSONRPC(); ok && u != "" {
		return []string{u}, nil
	}
	if card.URL != "" && (card.PreferredTransport == "" || strings.EqualFold(card.PreferredTransport, string(sdk.TransportProtocolJSONRPC))) {
		return []string{card.URL}, nil
	}
	for _, i := range card.AdditionalInterfaces {
		if strings.EqualFold(i.Transport, string(sdk.TransportProtocolJSONRPC)) && i.URL != "" {
			return []string{i.URL}, nil
		}
	}
	return nil, fmt.Errorf("agent card %s names no JSON-RPC endpoint", s.URL)
}

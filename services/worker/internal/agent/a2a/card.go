package a2a

import (
	"context"
	"encoding/json"
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

// Resolve fetches the card and returns its JSON-RPC URL.
func (s CardSource) Resolve(ctx context.Context) ([]string, error) {
	hc := s.Client
	if hc == nil {
		hc = http.DefaultClient
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL, http.NoBody)
	if err != nil {
		return nil, fmt.Errorf("agent card %s: %w", s.URL, err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("agent card %s: %w", s.URL, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("agent card %s: answered %d", s.URL, resp.StatusCode)
	}
	var card sdk.AgentCard
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&card); err != nil {
		return nil, fmt.Errorf("agent card %s: %w", s.URL, err)
	}
	if card.URL != "" && (card.PreferredTransport == "" || strings.EqualFold(string(card.PreferredTransport), string(sdk.TransportProtocolJSONRPC))) {
		return []string{card.URL}, nil
	}
	for _, i := range card.AdditionalInterfaces {
		if strings.EqualFold(string(i.Transport), string(sdk.TransportProtocolJSONRPC)) && i.URL != "" {
			return []string{i.URL}, nil
		}
	}
	return nil, fmt.Errorf("agent card %s names no JSON-RPC endpoint", s.URL)
}

package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/apikey"
	"github.com/turnstile-run/turnstile/pkg/app"
	"github.com/turnstile-run/turnstile/pkg/config"
	"github.com/turnstile-run/turnstile/pkg/testenv"
	"github.com/turnstile-run/turnstile/services/gateway"
)

// capsStack is one process of every front door with TURNSTILE_AUTH=on and no worker, so every
// turn stays queued and every stream opened on it stays open.
type capsStack struct {
	stack *app.Stack
	base  string
	gw    *gateway.Gateway
	keys  map[string]string // tenant → API key
}

func startCapsStack(t *testing.T, tune func(*config.Config)) *capsStack {
	t.Helper()
	env := testenv.New(t, testenv.Options{Partitions: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	keys := map[string]string{}
	for _, tenant := range []string{"acme", "globex"} {
		_, key, err := apikey.Create(ctx, env.Pool, tenant)
		require.NoError(t, err)
		keys[tenant] = key
	}
	cfg := authConfig(env, "intake,gateway,a2a,aisdk,langgraph")
	// The AI SDK sends its stream's status line with its first write: a keep-alive, as no turn runs.
	cfg.KeepAlive = 200 * time.Millisecond
	tune(&cfg)
	stack := startStackCfg(t, env, cfg)
	return &capsStack{stack: stack, base: "http://" + stack.Addr(), gw: stack.Component("gateway").(*gateway.Gateway), keys: keys}
}

// capsAnswer is a front door's answer to a request to open a stream; an admitted stream's body
// stays open until the test ends.
type capsAnswer struct {
	status     int
	retryAfter string
	body       string // a refusal's whole body
}

// do sends a request to open a stream and returns its answer once the status line arrived.
func (s *capsStack) do(t *testing.T, method, path string, hdr map[string]string, body string) capsAnswer {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, method, s.base+path, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatalf("%s %s: %v", method, path, err)
	}
	a := capsAnswer{status: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After")}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		a.body = string(b)
		resp.Body.Close()
		cancel()
		return a
	}
	t.Cleanup(func() { cancel(); resp.Body.Close() })
	return a
}

// aisdk opens a chat stream of a new chat.
func (s *capsStack) aisdk(t *testing.T, tenant string) capsAnswer {
	t.Helper()
	chat := "caps-" + testenv.RandomHex(5)
	return s.do(t, http.MethodPost, "/v1/chat", map[string]string{"Authorization": "Bearer " + s.keys[tenant]},
		fmt.Sprintf(`{"id":%q,"messages":[{"id":"m1","role":"user","parts":[{"type":"text","text":"hold on"}]}]}`, chat))
}

// a2a opens a message/stream of a new task.
func (s *capsStack) a2a(t *testing.T, tenant string) capsAnswer {
	t.Helper()
	return s.do(t, http.MethodPost, "/a2a", map[string]string{"Authorization": "Bearer " + s.keys[tenant]},
		fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"message/stream","params":{"message":{"messageId":%q,"role":"user","parts":[{"kind":"text","text":"hold on"}]}}}`, "m-"+testenv.RandomHex(5)))
}

// langgraph opens a run stream on a new thread.
func (s *capsStack) langgraph(t *testing.T, tenant string) capsAnswer {
	t.Helper()
	thread := "caps-" + testenv.RandomHex(5)
	hdr := map[string]string{"X-Api-Key": s.keys[tenant]}
	created := s.do(t, http.MethodPost, "/threads", hdr, fmt.Sprintf(`{"thread_id":%q}`, thread))
	require.Equal(t, http.StatusOK, created.status, created.body)
	return s.do(t, http.MethodPost, "/threads/"+thread+"/runs/stream", hdr, `{"assistant_id":"agent","input":{"messages":[{"type":"human","content":"hold on"}]}}`)
}

// gatewayStream opens the gateway's event stream of a new session with a stream token; a refused
// stream is answered inside a 200 and ended, and its body returned.
func (s *capsStack) gatewayStream(t *testing.T, tenant string) (admitted bool, body string) {
	t.Helper()
	session := "caps-" + testenv.RandomHex(5)
	req, err := http.NewRequest(http.MethodPost, s.base+"/v1/sessions/"+session+"/stream-token", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+s.keys[tenant])
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	var g struct {
		StreamToken string `json:"stream_token"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&g))
	resp.Body.Close()
	return s.gatewayStreamOf(t, session, g.StreamToken)
}

func (s *capsStack) gatewayStreamOf(t *testing.T, session, token string) (admitted bool, body string) {
	t.Helper()
	var mu sync.Mutex
	var result string
	opened := make(chan struct{})
	s.gw.SetHooks(nil)
	hooks := &gateway.Hooks{OnOpen: func(i gateway.OpenInfo) {
		mu.Lock()
		defer mu.Unlock()
		if i.SessionID == session && result == "" {
			result = i.Result
			close(opened)
		}
	}}
	s.gw.SetHooks(hooks)
	defer s.gw.SetHooks(nil)
	ctx, cancel := context.WithCancel(context.Background())
	stream, err := http.NewRequestWithContext(ctx, http.MethodGet, s.base+"/v1/sessions/"+session+"/events?access_token="+url.QueryEscape(token), nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(stream)
	if err != nil {
		cancel()
		t.Fatalf("open the gateway stream: %v", err)
	}
	require.Equal(t, http.StatusOK, resp.StatusCode, "the gateway answers a refusal inside a 200 too")
	select {
	case <-opened:
	case <-time.After(30 * time.Second):
		cancel()
		resp.Body.Close()
		t.Fatal("the gateway did not report the stream's open within 30s")
	}
	mu.Lock()
	r := result
	mu.Unlock()
	if r == "fresh" || r == "live" || r == "resumed" || r == "reset" {
		t.Cleanup(func() { cancel(); resp.Body.Close() })
		return true, ""
	}
	// A refusal ends its stream: read it to its end, bounded.
	done := make(chan []byte, 1)
	go func() { b, _ := io.ReadAll(resp.Body); done <- b }()
	select {
	case b := <-done:
		cancel()
		resp.Body.Close()
		return false, r + ": " + string(b)
	case <-time.After(30 * time.Second):
		cancel()
		resp.Body.Close()
		t.Fatalf("refused stream (%s) did not end within 30s", r)
		return false, ""
	}
}

// streamsOpen waits until the gateway serves n streams: each front door's stream is backed by one.
func (s *capsStack) streamsOpen(t *testing.T, n int) {
	t.Helper()
	testenv.WaitFor(t, 30*time.Second, fmt.Sprintf("%d streams open at the gateway", n), func() bool { return s.gw.Connections() == n })
}

// requireRefused checks a protocol door's refusal: the status, a Retry-After, and the body's
// problem type (a problem+json document) or JSON-RPC error (A2A).
func requireRefused(t *testing.T, a capsAnswer, status int, problem string, door string) {
	t.Helper()
	require.Equal(t, status, a.status, "%s: the stream beyond the cap is refused (body %q)", door, a.body)
	require.NotEmpty(t, a.retryAfter, "%s: the refusal says when to retry", door)
	var doc map[string]any
	require.NoError(t, json.Unmarshal([]byte(a.body), &doc), "%s: %s", door, a.body)
	if door == "a2a" {
		e, _ := doc["error"].(map[string]any)
		require.NotNil(t, e, "a JSON-RPC error: %s", a.body)
		require.InDelta(t, -32000, e["code"], 0, a.body)
		return
	}
	require.Equal(t, "https://turnstile.dev/problems/"+problem, doc["type"], a.body)
}

// TestCapsWithAuthGateway reproduces the hand re-check of the seen run at the gateway's own door:
// with TURNSTILE_AUTH=on and a cap of 20, one tenant's 30 token-authenticated streams on 5
// sessions get 20 admitted and 10 refused (over capacity, inside a 200 with a retry hint); with
// the default tenant share (80%) the tenant gets 16 and the other tenant still gets in.
func TestCapsWithAuthGateway(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name                string
		share, admitted     int
		refusal, otherShare string
	}{
		{"Cap", 100, 20, "over capacity", ""},
		{"TenantShare", 80, 16, "share", "globex"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := startCapsStack(t, func(cfg *config.Config) {
				cfg.Gateway.MaxConnections, cfg.Gateway.MaxTenantShare = 20, c.share
			})
			sessions := make([]string, 5)
			tokens := make([]string, 5)
			for i := range sessions {
				sessions[i] = "caps-" + testenv.RandomHex(5)
				req, err := http.NewRequest(http.MethodPost, s.base+"/v1/sessions/"+sessions[i]+"/stream-token", nil)
				require.NoError(t, err)
				req.Header.Set("Authorization", "Bearer "+s.keys["acme"])
				resp, err := http.DefaultClient.Do(req)
				require.NoError(t, err)
				var g struct {
					StreamToken string `json:"stream_token"`
				}
				require.NoError(t, json.NewDecoder(resp.Body).Decode(&g))
				resp.Body.Close()
				tokens[i] = g.StreamToken
			}
			admitted, refused := 0, 0
			for i := range 30 {
				ok, body := s.gatewayStreamOf(t, sessions[i%5], tokens[i%5])
				if ok {
					admitted++
					continue
				}
				refused++
				require.Contains(t, body, c.refusal)
				require.Regexp(t, `retry: \d+`, body)
			}
			require.Equal(t, [2]int{c.admitted, 30 - c.admitted}, [2]int{admitted, refused}, "admitted, refused")
			require.Equal(t, c.admitted, s.gw.Connections())
			if c.otherShare != "" {
				ok, body := s.gatewayStream(t, c.otherShare)
				require.True(t, ok, "another tenant's stream is admitted: %s", body)
			}
		})
	}
}

// TestCapsAcrossDoors reproduces the seen run's other half: one tenant's streams through the AI
// SDK and A2A doors count against the same cap and tenant share as the gateway's, in one process
// of every role. With a cap of 4, two AI SDK and two A2A streams fill it and the fifth is refused
// through every door: 503 over-capacity with Retry-After at the AI SDK and LangGraph doors, the
// JSON-RPC error with HTTP 503 at A2A, over capacity inside a 200 at the gateway.
func TestCapsAcrossDoors(t *testing.T) {
	t.Parallel()
	t.Run("Cap", func(t *testing.T) {
		t.Parallel()
		s := startCapsStack(t, func(cfg *config.Config) {
			cfg.Gateway.MaxConnections, cfg.Gateway.MaxTenantShare = 4, 100
		})
		for _, open := range []func(*testing.T, string) capsAnswer{s.aisdk, s.aisdk, s.a2a, s.a2a} {
			require.Equal(t, http.StatusOK, open(t, "acme").status)
		}
		s.streamsOpen(t, 4)

		requireRefused(t, s.aisdk(t, "acme"), http.StatusServiceUnavailable, "over-capacity", "aisdk")
		requireRefused(t, s.a2a(t, "acme"), http.StatusServiceUnavailable, "over-capacity", "a2a")
		requireRefused(t, s.langgraph(t, "globex"), http.StatusServiceUnavailable, "over-capacity", "langgraph")
		ok, body := s.gatewayStream(t, "globex")
		require.False(t, ok, "the gateway's fifth stream is refused")
		require.Contains(t, body, "over capacity")
		require.Equal(t, 4, s.gw.Connections(), "no refused stream holds a gateway stream")
	})
	t.Run("TenantShare", func(t *testing.T) {
		t.Parallel()
		s := startCapsStack(t, func(cfg *config.Config) {
			cfg.Gateway.MaxConnections, cfg.Gateway.MaxTenantShare = 10, 40 // four streams a tenant
		})
		first := s.aisdk(t, "acme")
		require.Equal(t, http.StatusOK, first.status)
		for _, open := range []func(*testing.T, string) capsAnswer{s.aisdk, s.a2a, s.a2a} {
			require.Equal(t, http.StatusOK, open(t, "acme").status)
		}
		s.streamsOpen(t, 4)

		requireRefused(t, s.aisdk(t, "acme"), http.StatusTooManyRequests, "tenant-stream-share", "aisdk")
		requireRefused(t, s.a2a(t, "acme"), http.StatusTooManyRequests, "tenant-stream-share", "a2a")
		requireRefused(t, s.langgraph(t, "acme"), http.StatusTooManyRequests, "tenant-stream-share", "langgraph")
		ok, body := s.gatewayStream(t, "acme")
		require.False(t, ok, "the tenant's gateway stream beyond its share is refused")
		require.Contains(t, body, "share")

		// Another tenant is not held back by the first one's streams.
		require.Equal(t, http.StatusOK, s.langgraph(t, "globex").status)
		require.Equal(t, http.StatusOK, s.a2a(t, "globex").status)
		s.streamsOpen(t, 6)
	})
}
